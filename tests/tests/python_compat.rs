//! The Python `kubernetes` client, every release on this machine (tests/python/client_compat.py):
//! Debian's python3-kubernetes 22.6 for /usr/bin/python3 and the newest pip release for the
//! `python3` on PATH (both installed by scripts/deps.sh --test). 22.6 sends `watch=True`,
//! which upstream parses as true (runtime.Convert_Slice_string_To_bool); a dict given to
//! `patch_namespace` is a strategic merge patch.

use crdplane_tests::Stack;

/// (interpreter, its kubernetes client version) for each distinct interpreter with the client.
fn interpreters() -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = Vec::new();
    for py in ["/usr/bin/python3", "python3"] {
        let Ok(o) = std::process::Command::new(py)
            .args([
                "-c",
                "import sys, kubernetes; print(sys.executable, kubernetes.__version__)",
            ])
            .output()
        else {
            continue;
        };
        if !o.status.success() {
            continue;
        }
        let s = String::from_utf8_lossy(&o.stdout).trim().to_string();
        let Some((exe, ver)) = s.rsplit_once(' ') else {
            continue;
        };
        if !out.iter().any(|(e, _)| e == exe) {
            out.push((exe.to_string(), ver.to_string()));
        }
    }
    out
}

#[test]
fn python_clients_watch_and_patch_namespace() {
    let pys = interpreters();
    assert!(
        !pys.is_empty(),
        "no Python interpreter has the kubernetes client: run scripts/deps.sh --test"
    );
    if !pys.iter().any(|(_, v)| v.starts_with("22.")) {
        eprintln!(
            "note: Debian's python3-kubernetes 22.6 is not installed (scripts/deps.sh --test)"
        );
    }
    let stack = Stack::start_with_redis().unwrap();
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/python/client_compat.py");
    for (i, (py, ver)) in pys.iter().enumerate() {
        let out = std::process::Command::new(py)
            .arg(script)
            .arg(format!("{}/clusters/pycompat{i}", stack.gateway))
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
        eprintln!("{py}: kubernetes {ver}: all checks passed");
    }
}
