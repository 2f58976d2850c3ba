//! Request strategy as pure functions: what the server sets on create and keeps on update,
//! generation bookkeeping, generateName, list documents and continue tokens.
//!
//! Follows k8s.io/apiserver/pkg/registry/rest/create.go (`BeforeCreate`, `FillObjectMetaSystemFields`),
//! update.go (`BeforeUpdate`), apiextensions-apiserver pkg/registry/customresource/strategy.go
//! (`PrepareForCreate`/`PrepareForUpdate`: status handling and generation), and
//! k8s.io/apiserver/pkg/storage/continue.go (continue tokens).

use base64::Engine;
use crdplane_core::ApiError;
use serde_json::{Value, json};

pub use crdplane_apiserver::rest::meta::{
    CreateParams, generate_name, object_rv, prepare_for_create, prepare_for_update,
    rv_set_on_create, spec_changed, unchanged,
};

/// A list document assembled from stored object bytes without re-encoding them.
pub fn list_json(
    api_version: &str,
    list_kind: &str,
    items: &[bytes::Bytes],
    rv: u64,
    cont: &str,
    remaining: Option<u64>,
) -> Vec<u8> {
    let total: usize = items.iter().map(|i| i.len() + 1).sum();
    let mut out = Vec::with_capacity(total + 200);
    out.extend_from_slice(b"{\"apiVersion\":");
    out.extend_from_slice(&serde_json::to_vec(api_version).expect("string"));
    out.extend_from_slice(b",\"items\":[");
    for (i, it) in items.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        out.extend_from_slice(it);
    }
    out.extend_from_slice(b"],\"kind\":");
    out.extend_from_slice(&serde_json::to_vec(list_kind).expect("string"));
    out.extend_from_slice(b",\"metadata\":{");
    if !cont.is_empty() {
        out.extend_from_slice(b"\"continue\":");
        out.extend_from_slice(&serde_json::to_vec(cont).expect("string"));
        out.push(b',');
        if let Some(r) = remaining {
            out.extend_from_slice(format!("\"remainingItemCount\":{r},").as_bytes());
        }
    }
    out.extend_from_slice(format!("\"resourceVersion\":\"{rv}\"}}}}").as_bytes());
    out
}

// ---- list options and continue tokens -------------------------------------------------------
//
// Continue tokens keep upstream's payload, base64url (no padding) of
// `{"v":"meta.k8s.io/v1","rv":N,"start":"<key>\u0000"}` (apiserver pkg/storage/continue.go),
// followed by `.` and the base64url HMAC-SHA256 of `<scope>\n<payload>` under a key every
// gateway replica shares (the storage service creates it once in Redis with SET NX and hands
// it out: `Storage.ContinueKey`). The scope is (tenant, group, resource, namespace), so a
// client can neither forge or edit a token nor replay one on another resource, tenant or
// namespace. Clients treat tokens as opaque strings, so the suffix is invisible to them.

/// Upstream `ErrGenericInvalidKey` et al. (pkg/storage/continue.go), wrapped as
/// `storage.ValidateListOptions` does: `invalid continue token: <err>`.
const INVALID_CONTINUE: &str = "invalid continue token: continue key is not valid";
/// Upstream etcd3/errors.go `inconsistentContinue`: the 410 of a continue token whose
/// revision is gone, sent with a fresh token (rv -1) that continues at the latest state.
pub const INCONSISTENT_CONTINUE: &str = "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter, or use the continue token in this response to retrieve the remainder of the results. Continuing with the provided token results in an inconsistent list - objects that were created, modified, or deleted between the time the first chunk was returned and now may show up in the list.";
/// Longest continue token accepted.
const MAX_TOKEN: usize = 4096;

/// What a token is bound to: `tenant|group|resource|namespace`.
pub fn token_scope(tenant: &str, group: &str, resource: &str, namespace: &str) -> String {
    format!("{tenant}|{group}|{resource}|{namespace}")
}

/// HMAC-SHA256 (RFC 2104) over the concatenation of `parts`.
pub fn hmac_sha256(key: &[u8], parts: &[&[u8]]) -> [u8; 32] {
    use sha2::{Digest, Sha256};
    let mut k = [0u8; 64];
    if key.len() > 64 {
        k[..32].copy_from_slice(&Sha256::digest(key));
    } else {
        k[..key.len()].copy_from_slice(key);
    }
    let mut ipad = [0x36u8; 64];
    let mut opad = [0x5cu8; 64];
    for i in 0..64 {
        ipad[i] ^= k[i];
        opad[i] ^= k[i];
    }
    let mut h = Sha256::new();
    h.update(ipad);
    for p in parts {
        h.update(p);
    }
    let inner = h.finalize();
    let mut h = Sha256::new();
    h.update(opad);
    h.update(inner);
    h.finalize().into()
}

fn token_mac(key: &[u8], scope: &str, payload: &str) -> [u8; 32] {
    hmac_sha256(key, &[scope.as_bytes(), b"\n", payload.as_bytes()])
}

/// A signed continue token for the list of `scope` continuing after `start_after_key`
/// (`<namespace>/<name>`) at revision `rv` (-1: continue at the latest state).
pub fn encode_continue(key: &[u8], scope: &str, start_after_key: &str, rv: i64) -> String {
    let doc = json!({"v": "meta.k8s.io/v1", "rv": rv, "start": format!("{start_after_key}\u{0}")});
    let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD;
    let payload = b64.encode(serde_json::to_vec(&doc).expect("json"));
    let mac = b64.encode(token_mac(key, scope, &payload));
    format!("{payload}.{mac}")
}

/// Verifies and decodes a continue token into (exclusive start key, rv). 400 BadRequest with
/// upstream's texts (`invalid continue token: continue key is not valid…`) otherwise.
pub fn decode_continue(key: &[u8], scope: &str, token: &str) -> Result<(String, i64), ApiError> {
    let generic = || ApiError::bad_request(INVALID_CONTINUE);
    let bad = |m: &str| ApiError::bad_request(format!("{INVALID_CONTINUE}: {m}"));
    if token.len() > MAX_TOKEN {
        return Err(generic());
    }
    let (payload, mac) = token.split_once('.').unwrap_or((token, ""));
    let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD;
    let raw = b64.decode(payload).map_err(|e| {
        let at = match e {
            base64::DecodeError::InvalidByte(i, _)
            | base64::DecodeError::InvalidLastSymbol(i, _) => i,
            _ => payload.len(),
        };
        bad(&format!("illegal base64 data at input byte {at}"))
    })?;
    let want = token_mac(key, scope, payload);
    let got = b64.decode(mac).unwrap_or_default();
    // Constant-time comparison: a mismatch reveals nothing about where it differs.
    let differs = got.len() != want.len()
        || got
            .iter()
            .zip(want.iter())
            .fold(0u8, |acc, (a, b)| acc | (a ^ b))
            != 0;
    if differs {
        return Err(generic());
    }
    let v: Value = serde_json::from_slice(&raw).map_err(|e| bad(&e.to_string()))?;
    match v.get("v").and_then(Value::as_str) {
        Some("meta.k8s.io/v1") => {}
        other => {
            return Err(ApiError::bad_request(format!(
                "{INVALID_CONTINUE}: server does not recognize this encoded version {}",
                other.unwrap_or("")
            )));
        }
    }
    let rv = v.get("rv").and_then(Value::as_i64).unwrap_or(0);
    if rv == 0 {
        return Err(bad(
            "incorrect encoded start resourceVersion (version meta.k8s.io/v1)",
        ));
    }
    let start = v.get("start").and_then(Value::as_str).unwrap_or("");
    if start.is_empty() {
        return Err(bad("encoded start key empty (version meta.k8s.io/v1)"));
    }
    let start = start.strip_suffix('\u{0}').unwrap_or(start);
    // Keys are "<namespace>/<name>" (namespace empty for cluster scope): one separator and
    // no traversal, the equivalent of upstream's path.Clean check.
    if start.matches('/').count() != 1 || start.contains("..") || start.ends_with('/') {
        return Err(bad(start));
    }
    Ok((start.to_string(), rv))
}

/// The HMAC key for continue tokens, fetched once per process from the storage service
/// (which creates it in Redis once for all replicas).
pub async fn continue_key(
    storage: &crdplane_proto::v1::storage_client::StorageClient<crate::api::Channel>,
) -> Result<std::sync::Arc<[u8]>, ApiError> {
    static KEY: tokio::sync::OnceCell<std::sync::Arc<[u8]>> = tokio::sync::OnceCell::const_new();
    KEY.get_or_try_init(|| async {
        let r = storage
            .clone()
            .continue_key(crdplane_proto::v1::ContinueKeyRequest {})
            .await?
            .into_inner();
        if r.key.len() < 16 {
            return Err(ApiError::internal("continue key too short"));
        }
        Ok(std::sync::Arc::from(r.key.to_vec()))
    })
    .await
    .cloned()
}

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
    use crdplane_core::FieldError;
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
                crdplane_core::field::go_quote(rv),
                crdplane_core::field::go_quote(rv)
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

/// The Status JSON of a 410 for a continue token whose revision left the history: upstream
/// `handleCompactedErrorForPaging` — `inconsistentContinue` with a new token (rv -1) in
/// `metadata.continue` that goes on from the same key at the latest state.
pub fn expired_continue_status(key: &[u8], scope: &str, start_after: &str) -> Vec<u8> {
    let mut b = ApiError::expired(INCONSISTENT_CONTINUE).status_body();
    b.metadata.insert(
        "continue".into(),
        Value::String(encode_continue(key, scope, start_after, -1)),
    );
    serde_json::to_vec(&b).expect("status serializes")
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

    fn params(ns: &str) -> CreateParams<'_> {
        CreateParams {
            namespace: ns,
            namespaced: true,
            uid: "u".into(),
            now: "2026-01-01T00:00:00Z".into(),
            drop_status: false,
        }
    }

    #[test]
    fn no_op_detection_and_create_resource_version() {
        let old = json!({"apiVersion":"s/v1","kind":"K","metadata":{"name":"x","generation":1,
            "resourceVersion":"5","labels":{"a":"b"}},"spec":{"n":1},"status":{"p":"R"}});
        // A merge patch that sets what is there, after prepare-for-update: unchanged.
        let mut new = old.clone();
        json_patch::merge(
            &mut new,
            &json!({"spec":{"n":1},"metadata":{"labels":{"a":"b"}}}),
        );
        prepare_for_update(&mut new, &old, true).unwrap();
        assert!(unchanged(&new, &old));
        // Status through the main resource is reset from the stored object: unchanged.
        let mut new = old.clone();
        new["status"] = json!({"p":"other"});
        prepare_for_update(&mut new, &old, true).unwrap();
        assert!(unchanged(&new, &old));
        // A label, a spec field (generation moves too), an annotation: changed.
        for p in [
            json!({"metadata":{"labels":{"a":"c"}}}),
            json!({"spec":{"n":2}}),
            json!({"metadata":{"annotations":{"x":"y"}}}),
        ] {
            let mut new = old.clone();
            json_patch::merge(&mut new, &p);
            prepare_for_update(&mut new, &old, true).unwrap();
            assert!(!unchanged(&new, &old), "{p}");
        }
        for (rv, set) in [
            (json!("12"), true),
            (json!("0"), false),
            (json!(""), false),
            (json!("-1"), false),
            (json!("abc"), false),
            (Value::Null, false),
        ] {
            let o = json!({"metadata":{"name":"x","resourceVersion":rv}});
            assert_eq!(rv_set_on_create(&o), set, "{rv}");
        }
    }

    #[test]
    fn create_sets_system_fields() {
        let mut o = json!({"apiVersion":"g/v1","kind":"K","metadata":{"name":"a","resourceVersion":"5"},"spec":{}});
        prepare_for_create(&mut o, &params("default")).unwrap();
        assert_eq!(o["metadata"]["namespace"], "default");
        assert_eq!(o["metadata"]["generation"], 1);
        assert_eq!(o["metadata"]["uid"], "u");
        assert!(o["metadata"].get("resourceVersion").is_none());
        let mut bad = json!({"metadata":{"name":"a","namespace":"other"}});
        assert_eq!(
            prepare_for_create(&mut bad, &params("default"))
                .unwrap_err()
                .message,
            "the namespace of the provided object does not match the namespace sent on the request"
        );
    }

    #[test]
    fn generate_name_and_status_drop() {
        let mut o = json!({"metadata":{"generateName":"ct-"},"status":{"x":1}});
        let mut p = params("d");
        p.drop_status = true;
        prepare_for_create(&mut o, &p).unwrap();
        let n = o["metadata"]["name"].as_str().unwrap();
        assert!(n.starts_with("ct-") && n.len() == 8, "{n}");
        assert!(o.get("status").is_none());
    }

    #[test]
    fn update_generation_and_status() {
        let old = json!({"metadata":{"uid":"u","generation":3,"creationTimestamp":"t"},"spec":{"a":1},"status":{"s":1}});
        let mut same =
            json!({"metadata":{"uid":"evil","generation":9},"spec":{"a":1},"status":{"s":2}});
        prepare_for_update(&mut same, &old, true).unwrap();
        assert_eq!(same["metadata"]["generation"], 3);
        assert_eq!(same["metadata"]["uid"], "u");
        assert_eq!(
            same["status"]["s"], 1,
            "status kept from old with the subresource"
        );
        let mut changed = json!({"metadata":{},"spec":{"a":2}});
        prepare_for_update(&mut changed, &old, false).unwrap();
        assert_eq!(changed["metadata"]["generation"], 4);
        let mut status_only = json!({"metadata":{},"spec":{"a":1},"status":{"s":5}});
        prepare_for_update(&mut status_only, &old, false).unwrap();
        assert_eq!(
            status_only["metadata"]["generation"], 3,
            "status changes do not bump generation"
        );
    }

    #[test]
    fn lists_and_tokens() {
        let items = vec![
            bytes::Bytes::from_static(b"{\"a\":1}"),
            bytes::Bytes::from_static(b"{\"b\":2}"),
        ];
        let l: Value =
            serde_json::from_slice(&list_json("g/v1", "KList", &items, 7, "tok", Some(3))).unwrap();
        assert_eq!(
            l,
            json!({"apiVersion":"g/v1","items":[{"a":1},{"b":2}],"kind":"KList","metadata":{"continue":"tok","remainingItemCount":3,"resourceVersion":"7"}})
        );
        let l: Value = serde_json::from_slice(&list_json("v1", "L", &[], 0, "", None)).unwrap();
        assert_eq!(l["metadata"], json!({"resourceVersion":"0"}));
    }

    const KEY: &[u8] = b"0123456789abcdef0123456789abcdef";

    #[test]
    fn hmac_matches_rfc4231() {
        // RFC 4231 test case 2.
        let mac = hmac_sha256(b"Jefe", &[b"what do ya want ", b"for nothing?"]);
        let hex: String = mac.iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(
            hex,
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
    }

    #[test]
    fn continue_tokens_are_signed_and_scoped() {
        let scope = token_scope("t", "g", "crontabs", "default");
        let t = encode_continue(KEY, &scope, "default/x", 12);
        assert_eq!(
            decode_continue(KEY, &scope, &t).unwrap(),
            ("default/x".to_string(), 12)
        );
        // The payload is upstream's JSON.
        let payload = t.split('.').next().unwrap();
        let raw = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(payload)
            .unwrap();
        assert_eq!(
            serde_json::from_slice::<Value>(&raw).unwrap(),
            json!({"v":"meta.k8s.io/v1","rv":12,"start":"default/x\u{0}"})
        );
        let generic = "invalid continue token: continue key is not valid";
        // Another resource, namespace or key: rejected.
        for (k, sc) in [
            (KEY, token_scope("t", "g", "other", "default")),
            (KEY, token_scope("t", "g", "crontabs", "kube-system")),
            (KEY, token_scope("u", "g", "crontabs", "default")),
            (&b"another key another key another k"[..], scope.clone()),
        ] {
            assert_eq!(decode_continue(k, &sc, &t).unwrap_err().message, generic);
        }
        // An edited payload with the old signature, or no signature: rejected.
        let forged_payload = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .encode(br#"{"v":"meta.k8s.io/v1","rv":99,"start":"default/a\u0000"}"#);
        let mac = t.split('.').nth(1).unwrap();
        for forged in [format!("{forged_payload}.{mac}"), forged_payload.clone()] {
            let e = decode_continue(KEY, &scope, &forged).unwrap_err();
            assert_eq!((e.code, e.message.as_str()), (400, generic));
        }
        let e = decode_continue(KEY, &scope, "!!!").unwrap_err();
        assert_eq!(
            e.message,
            "invalid continue token: continue key is not valid: illegal base64 data at input byte 0"
        );
        // Signed but semantically invalid payloads get upstream's texts.
        let signed = |doc: &str| {
            let p = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(doc);
            let m =
                base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(token_mac(KEY, &scope, &p));
            format!("{p}.{m}")
        };
        assert_eq!(
            decode_continue(
                KEY,
                &scope,
                &signed(r#"{"v":"meta.k8s.io/v1","rv":0,"start":"a/b"}"#)
            )
            .unwrap_err()
            .message,
            "invalid continue token: continue key is not valid: incorrect encoded start resourceVersion (version meta.k8s.io/v1)"
        );
        assert_eq!(
            decode_continue(
                KEY,
                &scope,
                &signed(r#"{"v":"meta.k8s.io/v1","rv":3,"start":""}"#)
            )
            .unwrap_err()
            .message,
            "invalid continue token: continue key is not valid: encoded start key empty (version meta.k8s.io/v1)"
        );
        assert!(
            decode_continue(
                KEY,
                &scope,
                &signed(r#"{"v":"meta.k8s.io/v1","rv":3,"start":"../x"}"#)
            )
            .is_err()
        );
        let inconsistent = encode_continue(KEY, &scope, "default/x", -1);
        assert_eq!(
            decode_continue(KEY, &scope, &inconsistent).unwrap(),
            ("default/x".to_string(), -1)
        );
    }

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
        let st: Value = serde_json::from_slice(&expired_continue_status(KEY, "s", "a/b")).unwrap();
        assert_eq!(st["code"], 410);
        assert_eq!(st["reason"], "Expired");
        assert_eq!(st["message"], INCONSISTENT_CONTINUE);
        let t = st["metadata"]["continue"].as_str().unwrap();
        assert_eq!(
            decode_continue(KEY, "s", t).unwrap(),
            ("a/b".to_string(), -1)
        );
    }
}
