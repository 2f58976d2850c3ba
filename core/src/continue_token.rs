//! Continue tokens of paginated lists: encoding, signing and verification.
//!
//! Where it sits: the gateway's list handlers decode the `continue` query parameter with
//! [`decode_continue`] (through [`crate::options::list_options`]) and hand out the next
//! page's token with [`encode_continue`]; the signing key comes from the storage service.
//!
//! Tokens keep upstream's payload, base64url (no padding) of
//! `{"v":"meta.k8s.io/v1","rv":N,"start":"<key>\u0000"}` (k8s.io/apiserver/pkg/storage/continue.go),
//! followed by `.` and the base64url HMAC-SHA256 of `<scope>\n<payload>` under a key every
//! gateway replica shares (the storage service creates it once in Redis with SET NX and hands
//! it out: `Storage.ContinueKey`). The scope is (tenant, group, resource, namespace), so a
//! client can neither forge or edit a token nor replay one on another resource, tenant or
//! namespace. Clients treat tokens as opaque strings, so the suffix is invisible to them.
//! The MAC is RustCrypto's `hmac` over `sha2`, compared in constant time with `subtle`.

use crate::ApiError;
use base64::Engine;
use hmac::{Hmac, Mac};
use serde_json::{Value, json};
use subtle::ConstantTimeEq;

type HmacSha256 = Hmac<sha2::Sha256>;

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

/// HMAC-SHA256 (RFC 2104) of `<scope>\n<payload>`, ready to be finalized or verified.
fn token_mac(key: &[u8], scope: &str, payload: &str) -> HmacSha256 {
    let mut m = HmacSha256::new_from_slice(key).expect("HMAC takes keys of any length");
    m.update(scope.as_bytes());
    m.update(b"\n");
    m.update(payload.as_bytes());
    m
}

/// A signed continue token for the list of `scope` continuing after `start_after_key`
/// (`<namespace>/<name>`) at revision `rv` (-1: continue at the latest state).
pub fn encode_continue(key: &[u8], scope: &str, start_after_key: &str, rv: i64) -> String {
    let doc = json!({"v": "meta.k8s.io/v1", "rv": rv, "start": format!("{start_after_key}\u{0}")});
    let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD;
    let payload = b64.encode(serde_json::to_vec(&doc).expect("json"));
    let mac = b64.encode(token_mac(key, scope, &payload).finalize().into_bytes());
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
    let want = token_mac(key, scope, payload).finalize().into_bytes();
    let got = b64.decode(mac).unwrap_or_default();
    // Constant-time comparison (subtle): a mismatch reveals nothing about where it differs;
    // slices of different lengths compare unequal.
    if !bool::from(got.as_slice().ct_eq(want.as_slice())) {
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

/// The 410 for a continue token whose revision left the history: Expired with
/// [`INCONSISTENT_CONTINUE`] and a fresh token (revision -1: continue at the latest state)
/// in the Status's `metadata.continue` (etcd3 store.go `handleCompactedErrorForPaging`).
pub fn expired_continue(key: &[u8], scope: &str, start_after: &str) -> ApiError {
    let mut e = ApiError::expired(INCONSISTENT_CONTINUE);
    e.details = Some(Box::new(crate::status::StatusDetails {
        list_continue: encode_continue(key, scope, start_after, -1),
        ..Default::default()
    }));
    e
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: &[u8] = b"0123456789abcdef0123456789abcdef";

    #[test]
    fn hmac_matches_rfc4231() {
        // RFC 4231 test case 2 (key "Jefe"), through the same MAC construction.
        let mut m = HmacSha256::new_from_slice(b"Jefe").unwrap();
        m.update(b"what do ya want for nothing?");
        let hex: String = m
            .finalize()
            .into_bytes()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        assert_eq!(
            hex,
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
    }

    /// Tokens handed out by the earlier, hand-written HMAC stay valid: these are the exact
    /// bytes it produced for this key and scope.
    #[test]
    fn tokens_of_the_previous_implementation_stay_valid() {
        let scope = token_scope("t", "g", "crontabs", "default");
        let old = [
            (
                "eyJydiI6MTIsInN0YXJ0IjoiZGVmYXVsdC94XHUwMDAwIiwidiI6Im1ldGEuazhzLmlvL3YxIn0.Sz9syjpzM2QhUs43L65Vygbt1nPeKifIrMz-cQKpAOM",
                12,
            ),
            (
                "eyJydiI6LTEsInN0YXJ0IjoiZGVmYXVsdC94XHUwMDAwIiwidiI6Im1ldGEuazhzLmlvL3YxIn0.QNtt8sedIiasp9IsJZ9PifmVQpO59PjUxwCvmAaD80w",
                -1,
            ),
        ];
        for (token, rv) in old {
            assert_eq!(
                decode_continue(KEY, &scope, token).unwrap(),
                ("default/x".to_string(), rv)
            );
            assert_eq!(encode_continue(KEY, &scope, "default/x", rv), token);
        }
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
            let m = base64::engine::general_purpose::URL_SAFE_NO_PAD
                .encode(token_mac(KEY, &scope, &p).finalize().into_bytes());
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

    #[test]
    fn expired_status_carries_a_fresh_token() {
        let e = expired_continue(KEY, "s", "a/b");
        let st: Value = serde_json::from_slice(&e.to_json()).unwrap();
        assert!(st.get("details").is_none(), "{st}");
        assert_eq!(crate::ApiError::from_json(&e.to_json()).unwrap(), e);
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
