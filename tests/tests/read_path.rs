//! Read-path compatibility with real clients: boolean query parameters (`watch=True`), the
//! plain-text `404 page not found` of upstream's not-found handler versus the JSON Status
//! 404 of built-in API roots (and what kubectl prints for each), and strategic merge patch
//! of namespaces by kubectl (`patch` without --type, `apply` of a changed manifest), while a
//! custom resource still gets 415.

use crdplane_tests::{Stack, WatchStream, http_request, kubectls};
use std::time::Duration;

const CRD: &str = r#"{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition",
 "metadata":{"name":"crontabs.stable.example.com"},
 "spec":{"group":"stable.example.com","scope":"Namespaced",
  "names":{"plural":"crontabs","singular":"crontab","kind":"CronTab"},
  "versions":[{"name":"v1","served":true,"storage":true,
   "schema":{"openAPIV3Schema":{"type":"object","x-kubernetes-preserve-unknown-fields":true}}}]}}"#;

fn stack_with_crd() -> Stack {
    let stack = Stack::start_with_redis().expect("stack");
    let (code, body) = http_request(
        "POST",
        &format!(
            "{}/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
            stack.gateway
        ),
        Some("application/json"),
        Some(CRD),
    )
    .unwrap();
    assert_eq!(code, 201, "{body}");
    let url = format!(
        "{}/apis/stable.example.com/v1/namespaces/default/crontabs",
        stack.gateway
    );
    for _ in 0..200 {
        let (code, _) = http_request(
            "POST",
            &url,
            Some("application/json"),
            Some(r#"{"apiVersion":"stable.example.com/v1","kind":"CronTab","metadata":{"name":"c1"},"spec":{"a":1}}"#),
        )
        .unwrap();
        if code == 201 {
            return stack;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("crontabs never served");
}

/// Status code, Content-Type and body of a GET.
fn get(url: &str) -> (u16, String, String) {
    get_accepting(url, None)
}

/// Status code, Content-Type and body of a GET with this Accept header.
fn get_accepting(url: &str, accept: Option<&str>) -> (u16, String, String) {
    use std::io::{Read, Write};
    let rest = url.strip_prefix("http://").unwrap();
    let (host, path) = rest.split_once('/').unwrap();
    let mut s = std::net::TcpStream::connect(host).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let accept = accept
        .map(|a| format!("Accept: {a}\r\n"))
        .unwrap_or_default();
    write!(
        s,
        "GET /{path} HTTP/1.1\r\nHost: {host}\r\n{accept}Connection: close\r\n\r\n"
    )
    .unwrap();
    let mut buf = Vec::new();
    let _ = s.read_to_end(&mut buf);
    let text = String::from_utf8_lossy(&buf).into_owned();
    let code = text.get(9..12).and_then(|c| c.parse().ok()).unwrap_or(0);
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let ct = head
        .lines()
        .find_map(|l| {
            l.to_ascii_lowercase()
                .strip_prefix("content-type:")
                .map(|v| v.trim().to_string())
        })
        .unwrap_or_default();
    (code, ct, body.to_string())
}

#[test]
fn watch_true_in_any_case_is_a_watch() {
    let stack = stack_with_crd();
    for q in ["watch=True", "watch=TRUE", "watch=yes", "watch"] {
        let w = WatchStream::open(
            &format!(
                "{}/apis/stable.example.com/v1/namespaces/default/crontabs?{q}",
                stack.gateway
            ),
            None,
        )
        .unwrap();
        assert_eq!(w.status, 200, "{q}");
        let ev = w.next(Duration::from_secs(10)).expect(q);
        assert_eq!(ev["type"], "ADDED", "{q}: {ev}");
        assert_eq!(ev["object"]["metadata"]["name"], "c1", "{q}: {ev}");
    }
    // watch=False and watch=0 are lists.
    for q in ["watch=False", "watch=0"] {
        let (code, _, body) = get(&format!("{}/api/v1/namespaces?{q}", stack.gateway));
        assert_eq!(code, 200);
        assert!(body.contains("\"NamespaceList\""), "{q}: {body}");
    }
}

/// `Accept: application/yaml`: the object, the list and an error Status come as YAML with
/// the same content as their JSON; a watch is not served as YAML (406), as upstream's YAML
/// serializer has no stream form.
#[test]
fn yaml_output() {
    let stack = stack_with_crd();
    let base = format!(
        "{}/apis/stable.example.com/v1/namespaces/default/crontabs",
        stack.gateway
    );
    let yaml = |v: &str| -> serde_json::Value { serde_saphyr::from_str(v).expect(v) };
    let json = |v: &str| -> serde_json::Value { serde_json::from_str(v).expect(v) };
    for url in [format!("{base}/c1"), base.clone()] {
        let (code, ct, body) = get_accepting(&url, Some("application/yaml"));
        assert_eq!((code, ct.as_str()), (200, "application/yaml"), "{body}");
        assert!(body.starts_with("apiVersion: "), "{body}");
        let (_, _, as_json) = get_accepting(&url, None);
        let (mut a, mut b) = (yaml(&body), json(&as_json));
        // A list's resourceVersion may have moved between the two reads; nothing else.
        for v in [&mut a, &mut b] {
            v["metadata"]["resourceVersion"] = serde_json::Value::Null;
        }
        assert_eq!(a, b, "{url}");
    }
    // JSON first in the header wins; YAML after a range the server cannot serve is taken.
    let (_, ct, _) = get_accepting(&base, Some("application/json, application/yaml"));
    assert_eq!(ct, "application/json");
    let (_, ct, _) = get_accepting(
        &base,
        Some("application/vnd.kubernetes.protobuf, application/yaml"),
    );
    assert_eq!(ct, "application/yaml");
    // An error is a YAML Status.
    let (code, ct, body) = get_accepting(&format!("{base}/nope"), Some("application/yaml"));
    assert_eq!((code, ct.as_str()), (404, "application/yaml"), "{body}");
    let st = yaml(&body);
    assert_eq!(st["kind"], "Status");
    assert_eq!(st["reason"], "NotFound");
    assert_eq!(
        st["message"],
        "crontabs.stable.example.com \"nope\" not found"
    );
    // A watch asking for YAML only: 406.
    let (code, _, body) = get_accepting(&format!("{base}?watch=1"), Some("application/yaml"));
    assert_eq!(code, 406, "{body}");
}

#[test]
fn unknown_paths_plain_404_versus_status() {
    let stack = stack_with_crd();
    let gw = &stack.gateway;
    // Upstream's not-found handler: plain text.
    for path in [
        "/nope",
        "/apis/nope.example.com",
        "/apis/nope.example.com/v1",
        "/apis/nope.example.com/v1/things",
        "/apis/stable.example.com/v2",
        "/apis/stable.example.com/v2/crontabs",
        "/apis/stable.example.com/v1/nope",
        // Scope mismatch: a namespaced CRD addressed cluster-wide by name.
        "/apis/stable.example.com/v1/crontabs/c1",
    ] {
        let (code, ct, body) = get(&format!("{gw}{path}"));
        assert_eq!(
            (code, ct.as_str(), body.as_str()),
            (404, "text/plain; charset=utf-8", "404 page not found\n"),
            "{path}"
        );
    }
    // Built-in roots (go-restful): a JSON Status.
    for path in [
        "/api/v2",
        "/api/v1/nope",
        "/apis/apiextensions.k8s.io/v2",
        "/apis/apiextensions.k8s.io/v1/nope",
    ] {
        let (code, ct, body) = get(&format!("{gw}{path}"));
        assert_eq!((code, ct.as_str()), (404, "application/json"), "{path}");
        assert!(body.contains("\"reason\":\"NotFound\""), "{path}: {body}");
    }
    // An unknown subresource of a served CRD: a NotFound Status naming the object.
    let (code, ct, body) = get(&format!(
        "{gw}/apis/stable.example.com/v1/namespaces/default/crontabs/c1/nope"
    ));
    assert_eq!((code, ct.as_str()), (404, "application/json"));
    assert!(
        body.contains(r#"crontabs.stable.example.com \"c1\" not found"#),
        "{body}"
    );
    // What kubectl prints for each kind of 404.
    for k in kubectls() {
        let o = stack.kubectl(&k, &["get", "--raw", "/nope"]);
        assert!(!o.ok, "{}", k.display());
        assert_eq!(
            o.stderr.trim(),
            "Error from server (NotFound): the server could not find the requested resource",
            "{}",
            k.display()
        );
        eprintln!("{}: get --raw /nope: {}", k.display(), o.stderr.trim());
    }
}

#[test]
fn kubectl_strategic_merge_patch_of_namespaces() {
    let stack = stack_with_crd();
    let ks = kubectls();
    assert!(!ks.is_empty(), "no kubectl");
    for (i, k) in ks.iter().enumerate() {
        let ns = format!("smp{i}");
        let o = stack.kubectl(&k.clone(), &["create", "namespace", &ns]);
        assert!(o.ok, "{}: {o:?}", k.display());
        // `kubectl patch` without --type sends a strategic merge patch.
        let o = stack.kubectl(
            k,
            &[
                "patch",
                "ns",
                &ns,
                "-p",
                r#"{"metadata":{"labels":{"team":"a","tier":"x"}}}"#,
            ],
        );
        assert!(o.ok, "{}: {o:?}", k.display());
        let o = stack.kubectl(
            k,
            &[
                "patch",
                "ns",
                &ns,
                "-p",
                r#"{"metadata":{"labels":{"tier":null}}}"#,
            ],
        );
        assert!(o.ok, "{}: {o:?}", k.display());
        let o = stack.kubectl(k, &["get", "ns", &ns, "-o", "jsonpath={.metadata.labels}"]);
        assert!(o.ok, "{o:?}");
        assert!(
            o.stdout.contains("\"team\":\"a\"") && !o.stdout.contains("tier"),
            "{o:?}"
        );

        // `kubectl apply` of a changed manifest: a label added, then removed.
        let applied = format!("smp-apply{i}");
        for (labels, want) in [
            ("", None),
            ("  labels:\n    stage: one\n", Some("one")),
            ("", None),
        ] {
            let manifest =
                format!("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {applied}\n{labels}");
            let o = stack.kubectl_stdin(k, &["apply", "-f", "-"], Some(&manifest));
            assert!(o.ok, "{}: {o:?}", k.display());
            let o = stack.kubectl(
                k,
                &[
                    "get",
                    "ns",
                    &applied,
                    "-o",
                    "jsonpath={.metadata.labels.stage}",
                ],
            );
            assert!(o.ok, "{o:?}");
            assert_eq!(o.stdout.trim(), want.unwrap_or(""), "{}", k.display());
        }

        // A custom resource: still 415, with the types custom resources accept.
        let o = stack.kubectl(k, &["patch", "crontab", "c1", "-p", r#"{"spec":{"a":2}}"#]);
        assert!(!o.ok, "{o:?}");
        assert!(
            o.stderr.contains("the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json"),
            "{}: {o:?}",
            k.display()
        );
    }
}
