//! Table-driven tests: one case per rule, as JSON fixtures under `tests/fixtures/`, each case
//! naming the upstream test (or spec page) it follows.

use crdplane_validation::{crd_schema, metadata, structural, validate};
use serde_json::Value;

fn load(name: &str) -> Vec<Value> {
    let path = format!("{}/tests/fixtures/{name}", env!("CARGO_MANIFEST_DIR"));
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap().to_string())
        .collect()
}

#[test]
fn cr_validation_table() {
    let cases = load("cr_validation.json");
    assert!(cases.len() >= 40);
    let mut failures = Vec::new();
    for c in &cases {
        let name = c["name"].as_str().unwrap();
        assert!(
            c["upstream"].as_str().is_some_and(|s| !s.is_empty()),
            "{name}"
        );
        let s = structural::compile(&c["schema"]).unwrap();
        let obj = &c["object"];
        let mut got: Vec<String> = validate::validate(&s, obj, "")
            .iter()
            .map(ToString::to_string)
            .collect();
        got.extend(
            metadata::validate_embedded(&s, obj, "")
                .iter()
                .map(ToString::to_string),
        );
        got.extend(
            validate::validate_list_sets_and_maps(&s, obj, "")
                .iter()
                .map(ToString::to_string),
        );
        let want = strings(&c["errors"]);
        if got != want {
            failures.push(format!("{name}:\n  got  {got:#?}\n  want {want:#?}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn crd_schema_table() {
    let cases = load("crd_schema.json");
    assert!(cases.len() >= 25);
    let mut failures = Vec::new();
    for c in &cases {
        let name = c["name"].as_str().unwrap();
        assert!(
            c["upstream"].as_str().is_some_and(|s| !s.is_empty()),
            "{name}"
        );
        let mut got: Vec<String> =
            crd_schema::validate_version_schema(&c["schema"], "spec.versions[0].schema")
                .iter()
                .map(ToString::to_string)
                .collect();
        let mut want = strings(&c["errors"]);
        got.sort();
        want.sort();
        if got != want {
            failures.push(format!("{name}:\n  got  {got:#?}\n  want {want:#?}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn prune_table() {
    let cases = load("prune.json");
    assert!(cases.len() >= 8);
    for c in &cases {
        let name = c["name"].as_str().unwrap();
        let s = structural::compile(&c["schema"]).unwrap();
        let mut obj = c["object"].clone();
        let mut pruned = crdplane_validation::prune::prune(&mut obj, &s);
        pruned.sort();
        assert_eq!(obj, c["expected"], "{name}");
        assert_eq!(pruned, strings(&c["pruned"]), "{name}");
        // idempotent
        assert!(
            crdplane_validation::prune::prune(&mut obj, &s).is_empty(),
            "{name}"
        );
    }
}

#[test]
fn default_table() {
    let cases = load("default.json");
    assert!(cases.len() >= 8);
    for c in &cases {
        let name = c["name"].as_str().unwrap();
        let s = structural::compile(&c["schema"]).unwrap();
        let mut obj = c["object"].clone();
        crdplane_validation::admit::normalize_value(&s, &mut obj);
        assert_eq!(obj, c["expected"], "{name}");
    }
}
