//! Core `v1` namespaces of a tenant (`/api/v1/namespaces`): create, get, list, watch,
//! update, patch, delete, `/status` and `/finalize`. Stored through the storage service as
//! group "" resource `namespaces`. Deleting a namespace marks it Terminating; the registry's
//! namespace controller (services/registry/src/lifecycle.rs) deletes the custom resources in
//! it in the background and then the namespace.
//!
//! Create, get, update and patch (main resource, `/status`, `/finalize`) run on the generic
//! handlers of `crdplane_apiserver::handlers` over the storage service
//! ([`crate::stores::storage`]) with the namespace strategies ([`crate::stores::namespaces`]).
//! Delete stays here: it is upstream's own namespace REST.Delete
//! (pkg/registry/core/namespace/storage/storage.go: its precondition texts, the Terminating
//! mark, the handoff to the namespace controller), not the generic store's.
//!
//! Follows k8s.io/kubernetes pkg/registry/core/namespace/strategy.go (finalizers, phase) and
//! pkg/apis/core/validation (DNS-1123 label names).

use crate::context::{Ctx, Req};
use crate::http::{Body, Output, json_response, negotiate_output};
use crate::request::{decode_body, delete_options};
use crate::stores::builtin::protobuf;
use crate::stores::namespaces::{Endpoint, NamespaceStrategy, finalized, storage_key, storage_ref};
use crate::stores::storage::StorageStore;
use crate::table::{IncludeObject, ListMeta, TableConvertor};
use crate::watch::{self, TableFn};
use crdplane_apiserver::admission::Chain;
use crdplane_apiserver::handlers;
use crdplane_core::{ApiError, GroupResource, rvslot};
use crdplane_proto::v1 as pb;
use http::{Response, StatusCode};
use serde_json::{Value, json};
use std::sync::{Arc, OnceLock};

fn gr() -> GroupResource {
    GroupResource::new("", "namespaces")
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

/// The namespaces of `tenant` in the storage service, as the generic handlers' store.
fn store<'a>(ctx: &'a Ctx, tenant: &'a str) -> StorageStore<'a> {
    StorageStore {
        storage: &ctx.storage,
        tenant,
        gr: gr(),
        ttl_seconds: 0,
    }
}

/// Serves one `/api/v1/namespaces` request (main resource, `/status`, `/finalize`).
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
            // kubectl's `create namespace` sends protobuf.
            let obj = if protobuf::is_protobuf(req.header("content-type")) {
                protobuf::namespace(&req.body)?
            } else {
                decode_body(req)?
            };
            let warnings = crate::request::strict_warnings(req, "Namespace", "v1")?;
            let v = crate::lifecycle::create_namespace(ctx, tenant, obj, dry).await?;
            Ok(crate::respond::with_warnings(
                json_response(StatusCode::CREATED, serde_json::to_vec(&v).expect("json")),
                &warnings,
            ))
        }
        "get" => {
            // handlers/get.go `GetResource` over the storage service (also `/status`, which
            // upstream serves from the same object).
            let o = handlers::get(&store(ctx, tenant), "", &i.name).await?;
            match negotiate_output(req.header("accept"))? {
                Output::Json => Ok(json_response(
                    StatusCode::OK,
                    serde_json::to_vec(&o).expect("json"),
                )),
                Output::Table(_) => {
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
            let page =
                match crate::list::storage_page(ctx, req, storage_ref(tenant), "", label, field)
                    .await?
                {
                    crate::list::Listed::Page(p) => p,
                    crate::list::Listed::Answer(resp) => return Ok(resp),
                };
            match negotiate_output(req.header("accept"))? {
                Output::Json => Ok(json_response(
                    StatusCode::OK,
                    page.json("v1", "NamespaceList", &page.items),
                )),
                Output::Table(_) => {
                    let objs: Vec<Value> = page
                        .items
                        .iter()
                        .map(|b| serde_json::from_slice(b).map_err(ApiError::internal))
                        .collect::<Result<_, _>>()?;
                    let t = table().to_table(
                        &objs,
                        include(req),
                        &page.list_meta(),
                        chrono::Utc::now(),
                    );
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
                resource: storage_ref(tenant),
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
                crate::request::record_patch_findings(req);
                None
            };
            let warnings = crate::request::strict_warnings(req, "Namespace", "v1")?;
            let store = store(ctx, tenant);
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
                    let mime = crate::request::patch_media_type(req);
                    handlers::patch(
                        &store,
                        &strategy,
                        &admission,
                        &i.subresource,
                        "",
                        &i.name,
                        &crate::request::patch_request(req, &mime)?,
                    )
                    .await?
                }
            };
            Ok(crate::respond::with_warnings(
                json_response(StatusCode::OK, serde_json::to_vec(&w.object).expect("json")),
                &warnings,
            ))
        }
        "delete" => delete_namespace(ctx, req).await,
        _ => Err(ApiError::method_not_supported(&gr(), &i.verb)),
    }
}

fn include(req: &Req) -> IncludeObject {
    crate::request::include_object(req).unwrap_or(IncludeObject::Metadata)
}

/// Namespaces select by `metadata.name` and `status.phase` (namespace strategy.go
/// `NamespaceToSelectableFields`).
fn selectors(req: &Req) -> Result<(String, String), ApiError> {
    crate::list::checked_selectors(req, |f| matches!(f, "metadata.name" | "status.phase"))
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
            key: Some(storage_key(&i.tenant, &i.name)),
        })
        .await
        .map_err(crdplane_proto::status::from_grpc)?
        .into_inner();
    if crate::lifecycle::DEFAULT_NAMESPACES.contains(&i.name.as_str()) {
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
                key: Some(storage_key(&i.tenant, &i.name)),
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
            key: Some(storage_key(&i.tenant, &i.name)),
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
