//! Graceful stop on SIGTERM, as a Kubernetes rollout or `crdplane up`'s Ctrl-C sends it,
//! against the real binaries:
//!
//! - the gateway (kube-apiserver's termination sequence): `/readyz` fails its `shutdown`
//!   check at once while requests and watches are still served for
//!   `--shutdown-delay-duration`; then watches end cleanly and the process exits 0;
//! - storage: its calls finish, its streams to the gateway end with a status, it exits 0
//!   well within its drain bound, and a client's watch through the gateway carries on once
//!   storage is back.

use crdplane_tests::{CRONTABS_PATH, Stack, WatchStream, crontab, http_get, http_request};
use std::time::{Duration, Instant};

/// Creates CronTab `name` (201 expected, retried while storage comes back).
fn create(gw: &str, name: &str, within: Duration) {
    let deadline = Instant::now() + within;
    loop {
        let (code, body) = http_request(
            "POST",
            &format!("{gw}{CRONTABS_PATH}"),
            Some("application/json"),
            Some(&crontab(name, "x").to_string()),
        )
        .unwrap_or((0, String::new()));
        if code == 201 {
            return;
        }
        assert!(Instant::now() < deadline, "create {name}: {code} {body}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Waits for the ADDED event of `name` on `w`.
fn added(w: &WatchStream, name: &str, within: Duration) {
    let deadline = Instant::now() + within;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let ev = w
            .next(left)
            .unwrap_or_else(|| panic!("no ADDED event for {name} within {within:?}"));
        if ev["type"] == "ADDED" && ev["object"]["metadata"]["name"] == name {
            return;
        }
    }
}

#[test]
fn a_stopping_gateway_fails_readyz_keeps_serving_for_the_delay_then_ends_watches() {
    // Long enough for the checks below on a loaded machine; the test waits it out once.
    let delay = Duration::from_secs(10);
    let mut stack = Stack::start_with_redis_using(|b| {
        b.args(
            crdplane_tests::Service::Gateway,
            &[format!("--shutdown-delay-duration={}s", delay.as_secs())],
        )
    })
    .unwrap();
    let gw = stack.gateway.clone();
    crdplane_tests::serve_crontabs(&gw, &crontab("first", "x"));
    let watch = WatchStream::open(&format!("{gw}{CRONTABS_PATH}?watch=1"), None).unwrap();
    assert_eq!(watch.status, 200);
    added(&watch, "first", Duration::from_secs(10));

    let p = stack.processes();
    let i = p.index("gateway").expect("the gateway child");
    let pid = p.pids()[i];
    let signalled = Instant::now();
    let kill = std::process::Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status()
        .unwrap();
    assert!(kill.success());

    // Readiness fails at once, naming the check, as kube-apiserver's.
    let deadline = Instant::now() + Duration::from_secs(5);
    let body = loop {
        let (code, body) = http_get(&format!("{gw}/readyz")).unwrap();
        if code == 500 {
            break body;
        }
        assert_eq!(code, 200, "{body}");
        assert!(
            Instant::now() < deadline,
            "/readyz still passes after SIGTERM"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(
        body.contains("[-]shutdown failed: reason withheld\n") && body.contains("[+]ping ok\n"),
        "{body}"
    );
    // Still serving during the delay: new requests, writes, and the open watch.
    let (code, body) = http_get(&format!("{gw}/version")).unwrap();
    assert_eq!(code, 200, "{body}");
    create(&gw, "during-the-delay", Duration::from_secs(5));
    added(&watch, "during-the-delay", Duration::from_secs(5));
    assert!(
        signalled.elapsed() < delay,
        "the checks took longer than the delay; raise it"
    );

    // Then the listener closes, the watch ends with its last chunk and the process exits 0.
    let exited = stack
        .processes()
        .terminate(i, delay + Duration::from_secs(20))
        .unwrap();
    assert!(
        exited.is_some_and(|st| st.success()),
        "the gateway did not stop on its own: {exited:?}"
    );
    assert!(
        signalled.elapsed() >= delay,
        "stopped before --shutdown-delay-duration"
    );
    assert!(
        watch.ended_cleanly(Duration::from_secs(5)),
        "the watch was cut, not ended"
    );
    assert!(
        http_get(&format!("{gw}/version")).is_err(),
        "the listener is still open"
    );
}

#[test]
fn a_stopping_storage_drains_and_the_gateway_resumes_its_watches_on_the_next_one() {
    let mut stack = Stack::start_with_redis().unwrap();
    let gw = stack.gateway.clone();
    crdplane_tests::serve_crontabs(&gw, &crontab("first", "x"));
    // A client watch: the gateway serves it from its shared storage watch, which holds a
    // server stream open on storage (and the channel's health watch another).
    let watch = WatchStream::open(&format!("{gw}{CRONTABS_PATH}?watch=1"), None).unwrap();
    added(&watch, "first", Duration::from_secs(10));
    create(&gw, "before", Duration::from_secs(5));
    added(&watch, "before", Duration::from_secs(10));

    let p = stack.processes();
    let i = p.index("storage").expect("the storage child");
    // Well within storage's own drain bound (15 s): its streams end at the stop instead of
    // holding their connections open until then.
    let exited = p.terminate(i, Duration::from_secs(10)).unwrap();
    assert!(
        exited.is_some_and(|st| st.success()),
        "storage did not drain and exit on SIGTERM: {exited:?}"
    );
    p.respawn(i, Duration::from_secs(30)).unwrap();

    // The client's watch was not ended by the storage restart: the gateway resumed its
    // storage watch from its last revision.
    create(&gw, "after", Duration::from_secs(30));
    added(&watch, "after", Duration::from_secs(30));
}
