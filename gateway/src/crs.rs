//! Custom-resource endpoints: get, list, create, update, patch, delete, deletecollection, the
//! status subresource (the scale subresource's endpoint is [`crate::scale_rest`]), for every served
//! version of an Established CRD. Deletion honours DeleteOptions (preconditions,
//! propagationPolicy/orphanDependents → GC finalizers, dryRun) and finalizers (store.go:
//! objects with finalizers are marked with a deletionTimestamp and kept until an update
//! removes the last one).
//!
//! Handler → strategy (pure functions in [`crate::strategy`]) → validation service (`Admit`:
//! metadata, apiVersion/kind, prune, default, schema) → storage service. Follows
//! apiextensions-apiserver pkg/apiserver/customresource_handler.go and
//! k8s.io/apiserver pkg/endpoints/handlers/{create,update,patch,delete,get}.go.

use crate::context::{Ctx, Req};
use crate::cr_store::{
    admit, api_version, current, for_version, key, resource_ref, storage_write, store_existing,
};
use crate::crd::{CrdInfo, VersionInfo};
use crate::http::{Body, Output, json_response, negotiate_output};
use crate::request::{
    FieldValidation, PATCH_TYPES, apply_patch, check_selectors, decode_body, field_validation,
    include_object, not_an_object, parse_limit, parse_object, record_patch_findings,
    request_delete_options, write_dry_run,
};
use crate::respond::{add_warnings, table_api_version, with_warnings};
use crate::retry::{Failure, guaranteed_update, write_failed};
use crate::strategy::{self, CreateParams};
use bytes::Bytes;
use crdplane_core::ApiError;
use crdplane_proto::GrpcStatusExt;
use crdplane_proto::v1 as pb;
use http::{Response, StatusCode};
use serde_json::{Value, json};
use std::sync::Arc;

/// Serves one request for a custom resource of `crd` (main resource, `/status`, `/scale`).
pub async fn serve(ctx: &Ctx, req: &Req, crd: Arc<CrdInfo>) -> Result<Response<Body>, ApiError> {
    let i = &req.info;
    let ver = crd
        .version(&i.api_version)
        .ok_or_else(ApiError::path_not_found)?;
    if crd.namespaced {
        if i.namespace.is_empty() && !matches!(i.verb.as_str(), "list" | "watch") {
            return Err(ApiError::path_not_found());
        }
    } else if !i.namespace.is_empty() {
        return Err(ApiError::path_not_found());
    }
    let sub = i.subresource.as_str();
    match sub {
        "" => {}
        "status" if ver.has_status => {}
        "scale" if ver.scale.is_some() => {}
        _ => return Err(ApiError::path_not_found()),
    }
    if crd.terminating && sub.is_empty() && i.verb == "create" {
        // customresource_handler.go serveResource: MethodNotSupported, own message.
        let mut e = ApiError::method_not_supported(&crd.gr(), &i.verb);
        e.message = format!(
            "{} not allowed while custom resource definition is terminating",
            i.verb
        );
        return Err(e);
    }
    // Each verb's future is boxed on its own: the request's future (boxed once by the router)
    // then holds a pointer instead of the largest verb's state, and only the verb taken is
    // allocated and moved — a GET does not pay for the size of a create or a watch.
    let mut resp = match (sub, i.verb.as_str()) {
        ("scale", _) => Box::pin(crate::scale_rest::serve(ctx, req, &crd, ver)).await,
        (_, "get") => Box::pin(get(ctx, req, &crd, ver)).await,
        ("", "list") => Box::pin(list(ctx, req, &crd, ver)).await,
        ("", "watch") => Box::pin(crate::watch::serve_cr(ctx, req, crd.clone())).await,
        ("", "create") => Box::pin(create(ctx, req, &crd, ver)).await,
        (_, "update") => Box::pin(update(ctx, req, &crd, ver)).await,
        (_, "patch") => Box::pin(patch(ctx, req, &crd, ver)).await,
        ("", "delete") => Box::pin(delete(ctx, req, &crd, ver)).await,
        ("", "deletecollection") => Box::pin(delete_collection(ctx, req, &crd, ver)).await,
        _ => Err(ApiError::method_not_supported(&crd.gr(), &i.verb)),
    }?;
    if let Some(w) = deprecation_warning(&crd, ver) {
        add_warnings(&mut resp, &[w]);
    }
    Ok(resp)
}

/// Upstream `defaultDeprecationWarning` (customresource_handler.go).
pub fn deprecation_warning(crd: &CrdInfo, ver: &VersionInfo) -> Option<String> {
    if !ver.deprecated {
        return None;
    }
    if let Some(w) = &ver.deprecation_warning {
        return Some(w.clone());
    }
    let mut msg = format!("{}/{} {} is deprecated", crd.group, ver.name, crd.kind);
    // The newest served, non-deprecated version by Kubernetes version priority.
    let mut candidates: Vec<&VersionInfo> = crd
        .versions
        .iter()
        .filter(|v| v.served && !v.deprecated)
        .collect();
    candidates.sort_by(|a, b| crdplane_core::names::compare_kube_versions(&a.name, &b.name));
    if let Some(v) = candidates.first() {
        msg.push_str(&format!("; use {}/{} {}", crd.group, v.name, crd.kind));
    }
    Some(msg)
}

// ---- validation service -------------------------------------------------------------------

// ---- version conversion (strategy None: apiVersion rewrite) -----------------------------

// ---- handlers -----------------------------------------------------------------------------

fn table_response(
    req: &Req,
    ver: &VersionInfo,
    version: &'static str,
    objs: &[Value],
    rv: Option<u64>,
    cont: &str,
    remaining: Option<u64>,
) -> Result<Response<Body>, ApiError> {
    let meta = crate::table::ListMeta {
        resource_version: rv.map(|r| r.to_string()).unwrap_or_default(),
        continue_token: cont.to_string(),
        remaining_item_count: remaining.map(|r| r as i64),
    };
    let opts = crate::table::RenderOptions {
        include_object: include_object(req)?,
        with_columns: true,
        api_version: table_api_version(version),
        now: chrono::Utc::now(),
    };
    let t = match (objs, rv) {
        ([one], None) => ver.table.object_to_table(one, &opts),
        _ => ver.table.render(objs, &meta, &opts),
    };
    Ok(json_response(
        StatusCode::OK,
        serde_json::to_vec(&t).expect("json"),
    ))
}

async fn get(
    ctx: &Ctx,
    req: &Req,
    crd: &CrdInfo,
    ver: &VersionInfo,
) -> Result<Response<Body>, ApiError> {
    let i = &req.info;
    let output = negotiate_output(req.header("accept"))?;
    let s = ctx
        .gets
        .call(key(crd, &i.tenant, &i.namespace, &i.name))
        .await
        .map_err(crdplane_proto::status::from_grpc)?;
    if !s.found {
        return Err(ApiError::not_found(&crd.gr(), &i.name));
    }
    let json = for_version(ctx, &i.tenant, crd, ver, vec![s.json])
        .await?
        .pop()
        .unwrap_or_default();
    match output {
        Output::Json => Ok(json_response(StatusCode::OK, json)),
        Output::Table(v) => table_response(req, ver, v, &[parse_object(&json)?], None, "", None),
    }
}

async fn list(
    ctx: &Ctx,
    req: &Req,
    crd: &CrdInfo,
    ver: &VersionInfo,
) -> Result<Response<Body>, ApiError> {
    let i = &req.info;
    let output = negotiate_output(req.header("accept"))?;
    let (label, field) = check_selectors(req, crd, ver)?;
    let page = match crate::list::storage_page(
        ctx,
        req,
        resource_ref(crd, &i.tenant),
        &i.namespace,
        label,
        field,
    )
    .await?
    {
        crate::list::Listed::Page(p) => p,
        crate::list::Listed::Answer(resp) => return Ok(resp),
    };
    let (rv, cont, remaining) = (
        page.resource_version,
        page.continue_token.clone(),
        page.remaining,
    );
    // Stored bytes go out as they are (spliced into the list document) unless a version
    // rewrite or read defaults are needed.
    let want = api_version(crd, &ver.name);
    let items = if !ver.has_defaults && all_served_as_is(&page.items, &want) {
        page.items
    } else {
        for_version(ctx, &i.tenant, crd, ver, page.items).await?
    };
    match output {
        Output::Json => Ok(json_response(
            StatusCode::OK,
            strategy::list_json(&want, &crd.list_kind, &items, rv, &cont, remaining),
        )),
        Output::Table(v) => {
            let objs: Vec<Value> = items
                .iter()
                .map(|b| parse_object(b))
                .collect::<Result<_, _>>()?;
            table_response(req, ver, v, &objs, Some(rv), &cont, remaining)
        }
    }
}

/// Whether every stored object already has `want` as its apiVersion (stored objects are
/// written with "apiVersion" as their first key).
fn all_served_as_is(items: &[Bytes], want: &str) -> bool {
    let prefix = format!(
        "{{\"apiVersion\":{}",
        serde_json::to_string(want).expect("json")
    );
    items.iter().all(|b| b.starts_with(prefix.as_bytes()))
}

fn require_kind(obj: &Value, body: &[u8]) -> Result<(), ApiError> {
    if obj
        .get("kind")
        .and_then(Value::as_str)
        .is_none_or(str::is_empty)
    {
        return Err(ApiError::bad_request(format!(
            "Object 'Kind' is missing in '{}'",
            String::from_utf8_lossy(body)
        )));
    }
    Ok(())
}

async fn create(
    ctx: &Ctx,
    req: &Req,
    crd: &CrdInfo,
    ver: &VersionInfo,
) -> Result<Response<Body>, ApiError> {
    let i = &req.info;
    let dry = write_dry_run(req)?;
    if crd.terminating {
        return Err(ApiError::method_not_supported(&crd.gr(), "create"));
    }
    let mut obj = decode_body(req)?;
    require_kind(&obj, &req.body)?;
    if crd.namespaced {
        // Upstream's NamespaceLifecycle names the object being created in its 403.
        let name = obj
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or("");
        crate::lifecycle::require_namespace_for(ctx, &i.tenant, &i.namespace, &crd.gr(), name)
            .await?;
    }
    // etcd3 store.go Create refuses an object that carries a resourceVersion (after
    // admission, and not on dry run); the error is not a Status, so upstream's
    // ErrorToAPIStatus answers 500 with reason Unknown and the bare text.
    let rv_set = strategy::rv_set_on_create(&obj);
    let params = CreateParams {
        namespace: &i.namespace,
        namespaced: crd.namespaced,
        uid: uuid::Uuid::new_v4().to_string(),
        now: crdplane_core::names::now_timestamp(),
        drop_status: ver.has_status,
    };
    strategy::prepare_for_create(&mut obj, &params)?;
    let (obj, warnings) = admit(
        ctx,
        req,
        crd,
        ver,
        pb::admit_request::Operation::Create,
        &obj,
        None,
        "",
    )
    .await?;
    let name = obj
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    if rv_set && !dry {
        return Err(ApiError::new(
            crdplane_core::Reason::Unknown,
            "resourceVersion should not be set on objects to be created",
        ));
    }
    let s = ctx
        .creates
        .call(pb::CreateRequest {
            key: Some(key(crd, &i.tenant, &i.namespace, &name)),
            object: Some(storage_write(crd, obj)?),
            dry_run: dry,
            ttl_seconds: 0,
        })
        .await
        .map_err(crdplane_proto::status::from_grpc)?;
    if !dry {
        crate::gc::verify_added_refs(&ctx.storage, &i.tenant, &s.json, None).await;
    }
    let json = for_version(ctx, &i.tenant, crd, ver, vec![s.json])
        .await?
        .pop()
        .unwrap_or_default();
    Ok(with_warnings(
        json_response(StatusCode::CREATED, json),
        &warnings,
    ))
}

pub use crdplane_apiserver::handlers::rv_required;

/// Name and namespace of a PUT/PATCH body must match the URL
/// ([`crdplane_apiserver::handlers::check_identity`]).
fn check_identity(obj: &mut Value, req: &Req, crd: &CrdInfo) -> Result<(), ApiError> {
    crdplane_apiserver::handlers::check_identity(
        obj,
        crd.namespaced,
        &req.info.namespace,
        &req.info.name,
    )
}

async fn update(
    ctx: &Ctx,
    req: &Req,
    crd: &CrdInfo,
    ver: &VersionInfo,
) -> Result<Response<Body>, ApiError> {
    write_dry_run(req)?;
    let mut obj = decode_body(req)?;
    require_kind(&obj, &req.body)?;
    check_identity(&mut obj, req, crd)?;
    let rv = strategy::object_rv(&obj)?;
    // store.go Update inside GuaranteedUpdate: a missing object is 404 (custom resources do
    // not AllowCreateOnUpdate), then the resourceVersion is required (no
    // AllowUnconditionalUpdate) and must be the stored one; a lost swap re-reads and checks
    // again.
    let obj = &obj;
    let (stored, warnings) = guaranteed_update(|| async move {
        let (old, old_rv) = current(ctx, req, crd, ver).await?;
        if rv == 0 {
            return Err(Failure::Final(rv_required(&crd.gr(), &req.info.name)));
        }
        if rv != old_rv {
            return Err(Failure::Final(ApiError::stale(&crd.gr(), &req.info.name)));
        }
        store_existing(ctx, req, crd, ver, obj.clone(), &old, old_rv)
            .await
            .map_err(write_failed)
    })
    .await?;
    Ok(with_warnings(
        json_response(StatusCode::OK, stored),
        &warnings,
    ))
}

/// patch.go `applyJSPatch`: under fieldValidation Strict or Warn a merge patch is first
/// decoded strictly into a map, so a patch that is not an object (nor `null`) is a 400
/// `error decoding patch: json: cannot unmarshal <type> into Go value of type
/// map[string]interface {}` before anything is applied.
fn strict_merge_patch_shape(req: &Req) -> Result<(), ApiError> {
    if matches!(field_validation(req), Ok(FieldValidation::Ignore) | Err(_))
        || crate::http::media_type(req.header("content-type").unwrap_or(""))
            != "application/merge-patch+json"
    {
        return Ok(());
    }
    let go_type = match serde_json::from_slice::<Value>(&req.body) {
        Ok(Value::Array(_)) => "array",
        Ok(Value::String(_)) => "string",
        Ok(Value::Number(_)) => "number",
        Ok(Value::Bool(_)) => "bool",
        _ => return Ok(()),
    };
    Err(ApiError::bad_request(format!(
        "error decoding patch: json: cannot unmarshal {go_type} into Go value of type \
         map[string]interface {{}}"
    )))
}

async fn patch(
    ctx: &Ctx,
    req: &Req,
    crd: &CrdInfo,
    ver: &VersionInfo,
) -> Result<Response<Body>, ApiError> {
    let ct = req.header("content-type").unwrap_or("").to_string();
    // Reject unsupported types before touching storage.
    let mime = crate::http::media_type(&ct);
    if !PATCH_TYPES.contains(&mime.as_str()) {
        return Err(ApiError::unsupported_media_type(&PATCH_TYPES));
    }
    write_dry_run(req)?;
    strict_merge_patch_shape(req)?;
    record_patch_findings(req);
    // patch.go: the patch is applied to the current object inside GuaranteedUpdate, so a
    // write that loses a race is re-applied to the new current object; a resourceVersion
    // the patch sets is a precondition that fails on that re-read.
    let ct = &ct;
    let (stored, warnings) = guaranteed_update(|| async move {
        let (old, old_rv) = current(ctx, req, crd, ver).await?;
        let mut obj = apply_patch(ct, &req.body, &old)?;
        if !obj.is_object() {
            return Err(Failure::Final(not_an_object(&obj)));
        }
        check_identity(&mut obj, req, crd)?;
        if strategy::object_rv(&obj)? != old_rv {
            return Err(Failure::Final(ApiError::stale(&crd.gr(), &req.info.name)));
        }
        store_existing(ctx, req, crd, ver, obj, &old, old_rv)
            .await
            .map_err(write_failed)
    })
    .await?;
    Ok(with_warnings(
        json_response(StatusCode::OK, stored),
        &warnings,
    ))
}

// ---- deletion: DeleteOptions, finalizers, garbage-collection finalizers ------------------

pub use crdplane_apiserver::rest::delete::{
    DeleteOptions, DeletionPlan, FINALIZER_FOREGROUND, FINALIZER_ORPHAN,
    check_delete_preconditions, dry_run_not_supported, gc_finalizers, mark_as_deleting,
    no_new_finalizers, parse_delete_options_body, plan_deletion, should_delete_during_update,
    validate_delete_options,
};

/// The result of deleting one object.
enum DeleteOutcome {
    /// Gone; the uid for the Success Status.
    Deleted { uid: String },
    /// Kept (finalizers pending): the stored object (storage version).
    Pending(Bytes),
}

/// One object's deletion with `o` (store.go `Delete`), retried when it lost a race.
/// `known` is the object as a list just read it (deletecollection), saving the first read.
async fn delete_one(
    ctx: &Ctx,
    tenant: &str,
    crd: &CrdInfo,
    ns: &str,
    name: &str,
    o: &DeleteOptions,
    mut known: Option<pb::StoredObject>,
) -> Result<DeleteOutcome, ApiError> {
    let k = &key(crd, tenant, ns, name);
    let dry = o.is_dry_run();
    // store.go Delete runs in GuaranteedUpdate: a write that lost a race re-reads and
    // re-plans (crdplane_apiserver::retry); a precondition failure is final.
    guaranteed_update(|| {
        let known = known.take();
        async move {
            let cur = match known {
                Some(c) => c,
                None => ctx
                    .storage
                    .clone()
                    .get(pb::GetRequest {
                        key: Some(k.clone()),
                    })
                    .await
                    .map_err(crdplane_proto::status::from_grpc)?
                    .into_inner(),
            };
            let obj = parse_object(&cur.json)?;
            check_delete_preconditions(&obj, o, &crd.kind, &crd.group)?;
            let now = crdplane_core::names::now_timestamp();
            let plan = plan_deletion(
                &obj,
                o.orphan_dependents,
                o.propagation_policy.as_deref(),
                &now,
            );
            // The garbage collector's work item, recorded before the write (gc.rs).
            if !dry && !matches!(plan, DeletionPlan::Unchanged) {
                crate::gc::record(&ctx.storage, tenant, &crd.group, &crd.plural, &obj).await?;
            }
            match plan {
                DeletionPlan::Delete => {
                    ctx.storage
                        .clone()
                        .delete(pb::DeleteRequest {
                            key: Some(k.clone()),
                            expected_resource_version: cur.resource_version,
                            dry_run: dry,
                        })
                        .await
                        .map_err(|s| write_failed(ApiError::from_grpc(&s)))?;
                    Ok(DeleteOutcome::Deleted {
                        uid: obj
                            .pointer("/metadata/uid")
                            .and_then(Value::as_str)
                            .unwrap_or("")
                            .to_string(),
                    })
                }
                DeletionPlan::Update(marked) => {
                    let s = ctx
                        .storage
                        .clone()
                        .update(pb::UpdateRequest {
                            key: Some(k.clone()),
                            object: Some(storage_write(crd, marked)?),
                            expected_resource_version: cur.resource_version,
                            dry_run: dry,
                            ttl_seconds: 0,
                        })
                        .await
                        .map_err(|s| write_failed(ApiError::from_grpc(&s)))?;
                    Ok(DeleteOutcome::Pending(s.into_inner().json))
                }
                DeletionPlan::Unchanged => Ok(DeleteOutcome::Pending(cur.json)),
            }
        }
    })
    .await
}

/// The Success Status of a completed delete (store.go `finalizeDelete`).
fn deleted_status(crd: &CrdInfo, name: &str, uid: &str) -> Vec<u8> {
    let status = json!({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Success",
        "details":{"name": name, "group": crd.group, "kind": crd.plural, "uid": uid}});
    serde_json::to_vec(&status).expect("json")
}

async fn delete(
    ctx: &Ctx,
    req: &Req,
    crd: &CrdInfo,
    ver: &VersionInfo,
) -> Result<Response<Body>, ApiError> {
    let i = &req.info;
    let o = request_delete_options(req)?;
    match delete_one(ctx, &i.tenant, crd, &i.namespace, &i.name, &o, None).await? {
        DeleteOutcome::Deleted { uid } => Ok(json_response(
            StatusCode::OK,
            deleted_status(crd, &i.name, &uid),
        )),
        DeleteOutcome::Pending(b) => {
            let json = for_version(ctx, &i.tenant, crd, ver, vec![b])
                .await?
                .pop()
                .unwrap_or_default();
            // handlers/delete.go: 202 when not deleted and orphanDependents=false was asked.
            let code = if o.orphan_dependents == Some(false) {
                StatusCode::ACCEPTED
            } else {
                StatusCode::OK
            };
            Ok(json_response(code, json))
        }
    }
}

/// Page size of the list behind a deletecollection.
const DELETE_COLLECTION_PAGE: u32 = 500;
/// Concurrent per-object deletes of a deletecollection (upstream: DeleteCollectionWorkers).
const DELETE_COLLECTION_WORKERS: usize = 8;

/// store.go `DeleteCollection`: list the selected objects, then delete each with the
/// request's DeleteOptions (finalizers, preconditions, propagation and dryRun apply per
/// object; objects already gone are skipped). Answers with the list as it was read.
async fn delete_collection(
    ctx: &Ctx,
    req: &Req,
    crd: &CrdInfo,
    ver: &VersionInfo,
) -> Result<Response<Body>, ApiError> {
    use futures::StreamExt;
    let i = &req.info;
    let o = request_delete_options(req)?;
    let (label, field) = check_selectors(req, crd, ver)?;
    let limit = parse_limit(req)?;
    let mut items: Vec<Bytes> = Vec::new();
    let mut list_rv = 0;
    let mut start_after = String::new();
    loop {
        let page = if limit > 0 {
            limit
        } else {
            DELETE_COLLECTION_PAGE
        };
        let r = ctx
            .storage
            .clone()
            .list(pb::ListRequest {
                resource: Some(resource_ref(crd, &i.tenant)),
                namespace: i.namespace.clone(),
                limit: page,
                start_after: start_after.clone(),
                label_selector: label.clone(),
                field_selector: field.clone(),
                ..Default::default()
            })
            .await
            .map_err(crdplane_proto::status::from_grpc)?
            .into_inner();
        if list_rv == 0 {
            list_rv = r.resource_version;
        }
        items.extend(r.items);
        if limit > 0 || r.next_start_after.is_empty() {
            break;
        }
        start_after = r.next_start_after;
    }
    let targets: Vec<(String, String, pb::StoredObject)> = items
        .iter()
        .map(|b| {
            let v = parse_object(b)?;
            let s = |k: &str| {
                v.pointer(&format!("/metadata/{k}"))
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string()
            };
            let known = pb::StoredObject {
                json: b.clone(),
                resource_version: s("resourceVersion").parse().unwrap_or(0),
            };
            Ok((s("namespace"), s("name"), known))
        })
        .collect::<Result<_, ApiError>>()?;
    let deletes: Vec<_> = targets
        .iter()
        .map(|(ns, name, known)| delete_one(ctx, &i.tenant, crd, ns, name, &o, Some(known.clone())))
        .collect();
    let mut results = futures::stream::iter(deletes).buffer_unordered(DELETE_COLLECTION_WORKERS);
    while let Some(r) = results.next().await {
        match r {
            Ok(_) => {}
            Err(e) if e.code == 404 => {}
            Err(e) => return Err(e),
        }
    }
    drop(results);
    let items = for_version(ctx, &i.tenant, crd, ver, items).await?;
    Ok(json_response(
        StatusCode::OK,
        strategy::list_json(
            &api_version(crd, &ver.name),
            &crd.list_kind,
            &items,
            list_rv,
            "",
            None,
        ),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::request::parse_delete_options_query;

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn gc_finalizers_follow_the_options() {
        assert_eq!(gc_finalizers(&[], None, None), (false, vec![]));
        assert_eq!(
            gc_finalizers(&[], None, Some("Background")),
            (false, vec![])
        );
        assert_eq!(
            gc_finalizers(&s(&["a"]), None, Some("Orphan")),
            (true, s(&["a", "orphan"]))
        );
        assert_eq!(
            gc_finalizers(&s(&["a"]), None, Some("Foreground")),
            (true, s(&["a", "foregroundDeletion"]))
        );
        assert_eq!(gc_finalizers(&[], Some(true), None), (true, s(&["orphan"])));
        assert_eq!(gc_finalizers(&[], Some(false), None), (false, vec![]));
        // Background removes GC finalizers; no options keep what is there.
        assert_eq!(
            gc_finalizers(&s(&["orphan", "x"]), None, Some("Background")),
            (true, s(&["x"]))
        );
        assert_eq!(
            gc_finalizers(&s(&["orphan"]), None, None),
            (false, s(&["orphan"]))
        );
        // Switching policy swaps the GC finalizer.
        assert_eq!(
            gc_finalizers(&s(&["orphan"]), None, Some("Foreground")),
            (true, s(&["foregroundDeletion"]))
        );
    }

    fn obj(finalizers: &[&str]) -> Value {
        json!({"apiVersion":"g/v1","kind":"K","metadata":{"name":"x","uid":"u","generation":2,
            "resourceVersion":"5","finalizers":finalizers},"spec":{}})
    }

    #[test]
    fn deletion_plans() {
        let now = "2026-01-01T00:00:00Z";
        assert_eq!(
            plan_deletion(&obj(&[]), None, None, now),
            DeletionPlan::Delete
        );
        let DeletionPlan::Update(m) = plan_deletion(&obj(&["x.io/f"]), None, None, now) else {
            panic!("expected an update");
        };
        assert_eq!(m["metadata"]["deletionTimestamp"], now);
        assert_eq!(m["metadata"]["deletionGracePeriodSeconds"], 0);
        assert_eq!(m["metadata"]["generation"], 3);
        // A second DELETE changes nothing (an earlier timestamp stays, no generation bump).
        assert_eq!(
            plan_deletion(&m, None, None, "2026-01-02T00:00:00Z"),
            DeletionPlan::Unchanged
        );
        // Orphan adds its finalizer to an object without any, and keeps it.
        let DeletionPlan::Update(o) = plan_deletion(&obj(&[]), None, Some("Orphan"), now) else {
            panic!("expected an update");
        };
        assert_eq!(o["metadata"]["finalizers"], json!(["orphan"]));
        assert!(o["metadata"]["deletionTimestamp"].is_string());
        // Background on an object whose only finalizer is a GC one: deleted at once.
        assert_eq!(
            plan_deletion(&obj(&["orphan"]), None, Some("Background"), now),
            DeletionPlan::Delete
        );
    }

    #[test]
    fn finalizer_rules_while_deleting() {
        let mut old = obj(&["a"]);
        assert!(
            no_new_finalizers(&obj(&["a", "b"]), &old).is_empty(),
            "not deleting"
        );
        old["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
        old["metadata"]["deletionGracePeriodSeconds"] = json!(0);
        let errs = no_new_finalizers(&obj(&["a", "z", "b"]), &old);
        assert_eq!(
            errs[0].to_string(),
            "metadata.finalizers: Forbidden: no new finalizers can be added if the object is being deleted, found new finalizers []string{\"b\", \"z\"}"
        );
        assert!(no_new_finalizers(&obj(&[]), &old).is_empty());
        assert!(should_delete_during_update(&obj(&[]), &old));
        assert!(!should_delete_during_update(&obj(&["a"]), &old));
        assert!(!should_delete_during_update(&obj(&[]), &obj(&["a"])));
    }

    #[test]
    fn delete_options_parse_and_validate() {
        let o = parse_delete_options_body(&json!({"kind":"DeleteOptions","apiVersion":"v1",
            "preconditions":{"uid":"u","resourceVersion":"5"},"propagationPolicy":"Orphan",
            "gracePeriodSeconds":0,"dryRun":["All"]}))
        .unwrap();
        assert_eq!(o.precondition_uid.as_deref(), Some("u"));
        assert_eq!(o.precondition_rv.as_deref(), Some("5"));
        assert!(o.is_dry_run());
        assert!(validate_delete_options(&o).is_empty());
        assert_eq!(
            parse_delete_options_body(&json!({"gracePeriodSeconds":"x"}))
                .unwrap_err()
                .message,
            "json: cannot unmarshal string into Go struct field DeleteOptions.gracePeriodSeconds of type int64"
        );
        let bad = DeleteOptions {
            propagation_policy: Some("Bad".into()),
            dry_run: s(&["x"]),
            ..Default::default()
        };
        let e = ApiError::invalid(
            "DeleteOptions",
            "meta.k8s.io",
            "",
            &validate_delete_options(&bad),
        );
        assert_eq!(
            e.message,
            r#"DeleteOptions.meta.k8s.io "" is invalid: [propagationPolicy: Unsupported value: "Bad": supported values: "Foreground", "Background", "Orphan", "nil", dryRun: Unsupported value: []string{"x"}: supported values: "All"]"#
        );
        let both = DeleteOptions {
            propagation_policy: Some("Orphan".into()),
            orphan_dependents: Some(true),
            ..Default::default()
        };
        assert_eq!(
            validate_delete_options(&both)[0].to_string(),
            r#"propagationPolicy: Invalid value: "Orphan": orphanDependents and deletionPropagation cannot be both set"#
        );
        let q = crate::http::Query::parse(Some(
            "propagationPolicy=Foreground&gracePeriodSeconds=3&orphanDependents=False&dryRun=All",
        ));
        let o = parse_delete_options_query(&q).unwrap();
        assert_eq!(
            (
                o.propagation_policy.as_deref(),
                o.grace_period_seconds,
                o.orphan_dependents
            ),
            (Some("Foreground"), Some(3), Some(false))
        );
        assert!(o.is_dry_run());
        // Not strconv.ParseBool: only 0/false are false (runtime/conversion.go).
        let q = crate::http::Query::parse(Some("orphanDependents=f"));
        assert_eq!(
            parse_delete_options_query(&q).unwrap().orphan_dependents,
            Some(true)
        );
        let q = crate::http::Query::parse(Some("gracePeriodSeconds=soon"));
        assert_eq!(
            parse_delete_options_query(&q).unwrap_err().message,
            "strconv.ParseInt: parsing \"soon\": invalid syntax"
        );
    }

    #[test]
    fn delete_preconditions_name_the_kind() {
        let o = DeleteOptions {
            precondition_uid: Some("other".into()),
            ..Default::default()
        };
        let e =
            check_delete_preconditions(&obj(&[]), &o, "CronTab", "stable.example.com").unwrap_err();
        assert_eq!(e.code, 409);
        assert_eq!(
            e.message,
            "Operation cannot be fulfilled on CronTab.stable.example.com \"x\": the UID in the precondition (other) does not match the UID in record (u). The object might have been deleted and then recreated"
        );
        let o = DeleteOptions {
            precondition_rv: Some("4".into()),
            ..Default::default()
        };
        assert!(
            check_delete_preconditions(&obj(&[]), &o, "CronTab", "stable.example.com")
                .unwrap_err()
                .message
                .ends_with("the ResourceVersion in the precondition (4) does not match the ResourceVersion in record (5). The object might have been modified")
        );
        let ok = DeleteOptions {
            precondition_uid: Some("u".into()),
            precondition_rv: Some("5".into()),
            ..Default::default()
        };
        assert!(
            check_delete_preconditions(&obj(&[]), &ok, "CronTab", "stable.example.com").is_ok()
        );
    }
}
