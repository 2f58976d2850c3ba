//! Request options of the API verbs: the query parameters of a list (`resourceVersion`,
//! `resourceVersionMatch`, `limit`, `continue`, `sendInitialEvents`) parsed and validated with
//! upstream's texts.
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
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ListRv {
    /// resourceVersion unset (or a continue token with rv -1): the most recent state.
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
    pub rv: ListRv,
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
        match self.rv {
            ListRv::Latest | ListRv::Any => (0, 0, 0),
            ListRv::NotOlderThan(n) => (n, 0, 0),
            ListRv::Exact(n) if self.continuing => (0, 0, n),
            ListRv::Exact(n) => (0, n, 0),
        }
    }
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
}
