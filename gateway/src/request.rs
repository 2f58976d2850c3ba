//! Decoding what a resource handler reads from a request: the body (JSON or YAML, strict
//! findings such as duplicate fields, nesting bound), patch documents, stored objects, and
//! the query options every family shares (`fieldValidation`, `dryRun`, `limit`,
//! `includeObject`, selectors, DeleteOptions).
//!
//! Where it sits: below the handler families (`crs`, `scale`, `watch`, `namespaces`, `crds`,
//! `builtin`), which call it on the [`Req`] the router built; above the context
//! ([`crate::context`]) and the HTTP details ([`crate::http`]). Follows the request decoding
//! of k8s.io/apiserver pkg/endpoints/handlers (create.go, update.go, patch.go, delete.go,
//! rest.go) and apimachinery's strict JSON/YAML serializer
//! (pkg/runtime/serializer/json/json.go).

use crate::context::Req;
use crate::crd::{CrdInfo, VersionInfo};
use crate::table::IncludeObject;
use crdplane_apiserver::rest::delete::{
    DeleteOptions, parse_delete_options_body, validate_delete_options,
};
use crdplane_core::ApiError;
use crdplane_core::selector::{CustomResourceFieldLabels, FieldSelector, LabelSelector};
use serde_json::Value;

pub use crdplane_apiserver::patch::{PATCH_TYPES, not_an_object};

/// Applies a JSON patch or merge patch document to `target` ([`crdplane_apiserver::patch`]).
pub fn apply_patch(content_type: &str, patch: &[u8], target: &Value) -> Result<Value, ApiError> {
    crdplane_apiserver::patch::apply_patch(&crate::http::media_type(content_type), patch, target)
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
    let (v, dups) = decode_body_bytes(req.header(http::header::CONTENT_TYPE), &req.body)?;
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
/// Ignore → no warnings, Warn → the findings (duplicate, then unknown fields) as warnings,
/// Strict with findings → the 400 of handlers/create.go / update.go (`<Kind> in version
/// "v1" cannot be handled as a <Kind>: strict decoding error: duplicate field "x"`).
///
/// `unknown` gives the body's unknown fields (`stores::typed::unknown_fields`), asked only
/// when the policy is not Ignore; a patch passes none (the generic patch handler checks the
/// patched object).
pub fn strict_warnings(
    req: &Req,
    kind: &str,
    version: &str,
    unknown: impl FnOnce() -> Vec<String>,
) -> Result<Vec<String>, ApiError> {
    let policy = field_validation(req)?;
    if policy == FieldValidation::Ignore {
        return Ok(Vec::new());
    }
    let mut found = body_findings(req).to_vec();
    found.extend(unknown());
    match policy {
        FieldValidation::Strict if !found.is_empty() => Err(ApiError::bad_request(
            strict_decoding_error(&req.info.verb, kind, version, &found),
        )),
        FieldValidation::Strict | FieldValidation::Ignore => Ok(Vec::new()),
        FieldValidation::Warn => Ok(found),
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
    let ct = req.header(http::header::CONTENT_TYPE).unwrap_or("");
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

pub use crdplane_core::options::FieldValidation;

/// The request's `fieldValidation` (core's parser, upstream's 400 text).
pub fn field_validation(req: &Req) -> Result<FieldValidation, ApiError> {
    crdplane_core::options::field_validation(req.query.get("fieldValidation"))
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

/// The Table `includeObject` query parameter (None, Metadata or Object; default Metadata).
pub fn include_object(req: &Req) -> Result<IncludeObject, ApiError> {
    IncludeObject::parse(req.query.get("includeObject").unwrap_or(""))
        .map_err(ApiError::bad_request)
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

/// The patch's media type (`Content-Type` without parameters), for [`patch_request`].
pub fn patch_media_type(req: &Req) -> String {
    crate::http::media_type(req.header(http::header::CONTENT_TYPE).unwrap_or(""))
}

/// What the generic PATCH handler needs of `req`: its body as the patch of type `mime`
/// ([`patch_media_type`]; an apply's body decoded as YAML, which JSON also is), `force`
/// and `fieldValidation`.
pub fn patch_request<'a>(
    req: &'a Req,
    mime: &'a str,
) -> Result<crdplane_apiserver::handlers::PatchRequest<'a>, ApiError> {
    let applied = if mime == APPLY_PATCH {
        let text = std::str::from_utf8(&req.body)
            .map_err(|e| ApiError::bad_request(format!("error decoding YAML: {e}")))?;
        let (v, _) = decode_yaml(text)
            .map_err(|e| ApiError::bad_request(format!("error decoding YAML: {e}")))?;
        Some(v)
    } else {
        None
    };
    Ok(crdplane_apiserver::handlers::PatchRequest {
        mime,
        body: &req.body,
        applied,
        force: force(req)?.unwrap_or(false),
        field_validation: field_validation(req)?,
    })
}

pub use crdplane_apiserver::fieldmanager::APPLY_PATCH;

/// The `force` query parameter (Go's `strconv.ParseBool`; absent: not given).
fn force(req: &Req) -> Result<Option<bool>, ApiError> {
    match req.query.get("force") {
        None => Ok(None),
        Some("1" | "t" | "T" | "true" | "TRUE" | "True") => Ok(Some(true)),
        Some("0" | "f" | "F" | "false" | "FALSE" | "False") => Ok(Some(false)),
        Some(v) => Err(ApiError::bad_request(format!(
            "strconv.ParseBool: parsing {}: invalid syntax",
            crdplane_core::field::go_quote(v)
        ))),
    }
}

/// The options of a create, update or patch (also of /status and /scale writes), validated
/// as `ValidateCreateOptions` / `ValidateUpdateOptions` / `ValidatePatchOptions` do
/// (apimachinery meta/v1/validation: `force` and `fieldManager` by patch type, then
/// `fieldManager`, then `dryRun`; one 422 of kind CreateOptions, UpdateOptions or
/// PatchOptions listing them all). The manager is `fieldManager`, else the User-Agent's
/// product; the API version is the endpoint's.
pub fn write_options(
    req: &Req,
) -> Result<crdplane_apiserver::handlers::WriteOptions<'_>, ApiError> {
    use crdplane_apiserver::fieldmanager::{
        field_manager_errors, manager_or_user_agent, patch_option_errors,
    };
    let field_manager = req.query.get("fieldManager");
    let kind = match req.info.verb.as_str() {
        "create" => "CreateOptions",
        "patch" => "PatchOptions",
        _ => "UpdateOptions",
    };
    let mut errs = Vec::new();
    if kind == "PatchOptions" {
        let mime = patch_media_type(req);
        errs.extend(patch_option_errors(
            &mime,
            field_manager.unwrap_or(""),
            force(req)?,
        ));
    }
    errs.extend(field_manager_errors(field_manager.unwrap_or("")));
    let dry_values: Vec<String> = req
        .query
        .0
        .iter()
        .filter(|(k, _)| k == "dryRun")
        .map(|(_, v)| v.clone())
        .collect();
    if dry_values.iter().any(|d| d != "All") {
        errs.push(crdplane_core::options::dry_run_not_supported(&dry_values));
    }
    if !errs.is_empty() {
        return Err(ApiError::invalid(kind, "meta.k8s.io", "", &errs));
    }
    let user_agent = req.header(http::header::USER_AGENT).unwrap_or("");
    let i = &req.info;
    let api_version = if i.api_group.is_empty() {
        std::borrow::Cow::Borrowed(i.api_version.as_str())
    } else {
        std::borrow::Cow::Owned(format!("{}/{}", i.api_group, i.api_version))
    };
    Ok(crdplane_apiserver::handlers::WriteOptions {
        dry_run: !dry_values.is_empty(),
        manager: manager_or_user_agent(field_manager, user_agent),
        api_version,
    })
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

pub use crdplane_apiserver::patch::BUILTIN_PATCH_TYPES;

/// Applies a PATCH body to a built-in object ([`crdplane_apiserver::patch::apply_builtin`]).
pub fn patch_builtin(
    req: &Req,
    old: &Value,
    fields: crate::strategic::Fields,
) -> Result<Value, ApiError> {
    let mime = crate::http::media_type(req.header(http::header::CONTENT_TYPE).unwrap_or(""));
    crdplane_apiserver::patch::apply_builtin(&mime, &req.body, old, fields)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delete_options_from_the_query() {
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
        assert!(crdplane_core::options::DeleteOptionsExt::is_dry_run(&o));
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
}
