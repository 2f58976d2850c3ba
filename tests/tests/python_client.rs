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
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/python/custom_objects.py");
    for (i, (py, ver)) in pys.iter().enumerate() {
        let out = std::process::Command::new(py)
            .arg(script)
            .arg(format!("{}/clusters/python{i}", stack.gateway))
            .output()
            .unwrap();
        let (o, e) = (
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
        );
        assert!(out.status.success(), "{py} (kubernetes {ver}):\n{o}{e}");
        assert!(
            o.contains("all checks passed"),
            "{py} (kubernetes {ver}):\n{o}{e}"
        );
    }
}
