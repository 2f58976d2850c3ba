//! The admission pipeline end to end (pure functions): apiVersion/kind, metadata, pruning with
//! fieldValidation, defaulting, status-only validation, and the read path. Cases follow
//! apiextensions-apiserver pkg/registry/customresource/validator_test.go, strategy_test.go,
//! status_strategy_test.go, pkg/apiserver/schema/pruning/algorithm_test.go,
//! pkg/apiserver/schema/defaulting/algorithm_test.go and the spec
//! (/work/shared/spec/extend-the-api-with-crds.txt, validation-for-custom-resources.txt).

use crdplane_core::field::aggregate_message;
use crdplane_validation::admit::{
    AdmitInput, AdmitOutput, FieldValidation, Operation, admit, normalize,
};
use crdplane_validation::structural::{self, Schema, crd_version_schema};
use serde_json::{Value, json};

fn crontab_schema() -> Schema {
    let crd: Value = serde_json::from_str(include_str!("fixtures/crontab-crd.json")).unwrap();
    structural::compile(crd_version_schema(&crd, "v1").unwrap()).unwrap()
}

fn run(schema: &Schema, obj: &Value, fv: FieldValidation) -> AdmitOutput {
    let bytes = serde_json::to_vec(obj).unwrap();
    admit(
        schema,
        &AdmitInput {
            operation: Operation::Create,
            object: &bytes,
            old_object: None,
            field_validation: fv,
            subresource: "",
            api_version: "stable.example.com/v1",
            kind: "CronTab",
            namespaced: true,
        },
    )
}

fn msg(o: &AdmitOutput) -> String {
    aggregate_message(&o.errors)
}

#[test]
fn spec_crontab_invalid_and_valid() {
    let s = crontab_schema();
    let o = run(
        &s,
        &json!({"apiVersion": "stable.example.com/v1", "kind": "CronTab",
            "metadata": {"name": "my-new-cron-object", "namespace": "default"},
            "spec": {"cronSpec": "* * * *", "image": "my-awesome-cron-image", "replicas": 15}}),
        FieldValidation::Warn,
    );
    assert_eq!(
        msg(&o),
        r#"[spec.cronSpec: Invalid value: "* * * *": spec.cronSpec in body should match '^(\d+|\*)(/\d+)?(\s+(\d+|\*)(/\d+)?){4}$', spec.replicas: Invalid value: 15: spec.replicas in body should be less than or equal to 10]"#
    );
    let o = run(
        &s,
        &json!({"apiVersion": "stable.example.com/v1", "kind": "CronTab",
            "metadata": {"name": "my-new-cron-object", "namespace": "default"},
            "spec": {"cronSpec": "* * * * */5", "image": "my-awesome-cron-image", "replicas": 5}}),
        FieldValidation::Warn,
    );
    assert!(o.errors.is_empty(), "{:?}", o.errors);
    assert!(o.warnings.is_empty());
}

#[test]
fn type_meta_errors_stop_validation() {
    let s = crontab_schema();
    let o = run(
        &s,
        &json!({"apiVersion": "stable.example.com/v2", "kind": "X", "metadata": {},
            "spec": {"replicas": 50}}),
        FieldValidation::Warn,
    );
    assert_eq!(
        msg(&o),
        r#"[kind: Invalid value: "X": must be CronTab, apiVersion: Invalid value: "stable.example.com/v2": must be stable.example.com/v1]"#
    );
}

#[test]
fn metadata_and_schema_errors_are_collected() {
    let s = crontab_schema();
    let o = run(
        &s,
        &json!({"apiVersion": "stable.example.com/v1", "kind": "CronTab",
            "metadata": {"name": "Bad", "namespace": "default", "labels": {"a": "b c"}},
            "spec": {"replicas": 0}}),
        FieldValidation::Warn,
    );
    let m: Vec<String> = o.errors.iter().map(ToString::to_string).collect();
    assert_eq!(m.len(), 3, "{m:?}");
    assert!(
        m[0].starts_with(r#"metadata.name: Invalid value: "Bad": a lowercase RFC 1123 subdomain"#)
    );
    assert!(m[1].starts_with(r#"metadata.labels: Invalid value: "b c": a valid label must be"#));
    assert_eq!(
        m[2],
        "spec.replicas: Invalid value: 0: spec.replicas in body should be greater than or equal to 1"
    );
}

#[test]
fn field_validation_modes_and_duplicates() {
    let s = crontab_schema();
    let body = br#"{"apiVersion":"stable.example.com/v1","kind":"CronTab","metadata":{"name":"a","namespace":"d","foo":1},"spec":{"replicas":1,"replicas":2,"bar":true,"baz":{}}}"#;
    let mk = |fv| AdmitInput {
        operation: Operation::Create,
        object: body,
        old_object: None,
        field_validation: fv,
        subresource: "",
        api_version: "stable.example.com/v1",
        kind: "CronTab",
        namespaced: true,
    };
    let o = admit(&s, &mk(FieldValidation::Warn));
    assert!(o.errors.is_empty(), "{:?}", o.errors);
    assert_eq!(
        o.warnings,
        vec![
            r#"duplicate field "spec.replicas""#,
            r#"unknown field "metadata.foo""#,
            r#"unknown field "spec.bar""#,
            r#"unknown field "spec.baz""#,
        ]
    );
    assert_eq!(
        o.unknown_fields,
        vec!["metadata.foo", "spec.bar", "spec.baz"]
    );
    assert_eq!(o.object["spec"], json!({"replicas": 2}));
    assert_eq!(o.object["metadata"], json!({"name": "a", "namespace": "d"}));
    let o = admit(&s, &mk(FieldValidation::Strict));
    assert_eq!(o.warnings.len(), 4);
    let o = admit(&s, &mk(FieldValidation::Ignore));
    assert!(o.warnings.is_empty() && o.unknown_fields.is_empty());
    assert_eq!(o.object["spec"], json!({"replicas": 2}));
}

fn status_schema() -> Schema {
    structural::compile(&json!({"type": "object", "properties": {
        "spec": {"type": "object", "properties": {"replicas": {"type": "integer", "maximum": 5}}},
        "status": {"type": "object", "properties": {
            "phase": {"type": "string", "enum": ["Ready", "Pending"]},
            "count": {"type": "integer", "default": 0}}}}}))
    .unwrap()
}

#[test]
fn status_subresource_validates_only_status() {
    let s = status_schema();
    let old = serde_json::to_vec(&json!({"apiVersion": "g.example.com/v1", "kind": "K",
        "metadata": {"name": "a", "namespace": "d", "uid": "u1"}, "spec": {"replicas": 9}}))
    .unwrap();
    let new = serde_json::to_vec(&json!({"apiVersion": "g.example.com/v1", "kind": "K",
        "metadata": {"name": "a", "namespace": "d", "uid": "u1"}, "spec": {"replicas": 9},
        "status": {"phase": "Gone"}}))
    .unwrap();
    let o = admit(
        &s,
        &AdmitInput {
            operation: Operation::Update,
            object: &new,
            old_object: Some(&old),
            field_validation: FieldValidation::Warn,
            subresource: "status",
            api_version: "g.example.com/v1",
            kind: "K",
            namespaced: true,
        },
    );
    // spec.replicas=9 violates maximum but is not validated on /status.
    assert_eq!(
        msg(&o),
        r#"status.phase: Unsupported value: "Gone": supported values: "Ready", "Pending""#
    );
    assert_eq!(o.object["status"]["count"], json!(0));
    // On the main resource the same object fails on spec (and the status error too).
    let o = admit(
        &s,
        &AdmitInput {
            operation: Operation::Update,
            object: &new,
            old_object: Some(&old),
            field_validation: FieldValidation::Warn,
            subresource: "",
            api_version: "g.example.com/v1",
            kind: "K",
            namespaced: true,
        },
    );
    assert_eq!(o.errors.len(), 2, "{:?}", o.errors);
}

/// On `/status` upstream validates `status` with a validator rooted at the status schema
/// (pkg/registry/customresource/validator.go `ValidateStatusUpdate`): kube-openapi names the
/// field relative to `status` in the message while the field path keeps the `status.` prefix.
#[test]
fn status_messages_are_rooted_at_status() {
    let s = structural::compile(&json!({"type": "object", "properties": {
        "status": {"type": "object", "properties": {
            "addresses": {"type": "array", "items": {"type": "object", "properties": {
                "value": {"type": "string", "format": "ipv4"}}}},
            "replicas": {"type": "integer", "maximum": 3}}}}}))
    .unwrap();
    let old = serde_json::to_vec(&json!({"apiVersion": "g.example.com/v1", "kind": "K",
        "metadata": {"name": "a", "namespace": "d", "uid": "u1"}}))
    .unwrap();
    let status_update = |status: Value| {
        let new = serde_json::to_vec(&json!({"apiVersion": "g.example.com/v1", "kind": "K",
            "metadata": {"name": "a", "namespace": "d", "uid": "u1"}, "status": status}))
        .unwrap();
        let o = admit(
            &s,
            &AdmitInput {
                operation: Operation::Update,
                object: &new,
                old_object: Some(&old),
                field_validation: FieldValidation::Warn,
                subresource: "status",
                api_version: "g.example.com/v1",
                kind: "K",
                namespaced: true,
            },
        );
        msg(&o)
    };
    assert_eq!(
        status_update(json!({"addresses": [{"value": "not-an-ip"}], "replicas": 4})),
        r#"[status.addresses[0].value: Invalid value: "not-an-ip": addresses[0].value in body must be of type ipv4: "not-an-ip", status.replicas: Invalid value: 4: replicas in body should be less than or equal to 3]"#
    );
    // An error about the root of the status validator sits at `status` itself, and its
    // kube-openapi name is empty.
    assert_eq!(
        status_update(json!("text")),
        r#"status: Invalid value: "string":  in body must be of type object: "string""#
    );
}

#[test]
fn update_checks_immutable_metadata() {
    let s = status_schema();
    let old = serde_json::to_vec(&json!({"apiVersion": "g.example.com/v1", "kind": "K",
        "metadata": {"name": "a", "namespace": "d", "uid": "u1"}}))
    .unwrap();
    let new = serde_json::to_vec(&json!({"apiVersion": "g.example.com/v1", "kind": "K",
        "metadata": {"name": "a", "namespace": "d", "uid": "u2"}}))
    .unwrap();
    let o = admit(
        &s,
        &AdmitInput {
            operation: Operation::Update,
            object: &new,
            old_object: Some(&old),
            field_validation: FieldValidation::Warn,
            subresource: "",
            api_version: "g.example.com/v1",
            kind: "K",
            namespaced: true,
        },
    );
    assert_eq!(
        msg(&o),
        r#"metadata.uid: Invalid value: "u2": field is immutable"#
    );
}

#[test]
fn cluster_scoped_and_generate_name() {
    let s = status_schema();
    let bytes = serde_json::to_vec(&json!({"apiVersion": "g.example.com/v1", "kind": "K",
        "metadata": {"namespace": "x"}}))
    .unwrap();
    let o = admit(
        &s,
        &AdmitInput {
            operation: Operation::Create,
            object: &bytes,
            old_object: None,
            field_validation: FieldValidation::Warn,
            subresource: "",
            api_version: "g.example.com/v1",
            kind: "K",
            namespaced: false,
        },
    );
    assert_eq!(
        msg(&o),
        "[metadata.name: Required value: name or generateName is required, metadata.namespace: Forbidden: not allowed on this type]"
    );
}

#[test]
fn invalid_json_is_an_error_not_a_panic() {
    let s = status_schema();
    for body in [&b"{"[..], b"[]", b"null", b"\"x\""] {
        let o = admit(
            &s,
            &AdmitInput {
                operation: Operation::Create,
                object: body,
                old_object: None,
                field_validation: FieldValidation::Warn,
                subresource: "",
                api_version: "g.example.com/v1",
                kind: "K",
                namespaced: true,
            },
        );
        assert_eq!(o.errors.len(), 1);
    }
}

#[test]
fn read_path_applies_new_defaults() {
    // A default added to the schema later shows on GET (KEP-575).
    let s = status_schema();
    let stored = serde_json::to_vec(&json!({"apiVersion": "g.example.com/v1", "kind": "K",
        "metadata": {"name": "a"}, "status": {"phase": "Ready", "junk": 1}}))
    .unwrap();
    let out: Value = serde_json::from_slice(&normalize(&s, &stored)).unwrap();
    assert_eq!(out["status"], json!({"phase": "Ready", "count": 0}));
    assert_eq!(out["metadata"], json!({"name": "a"}));
    assert_eq!(normalize(&s, b"not json"), b"not json".to_vec());
}
