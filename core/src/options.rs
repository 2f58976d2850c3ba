//! Request options of the API verbs, parsed and validated with upstream's texts: the query
//! parameters of a list (`resourceVersion`, `resourceVersionMatch`, `limit`, `continue`,
//! `sendInitialEvents`), `fieldValidation` and `dryRun` of writes (Create/Update/
//! PatchOptions), and DeleteOptions (`gracePeriodSeconds`, `orphanDependents`,
//! `propagationPolicy`, `dryRun`; apimachinery `ValidateDeleteOptions`).
//!
//! Where it sits: the gateway's list handlers (custom resources, CRDs, namespaces) call
//! [`list_options`] before they ask storage for anything, and pass
//! [`ListOptions::storage_rv`] on. Follows apimachinery
//! `pkg/apis/meta/internalversion/validation` (`ValidateListOptions`: 422 on
//! `ListOptions.meta.k8s.io`) and apiserver `pkg/storage` `ValidateListOptions` (the 400s),
//! with the cacher's `delegator.ShouldDelegateList` for which state a list reads.

use crate::continue_token::decode_continue;
use crate::{ApiError, FieldError};
use serde_json::Value;

/// Which state a list reads (KEP-2523 semantics; apiserver `storage.ValidateListOptions`
/// and cacher `delegator.ShouldDelegateList`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ListRv {
    /// resourceVersion unset (or a continue token with rv -1): the most recent state.
    #[default]
    Latest,
    /// resourceVersion "0": any state; we serve the current one.
    Any,
    /// Not older than N: waits briefly for the revision to reach N, then 504.
    NotOlderThan(u64),
    /// Exactly at N (Exact match, legacy RV with limit, continue tokens).
    Exact(u64),
}

/// The validated list options of one request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListOptions {
    /// Which state the list reads (from `resourceVersion`/`resourceVersionMatch`/`continue`).
    pub rv: ListRv,
    /// Page size (`limit`); 0 = no limit.
    pub limit: u32,
    /// From a continue token: the exclusive start key.
    pub start_after: String,
    /// The request continued a previous list.
    pub continuing: bool,
}

/// Parses and validates `resourceVersion`, `resourceVersionMatch`, `sendInitialEvents`,
/// `limit` and `continue` of a list: apimachinery `ValidateListOptions` (422 Invalid on
/// `ListOptions.meta.k8s.io`), then apiserver `storage.ValidateListOptions` (400s).
/// `get` reads one query parameter; `key`/`scope` verify the continue token.
pub fn list_options<'a>(
    get: impl Fn(&str) -> Option<&'a str>,
    key: &[u8],
    scope: &str,
) -> Result<ListOptions, ApiError> {
    let rv = get("resourceVersion").unwrap_or("");
    let rvm = get("resourceVersionMatch").unwrap_or("");
    let cont = get("continue").unwrap_or("");
    let mut errs = Vec::new();
    if !rvm.is_empty() {
        if rv.is_empty() {
            errs.push(FieldError::forbidden(
                "resourceVersionMatch",
                "resourceVersionMatch is forbidden unless resourceVersion is provided",
            ));
        }
        if !cont.is_empty() {
            errs.push(FieldError::forbidden(
                "resourceVersionMatch",
                "resourceVersionMatch is forbidden when continue is provided",
            ));
        }
        if rvm != "Exact" && rvm != "NotOlderThan" {
            errs.push(FieldError::not_supported(
                "resourceVersionMatch",
                Value::String(rvm.to_string()),
                &["Exact", "NotOlderThan", ""],
            ));
        }
        if rvm == "Exact" && rv == "0" {
            errs.push(FieldError::forbidden(
                "resourceVersionMatch",
                "resourceVersionMatch \"exact\" is forbidden for resourceVersion \"0\"",
            ));
        }
    }
    if get("sendInitialEvents").is_some() {
        errs.push(FieldError::forbidden(
            "sendInitialEvents",
            "sendInitialEvents is forbidden for list",
        ));
    }
    if !errs.is_empty() {
        return Err(ApiError::invalid("ListOptions", "meta.k8s.io", "", &errs));
    }
    let limit = match get("limit") {
        None | Some("") => 0,
        Some(l) => l
            .parse::<i64>()
            .map(|v| v.clamp(0, u32::MAX as i64) as u32)
            .map_err(|_| ApiError::bad_request(format!("limit: Invalid value: {l:?}")))?,
    };
    if !cont.is_empty() {
        if !rv.is_empty() && rv != "0" {
            return Err(ApiError::bad_request(
                "specifying resource version is not allowed when using continue",
            ));
        }
        let (start_after, trv) = decode_continue(key, scope, cont)?;
        return Ok(ListOptions {
            rv: if trv > 0 {
                ListRv::Exact(trv as u64)
            } else {
                ListRv::Latest
            },
            limit,
            start_after,
            continuing: true,
        });
    }
    let parsed = if rv.is_empty() {
        None
    } else {
        Some(rv.parse::<u64>().map_err(|e| {
            let why = match e.kind() {
                std::num::IntErrorKind::PosOverflow => "value out of range",
                _ => "invalid syntax",
            };
            ApiError::bad_request(format!(
                "invalid resource version: resourceVersion: Invalid value: {}: strconv.ParseUint: parsing {}: {why}",
                crate::field::go_quote(rv),
                crate::field::go_quote(rv)
            ))
        })?)
    };
    let rv = match (parsed, rvm) {
        (None, _) => ListRv::Latest,
        (Some(0), _) => ListRv::Any,
        (Some(n), "Exact") => ListRv::Exact(n),
        (Some(n), "NotOlderThan") => ListRv::NotOlderThan(n),
        // Legacy: with a limit, RV is an exact read; without, "not older than".
        (Some(n), _) if limit > 0 => ListRv::Exact(n),
        (Some(n), _) => ListRv::NotOlderThan(n),
    };
    Ok(ListOptions {
        rv,
        limit,
        start_after: String::new(),
        continuing: false,
    })
}

impl ListOptions {
    /// (min, exact, continue) resourceVersions of the storage `ListRequest`.
    pub fn storage_rv(&self) -> (u64, u64, u64) {
        self.rv.storage_rv(self.continuing)
    }
}

impl ListRv {
    /// (min, exact, continue) resourceVersions of the storage `ListRequest` for this state,
    /// `continuing` a previous list or not.
    pub fn storage_rv(self, continuing: bool) -> (u64, u64, u64) {
        match self {
            ListRv::Latest | ListRv::Any => (0, 0, 0),
            ListRv::NotOlderThan(n) => (n, 0, 0),
            ListRv::Exact(n) if continuing => (0, 0, n),
            ListRv::Exact(n) => (0, n, 0),
        }
    }

    /// The resourceVersion of a list page whose store answered at `answered`: a continued
    /// list at an exact revision keeps reporting that revision (etcd3 store.go `GetList`
    /// reads the continuation at the token's revision; a store that can only serve the
    /// current state still names the list by it).
    pub fn page_rv(self, continuing: bool, answered: u64) -> u64 {
        match self {
            ListRv::Exact(n) if continuing => n,
            _ => answered,
        }
    }
}

/// `fieldValidation` of a create, update or patch (apiserver
/// `pkg/endpoints/handlers/rest.go` `fieldValidation`; unset means Warn).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum FieldValidation {
    /// `Ignore`: unknown fields are dropped and duplicate fields resolved, silently.
    Ignore,
    /// `Warn` (the default): as `Ignore`, plus a warning per unknown or duplicate field.
    Warn,
    /// `Strict`: an unknown or duplicate field fails the request (400 `strict decoding error`).
    Strict,
}

/// Parses `fieldValidation` with upstream's 400 text for an unknown value.
pub fn field_validation(v: Option<&str>) -> Result<FieldValidation, ApiError> {
    match v {
        None | Some("") | Some("Warn") => Ok(FieldValidation::Warn),
        Some("Ignore") => Ok(FieldValidation::Ignore),
        Some("Strict") => Ok(FieldValidation::Strict),
        Some(other) => Err(ApiError::bad_request(format!(
            "fieldValidation: Unsupported value: {}: supported values: \"Ignore\", \"Strict\", \"Warn\"",
            crate::gofmt::go_quote(other)
        ))),
    }
}

/// apimachinery `ValidateDryRun`'s error: the bad value is the whole `[]string`, printed
/// with `%#v`.
pub fn dry_run_not_supported(values: &[String]) -> FieldError {
    let quoted: Vec<String> = values.iter().map(|d| crate::gofmt::go_quote(d)).collect();
    FieldError::new(
        crate::FieldErrorType::NotSupported,
        "dryRun",
        None,
        format!(
            "[]string{{{}}}: supported values: \"All\"",
            quoted.join(", ")
        ),
    )
}

/// The `dryRun` values of a write (`kind` is `CreateOptions`, `UpdateOptions` or
/// `PatchOptions`): any value but "All" is the 422 of apimachinery
/// `ValidateCreateOptions`/`ValidateUpdateOptions`/`ValidatePatchOptions`
/// (meta/v1/validation). Returns whether the write is a dry run.
pub fn write_dry_run(kind: &str, values: &[String]) -> Result<bool, ApiError> {
    if values.iter().any(|d| d != "All") {
        return Err(ApiError::invalid(
            kind,
            "meta.k8s.io",
            "",
            &[dry_run_not_supported(values)],
        ));
    }
    Ok(!values.is_empty())
}

/// `metav1.DeleteOptions` of one DELETE (body, else query parameters): k8s-openapi's type.
/// It is filled by [`delete_options_from_query`] and the body decoder of
/// `crdplane_apiserver::rest::delete`, which answer upstream's decoding texts.
/// `gracePeriodSeconds` is accepted and validated; custom resources have no graceful
/// deletion (upstream: no `RESTGracefulDeleteStrategy`), so it changes nothing.
pub use k8s_openapi::apimachinery::pkg::apis::meta::v1::{DeleteOptions, Preconditions};

/// DeleteOptions with these preconditions and nothing else (the deletes the server makes
/// itself, and tests).
pub fn preconditioned(uid: Option<&str>, resource_version: Option<&str>) -> DeleteOptions {
    DeleteOptions {
        preconditions: Some(Preconditions {
            uid: uid.map(str::to_string),
            resource_version: resource_version.map(str::to_string),
        }),
        ..Default::default()
    }
}

/// What the delete path reads of [`DeleteOptions`].
pub trait DeleteOptionsExt {
    /// `dryrun.IsDryRun`: any `dryRun` value (validation allows only "All").
    fn is_dry_run(&self) -> bool;
    /// The `dryRun` values.
    fn dry_run_values(&self) -> &[String];
    /// `preconditions.uid`: the object's uid must be this.
    fn precondition_uid(&self) -> Option<&str>;
    /// `preconditions.resourceVersion`: the object's resourceVersion must be this.
    fn precondition_rv(&self) -> Option<&str>;
}

impl DeleteOptionsExt for DeleteOptions {
    fn is_dry_run(&self) -> bool {
        !self.dry_run_values().is_empty()
    }
    fn dry_run_values(&self) -> &[String] {
        self.dry_run.as_deref().unwrap_or_default()
    }
    fn precondition_uid(&self) -> Option<&str> {
        self.preconditions.as_ref()?.uid.as_deref()
    }
    fn precondition_rv(&self) -> Option<&str> {
        self.preconditions.as_ref()?.resource_version.as_deref()
    }
}

/// DeleteOptions from query parameters (the parameter codec: `gracePeriodSeconds`,
/// `orphanDependents`, `propagationPolicy`, `dryRun`; preconditions only travel in a body).
/// `get` reads a parameter's first value, `all` every value; `orphanDependents` is read as
/// the codec reads a `*bool` (only `0`/`false` in any case are false).
pub fn delete_options_from_query<'a>(
    get: impl Fn(&str) -> Option<&'a str>,
    all: impl Fn(&str) -> Vec<String>,
) -> Result<DeleteOptions, ApiError> {
    let mut o = DeleteOptions::default();
    if let Some(g) = get("gracePeriodSeconds") {
        o.grace_period_seconds = Some(g.parse().map_err(|_| {
            ApiError::bad_request(format!(
                "strconv.ParseInt: parsing {}: invalid syntax",
                crate::gofmt::go_quote(g)
            ))
        })?);
    }
    o.orphan_dependents =
        get("orphanDependents").map(|v| !(v == "0" || v.eq_ignore_ascii_case("false")));
    o.propagation_policy = get("propagationPolicy").map(str::to_string);
    let dry_run = all("dryRun");
    o.dry_run = (!dry_run.is_empty()).then_some(dry_run);
    Ok(o)
}

/// apimachinery `ValidateDeleteOptions` (meta/v1/validation): the field errors of the 422
/// `DeleteOptions.meta.k8s.io "" is invalid: …`.
pub fn validate_delete_options(o: &DeleteOptions) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if o.orphan_dependents.is_some()
        && let Some(p) = &o.propagation_policy
    {
        errs.push(FieldError::invalid(
            "propagationPolicy",
            Value::String(p.clone()),
            "orphanDependents and deletionPropagation cannot be both set",
        ));
    }
    if let Some(p) = &o.propagation_policy
        && !matches!(p.as_str(), "Foreground" | "Background" | "Orphan")
    {
        errs.push(FieldError::not_supported(
            "propagationPolicy",
            Value::String(p.clone()),
            &["Foreground", "Background", "Orphan", "nil"],
        ));
    }
    if o.dry_run_values().iter().any(|d| d != "All") {
        errs.push(dry_run_not_supported(o.dry_run_values()));
    }
    errs
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::continue_token::encode_continue;

    const KEY: &[u8] = b"0123456789abcdef0123456789abcdef";

    fn opts(q: &str) -> Result<ListOptions, ApiError> {
        let pairs: Vec<(String, String)> = q
            .split('&')
            .filter(|s| !s.is_empty())
            .map(|p| {
                let (k, v) = p.split_once('=').unwrap_or((p, ""));
                (k.to_string(), v.to_string())
            })
            .collect();
        list_options(
            |k| pairs.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str()),
            KEY,
            "s",
        )
    }

    #[test]
    fn list_resource_version_semantics() {
        assert_eq!(opts("").unwrap().rv, ListRv::Latest);
        assert_eq!(opts("resourceVersion=0").unwrap().rv, ListRv::Any);
        assert_eq!(
            opts("resourceVersion=5").unwrap().rv,
            ListRv::NotOlderThan(5)
        );
        assert_eq!(
            opts("resourceVersion=5&limit=10").unwrap().rv,
            ListRv::Exact(5),
            "legacy resourceVersion with a limit is an exact read"
        );
        assert_eq!(
            opts("resourceVersion=5&resourceVersionMatch=Exact")
                .unwrap()
                .rv,
            ListRv::Exact(5)
        );
        assert_eq!(
            opts("resourceVersion=5&resourceVersionMatch=NotOlderThan&limit=3")
                .unwrap()
                .rv,
            ListRv::NotOlderThan(5)
        );
        assert_eq!(
            opts("resourceVersion=0&resourceVersionMatch=NotOlderThan")
                .unwrap()
                .rv,
            ListRv::Any
        );
        let t = encode_continue(KEY, "s", "a/b", 9);
        let o = opts(&format!("continue={t}&limit=2")).unwrap();
        assert_eq!(
            (o.rv, o.start_after.as_str(), o.continuing),
            (ListRv::Exact(9), "a/b", true)
        );
        let t = encode_continue(KEY, "s", "a/b", -1);
        assert_eq!(opts(&format!("continue={t}")).unwrap().rv, ListRv::Latest);
        assert_eq!(
            opts(&format!("continue={t}&resourceVersion=3"))
                .unwrap_err()
                .message,
            "specifying resource version is not allowed when using continue"
        );
    }

    #[test]
    fn list_option_validation_texts() {
        let e = opts("resourceVersionMatch=Exact").unwrap_err();
        assert_eq!(e.code, 422);
        assert_eq!(
            e.message,
            "ListOptions.meta.k8s.io \"\" is invalid: resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden unless resourceVersion is provided"
        );
        assert_eq!(
            opts("resourceVersion=0&resourceVersionMatch=Exact")
                .unwrap_err()
                .message,
            "ListOptions.meta.k8s.io \"\" is invalid: resourceVersionMatch: Forbidden: resourceVersionMatch \"exact\" is forbidden for resourceVersion \"0\""
        );
        assert_eq!(
            opts("resourceVersion=1&resourceVersionMatch=Foo")
                .unwrap_err()
                .message,
            "ListOptions.meta.k8s.io \"\" is invalid: resourceVersionMatch: Unsupported value: \"Foo\": supported values: \"Exact\", \"NotOlderThan\", \"\""
        );
        assert_eq!(
            opts("sendInitialEvents=true").unwrap_err().message,
            "ListOptions.meta.k8s.io \"\" is invalid: sendInitialEvents: Forbidden: sendInitialEvents is forbidden for list"
        );
        let e = opts("resourceVersionMatch=NotOlderThan&continue=abc").unwrap_err();
        assert_eq!(
            e.message,
            "ListOptions.meta.k8s.io \"\" is invalid: [resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden unless resourceVersion is provided, resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden when continue is provided]"
        );
        assert_eq!(
            opts("resourceVersion=abc").unwrap_err().message,
            "invalid resource version: resourceVersion: Invalid value: \"abc\": strconv.ParseUint: parsing \"abc\": invalid syntax"
        );
    }

    #[test]
    fn field_validation_table() {
        let cases = [
            (None, Ok(FieldValidation::Warn)),
            (Some(""), Ok(FieldValidation::Warn)),
            (Some("Warn"), Ok(FieldValidation::Warn)),
            (Some("Ignore"), Ok(FieldValidation::Ignore)),
            (Some("Strict"), Ok(FieldValidation::Strict)),
            (
                Some("strict"),
                Err(
                    "fieldValidation: Unsupported value: \"strict\": supported values: \"Ignore\", \"Strict\", \"Warn\"",
                ),
            ),
        ];
        for (v, want) in cases {
            let got = field_validation(v).map_err(|e| (e.code, e.message));
            assert_eq!(got, want.map_err(|m| (400, m.to_string())), "{v:?}");
        }
    }

    #[test]
    fn write_dry_run_table() {
        let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        assert_eq!(write_dry_run("CreateOptions", &[]), Ok(false));
        assert_eq!(write_dry_run("CreateOptions", &s(&["All"])), Ok(true));
        let e = write_dry_run("PatchOptions", &s(&["All", "x"])).unwrap_err();
        assert_eq!(e.code, 422);
        assert_eq!(
            e.message,
            r#"PatchOptions.meta.k8s.io "" is invalid: dryRun: Unsupported value: []string{"All", "x"}: supported values: "All""#
        );
    }

    #[test]
    fn delete_options_table() {
        let q = |query: &'static str| {
            let pairs: Vec<(&'static str, &'static str)> = query
                .split('&')
                .filter(|p| !p.is_empty())
                .map(|p| p.split_once('=').unwrap_or((p, "")))
                .collect();
            delete_options_from_query(
                |k| pairs.iter().find(|(n, _)| *n == k).map(|(_, v)| *v),
                |k| {
                    pairs
                        .iter()
                        .filter(|(n, _)| *n == k)
                        .map(|(_, v)| v.to_string())
                        .collect()
                },
            )
        };
        let o = q("gracePeriodSeconds=0&propagationPolicy=Orphan&dryRun=All").unwrap();
        assert_eq!(o.grace_period_seconds, Some(0));
        assert_eq!(o.propagation_policy.as_deref(), Some("Orphan"));
        assert_eq!(o.dry_run_values(), ["All".to_string()]);
        assert!(validate_delete_options(&o).is_empty());
        assert_eq!(
            q("orphanDependents=FALSE").unwrap().orphan_dependents,
            Some(false)
        );
        assert_eq!(q("orphanDependents").unwrap().orphan_dependents, Some(true));
        assert_eq!(
            q("gracePeriodSeconds=x").unwrap_err().message,
            r#"strconv.ParseInt: parsing "x": invalid syntax"#
        );
        let cases = [
            ("propagationPolicy=Background", ""),
            (
                "propagationPolicy=Bad&dryRun=x",
                r#"DeleteOptions.meta.k8s.io "" is invalid: [propagationPolicy: Unsupported value: "Bad": supported values: "Foreground", "Background", "Orphan", "nil", dryRun: Unsupported value: []string{"x"}: supported values: "All"]"#,
            ),
            (
                "propagationPolicy=Orphan&orphanDependents=true",
                r#"DeleteOptions.meta.k8s.io "" is invalid: propagationPolicy: Invalid value: "Orphan": orphanDependents and deletionPropagation cannot be both set"#,
            ),
        ];
        for (query, want) in cases {
            let errs = validate_delete_options(&q(query).unwrap());
            let got = if errs.is_empty() {
                String::new()
            } else {
                ApiError::invalid("DeleteOptions", "meta.k8s.io", "", &errs).message
            };
            assert_eq!(got, want, "{query}");
        }
    }
}
