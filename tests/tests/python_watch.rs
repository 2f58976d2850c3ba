//! The Python `kubernetes` client's watch helper (tests/python/watch_stream.py), every release on
//! this machine (Debian's 22.6 and the newest pip release), against a
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
    let pys = crdplane_tests::python_interpreters();
    assert!(
        !pys.is_empty(),
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
    for (i, (py, ver)) in pys.iter().enumerate() {
        crdplane_tests::run_python_checks(
            py,
            ver,
            "watch_stream.py",
            &format!("{gateway}/clusters/pywatch{i}"),
        );
    }
}
