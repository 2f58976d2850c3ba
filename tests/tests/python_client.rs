//! The Python `kubernetes` client (installed by scripts/deps.sh --test) against the real stack.

use crdplane_tests::Stack;

#[test]
fn python_kubernetes_client_custom_objects() {
    let have = std::process::Command::new("python3")
        .args(["-c", "import kubernetes"])
        .status()
        .is_ok_and(|s| s.success());
    assert!(
        have,
        "the Python kubernetes client is missing: run scripts/deps.sh --test"
    );
    let stack = Stack::start_with_redis().unwrap();
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/python/custom_objects.py");
    let out = std::process::Command::new("python3")
        .arg(script)
        .arg(format!("{}/clusters/python", stack.gateway))
        .output()
        .unwrap();
    let (o, e) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(out.status.success(), "{o}{e}");
    assert!(o.contains("all checks passed"), "{o}{e}");
}
