//! The `/scale` subresource endpoint of custom resources: GET of the `autoscaling/v1` Scale
//! of an object, PUT and merge/JSON PATCH of `spec.replicas` back into it.
//!
//! Request path: the custom-resource handler (`crs`) routes `…/<plural>/<name>/scale` here
//! when the served version declares `subresources.scale`. A write reads the object, copies
//! the Scale's `spec.replicas` into the object at `specReplicasPath` ([`crate::scale`]),
//! carries the Scale's `metadata.resourceVersion` (if any) as the optimistic-concurrency
//! precondition, and stores the object through the main resource's update path
//! ([`crate::cr_store::store_existing`]: strategy, admission with the schema,
//! compare-and-swap in storage). The response is the Scale of the stored object.
//!
//! Follows apiextensions-apiserver pkg/registry/customresource/etcd.go (`ScaleREST`: Get,
//! Update, `scaleUpdatedObjectInfo`).

use crate::context::{Ctx, Req};
use crate::cr_store::{current, store_existing};
use crate::crd::{CrdInfo, VersionInfo};
use crate::http::{Body, json_response};
use crate::request::{PATCH_TYPES, apply_patch, decode_body, parse_object, write_dry_run};
use crate::respond::add_warnings;
use crate::retry::{Failure, guaranteed_update, write_failed};
use crate::scale::{
    INVALID_SPEC_REPLICAS, ScalePaths, ScaleWrite, apply_scale, decode_scale, scale_from_object,
};
use crdplane_core::field::go_quote;
use crdplane_core::{ApiError, Reason};
use http::{Response, StatusCode};
use serde_json::Value;

/// GET / PUT / PATCH of `…/<name>/scale`.
pub async fn serve(
    ctx: &Ctx,
    req: &Req,
    crd: &CrdInfo,
    ver: &VersionInfo,
) -> Result<Response<Body>, ApiError> {
    let Some(scale) = &ver.scale else {
        return Err(ApiError::path_not_found());
    };
    let paths = ScalePaths::from_crd(scale);
    if req.info.verb != "get" {
        write_dry_run(req)?;
    }
    match req.info.verb.as_str() {
        "get" => get(ctx, req, crd, ver, &paths).await,
        "update" => update(ctx, req, crd, ver, &paths).await,
        "patch" => patch(ctx, req, crd, ver, &paths).await,
        v => Err(ApiError::method_not_supported(&crd.gr(), v)),
    }
}

/// A non-API error of the scale conversion: upstream's generic 500 carries the raw text.
fn accessor_error(e: String) -> ApiError {
    ApiError::new(Reason::InternalError, e)
}

async fn get(
    ctx: &Ctx,
    req: &Req,
    crd: &CrdInfo,
    ver: &VersionInfo,
    paths: &ScalePaths,
) -> Result<Response<Body>, ApiError> {
    let (obj, _) = current(ctx, req, crd, ver).await?;
    let (scale, found) = scale_from_object(&obj, paths).map_err(accessor_error)?;
    if !found {
        return Err(ApiError::internal(format!(
            "the spec replicas field {} does not exist",
            go_quote(&paths.spec_replicas)
        )));
    }
    Ok(json_response(StatusCode::OK, scale.to_json()))
}

/// URL identity checks of a written Scale (the update handler's `checkName`).
fn check_identity(w: &ScaleWrite, req: &Req) -> Result<(), ApiError> {
    let i = &req.info;
    if w.name != i.name {
        return Err(ApiError::bad_request(format!(
            "the name of the object ({}) does not match the name on the URL ({})",
            w.name, i.name
        )));
    }
    if !w.namespace.is_empty() && w.namespace != i.namespace {
        return Err(ApiError::bad_request(
            "the namespace of the provided object does not match the namespace sent on the request",
        ));
    }
    Ok(())
}

/// Writes `w` into the current object and stores it, re-reading and re-applying after a
/// lost race (etcd3 store.go `GuaranteedUpdate`); a resourceVersion in the Scale is a
/// precondition checked against every read (etcd.go `scaleUpdatedObjectInfo`).
async fn write(
    ctx: &Ctx,
    req: &Req,
    crd: &CrdInfo,
    ver: &VersionInfo,
    paths: &ScalePaths,
    scale_of: impl Fn(&Value) -> Result<ScaleWrite, ApiError>,
) -> Result<Response<Body>, ApiError> {
    let scale_of = &scale_of;
    let (stored, warnings) = guaranteed_update(|| async move {
        let (old, old_rv) = current(ctx, req, crd, ver).await?;
        let w = scale_of(&old)?;
        check_identity(&w, req)?;
        if !w.resource_version.is_empty() {
            let rv: u64 = w.resource_version.parse().map_err(|_| {
                ApiError::bad_request(format!("invalid resourceVersion {:?}", w.resource_version))
            })?;
            if rv != old_rv {
                return Err(Failure::Final(ApiError::stale(&crd.gr(), &req.info.name)));
            }
        }
        let obj = apply_scale(&old, paths, &w)?;
        store_existing(ctx, req, crd, ver, obj, &old, old_rv)
            .await
            .map_err(write_failed)
    })
    .await?;
    let stored = parse_object(&stored)?;
    let (scale, _) = scale_from_object(&stored, paths).map_err(ApiError::bad_request)?;
    let mut r = json_response(StatusCode::OK, scale.to_json());
    add_warnings(&mut r, &warnings);
    Ok(r)
}

async fn update(
    ctx: &Ctx,
    req: &Req,
    crd: &CrdInfo,
    ver: &VersionInfo,
    paths: &ScalePaths,
) -> Result<Response<Body>, ApiError> {
    let body = decode_body(req)?;
    let w = decode_scale(&body)?;
    write(ctx, req, crd, ver, paths, |_| Ok(w.clone())).await
}

async fn patch(
    ctx: &Ctx,
    req: &Req,
    crd: &CrdInfo,
    ver: &VersionInfo,
    paths: &ScalePaths,
) -> Result<Response<Body>, ApiError> {
    let ct = req.header("content-type").unwrap_or("").to_string();
    let mime = crate::http::media_type(&ct);
    if !PATCH_TYPES.contains(&mime.as_str()) {
        return Err(ApiError::unsupported_media_type(&PATCH_TYPES));
    }
    write(ctx, req, crd, ver, paths, |old| {
        let (mut scale, found) = scale_from_object(old, paths).map_err(accessor_error)?;
        if !found {
            scale.spec.replicas = INVALID_SPEC_REPLICAS as i32;
        }
        let patched = apply_patch(&ct, &req.body, &scale.to_value())?;
        decode_scale(&patched)
    })
    .await
}
