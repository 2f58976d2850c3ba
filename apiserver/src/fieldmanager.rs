//! The field manager of the generic write handlers: `metadata.managedFields` kept by every
//! create, update and patch, and server-side apply (`application/apply-patch+yaml`).
//!
//! Where it sits: the handlers ([`crate::handlers`]) call [`track_update`] on the object
//! they are about to store, after the strategy and admission have made it what will be
//! stored (so that defaults the schema adds are owned by the writer, as upstream's decoder
//! defaults before its field manager runs, and what the strategy resets is no change), and
//! [`apply`] on each fresh read of the object inside the retry loop of an apply patch. The
//! sets, the merge and the conflicts are the pure core's
//! ([`crdplane_core::managedfields`]); this module adds what a request brings.
//!
//! Follows k8s.io/apiserver `pkg/endpoints/handlers` (`managerOrUserAgent`, the apply
//! patcher, `ValidatePatchOptions` and `ValidateFieldManager` of apimachinery's
//! `meta/v1/validation`) and apimachinery `util/managedfields/internal`: `fieldmanager.go`
//! (`Update`: the entries a write carries when it carries any and writes the main
//! resource, else the stored ones; `UpdateNoErrors`: entries that cannot be read are
//! dropped, never a failed write), `versioncheck.go` (an applied object of another kind or
//! version), `structuredmerge.go` (an applied object may not carry managedFields),
//! `capmanagers.go` and `conflict.go`. Clearing: a write that sets managedFields to a list
//! of one empty entry (`[{}]`) strips them, as upstream documents; an empty list keeps them
//! (clients that drop the field must not clear it).

use crdplane_core::field::FieldError;
use crdplane_core::managedfields::{self as mf, ApplyError, Entry, Operation};
use crdplane_core::status::{StatusCause, StatusDetails};
use crdplane_core::{ApiError, Reason};
use serde_json::{Map, Value};
use std::sync::OnceLock;

/// `fieldManager` of at most this many bytes (apimachinery `FieldManagerMaxLength`).
pub const MAX_FIELD_MANAGER_LEN: usize = 128;

/// The media type of server-side apply.
pub const APPLY_PATCH: &str = "application/apply-patch+yaml";

/// Who writes and how: the options of one create, update or patch that the handlers need.
#[derive(Debug, Clone)]
pub struct WriteOptions<'a> {
    /// `dryRun=All`: every step runs, nothing is written.
    pub dry_run: bool,
    /// The field manager: `fieldManager`, else the User-Agent's product
    /// ([`manager_or_user_agent`]).
    pub manager: &'a str,
    /// The API version of the endpoint written to (`v1`, `stable.example.com/v1`), which the
    /// manager's Update entry records.
    pub api_version: std::borrow::Cow<'a, str>,
}

impl<'a> WriteOptions<'a> {
    /// A write the server makes itself (bootstrap objects, cleanups): upstream's loopback
    /// client is `kube-apiserver`.
    pub fn system(api_version: &'a str) -> Self {
        Self {
            dry_run: false,
            manager: "kube-apiserver",
            api_version: api_version.into(),
        }
    }
}

/// The manager of a write without `fieldManager`: the User-Agent up to its first `/`
/// (`kubectl/v1.33.0 (linux/amd64) kubernetes/…` → `kubectl`), as upstream's
/// `managerOrUserAgent` and `prefixFromUserAgent`.
pub fn manager_or_user_agent<'a>(field_manager: Option<&'a str>, user_agent: &'a str) -> &'a str {
    match field_manager {
        Some(m) if !m.is_empty() => m,
        _ => user_agent.split('/').next().unwrap_or(""),
    }
}

/// Go's `unicode.IsPrint` for the characters a manager name may hold: no control, format
/// or separator characters but the ASCII space.
fn printable(c: char) -> bool {
    if c == ' ' {
        return true;
    }
    !(c.is_control()
        || c.is_whitespace()
        || matches!(c, '\u{ad}' | '\u{200b}'..='\u{200f}' | '\u{2028}'..='\u{202e}' | '\u{2060}'..='\u{206f}' | '\u{feff}' | '\u{fff9}'..='\u{fffb}'))
}

/// The field errors of a `fieldManager` value (apimachinery `ValidateFieldManager`): at most
/// 128 bytes, printable characters only.
pub fn field_manager_errors(field_manager: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if field_manager.len() > MAX_FIELD_MANAGER_LEN {
        errs.push(FieldError::too_long("fieldManager", MAX_FIELD_MANAGER_LEN));
    }
    for (i, c) in field_manager.char_indices() {
        if !printable(c) {
            errs.push(FieldError::invalid(
                "fieldManager",
                Value::String(field_manager.to_string()),
                format!("invalid character U+{:04X} (at position {i})", c as u32),
            ));
        }
    }
    errs
}

/// The field errors that `ValidatePatchOptions` adds for the patch type: `force` only with
/// apply, `fieldManager` required with it.
pub fn patch_option_errors(
    mime: &str,
    field_manager: &str,
    force: Option<bool>,
) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if mime != APPLY_PATCH {
        if force.is_some() {
            errs.push(FieldError::forbidden(
                "force",
                "may not be specified for non-apply patch",
            ));
        }
    } else if field_manager.is_empty() {
        errs.push(FieldError::required(
            "fieldManager",
            "is required for apply patch",
        ));
    }
    errs
}

/// The schema of an object without one of its own: the type deduced from the value, with
/// `metadata` typed as ObjectMeta ([`mf::with_object_meta`]).
pub fn deduced_schema() -> &'static Value {
    static SCHEMA: OnceLock<Value> = OnceLock::new();
    SCHEMA.get_or_init(|| mf::with_object_meta(&serde_json::json!({"type": "object"})))
}

/// The field-management schema of definition `root` of OpenAPI v2 `definitions` (the
/// Swagger document's `#/definitions`), in the structural form the pure core reads, with
/// `metadata` typed as ObjectMeta ([`mf::with_object_meta`]). This is how upstream types a
/// built-in object for server-side apply: its `TypeConverter` is built from the OpenAPI
/// models by kube-openapi `pkg/schemaconv` (`smd.go`, `openapi.go`):
///
/// - an object's `properties` are its declared fields, `additionalProperties` the type of
///   the other keys, `x-kubernetes-map-type: atomic` makes it one field;
/// - a list is what `x-kubernetes-list-type` says (`atomic`, `set`, `map` with
///   `x-kubernetes-list-map-keys`); without it a list of `x-kubernetes-patch-strategy`
///   `merge` (or `merge,retainKeys`) is keyed by its `x-kubernetes-patch-merge-key`, or a set
///   when it has none (`getListElementRelationship`), and every other list is atomic;
/// - everything else is a scalar.
///
/// A reference the definitions do not hold (ObjectMeta, Time when they come from another
/// document) is read as the deduced type: objects granular, lists atomic, scalars one field.
pub fn schema_from_openapi(definitions: &Map<String, Value>, root: &str) -> Value {
    fn deduced() -> Value {
        serde_json::json!({"x-kubernetes-preserve-unknown-fields": true})
    }
    fn convert(defs: &Map<String, Value>, s: &Value, depth: usize) -> Value {
        // Recursive definitions (none among the built-in types) end in the deduced type.
        if depth > 32 {
            return deduced();
        }
        if let Some(r) = s.get("$ref").and_then(Value::as_str) {
            let name = r.strip_prefix("#/definitions/").unwrap_or(r);
            return match defs.get(name) {
                Some(target) => convert(defs, target, depth + 1),
                None => deduced(),
            };
        }
        let ext = |k: &str| s.get(k).and_then(Value::as_str);
        let mut out = Map::new();
        match ext("type") {
            Some("array") => {
                out.insert("type".into(), "array".into());
                let (list_type, keys) = match ext("x-kubernetes-list-type") {
                    Some(t @ ("set" | "map")) => (
                        Some(t),
                        s.get("x-kubernetes-list-map-keys")
                            .filter(|_| t == "map")
                            .cloned(),
                    ),
                    Some(_) => (None, None),
                    None => match ext("x-kubernetes-patch-strategy") {
                        Some("merge" | "merge,retainKeys") => {
                            match s.get("x-kubernetes-patch-merge-key") {
                                Some(k) => (Some("map"), Some(Value::Array(vec![k.clone()]))),
                                None => (Some("set"), None),
                            }
                        }
                        _ => (None, None),
                    },
                };
                if let Some(t) = list_type {
                    out.insert("x-kubernetes-list-type".into(), t.into());
                }
                if let Some(k) = keys {
                    out.insert("x-kubernetes-list-map-keys".into(), k);
                }
                if let Some(items) = s.get("items") {
                    out.insert("items".into(), convert(defs, items, depth + 1));
                }
            }
            Some("object") | None
                if s.get("properties").is_some() || s.get("additionalProperties").is_some() =>
            {
                out.insert("type".into(), "object".into());
                if let Some(Value::Object(props)) = s.get("properties") {
                    let fields: Map<String, Value> = props
                        .iter()
                        .map(|(k, v)| (k.clone(), convert(defs, v, depth + 1)))
                        .collect();
                    out.insert("properties".into(), Value::Object(fields));
                }
                if let Some(a) = s.get("additionalProperties").filter(|a| a.is_object()) {
                    out.insert("additionalProperties".into(), convert(defs, a, depth + 1));
                }
                if ext("x-kubernetes-map-type") == Some("atomic") {
                    out.insert("x-kubernetes-map-type".into(), "atomic".into());
                }
            }
            Some("object") => return deduced(),
            Some(t) => {
                out.insert("type".into(), t.into());
            }
            None => return deduced(),
        }
        Value::Object(out)
    }
    let schema = match definitions.get(root) {
        Some(d) => convert(definitions, d, 0),
        None => deduced(),
    };
    mf::with_object_meta(&schema)
}

/// Now, as managedFields times are written (RFC 3339, seconds, UTC).
fn now() -> String {
    crdplane_core::names::now_timestamp()
}

fn managed_of(obj: &Value) -> Option<&Value> {
    obj.get("metadata").and_then(|m| m.get("managedFields"))
}

fn set_managed(obj: &mut Value, entries: &[Entry]) {
    let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) else {
        return;
    };
    if entries.is_empty() {
        meta.remove("managedFields");
    } else {
        meta.insert("managedFields".into(), mf::encode(entries));
    }
}

fn strip(obj: &mut Value) {
    if let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.remove("managedFields");
    }
}

/// Whether a written managedFields is upstream's request to clear them: one empty entry.
fn clears(v: Option<&Value>) -> bool {
    matches!(v, Some(Value::Array(a)) if a.len() == 1 && a[0].as_object().is_some_and(Map::is_empty))
}

/// Records a write by `opts.manager` (operation Update) in `new`'s managedFields: `live` is
/// the stored object (`None` for a create), `subresource` the one written (`""`, `status`,
/// `scale`). Never fails the write: entries that cannot be read are dropped, as upstream's
/// `UpdateNoErrors` does.
pub fn track_update(
    opts: &WriteOptions<'_>,
    subresource: &str,
    live: Option<&Value>,
    new: &mut Value,
    schema: &Value,
) {
    if subresource.is_empty() && clears(managed_of(new)) {
        strip(new);
        return;
    }
    let sent = if subresource.is_empty() {
        mf::decode(managed_of(new)).ok().filter(|e| !e.is_empty())
    } else {
        None
    };
    if sent.is_none() && live.is_none() {
        // A create that brings no entries of its own: the writer owns the whole object,
        // read in one walk (`mf::created`, the general path's result at a third of its
        // cost).
        let writer = Entry {
            manager: opts.manager.to_string(),
            operation: Operation::Update,
            api_version: opts.api_version.to_string(),
            time: Some(now()),
            subresource: subresource.to_string(),
            fields: Default::default(),
        };
        match (
            mf::created(new, Some(schema), &writer),
            new.get_mut("metadata"),
        ) {
            (Ok(Some(managed)), Some(Value::Object(meta))) => {
                meta.insert("managedFields".into(), managed);
            }
            _ => strip(new),
        }
        return;
    }
    let entries = match sent {
        Some(e) => e,
        None => match mf::decode(live.and_then(managed_of)) {
            Ok(e) => e,
            Err(_) => {
                strip(new);
                return;
            }
        },
    };
    let empty = Value::Object(Map::new());
    let writer = Entry {
        manager: opts.manager.to_string(),
        operation: Operation::Update,
        api_version: opts.api_version.to_string(),
        time: Some(now()),
        subresource: subresource.to_string(),
        fields: Default::default(),
    };
    match mf::update(&entries, live.unwrap_or(&empty), new, Some(schema), writer) {
        Ok(out) => set_managed(new, &mf::cap_updates(out, mf::MAX_UPDATE_MANAGERS)),
        Err(_) => strip(new),
    }
}

/// What one apply asks for.
#[derive(Debug, Clone, Copy)]
pub struct ApplyRequest<'a> {
    /// The applied configuration (the request body, decoded).
    pub config: &'a Value,
    /// `force=true`: take the conflicting fields from their managers.
    pub force: bool,
    /// The kind the endpoint serves.
    pub kind: &'a str,
    /// The subresource applied to (`""`, `status`, or `scale` with [`apply_to_scale`]).
    pub subresource: &'a str,
    /// The resource has a status subresource: an apply to the main resource owns no status.
    pub status_subresource: bool,
}

/// upstream's `invalid object type` of an applied object whose apiVersion and kind are not
/// the endpoint's (`versionCheckManager`).
fn check_type(config: &Value, api_version: &str, kind: &str) -> Result<(), ApiError> {
    let got_v = config
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or("");
    let got_k = config.get("kind").and_then(Value::as_str).unwrap_or("");
    if got_v == api_version && got_k == kind {
        return Ok(());
    }
    let (group, version) = match got_v.split_once('/') {
        Some((g, v)) => (g, v),
        None => ("", got_v),
    };
    Err(ApiError::bad_request(format!(
        "invalid object type: {group}/{version}, Kind={got_k}"
    )))
}

/// The applied configuration a subresource write takes: a `status` apply owns `status`
/// only, an apply to the main resource of a type with a status subresource everything but
/// `status` (upstream's reset fields of the two strategies).
fn applicable(req: &ApplyRequest<'_>) -> Value {
    let mut config = req.config.clone();
    if let Value::Object(m) = &mut config {
        if req.subresource == "status" {
            m.retain(|k, _| matches!(k.as_str(), "apiVersion" | "kind" | "metadata" | "status"));
            if let Some(Value::Object(meta)) = m.get_mut("metadata") {
                meta.retain(|k, _| matches!(k.as_str(), "name" | "namespace"));
            }
        } else if req.status_subresource {
            m.remove("status");
        }
    }
    config
}

/// Client-side apply's record of the last applied configuration (apimachinery
/// `corev1.LastAppliedConfigAnnotation`).
pub const LAST_APPLIED_ANNOTATION: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// The only manager whose applies upgrade from client-side apply (upstream: "To opt-out of
/// this behavior, users may specify a different field manager").
const LAST_APPLIED_MANAGER: &str = "kubectl";

/// A non-empty last-applied annotation of `obj` (`hasLastApplied`).
fn last_applied(obj: &Value) -> Option<&str> {
    obj.pointer("/metadata/annotations")?
        .get(LAST_APPLIED_ANNOTATION)?
        .as_str()
        .filter(|s| !s.is_empty())
}

/// The fields an apply by kubectl may take from their managers without `force`
/// (lastappliedmanager.go `allowedConflictsFromLastApplied`): the fields of the live
/// object's last-applied configuration, of the endpoint's API version, that the live object
/// still has with the same values — as path strings, the form conflicts carry. `None`
/// when there is no usable annotation.
fn allowed_by_last_applied(
    live: Option<&Value>,
    api_version: &str,
    schema: &Value,
) -> Option<std::collections::HashSet<String>> {
    let live = live?;
    let last: Value = serde_json::from_str(last_applied(live)?).ok()?;
    if !last.is_object() || last.get("apiVersion").and_then(Value::as_str) != Some(api_version) {
        return None;
    }
    let fields = crdplane_core::structured::field_set(&last, Some(schema)).ok()?;
    let c = crdplane_core::structured::compare(&last, live, Some(schema)).ok()?;
    let allowed = fields
        .difference(&c.modified)
        .difference(&c.added)
        .difference(&c.removed);
    Some(
        allowed
            .paths()
            .iter()
            .map(|p| crdplane_core::fieldpath::path_string(p))
            .collect(),
    )
}

/// The annotation's new value (lastappliedupdater.go `buildLastApplied`): the applied
/// configuration without the annotation itself, as `UnstructuredJSONScheme` encodes it
/// (Go's `encoding/json`: sorted keys, HTML-safe escapes, a final newline).
fn build_last_applied(config: &Value) -> String {
    let mut c = config.clone();
    if let Some(a) = c
        .pointer_mut("/metadata/annotations")
        .and_then(Value::as_object_mut)
    {
        a.remove(LAST_APPLIED_ANNOTATION);
    }
    let mut out = crdplane_core::gofmt::go_json(&c);
    out.push('\n');
    out
}

/// The 409 of an apply that would change fields other managers own (internal
/// `NewConflictError`: reason Conflict, the causes only in the details).
pub fn conflict_error(c: &mf::Conflicts) -> ApiError {
    let mut e = ApiError::new(Reason::Conflict, c.message());
    e.details = Some(Box::new(StatusDetails {
        causes: c
            .causes()
            .into_iter()
            .map(|(message, field)| StatusCause {
                type_: "FieldManagerConflict".into(),
                message,
                field,
            })
            .collect(),
        ..Default::default()
    }));
    e
}

/// Server-side apply of `req.config` by `opts.manager` to `live` (`None`: the object does
/// not exist and the apply creates it): the object to write, its managedFields set.
pub fn apply(
    opts: &WriteOptions<'_>,
    live: Option<&Value>,
    req: &ApplyRequest<'_>,
    schema: &Value,
) -> Result<Value, ApiError> {
    if !req.config.is_object() {
        return Err(ApiError::bad_request(
            "error decoding YAML: the applied configuration is not an object",
        ));
    }
    check_type(req.config, &opts.api_version, req.kind)?;
    if managed_of(req.config).is_some_and(|m| !m.is_null()) {
        return Err(ApiError::bad_request("metadata.managedFields must be nil"));
    }
    let entries = mf::decode(live.and_then(managed_of))
        .map_err(|e| ApiError::internal(format!("failed to decode managed fields: {e}")))?;
    let applier = Entry {
        manager: opts.manager.to_string(),
        operation: Operation::Apply,
        api_version: opts.api_version.to_string(),
        time: Some(now()),
        subresource: req.subresource.to_string(),
        fields: Default::default(),
    };
    let config = applicable(req);
    let result = match mf::apply(
        &entries,
        live,
        &config,
        Some(schema),
        applier.clone(),
        req.force,
    ) {
        // lastappliedmanager.go: kubectl's apply may take fields over from client-side
        // apply where the last-applied configuration still matches the live object.
        Err(ApplyError::Conflicts(c)) if opts.manager == LAST_APPLIED_MANAGER => {
            match allowed_by_last_applied(live, &opts.api_version, schema) {
                None => Err(ApplyError::Conflicts(c)),
                Some(allowed) => {
                    let rest: Vec<mf::Conflict> =
                        c.0.into_iter()
                            .filter(|x| !allowed.contains(&x.field))
                            .collect();
                    if rest.is_empty() {
                        mf::apply(&entries, live, &config, Some(schema), applier, true)
                    } else {
                        Err(ApplyError::Conflicts(mf::Conflicts(rest)))
                    }
                }
            }
        }
        r => r,
    };
    match result {
        Ok((mut obj, out)) => {
            set_managed(&mut obj, &mf::cap_updates(out, mf::MAX_UPDATE_MANAGERS));
            // lastappliedupdater.go: kubectl's apply keeps an existing last-applied
            // annotation in step with what it applied.
            if opts.manager == LAST_APPLIED_MANAGER && last_applied(&obj).is_some() {
                let value = build_last_applied(req.config);
                if let Some(a) = obj
                    .pointer_mut("/metadata/annotations")
                    .and_then(Value::as_object_mut)
                {
                    a.insert(LAST_APPLIED_ANNOTATION.into(), Value::String(value));
                }
            }
            Ok(obj)
        }
        Err(ApplyError::Conflicts(c)) => Err(conflict_error(&c)),
        Err(ApplyError::Invalid(msg)) => Err(ApiError::internal(format!(
            "failed to create typed patch object: {msg}"
        ))),
    }
}

/// The field-management schema of an `autoscaling/v1` Scale (its OpenAPI definition:
/// every field a scalar or a struct).
fn scale_schema() -> &'static Value {
    static SCHEMA: OnceLock<Value> = OnceLock::new();
    SCHEMA.get_or_init(|| {
        mf::with_object_meta(&serde_json::json!({"type": "object", "properties": {
            "apiVersion": {"type": "string"}, "kind": {"type": "string"},
            "spec": {"type": "object", "properties": {"replicas": {"type": "integer"}}},
            "status": {"type": "object", "properties": {
                "replicas": {"type": "integer"}, "selector": {"type": "string"}}}
        }}))
    })
}

/// Server-side apply of a Scale (`req.config`, kind `Scale` of `autoscaling/v1`) through the
/// `/scale` subresource of `parent`, whose Scale is `scale`: the object's entries are
/// converted to the Scale's ([`crdplane_core::scalefields`]), the apply runs on the Scale as
/// on any object (conflicts name the Scale's `.spec.replicas`), and the result's entries
/// are converted back. Returns the applied Scale (its `spec.replicas` is what the object
/// gets) and the object's new managedFields, to set with [`set_managed_fields`].
/// `mappings` are the replicas paths of the resource's served versions, `opts.api_version`
/// the object's (the endpoint's).
pub fn apply_to_scale(
    opts: &WriteOptions<'_>,
    parent: &Value,
    scale: &Value,
    req: &ApplyRequest<'_>,
    mappings: &crdplane_core::scalefields::Mappings,
) -> Result<(Value, Vec<Entry>), ApiError> {
    use crdplane_core::scalefields::{SCALE_API_VERSION, to_parent, to_scale};
    let entries = mf::decode(managed_of(parent))
        .map_err(|e| ApiError::internal(format!("failed to decode managed fields: {e}")))?;
    let (converted, origin) = to_scale(&entries, mappings);
    let mut scale = scale.clone();
    set_managed(&mut scale, &converted);
    let scale_opts = WriteOptions {
        api_version: SCALE_API_VERSION.into(),
        ..opts.clone()
    };
    let applied = apply(&scale_opts, Some(&scale), req, scale_schema())?;
    let after = mf::decode(managed_of(&applied))
        .map_err(|e| ApiError::internal(format!("failed to decode managed fields: {e}")))?;
    let out = to_parent(
        &entries,
        &converted,
        &origin,
        &after,
        mappings,
        &opts.api_version,
    );
    Ok((applied, mf::cap_updates(out, mf::MAX_UPDATE_MANAGERS)))
}

/// Sets `obj`'s `metadata.managedFields` to `entries` (none: removed).
pub fn set_managed_fields(obj: &mut Value, entries: &[Entry]) {
    set_managed(obj, entries)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn opts(manager: &str) -> WriteOptions<'_> {
        WriteOptions {
            dry_run: false,
            manager,
            api_version: "stable.example.com/v1".into(),
        }
    }

    fn schema() -> Value {
        mf::with_object_meta(&json!({"type": "object", "properties": {
            "spec": {"type": "object", "properties": {
                "replicas": {"type": "integer"}, "image": {"type": "string"}}},
            "status": {"type": "object", "properties": {"ready": {"type": "boolean"}}}
        }}))
    }

    fn obj(spec: Value) -> Value {
        json!({"apiVersion": "stable.example.com/v1", "kind": "CronTab",
            "metadata": {"name": "x", "namespace": "default"}, "spec": spec})
    }

    fn managers(o: &Value) -> Vec<(String, String, String)> {
        managed_of(o)
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .map(|e| {
                let s = |k: &str| e[k].as_str().unwrap_or("").to_string();
                (s("manager"), s("operation"), e["fieldsV1"].to_string())
            })
            .collect()
    }

    /// kube-openapi schemaconv's reading of OpenAPI definitions, checked by the fields an
    /// apply owns: declared fields without `.`, map keys, atomic structs and lists, lists
    /// keyed by their patch merge key or by their list type, unknown references deduced.
    #[test]
    fn openapi_definitions_type_the_fields() {
        let defs = json!({
            "io.example.v1.Thing": {"type": "object", "properties": {
                "apiVersion": {"type": "string"}, "kind": {"type": "string"},
                "metadata": {"$ref": "#/definitions/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"},
                "data": {"type": "object", "additionalProperties": {"type": "string"}},
                "spec": {"$ref": "#/definitions/io.example.v1.ThingSpec", "description": "d"},
                "ref": {"$ref": "#/definitions/io.example.v1.Ref"},
                "refs": {"type": "array", "items": {"$ref": "#/definitions/io.example.v1.Ref"},
                    "x-kubernetes-patch-strategy": "merge", "x-kubernetes-patch-merge-key": "name"},
                "tags": {"type": "array", "items": {"type": "string"},
                    "x-kubernetes-patch-strategy": "merge"},
                "rules": {"type": "array", "x-kubernetes-list-type": "atomic",
                    "items": {"$ref": "#/definitions/io.example.v1.ThingSpec"}},
                "plain": {"type": "array", "items": {"type": "string"}},
                "ports": {"type": "array", "x-kubernetes-list-type": "map",
                    "x-kubernetes-list-map-keys": ["port", "protocol"],
                    "items": {"type": "object", "properties": {
                        "port": {"type": "integer"}, "protocol": {"type": "string"}}}},
                "when": {"$ref": "#/definitions/io.k8s.apimachinery.pkg.apis.meta.v1.Time"},
                "raw": {"type": "object"}
            }},
            "io.example.v1.ThingSpec": {"type": "object", "properties": {
                "holder": {"type": "string"}, "count": {"type": "integer", "format": "int32"}}},
            "io.example.v1.Ref": {"type": "object", "x-kubernetes-map-type": "atomic",
                "properties": {"name": {"type": "string"}, "uid": {"type": "string"}}}
        });
        let schema = schema_from_openapi(defs.as_object().unwrap(), "io.example.v1.Thing");
        let obj = json!({"apiVersion": "example.io/v1", "kind": "Thing",
            "metadata": {"name": "t", "labels": {"a": "b"}},
            "data": {"k": "v"}, "spec": {"holder": "h"}, "ref": {"name": "n"},
            "refs": [{"name": "s1", "uid": "u"}], "tags": ["x"], "rules": [{"holder": "h"}],
            "plain": ["p"], "ports": [{"port": 80, "protocol": "TCP"}],
            "when": "2026-11-29T00:00:00Z", "raw": {"a": {"b": 1}}});
        let fields = crdplane_core::structured::field_set(&obj, Some(&schema)).unwrap();
        assert_eq!(
            fields.to_value(),
            json!({
                "f:apiVersion": {}, "f:kind": {},
                "f:metadata": {"f:name": {}, "f:labels": {"f:a": {}}},
                "f:data": {"f:k": {}},
                "f:spec": {"f:holder": {}},
                "f:ref": {},
                "f:refs": {"k:{\"name\":\"s1\"}": {}},
                "f:tags": {"v:\"x\"": {}},
                "f:rules": {},
                "f:plain": {},
                "f:ports": {"k:{\"port\":80,\"protocol\":\"TCP\"}": {
                    ".": {}, "f:port": {}, "f:protocol": {}}},
                "f:when": {},
                "f:raw": {"f:a": {".": {}, "f:b": {}}}
            })
        );
        // An unknown definition: the deduced type, metadata still ObjectMeta.
        let unknown = schema_from_openapi(defs.as_object().unwrap(), "io.example.v1.Other");
        let fields = crdplane_core::structured::field_set(
            &json!({"metadata": {"labels": {"a": "b"}}, "spec": {"x": 1}}),
            Some(&unknown),
        )
        .unwrap();
        assert_eq!(
            fields.to_value(),
            json!({"f:metadata": {"f:labels": {"f:a": {}}}, "f:spec": {".": {}, "f:x": {}}})
        );
    }

    /// lastappliedmanager.go and lastappliedupdater.go: kubectl's apply takes fields over
    /// from client-side apply while the last-applied annotation still matches the live
    /// object, and rewrites the annotation; other managers, and fields changed since, still
    /// conflict.
    #[test]
    fn kubectl_upgrades_from_client_side_apply() {
        let s = schema();
        let last = r#"{"apiVersion":"stable.example.com/v1","kind":"CronTab","metadata":{"annotations":{},"name":"x","namespace":"default"},"spec":{"image":"a","replicas":1}}
"#;
        let mut live = obj(json!({"replicas": 1, "image": "a"}));
        live["metadata"]["annotations"] = json!({ LAST_APPLIED_ANNOTATION: last, "keep": "me" });
        track_update(&opts("kubectl-client-side-apply"), "", None, &mut live, &s);
        let config = obj(json!({"replicas": 2, "image": "a<b"}));
        let req = ApplyRequest {
            config: &config,
            force: false,
            kind: "CronTab",
            subresource: "",
            status_subresource: true,
        };
        let e = apply(&opts("other"), Some(&live), &req, &s).unwrap_err();
        assert_eq!(
            e.message,
            "Apply failed with 2 conflicts: conflicts with \"kubectl-client-side-apply\" using stable.example.com/v1:\n- .spec.image\n- .spec.replicas"
        );
        let done = apply(&opts("kubectl"), Some(&live), &req, &s).unwrap();
        assert_eq!(done["spec"], json!({"replicas": 2, "image": "a<b"}));
        assert_eq!(
            done["metadata"]["annotations"],
            json!({
                LAST_APPLIED_ANNOTATION: "{\"apiVersion\":\"stable.example.com/v1\",\"kind\":\"CronTab\",\"metadata\":{\"name\":\"x\",\"namespace\":\"default\"},\"spec\":{\"image\":\"a\\u003cb\",\"replicas\":2}}\n",
                "keep": "me"
            })
        );
        assert!(
            managers(&done)
                .iter()
                .any(|(m, op, f)| m == "kubectl" && op == "Apply" && f.contains("f:replicas")),
            "{:?}",
            managers(&done)
        );
        // A field changed since the client-side apply is not the annotation's any more.
        let mut edited = live.clone();
        edited["spec"]["replicas"] = json!(7);
        let mut edited2 = edited.clone();
        track_update(
            &opts("kubectl-client-side-apply"),
            "",
            Some(&live),
            &mut edited2,
            &s,
        );
        edited = edited2;
        let e = apply(&opts("kubectl"), Some(&edited), &req, &s).unwrap_err();
        assert_eq!(
            e.message,
            r#"Apply failed with 1 conflict: conflict with "kubectl-client-side-apply" using stable.example.com/v1: .spec.replicas"#
        );
        // Without the annotation: a plain conflict, and no annotation is added.
        let mut bare = live.clone();
        bare["metadata"]
            .as_object_mut()
            .unwrap()
            .remove("annotations");
        assert_eq!(
            apply(&opts("kubectl"), Some(&bare), &req, &s)
                .unwrap_err()
                .code,
            409
        );
        let forced = apply(
            &opts("kubectl"),
            Some(&bare),
            &ApplyRequest { force: true, ..req },
            &s,
        )
        .unwrap();
        assert!(forced["metadata"].get("annotations").is_none(), "{forced}");
    }

    #[test]
    fn manager_names() {
        let ua = "kubectl/v1.33.0 (linux/amd64) kubernetes/abc";
        assert_eq!(
            manager_or_user_agent(Some("kubectl-edit"), ua),
            "kubectl-edit"
        );
        assert_eq!(manager_or_user_agent(Some(""), ua), "kubectl");
        assert_eq!(
            manager_or_user_agent(None, "python-requests"),
            "python-requests"
        );
        assert_eq!(manager_or_user_agent(None, ""), "");
        assert!(field_manager_errors("kubectl-client-side-apply").is_empty());
        assert!(field_manager_errors("a b").is_empty());
        let e = field_manager_errors(&"m".repeat(129));
        assert_eq!(e.len(), 1);
        assert_eq!(
            e[0].to_string(),
            "fieldManager: Too long: may not be more than 128 bytes"
        );
        let e = field_manager_errors("a\u{7}b");
        assert_eq!(
            e[0].to_string(),
            "fieldManager: Invalid value: \"a\\ab\": invalid character U+0007 (at position 1)"
        );
        let e = patch_option_errors(APPLY_PATCH, "", None);
        assert_eq!(
            e[0].to_string(),
            "fieldManager: Required value: is required for apply patch"
        );
        let e = patch_option_errors("application/merge-patch+json", "m", Some(true));
        assert_eq!(
            e[0].to_string(),
            "force: Forbidden: may not be specified for non-apply patch"
        );
        assert!(patch_option_errors(APPLY_PATCH, "m", Some(false)).is_empty());
    }

    #[test]
    fn updates_are_tracked_kept_and_cleared() {
        let s = schema();
        let mut created = obj(json!({"replicas": 1}));
        track_update(&opts("kubectl-create"), "", None, &mut created, &s);
        assert_eq!(
            managers(&created),
            [(
                "kubectl-create".to_string(),
                "Update".to_string(),
                r#"{"f:spec":{".":{},"f:replicas":{}}}"#.to_string()
            )]
        );
        let t0 = created["metadata"]["managedFields"][0]["time"].clone();
        assert!(t0.is_string());
        // A client that drops the field (or sends an empty list) keeps the entries; a write
        // that changes nothing keeps the time.
        let mut same = obj(json!({"replicas": 1}));
        same["metadata"]["managedFields"] = json!([]);
        track_update(&opts("kubectl-create"), "", Some(&created), &mut same, &s);
        assert_eq!(same, created);
        // Another manager changes the field: it takes it over.
        let mut edited = obj(json!({"replicas": 2}));
        track_update(&opts("kubectl-edit"), "", Some(&created), &mut edited, &s);
        assert_eq!(
            managers(&edited),
            [
                (
                    "kubectl-create".into(),
                    "Update".into(),
                    r#"{"f:spec":{}}"#.into()
                ),
                (
                    "kubectl-edit".into(),
                    "Update".into(),
                    r#"{"f:spec":{"f:replicas":{}}}"#.into()
                ),
            ]
        );
        // A status write is its own manager, whatever the body says of managedFields.
        let mut status = edited.clone();
        status["status"] = json!({"ready": true});
        status["metadata"]["managedFields"] = json!([{"manager": "forged"}]);
        track_update(
            &opts("controller"),
            "status",
            Some(&edited),
            &mut status,
            &s,
        );
        let ms = managers(&status);
        assert_eq!(ms.len(), 3, "{ms:?}");
        let entry = status["metadata"]["managedFields"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["manager"] == "controller")
            .unwrap();
        assert_eq!(entry["subresource"], "status");
        assert_eq!(
            entry["fieldsV1"],
            json!({"f:status": {".": {}, "f:ready": {}}})
        );
        // `[{}]` clears them.
        let mut cleared = edited.clone();
        cleared["metadata"]["managedFields"] = json!([{}]);
        track_update(&opts("kubectl-edit"), "", Some(&edited), &mut cleared, &s);
        assert!(managed_of(&cleared).is_none());
        // Entries that cannot be read are dropped, the write goes on.
        let mut broken = created.clone();
        broken["metadata"]["managedFields"] = json!([{"manager": "m", "operation": "Bogus"}]);
        let mut next = obj(json!({"replicas": 3}));
        track_update(&opts("m"), "", Some(&broken), &mut next, &s);
        assert!(managed_of(&next).is_none());
    }

    #[test]
    fn applies_create_conflict_and_force() {
        let s = schema();
        let config = obj(json!({"replicas": 1, "image": "a"}));
        let req = ApplyRequest {
            config: &config,
            force: false,
            kind: "CronTab",
            subresource: "",
            status_subresource: true,
        };
        let created = apply(&opts("kubectl"), None, &req, &s).unwrap();
        assert_eq!(created["spec"], json!({"replicas": 1, "image": "a"}));
        assert_eq!(managers(&created)[0].1, "Apply");
        // Another manager changes replicas; the next apply of 1 conflicts with it.
        let mut edited = created.clone();
        edited["spec"]["replicas"] = json!(5);
        track_update(&opts("kubectl-edit"), "", Some(&created), &mut edited, &s);
        let e = apply(&opts("kubectl"), Some(&edited), &req, &s).unwrap_err();
        assert_eq!(e.code, 409);
        assert_eq!(
            e.message,
            r#"Apply failed with 1 conflict: conflict with "kubectl-edit" using stable.example.com/v1: .spec.replicas"#
        );
        let d = e.details.unwrap();
        assert_eq!(d.causes[0].type_, "FieldManagerConflict");
        assert_eq!(d.causes[0].field, ".spec.replicas");
        let forced = apply(
            &opts("kubectl"),
            Some(&edited),
            &ApplyRequest { force: true, ..req },
            &s,
        )
        .unwrap();
        assert_eq!(forced["spec"]["replicas"], 1);
        // Status in an apply to the main resource is not applied.
        let mut with_status = config.clone();
        with_status["status"] = json!({"ready": true});
        let r = apply(
            &opts("kubectl"),
            Some(&forced),
            &ApplyRequest {
                config: &with_status,
                force: true,
                ..req
            },
            &s,
        )
        .unwrap();
        assert!(r.get("status").is_none());
        // Wrong type, managedFields in the configuration.
        let mut other = config.clone();
        other["apiVersion"] = json!("v1");
        let e = apply(
            &opts("kubectl"),
            None,
            &ApplyRequest {
                config: &other,
                ..req
            },
            &s,
        )
        .unwrap_err();
        assert_eq!(e.message, "invalid object type: /v1, Kind=CronTab");
        let mut managed = config.clone();
        managed["metadata"]["managedFields"] = json!([]);
        let e = apply(
            &opts("kubectl"),
            None,
            &ApplyRequest {
                config: &managed,
                ..req
            },
            &s,
        )
        .unwrap_err();
        assert_eq!(e.message, "metadata.managedFields must be nil");
    }
}
