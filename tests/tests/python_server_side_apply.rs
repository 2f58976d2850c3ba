//! Server-side apply through the Python `kubernetes` client's DynamicClient
//! (tests/python/server_side_apply.py), every release on this machine (Debian's 22.6 and the
//! newest pip release, installed by scripts/deps.sh --test), against the real stack: a CRD, a
//! custom resource and a ConfigMap applied, upstream's 409 Conflict as an ApiException, and
//! `force_conflicts`.

use crdplane_tests::Stack;

#[test]
fn python_dynamic_client_server_side_apply() {
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
            "server_side_apply.py",
            &format!("{}/clusters/pyssa{i}", stack.gateway),
        );
        eprintln!("{py}: kubernetes {ver}: all checks passed");
    }
}
