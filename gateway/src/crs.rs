//! Custom-resource endpoints: get, list, create, update, patch, delete, deletecollection, the
//! status subresource (the scale subresource lives in [`crate::scale`]), for every served
//! version of an Established CRD. Deletion honours DeleteOptions (preconditions,
//! propagationPolicy/orphanDependents → GC finalizers, dryRun) and finalizers (store.go:
//! objects with finalizers are marked with a deletionTimestamp and kept until an update
//! removes the last one).
//!
//! Handler → strategy (pure functions in [`crate::strategy`]) → validation service (`Admit`:
//! metadata, apiVersion/kind, prune, default, schema) → storage service. Follows
//! apiextensions-apiserver pkg/apiserver/customresource_handler.go and
//! k8s.io/apiserver pkg/endpoints/handlers/{create,update,patch,delete,get}.go.

use crate::api::{Channel, Ctx, Req};
use crate::crd::{CrdInfo, VersionInfo};
use crate::http::{Body, Output, json_response, negotiate_output};
use crate::retry::{Failure, guaranteed_update, write_failed};
use crate::strategy::{self, CreateParams};
use crate::table::IncludeObject;
use bytes::Bytes;
use crdplane_core::field::{FieldError, FieldErrorType};
use crdplane_core::selector::{CustomResourceFieldLabels, FieldSelector, LabelSelector};
use crdplane_core::{ApiError, rvslot};
use crdplane_proto::GrpcStatusExt;
use crdplane_proto::v1 as pb;
use crdplane_proto::v1::validation_client::ValidationClient;
use http::{HeaderValue, Response, StatusCode};
use serde_json::{Value, json};
use std::sync::Arc;

pub use crdplane_apiserver::patch::{PATCH_TYPES, not_an_object};

/// Applies a JSON patch or merge patch document to `target` ([`crdplane_apiserver::patch`]).
pub fn apply_patch(content_type: &str, patch: &[u8], target: &Value) -> Result<Value, ApiError> {
    crdplane_apiserver::patch::apply_patch(&crate::http::media_type(content_type), patch, target)
}

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
        ("scale", _) => Box::pin(crate::scale::serve(ctx, req, &crd, ver)).await,
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

/// Appends each text as a `Warning: 299 - "<text>"` header (upstream
/// apiserver/pkg/endpoints/handlers `warning` headers).
pub fn add_warnings(resp: &mut Response<Body>, warnings: &[String]) {
    for w in warnings {
        // Upstream: `299 - "<text>"` with the text escaped as a Go quoted string.
        let v = format!("299 - {}", crdplane_core::field::go_quote(w));
        if let Ok(h) = HeaderValue::from_str(&v) {
            resp.headers_mut().append("warning", h);
        }
    }
}

fn key(crd: &CrdInfo, tenant: &str, ns: &str, name: &str) -> pb::ObjectKey {
    pb::ObjectKey {
        resource: Some(resource_ref(crd, tenant)),
        namespace: ns.into(),
        name: name.into(),
    }
}

/// The storage service's reference to the CRD's resource in `tenant`.
pub fn resource_ref(crd: &CrdInfo, tenant: &str) -> pb::ResourceRef {
    pb::ResourceRef {
        tenant: tenant.into(),
        group: crd.group.clone(),
        resource: crd.plural.clone(),
    }
}

/// A stored object as a JSON value; stored bytes that are not JSON are a 500 InternalError.
pub fn parse_object(b: &[u8]) -> Result<Value, ApiError> {
    serde_json::from_slice(b)
        .map_err(|e| ApiError::internal(format!("stored object is not JSON: {e}")))
}

/// Decodes a request body (JSON, or YAML by Content-Type) into a JSON object, recording the
/// strict-decoding findings (duplicate keys) in `req.body_dups` for [`strict_warnings`].
/// JSON is decoded once by [`crdplane_core::decode::decode_with_duplicates`] (sigs.k8s.io/json
/// `UnmarshalStrict`: `duplicate field "spec.a"`, the last value wins); YAML as upstream's
/// serializer (apimachinery runtime/serializer/json/json.go: `yaml.YAMLToJSONStrict` in
/// strict mode), see [`decode_yaml`].
pub fn decode_body(req: &Req) -> Result<Value, ApiError> {
    let (v, dups) = decode_body_bytes(req.header("content-type"), &req.body)?;
    let _ = req.body_dups.set(dups);
    Ok(v)
}

/// [`decode_body`] on a Content-Type header value and the body bytes (the fuzzing entry
/// point): the object and its strict-decoding findings (`duplicate field "spec.a"`).
pub fn decode_body_bytes(
    content_type: Option<&str>,
    body: &[u8],
) -> Result<(Value, Vec<String>), ApiError> {
    let ct = content_type.unwrap_or("application/json");
    let mime = crate::http::media_type(ct);
    let (v, dups) = match mime.as_str() {
        "application/yaml" | "application/x-yaml" | "text/yaml" => {
            let s = std::str::from_utf8(body).map_err(|e| ApiError::bad_request(e.to_string()))?;
            decode_yaml(s)
                .map_err(|e| ApiError::bad_request(format!("error converting YAML to JSON: {e}")))?
        }
        // serde_json refuses nesting deeper than 128 levels while decoding.
        "application/json" | "" | "*/*" => {
            let (v, dups) = crdplane_core::decode::decode_with_duplicates(body)
                .map_err(|e| ApiError::bad_request(format!("error decoding request body: {e}")))?;
            let dups = dups
                .iter()
                .map(|d| format!("duplicate field {}", crdplane_core::field::go_quote(d)))
                .collect();
            (v, dups)
        }
        "application/vnd.kubernetes.protobuf" | "application/cbor" => {
            return Err(ApiError::unsupported_media_type(&[
                "application/json",
                "application/yaml",
            ]));
        }
        _ => {
            return Err(ApiError::unsupported_media_type(&[
                "application/json",
                "application/yaml",
            ]));
        }
    };
    if !v.is_object() {
        return Err(ApiError::bad_request(
            "the object provided is not a JSON object",
        ));
    }
    if depth(&v) > MAX_DEPTH {
        return Err(ApiError::bad_request(format!(
            "the object provided is nested deeper than {MAX_DEPTH} levels"
        )));
    }
    Ok((v, dups))
}

/// Nesting bound of request objects (serde_json's own recursion limit is 128).
pub const MAX_DEPTH: usize = 100;

/// YAML body → JSON value and strict findings. Duplicate keys: yaml.v2 (under
/// sigs.k8s.io/yaml `YAMLToJSONStrict`) reports `line <n>: key "<k>" already set in map`
/// inside `yaml: unmarshal errors:`; without strictness the last value wins. The common case
/// (no duplicates) is one parse; only a body with a duplicate is parsed a second time, last
/// value wins, and only the first duplicate is reported.
pub fn decode_yaml(s: &str) -> Result<(Value, Vec<String>), serde_saphyr::Error> {
    use serde_saphyr::{DuplicateKeyPolicy, Error, Options};
    let first = match serde_saphyr::from_str::<Value>(s) {
        Ok(v) => return Ok((v, Vec::new())),
        Err(e) => e,
    };
    match first.without_snippet() {
        Error::DuplicateMappingKey { key, location } => {
            let mut o = Options::default();
            o.duplicate_keys = DuplicateKeyPolicy::LastWins;
            let v = serde_saphyr::from_str_with_options::<Value>(s, o)?;
            let msg = format!(
                "yaml: unmarshal errors:\n  line {}: key {} already set in map",
                location.line(),
                crdplane_core::field::go_quote(key.as_deref().unwrap_or_default())
            );
            Ok((v, vec![msg]))
        }
        _ => Err(first),
    }
}

/// The strict-decoding findings of this request's body or patch document (duplicate keys)
/// under its `fieldValidation`: nothing for Ignore, the texts for Warn (sent as `Warning`
/// headers); Strict is answered by [`strict_decoding_error`] by the caller.
pub fn body_findings(req: &Req) -> &[String] {
    req.body_dups.get().map(Vec::as_slice).unwrap_or(&[])
}

/// Strict handling for endpoints without a schema service round trip (CRDs, namespaces):
/// Ignore → no warnings, Warn → the findings as warnings, Strict with findings → the 400 of
/// handlers/create.go / update.go (`<Kind> in version "v1" cannot be handled as a <Kind>:
/// strict decoding error: duplicate field "x"`).
pub fn strict_warnings(req: &Req, kind: &str, version: &str) -> Result<Vec<String>, ApiError> {
    let found = body_findings(req);
    match field_validation(req)? {
        FieldValidation::Ignore => Ok(Vec::new()),
        FieldValidation::Warn => Ok(found.to_vec()),
        FieldValidation::Strict if found.is_empty() => Ok(Vec::new()),
        FieldValidation::Strict => Err(ApiError::bad_request(strict_decoding_error(
            &req.info.verb,
            kind,
            version,
            found,
        ))),
    }
}

/// Duplicate keys of a merge or JSON patch document (patch.go `applyJSPatch`: the document is
/// decoded with `kjson.UnmarshalStrict` under Warn/Strict; a JSON patch's findings are
/// prefixed `json patch `). Records them in `req.body_dups`; a document that is not JSON is
/// left to the patch itself to report.
pub fn record_patch_findings(req: &Req) {
    if matches!(field_validation(req), Ok(FieldValidation::Ignore) | Err(_)) {
        return;
    }
    let ct = req.header("content-type").unwrap_or("");
    let prefix = match crate::http::media_type(ct).as_str() {
        // patch.go strategicPatchObject decodes a strategic merge patch the same way.
        "application/merge-patch+json" | "application/strategic-merge-patch+json" => "",
        "application/json-patch+json" => "json patch ",
        _ => return,
    };
    if let Ok((_, dups)) = crdplane_core::decode::decode_with_duplicates(&req.body) {
        let _ = req.body_dups.set(
            dups.iter()
                .map(|d| {
                    format!(
                        "{prefix}duplicate field {}",
                        crdplane_core::field::go_quote(d)
                    )
                })
                .collect(),
        );
    }
}

fn depth(v: &Value) -> usize {
    match v {
        Value::Object(m) => 1 + m.values().map(depth).max().unwrap_or(0),
        Value::Array(a) => 1 + a.iter().map(depth).max().unwrap_or(0),
        _ => 0,
    }
}

// ---- validation service -------------------------------------------------------------------

pub use crdplane_core::options::FieldValidation;

/// The request's `fieldValidation` (core's parser, upstream's 400 text).
pub fn field_validation(req: &Req) -> Result<FieldValidation, ApiError> {
    crdplane_core::options::field_validation(req.query.get("fieldValidation"))
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
    FieldError {
        kind,
        field: e.field.clone(),
        bad_value,
        detail: e.detail.clone(),
    }
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

/// Admission of a write: returns the pruned + defaulted object and warnings, or the 422.
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
    // Checks the validation service does not know about, in upstream's order: ObjectMeta
    // update rules first (no new finalizers while deleting), then the schema's errors, then
    // the scale subresource's paths (validator.go ValidateScaleSpec/ValidateScaleStatus).
    let mut errs: Vec<FieldError> = old.map(|o| no_new_finalizers(obj, o)).unwrap_or_default();
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

/// The 400 of strict field validation. Create and update decode the body
/// (handlers/create.go, update.go), and a decode failure goes through `transformDecodeError`:
/// `<Kind> in version "<v>" cannot be handled as a <Kind>: strict decoding error: …`; a patch
/// decodes the patched object (patch.go `applyPatchToCurrentObject`) and sends the bare
/// strict decoding error.
pub fn strict_decoding_error(verb: &str, kind: &str, version: &str, errs: &[String]) -> String {
    let e = format!("strict decoding error: {}", errs.join(", "));
    if verb == "patch" {
        e
    } else {
        format!("{kind} in version {version:?} cannot be handled as a {kind}: {e}")
    }
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
) -> Option<crate::watch::Normalizer> {
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

// ---- version conversion (strategy None: apiVersion rewrite) -----------------------------

fn api_version(crd: &CrdInfo, version: &str) -> String {
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
async fn for_version(
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

// ---- handlers -----------------------------------------------------------------------------

/// The Table `includeObject` query parameter (None, Metadata or Object; default Metadata).
pub fn include_object(req: &Req) -> Result<IncludeObject, ApiError> {
    IncludeObject::parse(req.query.get("includeObject").unwrap_or(""))
        .map_err(ApiError::bad_request)
}

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

/// The Table apiVersion for a requested `meta.k8s.io` version (`v1beta1` or `v1`).
pub fn table_api_version(v: &str) -> &'static str {
    if v == "v1beta1" {
        crate::table::TABLE_API_VERSION_V1BETA1
    } else {
        crate::table::TABLE_API_VERSION_V1
    }
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

/// Checks the selectors of a list/watch/deletecollection against what the CRD supports.
pub fn check_selectors(
    req: &Req,
    crd: &CrdInfo,
    ver: &VersionInfo,
) -> Result<(String, String), ApiError> {
    let label = req.query.get("labelSelector").unwrap_or("").to_string();
    let field = req.query.get("fieldSelector").unwrap_or("").to_string();
    if !label.is_empty() {
        LabelSelector::parse(&label).map_err(ApiError::bad_request)?;
    }
    if !field.is_empty() {
        let f = FieldSelector::parse(&field).map_err(ApiError::bad_request)?;
        CustomResourceFieldLabels::new(crd.namespaced, ver.selectable_fields.iter())
            .check(&f)
            .map_err(ApiError::bad_request)?;
    }
    Ok((label, field))
}

/// The `limit` query parameter: page size, 0 = no limit (negative counts as 0); not a number
/// is 400 BadRequest.
pub fn parse_limit(req: &Req) -> Result<u32, ApiError> {
    match req.query.get("limit") {
        None | Some("") => Ok(0),
        Some(l) => l
            .parse::<i64>()
            .map(|v| v.clamp(0, u32::MAX as i64) as u32)
            .map_err(|_| ApiError::bad_request(format!("limit: Invalid value: {l:?}"))),
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

/// A failed storage list as upstream answers it: a continue token whose revision left the
/// history → 410 with a fresh token (rv -1) in `metadata.continue`; a resourceVersion ahead
/// of the revision → 504 with `Retry-After` (apiserver responsewriters `ErrorNegotiated`).
pub fn list_failure(
    e: ApiError,
    opts: &strategy::ListOptions,
    key: &[u8],
    scope: &str,
) -> Result<Response<Body>, ApiError> {
    if e.reason == crdplane_core::Reason::Expired && opts.continuing {
        return Ok(json_response(
            StatusCode::GONE,
            strategy::expired_continue_status(key, scope, &opts.start_after),
        ));
    }
    let retry = e.details.as_ref().map_or(0, |d| d.retry_after_seconds);
    if retry > 0 {
        let mut resp = crate::http::error_response(&e);
        if let Ok(v) = HeaderValue::from_str(&retry.to_string()) {
            resp.headers_mut().insert("retry-after", v);
        }
        return Ok(resp);
    }
    Err(e)
}

/// Converts to the storage version and writes through the rv slot.
fn storage_write(crd: &CrdInfo, obj: Value) -> Result<pb::ObjectWrite, ApiError> {
    let obj = convert(obj, &api_version(crd, &crd.storage_version));
    let (head, tail) = rvslot::split(&obj).map_err(|e| ApiError::bad_request(e.to_string()))?;
    Ok(pb::ObjectWrite {
        head: head.into(),
        tail: tail.into(),
    })
}

/// `r` with the warnings added as `Warning` headers (see [`add_warnings`]).
pub fn with_warnings(mut r: Response<Body>, w: &[String]) -> Response<Body> {
    add_warnings(&mut r, w);
    r
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
        crate::namespaces::require_namespace_for(ctx, &i.tenant, &i.namespace, &crd.gr(), name)
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

/// One write of an existing object (update, patch, status, scale): strategy, admission,
/// then a compare-and-swap on `old_rv`; returns the object as the request's version shows
/// it. An update that leaves no finalizers on an object being deleted deletes it instead
/// (store.go Update → `deleteWithoutFinalizers`): the response is the updated object,
/// watchers see DELETED.
pub(crate) async fn store_existing(
    ctx: &Ctx,
    req: &Req,
    crd: &CrdInfo,
    ver: &VersionInfo,
    mut obj: Value,
    old: &Value,
    old_rv: u64,
) -> Result<(Bytes, Vec<String>), ApiError> {
    let i = &req.info;
    let dry = write_dry_run(req)?;
    let sub = i.subresource.as_str();
    if sub == "status" {
        // Only .status changes through /status (status_strategy.go PrepareForUpdate).
        let status = obj.get("status").cloned();
        let mut base = old.clone();
        if let Some(m) = base.as_object_mut() {
            match status {
                Some(s) => m.insert("status".into(), s),
                None => m.remove("status"),
            };
            if let Some(rv) = obj.pointer("/metadata/resourceVersion").cloned()
                && let Some(meta) = m.get_mut("metadata").and_then(Value::as_object_mut)
            {
                meta.insert("resourceVersion".into(), rv);
            }
        }
        obj = base;
    } else {
        strategy::prepare_for_update(&mut obj, old, ver.has_status)?;
    }
    // /scale writes are validated by the main resource's strategy.
    let admit_sub = if sub == "status" { "status" } else { "" };
    let (obj, warnings) = admit(
        ctx,
        req,
        crd,
        ver,
        pb::admit_request::Operation::Update,
        &obj,
        Some(old),
        admit_sub,
    )
    .await?;
    if should_delete_during_update(&obj, old) {
        if !dry {
            crate::gc::record(&ctx.storage, &i.tenant, &crd.group, &crd.plural, old).await?;
        }
        ctx.storage
            .clone()
            .delete(pb::DeleteRequest {
                key: Some(key(crd, &i.tenant, &i.namespace, &i.name)),
                expected_resource_version: old_rv,
                dry_run: dry,
            })
            .await
            .map_err(|s| match ApiError::from_grpc(&s) {
                // Changed since it was read: the update's optimistic-lock conflict.
                e if e.reason == crdplane_core::Reason::Conflict => {
                    ApiError::stale(&crd.gr(), &i.name)
                }
                e => e,
            })?;
        return Ok((serde_json::to_vec(&obj).expect("json").into(), warnings));
    }
    if strategy::unchanged(&obj, old) {
        // etcd3 store.go GuaranteedUpdate: new bytes equal to the stored ones are not
        // written; the stored object is returned, its resourceVersion unchanged, no event.
        return Ok((serde_json::to_vec(old).expect("json").into(), warnings));
    }
    let s = ctx
        .storage
        .clone()
        .update(pb::UpdateRequest {
            key: Some(key(crd, &i.tenant, &i.namespace, &i.name)),
            object: Some(storage_write(crd, obj)?),
            expected_resource_version: old_rv,
            dry_run: dry,
            ttl_seconds: 0,
        })
        .await
        .map_err(crdplane_proto::status::from_grpc)?
        .into_inner();
    if !dry {
        crate::gc::verify_added_refs(&ctx.storage, &i.tenant, &s.json, Some(old)).await;
    }
    let json = for_version(ctx, &i.tenant, crd, ver, vec![s.json])
        .await?
        .pop()
        .unwrap_or_default();
    Ok((json, warnings))
}

pub(crate) async fn current(
    ctx: &Ctx,
    req: &Req,
    crd: &CrdInfo,
    ver: &VersionInfo,
) -> Result<(Value, u64), ApiError> {
    let i = &req.info;
    let s = ctx
        .storage
        .clone()
        .get(pb::GetRequest {
            key: Some(key(crd, &i.tenant, &i.namespace, &i.name)),
        })
        .await
        .map_err(crdplane_proto::status::from_grpc)?
        .into_inner();
    let b = for_version(ctx, &i.tenant, crd, ver, vec![s.json])
        .await?
        .pop()
        .unwrap_or_default();
    Ok((parse_object(&b)?, s.resource_version))
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

/// DeleteOptions preconditions from a DELETE body (upstream metav1.DeleteOptions), as the
/// namespace and CRD endpoints use them: (resourceVersion or 0, uid or "").
pub fn delete_options(body: &[u8]) -> Result<(u64, String), ApiError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok((0, String::new()));
    }
    let v: Value = serde_json::from_slice(body)
        .map_err(|e| ApiError::bad_request(format!("error decoding DeleteOptions: {e}")))?;
    let rv = match v
        .pointer("/preconditions/resourceVersion")
        .and_then(Value::as_str)
    {
        Some(s) if !s.is_empty() => s.parse().map_err(|_| {
            ApiError::bad_request(format!("invalid resourceVersion precondition {s:?}"))
        })?,
        _ => 0,
    };
    let uid = v
        .pointer("/preconditions/uid")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    Ok((rv, uid))
}

// ---- deletion: DeleteOptions, finalizers, garbage-collection finalizers ------------------

pub use crdplane_apiserver::rest::delete::{
    DeleteOptions, DeletionPlan, FINALIZER_FOREGROUND, FINALIZER_ORPHAN,
    check_delete_preconditions, dry_run_not_supported, gc_finalizers, mark_as_deleting,
    no_new_finalizers, parse_delete_options_body, plan_deletion, should_delete_during_update,
    validate_delete_options,
};

/// DeleteOptions from query parameters ([`crdplane_core::options::delete_options_from_query`]).
pub fn parse_delete_options_query(q: &crate::http::Query) -> Result<DeleteOptions, ApiError> {
    crdplane_core::options::delete_options_from_query(
        |k| q.get(k),
        |k| {
            q.0.iter()
                .filter(|(key, _)| key == k)
                .map(|(_, v)| v.clone())
                .collect()
        },
    )
}

/// The `dryRun` query parameter of a create, update or patch (also of /status and /scale
/// writes): any value but "All" is the 422 of `ValidateCreateOptions` /
/// `ValidateUpdateOptions` / `ValidatePatchOptions` (handlers/{create,update,patch}.go).
pub fn write_dry_run(req: &Req) -> Result<bool, ApiError> {
    let values: Vec<String> = req
        .query
        .0
        .iter()
        .filter(|(k, _)| k == "dryRun")
        .map(|(_, v)| v.clone())
        .collect();
    let kind = match req.info.verb.as_str() {
        "create" => "CreateOptions",
        "patch" => "PatchOptions",
        _ => "UpdateOptions",
    };
    crdplane_core::options::write_dry_run(kind, &values)
}

/// The DeleteOptions of a DELETE or deletecollection request, validated (handler
/// delete.go: body if present, else query parameters; then `ValidateDeleteOptions`).
pub fn request_delete_options(req: &Req) -> Result<DeleteOptions, ApiError> {
    let o = if req.body.iter().all(u8::is_ascii_whitespace) {
        parse_delete_options_query(&req.query)?
    } else {
        parse_delete_options_body(&decode_body(req)?)?
    };
    let errs = validate_delete_options(&o);
    if !errs.is_empty() {
        return Err(ApiError::invalid("DeleteOptions", "meta.k8s.io", "", &errs));
    }
    Ok(o)
}

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
