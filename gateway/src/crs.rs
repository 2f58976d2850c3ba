//! Custom-resource endpoints: get, list, create, update, patch, delete, deletecollection and
//! the status subresource, for every served version of an Established CRD.
//!
//! Handler → strategy (pure functions in [`crate::strategy`]) → validation service (`Admit`:
//! metadata, apiVersion/kind, prune, default, schema) → storage service. Follows
//! apiextensions-apiserver pkg/apiserver/customresource_handler.go and
//! k8s.io/apiserver pkg/endpoints/handlers/{create,update,patch,delete,get}.go.

use crate::api::{Ctx, Req};
use crate::crd::{CrdInfo, VersionInfo};
use crate::http::{Body, Output, json_response, negotiate_output};
use crate::strategy::{self, CreateParams};
use crate::table::IncludeObject;
use bytes::Bytes;
use crdplane_core::field::{FieldError, FieldErrorType};
use crdplane_core::selector::{CustomResourceFieldLabels, FieldSelector, LabelSelector};
use crdplane_core::{ApiError, rvslot};
use crdplane_proto::v1 as pb;
use http::{HeaderValue, Response, StatusCode};
use serde_json::{Value, json};
use std::sync::Arc;

/// Patch content types custom resources accept.
pub const PATCH_TYPES: [&str; 2] = [
    "application/json-patch+json",
    "application/merge-patch+json",
];
/// Conflict retries of a patch without a resourceVersion precondition (upstream: 5).
const PATCH_RETRIES: usize = 5;

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
        _ => return Err(ApiError::path_not_found()),
    }
    let mut resp = match (sub, i.verb.as_str()) {
        (_, "get") => get(ctx, req, &crd, ver).await,
        ("", "list") => list(ctx, req, &crd, ver).await,
        ("", "watch") => crate::watch::serve_cr(ctx, req, crd.clone()).await,
        ("", "create") => create(ctx, req, &crd, ver).await,
        (_, "update") => update(ctx, req, &crd, ver).await,
        (_, "patch") => patch(ctx, req, &crd, ver).await,
        ("", "delete") => delete(ctx, req, &crd).await,
        ("", "deletecollection") => delete_collection(ctx, req, &crd, ver).await,
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

pub fn resource_ref(crd: &CrdInfo, tenant: &str) -> pb::ResourceRef {
    pb::ResourceRef {
        tenant: tenant.into(),
        group: crd.group.clone(),
        resource: crd.plural.clone(),
    }
}

pub fn parse_object(b: &[u8]) -> Result<Value, ApiError> {
    serde_json::from_slice(b)
        .map_err(|e| ApiError::internal(format!("stored object is not JSON: {e}")))
}

/// Decodes a request body (JSON, or YAML by Content-Type) into a JSON object.
pub fn decode_body(req: &Req) -> Result<Value, ApiError> {
    let ct = req.header("content-type").unwrap_or("application/json");
    let mime = ct
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    let v: Value = match mime.as_str() {
        "application/yaml" | "application/x-yaml" | "text/yaml" => {
            let s =
                std::str::from_utf8(&req.body).map_err(|e| ApiError::bad_request(e.to_string()))?;
            serde_saphyr::from_str(s)
                .map_err(|e| ApiError::bad_request(format!("error converting YAML to JSON: {e}")))?
        }
        // serde_json refuses nesting deeper than 128 levels while decoding.
        "application/json" | "" | "*/*" => serde_json::from_slice(&req.body)
            .map_err(|e| ApiError::bad_request(format!("error decoding request body: {e}")))?,
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
    Ok(v)
}

/// Nesting bound of request objects (serde_json's own recursion limit is 128).
pub const MAX_DEPTH: usize = 100;

fn depth(v: &Value) -> usize {
    match v {
        Value::Object(m) => 1 + m.values().map(depth).max().unwrap_or(0),
        Value::Array(a) => 1 + a.iter().map(depth).max().unwrap_or(0),
        _ => 0,
    }
}

// ---- validation service -------------------------------------------------------------------

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum FieldValidation {
    Ignore,
    Warn,
    Strict,
}

pub fn field_validation(req: &Req) -> Result<FieldValidation, ApiError> {
    match req.query.get("fieldValidation") {
        None | Some("") | Some("Warn") => Ok(FieldValidation::Warn),
        Some("Ignore") => Ok(FieldValidation::Ignore),
        Some("Strict") => Ok(FieldValidation::Strict),
        Some(other) => Err(ApiError::bad_request(format!(
            "fieldValidation: Unsupported value: {}: supported values: \"Ignore\", \"Strict\", \"Warn\"",
            crdplane_core::field::go_quote(other)
        ))),
    }
}

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

async fn load_schema(
    ctx: &Ctx,
    crd: &CrdInfo,
    tenant: &str,
    version: &str,
) -> Result<(), ApiError> {
    let crd_json = serde_json::to_vec(&crd.json).map_err(ApiError::internal)?;
    ctx.validation
        .clone()
        .load_schema(pb::LoadSchemaRequest {
            schema: Some(schema_ref(crd, tenant, version)),
            crd_json: crd_json.into(),
        })
        .await?;
    Ok(())
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
    };
    let resp = match ctx.validation.clone().admit(mk()).await {
        Ok(r) => r.into_inner(),
        Err(s) if s.code() == tonic::Code::NotFound => {
            load_schema(ctx, crd, tenant, &ver.name).await?;
            ctx.validation.clone().admit(mk()).await?.into_inner()
        }
        Err(s) => return Err(ApiError::from_grpc(&s)),
    };
    let name = obj
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("");
    if !resp.errors.is_empty() {
        let errs: Vec<FieldError> = resp.errors.iter().map(field_error_from_proto).collect();
        return Err(ApiError::invalid(&crd.kind, &crd.group, name, &errs));
    }
    // The validation service words the field warnings (`unknown field "spec.foo"`,
    // `duplicate field "spec.a"`) for Warn and Strict; Strict turns them into a 400.
    let warnings = resp.warnings;
    if fv == FieldValidation::Strict && !warnings.is_empty() {
        return Err(ApiError::bad_request(format!(
            "strict decoding error: {}",
            warnings.join(", ")
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
    let mk = || pb::NormalizeRequest {
        schema: Some(schema_ref(crd, tenant, &ver.name)),
        objects: objs.clone(),
    };
    let r = match ctx.validation.clone().normalize(mk()).await {
        Ok(r) => r.into_inner(),
        Err(s) if s.code() == tonic::Code::NotFound => {
            load_schema(ctx, crd, tenant, &ver.name).await?;
            ctx.validation.clone().normalize(mk()).await?.into_inner()
        }
        Err(s) => return Err(ApiError::from_grpc(&s)),
    };
    Ok(r.objects)
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
        .storage
        .clone()
        .get(pb::GetRequest {
            key: Some(key(crd, &i.tenant, &i.namespace, &i.name)),
        })
        .await?
        .into_inner();
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
    let limit = parse_limit(req)?;
    let (start_after, token_rv) = match req.query.get("continue") {
        Some(c) if !c.is_empty() => {
            let (k, rv) = strategy::decode_continue(c)?;
            (k, Some(rv))
        }
        _ => (String::new(), None),
    };
    let r = ctx
        .storage
        .clone()
        .list(pb::ListRequest {
            resource: Some(resource_ref(crd, &i.tenant)),
            namespace: i.namespace.clone(),
            limit,
            start_after,
            name: String::new(),
            label_selector: label,
            field_selector: field,
        })
        .await?
        .into_inner();
    let rv = token_rv.unwrap_or(r.resource_version);
    let cont = if r.next_start_after.is_empty() {
        String::new()
    } else {
        strategy::encode_continue(&r.next_start_after, rv)
    };
    let remaining = r.has_remaining_item_count.then_some(r.remaining_item_count);
    let items = for_version(ctx, &i.tenant, crd, ver, r.items).await?;
    match output {
        Output::Json => Ok(json_response(
            StatusCode::OK,
            strategy::list_json(
                &api_version(crd, &ver.name),
                &crd.list_kind,
                &items,
                rv,
                &cont,
                remaining,
            ),
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

/// Converts to the storage version and writes through the rv slot.
fn storage_write(crd: &CrdInfo, obj: Value) -> Result<pb::ObjectWrite, ApiError> {
    let obj = convert(obj, &api_version(crd, &crd.storage_version));
    let (head, tail) = rvslot::split(&obj).map_err(|e| ApiError::bad_request(e.to_string()))?;
    Ok(pb::ObjectWrite {
        head: head.into(),
        tail: tail.into(),
    })
}

fn with_warnings(mut r: Response<Body>, w: &[String]) -> Response<Body> {
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
    let dry = req.dry_run()?;
    if crd.terminating {
        return Err(ApiError::method_not_supported(&crd.gr(), "create"));
    }
    let mut obj = decode_body(req)?;
    require_kind(&obj, &req.body)?;
    if crd.namespaced {
        crate::namespaces::require_namespace(ctx, &i.tenant, &i.namespace).await?;
    }
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
    let s = ctx
        .storage
        .clone()
        .create(pb::CreateRequest {
            key: Some(key(crd, &i.tenant, &i.namespace, &name)),
            object: Some(storage_write(crd, obj)?),
            dry_run: dry,
        })
        .await?
        .into_inner();
    let json = for_version(ctx, &i.tenant, crd, ver, vec![s.json])
        .await?
        .pop()
        .unwrap_or_default();
    Ok(with_warnings(
        json_response(StatusCode::CREATED, json),
        &warnings,
    ))
}

/// The 422 of an update without resourceVersion (generic registry store.go Update): the
/// value is printed as Go prints a uint64 with %#v, and the "kind" is the resource.
pub fn rv_required(gr: &crdplane_core::GroupResource, name: &str) -> ApiError {
    let e = FieldError::invalid(
        "metadata.resourceVersion",
        json!("\u{0}0x0"),
        "must be specified for an update",
    );
    let mut err = ApiError::invalid(&gr.resource, &gr.group, name, &[e]);
    let fix = |s: &str| s.replace("\"\\x000x0\"", "0x0");
    err.message = fix(&err.message);
    if let Some(d) = err.details.as_mut() {
        for c in &mut d.causes {
            c.message = fix(&c.message);
        }
    }
    err
}

/// Name and namespace of a PUT/PATCH body must match the URL (upstream texts).
fn check_identity(obj: &mut Value, req: &Req, crd: &CrdInfo) -> Result<(), ApiError> {
    let i = &req.info;
    let meta = obj.get_mut("metadata").and_then(Value::as_object_mut);
    let Some(meta) = meta else {
        return Err(ApiError::bad_request(format!(
            "the name of the object () does not match the name on the URL ({})",
            i.name
        )));
    };
    let name = meta.get("name").and_then(Value::as_str).unwrap_or("");
    if name != i.name {
        return Err(ApiError::bad_request(format!(
            "the name of the object ({name}) does not match the name on the URL ({})",
            i.name
        )));
    }
    if crd.namespaced {
        match meta.get("namespace").and_then(Value::as_str) {
            Some(ns) if !ns.is_empty() && ns != i.namespace => {
                return Err(ApiError::bad_request(
                    "the namespace of the provided object does not match the namespace sent on the request",
                ));
            }
            _ => {
                meta.insert("namespace".into(), Value::String(i.namespace.clone()));
            }
        }
    }
    Ok(())
}

/// Applies one write of an existing object (update, patch, status) and stores it.
async fn write_existing(
    ctx: &Ctx,
    req: &Req,
    crd: &CrdInfo,
    ver: &VersionInfo,
    mut obj: Value,
    old: &Value,
    old_rv: u64,
) -> Result<Response<Body>, ApiError> {
    let i = &req.info;
    let dry = req.dry_run()?;
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
    let (obj, warnings) = admit(
        ctx,
        req,
        crd,
        ver,
        pb::admit_request::Operation::Update,
        &obj,
        Some(old),
        sub,
    )
    .await?;
    let s = ctx
        .storage
        .clone()
        .update(pb::UpdateRequest {
            key: Some(key(crd, &i.tenant, &i.namespace, &i.name)),
            object: Some(storage_write(crd, obj)?),
            expected_resource_version: old_rv,
            dry_run: dry,
        })
        .await?
        .into_inner();
    let json = for_version(ctx, &i.tenant, crd, ver, vec![s.json])
        .await?
        .pop()
        .unwrap_or_default();
    Ok(with_warnings(
        json_response(StatusCode::OK, json),
        &warnings,
    ))
}

async fn current(
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
        .await?
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
    let mut obj = decode_body(req)?;
    require_kind(&obj, &req.body)?;
    check_identity(&mut obj, req, crd)?;
    let rv = strategy::object_rv(&obj)?;
    if rv == 0 {
        return Err(rv_required(&crd.gr(), &req.info.name));
    }
    let (old, old_rv) = current(ctx, req, crd, ver).await?;
    if rv != old_rv {
        return Err(ApiError::stale(&crd.gr(), &req.info.name));
    }
    write_existing(ctx, req, crd, ver, obj, &old, old_rv).await
}

/// Applies a JSON patch or merge patch document to `target` (upstream patch.go semantics).
pub fn apply_patch(content_type: &str, patch: &[u8], target: &Value) -> Result<Value, ApiError> {
    let mime = content_type
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    match mime.as_str() {
        "application/merge-patch+json" => {
            let p: Value = serde_json::from_slice(patch)
                .map_err(|e| ApiError::bad_request(format!("error decoding patch: {e}")))?;
            let mut out = target.clone();
            json_patch::merge(&mut out, &p);
            Ok(out)
        }
        "application/json-patch+json" => {
            let p: json_patch::Patch = serde_json::from_slice(patch)
                .map_err(|e| ApiError::bad_request(format!("error decoding patch: {e}")))?;
            let mut out = target.clone();
            json_patch::patch(&mut out, &p)
                .map_err(|e| ApiError::new(crdplane_core::Reason::Invalid, e.to_string()))?;
            Ok(out)
        }
        _ => Err(ApiError::unsupported_media_type(&PATCH_TYPES)),
    }
}

async fn patch(
    ctx: &Ctx,
    req: &Req,
    crd: &CrdInfo,
    ver: &VersionInfo,
) -> Result<Response<Body>, ApiError> {
    let ct = req.header("content-type").unwrap_or("").to_string();
    // Reject unsupported types before touching storage.
    let mime = ct
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    if !PATCH_TYPES.contains(&mime.as_str()) {
        return Err(ApiError::unsupported_media_type(&PATCH_TYPES));
    }
    let mut attempt = 0;
    loop {
        attempt += 1;
        let (old, old_rv) = current(ctx, req, crd, ver).await?;
        let mut obj = apply_patch(&ct, &req.body, &old)?;
        if !obj.is_object() {
            return Err(ApiError::bad_request(
                "the patched object is not a JSON object",
            ));
        }
        check_identity(&mut obj, req, crd)?;
        let want_rv = strategy::object_rv(&obj)?;
        let precondition = want_rv != old_rv;
        if precondition {
            return Err(ApiError::stale(&crd.gr(), &req.info.name));
        }
        match write_existing(ctx, req, crd, ver, obj, &old, old_rv).await {
            Err(e)
                if e.code == 409
                    && e.reason == crdplane_core::Reason::Conflict
                    && attempt < PATCH_RETRIES
                    && !patch_sets_rv(&req.body) =>
            {
                continue;
            }
            other => return other,
        }
    }
}

/// Whether the patch itself carries a resourceVersion precondition.
fn patch_sets_rv(patch: &[u8]) -> bool {
    serde_json::from_slice::<Value>(patch)
        .ok()
        .is_some_and(|p| {
            p.pointer("/metadata/resourceVersion")
                .is_some_and(|v| !v.is_null())
        })
        || std::str::from_utf8(patch).is_ok_and(|s| s.contains("/metadata/resourceVersion"))
}

/// DeleteOptions preconditions from a DELETE body (upstream metav1.DeleteOptions).
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

async fn delete(ctx: &Ctx, req: &Req, crd: &CrdInfo) -> Result<Response<Body>, ApiError> {
    let i = &req.info;
    let dry = req.dry_run()?;
    let (want_rv, want_uid) = delete_options(&req.body)?;
    let k = key(crd, &i.tenant, &i.namespace, &i.name);
    let cur = ctx
        .storage
        .clone()
        .get(pb::GetRequest {
            key: Some(k.clone()),
        })
        .await?
        .into_inner();
    let obj = parse_object(&cur.json)?;
    let uid = obj
        .pointer("/metadata/uid")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    if !want_uid.is_empty() && want_uid != uid {
        return Err(ApiError::conflict(
            &crd.gr(),
            &i.name,
            &format!(
                "Precondition failed: UID in precondition: {want_uid}, UID in object meta: {uid}"
            ),
        ));
    }
    let expected = if want_rv != 0 {
        want_rv
    } else {
        cur.resource_version
    };
    match ctx
        .storage
        .clone()
        .delete(pb::DeleteRequest {
            key: Some(k),
            expected_resource_version: expected,
            dry_run: dry,
        })
        .await
    {
        Ok(_) => {}
        Err(s) => {
            let e = ApiError::from_grpc(&s);
            // Changed between our read and the delete, without a client precondition: retry once unconditionally.
            if e.code == 409 && want_rv == 0 && want_uid.is_empty() {
                let k = key(crd, &i.tenant, &i.namespace, &i.name);
                ctx.storage
                    .clone()
                    .delete(pb::DeleteRequest {
                        key: Some(k),
                        expected_resource_version: 0,
                        dry_run: dry,
                    })
                    .await?;
            } else {
                return Err(e);
            }
        }
    }
    let status = json!({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Success",
        "details":{"name": i.name, "group": crd.group, "kind": crd.plural, "uid": uid}});
    Ok(json_response(
        StatusCode::OK,
        serde_json::to_vec(&status).expect("json"),
    ))
}

async fn delete_collection(
    ctx: &Ctx,
    req: &Req,
    crd: &CrdInfo,
    ver: &VersionInfo,
) -> Result<Response<Body>, ApiError> {
    let i = &req.info;
    let dry = req.dry_run()?;
    let (label, field) = check_selectors(req, crd, ver)?;
    let r = ctx
        .storage
        .clone()
        .delete_collection(pb::DeleteCollectionRequest {
            resource: Some(resource_ref(crd, &i.tenant)),
            namespace: i.namespace.clone(),
            label_selector: label,
            field_selector: field,
            dry_run: dry,
        })
        .await?
        .into_inner();
    let items = for_version(ctx, &i.tenant, crd, ver, r.items).await?;
    Ok(json_response(
        StatusCode::OK,
        strategy::list_json(
            &api_version(crd, &ver.name),
            &crd.list_kind,
            &items,
            r.resource_version,
            "",
            None,
        ),
    ))
}
