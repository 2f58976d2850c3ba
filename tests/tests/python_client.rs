//! The Python `kubernetes` client, every release on this machine (Debian's 22.6 and the newest
//! pip release, installed by scripts/deps.sh --test), against the real stack.

use crdplane_tests::Stack;

#[test]
fn python_kubernetes_client_custom_objects() {
    let pys = crdplane_tests::python_interpreters();
    assert!(
        !pys.is_empty(),
        "the Python kubernetes client is missing: run scripts/deps.sh --test"
    );
    let stack = Stack::start_with_redis().unwrap();
    for (i, (py, ver)) in pys.iter().enumerate() {
        crdplane_tests::run_python_checks(
            py,
            ver,
            "custom_objects.py",
            &format!("{}/clusters/python{i}", stack.gateway),
        );
    }
}
