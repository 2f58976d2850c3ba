//! OpenAPI documents for the served CRDs: what `/openapi/v2` and `/openapi/v3` return.
//!
//! The registry keeps the Established CRDs; whenever they change it calls these pure
//! functions to rebuild the documents, and the gateway serves the results:
//!
//! - [`build_v2`]: one self-contained Swagger 2.0 document with a definition (plus the
//!   `<Kind>List` definition and the CR endpoints) for every served CR version, and the
//!   built-in `apiextensions.k8s.io/v1` CustomResourceDefinition endpoints/definitions.
//!   Follows apiextensions-apiserver `pkg/controller/openapi/builder/builder.go` and
//!   `pkg/controller/openapi/v2/conversion.go`.
//! - [`encode_v2_protobuf`]: that document as a gnostic `openapi.v2.Document` message,
//!   served for `Accept: application/com.github.proto-openapi.spec.v2@v1.0+protobuf`
//!   (kubectl 1.20 refuses to `apply`/`create`/`explain` without it).
//! - [`build_v3_index`] / [`build_v3_group_version`]: the OpenAPI 3.0 discovery index and
//!   per group-version documents (kube-openapi `pkg/handler3/handler.go`), used by
//!   kubectl ≥ 1.27 `explain` and field-validation detection; [`build_v3_documents`]
//!   builds all of them at once for caching, with their [`compute_etag`] hashes.
//!
//! Serving notes (kube-openapi `pkg/handler`): the protobuf body is sent with
//! `Content-Type: application/com.github.proto-openapi.spec.v2.v1.0+protobuf` even when
//! the deprecated `…spec.v2@v1.0+protobuf` form was requested (kubectl 1.20's client
//! rejects the `@` form with `mime: unexpected content after media subtype`), and the
//! ETag of every document is [`compute_etag`] of its JSON bytes.
//!
//! The built-in definitions (ObjectMeta, ListMeta, Status, DeleteOptions, Patch, Scale,
//! WatchEvent, a shallow CustomResourceDefinition) and the CRD paths come from
//! `fixtures/builtin_v2.json`, written for crdplane: Kubernetes' type and field names and
//! types (the API contract), our own short descriptions. The built-in resource types of
//! `crdplane_core::builtin::BUILTIN` (ConfigMap, Secret, ServiceAccount, both Events, Lease,
//! Role, ClusterRole, RoleBinding, ClusterRoleBinding, their lists and what they reference)
//! come from `builtin/definitions.json`, generated
//! from k8s-openapi with upstream's descriptions by `builtin_gen` (a test rewrites it with
//! `CRDPLANE_BLESS=1`); their endpoints come from the same path builder as the CRDs'
//! (`/api/v1/...` for the core group), and their group-versions get v3 documents
//! (`api/v1`, `apis/coordination.k8s.io/v1`, `apis/events.k8s.io/v1`,
//! `apis/rbac.authorization.k8s.io/v1`). Both are built once
//! per process and are part of every tenant's documents; the admin scope's documents also
//! carry the `crdplane.io/v1alpha1` Tenant type (`tenants`). Every `$ref` in the produced
//! documents resolves inside the same document (kubectl fails with `unknown model in
//! reference` otherwise).
//!
//! Input bounds: CRD schemas deeper than `MAX_DEPTH` (96 schema levels) are cut off; CRDs that
//! lack group/kind/plural are skipped. Nothing here panics on malformed input.

#[cfg(test)]
mod builtin_gen;
mod convert_v3;
mod paths;
mod proto;
mod schema;
mod tenants;
#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::OnceLock;

use serde_json::{Map, Value, json};
use sha2::{Digest, Sha512};

use crdplane_core::builtin::{ALL_VERBS, BUILTIN, BuiltinResource, REVIEWS, ReviewResource};
use paths::KindInfo;
use schema::Flavor;

/// `info.version` of the published documents (the Kubernetes version we mirror).
pub const KUBERNETES_VERSION: &str = "v1.34.0";

const BUILTIN_JSON: &str = include_str!("fixtures/builtin_v2.json");
/// Definitions of the built-in types (`crdplane_core::builtin::BUILTIN`), generated from
/// k8s-openapi by `builtin_gen` (upstream's descriptions).
const BUILTIN_TYPES_JSON: &str = include_str!("builtin/definitions.json");
const APIEXTENSIONS_GV: (&str, &str) = ("apiextensions.k8s.io", "v1");

/// The parsed built-in fixture (`{definitions, parameters, paths, securityDefinitions,
/// security}`); `Null` only if the embedded file were corrupt (a unit test guards that).
fn builtin() -> &'static Value {
    static CELL: OnceLock<Value> = OnceLock::new();
    CELL.get_or_init(|| serde_json::from_str(BUILTIN_JSON).unwrap_or(Value::Null))
}

fn builtin_map(key: &str) -> Map<String, Value> {
    builtin()
        .get(key)
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default()
}

/// Upstream's definition name of a kind of a built-in group-version
/// (`io.k8s.api.<core|first label of the group>.<version>.<Kind>`, the Go package path
/// k8s.io/api/<group>/<version> reversed into the OpenAPI namer's form).
pub(crate) fn builtin_definition_name(b: &BuiltinResource, kind: &str) -> String {
    api_definition_name(b.group, b.version, kind)
}

/// [`builtin_definition_name`] of a kind of `group`/`version`.
pub(crate) fn api_definition_name(group: &str, version: &str, kind: &str) -> String {
    let package = if group.is_empty() {
        "core"
    } else {
        group.split('.').next().unwrap_or(group)
    };
    format!("io.k8s.api.{package}.{version}.{kind}")
}

/// The review kinds published (`crdplane_core::builtin::REVIEWS` in the versions k8s-openapi
/// carries: SelfSubjectReview's `v1beta1` is served for kubectl 1.27 but has no definitions
/// there, as upstream's current documents have none).
pub(crate) fn published_reviews() -> impl Iterator<Item = &'static ReviewResource> {
    REVIEWS.iter().filter(|r| r.version == "v1")
}

/// The types a tenant serves beside its CRDs, with their definitions and endpoints: the
/// built-in types (`BUILTIN`) and the CRD API in every tenant, plus the Tenants
/// ([`tenants`]) in the admin scope. Built once per kind of tenant.
struct ServedTypes {
    definitions: Map<String, Value>,
    paths: Map<String, Value>,
    /// Their group-versions, each with a v3 document (also when no CRD is served).
    group_versions: BTreeSet<(&'static str, &'static str)>,
}

impl ServedTypes {
    fn builtin() -> Self {
        let definitions = serde_json::from_str::<Value>(BUILTIN_TYPES_JSON)
            .ok()
            .and_then(|v| v.as_object().cloned())
            .unwrap_or_default();
        let mut paths = Map::new();
        let mut group_versions = BTreeSet::from([APIEXTENSIONS_GV]);
        for b in BUILTIN {
            let def = builtin_definition_name(b, b.kind);
            let list_def = builtin_definition_name(b, b.list_kind);
            let info = KindInfo {
                group: b.group,
                version: b.version,
                kind: b.kind,
                plural: b.resource,
                namespaced: b.namespaced,
                status: false,
                scale: false,
                verbs: b.verbs,
                def: &def,
                list_def: &list_def,
            };
            for (p, item) in info.paths() {
                paths.entry(p).or_insert(item);
            }
            group_versions.insert((b.group, b.version));
        }
        // The reviews: create only, no list kind.
        for r in published_reviews() {
            let def = api_definition_name(r.group, r.version, r.kind);
            let info = KindInfo {
                group: r.group,
                version: r.version,
                kind: r.kind,
                plural: r.resource,
                namespaced: r.namespaced,
                status: false,
                scale: false,
                verbs: &["create"],
                def: &def,
                list_def: &def,
            };
            for (p, item) in info.paths() {
                paths.entry(p).or_insert(item);
            }
            group_versions.insert((r.group, r.version));
        }
        ServedTypes {
            definitions,
            paths,
            group_versions,
        }
    }

    /// The built-in types and the Tenants.
    fn admin() -> Self {
        let mut t = Self::builtin();
        for (name, d) in tenants::definitions() {
            t.definitions.entry(name).or_insert(d);
        }
        for (p, item) in tenants::paths() {
            t.paths.entry(p).or_insert(item);
        }
        t.group_versions.insert(tenants::GROUP_VERSION);
        t
    }

    /// Whether (group, version) is one of these types' group-versions.
    fn serves_gv(&self, group: &str, version: &str) -> bool {
        self.group_versions
            .iter()
            .any(|(g, v)| *g == group && *v == version)
    }
}

/// The [`ServedTypes`] of `tenant`.
fn served_types(tenant: &str) -> &'static ServedTypes {
    static BUILTIN_ONLY: OnceLock<ServedTypes> = OnceLock::new();
    static ADMIN: OnceLock<ServedTypes> = OnceLock::new();
    if tenant == tenants::ADMIN_SCOPE {
        ADMIN.get_or_init(ServedTypes::admin)
    } else {
        BUILTIN_ONLY.get_or_init(ServedTypes::builtin)
    }
}

/// URL prefix of a group-version's endpoints (`/api/v1/`, `/apis/<g>/<v>/`).
fn gv_prefix(group: &str, version: &str) -> String {
    if group.is_empty() {
        format!("/api/{version}/")
    } else {
        format!("/apis/{group}/{version}/")
    }
}

/// One served version of a CRD, as needed for publishing.
struct ServedVersion<'a> {
    name: &'a str,
    schema: Option<&'a Value>,
    status: bool,
    scale: bool,
}

/// The parts of an `apiextensions.k8s.io/v1` CRD the documents are built from.
struct CrdInfo<'a> {
    name: &'a str,
    group: &'a str,
    kind: &'a str,
    list_kind: String,
    plural: &'a str,
    namespaced: bool,
    preserve_unknown: bool,
    versions: Vec<ServedVersion<'a>>,
}

fn str_at<'a>(v: &'a Value, ptr: &str) -> Option<&'a str> {
    v.pointer(ptr)
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
}

impl<'a> CrdInfo<'a> {
    fn parse(crd: &'a Value) -> Option<Self> {
        let group = str_at(crd, "/spec/group")?;
        let kind = str_at(crd, "/spec/names/kind")?;
        let plural = str_at(crd, "/spec/names/plural")?;
        let list_kind = str_at(crd, "/spec/names/listKind")
            .map(str::to_string)
            .unwrap_or_else(|| format!("{kind}List"));
        let versions = crd
            .pointer("/spec/versions")
            .and_then(Value::as_array)
            .map(|vs| {
                vs.iter()
                    .filter(|v| v.get("served").and_then(Value::as_bool) == Some(true))
                    .filter_map(|v| {
                        Some(ServedVersion {
                            name: str_at(v, "/name")?,
                            schema: v
                                .pointer("/schema/openAPIV3Schema")
                                .filter(|s| s.is_object()),
                            status: v
                                .pointer("/subresources/status")
                                .is_some_and(|s| !s.is_null()),
                            scale: v
                                .pointer("/subresources/scale")
                                .is_some_and(|s| !s.is_null()),
                        })
                    })
                    .collect()
            })
            .unwrap_or_default();
        Some(CrdInfo {
            name: str_at(crd, "/metadata/name").unwrap_or(""),
            group,
            kind,
            list_kind,
            plural,
            namespaced: crd.pointer("/spec/scope").and_then(Value::as_str) != Some("Cluster"),
            preserve_unknown: crd
                .pointer("/spec/preserveUnknownFields")
                .and_then(Value::as_bool)
                == Some(true),
            versions,
        })
    }
}

/// Parsed CRDs, ordered by name so the documents do not depend on input order.
fn parse_all(crds: &[Value]) -> Vec<CrdInfo<'_>> {
    let mut out: Vec<CrdInfo<'_>> = crds.iter().filter_map(CrdInfo::parse).collect();
    out.sort_by(|a, b| {
        a.name
            .cmp(b.name)
            .then(a.group.cmp(b.group))
            .then(a.plural.cmp(b.plural))
    });
    out
}

/// Definition name of a CR kind, as the apiserver's `DefinitionNamer` spells it for a
/// type it does not know: the group's dot-separated parts reversed, then version and
/// kind (`stable.example.com/v1, CronTab` → `com.example.stable.v1.CronTab`).
pub fn definition_name(group: &str, version: &str, kind: &str) -> String {
    let mut parts: Vec<&str> = group.split('.').collect();
    parts.reverse();
    format!("{}.{version}.{kind}", parts.join("."))
}

/// Everything one CR version contributes to a document.
struct Contribution {
    definitions: Vec<(String, Value)>,
    paths: Vec<(String, Value)>,
}

fn contribution(crd: &CrdInfo<'_>, v: &ServedVersion<'_>, flavor: Flavor) -> Contribution {
    let def = definition_name(crd.group, v.name, crd.kind);
    let list_def = definition_name(crd.group, v.name, &crd.list_kind);
    let kind_schema = schema::kind_schema(
        v.schema,
        crd.preserve_unknown,
        flavor,
        crd.group,
        v.name,
        crd.kind,
    );
    let list_schema = schema::list_schema(
        flavor,
        &def,
        crd.group,
        v.name,
        crd.kind,
        &crd.list_kind,
        crd.plural,
    );
    let info = KindInfo {
        group: crd.group,
        version: v.name,
        kind: crd.kind,
        plural: crd.plural,
        namespaced: crd.namespaced,
        status: v.status,
        scale: v.scale,
        verbs: ALL_VERBS,
        def: &def,
        list_def: &list_def,
    };
    let paths = info.paths();
    Contribution {
        definitions: vec![(def.clone(), kind_schema), (list_def, list_schema)],
        paths,
    }
}

/// The complete Swagger 2.0 document for `/openapi/v2` of `tenant`, whose Established
/// CRDs are `crds`.
pub fn build_v2(tenant: &str, crds: &[Value]) -> Value {
    let mut definitions = builtin_map("definitions");
    let mut paths = builtin_map("paths");
    let types = served_types(tenant);
    for (name, d) in &types.definitions {
        definitions.entry(name.clone()).or_insert_with(|| d.clone());
    }
    for (p, item) in &types.paths {
        paths.entry(p.clone()).or_insert_with(|| item.clone());
    }
    for crd in parse_all(crds) {
        for v in &crd.versions {
            let c = contribution(&crd, v, Flavor::V2);
            for (name, d) in c.definitions {
                definitions.entry(name).or_insert(d);
            }
            for (p, item) in c.paths {
                paths.entry(p).or_insert(item);
            }
        }
    }
    json!({
        "swagger": "2.0",
        "info": {"title": "Kubernetes", "version": KUBERNETES_VERSION},
        "paths": paths,
        "definitions": definitions,
        "parameters": builtin_map("parameters"),
        "securityDefinitions": builtin_map("securityDefinitions"),
        "security": builtin().get("security").cloned().unwrap_or_else(|| json!([])),
    })
}

/// Encodes a Swagger 2.0 JSON document (from [`build_v2`]) as the gnostic
/// `openapi.v2.Document` protobuf message.
pub fn encode_v2_protobuf(doc: &Value) -> Vec<u8> {
    proto::encode_document(doc)
}

/// The group-versions with a v3 document: `apiextensions.k8s.io/v1`, those of the
/// other [`ServedTypes`], and every served CR group-version.
fn group_versions(types: &ServedTypes, crds: &[CrdInfo<'_>]) -> BTreeSet<(String, String)> {
    let mut gvs: BTreeSet<(String, String)> = types
        .group_versions
        .iter()
        .map(|(g, v)| (g.to_string(), v.to_string()))
        .collect();
    for crd in crds {
        for v in &crd.versions {
            gvs.insert((crd.group.to_string(), v.name.to_string()));
        }
    }
    gvs
}

/// kube-openapi's `computeETag` (pkg/handler and pkg/handler3): uppercase hex SHA-512 of
/// the served JSON bytes. Upstream uses it as the `ETag` of `/openapi/v2` (computed over
/// the JSON form, also for protobuf responses), of `/openapi/v3` and of every
/// group-version document, and as the `hash` query value in the v3 index.
pub fn compute_etag(json: &[u8]) -> String {
    let digest = Sha512::digest(json);
    let mut s = String::with_capacity(128);
    for b in digest {
        s.push_str(&format!("{b:02X}"));
    }
    s
}

/// [`compute_etag`] of a document serialised with `serde_json::to_vec` (identical to
/// `Value::to_string()`); the server must serve exactly those bytes for the index hash
/// to match.
pub fn v3_etag(doc: &Value) -> String {
    compute_etag(&serde_json::to_vec(doc).unwrap_or_default())
}

/// All OpenAPI v3 documents at once, for callers that cache them: the index and, per
/// `apis/<g>/<v>` key, the group-version document with its JSON bytes and hash.
pub struct V3Documents {
    /// The `/openapi/v3` discovery index (`{"paths": {...}}`).
    pub index: Value,
    /// Group-version documents keyed by `apis/<g>/<v>` (`api/v1` for the core group).
    pub group_versions: BTreeMap<String, V3GroupVersion>,
}

/// One cached `/openapi/v3/apis/<g>/<v>` document.
pub struct V3GroupVersion {
    /// The document's JSON bytes, served as they are.
    pub json: Vec<u8>,
    /// [`compute_etag`] of `json`; the `hash` in the index and the upstream ETag.
    pub hash: String,
}

/// Builds the index and every group-version document in one pass (each document is
/// built once; [`build_v3_index`] alone has to build them all to hash them anyway).
pub fn build_v3_documents(tenant: &str, crds: &[Value]) -> V3Documents {
    let types = served_types(tenant);
    let parsed = parse_all(crds);
    let mut paths = Map::new();
    let mut docs = BTreeMap::new();
    for (g, v) in group_versions(types, &parsed) {
        if let Some(doc) = build_gv(types, &parsed, &g, &v) {
            // kube-openapi handler3 names the core group `api/v1`.
            let key = if g.is_empty() {
                format!("api/{v}")
            } else {
                format!("apis/{g}/{v}")
            };
            let json = serde_json::to_vec(&doc).unwrap_or_default();
            let hash = compute_etag(&json);
            let url = format!("/openapi/v3/{key}?hash={hash}");
            paths.insert(key.clone(), json!({ "serverRelativeURL": url }));
            docs.insert(key, V3GroupVersion { json, hash });
        }
    }
    V3Documents {
        index: json!({ "paths": paths }),
        group_versions: docs,
    }
}

/// `/openapi/v3`: `{"paths": {"apis/<g>/<v>": {"serverRelativeURL":
/// "/openapi/v3/apis/<g>/<v>?hash=<HASH>"}}}`.
pub fn build_v3_index(tenant: &str, crds: &[Value]) -> Value {
    build_v3_documents(tenant, crds).index
}

/// `/openapi/v3/apis/<group>/<version>` (`/openapi/v3/api/v1` for group ""); `None` if
/// nothing is served there.
pub fn build_v3_group_version(
    tenant: &str,
    crds: &[Value],
    group: &str,
    version: &str,
) -> Option<Value> {
    build_gv(served_types(tenant), &parse_all(crds), group, version)
}

fn build_gv(
    types: &ServedTypes,
    crds: &[CrdInfo<'_>],
    group: &str,
    version: &str,
) -> Option<Value> {
    let mut schemas: BTreeMap<String, Value> = BTreeMap::new();
    let mut paths = Map::new();
    let builtin_defs = builtin().get("definitions");
    let builtin_gv = types.serves_gv(group, version);
    if builtin_gv {
        let prefix = gv_prefix(group, version);
        let fixture_paths = builtin().get("paths").and_then(Value::as_object);
        for (p, item) in fixture_paths
            .into_iter()
            .flatten()
            .chain(types.paths.iter())
        {
            if p.starts_with(&prefix) {
                paths.insert(p.clone(), convert_v3::path_item(item));
            }
        }
    }
    for crd in crds.iter().filter(|c| c.group == group) {
        for v in crd.versions.iter().filter(|v| v.name == version) {
            let c = contribution(crd, v, Flavor::V3);
            for (name, d) in c.definitions {
                schemas.entry(name).or_insert(d);
            }
            for (p, item) in c.paths {
                paths
                    .entry(p)
                    .or_insert_with(|| convert_v3::path_item(&item));
            }
        }
    }
    if paths.is_empty() {
        return None;
    }
    // Close over references into the built-in definitions.
    let mut pending: Vec<String> = Vec::new();
    convert_v3::collect_refs(&Value::Object(paths.clone()), &mut pending);
    for s in schemas.values() {
        convert_v3::collect_refs(s, &mut pending);
    }
    while let Some(name) = pending.pop() {
        if schemas.contains_key(&name) {
            continue;
        }
        if let Some(d) = builtin_defs
            .and_then(|b| b.get(&name))
            .or_else(|| types.definitions.get(&name))
        {
            let d = convert_v3::v3_definition(d);
            convert_v3::collect_refs(&d, &mut pending);
            schemas.insert(name, d);
        }
    }
    let (title, ver) = if builtin_gv {
        ("Kubernetes", KUBERNETES_VERSION)
    } else {
        ("Kubernetes CRD Swagger", "v0.1.0")
    };
    let mut components = Map::new();
    components.insert(
        "schemas".into(),
        Value::Object(schemas.into_iter().collect()),
    );
    let mut doc = json!({
        "openapi": "3.0.0",
        "info": {"title": title, "version": ver},
        "paths": paths,
    });
    if builtin_gv {
        components.insert(
            "securitySchemes".into(),
            json!({"BearerToken": {
                "type": "apiKey",
                "description": "Bearer Token authentication",
                "name": "authorization",
                "in": "header",
            }}),
        );
        doc["security"] = json!([{"BearerToken": []}]);
    }
    doc["components"] = Value::Object(components);
    Some(doc)
}
