//! The Python `kubernetes` client's watch helper (tests/python/watch_stream.py) against a
//! real stack whose storage keeps a short history (so a stale resourceVersion gets 410).

use std::process::Child;
use std::time::Duration;

struct Kill(Vec<Child>);

impl Drop for Kill {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
        }
        for c in &mut self.0 {
            let _ = c.wait();
        }
    }
}

#[test]
fn python_watch_stream_and_410_handling() {
    let have = std::process::Command::new("python3")
        .args(["-c", "import kubernetes"])
        .status()
        .is_ok_and(|s| s.success());
    assert!(
        have,
        "the Python kubernetes client is missing: run scripts/deps.sh --test"
    );
    let redis = crdplane_tests::RedisServer::start().unwrap();
    let url = redis.url();
    let mut kids = Kill(Vec::new());
    let spawn = |k: &mut Kill, name: &str, args: &[&str]| {
        crdplane_tests::spawn_service(&mut k.0, name, args).unwrap()
    };
    let storage = spawn(
        &mut kids,
        "crdplane-storage",
        &[
            "--listen",
            "127.0.0.1:0",
            "--redis-url",
            &url,
            "--history-len",
            "16",
        ],
    );
    let validation = spawn(
        &mut kids,
        "crdplane-validation",
        &["--listen", "127.0.0.1:0"],
    );
    let registry = spawn(
        &mut kids,
        "crdplane-registry",
        &[
            "--listen",
            "127.0.0.1:0",
            "--storage",
            &storage,
            "--validation",
            &validation,
        ],
    );
    let gateway = spawn(
        &mut kids,
        "crdplane-gateway",
        &[
            "--listen",
            "127.0.0.1:0",
            "--storage",
            &storage,
            "--validation",
            &validation,
            "--registry",
            &registry,
        ],
    );
    for _ in 0..500 {
        if matches!(
            crdplane_tests::http_get(&format!("{gateway}/readyz")),
            Ok((200, _))
        ) {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/python/watch_stream.py");
    let out = std::process::Command::new("python3")
        .arg(script)
        .arg(format!("{gateway}/clusters/pywatch"))
        .output()
        .unwrap();
    let (o, e) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(out.status.success(), "{o}{e}");
    assert!(o.contains("all checks passed"), "{o}{e}");
}
