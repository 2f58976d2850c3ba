//! `crdplane up` restarted on the same data dir still serves what was created before
//! (Redis AOF in the data dir), and stops all its children on SIGTERM.

use crdplane_tests::{bin, http_get, http_request};
use serde_json::{Value, json};
use std::io::BufRead;
use std::process::{Child, Command, Stdio};

/// Starts the launcher and returns it with the gateway URL it printed.
fn up(data: &std::path::Path) -> (Child, String) {
    let mut child = Command::new(bin("crdplane"))
        .args([
            "up",
            "--insecure-http",
            "--listen",
            "127.0.0.1:0",
            "--data-dir",
        ])
        .arg(data)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start crdplane up");
    let out = child.stdout.take().unwrap();
    let mut lines = std::io::BufReader::new(out).lines();
    let gateway = loop {
        let line = lines
            .next()
            .expect("launcher printed its gateway")
            .expect("read");
        if let Some(url) = line.trim().strip_prefix("gateway:") {
            break url.trim().to_string();
        }
    };
    std::thread::spawn(move || for _ in lines {});
    (child, gateway)
}

fn stop(mut child: Child) {
    Command::new("kill")
        .arg("-TERM")
        .arg(child.id().to_string())
        .status()
        .unwrap();
    let status = child.wait().unwrap();
    assert!(
        status.success(),
        "launcher exits cleanly on SIGTERM: {status}"
    );
}

#[test]
fn objects_survive_a_restart_on_the_same_data_dir() {
    let data = tempfile::tempdir().unwrap();
    let (launcher, gw) = up(data.path());
    assert_eq!(http_get(&format!("{gw}/readyz")).unwrap().0, 200);
    let body = crdplane_tests::serve_crontabs(&gw, &crdplane_tests::crontab("durable", "x"));
    let before: Value = serde_json::from_str(&body).unwrap();
    stop(launcher);
    assert!(
        http_get(&format!("{gw}/readyz")).is_err(),
        "gateway stopped with the launcher"
    );

    let (launcher, gw) = up(data.path());
    let (code, body) = http_get(&format!(
        "{gw}/apis/stable.example.com/v1/namespaces/default/crontabs/durable"
    ))
    .unwrap();
    assert_eq!(code, 200, "{body}");
    let after: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        after, before,
        "same object, same uid and resourceVersion after restart"
    );
    // And the revision counter continues: a new write gets a higher resourceVersion.
    let ct2 =
        json!({"apiVersion":"stable.example.com/v1","kind":"CronTab","metadata":{"name":"second"}});
    let (code, body) = http_request(
        "POST",
        &format!("{gw}/apis/stable.example.com/v1/namespaces/default/crontabs"),
        Some("application/json"),
        Some(&ct2.to_string()),
    )
    .unwrap();
    assert_eq!(code, 201);
    let second: Value = serde_json::from_str(&body).unwrap();
    let rv = |v: &Value| {
        v["metadata"]["resourceVersion"]
            .as_str()
            .unwrap()
            .parse::<u64>()
            .unwrap()
    };
    assert!(rv(&second) > rv(&before));
    stop(launcher);
}
