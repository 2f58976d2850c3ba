//! Generator of the golden built-in type definitions (`builtin/definitions.json`), compiled
//! for tests only. The schemas are the JSON Schemas k8s-openapi's `schemars` feature
//! derives from upstream's OpenAPI (upstream's field descriptions), rendered as the
//! Swagger 2.0 definitions kube-apiserver publishes (`api/openapi-spec/swagger.json` of
//! kubernetes/kubernetes): `#/definitions/<name>` references with a sibling
//! `description`, `x-kubernetes-group-version-kind` on every kind, the `<Kind>List`
//! definitions (k8s-openapi models lists generically), and the `x-kubernetes-*`
//! extensions upstream's markers produce (`+patchStrategy`/`+patchMergeKey`,
//! `+structType=atomic`, `+listType=atomic` in k8s.io/api `core/v1/types.go`,
//! `rbac/v1/types.go` and apimachinery's `meta/v1/types.go` for LabelSelector), which
//! k8s-openapi's schemas do not carry. Definitions the hand-written fixture (`fixtures/builtin_v2.json`) already
//! has (ObjectMeta and what it references) are left to it.
//!
//! Rewrite the golden file with
//! `CRDPLANE_BLESS=1 cargo test -p crdplane-registry --lib openapi::builtin_gen`;
//! without the variable the same test fails while the checked-in file is stale.

use crdplane_core::builtin::BUILTIN;
use k8s_openapi::api::{authentication, authorization, coordination, core, events, rbac};
use k8s_openapi::schemars::{JsonSchema, SchemaGenerator, generate::SchemaSettings};
use serde_json::{Map, Value, json};

const GOLDEN: &str = "src/openapi/builtin/definitions.json";
const LIST_META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.ListMeta";
const META_MORE: &str = "Standard list metadata. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata";
const KINDS_MORE: &str = "Standard list metadata. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#types-kinds";

/// Descriptions of the list kinds, of their `items` and `metadata`, from the comments on the
/// `<Kind>List` types of k8s.io/api core/v1, events/v1, coordination/v1 and rbac/v1
/// `types.go`.
const LISTS: &[(&str, &str, &str, &str)] = &[
    (
        "io.k8s.api.core.v1.ConfigMapList",
        "ConfigMapList is a resource containing a list of ConfigMap objects.",
        "Items is the list of ConfigMaps.",
        META_MORE,
    ),
    (
        "io.k8s.api.core.v1.SecretList",
        "SecretList is a list of Secret.",
        "Items is a list of secret objects. More info: https://kubernetes.io/docs/concepts/configuration/secret",
        KINDS_MORE,
    ),
    (
        "io.k8s.api.core.v1.ServiceAccountList",
        "ServiceAccountList is a list of ServiceAccount objects",
        "List of ServiceAccounts. More info: https://kubernetes.io/docs/tasks/configure-pod-container/configure-service-account/",
        KINDS_MORE,
    ),
    (
        "io.k8s.api.core.v1.EventList",
        "EventList is a list of events.",
        "List of events",
        KINDS_MORE,
    ),
    (
        "io.k8s.api.events.v1.EventList",
        "EventList is a list of Event objects.",
        "items is a list of schema objects.",
        META_MORE,
    ),
    (
        "io.k8s.api.coordination.v1.LeaseList",
        "LeaseList is a list of Lease objects.",
        "items is a list of schema objects.",
        META_MORE,
    ),
    (
        "io.k8s.api.rbac.v1.ClusterRoleBindingList",
        "ClusterRoleBindingList is a collection of ClusterRoleBindings",
        "Items is a list of ClusterRoleBindings",
        RBAC_LIST_META,
    ),
    (
        "io.k8s.api.rbac.v1.ClusterRoleList",
        "ClusterRoleList is a collection of ClusterRoles",
        "Items is a list of ClusterRoles",
        RBAC_LIST_META,
    ),
    (
        "io.k8s.api.rbac.v1.RoleBindingList",
        "RoleBindingList is a collection of RoleBindings",
        "Items is a list of RoleBindings",
        RBAC_LIST_META,
    ),
    (
        "io.k8s.api.rbac.v1.RoleList",
        "RoleList is a collection of Roles",
        "Items is a list of Roles",
        RBAC_LIST_META,
    ),
];
/// The rbac/v1 lists' `metadata` description.
const RBAC_LIST_META: &str = "Standard object's metadata.";

/// `required` of the kinds as upstream publishes it (fields without `omitempty` in
/// `types.go`). k8s-openapi marks `metadata` required on every resource type (its Rust
/// field is not optional), and `name` of LocalObjectReference (`+optional`, `+default=""`
/// upstream), and leaves events/v1 `eventTime` optional.
const REQUIRED: &[(&str, &[&str])] = &[
    ("io.k8s.api.core.v1.ConfigMap", &[]),
    ("io.k8s.api.core.v1.Secret", &[]),
    ("io.k8s.api.core.v1.ServiceAccount", &[]),
    ("io.k8s.api.core.v1.Event", &["metadata", "involvedObject"]),
    ("io.k8s.api.events.v1.Event", &["eventTime"]),
    ("io.k8s.api.coordination.v1.Lease", &[]),
    ("io.k8s.api.core.v1.LocalObjectReference", &[]),
    ("io.k8s.api.rbac.v1.Role", &[]),
    ("io.k8s.api.rbac.v1.ClusterRole", &[]),
    ("io.k8s.api.rbac.v1.RoleBinding", &["roleRef"]),
    ("io.k8s.api.rbac.v1.ClusterRoleBinding", &["roleRef"]),
    ("io.k8s.api.rbac.v1.PolicyRule", &["verbs"]),
    ("io.k8s.api.rbac.v1.RoleRef", &["apiGroup", "kind", "name"]),
    ("io.k8s.api.rbac.v1.Subject", &["kind", "name"]),
    // authentication/v1 and authorization/v1 `types.go`: the reviews require their spec
    // (SelfSubjectReview has none), not their metadata.
    ("io.k8s.api.authentication.v1.SelfSubjectReview", &[]),
    (
        "io.k8s.api.authorization.v1.LocalSubjectAccessReview",
        &["spec"],
    ),
    (
        "io.k8s.api.authorization.v1.SelfSubjectAccessReview",
        &["spec"],
    ),
    (
        "io.k8s.api.authorization.v1.SelfSubjectRulesReview",
        &["spec"],
    ),
    ("io.k8s.api.authorization.v1.SubjectAccessReview", &["spec"]),
    (
        "io.k8s.apimachinery.pkg.apis.meta.v1.LabelSelectorRequirement",
        &["key", "operator"],
    ),
];

/// Vendor extensions from upstream's markers: (definition, property or "" for the
/// definition itself, key, value).
fn extensions() -> Vec<(&'static str, &'static str, &'static str, Value)> {
    let atomic_list = |def: &'static str, prop: &'static str| {
        (def, prop, "x-kubernetes-list-type", json!("atomic"))
    };
    let mut out = vec![
        // `// +structType=atomic` on ObjectReference and LocalObjectReference.
        (
            "io.k8s.api.core.v1.ObjectReference",
            "",
            "x-kubernetes-map-type",
            json!("atomic"),
        ),
        (
            "io.k8s.api.core.v1.LocalObjectReference",
            "",
            "x-kubernetes-map-type",
            json!("atomic"),
        ),
        // ServiceAccount.Secrets: `patchStrategy:"merge" patchMergeKey:"name"`.
        (
            "io.k8s.api.core.v1.ServiceAccount",
            "secrets",
            "x-kubernetes-patch-merge-key",
            json!("name"),
        ),
        (
            "io.k8s.api.core.v1.ServiceAccount",
            "secrets",
            "x-kubernetes-patch-strategy",
            json!("merge"),
        ),
        // rbac/v1: `+structType=atomic` on RoleRef and Subject, `+listType=atomic` on every
        // list; meta/v1 LabelSelector: `+structType=atomic`, atomic lists.
        (
            "io.k8s.api.rbac.v1.RoleRef",
            "",
            "x-kubernetes-map-type",
            json!("atomic"),
        ),
        (
            "io.k8s.api.rbac.v1.Subject",
            "",
            "x-kubernetes-map-type",
            json!("atomic"),
        ),
        (
            "io.k8s.apimachinery.pkg.apis.meta.v1.LabelSelector",
            "",
            "x-kubernetes-map-type",
            json!("atomic"),
        ),
    ];
    for prop in [
        "verbs",
        "apiGroups",
        "resources",
        "resourceNames",
        "nonResourceURLs",
    ] {
        out.push(atomic_list("io.k8s.api.rbac.v1.PolicyRule", prop));
    }
    out.extend([
        atomic_list("io.k8s.api.rbac.v1.Role", "rules"),
        atomic_list("io.k8s.api.rbac.v1.ClusterRole", "rules"),
        atomic_list("io.k8s.api.rbac.v1.RoleBinding", "subjects"),
        atomic_list("io.k8s.api.rbac.v1.ClusterRoleBinding", "subjects"),
        atomic_list("io.k8s.api.rbac.v1.AggregationRule", "clusterRoleSelectors"),
        atomic_list(
            "io.k8s.apimachinery.pkg.apis.meta.v1.LabelSelector",
            "matchExpressions",
        ),
        atomic_list(
            "io.k8s.apimachinery.pkg.apis.meta.v1.LabelSelectorRequirement",
            "values",
        ),
    ]);
    out
}

fn generate() -> Map<String, Value> {
    let mut settings = SchemaSettings::draft07();
    settings.definitions_path = "/definitions".into();
    settings.meta_schema = None;
    let mut generator = SchemaGenerator::new(settings);
    fn add<T: JsonSchema>(g: &mut SchemaGenerator) {
        let _ = g.subschema_for::<T>();
    }
    add::<core::v1::ConfigMap>(&mut generator);
    add::<core::v1::Secret>(&mut generator);
    add::<core::v1::ServiceAccount>(&mut generator);
    add::<core::v1::Event>(&mut generator);
    add::<events::v1::Event>(&mut generator);
    add::<coordination::v1::Lease>(&mut generator);
    add::<rbac::v1::Role>(&mut generator);
    add::<rbac::v1::ClusterRole>(&mut generator);
    add::<rbac::v1::RoleBinding>(&mut generator);
    add::<rbac::v1::ClusterRoleBinding>(&mut generator);
    add::<authentication::v1::SelfSubjectReview>(&mut generator);
    add::<authorization::v1::LocalSubjectAccessReview>(&mut generator);
    add::<authorization::v1::SelfSubjectAccessReview>(&mut generator);
    add::<authorization::v1::SelfSubjectRulesReview>(&mut generator);
    add::<authorization::v1::SubjectAccessReview>(&mut generator);
    generator.take_definitions(true)
}

/// schemars' `{"allOf": [{"$ref": X}], "description": …}` → Swagger 2.0's
/// `{"$ref": X, "description": …}` (kube-openapi's v2 form of a described reference).
fn v2_refs(v: &mut Value) {
    match v {
        Value::Object(m) => {
            let single_ref = m
                .get("allOf")
                .and_then(Value::as_array)
                .filter(|a| a.len() == 1)
                .and_then(|a| a[0].get("$ref"))
                .cloned();
            if let Some(r) = single_ref {
                m.remove("allOf");
                m.insert("$ref".into(), r);
            }
            for x in m.values_mut() {
                v2_refs(x);
            }
        }
        Value::Array(a) => a.iter_mut().for_each(v2_refs),
        _ => {}
    }
}

/// The golden definitions object.
pub(super) fn render() -> Value {
    let fixture = super::builtin()
        .get("definitions")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    let mut defs: Map<String, Value> = generate()
        .into_iter()
        .filter(|(name, _)| !fixture.contains_key(name))
        .collect();
    for d in defs.values_mut() {
        v2_refs(d);
    }
    for b in BUILTIN {
        let gvk = json!([{"group": b.group, "kind": b.kind, "version": b.version}]);
        let gvk_list = json!([{"group": b.group, "kind": b.list_kind, "version": b.version}]);
        if let Some(d) = defs.get_mut(&super::builtin_definition_name(b, b.kind)) {
            d["x-kubernetes-group-version-kind"] = gvk;
        }
        let list = super::builtin_definition_name(b, b.list_kind);
        let (_, desc, items_desc, meta_desc) = LISTS
            .iter()
            .find(|l| l.0 == list)
            .expect("every list kind has its descriptions");
        defs.insert(
            list,
            json!({
                "description": desc,
                "properties": {
                    "apiVersion": {
                        "description": "APIVersion defines the versioned schema of this representation of an object. Servers should convert recognized schemas to the latest internal value, and may reject unrecognized values. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#resources",
                        "type": "string",
                    },
                    "items": {
                        "description": items_desc,
                        "items": {"$ref": format!("#/definitions/{}", super::builtin_definition_name(b, b.kind))},
                        "type": "array",
                    },
                    "kind": {
                        "description": "Kind is a string value representing the REST resource this object represents. Servers may infer this from the endpoint the client submits requests to. Cannot be updated. In CamelCase. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#types-kinds",
                        "type": "string",
                    },
                    "metadata": {
                        "$ref": format!("#/definitions/{LIST_META}"),
                        "description": meta_desc,
                    },
                },
                "required": ["items"],
                "type": "object",
                "x-kubernetes-group-version-kind": gvk_list,
            }),
        );
    }
    for r in super::published_reviews() {
        let gvk = json!([{"group": r.group, "kind": r.kind, "version": r.version}]);
        if let Some(d) = defs.get_mut(&super::api_definition_name(r.group, r.version, r.kind)) {
            d["x-kubernetes-group-version-kind"] = gvk;
        }
    }
    for (def, required) in REQUIRED {
        if let Some(Value::Object(d)) = defs.get_mut(*def) {
            if required.is_empty() {
                d.remove("required");
            } else {
                d.insert("required".into(), json!(required));
            }
        }
    }
    for (def, prop, key, value) in extensions() {
        let target = match defs.get_mut(def) {
            Some(d) if prop.is_empty() => Some(d),
            Some(d) => d.pointer_mut(&format!("/properties/{prop}")),
            None => None,
        };
        if let Some(Value::Object(t)) = target {
            t.insert(key.into(), value);
        }
    }
    Value::Object(defs)
}

#[test]
fn golden_definitions_are_fresh() {
    let want = format!(
        "{}\n",
        serde_json::to_string_pretty(&render()).expect("json")
    );
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(GOLDEN);
    if std::env::var_os("CRDPLANE_BLESS").is_some() {
        std::fs::write(&path, &want).expect("write golden file");
        return;
    }
    let have = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        have == want,
        "{GOLDEN} is stale: rewrite it with \
         CRDPLANE_BLESS=1 cargo test -p crdplane-registry --lib openapi::builtin_gen"
    );
}
