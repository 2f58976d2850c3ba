//! Custom resources and the services: storage keys, admission of a write through the
//! validation service (prune, default, schema, scale paths), read-path defaulting and
//! version conversion of stored objects.
//!
//! Where it sits: below the custom-resource store and schema admission of the generic
//! machinery (`stores/crs.rs`), the read handlers (`crs`) and the watch handler
//! (`watch` takes [`watch_normalizer`] and [`resource_ref`]); above the context
//! ([`crate::context`]) and the Scale mapping ([`crate::scale`]). Follows
//! apiextensions-apiserver pkg/registry/customresource (etcd.go, validator.go) and
//! pkg/apiserver/customresource_handler.go (read defaulting, `crConverter`).

use crate::context::{Channel, Ctx, Req};
use crate::crd::{CrdInfo, VersionInfo};
use crate::request::{
    FieldValidation, body_findings, field_validation, parse_object, strict_decoding_error,
};
use bytes::Bytes;
use crdplane_core::field::{FieldError, FieldErrorType};
use crdplane_core::{ApiError, ResourceRef, rvslot};
use crdplane_proto::GrpcStatusExt;
use crdplane_proto::v1 as pb;
use crdplane_proto::v1::validation_client::ValidationClient;
use serde_json::Value;
use std::sync::Arc;

/// The storage key of object `name` in namespace `ns` of the CRD's resource in `tenant`.
pub fn key(crd: &CrdInfo, tenant: &str, ns: &str, name: &str) -> pb::ObjectKey {
    // Built directly (not through `resource_ref`): this is on every GET's path.
    pb::ObjectKey {
        resource: Some(pb::ResourceRef {
            tenant: tenant.into(),
            group: crd.group.clone(),
            resource: crd.plural.clone(),
        }),
        namespace: ns.into(),
        name: name.into(),
    }
}

/// The stored bytes of one custom resource, read through the GET batcher; `None` when
/// there is no such object.
pub async fn get_stored(
    ctx: &Ctx,
    crd: &CrdInfo,
    tenant: &str,
    ns: &str,
    name: &str,
) -> Result<Option<Bytes>, ApiError> {
    let s = ctx
        .gets
        .call(key(crd, tenant, ns, name))
        .await
        .map_err(crdplane_proto::status::from_grpc)?;
    Ok(s.found.then_some(s.json))
}

/// The storage service's reference to the CRD's resource in `tenant`.
pub fn resource_ref(crd: &CrdInfo, tenant: &str) -> ResourceRef {
    ResourceRef::new(tenant, &crd.group, &crd.plural)
}

/// A field error as the validation service sent it, back in `metav1.Status` cause form.
pub fn field_error_from_proto(e: &pb::FieldError) -> FieldError {
    let kind = FieldErrorType::from_cause_type(&e.r#type).unwrap_or(FieldErrorType::Invalid);
    let bad_value = if e.bad_value_json.is_empty() && !e.has_value {
        None
    } else {
        serde_json::from_str(&e.bad_value_json)
            .ok()
            .or(Some(Value::Null))
    };
    FieldError::new(kind, e.field.clone(), bad_value, e.detail.clone())
}

fn schema_ref(crd: &CrdInfo, tenant: &str, version: &str) -> pb::SchemaRef {
    pb::SchemaRef {
        tenant: tenant.into(),
        crd_uid: crd.uid.clone(),
        generation: crd.generation,
        version: version.into(),
    }
}

/// The CRD as the validation service compiles it (LoadSchema, or a retry's `crd_json`).
fn crd_bytes(crd: &CrdInfo) -> Result<Bytes, ApiError> {
    serde_json::to_vec(&crd.json)
        .map(Bytes::from)
        .map_err(ApiError::internal)
}

/// Admission of a write: returns the pruned + defaulted object and warnings, or the 422
/// (`prior`: the ObjectMeta errors the generic handler found, listed first).
#[allow(clippy::too_many_arguments)]
pub async fn admit(
    ctx: &Ctx,
    req: &Req,
    crd: &CrdInfo,
    ver: &VersionInfo,
    op: pb::admit_request::Operation,
    obj: &Value,
    old: Option<&Value>,
    subresource: &str,
    prior: Vec<FieldError>,
) -> Result<(Value, Vec<String>), ApiError> {
    let fv = field_validation(req)?;
    let tenant = &req.info.tenant;
    let mk = || pb::AdmitRequest {
        schema: Some(schema_ref(crd, tenant, &ver.name)),
        operation: op as i32,
        object: serde_json::to_vec(obj).expect("json").into(),
        old_object: old
            .map(|o| serde_json::to_vec(o).expect("json").into())
            .unwrap_or_default(),
        field_validation: match fv {
            FieldValidation::Ignore => pb::admit_request::FieldValidation::Ignore,
            FieldValidation::Warn => pb::admit_request::FieldValidation::Warn,
            FieldValidation::Strict => pb::admit_request::FieldValidation::Strict,
        } as i32,
        subresource: subresource.into(),
        api_version: format!("{}/{}", crd.group, ver.name),
        kind: crd.kind.clone(),
        namespaced: crd.namespaced,
        crd_json: Bytes::new(),
    };
    let resp = match ctx.admits.call(mk()).await {
        Ok(r) => r,
        // The replica that answered has not compiled this schema: send the CRD along, so
        // the replica that takes the retry compiles it first, whichever one that is.
        Err(s) if s.code() == tonic::Code::NotFound => ctx
            .admits
            .call(pb::AdmitRequest {
                crd_json: crd_bytes(crd)?,
                ..mk()
            })
            .await
            .map_err(crdplane_proto::status::from_grpc)?,
        Err(s) => return Err(ApiError::from_grpc(&s)),
    };
    let name = obj
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("");
    // The ObjectMeta update rules the generic update handler checked (no new finalizers
    // while deleting), the schema's errors, then the scale subresource's paths
    // (validator.go ValidateScaleSpec/ValidateScaleStatus), which the validation service
    // does not know about: one list, as customresource strategy.go `ValidateUpdate` makes.
    let mut errs = prior;
    errs.extend(resp.errors.iter().map(field_error_from_proto));
    let type_meta_failed = resp
        .errors
        .iter()
        .any(|e| e.field == "kind" || e.field == "apiVersion");
    if let Some(scale) = &ver.scale
        && !type_meta_failed
    {
        let admitted: Option<Value> = serde_json::from_slice(&resp.object).ok();
        let target = admitted.as_ref().filter(|v| v.is_object()).unwrap_or(obj);
        errs.extend(crate::scale::validate_scale_fields(
            target,
            &crate::scale::ScalePaths::from_crd(scale),
            subresource == "status",
        ));
    }
    if !errs.is_empty() {
        return Err(ApiError::invalid(&crd.kind, &crd.group, name, &errs));
    }
    // The validation service words the field warnings (`unknown field "spec.foo"`,
    // `duplicate field "spec.a"`) for Warn and Strict; Strict turns them into a 400.
    // Findings of the body's own decode (duplicate keys) come first, as upstream's decoder
    // reports them before the schema's unknown fields.
    let mut warnings = if fv == FieldValidation::Ignore {
        Vec::new()
    } else {
        body_findings(req).to_vec()
    };
    warnings.extend(resp.warnings);
    if fv == FieldValidation::Strict && !warnings.is_empty() {
        return Err(ApiError::bad_request(strict_decoding_error(
            &req.info.verb,
            &crd.kind,
            &ver.name,
            &warnings,
        )));
    }
    let out: Value = serde_json::from_slice(&resp.object)
        .map_err(|e| ApiError::internal(format!("validation returned invalid JSON: {e}")))?;
    Ok((out, warnings))
}

/// Read path: defaults (and pruning) of the schema applied to stored objects.
async fn normalize(
    ctx: &Ctx,
    tenant: &str,
    crd: &CrdInfo,
    ver: &VersionInfo,
    objs: Vec<Bytes>,
) -> Result<Vec<Bytes>, ApiError> {
    if !ver.has_defaults || objs.is_empty() {
        return Ok(objs);
    }
    normalize_with(ctx.validation.clone(), tenant, crd, &ver.name, objs).await
}

/// Read-path defaulting (apiextensions-apiserver applies the schema's defaults when it
/// decodes from storage): the validation service defaults and prunes stored objects with
/// the served version's schema, loading the schema first if it does not have it.
async fn normalize_with(
    validation: ValidationClient<Channel>,
    tenant: &str,
    crd: &CrdInfo,
    version: &str,
    objs: Vec<Bytes>,
) -> Result<Vec<Bytes>, ApiError> {
    let mk = || pb::NormalizeRequest {
        schema: Some(schema_ref(crd, tenant, version)),
        objects: objs.clone(),
        crd_json: Bytes::new(),
    };
    let r = match validation.clone().normalize(mk()).await {
        Ok(r) => r.into_inner(),
        // As in `admit`: the retry carries the CRD for a replica without the schema.
        Err(s) if s.code() == tonic::Code::NotFound => validation
            .clone()
            .normalize(pb::NormalizeRequest {
                crd_json: crd_bytes(crd)?,
                ..mk()
            })
            .await
            .map_err(crdplane_proto::status::from_grpc)?
            .into_inner(),
        Err(s) => return Err(ApiError::from_grpc(&s)),
    };
    Ok(r.objects)
}

/// Read defaulting for watch events of `version`, or None when that version's schema has
/// no defaults (events then pass through as stored).
pub fn watch_normalizer(
    ctx: &Ctx,
    crd: &Arc<CrdInfo>,
    tenant: &str,
    version: &VersionInfo,
) -> Option<crate::watch_mux::Normalizer> {
    if !version.has_defaults {
        return None;
    }
    let validation = ctx.validation.clone();
    let crd = crd.clone();
    let tenant = tenant.to_string();
    let version = version.name.clone();
    Some(Arc::new(move |objs: Vec<Bytes>| {
        let (validation, crd, tenant, version) = (
            validation.clone(),
            crd.clone(),
            tenant.clone(),
            version.clone(),
        );
        Box::pin(async move { normalize_with(validation, &tenant, &crd, &version, objs).await })
    }))
}

/// The apiVersion `<group>/<version>` of the CRD's objects in `version`.
pub fn api_version(crd: &CrdInfo, version: &str) -> String {
    format!("{}/{}", crd.group, version)
}

/// Whether stored bytes can be served as they are for `version` (same apiVersion).
fn served_as_is(json: &[u8], want: &str) -> bool {
    // Stored objects are written by us with "apiVersion" as their first key.
    let prefix = format!(
        "{{\"apiVersion\":{}",
        serde_json::to_string(want).expect("json")
    );
    json.starts_with(prefix.as_bytes())
}

fn convert(mut obj: Value, api_version: &str) -> Value {
    if let Some(m) = obj.as_object_mut() {
        m.insert("apiVersion".into(), Value::String(api_version.to_string()));
    }
    obj
}

/// Stored bytes → what the request's version shows (apiVersion rewrite, read defaults).
pub async fn for_version(
    ctx: &Ctx,
    tenant: &str,
    crd: &CrdInfo,
    ver: &VersionInfo,
    items: Vec<Bytes>,
) -> Result<Vec<Bytes>, ApiError> {
    let want = api_version(crd, &ver.name);
    let items: Vec<Bytes> = items
        .into_iter()
        .map(|b| {
            if served_as_is(&b, &want) {
                Ok(b)
            } else {
                let v = convert(parse_object(&b)?, &want);
                Ok(Bytes::from(serde_json::to_vec(&v).expect("json")))
            }
        })
        .collect::<Result<_, ApiError>>()?;
    normalize(ctx, tenant, crd, ver, items).await
}

/// The object converted to the CRD's storage version (the apiVersion rewrite of
/// conversion strategy None).
pub fn stored_form(crd: &CrdInfo, obj: Value) -> Value {
    convert(obj, &api_version(crd, &crd.storage_version))
}

/// Converts to the storage version and writes through the rv slot.
pub fn storage_write(crd: &CrdInfo, obj: Value) -> Result<pb::ObjectWrite, ApiError> {
    object_write(&stored_form(crd, obj))
}

/// An object (already in the storage version) cut at its rv slot for the storage service.
pub fn object_write(obj: &Value) -> Result<pb::ObjectWrite, ApiError> {
    let (head, tail) = rvslot::split(obj).map_err(|e| ApiError::bad_request(e.to_string()))?;
    Ok(pb::ObjectWrite {
        head: head.into(),
        tail: tail.into(),
    })
}
