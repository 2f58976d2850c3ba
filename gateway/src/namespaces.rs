//! Core `v1` namespaces of a tenant (`/api/v1/namespaces`): create, get, list, watch,
//! update, patch, delete. Stored through the storage service as group "" resource
//! `namespaces`. Deleting a namespace deletes every custom resource in it first.
//!
//! Follows k8s.io/kubernetes pkg/registry/core/namespace/strategy.go (finalizers, phase) and
//! pkg/apis/core/validation (DNS-1123 label names).

use crate::api::{Ctx, Req};
use crate::crs::{apply_patch, decode_body, delete_options, parse_limit, rv_required};
use crate::http::{Body, Output, json_response, negotiate_output};
use crate::table::{IncludeObject, ListMeta, TableConvertor};
use crate::watch::{self, TableFn};
use crdplane_core::field::FieldError;
use crdplane_core::selector::{FieldSelector, LabelSelector};
use crdplane_core::{ApiError, GroupResource, rvslot};
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
    if name.len() > 63 {
        errs.push(FieldError::invalid(
            "metadata.name",
            json!(name),
            "must be no more than 63 characters",
        ));
    }
    let b = name.as_bytes();
    let ok = b
        .iter()
        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
        && b.first().is_some_and(u8::is_ascii_alphanumeric)
        && b.last().is_some_and(u8::is_ascii_alphanumeric);
    if !ok {
        errs.push(FieldError::invalid(
            "metadata.name",
            json!(name),
            DNS1123_LABEL_MSG,
        ));
    }
    errs
}

/// Fails with upstream's 404 (`namespaces "x" not found`) when the namespace does not exist.
pub async fn require_namespace(ctx: &Ctx, tenant: &str, ns: &str) -> Result<(), ApiError> {
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
        .await?
        .into_inner();
    let v: Value = serde_json::from_slice(&s.json).map_err(ApiError::internal)?;
    if v.pointer("/status/phase").and_then(Value::as_str) == Some("Terminating") {
        return Err(ApiError::forbidden(
            &GroupResource::new("", "namespaces"),
            ns,
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
        })
        .await?
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
    if !i.subresource.is_empty() && i.subresource != "status" {
        return Err(ApiError::path_not_found());
    }
    match i.verb.as_str() {
        "create" => {
            let obj = decode_body(req)?;
            let v = create_namespace(ctx, tenant, obj, dry).await?;
            Ok(json_response(
                StatusCode::CREATED,
                serde_json::to_vec(&v).expect("json"),
            ))
        }
        "get" => {
            let s = ctx
                .storage
                .clone()
                .get(pb::GetRequest {
                    key: Some(key(tenant, &i.name)),
                })
                .await?
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
            let limit = parse_limit(req)?;
            let (start_after, token_rv) = match req.query.get("continue") {
                Some(c) if !c.is_empty() => {
                    let (k, rv) = crate::strategy::decode_continue(c)?;
                    (k, Some(rv))
                }
                _ => (String::new(), None),
            };
            let r = ctx
                .storage
                .clone()
                .list(pb::ListRequest {
                    resource: Some(rref(tenant)),
                    limit,
                    start_after,
                    label_selector: label,
                    field_selector: field,
                    ..Default::default()
                })
                .await?
                .into_inner();
            let rv = token_rv.unwrap_or(r.resource_version);
            let cont = if r.next_start_after.is_empty() {
                String::new()
            } else {
                crate::strategy::encode_continue(&r.next_start_after, rv)
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
            };
            watch::serve(ctx, req, t).await
        }
        "update" | "patch" => {
            let s = ctx
                .storage
                .clone()
                .get(pb::GetRequest {
                    key: Some(key(tenant, &i.name)),
                })
                .await?
                .into_inner();
            let old: Value = serde_json::from_slice(&s.json).map_err(ApiError::internal)?;
            let mut new = if i.verb == "update" {
                let v = decode_body(req)?;
                let rv = crate::strategy::object_rv(&v)?;
                if rv == 0 {
                    return Err(rv_required(&gr(), &i.name));
                }
                if rv != s.resource_version {
                    return Err(ApiError::stale(&gr(), &i.name));
                }
                v
            } else {
                let v = apply_patch(req.header("content-type").unwrap_or(""), &req.body, &old)?;
                if crate::strategy::object_rv(&v)? != s.resource_version {
                    return Err(ApiError::stale(&gr(), &i.name));
                }
                v
            };
            if new.pointer("/metadata/name").and_then(Value::as_str) != Some(i.name.as_str()) {
                return Err(ApiError::bad_request(format!(
                    "the name of the object ({}) does not match the name on the URL ({})",
                    new.pointer("/metadata/name")
                        .and_then(Value::as_str)
                        .unwrap_or(""),
                    i.name
                )));
            }
            // Namespace strategy: spec and status are kept unless writing /status; identity immutable.
            let keep: &[&str] = if i.subresource == "status" {
                &["spec"]
            } else {
                &["status"]
            };
            for k in keep {
                if let Some(v) = old.get(*k) {
                    new[*k] = v.clone();
                }
            }
            for k in ["uid", "creationTimestamp", "deletionTimestamp"] {
                match old.pointer(&format!("/metadata/{k}")) {
                    Some(v) => new["metadata"][k] = v.clone(),
                    None => {
                        if let Some(m) = new["metadata"].as_object_mut() {
                            m.remove(k);
                        }
                    }
                }
            }
            new["apiVersion"] = json!("v1");
            new["kind"] = json!("Namespace");
            let (head, tail) =
                rvslot::split(&new).map_err(|e| ApiError::bad_request(e.to_string()))?;
            let s = ctx
                .storage
                .clone()
                .update(pb::UpdateRequest {
                    key: Some(key(tenant, &i.name)),
                    object: Some(pb::ObjectWrite {
                        head: head.into(),
                        tail: tail.into(),
                    }),
                    expected_resource_version: s.resource_version,
                    dry_run: dry,
                })
                .await?
                .into_inner();
            Ok(json_response(StatusCode::OK, s.json))
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

/// Deletes every custom resource in the namespace (all namespaced CRDs of the tenant), then
/// the namespace. Returns the namespace as it was, marked Terminating.
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
        .await?
        .into_inner();
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
    if dry {
        return Ok(json_response(StatusCode::OK, s.json));
    }
    ns["status"]["phase"] = json!("Terminating");
    ns["metadata"]["deletionTimestamp"] = json!(crdplane_core::names::now_timestamp());
    // Mark Terminating first so no new content is created while we clean up.
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
        })
        .await?
        .into_inner();
    ctx.namespaces
        .write()
        .expect("lock")
        .remove(&(i.tenant.clone(), i.name.clone()));
    let crds = ctx
        .registry
        .clone()
        .list_crds(pb::CrdListRequest {
            tenant: i.tenant.clone(),
            ..Default::default()
        })
        .await?
        .into_inner();
    for c in crds.items {
        let c: Value = serde_json::from_slice(&c).map_err(ApiError::internal)?;
        if c.pointer("/spec/scope").and_then(Value::as_str) == Some("Cluster") {
            continue;
        }
        let group = c
            .pointer("/spec/group")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        let plural = c
            .pointer("/spec/names/plural")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        ctx.storage
            .clone()
            .delete_collection(pb::DeleteCollectionRequest {
                resource: Some(pb::ResourceRef {
                    tenant: i.tenant.clone(),
                    group,
                    resource: plural,
                }),
                namespace: i.name.clone(),
                ..Default::default()
            })
            .await?;
    }
    ctx.storage
        .clone()
        .delete(pb::DeleteRequest {
            key: Some(key(&i.tenant, &i.name)),
            expected_resource_version: marked.resource_version,
            dry_run: false,
        })
        .await?;
    Ok(json_response(StatusCode::OK, marked.json))
}

#[cfg(test)]
mod tests {
    use super::*;

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
