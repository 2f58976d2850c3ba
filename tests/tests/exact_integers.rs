//! Exact integers end to end (real gateway, validation, storage and redis-server): integers
//! within int64 and uint64 — 2^53+1, 2^63-1, -2^63, 2^64-1 — keep their exact digits through
//! create (JSON and YAML bodies), get, list, merge patch, JSON patch (`test` tells 2^53+1 from
//! 2^53), PUT, /status, a CRD `default:`, a watch event and the Table of an integer printer
//! column; `maximum: 9007199254740992` refuses 9007199254740993 (kube-openapi values.go
//! `MaximumNativeType` compares integers as integers). Assertions are on the raw response text.

use crdplane_tests::Stack;
use std::time::Duration;

const CRD_PATH: &str = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";
const ITEMS: &str = "/apis/ints.example.com/v1/namespaces/default/numbers";

const P53: &str = "9007199254740993";
const I64MAX: &str = "9223372036854775807";
const I64MIN: &str = "-9223372036854775808";
const U64MAX: &str = "18446744073709551615";

/// One request; returns (status, raw head, raw body — de-chunked).
fn raw(
    s: &Stack,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> (u16, String, String) {
    crdplane_tests::exchange(method, &format!("{}{path}", s.gateway), headers, body)
}

const JSON: (&str, &str) = ("Content-Type", "application/json");

fn crd() -> String {
    format!(
        r#"{{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition",
  "metadata":{{"name":"numbers.ints.example.com"}},
  "spec":{{"group":"ints.example.com","scope":"Namespaced",
    "names":{{"plural":"numbers","singular":"number","kind":"Number"}},
    "versions":[{{"name":"v1","served":true,"storage":true,
      "subresources":{{"status":{{}}}},
      "additionalPrinterColumns":[{{"name":"Big","type":"integer","jsonPath":".spec.a"}}],
      "schema":{{"openAPIV3Schema":{{"type":"object","properties":{{
        "spec":{{"type":"object","properties":{{
          "a":{{"type":"integer"}},"b":{{"type":"integer"}},"c":{{"type":"integer"}},
          "d":{{"type":"integer"}},
          "dflt":{{"type":"integer","default":{P53}}},
          "capped":{{"type":"integer","maximum":9007199254740992}},
          "e":{{"type":"integer","enum":[{U64MAX}]}}}}}},
        "status":{{"type":"object","properties":{{"n":{{"type":"integer"}}}}}}}}}}}}}}]}}}}"#
    )
}

fn wait_served(s: &Stack) {
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while raw(s, "GET", ITEMS, &[], "").0 != 200 {
        assert!(std::time::Instant::now() < deadline, "CRD not served");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn has_all(body: &str, pairs: &[(&str, &str)]) {
    for (k, v) in pairs {
        let want = format!("\"{k}\":{v}");
        assert!(body.contains(&want), "{want} missing in {body}");
    }
}

#[test]
fn integers_round_trip_exactly_through_every_path() {
    let s = Stack::start_with_redis().expect("stack");
    let (code, _, body) = raw(&s, "POST", CRD_PATH, &[JSON], &crd());
    assert_eq!(code, 201, "{body}");
    wait_served(&s);

    // A watch from the start sees the create with exact digits.
    let watch = crdplane_tests::WatchStream::open(&format!("{}{ITEMS}?watch=1", s.gateway), None)
        .expect("watch");

    let obj = format!(
        r#"{{"apiVersion":"ints.example.com/v1","kind":"Number","metadata":{{"name":"n1"}},
        "spec":{{"a":{P53},"b":{I64MAX},"c":{I64MIN},"d":{U64MAX},"e":{U64MAX}}}}}"#
    );
    let (code, _, body) = raw(&s, "POST", ITEMS, &[JSON], &obj);
    assert_eq!(code, 201, "{body}");
    let all = [
        ("a", P53),
        ("b", I64MAX),
        ("c", I64MIN),
        ("d", U64MAX),
        ("dflt", P53),
        ("e", U64MAX),
    ];
    has_all(&body, &all);

    let ev = watch.next(Duration::from_secs(20)).expect("watch event");
    let ev = ev.to_string();
    has_all(&ev, &all);

    let (code, _, body) = raw(&s, "GET", &format!("{ITEMS}/n1"), &[], "");
    assert_eq!(code, 200);
    has_all(&body, &all);
    let (code, _, body) = raw(&s, "GET", ITEMS, &[], "");
    assert_eq!(code, 200);
    has_all(&body, &all);

    // Table: the integer printer column renders the exact value.
    let (code, _, body) = raw(
        &s,
        "GET",
        ITEMS,
        &[("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io")],
        "",
    );
    assert_eq!(code, 200, "{body}");
    assert!(
        body.contains(&format!("\"cells\":[\"n1\",{P53}]")),
        "{body}"
    );

    // Merge patch.
    let (code, _, body) = raw(
        &s,
        "PATCH",
        &format!("{ITEMS}/n1"),
        &[("Content-Type", "application/merge-patch+json")],
        &format!(r#"{{"spec":{{"a":{U64MAX},"b":{I64MIN}}}}}"#),
    );
    assert_eq!(code, 200, "{body}");
    has_all(&body, &[("a", U64MAX), ("b", I64MIN), ("c", I64MIN)]);

    // JSON patch: `test` compares exactly (2^53+1 is not 2^53).
    let jp = "application/json-patch+json";
    let (code, _, body) = raw(
        &s,
        "PATCH",
        &format!("{ITEMS}/n1"),
        &[("Content-Type", jp)],
        &format!(r#"[{{"op":"replace","path":"/spec/a","value":{P53}}}]"#),
    );
    assert_eq!(code, 200, "{body}");
    has_all(&body, &[("a", P53)]);
    let (code, _, body) = raw(
        &s,
        "PATCH",
        &format!("{ITEMS}/n1"),
        &[("Content-Type", jp)],
        r#"[{"op":"test","path":"/spec/a","value":9007199254740992},{"op":"replace","path":"/spec/a","value":1}]"#,
    );
    assert_eq!(
        code, 422,
        "2^53 must not equal 2^53+1 in a JSON patch test: {body}"
    );
    let (code, _, body) = raw(
        &s,
        "PATCH",
        &format!("{ITEMS}/n1"),
        &[("Content-Type", jp)],
        &format!(
            r#"[{{"op":"test","path":"/spec/a","value":{P53}}},{{"op":"replace","path":"/spec/b","value":{I64MAX}}}]"#
        ),
    );
    assert_eq!(code, 200, "{body}");
    has_all(&body, &[("a", P53), ("b", I64MAX)]);

    // PUT of the object as read.
    let (_, _, cur) = raw(&s, "GET", &format!("{ITEMS}/n1"), &[], "");
    let put = cur.replace(&format!("\"c\":{I64MIN}"), &format!("\"c\":{U64MAX}"));
    let (code, _, body) = raw(&s, "PUT", &format!("{ITEMS}/n1"), &[JSON], &put);
    assert_eq!(code, 200, "{body}");
    has_all(
        &body,
        &[
            ("a", P53),
            ("b", I64MAX),
            ("c", U64MAX),
            ("d", U64MAX),
            ("dflt", P53),
        ],
    );

    // /status.
    let (code, _, body) = raw(
        &s,
        "PATCH",
        &format!("{ITEMS}/n1/status"),
        &[("Content-Type", "application/merge-patch+json")],
        &format!(r#"{{"status":{{"n":{U64MAX}}}}}"#),
    );
    assert_eq!(code, 200, "{body}");
    has_all(&body, &[("n", U64MAX), ("a", P53)]);

    // YAML body.
    let yaml = format!(
        "apiVersion: ints.example.com/v1\nkind: Number\nmetadata:\n  name: y1\nspec:\n  a: {P53}\n  b: {I64MAX}\n  c: {I64MIN}\n  d: {U64MAX}\n"
    );
    let (code, _, body) = raw(
        &s,
        "POST",
        ITEMS,
        &[("Content-Type", "application/yaml")],
        &yaml,
    );
    assert_eq!(code, 201, "{body}");
    has_all(
        &body,
        &[
            ("a", P53),
            ("b", I64MAX),
            ("c", I64MIN),
            ("d", U64MAX),
            ("dflt", P53),
        ],
    );

    // maximum: 9007199254740992 refuses 9007199254740993 and takes 9007199254740992.
    let capped = |name: &str, v: &str| {
        format!(
            r#"{{"apiVersion":"ints.example.com/v1","kind":"Number","metadata":{{"name":"{name}"}},"spec":{{"capped":{v}}}}}"#
        )
    };
    let (code, _, body) = raw(&s, "POST", ITEMS, &[JSON], &capped("c1", P53));
    assert_eq!(code, 422, "{body}");
    assert!(
        body.contains(&format!("spec.capped: Invalid value: {P53}: spec.capped in body should be less than or equal to 9007199254740992")),
        "{body}"
    );
    let (code, _, body) = raw(
        &s,
        "POST",
        ITEMS,
        &[JSON],
        &capped("c2", "9007199254740992"),
    );
    assert_eq!(code, 201, "{body}");
    // enum: [2^64-1] refuses 2^64-2.
    let (code, _, body) = raw(
        &s,
        "POST",
        ITEMS,
        &[JSON],
        r#"{"apiVersion":"ints.example.com/v1","kind":"Number","metadata":{"name":"e1"},"spec":{"e":18446744073709551614}}"#,
    );
    assert_eq!(code, 422, "{body}");
}
