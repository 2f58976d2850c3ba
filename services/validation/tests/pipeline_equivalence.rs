//! The one-walk pipeline (`pipeline::prune_default_validate`, used by `admit`) against
//! upstream's separate passes (prune → prune non-nullable nulls → default → validate): same
//! object, same pruned paths in the same order, same errors in the same order — on the
//! upstream-derived fixtures, on targeted cases and on random schemas and objects.

use crdplane_validation::structural::{self, Schema};
use crdplane_validation::{default, pipeline, prune, validate};
use proptest::prelude::*;
use serde_json::{Map, Value, json};

/// (object, pruned, errors) of the separate passes.
fn separate(s: &Schema, obj: &Value) -> (Value, Vec<String>, Vec<String>) {
    let mut o = obj.clone();
    let pruned = prune::prune(&mut o, s);
    default::prune_non_nullable_nulls(&mut o, s);
    default::apply_defaults(&mut o, s);
    let errs = validate::validate(s, &o, "")
        .iter()
        .map(ToString::to_string)
        .collect();
    (o, pruned, errs)
}

fn fused(s: &Schema, obj: &Value) -> (Value, Vec<String>, Vec<String>) {
    let mut o = obj.clone();
    let out = pipeline::prune_default_validate(&mut o, s);
    let errs = out.errors.iter().map(ToString::to_string).collect();
    (o, out.pruned, errs)
}

fn assert_same(schema: &Value, obj: &Value) {
    let s = structural::compile(schema).unwrap();
    let want = separate(&s, obj);
    assert_eq!(fused(&s, obj), want, "schema {schema}\nobject {obj}");
    // Without validation (read path): the same object and pruned paths.
    let mut o = obj.clone();
    let pruned = pipeline::prune_and_default(&mut o, &s);
    assert_eq!(
        (o, pruned),
        (want.0, want.1),
        "schema {schema}\nobject {obj}"
    );
}

fn load(name: &str) -> Vec<Value> {
    let path = format!("{}/tests/fixtures/{name}", env!("CARGO_MANIFEST_DIR"));
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

#[test]
fn fixtures_match_separate_passes() {
    let mut n = 0;
    for file in ["cr_validation.json", "prune.json", "default.json"] {
        for c in load(file) {
            assert_same(&c["schema"], &c["object"]);
            n += 1;
        }
    }
    assert!(n >= 56, "{n}");
}

#[test]
fn reports_errors_in_upstream_order() {
    // Errors of a node come before its children's (type, enum), then additionalProperties
    // keys before declared properties, then required; defaulted values are validated in key
    // order.
    let schema = json!({"type": "object", "properties": {"spec": {
        "type": "object", "enum": [{"x": 1}], "required": ["z", "a"],
        "properties": {
            "a": {"type": "string", "maxLength": 1},
            "b": {"type": "integer", "default": "not-an-int"},
            "c": {"type": "string", "pattern": "^c$"}},
        "additionalProperties": {"type": "integer"}}}});
    let obj = json!({"spec": {"a": "long", "c": "x", "m": "str", "n": 1.5}});
    let s = structural::compile(&schema).unwrap();
    let (o, pruned, errs) = fused(&s, &obj);
    assert_eq!(
        o,
        json!({"spec": {"a": "long", "b": "not-an-int", "c": "x", "m": "str", "n": 1.5}})
    );
    assert!(pruned.is_empty());
    assert_eq!(
        errs,
        vec![
            r#"spec: Unsupported value: map[string]interface {}{"a":"long", "b":"not-an-int", "c":"x", "m":"str", "n":1.5}: supported values: "{\"x\":1}""#,
            r#"spec.m: Invalid value: "string": spec.m in body must be of type integer: "string""#,
            r#"spec.n: Invalid value: "number": spec.n in body must be of type integer: "number""#,
            "spec.a: Too long: may not be more than 1 byte",
            r#"spec.b: Invalid value: "string": spec.b in body must be of type integer: "string""#,
            r#"spec.c: Invalid value: "x": spec.c in body should match '^c$'"#,
            "spec.z: Required value",
        ]
    );
    assert_same(&schema, &obj);
}

#[test]
fn too_many_properties_replaces_child_errors() {
    let schema = json!({"type": "object", "properties": {"spec": {
        "type": "object", "maxProperties": 1,
        "properties": {"a": {"type": "string"}, "b": {"type": "string"}}}}});
    let obj = json!({"spec": {"a": 1, "b": 2, "x": 3}});
    let s = structural::compile(&schema).unwrap();
    let (_, pruned, errs) = fused(&s, &obj);
    assert_eq!(pruned, vec!["spec.x"]);
    assert_eq!(errs, vec!["spec: Too many: 2: must have at most 1 item"]);
    assert_same(&schema, &obj);
}

#[test]
fn junctors_and_forbidden_properties() {
    let schema = json!({"type": "object", "properties": {"spec": {
        "type": "object",
        "properties": {"a": {"type": "string"}, "b": {"type": "string"},
            "l": {"type": "array", "minItems": 2, "items": {"type": "integer", "nullable": true},
                  "oneOf": [{"maxItems": 1}, {"maxItems": 3}]}},
        "additionalProperties": false,
        "anyOf": [{"required": ["a"]}, {"required": ["b"]}],
        "not": {"required": ["l"]}}}});
    for obj in [
        json!({"spec": {"x": {"y": 1}, "l": [null], "z": 1}}),
        json!({"spec": {"a": "1", "l": [1, "x", 3]}}),
        json!({"spec": {"b": "1"}}),
    ] {
        assert_same(&schema, &obj);
    }
    let s = structural::compile(&schema).unwrap();
    let (o, pruned, errs) = fused(&s, &json!({"spec": {"x": {"y": 1}, "l": [null], "z": 1}}));
    assert_eq!(o, json!({"spec": {"x": {}, "l": [null], "z": 1}}));
    assert_eq!(pruned, vec!["spec.x.y"]);
    assert_eq!(
        errs,
        vec![
            r#"<nil>: Invalid value: "": "spec" must validate at least one schema (anyOf)"#,
            "spec.a: Required value",
            r#"<nil>: Invalid value: "": "spec" must not validate the schema (not)"#,
            r#"spec: Invalid value: "x": spec.x in body is a forbidden property"#,
            r#"spec: Invalid value: "z": spec.z in body is a forbidden property"#,
            r#"<nil>: Invalid value: "": "spec.l" must validate one and only one schema (oneOf). Found 2 valid alternatives"#,
            "spec.l: Invalid value: 1: spec.l in body should have at least 2 items",
        ]
    );
}

#[test]
fn embedded_resources_and_object_meta() {
    let schema = json!({"type": "object", "properties": {
        "metadata": {"type": "object", "properties": {"name": {"type": "string", "maxLength": 3}}},
        "spec": {"type": "object", "properties": {
            "e": {"type": "object", "x-kubernetes-embedded-resource": true,
                  "properties": {"kind": {"type": "string", "enum": ["Pod"]}, "spec": {"type": "object"}}},
            "p": {"type": "object", "x-kubernetes-embedded-resource": true,
                  "x-kubernetes-preserve-unknown-fields": true,
                  "properties": {"apiVersion": {"type": "string", "default": "v1"}}}}}}});
    let obj = json!({"apiVersion": "g/v1", "kind": "K",
        "metadata": {"name": "long-name", "bogus": 1, "labels": {"a": "b"}},
        "spec": {"e": {"apiVersion": "v1", "kind": "Job", "metadata": {"x": 1, "name": "n"},
                       "spec": {"q": 1}, "other": 2},
                 "p": {"apiVersion": null, "kind": 7, "free": {"x": 1}}},
        "extra": 1});
    assert_same(&schema, &obj);
    let s = structural::compile(&schema).unwrap();
    let (o, pruned, errs) = fused(&s, &obj);
    assert_eq!(
        pruned,
        vec![
            "extra",
            "metadata.bogus",
            "spec.e.metadata.x",
            "spec.e.other",
            "spec.e.spec.q"
        ]
    );
    assert_eq!(o["spec"]["p"]["apiVersion"], json!("v1"));
    assert_eq!(errs.len(), 2, "{errs:#?}");
}

#[test]
fn valid_objects_take_the_fast_path_and_report_nothing() {
    // Every check the plans shortcut (ranges, patterns, required masks, defaults), passing.
    let schema = json!({"type": "object", "properties": {"spec": {
        "type": "object", "required": ["n"],
        "properties": {
            "n": {"type": "string", "minLength": 2, "maxLength": 4, "pattern": "^[a-z]+$"},
            "i": {"type": "integer", "minimum": 1, "maximum": 3},
            "f": {"type": "number", "maximum": 1.5},
            "u": {"type": "string", "maxLength": 2},
            "d": {"type": "string", "enum": ["x", "y"], "default": "y"}}}}});
    for (obj, ok) in [
        (json!({"spec": {"n": "abc", "i": 2, "f": 1.5}}), true),
        // multi-byte: 2 characters in 4 bytes passes maxLength 2 the exact way
        (json!({"spec": {"n": "ab", "u": "éé"}}), true),
        (json!({"spec": {"n": "ab", "u": "ééé"}}), false),
        (json!({"spec": {"n": "a"}}), false),
        (json!({"spec": {"n": "abc1"}}), false),
        (json!({"spec": {"n": "abc", "i": 2.0}}), true),
        (json!({"spec": {"n": "abc", "i": 2.5}}), false),
        (json!({"spec": {"n": "abc", "f": 1.6}}), false),
        (json!({"spec": {"i": 1}}), false),
    ] {
        let s = structural::compile(&schema).unwrap();
        let (o, _, errs) = fused(&s, &obj);
        assert_eq!(errs.is_empty(), ok, "{obj} -> {errs:?}");
        assert_eq!(o["spec"]["d"], json!("y"));
        assert_same(&schema, &obj);
    }
}

#[test]
fn deep_objects_report_the_depth_error_once() {
    let mut schema = json!({"type": "string"});
    let mut obj = json!("x");
    for _ in 0..60 {
        schema = json!({"type": "object", "additionalProperties": schema});
        obj = json!({"k": obj});
    }
    assert_same(&schema, &obj);
    // Beyond the validator's depth limit (schemas are bounded, objects under
    // preserve-unknown-fields are not).
    let mut obj = json!({"a": 1});
    for _ in 0..600 {
        obj = json!([obj]);
    }
    let schema = json!({"type": "object", "properties": {"spec": {
        "x-kubernetes-preserve-unknown-fields": true, "type": "array",
        "items": {"x-kubernetes-preserve-unknown-fields": true, "nullable": true}}}});
    assert_same(&schema, &json!({"spec": obj}));
}

// ---------------------------------------------------------------------------------------
// Random schemas and objects.

fn key() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("a"),
        Just("b"),
        Just("c"),
        Just("metadata"),
        Just("kind"),
        Just("apiVersion"),
        Just("zz"),
    ]
    .prop_map(String::from)
}

fn scalar_value() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        (-20i64..20).prop_map(Value::from),
        (-20.0f64..20.0).prop_map(|f| json!(f)),
        "[a-c]{0,4}".prop_map(Value::String),
    ]
}

fn value() -> impl Strategy<Value = Value> {
    scalar_value().prop_recursive(4, 40, 5, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map(key(), inner, 0..5)
                .prop_map(|m| Value::Object(m.into_iter().collect::<Map<_, _>>())),
        ]
    })
}

fn leaf_schema() -> impl Strategy<Value = Value> {
    prop_oneof![
        (
            prop::option::of(0i64..5),
            prop::option::of("[a-c]{0,3}"),
            any::<bool>()
        )
            .prop_map(|(max_len, def, nullable)| {
                let mut m = json!({"type": "string", "nullable": nullable});
                if let Some(l) = max_len {
                    m["maxLength"] = json!(l);
                }
                if let Some(d) = def {
                    m["default"] = json!(d);
                }
                m
            }),
        (
            prop::option::of(-5i64..5),
            prop::option::of(-5i64..5),
            prop::option::of(scalar_value())
        )
            .prop_map(|(min, max, def)| {
                let mut m = json!({"type": "integer"});
                if let Some(x) = min {
                    m["minimum"] = json!(x);
                }
                if let Some(x) = max {
                    m["maximum"] = json!(x);
                }
                if let Some(d) = def {
                    m["default"] = d;
                }
                m
            }),
        Just(json!({"type": "boolean"})),
        Just(json!({"type": "string", "enum": ["a", "b"]})),
        Just(json!({"type": "string", "nullable": true, "enum": ["a", null]})),
        Just(json!({"x-kubernetes-int-or-string": true})),
        Just(json!({"type": "number", "multipleOf": 0.5})),
        Just(json!({"type": "string", "pattern": "^a"})),
        Just(json!({"type": "string", "format": "uuid"})),
        Just(json!({"type": "integer", "format": "byte"})),
        Just(json!({})),
        Just(json!({"x-kubernetes-preserve-unknown-fields": true})),
    ]
}

fn schema() -> impl Strategy<Value = Value> {
    leaf_schema().prop_recursive(4, 30, 4, |inner| {
        prop_oneof![
            (
                prop::collection::btree_map(key(), inner.clone(), 0..4),
                (any::<bool>(), any::<bool>(), any::<bool>(), any::<bool>()),
                prop::option::of(value()),
                (prop::option::of(0i64..3), prop::option::of(0i64..3)),
                prop::collection::vec(key(), 0..3),
                prop_oneof![
                    Just(None),
                    Just(Some(json!(false))),
                    Just(Some(json!(true))),
                    inner.clone().prop_map(Some)
                ],
            )
                .prop_map(
                    |(props, (preserve, embedded, nullable, enum_), default, (min_p, max_p), required, additional)| {
                        let mut m = json!({"type": "object", "properties": Value::Object(props.into_iter().collect())});
                        if preserve {
                            m["x-kubernetes-preserve-unknown-fields"] = json!(true);
                        }
                        if embedded {
                            m["x-kubernetes-embedded-resource"] = json!(true);
                        }
                        if nullable {
                            m["nullable"] = json!(true);
                        }
                        if enum_ {
                            m["enum"] = json!([{}, {"a": "a"}]);
                        }
                        if let Some(d) = default {
                            m["default"] = d;
                        }
                        if let Some(x) = min_p {
                            m["minProperties"] = json!(x);
                        }
                        if let Some(x) = max_p {
                            m["maxProperties"] = json!(x);
                        }
                        if !required.is_empty() {
                            m["required"] = json!(required);
                        }
                        if let Some(a) = additional {
                            m["additionalProperties"] = a;
                        }
                        m
                    }
                ),
            (
                inner.clone(),
                (any::<bool>(), any::<bool>(), any::<bool>()),
                prop::option::of(0i64..3),
                prop::option::of(0i64..3),
            )
                .prop_map(|(items, (preserve, unique, with_items), min_items, max_items)| {
                    let mut m = json!({"type": "array"});
                    if with_items {
                        m["items"] = items;
                    }
                    if preserve {
                        m["x-kubernetes-preserve-unknown-fields"] = json!(true);
                    }
                    if unique {
                        m["uniqueItems"] = json!(true);
                    }
                    if let Some(x) = min_items {
                        m["minItems"] = json!(x);
                    }
                    if let Some(x) = max_items {
                        m["maxItems"] = json!(x);
                    }
                    m
                }),
            (inner.clone(), inner.clone()).prop_map(|(a, b)| json!({"type": "object",
                "properties": {"a": a, "b": b},
                "anyOf": [{"required": ["a"]}, {"required": ["b"]}]})),
            (inner.clone(), inner.clone()).prop_map(|(a, b)| json!({
                "oneOf": [a, b], "not": {"type": "string", "maxLength": 1}})),
            (inner.clone(), inner).prop_map(|(a, b)| json!({"allOf": [a, b]})),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2048, .. ProptestConfig::default() })]

    #[test]
    fn one_walk_equals_separate_passes(s in schema(), obj in value(), meta in value()) {
        let schema = json!({"type": "object", "properties": {"spec": s.clone(), "status": s}});
        let mut doc = json!({"apiVersion": "g/v1", "kind": "K", "spec": obj.clone(), "status": obj, "x": null});
        if !meta.is_null() {
            doc["metadata"] = meta;
        }
        let c = structural::compile(&schema).unwrap();
        let want = separate(&c, &doc);
        prop_assert_eq!(fused(&c, &doc), want.clone());
        let mut o = doc.clone();
        let pruned = pipeline::prune_and_default(&mut o, &c);
        prop_assert_eq!((o, pruned), (want.0, want.1));
    }

    #[test]
    fn is_valid_agrees_with_validate(s in schema(), obj in value()) {
        // The predicate the one walk's plans and checks follow: exactly "no errors".
        let c = structural::compile(&s).unwrap();
        prop_assert_eq!(validate::is_valid(&c, &obj), validate::validate(&c, &obj, "").is_empty());
        let doc = json!({"spec": obj});
        let c = structural::compile(&json!({"type": "object", "properties": {"spec": s}})).unwrap();
        prop_assert_eq!(validate::is_valid(&c, &doc), validate::validate(&c, &doc, "").is_empty());
    }

    #[test]
    fn one_walk_equals_separate_passes_at_the_root(s in schema(), obj in value()) {
        let c = structural::compile(&s).unwrap();
        prop_assert_eq!(fused(&c, &obj), separate(&c, &obj));
    }
}
