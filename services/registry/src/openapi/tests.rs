//! Structure tests for the published OpenAPI documents, using the CronTab CRD from the
//! spec ("Extend the Kubernetes API with CustomResourceDefinitions" / "Validation").

use prost::Message;
use serde_json::{Value, json};

use super::*;
use crdplane_proto::openapi_v2::{self as v2, non_body_parameter, parameter, parameters_item};

/// An ordinary tenant (not the admin scope).
const TENANT: &str = "t1";
const CRONTAB: &str = "com.example.stable.v1.CronTab";
const CRONTAB_LIST: &str = "com.example.stable.v1.CronTabList";

fn crontab_crd() -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "crontabs.stable.example.com"},
        "spec": {
            "group": "stable.example.com",
            "scope": "Namespaced",
            "names": {"plural": "crontabs", "singular": "crontab", "kind": "CronTab",
                      "listKind": "CronTabList", "shortNames": ["ct"]},
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "subresources": {"status": {}, "scale": {
                    "specReplicasPath": ".spec.replicas",
                    "statusReplicasPath": ".status.replicas"}},
                "schema": {"openAPIV3Schema": {
                    "type": "object",
                    "description": "CronTab runs an image on a schedule",
                    "properties": {
                        "spec": {
                            "type": "object",
                            "required": ["cronSpec", "image"],
                            "properties": {
                                "cronSpec": {"type": "string",
                                    "pattern": "^(\\d+|\\*)(/\\d+)?(\\s+(\\d+|\\*)(/\\d+)?){4}$",
                                    "description": "cron schedule", "example": "* * * * */5"},
                                "image": {"type": "string"},
                                "replicas": {"type": "integer", "minimum": 1, "maximum": 10,
                                             "default": 1},
                                "port": {"x-kubernetes-int-or-string": true},
                                "note": {"type": "string", "nullable": true},
                                "mode": {"type": "string", "enum": ["a", "b"],
                                         "oneOf": [{"pattern": "^a"}, {"pattern": "^b"}]},
                                "tags": {"type": "array", "items": {"type": "string"},
                                         "x-kubernetes-list-type": "set"},
                                "labels": {"type": "object",
                                           "additionalProperties": {"type": "string"}},
                                "template": {"type": "object",
                                             "x-kubernetes-embedded-resource": true,
                                             "properties": {"spec": {"type": "object",
                                                 "x-kubernetes-preserve-unknown-fields": true}}},
                                "raw": {"type": "object",
                                        "x-kubernetes-preserve-unknown-fields": true,
                                        "properties": {"a": {"type": "string"}}}
                            },
                            "x-kubernetes-validations": [{"rule": "self.image != ''"}]
                        },
                        "status": {"type": "object",
                                   "properties": {"replicas": {"type": "integer"}}}
                    }
                }}
            }, {
                "name": "v1beta1", "served": false, "storage": false,
                "schema": {"openAPIV3Schema": {"type": "object"}}
            }]
        }
    })
}

fn cluster_crd() -> Value {
    json!({
        "metadata": {"name": "widgets.example.io"},
        "spec": {
            "group": "example.io",
            "scope": "Cluster",
            "names": {"plural": "widgets", "kind": "Widget"},
            "versions": [{"name": "v1alpha1", "served": true, "storage": true,
                          "schema": {"openAPIV3Schema": {"type": "object",
                              "x-kubernetes-preserve-unknown-fields": true}}}]
        }
    })
}

/// Resolves a local JSON pointer reference (`#/a/b`) inside `doc`.
fn resolve<'a>(doc: &'a Value, r: &str) -> Option<&'a Value> {
    let ptr = r.strip_prefix('#')?;
    doc.pointer(ptr)
}

/// Walks every `$ref` in `doc`; returns the ones that do not resolve.
fn dangling_refs(doc: &Value) -> Vec<String> {
    fn go(doc: &Value, v: &Value, out: &mut Vec<String>, seen: &mut usize) {
        match v {
            Value::Object(m) => {
                if let Some(r) = m.get("$ref").and_then(Value::as_str) {
                    *seen += 1;
                    if resolve(doc, r).is_none() {
                        out.push(r.to_string());
                    }
                }
                for x in m.values() {
                    go(doc, x, out, seen);
                }
            }
            Value::Array(a) => {
                for x in a {
                    go(doc, x, out, seen);
                }
            }
            _ => {}
        }
    }
    let mut out = Vec::new();
    let mut seen = 0;
    go(doc, doc, &mut out, &mut seen);
    assert!(seen > 20, "expected many references, saw {seen}");
    out
}

#[test]
fn builtin_fixture_parses() {
    let b = builtin();
    assert!(
        b.get("definitions")
            .and_then(Value::as_object)
            .is_some_and(|d| d.len() >= 15)
    );
    assert!(
        b.pointer("/paths/~1apis~1apiextensions.k8s.io~1v1~1customresourcedefinitions")
            .is_some()
    );
}

#[test]
fn definition_names_follow_upstream_namer() {
    assert_eq!(
        definition_name("stable.example.com", "v1", "CronTab"),
        CRONTAB
    );
    assert_eq!(
        definition_name("my-group.io", "v2beta1", "X"),
        "io.my-group.v2beta1.X"
    );
}

#[test]
fn v2_has_crontab_definitions_with_gvk() {
    let doc = build_v2(TENANT, &[crontab_crd()]);
    assert_eq!(doc["swagger"], "2.0");
    assert_eq!(
        doc["info"],
        json!({"title": "Kubernetes", "version": "v1.34.0"})
    );
    let d = &doc["definitions"][CRONTAB];
    assert_eq!(
        d["x-kubernetes-group-version-kind"],
        json!([{"group": "stable.example.com", "kind": "CronTab", "version": "v1"}])
    );
    assert_eq!(d["type"], "object");
    assert_eq!(d["description"], "CronTab runs an image on a schedule");
    assert_eq!(
        d["properties"]["metadata"]["$ref"],
        "#/definitions/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
    );
    assert_eq!(d["properties"]["apiVersion"]["type"], "string");
    assert_eq!(d["properties"]["kind"]["type"], "string");
    let spec = &d["properties"]["spec"];
    assert_eq!(spec["properties"]["replicas"]["maximum"], 10);
    assert_eq!(spec["properties"]["replicas"]["default"], 1);
    assert_eq!(
        spec["properties"]["cronSpec"]["description"],
        "cron schedule"
    );
    // Not part of a structural schema: dropped.
    assert!(spec["properties"]["cronSpec"].get("example").is_none());
    assert_eq!(
        spec["x-kubernetes-validations"][0]["rule"],
        "self.image != ''"
    );
    assert_eq!(spec["properties"]["tags"]["x-kubernetes-list-type"], "set");
    assert_eq!(
        spec["properties"]["labels"]["additionalProperties"]["type"],
        "string"
    );

    let list = &doc["definitions"][CRONTAB_LIST];
    assert_eq!(list["description"], "CronTabList is a list of CronTab");
    assert_eq!(list["required"], json!(["items"]));
    assert_eq!(
        list["properties"]["items"]["items"]["$ref"],
        format!("#/definitions/{CRONTAB}")
    );
    assert_eq!(
        list["properties"]["metadata"]["$ref"],
        "#/definitions/io.k8s.apimachinery.pkg.apis.meta.v1.ListMeta"
    );
    assert_eq!(
        list["x-kubernetes-group-version-kind"][0]["kind"],
        "CronTabList"
    );
    // Unserved versions are not published.
    assert!(
        doc["definitions"]
            .get("com.example.stable.v1beta1.CronTab")
            .is_none()
    );
    // The CRD type itself is there for `kubectl explain crd`.
    assert_eq!(
        doc["definitions"]["io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.CustomResourceDefinition"]
            ["x-kubernetes-group-version-kind"][0]["kind"],
        "CustomResourceDefinition"
    );
}

#[test]
fn v2_conversion_follows_to_structural_openapi_v2() {
    let doc = build_v2(TENANT, &[crontab_crd()]);
    let spec = &doc["definitions"][CRONTAB]["properties"]["spec"];
    let p = &spec["properties"];
    // Junctors dropped.
    assert!(p["mode"].get("oneOf").is_none());
    assert_eq!(p["mode"]["enum"], json!(["a", "b"]));
    // int-or-string: no type and, in v2, no anyOf.
    assert!(p["port"].get("anyOf").is_none());
    assert!(p["port"].get("type").is_none());
    assert_eq!(p["port"]["x-kubernetes-int-or-string"], true);
    // nullable: type and nullable removed.
    assert!(p["note"].get("type").is_none());
    assert!(p["note"].get("nullable").is_none());
    // preserve-unknown-fields objects lose properties and type.
    assert!(p["raw"].get("properties").is_none());
    assert!(p["raw"].get("type").is_none());
    // embedded resources get apiVersion/kind/metadata and require kind+apiVersion.
    let t = &p["template"];
    assert_eq!(
        t["properties"]["metadata"]["$ref"],
        "#/definitions/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
    );
    assert_eq!(t["required"], json!(["kind", "apiVersion"]));
    assert!(t["properties"]["spec"].get("type").is_none());
}

#[test]
fn nullable_property_is_no_longer_required_in_v2() {
    let mut crd = crontab_crd();
    crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["required"] =
        json!(["note", "image"]);
    let doc = build_v2(TENANT, &[crd]);
    assert_eq!(
        doc["definitions"][CRONTAB]["properties"]["spec"]["required"],
        json!(["image"])
    );
}

#[test]
fn root_preserve_unknown_fields_publishes_bare_object_in_v2_only() {
    let doc = build_v2(TENANT, &[cluster_crd()]);
    let d = &doc["definitions"]["io.example.v1alpha1.Widget"];
    assert_eq!(
        d,
        &json!({"type": "object", "x-kubernetes-group-version-kind":
            [{"group": "example.io", "kind": "Widget", "version": "v1alpha1"}]})
    );
    let v3 = build_v3_group_version(TENANT, &[cluster_crd()], "example.io", "v1alpha1").unwrap();
    let d3 = &v3["components"]["schemas"]["io.example.v1alpha1.Widget"];
    assert_eq!(d3["x-kubernetes-preserve-unknown-fields"], true);
    assert_eq!(
        d3["properties"]["metadata"]["$ref"],
        "#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
    );
}

#[test]
fn v2_every_ref_resolves() {
    let doc = build_v2(TENANT, &[crontab_crd(), cluster_crd()]);
    assert_eq!(dangling_refs(&doc), Vec::<String>::new());
}

#[test]
fn v2_paths_namespaced() {
    let doc = build_v2(TENANT, &[crontab_crd()]);
    let paths = &doc["paths"];
    let all = &paths["/apis/stable.example.com/v1/crontabs"];
    assert_eq!(
        all["get"]["operationId"],
        "listStableExampleComV1CronTabForAllNamespaces"
    );
    assert_eq!(all["get"]["x-kubernetes-action"], "list");
    let coll = &paths["/apis/stable.example.com/v1/namespaces/{namespace}/crontabs"];
    assert_eq!(
        coll["get"]["operationId"],
        "listStableExampleComV1NamespacedCronTab"
    );
    assert_eq!(
        coll["post"]["operationId"],
        "createStableExampleComV1NamespacedCronTab"
    );
    assert_eq!(coll["post"]["description"], "create a CronTab");
    assert_eq!(
        coll["delete"]["operationId"],
        "deleteStableExampleComV1CollectionNamespacedCronTab"
    );
    assert_eq!(coll["get"]["tags"], json!(["stableExampleCom_v1"]));
    let item = &paths["/apis/stable.example.com/v1/namespaces/{namespace}/crontabs/{name}"];
    for m in ["get", "put", "patch", "delete"] {
        assert_eq!(
            item[m]["x-kubernetes-group-version-kind"],
            json!({"group": "stable.example.com", "kind": "CronTab", "version": "v1"}),
            "{m}"
        );
    }
    assert_eq!(
        item["patch"]["description"],
        "partially update the specified CronTab"
    );
    assert_eq!(
        item["patch"]["consumes"],
        json!([
            "application/json-patch+json",
            "application/merge-patch+json",
            "application/apply-patch+yaml"
        ])
    );
    // kubectl --dry-run=server looks for an inline dryRun query parameter on PATCH.
    let names: Vec<&str> = item["patch"]["parameters"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|p| p.get("name").and_then(Value::as_str))
        .collect();
    assert!(names.contains(&"dryRun"), "{names:?}");
    assert!(names.contains(&"fieldValidation"), "{names:?}");
    // Shared parameters are hoisted to the path item, sorted by name.
    let shared: Vec<Value> = item["parameters"].as_array().unwrap().clone();
    assert_eq!(shared[0]["name"], "name");
    assert_eq!(shared[0]["description"], "name of the CronTab");
    assert_eq!(shared[1]["name"], "namespace");
    assert_eq!(shared[2]["$ref"], "#/parameters/pretty");
    assert_eq!(
        item["get"]["responses"]["200"]["schema"]["$ref"],
        format!("#/definitions/{CRONTAB}")
    );
    assert!(item["get"]["responses"]["401"].is_object());
    let st = &paths["/apis/stable.example.com/v1/namespaces/{namespace}/crontabs/{name}/status"];
    assert_eq!(
        st["patch"]["operationId"],
        "patchStableExampleComV1NamespacedCronTabStatus"
    );
    assert_eq!(
        st["get"]["description"],
        "read status of the specified CronTab"
    );
    let sc = &paths["/apis/stable.example.com/v1/namespaces/{namespace}/crontabs/{name}/scale"];
    assert_eq!(
        sc["get"]["responses"]["200"]["schema"]["$ref"],
        "#/definitions/io.k8s.api.autoscaling.v1.Scale"
    );
}

#[test]
fn v2_paths_cluster_scoped() {
    let doc = build_v2(TENANT, &[cluster_crd()]);
    let item = &doc["paths"]["/apis/example.io/v1alpha1/widgets/{name}"];
    assert_eq!(item["get"]["operationId"], "readExampleIoV1alpha1Widget");
    assert!(
        doc["paths"]
            .get("/apis/example.io/v1alpha1/widgets/{name}/status")
            .is_none()
    );
    let names: Vec<&str> = item["parameters"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|p| p.get("name").and_then(Value::as_str))
        .collect();
    assert!(!names.contains(&"namespace"));
    assert_eq!(
        doc["paths"]["/apis/example.io/v1alpha1/widgets"]["post"]["description"],
        "create a Widget"
    );
}

#[test]
fn malformed_crds_are_skipped_without_panic() {
    let junk = vec![
        json!(null),
        json!({"spec": {"group": "g"}}),
        json!({"spec": {"group": "a.b", "names": {"kind": "K", "plural": "ks"},
                        "versions": [{"name": "v1", "served": true,
                                      "schema": {"openAPIV3Schema": {"properties": 5}}}]}}),
    ];
    let doc = build_v2(TENANT, &junk);
    assert!(doc["definitions"].get("b.a.v1.K").is_some());
    assert_eq!(dangling_refs(&doc), Vec::<String>::new());
    let _ = encode_v2_protobuf(&doc);
    let _ = build_v3_index(TENANT, &junk);
}

#[test]
fn deep_schema_is_bounded() {
    let mut s = json!({"type": "string"});
    // 150 levels (300 JSON nesting levels) exceeds MAX_DEPTH; serde_json's parser
    // already refuses documents nested deeper than 128, so real input is shallower.
    for _ in 0..150 {
        s = json!({"type": "object", "properties": {"a": s}});
    }
    let mut crd = crontab_crd();
    crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"] = s;
    let doc = build_v2(TENANT, &[crd.clone()]);
    let bytes = encode_v2_protobuf(&doc);
    assert!(!bytes.is_empty());
    let v3 = build_v3_group_version(TENANT, &[crd], "stable.example.com", "v1").unwrap();
    // The published schema is cut off at MAX_DEPTH.
    let mut node = &v3["components"]["schemas"][CRONTAB];
    let mut depth = 0;
    while let Some(next) = node.pointer("/properties/a") {
        node = next;
        depth += 1;
    }
    assert!(depth <= schema::MAX_DEPTH + 1, "{depth}");
    assert!(depth >= schema::MAX_DEPTH - 1, "{depth}");
}

#[test]
fn protobuf_roundtrip_keeps_definitions_and_extensions() {
    let doc = build_v2(TENANT, &[crontab_crd()]);
    let bytes = encode_v2_protobuf(&doc);
    let decoded = v2::Document::decode(bytes.as_slice()).expect("decodes");
    assert_eq!(decoded.swagger, "2.0");
    assert_eq!(decoded.info.as_ref().unwrap().version, "v1.34.0");
    let defs = &decoded.definitions.as_ref().unwrap().additional_properties;
    assert_eq!(defs.len(), doc["definitions"].as_object().unwrap().len());
    let ct = defs
        .iter()
        .find(|d| d.name == CRONTAB)
        .unwrap()
        .value
        .as_ref()
        .unwrap();
    assert_eq!(
        ct.r#type.as_ref().unwrap().value,
        vec!["object".to_string()]
    );
    let gvk = ct
        .vendor_extension
        .iter()
        .find(|e| e.name == "x-kubernetes-group-version-kind")
        .unwrap();
    let yaml = &gvk.value.as_ref().unwrap().yaml;
    let parsed: Value = serde_json::from_str(yaml.trim()).unwrap();
    assert_eq!(
        parsed,
        json!([{"group": "stable.example.com", "kind": "CronTab", "version": "v1"}])
    );
    let props = &ct.properties.as_ref().unwrap().additional_properties;
    let meta = props
        .iter()
        .find(|p| p.name == "metadata")
        .unwrap()
        .value
        .as_ref()
        .unwrap();
    assert_eq!(
        meta.r#ref,
        "#/definitions/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
    );
    let spec = props
        .iter()
        .find(|p| p.name == "spec")
        .unwrap()
        .value
        .as_ref()
        .unwrap();
    let sp = &spec.properties.as_ref().unwrap().additional_properties;
    let replicas = sp
        .iter()
        .find(|p| p.name == "replicas")
        .unwrap()
        .value
        .as_ref()
        .unwrap();
    assert_eq!(replicas.maximum, 10.0);
    assert_eq!(replicas.default.as_ref().unwrap().yaml, "1\n");
    let labels = sp
        .iter()
        .find(|p| p.name == "labels")
        .unwrap()
        .value
        .as_ref()
        .unwrap();
    match labels
        .additional_properties
        .as_ref()
        .unwrap()
        .oneof
        .as_ref()
        .unwrap()
    {
        v2::additional_properties_item::Oneof::Schema(s) => {
            assert_eq!(s.r#type.as_ref().unwrap().value, vec!["string".to_string()])
        }
        other => panic!("unexpected {other:?}"),
    }
    let tags = sp
        .iter()
        .find(|p| p.name == "tags")
        .unwrap()
        .value
        .as_ref()
        .unwrap();
    assert_eq!(tags.items.as_ref().unwrap().schema.len(), 1);

    // The PATCH of the CR item path carries the GVK and an inline dryRun query param
    // (what cli-runtime's dry-run verifier looks for).
    let paths = &decoded.paths.as_ref().unwrap().path;
    let item = paths
        .iter()
        .find(|p| p.name == "/apis/stable.example.com/v1/namespaces/{namespace}/crontabs/{name}")
        .unwrap()
        .value
        .as_ref()
        .unwrap();
    let patch = item.patch.as_ref().unwrap();
    let ext = patch
        .vendor_extension
        .iter()
        .find(|e| e.name == "x-kubernetes-group-version-kind")
        .unwrap();
    let gvk: Value = serde_json::from_str(ext.value.as_ref().unwrap().yaml.trim()).unwrap();
    assert_eq!(gvk["kind"], "CronTab");
    let has_dry_run = patch.parameters.iter().any(|p| match &p.oneof {
        Some(parameters_item::Oneof::Parameter(v2::Parameter {
            oneof: Some(parameter::Oneof::NonBodyParameter(nb)),
        })) => matches!(&nb.oneof,
            Some(non_body_parameter::Oneof::QueryParameterSubSchema(q)) if q.name == "dryRun"),
        _ => false,
    });
    assert!(has_dry_run);
    // Path-level path parameters decode as PathParameterSubSchema.
    assert!(item.parameters.iter().any(|p| matches!(&p.oneof,
        Some(parameters_item::Oneof::Parameter(v2::Parameter {
            oneof: Some(parameter::Oneof::NonBodyParameter(v2::NonBodyParameter {
                oneof: Some(non_body_parameter::Oneof::PathParameterSubSchema(pp)) })) }))
        if pp.name == "namespace" && pp.required)));
    // Shared parameter references stay references.
    assert!(item.parameters.iter().any(|p| matches!(&p.oneof,
        Some(parameters_item::Oneof::JsonReference(r)) if r.r#ref == "#/parameters/pretty")));
    let top = &decoded.parameters.as_ref().unwrap().additional_properties;
    assert!(top.iter().any(|p| p.name == "pretty"));
    // Responses.
    let get = item.get.as_ref().unwrap();
    let codes: Vec<&str> = get
        .responses
        .as_ref()
        .unwrap()
        .response_code
        .iter()
        .map(|r| r.name.as_str())
        .collect();
    assert_eq!(codes, vec!["200", "401"]);
}

#[test]
fn v3_index_lists_group_versions_with_sha512_hash() {
    let crds = [crontab_crd(), cluster_crd()];
    let idx = build_v3_index(TENANT, &crds);
    let paths = idx["paths"].as_object().unwrap();
    let keys: Vec<&String> = paths.keys().collect();
    assert_eq!(
        keys,
        vec![
            "api/v1",
            "apis/apiextensions.k8s.io/v1",
            "apis/authentication.k8s.io/v1",
            "apis/authorization.k8s.io/v1",
            "apis/coordination.k8s.io/v1",
            "apis/events.k8s.io/v1",
            "apis/example.io/v1alpha1",
            "apis/rbac.authorization.k8s.io/v1",
            "apis/stable.example.com/v1"
        ]
    );
    let doc = build_v3_group_version(TENANT, &crds, "stable.example.com", "v1").unwrap();
    let hash = v3_etag(&doc);
    assert_eq!(hash.len(), 128);
    assert!(
        hash.chars()
            .all(|c| c.is_ascii_digit() || ('A'..='F').contains(&c))
    );
    assert_eq!(
        paths["apis/stable.example.com/v1"]["serverRelativeURL"],
        format!("/openapi/v3/apis/stable.example.com/v1?hash={hash}")
    );
    // Hash changes when the schema changes.
    let mut changed = crontab_crd();
    changed["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["description"] = json!("x");
    let doc2 = build_v3_group_version(TENANT, &[changed], "stable.example.com", "v1").unwrap();
    assert_ne!(v3_etag(&doc2), hash);
}

#[test]
fn v3_group_version_document() {
    let crds = [crontab_crd()];
    assert!(build_v3_group_version(TENANT, &crds, "stable.example.com", "v1beta1").is_none());
    assert!(build_v3_group_version(TENANT, &crds, "nope.example.com", "v1").is_none());
    let doc = build_v3_group_version(TENANT, &crds, "stable.example.com", "v1").unwrap();
    assert_eq!(doc["openapi"], "3.0.0");
    assert_eq!(dangling_refs(&doc), Vec::<String>::new());
    let schemas = doc["components"]["schemas"].as_object().unwrap();
    for n in [
        CRONTAB,
        CRONTAB_LIST,
        "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta",
        "io.k8s.apimachinery.pkg.apis.meta.v1.ManagedFieldsEntry",
        "io.k8s.apimachinery.pkg.apis.meta.v1.Status",
        "io.k8s.api.autoscaling.v1.Scale",
    ] {
        assert!(schemas.contains_key(n), "{n}");
    }
    // The CRD types belong to the apiextensions document only.
    assert!(
        !schemas
            .keys()
            .any(|k| k.contains("CustomResourceDefinition"))
    );
    let ct = &schemas[CRONTAB];
    assert_eq!(ct["x-kubernetes-group-version-kind"][0]["kind"], "CronTab");
    let p = &ct["properties"]["spec"]["properties"];
    // v3 keeps junctors and nullable, and unfolds int-or-string.
    assert_eq!(
        p["mode"]["oneOf"],
        json!([{"pattern": "^a"}, {"pattern": "^b"}])
    );
    assert_eq!(p["note"]["nullable"], true);
    assert_eq!(p["note"]["type"], "string");
    assert_eq!(
        p["port"]["anyOf"],
        json!([{"type": "integer"}, {"type": "string"}])
    );
    assert_eq!(p["raw"]["properties"]["a"]["type"], "string");
    let item = &doc["paths"]["/apis/stable.example.com/v1/namespaces/{namespace}/crontabs/{name}"];
    let patch = &item["patch"];
    assert_eq!(patch["x-kubernetes-group-version-kind"]["kind"], "CronTab");
    let params = patch["parameters"].as_array().unwrap();
    let fv = params
        .iter()
        .find(|p| p["name"] == "fieldValidation")
        .unwrap();
    assert_eq!(fv["in"], "query");
    assert_eq!(fv["schema"]["type"], "string");
    assert_eq!(
        patch["requestBody"]["content"]["application/merge-patch+json"]["schema"]["$ref"],
        "#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.Patch"
    );
    assert_eq!(patch["requestBody"]["required"], true);
    assert_eq!(
        item["get"]["responses"]["200"]["content"]["application/json"]["schema"]["$ref"],
        format!("#/components/schemas/{CRONTAB}")
    );
    assert!(item["get"].get("produces").is_none());
    // Path-level parameters are inlined (no #/parameters in v3).
    assert!(
        item["parameters"]
            .as_array()
            .unwrap()
            .iter()
            .all(|p| p.get("$ref").is_none())
    );
}

#[test]
fn v3_apiextensions_document() {
    let doc = build_v3_group_version(TENANT, &[], "apiextensions.k8s.io", "v1").unwrap();
    assert_eq!(doc["info"]["title"], "Kubernetes");
    assert_eq!(dangling_refs(&doc), Vec::<String>::new());
    let crd = &doc["components"]["schemas"]["io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.CustomResourceDefinition"];
    assert_eq!(
        crd["x-kubernetes-group-version-kind"][0]["kind"],
        "CustomResourceDefinition"
    );
    let item = &doc["paths"]["/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}"];
    assert_eq!(item["patch"]["x-kubernetes-action"], "patch");
    assert!(
        item["patch"]["parameters"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["name"] == "fieldValidation")
    );
}

#[test]
fn v3_documents_match_individual_builders() {
    let crds = [crontab_crd(), cluster_crd()];
    let all = build_v3_documents(TENANT, &crds);
    assert_eq!(all.index, build_v3_index(TENANT, &crds));
    let gv = &all.group_versions["apis/stable.example.com/v1"];
    let doc = build_v3_group_version(TENANT, &crds, "stable.example.com", "v1").unwrap();
    assert_eq!(gv.json, doc.to_string().into_bytes());
    assert_eq!(gv.hash, v3_etag(&doc));
    assert_eq!(gv.hash, compute_etag(&gv.json));
    // sha512("") in kube-openapi's uppercase form.
    assert!(
        compute_etag(b"")
            .starts_with("CF83E1357EEFB8BDF1542850D66D8007D620E4050B5715DC83F4A921D36CE9CE")
    );
}

#[test]
fn v2_has_the_builtin_types_with_upstream_descriptions() {
    let doc = build_v2(TENANT, &[]);
    let defs = &doc["definitions"];
    for (name, kind, group) in [
        ("io.k8s.api.core.v1.ConfigMap", "ConfigMap", ""),
        ("io.k8s.api.core.v1.ConfigMapList", "ConfigMapList", ""),
        ("io.k8s.api.core.v1.Secret", "Secret", ""),
        ("io.k8s.api.core.v1.ServiceAccount", "ServiceAccount", ""),
        ("io.k8s.api.core.v1.Event", "Event", ""),
        ("io.k8s.api.events.v1.Event", "Event", "events.k8s.io"),
        (
            "io.k8s.api.events.v1.EventList",
            "EventList",
            "events.k8s.io",
        ),
        (
            "io.k8s.api.coordination.v1.Lease",
            "Lease",
            "coordination.k8s.io",
        ),
        (
            "io.k8s.api.coordination.v1.LeaseList",
            "LeaseList",
            "coordination.k8s.io",
        ),
        (
            "io.k8s.api.rbac.v1.Role",
            "Role",
            "rbac.authorization.k8s.io",
        ),
        (
            "io.k8s.api.rbac.v1.ClusterRoleBindingList",
            "ClusterRoleBindingList",
            "rbac.authorization.k8s.io",
        ),
    ] {
        assert_eq!(
            defs[name]["x-kubernetes-group-version-kind"],
            json!([{"group": group, "kind": kind, "version": "v1"}]),
            "{name}"
        );
    }
    for name in [
        "io.k8s.api.core.v1.ObjectReference",
        "io.k8s.api.core.v1.EventSource",
        "io.k8s.api.core.v1.LocalObjectReference",
        "io.k8s.api.events.v1.EventSeries",
        "io.k8s.api.coordination.v1.LeaseSpec",
    ] {
        assert!(defs[name].is_object(), "{name}");
    }
    assert_eq!(
        defs["io.k8s.api.core.v1.ConfigMap"]["properties"]["data"]["description"],
        "Data contains the configuration data. Each key must consist of alphanumeric characters, '-', '_' or '.'. Values with non-UTF-8 byte sequences must use the BinaryData field. The keys stored in Data must not overlap with the keys in the BinaryData field, this is enforced during validation process."
    );
    let spec = &defs["io.k8s.api.coordination.v1.Lease"]["properties"]["spec"];
    assert_eq!(
        spec["$ref"],
        "#/definitions/io.k8s.api.coordination.v1.LeaseSpec"
    );
    assert!(
        spec["description"]
            .as_str()
            .unwrap()
            .starts_with("spec contains")
    );
    // Upstream's `required` (k8s-openapi's own marks metadata required everywhere).
    assert!(
        defs["io.k8s.api.core.v1.ConfigMap"]
            .get("required")
            .is_none()
    );
    assert!(
        defs["io.k8s.api.coordination.v1.Lease"]
            .get("required")
            .is_none()
    );
    assert_eq!(
        defs["io.k8s.api.events.v1.Event"]["required"],
        json!(["eventTime"])
    );
    assert_eq!(
        defs["io.k8s.api.core.v1.Event"]["required"],
        json!(["metadata", "involvedObject"])
    );
    let secrets = &defs["io.k8s.api.core.v1.ServiceAccount"]["properties"]["secrets"];
    assert_eq!(secrets["x-kubernetes-patch-strategy"], "merge");
    assert_eq!(secrets["x-kubernetes-patch-merge-key"], "name");
    assert_eq!(
        defs["io.k8s.api.core.v1.ObjectReference"]["x-kubernetes-map-type"],
        "atomic"
    );
    assert!(dangling_refs(&doc).is_empty(), "{:?}", dangling_refs(&doc));

    // The endpoints, from the same path builder as the CRDs'.
    let cms = &doc["paths"]["/api/v1/namespaces/{namespace}/configmaps"];
    assert_eq!(cms["get"]["operationId"], "listCoreV1NamespacedConfigMap");
    assert_eq!(cms["get"]["tags"], json!(["core_v1"]));
    assert_eq!(
        cms["post"]["x-kubernetes-group-version-kind"],
        json!({"group": "", "kind": "ConfigMap", "version": "v1"})
    );
    assert_eq!(
        doc["paths"]["/api/v1/configmaps"]["get"]["operationId"],
        "listCoreV1ConfigMapForAllNamespaces"
    );
    let lease = &doc["paths"]["/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases/{name}"];
    assert_eq!(
        lease["get"]["operationId"],
        "readCoordinationV1NamespacedLease"
    );
    assert!(
        doc["paths"]["/apis/events.k8s.io/v1/namespaces/{namespace}/events"]["post"].is_object()
    );
    // The protobuf form carries them too (kubectl 1.20 reads only that).
    let bytes = encode_v2_protobuf(&doc);
    let decoded = v2::Document::decode(bytes.as_slice()).unwrap();
    let names: Vec<&str> = decoded
        .definitions
        .as_ref()
        .unwrap()
        .additional_properties
        .iter()
        .map(|d| d.name.as_str())
        .collect();
    assert!(names.contains(&"io.k8s.api.coordination.v1.Lease"));
    assert!(names.contains(&"io.k8s.api.rbac.v1.ClusterRole"));
    // Cluster-scoped built-ins have no namespaced paths.
    let crs = "/apis/rbac.authorization.k8s.io/v1/clusterroles/{name}";
    assert_eq!(
        doc["paths"][crs]["get"]["operationId"],
        "readRbacAuthorizationV1ClusterRole"
    );
    assert!(
        doc["paths"]
            .as_object()
            .unwrap()
            .keys()
            .all(|p| !p.contains("namespaces/{namespace}/clusterrole"))
    );
    assert_eq!(
        doc["paths"]["/apis/rbac.authorization.k8s.io/v1/namespaces/{namespace}/rolebindings"]["post"]
            ["operationId"],
        "createRbacAuthorizationV1NamespacedRoleBinding"
    );
}

#[test]
fn v3_builtin_group_versions() {
    let docs = build_v3_documents(TENANT, &[]);
    let core = build_v3_group_version(TENANT, &[], "", "v1").unwrap();
    assert_eq!(
        docs.group_versions["api/v1"].json,
        serde_json::to_vec(&core).unwrap()
    );
    assert_eq!(core["info"]["title"], "Kubernetes");
    let schemas = &core["components"]["schemas"];
    let cm = &schemas["io.k8s.api.core.v1.ConfigMap"];
    assert_eq!(
        cm["properties"]["metadata"]["allOf"],
        json!([{"$ref": "#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"}])
    );
    assert!(cm["properties"]["metadata"]["description"].is_string());
    assert!(schemas["io.k8s.api.core.v1.ServiceAccountList"].is_object());
    assert!(schemas["io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"].is_object());
    assert!(core["paths"]["/api/v1/namespaces/{namespace}/secrets/{name}"].is_object());
    assert!(
        core["paths"]
            .as_object()
            .unwrap()
            .keys()
            .all(|p| p.starts_with("/api/v1/"))
    );
    let leases = build_v3_group_version(TENANT, &[], "coordination.k8s.io", "v1").unwrap();
    assert!(
        leases["components"]["schemas"]["io.k8s.api.coordination.v1.LeaseSpec"]["properties"]
            ["holderIdentity"]["description"]
            .as_str()
            .unwrap()
            .starts_with("holderIdentity contains the identity")
    );
    let events = build_v3_group_version(TENANT, &[], "events.k8s.io", "v1").unwrap();
    let ev = &events["components"]["schemas"];
    assert!(ev["io.k8s.api.events.v1.EventSeries"].is_object());
    assert!(ev["io.k8s.api.core.v1.ObjectReference"].is_object());
    let rbac = build_v3_group_version(TENANT, &[], "rbac.authorization.k8s.io", "v1").unwrap();
    let rs = &rbac["components"]["schemas"];
    assert_eq!(
        rs["io.k8s.api.rbac.v1.PolicyRule"]["properties"]["verbs"]["x-kubernetes-list-type"],
        "atomic"
    );
    assert_eq!(
        rs["io.k8s.api.rbac.v1.RoleRef"]["x-kubernetes-map-type"],
        "atomic"
    );
    assert!(rs["io.k8s.apimachinery.pkg.apis.meta.v1.LabelSelector"].is_object());
    assert!(
        rbac["paths"]["/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/{name}"].is_object()
    );
    for doc in [&core, &leases, &events, &rbac] {
        let mut refs = Vec::new();
        convert_v3::collect_refs(doc, &mut refs);
        for r in refs {
            assert!(doc["components"]["schemas"][&r].is_object(), "{r}");
        }
    }
}

#[test]
fn etags_change_with_the_tenants_crds_beside_the_builtin_types() {
    let bare = build_v2(TENANT, &[]);
    let with = build_v2(TENANT, &[crontab_crd()]);
    assert_ne!(
        compute_etag(bare.to_string().as_bytes()),
        compute_etag(with.to_string().as_bytes())
    );
    assert!(with["definitions"]["io.k8s.api.core.v1.ConfigMap"].is_object());
    let (a, b) = (
        build_v3_index(TENANT, &[]),
        build_v3_index(TENANT, &[crontab_crd()]),
    );
    assert_ne!(a, b);
    // The built-in group-versions' documents do not depend on the CRDs.
    assert_eq!(a["paths"]["api/v1"], b["paths"]["api/v1"]);
}

const TENANT_DEF: &str = "io.crdplane.v1alpha1.Tenant";
const TENANT_LIST_DEF: &str = "io.crdplane.v1alpha1.TenantList";
const TENANTS: &str = "/apis/crdplane.io/v1alpha1/tenants";
const TENANT_ITEM: &str = "/apis/crdplane.io/v1alpha1/tenants/{name}";

/// Names of an operation's parameters, its path item's included (references resolved).
fn param_names(item: &Value, method: &str) -> Vec<String> {
    let shared = item["parameters"].as_array().into_iter().flatten();
    let own = item[method]["parameters"].as_array().into_iter().flatten();
    shared
        .chain(own)
        .map(|p| {
            let p = paths::resolve_param(p);
            p.get("name")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string()
        })
        .collect()
}

#[test]
fn admin_scope_v2_has_the_tenant_type() {
    let doc = build_v2(tenants::ADMIN_SCOPE, &[crontab_crd()]);
    let defs = &doc["definitions"];
    assert_eq!(
        definition_name("crdplane.io", "v1alpha1", "Tenant"),
        TENANT_DEF
    );
    let t = &defs[TENANT_DEF];
    assert_eq!(
        t["x-kubernetes-group-version-kind"],
        json!([{"group": "crdplane.io", "kind": "Tenant", "version": "v1alpha1"}])
    );
    assert_eq!(t["type"], "object");
    let props = t["properties"].as_object().unwrap();
    let mut keys: Vec<&str> = props.keys().map(String::as_str).collect();
    keys.sort_unstable();
    assert_eq!(keys, ["apiVersion", "kind", "metadata", "spec", "status"]);
    assert_eq!(t["properties"]["apiVersion"]["type"], "string");
    assert_eq!(
        t["properties"]["metadata"]["$ref"],
        "#/definitions/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
    );
    assert_eq!(
        t["properties"]["spec"]["$ref"],
        "#/definitions/io.crdplane.v1alpha1.TenantSpec"
    );
    let owners = &defs["io.crdplane.v1alpha1.TenantSpec"]["properties"]["owners"];
    assert_eq!(owners["type"], "array");
    assert_eq!(
        owners["items"]["$ref"],
        "#/definitions/io.k8s.api.rbac.v1.Subject"
    );
    assert!(
        owners["description"]
            .as_str()
            .unwrap()
            .contains("crdplane:tenant-owners")
    );
    assert_eq!(
        t["properties"]["status"]["$ref"],
        "#/definitions/io.crdplane.v1alpha1.TenantStatus"
    );
    let phase = &defs["io.crdplane.v1alpha1.TenantStatus"]["properties"]["phase"];
    assert_eq!(phase["type"], "string");
    assert!(
        phase["description"]
            .as_str()
            .unwrap()
            .contains("Terminating")
    );
    let list = &defs[TENANT_LIST_DEF];
    assert_eq!(
        list["x-kubernetes-group-version-kind"],
        json!([{"group": "crdplane.io", "kind": "TenantList", "version": "v1alpha1"}])
    );
    assert_eq!(list["required"], json!(["items"]));
    assert_eq!(
        list["properties"]["items"]["items"]["$ref"],
        format!("#/definitions/{TENANT_DEF}")
    );
    assert_eq!(
        list["properties"]["metadata"]["$ref"],
        "#/definitions/io.k8s.apimachinery.pkg.apis.meta.v1.ListMeta"
    );
    assert!(dangling_refs(&doc).is_empty(), "{:?}", dangling_refs(&doc));

    // Endpoints of every served verb (cluster-scoped; no deletecollection).
    let collection = &doc["paths"][TENANTS];
    let methods: Vec<&String> = collection
        .as_object()
        .unwrap()
        .keys()
        .filter(|k| *k != "parameters")
        .collect();
    assert_eq!(methods, ["get", "post"]);
    assert_eq!(
        collection["get"]["operationId"],
        "listCrdplaneIoV1alpha1Tenant"
    );
    assert_eq!(collection["get"]["x-kubernetes-action"], "list");
    assert_eq!(
        collection["get"]["responses"]["200"]["schema"]["$ref"],
        format!("#/definitions/{TENANT_LIST_DEF}")
    );
    let list_params = param_names(collection, "get");
    for p in ["watch", "resourceVersion", "labelSelector", "continue"] {
        assert!(list_params.iter().any(|n| n == p), "{p}: {list_params:?}");
    }
    assert_eq!(
        collection["post"]["operationId"],
        "createCrdplaneIoV1alpha1Tenant"
    );
    assert_eq!(
        collection["post"]["x-kubernetes-group-version-kind"],
        json!({"group": "crdplane.io", "kind": "Tenant", "version": "v1alpha1"})
    );
    let item = &doc["paths"][TENANT_ITEM];
    for (method, op) in [
        ("get", "readCrdplaneIoV1alpha1Tenant"),
        ("put", "replaceCrdplaneIoV1alpha1Tenant"),
        ("delete", "deleteCrdplaneIoV1alpha1Tenant"),
        ("patch", "patchCrdplaneIoV1alpha1Tenant"),
    ] {
        assert_eq!(item[method]["operationId"], op);
        assert_eq!(item[method]["tags"], json!(["crdplaneIo_v1alpha1"]));
        assert_eq!(
            item[method]["x-kubernetes-group-version-kind"]["kind"],
            "Tenant"
        );
    }
    assert!(
        doc["paths"]
            .as_object()
            .unwrap()
            .keys()
            .filter(|p| p.contains("crdplane.io"))
            .all(|p| p == TENANTS || p == TENANT_ITEM)
    );

    // The rest of the document is every tenant's.
    let mut rest = doc.clone();
    let other = build_v2(TENANT, &[crontab_crd()]);
    for name in [
        TENANT_DEF,
        TENANT_LIST_DEF,
        "io.crdplane.v1alpha1.TenantSpec",
        "io.crdplane.v1alpha1.TenantStatus",
    ] {
        rest["definitions"].as_object_mut().unwrap().remove(name);
    }
    for p in [TENANTS, TENANT_ITEM] {
        rest["paths"].as_object_mut().unwrap().remove(p);
    }
    assert_eq!(rest, other);

    // The protobuf form (kubectl 1.20) carries them too.
    let decoded = v2::Document::decode(encode_v2_protobuf(&doc).as_slice()).unwrap();
    let defs = &decoded.definitions.as_ref().unwrap().additional_properties;
    assert_eq!(defs.len(), doc["definitions"].as_object().unwrap().len());
    let t = defs
        .iter()
        .find(|d| d.name == TENANT_DEF)
        .unwrap()
        .value
        .as_ref()
        .unwrap();
    let gvk = t
        .vendor_extension
        .iter()
        .find(|e| e.name == "x-kubernetes-group-version-kind")
        .unwrap();
    let gvk: Value = serde_json::from_str(gvk.value.as_ref().unwrap().yaml.trim()).unwrap();
    assert_eq!(gvk[0]["kind"], "Tenant");
    let spec = defs
        .iter()
        .find(|d| d.name == "io.crdplane.v1alpha1.TenantSpec")
        .unwrap()
        .value
        .as_ref()
        .unwrap();
    let owners = spec
        .properties
        .as_ref()
        .unwrap()
        .additional_properties
        .iter()
        .find(|p| p.name == "owners")
        .unwrap()
        .value
        .as_ref()
        .unwrap();
    assert_eq!(
        owners.items.as_ref().unwrap().schema[0].r#ref,
        "#/definitions/io.k8s.api.rbac.v1.Subject"
    );
    let paths = &decoded.paths.as_ref().unwrap().path;
    let item = paths
        .iter()
        .find(|p| p.name == TENANT_ITEM)
        .unwrap()
        .value
        .as_ref()
        .unwrap();
    assert_eq!(
        item.patch.as_ref().unwrap().operation_id,
        "patchCrdplaneIoV1alpha1Tenant"
    );
    assert!(paths.iter().any(|p| p.name == TENANTS));
}

#[test]
fn admin_scope_v3_has_the_tenant_group_version() {
    let admin = tenants::ADMIN_SCOPE;
    let docs = build_v3_documents(admin, &[crontab_crd()]);
    let key = "apis/crdplane.io/v1alpha1";
    let doc = build_v3_group_version(admin, &[crontab_crd()], "crdplane.io", "v1alpha1").unwrap();
    let gv = &docs.group_versions[key];
    assert_eq!(gv.json, serde_json::to_vec(&doc).unwrap());
    assert_eq!(
        docs.index["paths"][key]["serverRelativeURL"],
        format!("/openapi/v3/{key}?hash={}", gv.hash)
    );
    assert_eq!(docs.index, build_v3_index(admin, &[crontab_crd()]));
    assert_eq!(doc["info"]["title"], "Kubernetes");
    assert_eq!(dangling_refs(&doc), Vec::<String>::new());
    let schemas = &doc["components"]["schemas"];
    for n in [
        TENANT_DEF,
        TENANT_LIST_DEF,
        "io.crdplane.v1alpha1.TenantSpec",
        "io.crdplane.v1alpha1.TenantStatus",
        "io.k8s.api.rbac.v1.Subject",
        "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta",
        "io.k8s.apimachinery.pkg.apis.meta.v1.Status",
    ] {
        assert!(schemas[n].is_object(), "{n}");
    }
    let t = &schemas[TENANT_DEF];
    assert_eq!(t["x-kubernetes-group-version-kind"][0]["kind"], "Tenant");
    assert_eq!(
        t["properties"]["spec"]["allOf"],
        json!([{"$ref": "#/components/schemas/io.crdplane.v1alpha1.TenantSpec"}])
    );
    assert_eq!(
        schemas["io.crdplane.v1alpha1.TenantSpec"]["properties"]["owners"]["items"]["$ref"],
        "#/components/schemas/io.k8s.api.rbac.v1.Subject"
    );
    let paths: Vec<&String> = doc["paths"].as_object().unwrap().keys().collect();
    assert_eq!(paths, [TENANTS, TENANT_ITEM]);
    assert_eq!(
        doc["paths"][TENANT_ITEM]["get"]["responses"]["200"]["content"]["application/json"]["schema"]
            ["$ref"],
        format!("#/components/schemas/{TENANT_DEF}")
    );
    // The other group-versions are every tenant's.
    let other = build_v3_documents(TENANT, &[crontab_crd()]);
    let mut index = docs.index.clone();
    index["paths"].as_object_mut().unwrap().remove(key);
    assert_eq!(index, other.index);
}

#[test]
fn other_tenants_documents_do_not_mention_crdplane_io() {
    for tenant in [TENANT, "", "root2", "Root"] {
        for crds in [vec![], vec![crontab_crd(), cluster_crd()]] {
            let v2 = build_v2(tenant, &crds).to_string();
            assert!(!v2.contains("crdplane"), "{tenant}");
            let docs = build_v3_documents(tenant, &crds);
            assert!(!docs.index.to_string().contains("crdplane"), "{tenant}");
            for (k, gv) in &docs.group_versions {
                let json = String::from_utf8_lossy(&gv.json);
                assert!(!json.contains("crdplane"), "{tenant} {k}");
            }
            assert!(build_v3_group_version(tenant, &crds, "crdplane.io", "v1alpha1").is_none());
        }
    }
}
