//! Fuzz target bodies for crdplane's hand-written parsers, one `pub fn(&[u8])` per target.
//!
//! Sits beside the request path, not in it: every function drives one parser exactly as the
//! request path does (the HTTP/1.1 head parser and chunked decoder of crdplane-http1, request-info
//! and query parsing, label/field selectors, continue tokens, JSON/YAML body decoding with
//! its limits, structural-schema compilation, the prune/default/validate pipeline, JSON patch
//! and strategic merge patch) and checks the invariants that must hold for any input
//! (no panic, split-independence of the incremental decoder, encode→decode round trips).
//!
//! The libFuzzer binaries in `fuzz/libfuzzer/` (built by `cargo fuzz`, see `fuzz/README.md`)
//! call these functions; `tests/regressions.rs` replays every input kept under
//! `fuzz/regressions/<target>/` through the same functions in the ordinary `cargo test` run,
//! so no nightly toolchain or libFuzzer is needed to keep found bugs fixed.

pub mod structured;

use arbitrary::Unstructured;
use bytes::BytesMut;
use crdplane_http1::{self as http1, ChunkedDecoder, Limits};
use serde_json::{Map, Value, json};

/// The public key of the `authn` target's service-account verifier (ECDSA P-256).
const SA_PUBLIC_KEY: &str = "-----BEGIN PUBLIC KEY-----\nMFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAEfMjGzHS+s6vKso7iON84MBS8fcfD\n+VvFPje6oh9LK21V3IR87oiBORzhDleuXHSt0WOa2sgxfUq99xF0mQAveQ==\n-----END PUBLIC KEY-----\n";

/// One fuzz target: its directory name under `fuzz/regressions/` and its body.
pub type Target = (&'static str, fn(&[u8]));

/// Every target, by the name of its libFuzzer binary.
pub const TARGETS: &[Target] = &[
    ("http1_head", http1_head),
    ("http1_chunked", http1_chunked),
    ("request_info", request_info),
    ("selector", selector),
    ("continue_token", continue_token),
    ("body_decode", body_decode),
    ("schema_compile", schema_compile),
    ("validation_pipeline", validation_pipeline),
    ("json_patch", json_patch),
    ("strategic_merge", strategic_merge),
    ("authn", authn),
    ("authn_config", authn_config),
    ("impersonation", impersonation),
    ("encryption", encryption),
];

fn limits(max_head: usize, max_headers: usize) -> Limits {
    Limits {
        max_head,
        max_headers,
        max_body: 1 << 20,
        header_timeout: std::time::Duration::from_secs(1),
        idle_timeout: std::time::Duration::from_secs(1),
    }
}

/// `http1::parse_head` (gateway/http1, crate crdplane-http1): the first byte picks the limits, the rest is
/// the connection's buffer. A complete head never claims more bytes than were given, and
/// parsing a longer buffer (pipelined bytes after the head) gives the same head.
pub fn http1_head(data: &[u8]) {
    let Some((&sel, buf)) = data.split_first() else {
        return;
    };
    let l = limits(
        [64, 1024, 8192, 1 << 20][usize::from(sel & 3)],
        usize::from(sel >> 2) * 4 + 1,
    );
    if let Ok(Some(head)) = http1::parse_head(buf, &l) {
        assert!(head.len <= buf.len());
        let mut more = buf.to_vec();
        more.extend_from_slice(b"GET / HTTP/1.1\r\n");
        let again = http1::parse_head(&more, &l)
            .expect("a longer buffer fails")
            .expect("a longer buffer is partial");
        assert_eq!(again.len, head.len);
        assert_eq!(again.framing, head.framing);
        assert_eq!(again.keep_alive, head.keep_alive);
    }
}

fn chunked_one_shot(
    body: &[u8],
    max: usize,
) -> (Result<Option<bytes::Bytes>, http1::ChunkError>, BytesMut) {
    let mut buf = BytesMut::from(body);
    let r = ChunkedDecoder::default().decode(&mut buf, max);
    (r, buf)
}

/// `http1::ChunkedDecoder` fed the body in arbitrary splits, as bytes arrive from a socket:
/// the outcome (body or error) and the bytes left after the body are those of decoding the
/// whole body at once.
pub fn http1_chunked(data: &[u8]) {
    let mut u = Unstructured::new(data);
    let max = match u.int_in_range(0u8..=3) {
        Ok(0) => 16,
        Ok(1) => 1024,
        _ => 1 << 20,
    };
    let nsplits = u.int_in_range(0usize..=16).unwrap_or(0);
    let mut cuts: Vec<usize> = (0..nsplits)
        .map(|_| u.int_in_range(0usize..=4096).unwrap_or(0))
        .collect();
    let body = u.take_rest();
    cuts.iter_mut().for_each(|c| *c = (*c).min(body.len()));
    cuts.sort_unstable();
    cuts.push(body.len());

    let (whole, whole_rest) = chunked_one_shot(body, max);
    let mut dec = ChunkedDecoder::default();
    let mut buf = BytesMut::new();
    let mut from = 0;
    let mut split = Ok(None);
    for &c in &cuts {
        buf.extend_from_slice(&body[from..c]);
        from = c;
        split = dec.decode(&mut buf, max);
        if !matches!(split, Ok(None)) {
            break;
        }
    }
    match (&whole, &split) {
        (Ok(Some(a)), Ok(Some(b))) => {
            assert_eq!(a, b);
            // What follows the body stays in the buffer for the next request.
            buf.extend_from_slice(&body[from..]);
            assert_eq!(whole_rest, buf);
        }
        (Err(a), Err(b)) => assert_eq!(a, b),
        (Ok(None), Ok(None)) => {}
        _ => panic!("split decoding gave {split:?}, whole gave {whole:?}"),
    }
}

/// `request_info::parse` with the query parsed by `http::Query::parse` (gateway/src/api.rs
/// does the same for every request): input is `method \n path \n query`.
pub fn request_info(data: &[u8]) {
    let Ok(s) = std::str::from_utf8(data) else {
        return;
    };
    let mut parts = s.splitn(3, '\n');
    let method = parts.next().unwrap_or("");
    let path = parts.next().unwrap_or("/");
    let query = parts.next();
    let q = crdplane_gateway::http::Query::parse(query);
    for k in [
        "watch",
        "labelSelector",
        "fieldSelector",
        "continue",
        "limit",
    ] {
        let _ = q.get(k);
    }
    let _ = crdplane_gateway::http::parse_accept(query);
    let _ = crdplane_gateway::http::negotiate_output(query);
    if let Ok(info) = crdplane_gateway::request_info::parse(method, path, q.flag("watch"), "t") {
        assert!(path.ends_with(info.path.as_str()) || info.path == "/");
        if info.is_resource_request {
            assert!(info.api_prefix == "api" || info.api_prefix == "apis");
        }
    }
}

/// Label and field selector parsing and matching (core/src/selector.rs). A parsed label
/// selector prints (upstream `String()`) to a selector that parses to the same requirements;
/// field-value escaping round-trips.
pub fn selector(data: &[u8]) {
    use crdplane_core::selector::{
        CustomResourceFieldLabels, FieldSelector, LabelSelector, escape_field_value,
        unescape_field_value,
    };
    let Ok(s) = std::str::from_utf8(data) else {
        return;
    };
    // The selector, then (after a newline) labels to match as `k=v` lines.
    let (sel, rest) = s.split_once('\n').unwrap_or((s, ""));
    let labels: Map<String, Value> = rest
        .lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_string(), Value::String(v.to_string())))
        .collect();
    let obj = json!({"metadata": {"name": "n", "namespace": "ns", "labels": labels}, "spec": {"a": rest}});

    if let Ok(ls) = LabelSelector::parse(sel) {
        let printed = ls.to_string();
        let again = LabelSelector::parse(&printed)
            .unwrap_or_else(|e| panic!("{sel:?} printed as {printed:?}, which fails: {e}"));
        assert_eq!(printed, again.to_string(), "selector {sel:?}");
        assert_eq!(ls.matches(&labels), again.matches(&labels));
        let _ = ls.matches_object(&obj);
        let _ = ls.requires_exact_match("app");
    }
    if let Ok(fs) = FieldSelector::parse(sel) {
        let _ = fs.to_string();
        let _ = fs.exact_name();
        let fl = CustomResourceFieldLabels::new(true, [".spec.a", ".spec.b"]);
        if fl.check(&fs).is_ok() {
            let _ = fl.matches(&fs, &obj);
        }
    }
    if let Ok(v) = unescape_field_value(sel) {
        assert_eq!(
            unescape_field_value(&escape_field_value(&v)).as_deref(),
            Ok(v.as_str())
        );
    }
    assert_eq!(
        unescape_field_value(&escape_field_value(sel)).as_deref(),
        Ok(sel)
    );
}

/// Continue tokens (crdplane-core `continue_token`): arbitrary tokens decode or fail with a
/// Status error; a token encoded for a valid start key decodes to that key and revision,
/// and only in its own scope.
pub fn continue_token(data: &[u8]) {
    use crdplane_core::continue_token::{decode_continue, encode_continue};
    const KEY: &[u8] = b"0123456789abcdef0123456789abcdef";
    let mut u = Unstructured::new(data);
    let Ok(mode) = u.arbitrary::<u8>() else {
        return;
    };
    if mode & 1 == 0 {
        let token = String::from_utf8_lossy(u.take_rest());
        let _ = decode_continue(KEY, "t/g/r", &token);
        return;
    }
    let ns: String = u.arbitrary().unwrap_or_default();
    let name: String = u.arbitrary().unwrap_or_default();
    let rv: i64 = u.arbitrary().unwrap_or(1);
    let start = format!("{ns}/{name}");
    let token = encode_continue(KEY, "t/g/r", &start, rv);
    let decoded = decode_continue(KEY, "t/g/r", &token);
    let valid_key = !ns.contains('/')
        && !name.contains('/')
        && !name.is_empty()
        && !start.contains("..")
        && !start.ends_with('\u{0}');
    if valid_key && rv != 0 && token.len() <= 4096 {
        let (s, r) = decoded.unwrap_or_else(|e| panic!("{start:?}@{rv}: {e:?}"));
        assert_eq!((s.as_str(), r), (start.as_str(), rv));
    }
    assert!(decode_continue(KEY, "t/g/other", &token).is_err());
}

/// Request body decoding with its limits: the gateway's `request::decode_body_bytes` (JSON, or
/// YAML by Content-Type; object-only, depth ≤ `MAX_DEPTH`) and the validation service's
/// duplicate-reporting decoder. The first byte picks the media type.
pub fn body_decode(data: &[u8]) {
    let Some((&sel, body)) = data.split_first() else {
        return;
    };
    let ct = match sel % 4 {
        0 => "application/json",
        1 => "application/yaml",
        2 => "application/x-yaml; charset=utf-8",
        _ => "text/plain",
    };
    if let Ok((v, _dups)) = crdplane_gateway::request::decode_body_bytes(Some(ct), body) {
        assert!(v.is_object());
    }
    if let Ok((v, _dups)) = crdplane_validation::decode::decode_with_duplicates(body) {
        let plain: Value = serde_json::from_slice(body).expect("plain decode agrees");
        assert_eq!(plain, v);
    }
}

/// Structural-schema compilation of an arbitrary JSON document (services/validation
/// structural.rs `compile`) and the CRD-schema checks of crd_schema.rs.
pub fn schema_compile(data: &[u8]) {
    let Ok(schema) = serde_json::from_slice::<Value>(data) else {
        return;
    };
    let _ = crdplane_validation::crd_schema::validate_version_schema(
        &schema,
        "spec.versions[0].schema.openAPIV3Schema",
    );
    let _ = crdplane_validation::crd_schema::status_root_checks(&schema, "spec");
    if let Ok(s) = crdplane_validation::structural::compile(&schema) {
        // A compiled schema must run over any object: use the document itself.
        let mut obj = schema.clone();
        let _ = crdplane_validation::pipeline::prune_default_validate(&mut obj, &s);
    }
}

/// The write path's validation pipeline over a generated structural schema and a generated
/// object (see [`structured`]): compile, then `admit` (decode, prune, default, metadata checks,
/// validate, list-type checks) and the read path's `normalize`; the one-walk pipeline must
/// agree with the separate passes.
pub fn validation_pipeline(data: &[u8]) {
    use crdplane_validation::admit::{self, AdmitInput, FieldValidation, Operation};
    let mut u = Unstructured::new(data);
    let Ok(schema) = structured::schema(&mut u) else {
        return;
    };
    let Ok(obj) = structured::object(&mut u) else {
        return;
    };
    let Ok(compiled) = crdplane_validation::structural::compile(&schema) else {
        return;
    };
    let bytes = serde_json::to_vec(&obj).expect("json");
    let out = admit::admit(
        &compiled,
        &AdmitInput {
            operation: Operation::Create,
            object: &bytes,
            old_object: None,
            field_validation: FieldValidation::Strict,
            subresource: "",
            api_version: "g.example.com/v1",
            kind: "K",
            namespaced: true,
        },
    );
    let _ = admit::admit(
        &compiled,
        &AdmitInput {
            operation: Operation::Update,
            object: &bytes,
            old_object: Some(&bytes),
            field_validation: FieldValidation::Warn,
            subresource: "status",
            api_version: "g.example.com/v1",
            kind: "K",
            namespaced: true,
        },
    );
    let _ = out;
    let mut one = obj.clone();
    admit::normalize_value(&compiled, &mut one);
    let mut separate = obj;
    admit::normalize_value_separate_passes(&compiled, &mut separate);
    assert_eq!(one, separate, "one-walk and separate passes differ");
}

/// JSON patch (gateway/src/jsonpatch.rs): an object and a patch, both JSON, separated by a
/// NUL byte.
pub fn json_patch(data: &[u8]) {
    let (doc, patch) = split_nul(data);
    let Ok(doc) = serde_json::from_slice::<Value>(doc) else {
        return;
    };
    let Ok(patch) = serde_json::from_slice::<json_patch::Patch>(patch) else {
        return;
    };
    if let Err(e) = crdplane_apiserver::jsonpatch::apply(&doc, &patch) {
        let _ = e.to_api_error();
    }
}

/// Strategic merge patch (gateway/src/strategic.rs) of a Namespace-shaped object and of a
/// CRD-shaped one: an object and a patch body separated by a NUL byte.
pub fn strategic_merge(data: &[u8]) {
    use crdplane_apiserver::strategic::{CUSTOM_RESOURCE_DEFINITION, NAMESPACE, apply};
    let (doc, patch) = split_nul(data);
    let Ok(doc) = serde_json::from_slice::<Value>(doc) else {
        return;
    };
    let _ = apply(&doc, patch, NAMESPACE);
    let _ = apply(&doc, patch, CUSTOM_RESOURCE_DEFINITION);
}

fn split_nul(data: &[u8]) -> (&[u8], &[u8]) {
    match data.iter().position(|b| *b == 0) {
        Some(i) => (&data[..i], &data[i + 1..]),
        None => (data, b"{}"),
    }
}

/// The issuer of the `authn` target's OIDC authenticator.
pub const OIDC_ISSUER: &str = "https://oidc.fuzz.example";

/// The `authn` target's JWT authenticator: tokens of [`OIDC_ISSUER`] for audience `fuzz`,
/// `sub`/`groups` prefixed `oidc:`, a `uid` claim and a required `hd` claim, verified with
/// the JWK of [`SA_PUBLIC_KEY`] (whose private half is nowhere: no input carries a valid
/// signature, so every claim check before it is exercised and the token never passes).
fn oidc_issuer() -> Option<crdplane_auth::oidc::Oidc> {
    use base64::Engine;
    let cfg = format!(
        "apiVersion: apiserver.config.k8s.io/v1\nkind: AuthenticationConfiguration\njwt:\n\
         - issuer: {{url: \"{OIDC_ISSUER}\", audiences: [fuzz]}}\n  claimMappings:\n    \
         username: {{claim: sub, prefix: \"oidc:\"}}\n    groups: {{claim: groups, prefix: \"oidc:\"}}\n    \
         uid: {{claim: uid}}\n  claimValidationRules: [{{claim: hd, requiredValue: example.com}}]\n"
    );
    let oidc = crdplane_auth::oidc::parse(cfg.as_bytes(), std::path::Path::new("."), &[]).ok()?;
    let body: String = SA_PUBLIC_KEY
        .lines()
        .filter(|l| !l.starts_with("-----"))
        .collect();
    let der = base64::engine::general_purpose::STANDARD
        .decode(body)
        .ok()?;
    // The SPKI of a P-256 key ends with the uncompressed point 0x04 || x || y.
    let point = der.get(der.len().checked_sub(64)?..)?;
    let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD;
    let jwks = json!({"keys": [{"kty": "EC", "crv": "P-256", "kid": "x",
        "x": b64.encode(&point[..32]), "y": b64.encode(&point[32..])}]});
    let keys = crdplane_auth::oidc::KeySet::from_jwks(jwks.to_string().as_bytes()).ok()?;
    oidc.authenticators().first()?.keys().set(keys);
    Some(oidc)
}

/// The authenticator chain's own parsing (crate `crdplane-auth`): the input up to the
/// first NUL is an `Authorization` header value (bearer parsing, token lookup, the union
/// and anonymous rules; JWTs of the service-account issuer and of [`OIDC_ISSUER`] go
/// through the issuer peek, the claim checks and `jsonwebtoken`'s decoding), the rest a
/// DER certificate whose subject is read as the x509 authenticator reads a verified one
/// (CN, O, the uid attribute, Go's string alphabets). Invariants: no panic; a user who is
/// let in is anonymous exactly when no credential was accepted, every non-anonymous user
/// carries `system:authenticated`, and no JWT of the issuers gets in.
pub fn authn(data: &[u8]) {
    use crdplane_auth::chain::Authenticators;
    use crdplane_auth::token_file::TokenFile;
    use crdplane_auth::user::ALL_AUTHENTICATED;
    use std::sync::OnceLock;
    static CHAIN: OnceLock<Authenticators> = OnceLock::new();
    let chain = CHAIN.get_or_init(|| Authenticators {
        x509: None,
        tokens: TokenFile::parse("tok,jane,1,\"dev,ops\"\n", "fuzz")
            .ok()
            .map(|(t, _)| t),
        // Service-account tokens of a key pair whose private half is nowhere: no input
        // can carry a valid one, so the JWT path only ever refuses or passes.
        service_accounts: crdplane_auth::service_account::Verifier::from_pems(
            &[SA_PUBLIC_KEY.to_string()],
            &[crdplane_auth::service_account::DEFAULT_ISSUER.to_string()],
            &[crdplane_auth::service_account::DEFAULT_ISSUER.to_string()],
        )
        .ok(),
        oidc: oidc_issuer(),
        anonymous: true,
        token_cache: Default::default(),
    });
    let (header, der) = match data.iter().position(|&b| b == 0) {
        Some(i) => (&data[..i], &data[i + 1..]),
        None => (data, &[][..]),
    };
    let x509 = (!der.is_empty())
        .then(|| crdplane_auth::x509::unverified_user(der).map_err(|e| e.to_string()));
    let _ = chain.bearer_warning(Some(header));
    if let Ok(u) = chain.authenticate_with(Some(header), x509.clone()) {
        let by_token = x509.as_ref().is_none_or(|r| r.is_err()) && u.name == "jane";
        let by_cert = x509.as_ref().is_some_and(|r| r.is_ok());
        assert_eq!(
            u.is_anonymous(),
            !by_token && !by_cert,
            "{header:?} {x509:?} -> {u:?}"
        );
        if !u.is_anonymous() {
            assert!(u.groups.iter().any(|g| g == ALL_AUTHENTICATED), "{u:?}");
        }
        assert!(!u.name.starts_with("oidc:"), "{header:?} -> {u:?}");
    }
}

/// The structured authentication configuration (`--authentication-config`,
/// `crdplane_auth::oidc::parse`): YAML or JSON, strict decoding, upstream's validation.
/// Invariants: no panic; an accepted configuration has only https issuers with audiences,
/// none of them the disallowed (service-account) issuer. Inputs naming a `jwksFile` are
/// skipped: that field reads a file from disk, which a fuzzer must not choose.
pub fn authn_config(data: &[u8]) {
    const SA_ISSUER: &str = "https://kubernetes.default.svc";
    if data.windows(8).any(|w| w == b"jwksFile") {
        return;
    }
    match crdplane_auth::oidc::parse(
        data,
        std::path::Path::new("/nonexistent"),
        &[SA_ISSUER.to_string()],
    ) {
        Ok(o) => {
            for a in o.authenticators() {
                // `https:host` (opaque) is accepted too, as upstream (Go's url.Parse).
                let scheme = a.issuer.split_once(':').map(|(s, _)| s);
                assert!(
                    scheme.is_some_and(|s| s.eq_ignore_ascii_case("https")),
                    "{a:?}"
                );
                assert!(!a.issuer.contains(['?', '#']), "{a:?}");
                assert!(!a.audiences.is_empty(), "{a:?}");
                assert_ne!(a.issuer, SA_ISSUER);
            }
        }
        Err(e) => {
            assert!(!e.to_string().is_empty());
        }
    }
}

/// Encryption at rest (apiserver/src/encryption.rs). First byte 0: the rest is an
/// `--encryption-provider-config`, parsed (an accepted one names resources, each with
/// providers); otherwise the rest is a stored object read back through a configuration of
/// every provider: it opens (plaintext, identity listed) or fails, never panics, and an
/// object sealed and opened again is itself, from another tenant it does not open.
pub fn encryption(data: &[u8]) {
    use crdplane_apiserver::encryption::{ENVELOPE_FIELD, EncryptionConfig};
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    if mode == 0 {
        if let Ok(text) = std::str::from_utf8(rest)
            && let Ok(c) = EncryptionConfig::parse(text)
        {
            assert!(c.resources().count() > 0);
        }
        return;
    }
    static CONFIG: std::sync::OnceLock<EncryptionConfig> = std::sync::OnceLock::new();
    let c = CONFIG.get_or_init(|| {
        EncryptionConfig::parse(
            "apiVersion: apiserver.config.k8s.io/v1\nkind: EncryptionConfiguration\nresources:\n- resources: [secrets]\n  providers:\n  - aesgcm: {keys: [{name: a, secret: MDEyMzQ1Njc4OWFiY2RlZg==}]}\n  - secretbox: {keys: [{name: b, secret: MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=}]}\n  - identity: {}\n",
        )
        .expect("the target's configuration")
    });
    let t = c.for_resource("", "secrets").expect("secrets");
    let Ok(v) = serde_json::from_slice::<Value>(rest) else {
        return;
    };
    let _ = t.open_checked(v.clone(), "t", "", "secrets");
    if v.get("metadata").is_some_and(Value::is_object) && v.get(ENVELOPE_FIELD).is_none() {
        let sealed = t.seal(v.clone(), "t", "", "secrets").expect("seal");
        assert_eq!(t.open(sealed.clone(), "t", "", "secrets").expect("open"), v);
        assert!(t.open(sealed, "u", "", "secrets").is_err());
    }
}

/// The impersonation headers (`gateway/src/filters/impersonation.rs`): each input line
/// `name: value` is one header. Without an `Impersonate-*` header nothing is asked; with
/// one, either an identity with a name, the user part among the parts to authorize and
/// exactly one of the all-users groups (unless a group named one), or the error of
/// parts without a user.
pub fn impersonation(data: &[u8]) {
    use crdplane_gateway::filters::impersonation::requested_identity;
    let mut h = http::HeaderMap::new();
    for line in data.split(|&b| b == b'\n') {
        let Some(i) = line.iter().position(|&b| b == b':') else {
            continue;
        };
        let (Ok(n), Ok(v)) = (
            http::HeaderName::from_bytes(&line[..i]),
            http::HeaderValue::from_bytes(line[i + 1..].trim_ascii()),
        ) else {
            continue;
        };
        h.append(n, v);
    }
    // Only the four header kinds ask for anything (upstream ignores other `Impersonate-*`
    // names, e.g. `Impersonate-User!`, as this target's first crash showed).
    let asked = h.keys().any(|k| {
        let k = k.as_str();
        matches!(
            k,
            "impersonate-user" | "impersonate-group" | "impersonate-uid"
        ) || k.starts_with("impersonate-extra-")
    });
    match requested_identity(&h) {
        None => assert!(!asked, "{h:?}"),
        Some(Err(e)) => {
            assert!(e.ends_with("without impersonating a user"), "{e}");
            assert!(
                h.get("impersonate-user").is_none_or(|u| u.is_empty()),
                "{h:?}"
            );
        }
        Some(Ok((parts, u))) => {
            assert!(!u.name.is_empty() && parts >= 1, "{h:?} -> {u:?}");
            let all = ["system:authenticated", "system:unauthenticated"];
            assert!(u.groups.iter().any(|g| all.contains(&g.as_str())), "{u:?}");
        }
    }
}

#[cfg(test)]
mod tests {
    /// The `authn` target really drives the OIDC path: its authenticator loads, and the
    /// OIDC seed is refused for its signature (every claim check before it passed).
    #[test]
    fn authn_target_reaches_the_oidc_signature_check() {
        let oidc = super::oidc_issuer().expect("the target's OIDC authenticator loads");
        let seed = std::fs::read_to_string(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("seeds/authn/bearer-oidc"),
        )
        .unwrap();
        let token = seed.strip_prefix("Bearer ").unwrap();
        assert_eq!(
            oidc.authenticate(token),
            Err("oidc: verify token: failed to verify signature: failed to verify id token signature".into())
        );
    }
}
