//! `apiextensions.k8s.io/v1` CustomResourceDefinition endpoints of a tenant: routing and
//! rendering only. get, create, update, patch (json, merge and strategic merge patch),
//! delete and deletecollection of the main resource, and get / update / patch of `/status`,
//! run on the generic handlers of `crdplane_apiserver::handlers` over the registry service
//! ([`crate::stores::crds`]: the CRD store and strategy, and which side does what); the
//! registry validates, names, sets conditions and persists. DELETE returns the CRD marked
//! for deletion; the registry's finalizer controller deletes its instances and then the CRD.
//!
//! get, list and watch are the read verbs of [`crate::reads`] over the same store (the
//! registry's paged list with the gateway's signed continue tokens, the shared watch
//! streams of [`crate::watch`]), with upstream's default Table.
//!
//! Follows k8s.io/apiserver pkg/endpoints/handlers (verbs) and apiextensions-apiserver
//! pkg/registry/customresourcedefinition (strategy.go, etcd.go).

use crate::context::{Ctx, Req};
use crate::http::Body;
use crate::reads;
use crate::request::{decode_body, request_delete_options, strict_warnings, write_options};
use crate::stores::crds::{CrdStore, CrdStrategy};
use crate::stores::typed::unknown_fields;
use crate::table::TableConvertor;
use crate::watch;
use crdplane_apiserver::admission::Chain;
use crdplane_apiserver::handlers::{self, Written};
use crdplane_apiserver::rest::ListOptions;
use crdplane_core::ApiError;
use http::Response;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;

/// The read verbs' description of a tenant's CRDs; their Table is upstream's default
/// (Name and Created At, as `kubectl get crd` shows).
fn resource(tenant: &str) -> reads::Resource<'_> {
    reads::Resource {
        api_version: "apiextensions.k8s.io/v1",
        kind: "CustomResourceDefinition",
        list_kind: "CustomResourceDefinitionList",
        stored: [tenant, "apiextensions.k8s.io", "customresourcedefinitions"],
        table: TableConvertor::default_convertor(),
    }
}

/// A write's answer: its code and the object (or Status) as JSON, with the request's
/// warnings and the handler's.
fn written(w: Written, extra: &[String]) -> Result<Response<Body>, ApiError> {
    Ok(crate::respond::written(w, extra))
}

/// CRDs select by `metadata.name` only.
fn selectors(req: &Req) -> Result<(String, String), ApiError> {
    crate::list::checked_selectors(req, |f| f == "metadata.name")
}

/// Serves one CustomResourceDefinition request of the tenant.
pub async fn serve(ctx: &Ctx, req: &Req) -> Result<Response<Body>, ApiError> {
    let i = &req.info;
    let tenant = i.tenant.clone();
    let status = match i.subresource.as_str() {
        "" => false,
        "status" => true,
        _ => return Err(ApiError::path_not_found()),
    };
    if !i.namespace.is_empty() {
        return Err(ApiError::path_not_found());
    }
    let opts = match i.verb.as_str() {
        "create" | "update" | "patch" => write_options(req)?,
        _ => crdplane_apiserver::handlers::WriteOptions::system("apiextensions.k8s.io/v1"),
    };
    let store = CrdStore {
        registry: ctx.registry.clone(),
        cache: &ctx.crds,
        tenant: &tenant,
        status,
    };
    let strategy = CrdStrategy { status };
    let admission = Chain::none();
    match i.verb.as_str() {
        "create" if !status => {
            // JSON or YAML in; the registry takes JSON.
            let obj = decode_body(req)?;
            let warnings = strict_warnings(req, "CustomResourceDefinition", "v1", || {
                unknown_fields::<CustomResourceDefinition>(&obj)
            })?;
            let w = handlers::create(&store, &strategy, &admission, "", obj, &opts).await?;
            written(w, &warnings)
        }
        // The registry serves the current state: no resourceVersion constraints on CRD
        // lists; tokens and list options as for every list.
        "get" => reads::get(req, &resource(&tenant), &store).await,
        "list" => reads::list(ctx, req, &resource(&tenant), &store, || selectors(req)).await,
        "watch" => {
            let table = watch::table_fn(TableConvertor::default_convertor());
            let t = reads::watch_target(req, &resource(&tenant), table, selectors(req)?);
            watch::serve(ctx, req, t).await
        }
        "update" => {
            let obj = decode_body(req)?;
            let warnings = strict_warnings(req, "CustomResourceDefinition", "v1", || {
                unknown_fields::<CustomResourceDefinition>(&obj)
            })?;
            let w = handlers::update(
                &store,
                &strategy,
                &admission,
                &i.subresource,
                "",
                &i.name,
                obj,
                &opts,
            )
            .await?;
            written(w, &warnings)
        }
        "patch" => {
            crate::request::record_patch_findings(req);
            let warnings = strict_warnings(req, "CustomResourceDefinition", "v1", Vec::new)?;
            let mime = crate::request::patch_media_type(req);
            let w = handlers::patch(
                &store,
                &strategy,
                &admission,
                &i.subresource,
                "",
                &i.name,
                &crate::request::patch_request(req, &mime)?,
                &opts,
            )
            .await?;
            written(w, &warnings)
        }
        "delete" if !status => {
            // The first DELETE marks the CRD (deletionTimestamp, cleanup finalizer,
            // Terminating) and returns it; the registry removes the instances and then the
            // CRD in the background (crate::stores::crds).
            let o = request_delete_options(req)?;
            let w = handlers::delete(&store, &strategy, &admission, "", &i.name, &o).await?;
            written(w, &[])
        }
        "deletecollection" if !status => {
            let (label_selector, field_selector) = selectors(req)?;
            let o = request_delete_options(req)?;
            let opts = ListOptions {
                label_selector,
                field_selector,
                limit: crate::request::parse_limit(req)?,
                ..Default::default()
            };
            let all =
                handlers::delete_collection(&store, &strategy, &admission, "", &opts, &o).await?;
            Ok(crate::respond::deleted_collection(
                "apiextensions.k8s.io/v1",
                "CustomResourceDefinitionList",
                &all,
            ))
        }
        _ => Err(ApiError::method_not_supported(
            crate::stores::crds::gr(),
            &i.verb,
        )),
    }
}
