//! Core `v1` namespaces of a tenant (`/api/v1/namespaces`): create, get, list, watch,
//! update, patch, delete, `/status` and `/finalize`. Stored through the storage service as
//! group "" resource `namespaces`. Deleting a namespace marks it Terminating; the registry's
//! namespace controller (services/registry/src/lifecycle.rs) deletes the custom resources in
//! it in the background and then the namespace.
//!
//! Create, get, update, patch (main resource, `/status`, `/finalize`) and delete run on the
//! generic handlers of `crdplane_apiserver::handlers` over the storage service
//! ([`crate::stores::storage`]) with the namespace strategies and store
//! ([`crate::stores::namespaces`]; upstream's own namespace REST.Delete — its precondition
//! texts, the Terminating mark, the handoff to the namespace controller — is the store's
//! `mark_deleting` and the strategy's precondition check); get, list and watch are the read
//! verbs of [`crate::reads`].
//!
//! Follows k8s.io/kubernetes pkg/registry/core/namespace/strategy.go (finalizers, phase) and
//! pkg/apis/core/validation (DNS-1123 label names).

use crate::context::{Ctx, Req};
use crate::http::{Body, json_response};
use crate::reads;
use crate::request::decode_body;
use crate::stores::builtin::protobuf;
use crate::stores::namespaces::{Endpoint, ImmortalNamespaces, NamespaceStore, NamespaceStrategy};
use crate::stores::typed::unknown_fields;
use crate::table::TableConvertor;
use crate::watch;
use crdplane_apiserver::admission::Chain;
use crdplane_apiserver::handlers;
use crdplane_core::{ApiError, GroupResource};
use http::{Response, StatusCode};
use k8s_openapi::api::core::v1::Namespace;
use serde_json::json;
use std::sync::OnceLock;

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

/// The read verbs' description of a tenant's namespaces.
fn resource(tenant: &str) -> reads::Resource<'_> {
    reads::Resource {
        api_version: "v1",
        kind: "Namespace",
        list_kind: "NamespaceList",
        stored: [tenant, "", "namespaces"],
        table: table(),
    }
}

/// Serves one `/api/v1/namespaces` request (main resource, `/status`, `/finalize`).
pub async fn serve(ctx: &Ctx, req: &Req) -> Result<Response<Body>, ApiError> {
    let i = &req.info;
    let tenant = &i.tenant;
    req.dry_run()?;
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
            let obj = protobuf::request_object(req, "Namespace")?;
            let warnings = crate::request::strict_warnings(req, "Namespace", "v1", || {
                unknown_fields::<Namespace>(&obj)
            })?;
            let opts = crate::request::write_options(req)?;
            let v = crate::lifecycle::create_namespace(ctx, tenant, obj, &opts).await?;
            Ok(crate::respond::with_warnings(
                json_response(StatusCode::CREATED, serde_json::to_vec(&v).expect("json")),
                &warnings,
            ))
        }
        // The read verbs over the storage service; a GET of `/status` reads the same
        // object, as upstream's status REST does.
        "get" => reads::get(req, &resource(tenant), &NamespaceStore::new(ctx, tenant)).await,
        "list" => {
            let store = NamespaceStore::new(ctx, tenant);
            reads::list(ctx, req, &resource(tenant), &store, || selectors(req)).await
        }
        "watch" => {
            let table = watch::table_fn(table());
            let t = reads::watch_target(req, &resource(tenant), table, selectors(req)?);
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
            let warnings = crate::request::strict_warnings(req, "Namespace", "v1", || {
                body.as_ref()
                    .map(unknown_fields::<Namespace>)
                    .unwrap_or_default()
            })?;
            let store = NamespaceStore::new(ctx, tenant);
            let strategy = NamespaceStrategy(match i.subresource.as_str() {
                "status" => Endpoint::Status,
                "finalize" => Endpoint::Finalize,
                _ => Endpoint::Main,
            });
            let admission = Chain::none();
            let opts = crate::request::write_options(req)?;
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
                        &opts,
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
                        &opts,
                    )
                    .await?
                }
            };
            Ok(crate::respond::written(w, &warnings))
        }
        "delete" => {
            // storage.go `REST.Delete` over the generic delete handler: the namespace
            // store's first DELETE marks it Terminating for the namespace controller, the
            // strategy checks preconditions with the namespace's own texts, and the
            // default namespaces are refused by admission.
            let o = crate::request::request_delete_options(req)?;
            let store = NamespaceStore::new(ctx, tenant);
            let strategy = NamespaceStrategy(Endpoint::Main);
            let admission = Chain(vec![Box::new(ImmortalNamespaces)]);
            let w = handlers::delete(&store, &strategy, &admission, "", &i.name, &o).await?;
            Ok(crate::respond::written(w, &[]))
        }
        _ => Err(ApiError::method_not_supported(&gr(), &i.verb)),
    }
}

/// Namespaces select by `metadata.name` and `status.phase` (namespace strategy.go
/// `NamespaceToSelectableFields`).
fn selectors(req: &Req) -> Result<(String, String), ApiError> {
    crate::list::checked_selectors(req, |f| matches!(f, "metadata.name" | "status.phase"))
}
