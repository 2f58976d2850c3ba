//! Core `v1` namespaces of a tenant (`/api/v1/namespaces`): create, get, list, watch,
//! update, patch, delete, `/status` and `/finalize`. Stored through the storage service as
//! group "" resource `namespaces`. Deleting a namespace marks it Terminating; the registry's
//! namespace controller (services/registry/src/lifecycle.rs) deletes the custom resources in
//! it in the background and then the namespace.
//!
//! Follows k8s.io/kubernetes pkg/registry/core/namespace/strategy.go (finalizers, phase) and
//! pkg/apis/core/validation (DNS-1123 label names).

use crate::api::{Ctx, Req};
use crate::crs::{decode_body, delete_options};
use crate::http::{Body, Output, json_response, negotiate_output};
use crate::stores::namespaces::{Endpoint, NamespaceStrategy, finalized};
use crate::table::{IncludeObject, ListMeta, TableConvertor};
use crate::watch::{self, TableFn};
use crdplane_apiserver::admission::Chain;
use crdplane_apiserver::handlers;
use crdplane_core::field::FieldError;
use crdplane_core::selector::{FieldSelector, LabelSelector};
use crdplane_core::{ApiError, GroupResource, rvslot};
use crdplane_proto::GrpcStatusExt;
use crdplane_proto::v1 as pb;
use http::{Response, StatusCode};
use serde_json::{Value, json};
use std::sync::{Arc, OnceLock};

fn gr() -> GroupResource {
    GroupResource::new("", "namespaces")
}

fn rref(tenant: &str) -> pb::ResourceRef {
    pb::ResourceRef {
        tenant: tenant.into(),
        group: String::new(),
        resource: "namespaces".into(),
    }
}

fn key(tenant: &str, name: &str) -> pb::ObjectKey {
    pb::ObjectKey {
        resource: Some(rref(tenant)),
        namespace: String::new(),
        name: name.into(),
    }
}

fn table() -> &'static TableConvertor {
    static T: OnceLock<TableConvertor> = OnceLock::new();
    T.get_or_init(|| {
        TableConvertor::new(&json!([
            {"name": "Status", "type": "string", "description": "The status of the namespace", "jsonPath": ".status.phase"},
            {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}
        ]))
    })
}

/// Upstream `IsDNS1123Label` message.
pub const DNS1123_LABEL_MSG: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";

pub fn validate_name(name: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if name.is_empty() {
        errs.push(FieldError::required(
            "metadata.name",
            "name or generateName is required",
        ));
        return errs;
    }
    for msg in crdplane_core::validation::is_dns1123_label(name) {
        errs.push(FieldError::invalid("metadata.name", json!(name), msg));
    }
    errs
}

/// Fails with upstream's 404 (`namespaces "x" not found`) when the namespace does not exist.
pub async fn require_namespace(ctx: &Ctx, tenant: &str, ns: &str) -> Result<(), ApiError> {
    require_namespace_for(ctx, tenant, ns, &gr(), ns).await
}

/// As [`require_namespace`], for a create of object `name` of resource `target`: a
/// Terminating namespace refuses it with the NamespaceLifecycle admission plugin's 403,
/// which names the object being created (`crontabs.stable.example.com "x" is forbidden:
/// unable to create new content in namespace team because it is being terminated`).
pub async fn require_namespace_for(
    ctx: &Ctx,
    tenant: &str,
    ns: &str,
    target: &GroupResource,
    name: &str,
) -> Result<(), ApiError> {
    let k = (tenant.to_string(), ns.to_string());
    if ctx.namespaces.read().expect("lock").contains(&k) {
        return Ok(());
    }
    let s = ctx
        .storage
        .clone()
        .get(pb::GetRequest {
            key: Some(key(tenant, ns)),
        })
        .await
        .map_err(crdplane_proto::status::from_grpc)?
        .into_inner();
    let v: Value = serde_json::from_slice(&s.json).map_err(ApiError::internal)?;
    if v.pointer("/status/phase").and_then(Value::as_str) == Some("Terminating") {
        return Err(ApiError::forbidden(
            target,
            name,
            &format!(
                "unable to create new content in namespace {ns} because it is being terminated"
            ),
        ));
    }
    ctx.namespaces.write().expect("lock").insert(k);
    Ok(())
}

pub async fn create_namespace(
    ctx: &Ctx,
    tenant: &str,
    mut obj: Value,
    dry: bool,
) -> Result<Value, ApiError> {
    let m = obj
        .as_object_mut()
        .ok_or_else(|| ApiError::bad_request("the object provided is not a JSON object"))?;
    m.insert("apiVersion".into(), json!("v1"));
    m.insert("kind".into(), json!("Namespace"));
    let meta = m.entry("metadata").or_insert_with(|| json!({}));
    let meta = meta
        .as_object_mut()
        .ok_or_else(|| ApiError::bad_request("metadata must be an object"))?;
    if meta
        .get("name")
        .and_then(Value::as_str)
        .is_none_or(str::is_empty)
        && let Some(p) = meta.get("generateName").and_then(Value::as_str)
    {
        let n = crate::strategy::generate_name(p);
        meta.insert("name".into(), json!(n));
    }
    let name = meta
        .get("name")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    let errs = validate_name(&name);
    if !errs.is_empty() {
        return Err(ApiError::invalid("Namespace", "", &name, &errs));
    }
    meta.insert("uid".into(), json!(uuid::Uuid::new_v4().to_string()));
    meta.insert(
        "creationTimestamp".into(),
        json!(crdplane_core::names::now_timestamp()),
    );
    meta.remove("namespace");
    // Upstream's automatic label (NamespaceDefaultLabelName, GA 1.22).
    let labels = meta.entry("labels").or_insert_with(|| json!({}));
    if let Some(l) = labels.as_object_mut() {
        l.insert("kubernetes.io/metadata.name".into(), json!(name));
    }
    m.insert("spec".into(), json!({"finalizers": ["kubernetes"]}));
    m.insert("status".into(), json!({"phase": "Active"}));
    let (head, tail) = rvslot::split(&obj).map_err(|e| ApiError::bad_request(e.to_string()))?;
    let s = ctx
        .storage
        .clone()
        .create(pb::CreateRequest {
            key: Some(key(tenant, &name)),
            object: Some(pb::ObjectWrite {
                head: head.into(),
                tail: tail.into(),
            }),
            dry_run: dry,
            ttl_seconds: 0,
        })
        .await
        .map_err(crdplane_proto::status::from_grpc)?
        .into_inner();
    serde_json::from_slice(&s.json).map_err(ApiError::internal)
}

fn ns_table() -> TableFn {
    Arc::new(|objs, with_cols, include| {
        table().to_table_with(
            objs,
            include,
            &ListMeta::default(),
            chrono::Utc::now(),
            with_cols,
        )
    })
}

pub async fn serve(ctx: &Ctx, req: &Req) -> Result<Response<Body>, ApiError> {
    let i = &req.info;
    let tenant = &i.tenant;
    let dry = req.dry_run()?;
    match (i.subresource.as_str(), i.verb.as_str()) {
        ("", _) | ("status", "get" | "update" | "patch") | ("finalize", "update") => {}
        ("status" | "finalize", _) => {
            return Err(ApiError::method_not_supported(&gr(), &i.verb));
        }
        _ => return Err(ApiError::path_not_found()),
    }
    match i.verb.as_str() {
        "create" => {
            let obj = match req.header("content-type") {
                Some(ct) if ct.trim().starts_with(PROTOBUF) => namespace_from_protobuf(&req.body)?,
                _ => decode_body(req)?,
            };
            let warnings = crate::crs::strict_warnings(req, "Namespace", "v1")?;
            let v = create_namespace(ctx, tenant, obj, dry).await?;
            Ok(crate::crs::with_warnings(
                json_response(StatusCode::CREATED, serde_json::to_vec(&v).expect("json")),
                &warnings,
            ))
        }
        "get" => {
            let s = ctx
                .storage
                .clone()
                .get(pb::GetRequest {
                    key: Some(key(tenant, &i.name)),
                })
                .await
                .map_err(crdplane_proto::status::from_grpc)?
                .into_inner();
            match negotiate_output(req.header("accept"))? {
                Output::Json => Ok(json_response(StatusCode::OK, s.json)),
                Output::Table(_) => {
                    let o: Value = serde_json::from_slice(&s.json).map_err(ApiError::internal)?;
                    let t = table().to_table(
                        &[o],
                        include(req),
                        &ListMeta::default(),
                        chrono::Utc::now(),
                    );
                    Ok(json_response(
                        StatusCode::OK,
                        serde_json::to_vec(&t).expect("json"),
                    ))
                }
            }
        }
        "list" => {
            let (label, field) = selectors(req)?;
            let key = crate::strategy::continue_key(&ctx.storage).await?;
            let scope = crate::strategy::token_scope(tenant, "", "namespaces", "");
            let opts = crate::strategy::list_options(|k| req.query.get(k), &key, &scope)?;
            let (min_rv, exact_rv, continue_rv) = opts.storage_rv();
            let r = ctx
                .storage
                .clone()
                .list(pb::ListRequest {
                    resource: Some(rref(tenant)),
                    limit: opts.limit,
                    start_after: opts.start_after.clone(),
                    label_selector: label,
                    field_selector: field,
                    min_resource_version: min_rv,
                    exact_resource_version: exact_rv,
                    continue_resource_version: continue_rv,
                    ..Default::default()
                })
                .await;
            let r = match r {
                Ok(r) => r.into_inner(),
                Err(s) => {
                    return crate::crs::list_failure(ApiError::from_grpc(&s), &opts, &key, &scope);
                }
            };
            let rv = r.resource_version;
            let cont = if r.next_start_after.is_empty() {
                String::new()
            } else {
                crate::strategy::encode_continue(&key, &scope, &r.next_start_after, rv as i64)
            };
            let remaining = r.has_remaining_item_count.then_some(r.remaining_item_count);
            match negotiate_output(req.header("accept"))? {
                Output::Json => Ok(json_response(
                    StatusCode::OK,
                    crate::strategy::list_json(
                        "v1",
                        "NamespaceList",
                        &r.items,
                        rv,
                        &cont,
                        remaining,
                    ),
                )),
                Output::Table(_) => {
                    let objs: Vec<Value> = r
                        .items
                        .iter()
                        .map(|b| serde_json::from_slice(b).map_err(ApiError::internal))
                        .collect::<Result<_, _>>()?;
                    let meta = ListMeta {
                        resource_version: rv.to_string(),
                        continue_token: cont,
                        remaining_item_count: remaining.map(|r| r as i64),
                    };
                    let t = table().to_table(&objs, include(req), &meta, chrono::Utc::now());
                    Ok(json_response(
                        StatusCode::OK,
                        serde_json::to_vec(&t).expect("json"),
                    ))
                }
            }
        }
        "watch" => {
            let (label, field) = selectors(req)?;
            let t = watch::Target {
                resource: rref(tenant),
                namespace: String::new(),
                name: i.name.clone(),
                api_version: "v1".into(),
                kind: "Namespace".into(),
                table: ns_table(),
                label_selector: label,
                field_selector: field,
                transform: None,
                normalize: None,
                crd: None,
            };
            watch::serve(ctx, req, t).await
        }
        "update" | "patch" => {
            // The generic update/patch handlers over the storage service, with the
            // namespace strategies (crate::stores::namespaces): read, apply, compare-and-swap,
            // re-applied on a lost swap; namespaces AllowUnconditionalUpdate.
            let body = if i.verb == "update" {
                Some(decode_body(req)?)
            } else {
                crate::crs::record_patch_findings(req);
                None
            };
            let warnings = crate::crs::strict_warnings(req, "Namespace", "v1")?;
            let store = crate::stores::storage::StorageStore {
                storage: &ctx.storage,
                tenant,
                gr: gr(),
            };
            let strategy = NamespaceStrategy(match i.subresource.as_str() {
                "status" => Endpoint::Status,
                "finalize" => Endpoint::Finalize,
                _ => Endpoint::Main,
            });
            let admission = Chain::none();
            let w = match body {
                Some(obj) => {
                    handlers::update(
                        &store,
                        &strategy,
                        &admission,
                        &i.subresource,
                        "",
                        &i.name,
                        obj,
                        dry,
                    )
                    .await?
                }
                None => {
                    let mime = crate::http::media_type(req.header("content-type").unwrap_or(""));
                    handlers::patch(
                        &store,
                        &strategy,
                        &admission,
                        &i.subresource,
                        "",
                        &i.name,
                        &mime,
                        &req.body,
                        dry,
                    )
                    .await?
                }
            };
            Ok(crate::crs::with_warnings(
                json_response(StatusCode::OK, serde_json::to_vec(&w.object).expect("json")),
                &warnings,
            ))
        }
        "delete" => delete_namespace(ctx, req).await,
        _ => Err(ApiError::method_not_supported(&gr(), &i.verb)),
    }
}

fn include(req: &Req) -> IncludeObject {
    crate::crs::include_object(req).unwrap_or(IncludeObject::Metadata)
}

fn selectors(req: &Req) -> Result<(String, String), ApiError> {
    let label = req.query.get("labelSelector").unwrap_or("").to_string();
    let field = req.query.get("fieldSelector").unwrap_or("").to_string();
    if !label.is_empty() {
        LabelSelector::parse(&label).map_err(ApiError::bad_request)?;
    }
    if !field.is_empty() {
        let f = FieldSelector::parse(&field).map_err(ApiError::bad_request)?;
        for r in f.requirements() {
            if !matches!(r.field.as_str(), "metadata.name" | "status.phase") {
                return Err(ApiError::bad_request(format!(
                    "field label not supported: {}",
                    r.field
                )));
            }
        }
    }
    Ok((label, field))
}

/// Records (or re-records) the namespace's deletion with the registry, whose namespace
/// controller deletes its content — also after any restart. The registry owns its work
/// queue and the entry format (`services/registry/src/lifecycle.rs`).
async fn enqueue_deletion(ctx: &Ctx, tenant: &str, name: &str) -> Result<(), ApiError> {
    ctx.registry
        .clone()
        .record_namespace_deletion(pb::NamespaceDeletionRequest {
            tenant: tenant.into(),
            name: name.into(),
        })
        .await
        .map_err(crdplane_proto::status::from_grpc)?;
    Ok(())
}

/// DELETE of a namespace (`pkg/registry/core/namespace/storage/storage.go` REST.Delete and
/// the NamespaceLifecycle admission plugin): the default namespaces cannot be deleted; the
/// first DELETE sets `deletionTimestamp` and phase Terminating and returns the namespace
/// (200); the registry's namespace controller then deletes every custom resource in it,
/// removes the `kubernetes` finalizer and the namespace. Later DELETEs return the namespace
/// while finalizers remain.
async fn delete_namespace(ctx: &Ctx, req: &Req) -> Result<Response<Body>, ApiError> {
    let i = &req.info;
    let dry = req.dry_run()?;
    let (want_rv, want_uid) = delete_options(&req.body)?;
    let s = ctx
        .storage
        .clone()
        .get(pb::GetRequest {
            key: Some(key(&i.tenant, &i.name)),
        })
        .await
        .map_err(crdplane_proto::status::from_grpc)?
        .into_inner();
    if crate::api::DEFAULT_NAMESPACES.contains(&i.name.as_str()) {
        return Err(ApiError::forbidden(
            &gr(),
            &i.name,
            "this namespace may not be deleted",
        ));
    }
    let mut ns: Value = serde_json::from_slice(&s.json).map_err(ApiError::internal)?;
    let uid = ns
        .pointer("/metadata/uid")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    if !want_uid.is_empty() && want_uid != uid {
        return Err(ApiError::conflict(
            &gr(),
            &i.name,
            &format!(
                "Precondition failed: UID in precondition: {want_uid}, UID in object meta: {uid}"
            ),
        ));
    }
    if want_rv != 0 && want_rv != s.resource_version {
        return Err(ApiError::conflict(
            &gr(),
            &i.name,
            &format!(
                "Precondition failed: ResourceVersion in precondition: {want_rv}, ResourceVersion in object meta: {}",
                s.resource_version
            ),
        ));
    }
    let terminating = ns
        .pointer("/metadata/deletionTimestamp")
        .is_some_and(|v| !v.is_null());
    if terminating {
        if !finalized(&ns) || dry {
            return Ok(json_response(StatusCode::OK, s.json));
        }
        crate::gc::record(&ctx.storage, &i.tenant, "", "namespaces", &ns).await?;
        let d = ctx
            .storage
            .clone()
            .delete(pb::DeleteRequest {
                key: Some(key(&i.tenant, &i.name)),
                expected_resource_version: s.resource_version,
                dry_run: false,
            })
            .await
            .map_err(crdplane_proto::status::from_grpc)?
            .into_inner();
        return Ok(json_response(StatusCode::OK, d.json));
    }
    ns["status"]["phase"] = json!("Terminating");
    ns["metadata"]["deletionTimestamp"] = json!(crdplane_core::names::now_timestamp());
    if dry {
        return Ok(json_response(
            StatusCode::OK,
            serde_json::to_vec(&ns).expect("json"),
        ));
    }
    enqueue_deletion(ctx, &i.tenant, &i.name).await?;
    let (head, tail) = rvslot::split(&ns).map_err(|e| ApiError::bad_request(e.to_string()))?;
    let marked = ctx
        .storage
        .clone()
        .update(pb::UpdateRequest {
            key: Some(key(&i.tenant, &i.name)),
            object: Some(pb::ObjectWrite {
                head: head.into(),
                tail: tail.into(),
            }),
            expected_resource_version: s.resource_version,
            dry_run: false,
            ttl_seconds: 0,
        })
        .await
        .map_err(crdplane_proto::status::from_grpc)?
        .into_inner();
    // Re-recorded after the mark, so a controller that just removed the entry looks again.
    enqueue_deletion(ctx, &i.tenant, &i.name).await?;
    ctx.namespaces
        .write()
        .expect("lock")
        .remove(&(i.tenant.clone(), i.name.clone()));
    Ok(json_response(StatusCode::OK, marked.json))
}

/// Built-in types (Namespace) may arrive as Kubernetes protobuf: kubectl ≥ 1.2x sends
/// `kubectl create namespace` that way.
const PROTOBUF: &str = "application/vnd.kubernetes.protobuf";

/// One protobuf field value (wire types 0, 1, 2, 5).
enum Wire<'a> {
    Varint,
    Bytes(&'a [u8]),
    Fixed,
}

/// Splits a protobuf message into (field number, value); bounded by the input.
fn proto_fields(mut b: &[u8]) -> Result<Vec<(u64, Wire<'_>)>, ()> {
    fn varint(b: &mut &[u8]) -> Result<u64, ()> {
        let mut v = 0u64;
        for i in 0..10 {
            let (&c, rest) = b.split_first().ok_or(())?;
            *b = rest;
            v |= u64::from(c & 0x7f) << (7 * i);
            if c & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(())
    }
    let mut out = Vec::new();
    while !b.is_empty() {
        let tag = varint(&mut b)?;
        let value = match tag & 7 {
            0 => {
                varint(&mut b)?;
                Wire::Varint
            }
            1 | 5 => {
                let n = if tag & 7 == 1 { 8 } else { 4 };
                if b.len() < n {
                    return Err(());
                }
                b = &b[n..];
                Wire::Fixed
            }
            2 => {
                let n = usize::try_from(varint(&mut b)?).map_err(|_| ())?;
                if b.len() < n {
                    return Err(());
                }
                let (v, rest) = b.split_at(n);
                b = rest;
                Wire::Bytes(v)
            }
            _ => return Err(()),
        };
        out.push((tag >> 3, value));
    }
    Ok(out)
}

fn proto_str(v: &Wire<'_>) -> Option<String> {
    match v {
        Wire::Bytes(b) => std::str::from_utf8(b).ok().map(str::to_string),
        _ => None,
    }
}

fn proto_map_entry(v: &Wire<'_>) -> Option<(String, String)> {
    let Wire::Bytes(b) = v else { return None };
    let f = proto_fields(b).ok()?;
    let get = |n| {
        f.iter()
            .find(|(k, _)| *k == n)
            .and_then(|(_, v)| proto_str(v))
    };
    Some((get(1)?, get(2).unwrap_or_default()))
}

/// Decodes a `k8s.io/api/core/v1.Namespace` in the Kubernetes protobuf envelope (magic
/// `k8s\0` + runtime.Unknown{typeMeta, raw}) into its JSON form: metadata name,
/// generateName, labels, annotations, finalizers and spec.finalizers (what a create uses;
/// generated.proto field numbers).
pub fn namespace_from_protobuf(body: &[u8]) -> Result<Value, ApiError> {
    let bad =
        || ApiError::bad_request("unable to decode the protobuf Namespace in the request body");
    let unknown = body.strip_prefix(b"k8s\0".as_slice()).ok_or_else(bad)?;
    let env = proto_fields(unknown).map_err(|_| bad())?;
    let mut kind = String::new();
    let mut raw: &[u8] = &[];
    for (n, v) in &env {
        match (n, v) {
            (1, Wire::Bytes(tm)) => {
                for (k, x) in proto_fields(tm).map_err(|_| bad())? {
                    if k == 2 {
                        kind = proto_str(&x).unwrap_or_default();
                    }
                }
            }
            (2, Wire::Bytes(r)) => raw = r,
            _ => {}
        }
    }
    if !kind.is_empty() && kind != "Namespace" {
        return Err(ApiError::bad_request(format!(
            "the kind in the data ({kind}) does not match the expected kind (Namespace)"
        )));
    }
    let mut meta = serde_json::Map::new();
    let mut spec_finalizers = Vec::new();
    for (n, v) in proto_fields(raw).map_err(|_| bad())? {
        match (n, &v) {
            (1, Wire::Bytes(m)) => {
                let mut labels = serde_json::Map::new();
                let mut annotations = serde_json::Map::new();
                let mut finalizers = Vec::new();
                for (k, x) in proto_fields(m).map_err(|_| bad())? {
                    match k {
                        1 => {
                            meta.insert("name".into(), json!(proto_str(&x).ok_or_else(bad)?));
                        }
                        2 => {
                            meta.insert(
                                "generateName".into(),
                                json!(proto_str(&x).ok_or_else(bad)?),
                            );
                        }
                        11 => {
                            let (k, v) = proto_map_entry(&x).ok_or_else(bad)?;
                            labels.insert(k, json!(v));
                        }
                        12 => {
                            let (k, v) = proto_map_entry(&x).ok_or_else(bad)?;
                            annotations.insert(k, json!(v));
                        }
                        14 => finalizers.push(json!(proto_str(&x).ok_or_else(bad)?)),
                        _ => {}
                    }
                }
                if !labels.is_empty() {
                    meta.insert("labels".into(), Value::Object(labels));
                }
                if !annotations.is_empty() {
                    meta.insert("annotations".into(), Value::Object(annotations));
                }
                if !finalizers.is_empty() {
                    meta.insert("finalizers".into(), Value::Array(finalizers));
                }
            }
            (2, Wire::Bytes(sp)) => {
                for (k, x) in proto_fields(sp).map_err(|_| bad())? {
                    if k == 1 {
                        spec_finalizers.push(json!(proto_str(&x).ok_or_else(bad)?));
                    }
                }
            }
            _ => {}
        }
    }
    Ok(
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": meta,
              "spec": {"finalizers": spec_finalizers}}),
    )
}

pub use crdplane_apiserver::patch::BUILTIN_PATCH_TYPES;

/// Applies a PATCH body to a built-in object ([`crdplane_apiserver::patch::apply_builtin`]).
pub fn patch_builtin(
    req: &crate::api::Req,
    old: &Value,
    fields: crate::strategic::Fields,
) -> Result<Value, ApiError> {
    let mime = crate::http::media_type(req.header("content-type").unwrap_or(""));
    crdplane_apiserver::patch::apply_builtin(&mime, &req.body, old, fields)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn protobuf_namespace_is_decoded() {
        // k8s\0 + Unknown{typeMeta{apiVersion "v1", kind "Namespace"}, raw Namespace{
        //   metadata{name "team", labels{a: b}}, spec{}}}
        fn ld(field: u8, b: &[u8]) -> Vec<u8> {
            let mut v = vec![(field << 3) | 2, b.len() as u8];
            v.extend_from_slice(b);
            v
        }
        let tm = [ld(1, b"v1"), ld(2, b"Namespace")].concat();
        let label = [ld(1, b"a"), ld(2, b"b")].concat();
        let meta = [ld(1, b"team"), ld(11, &label)].concat();
        let ns = [ld(1, &meta), ld(2, &[])].concat();
        let body = [b"k8s\0".to_vec(), ld(1, &tm), ld(2, &ns)].concat();
        let v = namespace_from_protobuf(&body).unwrap();
        assert_eq!(v["metadata"]["name"], "team");
        assert_eq!(v["metadata"]["labels"]["a"], "b");
        assert_eq!(v["kind"], "Namespace");
        assert_eq!(
            namespace_from_protobuf(b"k8s\0\x0a\x05ab")
                .unwrap_err()
                .code,
            400
        );
        assert_eq!(namespace_from_protobuf(b"{}").unwrap_err().code, 400);
    }

    #[test]
    fn namespace_names() {
        assert!(validate_name("kube-system").is_empty());
        assert_eq!(
            validate_name("Bad_Name")[0].to_string(),
            format!("metadata.name: Invalid value: \"Bad_Name\": {DNS1123_LABEL_MSG}")
        );
        assert_eq!(
            validate_name("")[0].to_string(),
            "metadata.name: Required value: name or generateName is required"
        );
        assert_eq!(
            validate_name(&"a".repeat(64))[0].detail,
            "must be no more than 63 characters"
        );
    }
}
