//! Parsing strictness end to end (real binaries, real redis-server):
//!
//! - duplicate JSON keys under `fieldValidation` (sigs.k8s.io/json `UnmarshalStrict` through
//!   handlers/create.go, update.go, patch.go): Strict → 400 `strict decoding error: duplicate
//!   field "spec.a"`, Warn (the default) → `Warning: 299 - "duplicate field \"spec.a\""`,
//!   Ignore → the last value wins silently; for custom resources (create, PUT, merge patch,
//!   JSON patch), CRDs, namespaces and YAML bodies;
//! - request smuggling cases of the HTTP/1.1 parser answered as Go's net/http does, over a raw
//!   TCP socket: Transfer-Encoding `chunked` twice (two fields, or `chunked, chunked`) and
//!   `gzip, chunked` → 501 `Unsupported transfer encoding`; two different Content-Lengths, a
//!   space before the colon → 400.

use crdplane_tests::Stack;
use std::io::{Read, Write};
use std::time::Duration;

const CRD_PATH: &str = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";
const ITEMS: &str = "/apis/dup.example.com/v1/namespaces/default/things";

/// Writes `wire` as is; returns the whole raw response.
fn wire(s: &Stack, wire: &str) -> String {
    let host = s.gateway.strip_prefix("http://").unwrap();
    let mut c = std::net::TcpStream::connect(host).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    c.write_all(wire.as_bytes()).unwrap();
    let mut buf = Vec::new();
    let _ = c.read_to_end(&mut buf);
    String::from_utf8_lossy(&buf).into_owned()
}

/// One request; returns (status, raw head, raw body; bodies here are never chunked).
fn raw(s: &Stack, method: &str, path: &str, ct: &str, body: &str) -> (u16, String, String) {
    let host = s.gateway.strip_prefix("http://").unwrap();
    let text = wire(
        s,
        &format!(
            "{method} {path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: {ct}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        ),
    );
    let code = text[9..12].parse().unwrap();
    let (head, body) = text.split_once("\r\n\r\n").unwrap();
    (code, head.to_string(), body.to_string())
}

fn warnings(head: &str) -> Vec<String> {
    head.lines()
        .filter_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.eq_ignore_ascii_case("warning")
                .then(|| v.trim().to_string())
        })
        .collect()
}

const JSON: &str = "application/json";

fn crd() -> &'static str {
    r#"{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition",
  "metadata":{"name":"things.dup.example.com"},
  "spec":{"group":"dup.example.com","scope":"Namespaced",
    "names":{"plural":"things","singular":"thing","kind":"Thing"},
    "versions":[{"name":"v1","served":true,"storage":true,
      "schema":{"openAPIV3Schema":{"type":"object","properties":{
        "spec":{"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"string"}}}}}}}]}}"#
}

fn thing(name: &str) -> String {
    format!(
        r#"{{"apiVersion":"dup.example.com/v1","kind":"Thing","metadata":{{"name":"{name}"}},"spec":{{"a":1,"b":"x","a":2}}}}"#
    )
}

#[test]
fn duplicate_keys_follow_field_validation() {
    let s = Stack::start_with_redis().expect("stack");
    let (code, _, body) = raw(&s, "POST", CRD_PATH, JSON, crd());
    assert_eq!(code, 201, "{body}");
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while raw(&s, "GET", ITEMS, JSON, "").0 != 200 {
        assert!(std::time::Instant::now() < deadline, "CRD not served");
        std::thread::sleep(Duration::from_millis(50));
    }

    // Create: Strict refuses, Warn warns, Ignore is silent; the last value wins.
    let (code, _, body) = raw(
        &s,
        "POST",
        &format!("{ITEMS}?fieldValidation=Strict"),
        JSON,
        &thing("t0"),
    );
    assert_eq!(code, 400, "{body}");
    assert!(
        body.contains(r#"Thing in version \"v1\" cannot be handled as a Thing: strict decoding error: duplicate field \"spec.a\""#),
        "{body}"
    );
    let (code, head, body) = raw(&s, "POST", ITEMS, JSON, &thing("t1"));
    assert_eq!(code, 201, "{body}");
    assert!(body.contains(r#""a":2"#), "{body}");
    assert_eq!(
        warnings(&head),
        vec![r#"299 - "duplicate field \"spec.a\"""#],
        "{head}"
    );
    let (code, head, body) = raw(
        &s,
        "POST",
        &format!("{ITEMS}?fieldValidation=Ignore"),
        JSON,
        &thing("t2"),
    );
    assert_eq!(code, 201, "{body}");
    assert!(body.contains(r#""a":2"#), "{body}");
    assert!(warnings(&head).is_empty(), "{head}");

    // PUT with a duplicate.
    let (_, _, cur) = raw(&s, "GET", &format!("{ITEMS}/t1"), JSON, "");
    let put = cur.replacen(r#""a":2"#, r#""a":3,"a":4"#, 1);
    let (code, _, body) = raw(
        &s,
        "PUT",
        &format!("{ITEMS}/t1?fieldValidation=Strict"),
        JSON,
        &put,
    );
    assert_eq!(code, 400, "{body}");
    assert!(
        body.contains(r#"strict decoding error: duplicate field \"spec.a\""#),
        "{body}"
    );
    let (code, head, body) = raw(&s, "PUT", &format!("{ITEMS}/t1"), JSON, &put);
    assert_eq!(code, 200, "{body}");
    assert!(body.contains(r#""a":4"#), "{body}");
    assert_eq!(
        warnings(&head),
        vec![r#"299 - "duplicate field \"spec.a\"""#]
    );

    // Merge patch and JSON patch documents.
    let mp = "application/merge-patch+json";
    let (code, _, body) = raw(
        &s,
        "PATCH",
        &format!("{ITEMS}/t1?fieldValidation=Strict"),
        mp,
        r#"{"spec":{"b":"y","b":"z"}}"#,
    );
    assert_eq!(code, 400, "{body}");
    assert!(
        body.contains(r#"strict decoding error: duplicate field \"spec.b\""#),
        "{body}"
    );
    let (code, head, body) = raw(
        &s,
        "PATCH",
        &format!("{ITEMS}/t1"),
        mp,
        r#"{"spec":{"b":"y","b":"z"}}"#,
    );
    assert_eq!(code, 200, "{body}");
    assert!(body.contains(r#""b":"z""#), "{body}");
    assert_eq!(
        warnings(&head),
        vec![r#"299 - "duplicate field \"spec.b\"""#]
    );
    let jp = "application/json-patch+json";
    let (code, head, body) = raw(
        &s,
        "PATCH",
        &format!("{ITEMS}/t1"),
        jp,
        r#"[{"op":"replace","path":"/spec/b","value":"v","value":"w"}]"#,
    );
    assert_eq!(code, 200, "{body}");
    assert!(body.contains(r#""b":"w""#), "{body}");
    assert_eq!(
        warnings(&head),
        vec![r#"299 - "json patch duplicate field \"[0].value\"""#]
    );

    // YAML body: yaml.v2's strict error.
    let yaml = "apiVersion: dup.example.com/v1\nkind: Thing\nmetadata:\n  name: y1\nspec:\n  a: 1\n  a: 2\n";
    let (code, _, body) = raw(
        &s,
        "POST",
        &format!("{ITEMS}?fieldValidation=Strict"),
        "application/yaml",
        yaml,
    );
    assert_eq!(code, 400, "{body}");
    assert!(
        body.contains(r#"line 7: key \"a\" already set in map"#),
        "{body}"
    );
    let (code, head, body) = raw(&s, "POST", ITEMS, "application/yaml", yaml);
    assert_eq!(code, 201, "{body}");
    assert!(body.contains(r#""a":2"#), "{body}");
    assert_eq!(warnings(&head).len(), 1, "{head}");

    // Namespaces and CRDs.
    let ns = r#"{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"dupns","name":"dupns"}}"#;
    let (code, _, body) = raw(
        &s,
        "POST",
        "/api/v1/namespaces?fieldValidation=Strict",
        JSON,
        ns,
    );
    assert_eq!(code, 400, "{body}");
    assert!(
        body.contains(r#"Namespace in version \"v1\" cannot be handled as a Namespace: strict decoding error: duplicate field \"metadata.name\""#),
        "{body}"
    );
    let (code, head, body) = raw(&s, "POST", "/api/v1/namespaces", JSON, ns);
    assert_eq!(code, 201, "{body}");
    assert_eq!(
        warnings(&head),
        vec![r#"299 - "duplicate field \"metadata.name\"""#]
    );
    let dup_crd = crd().replacen(
        r#""scope":"Namespaced","#,
        r#""scope":"Namespaced","scope":"Namespaced","#,
        1,
    );
    let dup_crd = dup_crd
        .replace("things", "others")
        .replace("thing\"", "other\"")
        .replace("\"Thing\"", "\"Other\"");
    let (code, _, body) = raw(
        &s,
        "POST",
        &format!("{CRD_PATH}?fieldValidation=Strict"),
        JSON,
        &dup_crd,
    );
    assert_eq!(code, 400, "{body}");
    assert!(
        body.contains(r#"strict decoding error: duplicate field \"spec.scope\""#),
        "{body}"
    );
}

/// Fields a Namespace or CRD does not have (a typo in a manifest): under Strict (what
/// kubectl ≥ 1.27 sends) a 400 with upstream's strict decoding text, on create, update and
/// patch; under Warn (the default) a warning and the field dropped, as decoding into the Go
/// type drops it; under Ignore nothing said, the field still dropped.
#[test]
fn unknown_fields_of_namespaces_and_crds_follow_field_validation() {
    let s = Stack::start_with_redis().unwrap();
    // Namespace create.
    let ns = r#"{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"typo","labelz":{"a":"b"}},"spec":{"finalizerz":[]}}"#;
    let (code, _, body) = raw(
        &s,
        "POST",
        "/api/v1/namespaces?fieldValidation=Strict",
        JSON,
        ns,
    );
    assert_eq!(code, 400, "{body}");
    assert!(
        body.contains(r#""message":"Namespace in version \"v1\" cannot be handled as a Namespace: strict decoding error: unknown field \"metadata.labelz\", unknown field \"spec.finalizerz\"""#),
        "{body}"
    );
    let (code, head, body) = raw(&s, "POST", "/api/v1/namespaces", JSON, ns);
    assert_eq!(code, 201, "{body}");
    assert_eq!(
        warnings(&head),
        vec![
            r#"299 - "unknown field \"metadata.labelz\"""#,
            r#"299 - "unknown field \"spec.finalizerz\"""#
        ]
    );
    assert!(
        !body.contains("labelz") && !body.contains("finalizerz"),
        "{body}"
    );
    // Namespace patch: the patched object is checked.
    let path = "/api/v1/namespaces/typo";
    let patch = r#"{"spec":{"colour":"red"}}"#;
    let merge = "application/merge-patch+json";
    let (code, _, body) = raw(
        &s,
        "PATCH",
        &format!("{path}?fieldValidation=Strict"),
        merge,
        patch,
    );
    assert_eq!(code, 400, "{body}");
    assert!(
        body.contains(r#""message":"strict decoding error: unknown field \"spec.colour\"""#),
        "{body}"
    );
    let (code, head, body) = raw(&s, "PATCH", path, merge, patch);
    assert_eq!(code, 200, "{body}");
    assert_eq!(
        warnings(&head),
        vec![r#"299 - "unknown field \"spec.colour\"""#]
    );
    assert!(!body.contains("colour"), "{body}");
    let (code, head, body) = raw(
        &s,
        "PATCH",
        &format!("{path}?fieldValidation=Ignore"),
        merge,
        patch,
    );
    assert_eq!(code, 200, "{body}");
    assert!(warnings(&head).is_empty(), "{head}");
    assert!(!body.contains("colour"), "{body}");

    // CRD create, down to the schema.
    let typo = crd()
        .replacen(
            r#""type":"object","properties":{"#,
            r#""type":"object","propertiez":{},"properties":{"#,
            1,
        )
        .replace("things", "typos")
        .replace("thing\"", "typo\"")
        .replace("\"Thing\"", "\"Typo\"");
    let (code, _, body) = raw(
        &s,
        "POST",
        &format!("{CRD_PATH}?fieldValidation=Strict"),
        JSON,
        &typo,
    );
    assert_eq!(code, 400, "{body}");
    assert!(
        body.contains(r#"CustomResourceDefinition in version \"v1\" cannot be handled as a CustomResourceDefinition: strict decoding error: unknown field \"spec.versions[0].schema.openAPIV3Schema.propertiez\""#),
        "{body}"
    );
    let (code, head, body) = raw(&s, "POST", CRD_PATH, JSON, &typo);
    assert_eq!(code, 201, "{body}");
    assert_eq!(
        warnings(&head),
        vec![r#"299 - "unknown field \"spec.versions[0].schema.openAPIV3Schema.propertiez\"""#]
    );
    assert!(!body.contains("propertiez"), "{body}");
    // CRD patch.
    let (code, _, body) = raw(
        &s,
        "PATCH",
        &format!("{CRD_PATH}/typos.dup.example.com?fieldValidation=Strict"),
        merge,
        r#"{"spec":{"colour":"red"}}"#,
    );
    assert_eq!(code, 400, "{body}");
    assert!(
        body.contains(r#""message":"strict decoding error: unknown field \"spec.colour\"""#),
        "{body}"
    );
}

#[test]
fn smuggling_cases_are_answered_as_go_does() {
    let s = Stack::start_with_redis().expect("stack");
    let host = s.gateway.strip_prefix("http://").unwrap().to_string();
    for te in [
        "Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n",
        "Transfer-Encoding: chunked, chunked\r\n",
        "Transfer-Encoding: gzip, chunked\r\n",
    ] {
        let out = wire(
            &s,
            &format!("POST /api/v1/namespaces HTTP/1.1\r\nHost: {host}\r\n{te}\r\n0\r\n\r\n"),
        );
        assert!(
            out.starts_with("HTTP/1.1 501 Not Implemented\r\n"),
            "{te:?}: {out}"
        );
        assert!(
            out.ends_with("\r\n\r\nUnsupported transfer encoding"),
            "{te:?}: {out}"
        );
    }
    for bad in [
        "Content-Length: 1\r\nContent-Length: 2\r\n",
        "Content-Type : application/json\r\n",
    ] {
        let out = wire(
            &s,
            &format!("POST /api/v1/namespaces HTTP/1.1\r\nHost: {host}\r\n{bad}\r\n"),
        );
        assert!(
            out.starts_with("HTTP/1.1 400 Bad Request\r\n"),
            "{bad:?}: {out}"
        );
    }
}
