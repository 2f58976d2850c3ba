//! Static validation of CustomResourceDefinitions (everything except the schemas, which the
//! validation service checks and whose errors are merged in by `service`).
//!
//! Follows apiextensions-apiserver `pkg/apis/apiextensions/validation/validation.go`
//! (`ValidateCustomResourceDefinition`, `…Update`, `…Names`, `…ColumnDefinition`,
//! `…Subresources`, `…SelectableFields`, `…StoredVersions`, conversion and API-approval
//! checks), k8s.io/apimachinery `pkg/api/validation/objectmeta.go` for metadata and
//! `pkg/util/validation/validation.go` for DNS/qualified-name rules and their texts.
//! Field paths are upstream's, i.e. those of the internal type (e.g. `…JSONPath`,
//! `spec.conversion.webhookClientConfig`). Pure functions.

use crate::crd::{CrdView, Names, Scale, Version};
use crdplane_core::FieldError;
use serde_json::{Value, json};

/// Printer column types, sorted as `sets.String.List()` prints them.
const PRINTER_COLUMN_TYPES: &[&str] = &["boolean", "date", "integer", "number", "string"];
const PRINTER_COLUMN_FORMATS: &[&str] = &[
    "byte",
    "date",
    "date-time",
    "double",
    "float",
    "int32",
    "int64",
    "password",
];
/// Most `selectableFields` a CRD version may declare (more is `TooMany`).
pub const MAX_SELECTABLE_FIELDS: usize = 8;
const API_APPROVAL_ANNOTATION: &str = "api-approved.kubernetes.io";

pub use crdplane_core::validation::{
    is_dns1035_label, is_dns1123_subdomain, is_qualified_name, is_valid_label_value,
};

/// `ValidateObjectMeta` with the CRD name function (cluster-scoped; the namespace has been
/// cleared by the create path).
fn validate_object_meta(crd: &CrdView) -> Vec<FieldError> {
    let m = &crd.metadata;
    let required = format!("{}.{}", crd.spec.names.plural, crd.spec.group);
    let name_fn = |name: &str, prefix: bool| -> Vec<String> {
        // NameIsDNSSubdomain masks one trailing dash of a generateName prefix.
        let checked = if prefix {
            name.strip_suffix('-').map(|s| format!("{s}a"))
        } else {
            None
        };
        let mut r = is_dns1123_subdomain(checked.as_deref().unwrap_or(name));
        if name != required {
            r.push(r#"must be spec.names.plural+"."+spec.group"#.to_string());
        }
        r
    };
    let mut errs = Vec::new();
    if !m.generate_name.is_empty() {
        for msg in name_fn(&m.generate_name, true) {
            errs.push(FieldError::invalid(
                "metadata.generateName",
                json!(m.generate_name),
                msg,
            ));
        }
    }
    if m.name.is_empty() {
        errs.push(FieldError::required(
            "metadata.name",
            "name or generateName is required",
        ));
    } else {
        for msg in name_fn(&m.name, false) {
            errs.push(FieldError::invalid("metadata.name", json!(m.name), msg));
        }
    }
    if !m.namespace.is_empty() {
        errs.push(FieldError::forbidden(
            "metadata.namespace",
            "not allowed on this type",
        ));
    }
    if m.generation < 0 {
        errs.push(FieldError::invalid(
            "metadata.generation",
            json!(m.generation),
            "must be greater than or equal to 0",
        ));
    }
    for (k, v) in &m.labels {
        for msg in is_qualified_name(k) {
            errs.push(FieldError::invalid("metadata.labels", json!(k), msg));
        }
        for msg in is_valid_label_value(v) {
            errs.push(FieldError::invalid("metadata.labels", json!(v), msg));
        }
    }
    let mut total = 0usize;
    for (k, v) in &m.annotations {
        for msg in is_qualified_name(&k.to_lowercase()) {
            errs.push(FieldError::invalid("metadata.annotations", json!(k), msg));
        }
        total += k.len() + v.len();
    }
    const TOTAL_ANNOTATION_SIZE_LIMIT: usize = 256 * 1024;
    if total > TOTAL_ANNOTATION_SIZE_LIMIT {
        errs.push(FieldError::too_long(
            "metadata.annotations",
            TOTAL_ANNOTATION_SIZE_LIMIT,
        ));
    }
    errs
}

/// `ValidateCustomResourceDefinitionNames`.
pub fn validate_names(n: &Names, path: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let join = |e: Vec<String>| e.join(",");
    if !n.plural.is_empty() {
        let e = is_dns1035_label(&n.plural);
        if !e.is_empty() {
            errs.push(FieldError::invalid(
                format!("{path}.plural"),
                json!(n.plural),
                join(e),
            ));
        }
    }
    if !n.singular.is_empty() {
        let e = is_dns1035_label(&n.singular);
        if !e.is_empty() {
            errs.push(FieldError::invalid(
                format!("{path}.singular"),
                json!(n.singular),
                join(e),
            ));
        }
    }
    for (field, value) in [("kind", &n.kind), ("listKind", &n.list_kind)] {
        if value.is_empty() {
            continue;
        }
        let e = is_dns1035_label(&value.to_lowercase());
        if !e.is_empty() {
            errs.push(FieldError::invalid(
                format!("{path}.{field}"),
                json!(value),
                format!(
                    "may have mixed case, but should otherwise match: {}",
                    join(e)
                ),
            ));
        }
    }
    for (i, s) in n.short_names.iter().enumerate() {
        let e = is_dns1035_label(s);
        if !e.is_empty() {
            errs.push(FieldError::invalid(
                format!("{path}.shortNames[{i}]"),
                json!(s),
                join(e),
            ));
        }
    }
    if !n.kind.is_empty() && n.kind == n.list_kind {
        errs.push(FieldError::invalid(
            format!("{path}.listKind"),
            json!(n.list_kind),
            "kind and listKind may not be the same",
        ));
    }
    for (i, c) in n.categories.iter().enumerate() {
        let e = is_dns1035_label(c);
        if !e.is_empty() {
            errs.push(FieldError::invalid(
                format!("{path}.categories[{i}]"),
                json!(c),
                join(e),
            ));
        }
    }
    errs
}

/// `validateSimpleJSONPath`.
fn validate_simple_json_path(s: &str, path: &str) -> Vec<FieldError> {
    if s.is_empty() {
        return vec![FieldError::invalid(path, json!(s), "must not be empty")];
    }
    if !s.starts_with('.') {
        return vec![FieldError::invalid(
            path,
            json!(s),
            "must be a simple json path starting with .",
        )];
    }
    Vec::new()
}

/// `ValidateCustomResourceDefinitionSubresources` (scale part; status has no fields).
fn validate_scale(scale: &Scale, path: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let p = format!("{path}.scale.specReplicasPath");
    if scale.spec_replicas_path.is_empty() {
        errs.push(FieldError::required(p, ""));
    } else {
        let e = validate_simple_json_path(&scale.spec_replicas_path, &p);
        if !e.is_empty() {
            errs.extend(e);
        } else if !scale.spec_replicas_path.starts_with(".spec.") {
            errs.push(FieldError::invalid(
                p,
                json!(scale.spec_replicas_path),
                "should be a json path under .spec",
            ));
        }
    }
    let p = format!("{path}.scale.statusReplicasPath");
    if scale.status_replicas_path.is_empty() {
        errs.push(FieldError::required(p, ""));
    } else {
        let e = validate_simple_json_path(&scale.status_replicas_path, &p);
        if !e.is_empty() {
            errs.extend(e);
        } else if !scale.status_replicas_path.starts_with(".status.") {
            errs.push(FieldError::invalid(
                p,
                json!(scale.status_replicas_path),
                "should be a json path under .status",
            ));
        }
    }
    if let Some(sel) = scale
        .label_selector_path
        .as_deref()
        .filter(|s| !s.is_empty())
    {
        let p = format!("{path}.scale.labelSelectorPath");
        let e = validate_simple_json_path(sel, &p);
        if !e.is_empty() {
            errs.extend(e);
        } else if !sel.starts_with(".spec.") && !sel.starts_with(".status.") {
            errs.push(FieldError::invalid(
                p,
                json!(sel),
                "should be a json path under either .spec or .status",
            ));
        }
    }
    errs
}

/// `ValidateCustomResourceColumnDefinition`.
fn validate_column(c: &crate::crd::Column, path: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if c.name.is_empty() {
        errs.push(FieldError::required(format!("{path}.name"), ""));
    }
    let types = format!("must be one of {}", PRINTER_COLUMN_TYPES.join(","));
    if c.type_.is_empty() {
        errs.push(FieldError::required(format!("{path}.type"), types));
    } else if !PRINTER_COLUMN_TYPES.contains(&c.type_.as_str()) {
        errs.push(FieldError::invalid(
            format!("{path}.type"),
            json!(c.type_),
            types,
        ));
    }
    if !c.format.is_empty() && !PRINTER_COLUMN_FORMATS.contains(&c.format.as_str()) {
        errs.push(FieldError::invalid(
            format!("{path}.format"),
            json!(c.format),
            format!("must be one of {}", PRINTER_COLUMN_FORMATS.join(",")),
        ));
    }
    if c.json_path.is_empty() {
        errs.push(FieldError::required(format!("{path}.JSONPath"), ""));
    } else {
        errs.extend(validate_simple_json_path(
            &c.json_path,
            &format!("{path}.JSONPath"),
        ));
    }
    errs
}

/// Follows a selectable field's dotted path through the schema's `properties`; returns the
/// schema it names.
fn schema_at<'a>(schema: &'a Value, json_path: &str) -> Option<&'a Value> {
    let rest = json_path.strip_prefix('.')?;
    let mut cur = schema;
    for seg in rest.split('.') {
        if seg.is_empty() || seg.contains('[') {
            return None;
        }
        cur = cur.get("properties")?.get(seg)?;
    }
    Some(cur)
}

/// `ValidateCustomResourceSelectableFields`.
fn validate_selectable_fields(ver: &Version, path: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let p = format!("{path}.selectableFields");
    let Some(schema) = ver.open_api_schema() else {
        errs.push(FieldError::invalid(
            p,
            json!(""),
            "selectableFields may only be set when version.schema.openAPIV3Schema is not included",
        ));
        return errs;
    };
    let mut unique: Vec<String> = Vec::new();
    for (i, f) in ver.selectable_fields.iter().enumerate() {
        let fp = format!("{p}[{i}].jsonPath");
        if f.json_path.is_empty() {
            errs.push(FieldError::required(fp, ""));
            continue;
        }
        let Some(found) = schema_at(schema, &f.json_path) else {
            errs.push(FieldError::invalid(
                fp,
                json!(f.json_path),
                "is an invalid path: does not refer to a valid field",
            ));
            continue;
        };
        let normalized = f.json_path.trim_start_matches('.').to_string();
        if normalized == "metadata" || normalized.starts_with("metadata.") {
            errs.push(FieldError::invalid(
                fp.clone(),
                json!(f.json_path),
                "must not point to fields in metadata",
            ));
        }
        let ty = found.get("type").and_then(Value::as_str).unwrap_or("");
        if !matches!(ty, "string" | "boolean" | "integer") {
            errs.push(FieldError::invalid(
                fp.clone(),
                json!(f.json_path),
                "must point to a field of type string, boolean or integer. Enum string fields and strings with formats are allowed.",
            ));
        }
        if unique.contains(&normalized) {
            errs.push(FieldError::duplicate(fp, json!(f.json_path)));
        } else {
            unique.push(normalized);
        }
    }
    if unique.len() > MAX_SELECTABLE_FIELDS {
        errs.push(FieldError::too_many(
            p,
            unique.len() as i64,
            MAX_SELECTABLE_FIELDS as i64,
        ));
    }
    errs
}

/// `validateDeprecationWarning`.
fn deprecation_warning_errors(deprecated: bool, w: Option<&str>) -> Vec<String> {
    let Some(w) = w else { return Vec::new() };
    if !deprecated {
        return vec!["can only be set for deprecated versions".into()];
    }
    let mut errs = Vec::new();
    if w.len() > 256 {
        errs.push("must be <= 256 characters long".into());
    }
    if w.is_empty() {
        errs.push("must not be an empty string".into());
    }
    for (i, c) in w.char_indices() {
        if c.is_control() {
            errs.push(format!(
                "must only contain printable UTF-8 characters; control character found at index {i}"
            ));
            break;
        }
    }
    errs
}

/// Validates a webhook URL (`webhook.ValidateWebhookURL` with https forced).
fn validate_webhook_url(path: &str, url: &str) -> Vec<FieldError> {
    const FORM: &str = "; desired format: https://host[/path]";
    let mut errs = Vec::new();
    let (scheme, rest) = match url.split_once("://") {
        Some((s, r)) => (s, r),
        None => ("", url),
    };
    if scheme != "https" {
        errs.push(FieldError::invalid(
            path,
            json!(scheme),
            format!("'https' is the only allowed URL scheme{FORM}"),
        ));
    }
    let (before_frag, fragment) = rest.split_once('#').unwrap_or((rest, ""));
    let (before_query, query) = before_frag.split_once('?').unwrap_or((before_frag, ""));
    let authority = if scheme.is_empty() {
        ""
    } else {
        before_query.split('/').next().unwrap_or("")
    };
    let (user, host) = match authority.rsplit_once('@') {
        Some((u, h)) => (Some(u), h),
        None => (None, authority),
    };
    if host.is_empty() {
        errs.push(FieldError::invalid(
            path,
            json!(host),
            format!("host must be specified{FORM}"),
        ));
    }
    if let Some(u) = user {
        errs.push(FieldError::invalid(
            path,
            json!(u),
            "user information is not permitted in the URL",
        ));
    }
    if !fragment.is_empty() {
        errs.push(FieldError::invalid(
            path,
            json!(fragment),
            "fragments are not permitted in the URL",
        ));
    }
    if !query.is_empty() {
        errs.push(FieldError::invalid(
            path,
            json!(query),
            "query parameters are not permitted in the URL",
        ));
    }
    errs
}

/// `validateCustomResourceConversion`.
fn validate_conversion(crd: &CrdView) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let Some(conv) = &crd.spec.conversion else {
        return errs;
    };
    let p = "spec.conversion";
    match conv.strategy.as_str() {
        "" => errs.push(FieldError::required(format!("{p}.strategy"), "")),
        "None" | "Webhook" => {}
        other => errs.push(FieldError::not_supported(
            format!("{p}.strategy"),
            json!(other),
            &["None", "Webhook"],
        )),
    }
    let client_config = conv.webhook.as_ref().and_then(|w| w.client_config.as_ref());
    let review_versions: &[String] = conv
        .webhook
        .as_ref()
        .map(|w| w.conversion_review_versions.as_slice())
        .unwrap_or(&[]);
    if conv.strategy == "Webhook" {
        match client_config {
            None => errs.push(FieldError::required(
                format!("{p}.webhookClientConfig"),
                "required when strategy is set to Webhook",
            )),
            Some(cc) => match (&cc.url, &cc.service) {
                (Some(_), Some(_)) | (None, None) => errs.push(FieldError::required(
                    format!("{p}.webhookClientConfig"),
                    "exactly one of url or service is required",
                )),
                (Some(url), None) => {
                    errs.extend(validate_webhook_url(
                        &format!("{p}.webhookClientConfig.url"),
                        url,
                    ));
                }
                (None, Some(svc)) => {
                    let sp = format!("{p}.webhookClientConfig.service");
                    if svc.name.is_empty() {
                        errs.push(FieldError::required(
                            format!("{sp}.name"),
                            "service name is required",
                        ));
                    }
                    if svc.namespace.is_empty() {
                        errs.push(FieldError::required(
                            format!("{sp}.namespace"),
                            "service namespace is required",
                        ));
                    }
                    let port = svc.port.unwrap_or(443);
                    if !(1..=65535).contains(&port) {
                        errs.push(FieldError::invalid(
                            format!("{sp}.port"),
                            json!(port),
                            "port is not valid: must be between 1 and 65535, inclusive",
                        ));
                    }
                    if let Some(path) = svc.path.as_deref()
                        && !path.is_empty()
                        && path != "/"
                        && !path.starts_with('/')
                    {
                        errs.push(FieldError::invalid(
                            format!("{sp}.path"),
                            json!(path),
                            "must start with a '/'",
                        ));
                    }
                }
            },
        }
        let rp = format!("{p}.conversionReviewVersions");
        if review_versions.is_empty() {
            errs.push(FieldError::required(rp, ""));
        } else {
            let mut seen: Vec<&str> = Vec::new();
            let mut accepted = false;
            for (i, v) in review_versions.iter().enumerate() {
                if seen.contains(&v.as_str()) {
                    errs.push(FieldError::invalid(
                        format!("{rp}[{i}]"),
                        json!(v),
                        "duplicate version",
                    ));
                    continue;
                }
                seen.push(v);
                for m in is_dns1035_label(v) {
                    errs.push(FieldError::invalid(format!("{rp}[{i}]"), json!(v), m));
                }
                if v == "v1" || v == "v1beta1" {
                    accepted = true;
                }
            }
            if !accepted {
                errs.push(FieldError::invalid(
                    rp,
                    json!(review_versions),
                    "must include at least one of v1, v1beta1",
                ));
            }
        }
    } else {
        if client_config.is_some() {
            errs.push(FieldError::forbidden(
                format!("{p}.webhookClientConfig"),
                "should not be set when strategy is not set to Webhook",
            ));
        }
        if !review_versions.is_empty() {
            errs.push(FieldError::forbidden(
                format!("{p}.conversionReviewVersions"),
                "should not be set when strategy is not set to Webhook",
            ));
        }
    }
    errs
}

/// The JSON of `spec.versions` for messages that print the whole list.
fn versions_value(raw: &Value) -> Value {
    raw.get("spec")
        .and_then(|s| s.get("versions"))
        .cloned()
        .unwrap_or(Value::Array(Vec::new()))
}

/// `validateCustomResourceDefinitionSpec`. `require_schemas`: every version needs a schema
/// (true on create; on update only if the old object had them all).
fn validate_spec(crd: &CrdView, raw: &Value, require_schemas: bool) -> Vec<FieldError> {
    let spec = &crd.spec;
    let mut errs = Vec::new();
    if spec.group.is_empty() {
        errs.push(FieldError::required("spec.group", ""));
    } else {
        let e = is_dns1123_subdomain(&spec.group);
        if !e.is_empty() {
            errs.push(FieldError::invalid(
                "spec.group",
                json!(spec.group),
                e.join(","),
            ));
        } else if spec.group.split('.').count() < 2 {
            errs.push(FieldError::invalid(
                "spec.group",
                json!(spec.group),
                "should be a domain with at least one dot",
            ));
        }
    }
    match spec.scope.as_str() {
        "" => errs.push(FieldError::required("spec.scope", "")),
        "Cluster" | "Namespaced" => {}
        other => errs.push(FieldError::not_supported(
            "spec.scope",
            json!(other),
            &["Cluster", "Namespaced"],
        )),
    }
    for (i, v) in spec.versions.iter().enumerate() {
        if v.open_api_schema().is_none() {
            let p = format!("spec.versions[{i}].schema.openAPIV3Schema");
            if require_schemas {
                errs.push(FieldError::required(p, "schemas are required"));
            } else if v.served {
                errs.push(FieldError::required(
                    p,
                    "because otherwise all fields are pruned",
                ));
            }
        }
    }
    let mut storage_count = 0;
    let mut seen: Vec<&str> = Vec::new();
    let mut unique = true;
    for (i, v) in spec.versions.iter().enumerate() {
        let vp = format!("spec.versions[{i}]");
        if v.storage {
            storage_count += 1;
        }
        if seen.contains(&v.name.as_str()) {
            unique = false;
        } else {
            seen.push(&v.name);
        }
        let e = is_dns1035_label(&v.name);
        if !e.is_empty() {
            errs.push(FieldError::invalid(
                format!("{vp}.name"),
                json!(v.name),
                e.join(","),
            ));
        }
        for m in deprecation_warning_errors(v.deprecated, v.deprecation_warning.as_deref()) {
            errs.push(FieldError::invalid(
                format!("{vp}.deprecationWarning"),
                json!(v.deprecation_warning),
                m,
            ));
        }
        if let Some(scale) = v.subresources.as_ref().and_then(|s| s.scale.as_ref()) {
            errs.extend(validate_scale(scale, &format!("{vp}.subresources")));
        }
        for (j, c) in v.additional_printer_columns.iter().enumerate() {
            errs.extend(validate_column(
                c,
                &format!("{vp}.additionalPrinterColumns[{j}]"),
            ));
        }
        if !v.selectable_fields.is_empty() {
            errs.extend(validate_selectable_fields(v, &vp));
        }
    }
    if !unique {
        errs.push(FieldError::invalid(
            "spec.versions",
            versions_value(raw),
            "must contain unique version names",
        ));
    }
    if storage_count != 1 {
        errs.push(FieldError::invalid(
            "spec.versions",
            versions_value(raw),
            "must have exactly one version marked as storage version",
        ));
    }
    for (field, value) in [
        ("plural", &spec.names.plural),
        ("singular", &spec.names.singular),
        ("kind", &spec.names.kind),
        ("listKind", &spec.names.list_kind),
    ] {
        if value.is_empty() {
            errs.push(FieldError::required(format!("spec.names.{field}"), ""));
        }
    }
    errs.extend(validate_names(&spec.names, "spec.names"));
    if spec.preserve_unknown_fields == Some(true)
        && spec
            .conversion
            .as_ref()
            .is_some_and(|c| c.strategy != "None")
    {
        errs.push(FieldError::invalid(
            "spec.conversion.strategy",
            json!(spec.conversion.as_ref().map(|c| c.strategy.clone())),
            "must be None if spec.preserveUnknownFields is true",
        ));
    }
    errs.extend(validate_conversion(crd));
    errs
}

/// `ValidateCustomResourceDefinitionStoredVersions`.
pub fn validate_stored_versions(crd: &CrdView) -> Vec<FieldError> {
    let stored = &crd.status.stored_versions;
    let p = "status.storedVersions";
    if stored.is_empty() {
        return vec![FieldError::invalid(
            p,
            json!(stored),
            "must have at least one stored version",
        )];
    }
    let mut errs = Vec::new();
    for v in &crd.spec.versions {
        if v.storage && !stored.contains(&v.name) {
            errs.push(FieldError::invalid(
                p,
                json!(stored),
                format!("must have the storage version {}", v.name),
            ));
        }
    }
    for (i, s) in stored.iter().enumerate() {
        if stored[..i].contains(s) {
            continue;
        }
        if !crd.spec.versions.iter().any(|v| &v.name == s) {
            errs.push(FieldError::invalid(
                format!("{p}[{i}]"),
                json!(s),
                format!(
                    "missing from spec.versions; {s} was previously a storage version, and must remain in spec.versions until a storage migration ensures no data remains persisted in {s} and removes {s} from status.storedVersions"
                ),
            ));
        }
    }
    errs
}

fn is_protected_group(g: &str) -> bool {
    g == "k8s.io" || g.ends_with(".k8s.io") || g == "kubernetes.io" || g.ends_with(".kubernetes.io")
}

#[derive(PartialEq)]
enum Approval {
    Missing,
    Invalid,
    Ok,
}

fn approval_state(crd: &CrdView) -> Approval {
    match crd.metadata.annotations.get(API_APPROVAL_ANNOTATION) {
        None => Approval::Missing,
        Some(a) if a.starts_with("unapproved") => Approval::Ok,
        Some(a) => match a.split_once("://") {
            Some((scheme, rest))
                if !scheme.is_empty()
                    && scheme
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c))
                    && !rest.is_empty()
                    && !rest.starts_with('/') =>
            {
                Approval::Ok
            }
            _ => Approval::Invalid,
        },
    }
}

/// `validateAPIApproval`: protected community groups need the approval annotation.
fn validate_api_approval(crd: &CrdView, old: Option<&CrdView>) -> Vec<FieldError> {
    if !is_protected_group(&crd.spec.group) {
        return Vec::new();
    }
    let state = approval_state(crd);
    if let Some(old) = old
        && is_protected_group(&old.spec.group)
        && approval_state(old) == state
    {
        return Vec::new();
    }
    let p = format!("metadata.annotations[{API_APPROVAL_ANNOTATION}]");
    match state {
        Approval::Ok => Vec::new(),
        Approval::Missing => vec![FieldError::required(
            p,
            format!(
                "protected groups must have approval annotation \"{API_APPROVAL_ANNOTATION}\", see https://github.com/kubernetes/enhancements/pull/1111"
            ),
        )],
        Approval::Invalid => vec![FieldError::invalid(
            p,
            json!(crd.metadata.annotations.get(API_APPROVAL_ANNOTATION)),
            format!(
                "protected groups must have approval annotation \"{API_APPROVAL_ANNOTATION}\" with either a URL or a reason starting with \"unapproved\", see https://github.com/kubernetes/enhancements/pull/1111"
            ),
        )],
    }
}

/// `validatePreserveUnknownFields`.
fn validate_preserve_unknown_fields(crd: &CrdView, old: Option<&CrdView>) -> Vec<FieldError> {
    if old.is_some_and(|o| o.spec.preserve_unknown_fields == Some(true)) {
        return Vec::new();
    }
    if crd.spec.preserve_unknown_fields == Some(true) {
        return vec![FieldError::invalid(
            "spec.preserveUnknownFields",
            json!(true),
            "cannot set to true, set x-kubernetes-preserve-unknown-fields to true in spec.versions[*].schema instead",
        )];
    }
    Vec::new()
}

/// `ValidateCustomResourceDefinition` (create). `raw` is the object the view was read from.
pub fn validate_create(crd: &CrdView, raw: &Value) -> Vec<FieldError> {
    let mut errs = validate_object_meta(crd);
    errs.extend(validate_spec(crd, raw, true));
    errs.extend(validate_names(
        &crd.status.accepted_names,
        "status.acceptedNames",
    ));
    errs.extend(validate_stored_versions(crd));
    errs.extend(validate_api_approval(crd, None));
    errs.extend(validate_preserve_unknown_fields(crd, None));
    errs
}

fn immutable(path: &str, new: &str, old: &str) -> Option<FieldError> {
    (new != old).then(|| FieldError::invalid(path, json!(new), "field is immutable"))
}

/// `ValidateCustomResourceDefinitionUpdate`.
pub fn validate_update(crd: &CrdView, raw: &Value, old: &CrdView) -> Vec<FieldError> {
    let mut errs = Vec::new();
    errs.extend(immutable(
        "metadata.name",
        &crd.metadata.name,
        &old.metadata.name,
    ));
    let mut meta = validate_object_meta(crd);
    // Name rules were checked when the object was created; on update only the
    // plural.group rule can newly fail, and that is reported through the spec fields.
    meta.retain(|e| e.field != "metadata.name");
    errs.extend(meta);
    let require_schemas = old
        .spec
        .versions
        .iter()
        .all(|v| v.open_api_schema().is_some());
    errs.extend(validate_spec(crd, raw, require_schemas));
    if old.established() {
        errs.extend(immutable("spec.scope", &crd.spec.scope, &old.spec.scope));
        errs.extend(immutable(
            "spec.names.kind",
            &crd.spec.names.kind,
            &old.spec.names.kind,
        ));
    }
    errs.extend(immutable("spec.group", &crd.spec.group, &old.spec.group));
    errs.extend(immutable(
        "spec.names.plural",
        &crd.spec.names.plural,
        &old.spec.names.plural,
    ));
    errs.extend(validate_names(
        &crd.status.accepted_names,
        "status.acceptedNames",
    ));
    errs.extend(validate_stored_versions(crd));
    errs.extend(validate_api_approval(crd, Some(old)));
    errs.extend(validate_preserve_unknown_fields(crd, Some(old)));
    errs
}

/// `ValidateUpdateCustomResourceDefinitionStatus`.
pub fn validate_status_update(crd: &CrdView) -> Vec<FieldError> {
    validate_names(&crd.status.accepted_names, "status.acceptedNames")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crd::{CrdView, apply_defaults};

    fn crontab() -> Value {
        json!({
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "CustomResourceDefinition",
            "metadata": {"name": "crontabs.stable.example.com"},
            "spec": {
                "group": "stable.example.com",
                "versions": [{"name": "v1", "served": true, "storage": true,
                    "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                        "spec": {"type": "object", "properties": {
                            "cronSpec": {"type": "string"}, "replicas": {"type": "integer"},
                            "tags": {"type": "array", "items": {"type": "string"}}}}}}}}],
                "scope": "Namespaced",
                "names": {"plural": "crontabs", "singular": "crontab", "kind": "CronTab", "shortNames": ["ct"]}
            }
        })
    }

    fn errors_for(v: &Value) -> Vec<String> {
        let mut v = v.clone();
        apply_defaults(&mut v);
        let mut view = CrdView::from_value(&v).unwrap();
        view.status.stored_versions = view
            .storage_version()
            .map(|s| vec![s.name.clone()])
            .unwrap_or_default();
        validate_create(&view, &v)
            .iter()
            .map(|e| e.to_string())
            .collect()
    }

    /// Sets `ptr` (creating the last key when missing).
    fn with(mut v: Value, ptr: &str, new: Value) -> Value {
        let (parent, key) = ptr.rsplit_once('/').unwrap();
        let p = v.pointer_mut(parent).unwrap_or_else(|| panic!("{ptr}"));
        match p {
            Value::Object(m) => {
                m.insert(key.to_string(), new);
            }
            Value::Array(a) => a[key.parse::<usize>().unwrap()] = new,
            _ => panic!("{ptr}"),
        }
        v
    }

    const DNS1035: &str = "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')";

    #[test]
    fn valid_crontab_has_no_errors() {
        assert_eq!(errors_for(&crontab()), Vec::<String>::new());
    }

    #[test]
    fn one_case_per_rule() {
        let one_storage = "must have exactly one version marked as storage version";
        let cases: Vec<(Value, String)> = vec![
            (
                with(crontab(), "/metadata/name", json!("crontab.stable.example.com")),
                r#"metadata.name: Invalid value: "crontab.stable.example.com": must be spec.names.plural+"."+spec.group"#.into(),
            ),
            (
                with(crontab(), "/metadata/name", json!("")),
                "metadata.name: Required value: name or generateName is required".into(),
            ),
            (
                with(crontab(), "/spec/group", json!("example")),
                r#"spec.group: Invalid value: "example": should be a domain with at least one dot"#.into(),
            ),
            (
                with(crontab(), "/spec/group", json!("Stable.example.com")),
                r#"spec.group: Invalid value: "Stable.example.com": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"#.into(),
            ),
            (
                with(crontab(), "/spec/scope", json!("Global")),
                r#"spec.scope: Unsupported value: "Global": supported values: "Cluster", "Namespaced""#.into(),
            ),
            (
                with(crontab(), "/spec/scope", json!("")),
                "spec.scope: Required value".into(),
            ),
            (
                with(crontab(), "/spec/versions/0/storage", json!(false)),
                one_storage.into(),
            ),
            (
                with(crontab(), "/spec/versions/0/name", json!("V1")),
                format!(r#"spec.versions[0].name: Invalid value: "V1": {DNS1035}"#),
            ),
            (
                with(crontab(), "/spec/names/shortNames", json!(["c_t"])),
                format!(r#"spec.names.shortNames[0]: Invalid value: "c_t": {DNS1035}"#),
            ),
            (
                with(crontab(), "/spec/names/kind", json!("Cron_Tab")),
                format!(r#"spec.names.kind: Invalid value: "Cron_Tab": may have mixed case, but should otherwise match: {DNS1035}"#),
            ),
            (
                with(
                    with(crontab(), "/spec/names/kind", json!("CronTab")),
                    "/spec/names",
                    json!({"plural": "crontabs", "kind": "CronTab", "listKind": "CronTab"}),
                ),
                r#"spec.names.listKind: Invalid value: "CronTab": kind and listKind may not be the same"#.into(),
            ),
            (
                with(crontab(), "/spec/names/plural", json!("")),
                "spec.names.plural: Required value".into(),
            ),
            (
                with(crontab(), "/spec/preserveUnknownFields", json!(true)),
                "spec.preserveUnknownFields: Invalid value: true: cannot set to true, set x-kubernetes-preserve-unknown-fields to true in spec.versions[*].schema instead".into(),
            ),
            (
                with(crontab(), "/spec/versions/0/schema", json!(null)),
                "spec.versions[0].schema.openAPIV3Schema: Required value: schemas are required".into(),
            ),
            (
                with(crontab(), "/spec/versions/0/additionalPrinterColumns", json!([{"name": "x", "type": "str", "jsonPath": ".spec.x"}])),
                r#"spec.versions[0].additionalPrinterColumns[0].type: Invalid value: "str": must be one of boolean,date,integer,number,string"#.into(),
            ),
            (
                with(crontab(), "/spec/versions/0/additionalPrinterColumns", json!([{"name": "x", "type": "string", "format": "uuid", "jsonPath": ".spec.x"}])),
                r#"spec.versions[0].additionalPrinterColumns[0].format: Invalid value: "uuid": must be one of byte,date,date-time,double,float,int32,int64,password"#.into(),
            ),
            (
                with(crontab(), "/spec/versions/0/additionalPrinterColumns", json!([{"name": "x", "type": "string", "jsonPath": "spec.x"}])),
                r#"spec.versions[0].additionalPrinterColumns[0].JSONPath: Invalid value: "spec.x": must be a simple json path starting with ."#.into(),
            ),
            (
                with(crontab(), "/spec/versions/0/additionalPrinterColumns", json!([{"type": "string", "jsonPath": ".spec.x"}])),
                "spec.versions[0].additionalPrinterColumns[0].name: Required value".into(),
            ),
            (
                with(crontab(), "/spec/versions/0/selectableFields", json!([{"jsonPath": ".spec.tags"}])),
                r#"spec.versions[0].selectableFields[0].jsonPath: Invalid value: ".spec.tags": must point to a field of type string, boolean or integer. Enum string fields and strings with formats are allowed."#.into(),
            ),
            (
                with(crontab(), "/spec/versions/0/selectableFields", json!([{"jsonPath": ".spec.cronSpec"}, {"jsonPath": ".spec.cronSpec"}])),
                r#"spec.versions[0].selectableFields[1].jsonPath: Duplicate value: ".spec.cronSpec""#.into(),
            ),
            (
                with(crontab(), "/spec/versions/0/subresources", json!({"scale": {"specReplicasPath": ".status.replicas", "statusReplicasPath": ".status.replicas"}})),
                r#"spec.versions[0].subresources.scale.specReplicasPath: Invalid value: ".status.replicas": should be a json path under .spec"#.into(),
            ),
            (
                with(crontab(), "/spec/versions/0/subresources", json!({"scale": {"specReplicasPath": ".spec.replicas"}})),
                "spec.versions[0].subresources.scale.statusReplicasPath: Required value".into(),
            ),
            (
                with(crontab(), "/spec/versions/0/deprecationWarning", json!("old")),
                r#"spec.versions[0].deprecationWarning: Invalid value: "old": can only be set for deprecated versions"#.into(),
            ),
            (
                with(crontab(), "/spec/conversion", json!({"strategy": "Webhook"})),
                "spec.conversion.webhookClientConfig: Required value: required when strategy is set to Webhook".into(),
            ),
            (
                with(crontab(), "/spec/conversion", json!({"strategy": "Magic"})),
                r#"spec.conversion.strategy: Unsupported value: "Magic": supported values: "None", "Webhook""#.into(),
            ),
            (
                with(crontab(), "/spec/conversion", json!({"strategy": "Webhook", "webhook": {"clientConfig": {"url": "http://x/convert"}, "conversionReviewVersions": ["v1"]}})),
                r#"spec.conversion.webhookClientConfig.url: Invalid value: "http": 'https' is the only allowed URL scheme; desired format: https://host[/path]"#.into(),
            ),
            (
                with(
                    with(
                        with(crontab(), "/spec/group", json!("apps.k8s.io")),
                        "/metadata/name",
                        json!("crontabs.apps.k8s.io"),
                    ),
                    "/spec/scope",
                    json!("Namespaced"),
                ),
                "metadata.annotations[api-approved.kubernetes.io]: Required value: protected groups must have approval annotation \"api-approved.kubernetes.io\", see https://github.com/kubernetes/enhancements/pull/1111".into(),
            ),
            (
                with(crontab(), "/metadata/labels", json!({"a b": "x"})),
                r#"metadata.labels: Invalid value: "a b": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"#.into(),
            ),
        ];
        for (i, (crd, want)) in cases.iter().enumerate() {
            let got = errors_for(crd);
            assert!(
                got.iter().any(|g| g == want
                    || (want == one_storage
                        && g.starts_with("spec.versions: Invalid value: ")
                        && g.ends_with(want.as_str()))),
                "case {i}: want {want:?}, got {got:?}"
            );
        }
    }

    #[test]
    fn duplicate_versions_are_reported() {
        let v = with(
            crontab(),
            "/spec/versions",
            json!([{"name": "v1", "served": true, "storage": true, "schema": {"openAPIV3Schema": {"type": "object"}}},
                   {"name": "v1", "served": true, "storage": false, "schema": {"openAPIV3Schema": {"type": "object"}}}]),
        );
        let errs = errors_for(&v);
        assert!(
            errs.iter()
                .any(|e| e.starts_with("spec.versions: Invalid value: ")
                    && e.ends_with(": must contain unique version names")),
            "{errs:?}"
        );
    }

    #[test]
    fn update_rules() {
        let mut old_v = crontab();
        apply_defaults(&mut old_v);
        let mut old = CrdView::from_value(&old_v).unwrap();
        old.status.stored_versions = vec!["v1".into()];
        old.status.conditions.push(crate::crd::Condition {
            type_: "Established".into(),
            status: "True".into(),
            ..Default::default()
        });
        // scope change on an established CRD
        let new_v = with(old_v.clone(), "/spec/scope", json!("Cluster"));
        let mut new = CrdView::from_value(&new_v).unwrap();
        new.status = old.status.clone();
        let errs: Vec<String> = validate_update(&new, &new_v, &old)
            .iter()
            .map(|e| e.to_string())
            .collect();
        assert_eq!(
            errs,
            vec![r#"spec.scope: Invalid value: "Cluster": field is immutable"#.to_string()]
        );
        // dropping a stored version from spec.versions
        let new_v = with(
            old_v.clone(),
            "/spec/versions",
            json!([{"name": "v2", "served": true, "storage": true, "schema": {"openAPIV3Schema": {"type": "object"}}}]),
        );
        let mut new = CrdView::from_value(&new_v).unwrap();
        new.status = old.status.clone();
        new.status.stored_versions.push("v2".into());
        let errs: Vec<String> = validate_update(&new, &new_v, &old)
            .iter()
            .map(|e| e.to_string())
            .collect();
        assert_eq!(
            errs,
            vec![r#"status.storedVersions[0]: Invalid value: "v1": missing from spec.versions; v1 was previously a storage version, and must remain in spec.versions until a storage migration ensures no data remains persisted in v1 and removes v1 from status.storedVersions"#.to_string()]
        );
        // plural change is always immutable
        let new_v = with(old_v.clone(), "/spec/names/plural", json!("crontabz"));
        let mut new = CrdView::from_value(&new_v).unwrap();
        new.status = old.status.clone();
        let errs: Vec<String> = validate_update(&new, &new_v, &old)
            .iter()
            .map(|e| e.to_string())
            .collect();
        assert!(
            errs.contains(
                &r#"spec.names.plural: Invalid value: "crontabz": field is immutable"#.to_string()
            ),
            "{errs:?}"
        );
    }

    #[test]
    fn dns_helpers() {
        assert!(is_dns1035_label("abc-1").is_empty());
        assert_eq!(
            is_dns1035_label(&"a".repeat(64))[0],
            "must be no more than 63 characters"
        );
        assert_eq!(is_dns1035_label("1abc").len(), 1);
        assert!(is_dns1123_subdomain("a.b-c.d").is_empty());
        assert!(is_qualified_name("example.com/My_Name.x").is_empty());
        assert_eq!(is_qualified_name("/x")[0], "prefix part must be non-empty");
        assert!(is_valid_label_value("").is_empty());
        assert_eq!(is_valid_label_value("-a").len(), 1);
    }
}
