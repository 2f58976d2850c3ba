//! OIDC / JWT bearer tokens: kube-apiserver's structured authentication configuration
//! (`--authentication-config`, `AuthenticationConfiguration` of
//! `apiserver.config.k8s.io/v1alpha1`, `v1beta1` or `v1`, its `jwt:` list).
//!
//! Where it sits: the gateway loads the file once at start-up ([`load`]; a bad file is a
//! start-up error). Per request, the authenticator chain ([`crate::chain`]) calls
//! [`Oidc::authenticate`] for a bearer token that neither the token file nor the
//! service-account verifier accepted. The key sets are filled by the gateway
//! (`gateway/src/oidc_keys.rs`, which does the network IO this crate never does): at once
//! from a JWKS file, or from the issuer's discovery document and its `jwks_uri`; until a key
//! set is there, tokens of that issuer are refused (`oidc: authenticator not initialized`).
//!
//! Upstream, followed here (written anew, not copied):
//! `staging/src/k8s.io/apiserver/pkg/apis/apiserver/types.go` (the configuration),
//! `.../apis/apiserver/validation/validation.go` (its load-time validation, with the same
//! field paths and texts), `pkg/kubeapiserver/options/authentication.go`
//! (`loadAuthenticationConfig`: strict decoding, the service-account issuers may not be
//! JWT issuers, every valid signing algorithm allowed) and
//! `staging/src/k8s.io/apiserver/plugin/pkg/authenticator/token/oidc/oidc.go` with go-oidc's
//! `verify.go` (how a token is checked). The rules, each pinned by a test:
//!
//! 1. Issuer peek: the token's unverified `iss` chooses the authenticator (the legacy
//!    `accounts.google.com` counts as `https://accounts.google.com`). A token that is no
//!    compact JWT, or whose issuer no authenticator has, gets no opinion, so the chain's
//!    other rules stay as they were (`invalid bearer token`).
//! 2. The payload is checked before the signature (go-oidc's order): issuer; audiences with
//!    `audienceMatchPolicy` MatchAny (the `aud` claim, a string or a list, must hold one of
//!    the configured audiences); `exp` must be in the future (an absent `exp` is expired;
//!    go-oidc allows no leeway here); `nbf`, when present, may be up to
//!    [`NBF_LEEWAY_SECONDS`] ahead (go-oidc's one minute, the same 60 s as the
//!    service-account verifier); the algorithm must be RS256/384/512, ES256/384 or
//!    PS256/384/512 (upstream's list less ES512, which `jsonwebtoken` lacks; never HMAC).
//! 3. Signature: `jsonwebtoken` (RustCrypto) with the keys of the issuer's JWKS whose `kid`
//!    is the token's (all keys when the token names none), whose `alg`, if given, is the
//!    token's and whose type fits the algorithm. A `kid` the key set does not have asks the
//!    gateway for a fresh key set (rate-limited there) and fails this request; upstream's
//!    remote key set refetches while the request waits, crdplane never makes a request
//!    wait on the network.
//! 4. Username: the `claimMappings.username.claim` claim, a string (JSON `null` reads as
//!    `""`, as Go's decoder does), with `prefix` prepended when it is not empty. `prefix` is
//!    required whenever `claim` is set (`""` turns prefixing off). When the claim is
//!    `email` and the token has `email_verified`, it must be `true`.
//! 5. Groups: the `groups.claim` claim, a string or a list of strings, each with `prefix`;
//!    an absent claim gives no groups. UID: the `uid.claim` claim, a string.
//! 6. `claimValidationRules` with `claim` + `requiredValue`: the claim must be present, a
//!    string, and equal the value, in the order of the file.
//! 7. CEL (`expression`, `valueExpression`, `userValidationRules`) is refused at load,
//!    naming the field: [`CEL_UNSUPPORTED`]. So are `anonymous` (crdplane has
//!    `--anonymous-auth`) and `egressSelectorType` (no egress selector here).
//!
//! crdplane extension: `issuer.jwksFile`, the path of a JWKS document (`{"keys": [...]}`,
//! relative paths from the configuration file's directory). With it the keys come from
//! that file (read at load, then re-read by the gateway) instead of the issuer's discovery
//! document; it excludes `discoveryURL`. Upstream has no such field (its tests inject a
//! key set in code).
//!
//! Not covered: distributed claims (`_claim_names`), reloading the configuration file,
//! upstream's case-insensitive matching of claim names by Go's JSON decoder (claims match
//! exactly here).

use crate::user::UserInfo;
use base64::Engine;
use crdplane_core::field::{FieldError, aggregate_message, go_quote};
use jsonwebtoken::{Algorithm, DecodingKey, Validation, jwk};
use serde::Deserialize;
use serde_json::{Map, Value};
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock, RwLock};

/// The configuration's API group.
pub const API_GROUP: &str = "apiserver.config.k8s.io";
/// The configuration's kind.
pub const KIND: &str = "AuthenticationConfiguration";
/// The versions of [`API_GROUP`] that carry [`KIND`].
pub const VERSIONS: [&str; 3] = ["v1alpha1", "v1beta1", "v1"];
/// The load error of every CEL field.
pub const CEL_UNSUPPORTED: &str = "CEL expressions are not supported by crdplane; use claim";
/// How far ahead of now a token's `nbf` may be (go-oidc: one minute).
pub const NBF_LEEWAY_SECONDS: i64 = 60;
/// Upstream's bound on the number of JWT authenticators.
pub const MAX_AUTHENTICATORS: usize = 64;

/// The signing algorithms accepted (upstream's `AllValidSigningAlgorithms` less ES512).
const ALGORITHMS: [(Algorithm, &str); 8] = [
    (Algorithm::ES256, "ES256"),
    (Algorithm::ES384, "ES384"),
    (Algorithm::PS256, "PS256"),
    (Algorithm::PS384, "PS384"),
    (Algorithm::PS512, "PS512"),
    (Algorithm::RS256, "RS256"),
    (Algorithm::RS384, "RS384"),
    (Algorithm::RS512, "RS512"),
];

/// Go's `base64.RawURLEncoding` (no padding; trailing bits are not checked).
const RAW_URL: base64::engine::GeneralPurpose = base64::engine::GeneralPurpose::new(
    &base64::alphabet::URL_SAFE,
    base64::engine::GeneralPurposeConfig::new()
        .with_encode_padding(false)
        .with_decode_padding_mode(base64::engine::DecodePaddingMode::RequireNone)
        .with_decode_allow_trailing_bits(true),
);

// ---------------------------------------------------------------------------------------
// The configuration file.

/// The file as written (every field optional, as Go's decoder sees a missing field;
/// `apiVersion` and `kind` are checked on the document before).
#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct RawConfig {
    jwt: Option<Vec<RawJwt>>,
    anonymous: Option<Value>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct RawJwt {
    issuer: Option<RawIssuer>,
    claim_validation_rules: Option<Vec<RawClaimRule>>,
    claim_mappings: Option<RawMappings>,
    user_validation_rules: Option<Vec<RawUserRule>>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct RawIssuer {
    url: Option<String>,
    #[serde(rename = "discoveryURL")]
    discovery_url: Option<String>,
    certificate_authority: Option<String>,
    audiences: Option<Vec<String>>,
    audience_match_policy: Option<String>,
    egress_selector_type: Option<String>,
    jwks_file: Option<String>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct RawClaimRule {
    claim: Option<String>,
    required_value: Option<String>,
    expression: Option<String>,
    message: Option<String>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct RawMappings {
    username: Option<RawPrefixed>,
    groups: Option<RawPrefixed>,
    uid: Option<RawClaimOrExpression>,
    extra: Option<Vec<RawExtra>>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct RawPrefixed {
    claim: Option<String>,
    prefix: Option<String>,
    expression: Option<String>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct RawClaimOrExpression {
    claim: Option<String>,
    expression: Option<String>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct RawExtra {
    key: Option<String>,
    value_expression: Option<String>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct RawUserRule {
    expression: Option<String>,
    message: Option<String>,
}

/// The shapes of the file, for upstream's strict decoding (unknown fields are errors).
#[derive(Clone, Copy)]
enum Shape {
    Root,
    Jwt,
    Issuer,
    ClaimRule,
    Mappings,
    Prefixed,
    ClaimOrExpression,
    Extra,
    UserRule,
    /// Not checked further (refused as a whole).
    Any,
}

impl Shape {
    /// The known fields of an object of this shape, each with its value's shape and
    /// whether it is a list.
    fn fields(self) -> &'static [(&'static str, Shape, bool)] {
        use Shape::*;
        match self {
            Root => &[
                ("apiVersion", Any, false),
                ("kind", Any, false),
                ("jwt", Jwt, true),
                ("anonymous", Any, false),
            ],
            Jwt => &[
                ("issuer", Issuer, false),
                ("claimValidationRules", ClaimRule, true),
                ("claimMappings", Mappings, false),
                ("userValidationRules", UserRule, true),
            ],
            Issuer => &[
                ("url", Any, false),
                ("discoveryURL", Any, false),
                ("certificateAuthority", Any, false),
                ("audiences", Any, false),
                ("audienceMatchPolicy", Any, false),
                ("egressSelectorType", Any, false),
                ("jwksFile", Any, false),
            ],
            ClaimRule => &[
                ("claim", Any, false),
                ("requiredValue", Any, false),
                ("expression", Any, false),
                ("message", Any, false),
            ],
            Mappings => &[
                ("username", Prefixed, false),
                ("groups", Prefixed, false),
                ("uid", ClaimOrExpression, false),
                ("extra", Extra, true),
            ],
            Prefixed => &[
                ("claim", Any, false),
                ("prefix", Any, false),
                ("expression", Any, false),
            ],
            ClaimOrExpression => &[("claim", Any, false), ("expression", Any, false)],
            Extra => &[("key", Any, false), ("valueExpression", Any, false)],
            UserRule => &[("expression", Any, false), ("message", Any, false)],
            Any => &[],
        }
    }
}

/// Upstream's strict-decoding findings: `unknown field "<path>"` for every field the
/// configuration does not have (the extension `jwksFile` included as known).
fn unknown_fields(v: &Value, shape: Shape, path: &str, out: &mut Vec<String>) {
    let Value::Object(m) = v else { return };
    if matches!(shape, Shape::Any) {
        return;
    }
    let fields = shape.fields();
    for (k, child) in m {
        let p = if path.is_empty() {
            k.clone()
        } else {
            format!("{path}.{k}")
        };
        match fields.iter().find(|(name, _, _)| name == k) {
            None => out.push(format!("unknown field {}", go_quote(&p))),
            Some((_, s, true)) => {
                if let Value::Array(items) = child {
                    for (i, item) in items.iter().enumerate() {
                        unknown_fields(item, *s, &format!("{p}[{i}]"), out);
                    }
                }
            }
            Some((_, s, false)) => unknown_fields(child, *s, &p, out),
        }
    }
}

/// Where an issuer's keys come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JwksSource {
    /// A JWKS document on disk (the `jwksFile` extension), read at load and re-read by the
    /// gateway.
    File(PathBuf),
    /// The issuer's discovery document (`<discoveryURL>`, or
    /// `<url>/.well-known/openid-configuration`) and its `jwks_uri`, over HTTPS.
    Discovery {
        /// The discovery document's URL.
        discovery_url: String,
        /// PEM CA bundle the issuer's TLS certificate must chain to (`certificateAuthority`);
        /// None: the system's roots.
        certificate_authority: Option<String>,
    },
}

/// A claim and the prefix of its values (`PrefixedClaimOrExpression` with `claim`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PrefixedClaim {
    /// The claim's name.
    pub claim: String,
    /// Prepended to each value unless empty.
    pub prefix: String,
}

/// One validated `jwt:` entry.
#[derive(Debug)]
pub struct JwtAuthenticator {
    /// `issuer.url`: the `iss` its tokens carry.
    pub issuer: String,
    /// `issuer.audiences` (MatchAny).
    pub audiences: Vec<String>,
    /// `claimMappings.username`.
    pub username: PrefixedClaim,
    /// `claimMappings.groups`, when a claim is set.
    pub groups: Option<PrefixedClaim>,
    /// `claimMappings.uid.claim`, when set.
    pub uid_claim: Option<String>,
    /// `claimValidationRules` with `claim`: (claim, requiredValue), in file order.
    pub required_claims: Vec<(String, String)>,
    /// Where its keys come from.
    pub source: JwksSource,
    keys: KeyStore,
}

/// Every JWT authenticator of a configuration; cheap to clone.
#[derive(Debug, Clone, Default)]
pub struct Oidc {
    authenticators: Arc<Vec<JwtAuthenticator>>,
}

impl Oidc {
    /// A number that grows whenever any issuer's key set is replaced (a rotation, a
    /// refresh): tokens cached as verified under an older one are verified again.
    pub fn key_generation(&self) -> u64 {
        self.authenticators
            .iter()
            .map(|a| a.keys().generation())
            .sum()
    }
}

/// Why a configuration could not be used: upstream's two kinds of start-up error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConfigError {
    /// The file could not be read or decoded.
    Load(String),
    /// It decoded but does not validate (the aggregated field errors).
    Invalid(String),
}

impl std::fmt::Display for ConfigError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ConfigError::Load(e) => f.write_str(e),
            ConfigError::Invalid(e) => write!(f, "invalid authentication configuration: {e}"),
        }
    }
}

/// Reads, decodes and validates the configuration file at `path` (kube-apiserver's
/// `--authentication-config`), with upstream's error texts. `disallowed_issuers` are the
/// service-account issuers, which no JWT authenticator may claim.
pub fn load(path: &Path, disallowed_issuers: &[String]) -> Result<Oidc, String> {
    let wrap = |e: String| {
        format!(
            "failed to load authentication configuration from file {}: {e}",
            go_quote(&path.display().to_string())
        )
    };
    let data = std::fs::read(path).map_err(|e| wrap(format!("open {}: {e}", path.display())))?;
    let base = path.parent().unwrap_or(Path::new("."));
    parse(&data, base, disallowed_issuers).map_err(|e| match e {
        ConfigError::Load(e) => wrap(e),
        invalid => invalid.to_string(),
    })
}

/// Decodes (YAML or JSON) and validates a configuration; relative `jwksFile` paths are
/// taken from `base`.
pub fn parse(data: &[u8], base: &Path, disallowed_issuers: &[String]) -> Result<Oidc, ConfigError> {
    let raw = decode(data)?;
    let mut errs = Vec::new();
    let jwt = raw.jwt.unwrap_or_default();
    if jwt.len() > MAX_AUTHENTICATORS {
        errs.push(FieldError::too_many(
            "jwt",
            jwt.len() as i64,
            MAX_AUTHENTICATORS as i64,
        ));
        return Err(ConfigError::Invalid(aggregate_message(&errs)));
    }
    let mut authenticators = Vec::new();
    let mut seen_issuers: Vec<String> = Vec::new();
    let mut seen_discovery: Vec<String> = Vec::new();
    for (i, a) in jwt.into_iter().enumerate() {
        let path = format!("jwt[{i}]");
        let url = a
            .issuer
            .as_ref()
            .and_then(|i| i.url.clone())
            .unwrap_or_default();
        let discovery = a
            .issuer
            .as_ref()
            .and_then(|i| i.discovery_url.clone())
            .unwrap_or_default();
        if let Some(v) = validate_authenticator(a, &path, base, disallowed_issuers, &mut errs) {
            authenticators.push(v);
        }
        if seen_issuers.contains(&url) {
            errs.push(FieldError::duplicate(
                format!("{path}.issuer.url"),
                Value::String(url.clone()),
            ));
        }
        seen_issuers.push(url);
        if !discovery.is_empty() {
            if seen_discovery.contains(&discovery) {
                errs.push(FieldError::duplicate(
                    format!("{path}.issuer.discoveryURL"),
                    Value::String(discovery.clone()),
                ));
            }
            seen_discovery.push(discovery);
        }
    }
    if raw.anonymous.is_some_and(|a| !a.is_null()) {
        errs.push(FieldError::forbidden(
            "anonymous",
            "not supported by crdplane; use --anonymous-auth",
        ));
    }
    if !errs.is_empty() {
        return Err(ConfigError::Invalid(aggregate_message(&errs)));
    }
    Ok(Oidc {
        authenticators: Arc::new(authenticators),
    })
}

/// The file's bytes → the raw configuration: YAML or JSON, strict (unknown fields and
/// duplicate keys are errors), of a known apiVersion and kind.
fn decode(data: &[u8]) -> Result<RawConfig, ConfigError> {
    if data.is_empty() {
        return Err(ConfigError::Load("empty config data".into()));
    }
    let text = std::str::from_utf8(data)
        .map_err(|e| ConfigError::Load(format!("the file is not UTF-8: {e}")))?;
    let value: Value = if text.trim_start().starts_with('{') {
        serde_json::from_str(text).map_err(|e| ConfigError::Load(e.to_string()))?
    } else {
        serde_saphyr::from_str(text).map_err(|e| ConfigError::Load(e.to_string()))?
    };
    if !value.is_object() {
        return Err(ConfigError::Load(
            "couldn't get version/kind; json parse error: the document is not an object".into(),
        ));
    }
    let kind = value
        .get("kind")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let api_version = value
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or_default();
    if kind.is_empty() {
        return Err(ConfigError::Load("Object 'Kind' is missing".into()));
    }
    let known = api_version
        .split_once('/')
        .is_some_and(|(g, v)| g == API_GROUP && VERSIONS.contains(&v));
    if kind != KIND || !known {
        return Err(ConfigError::Load(format!(
            "no kind {} is registered for version {}",
            go_quote(kind),
            go_quote(api_version)
        )));
    }
    let mut unknown = Vec::new();
    unknown_fields(&value, Shape::Root, "", &mut unknown);
    if !unknown.is_empty() {
        return Err(ConfigError::Load(format!(
            "strict decoding error: {}",
            unknown.join(", ")
        )));
    }
    serde_json::from_value(value).map_err(|e| ConfigError::Load(e.to_string()))
}

/// Upstream's `validateURL` (an `https` URL without user, query or fragment).
fn validate_url(url: &str, disallowed: &[String], path: &str, errs: &mut Vec<FieldError>) {
    let v = || Value::String(url.to_string());
    if disallowed.iter().any(|d| d == url) {
        let mut sorted = disallowed.to_vec();
        sorted.sort();
        sorted.dedup();
        errs.push(FieldError::invalid(
            path,
            v(),
            format!(
                "URL must not overlap with disallowed issuers: [{}]",
                sorted.join(" ")
            ),
        ));
    }
    let scheme = url
        .split_once(':')
        .map(|(s, _)| s)
        .filter(|s| {
            s.chars().next().is_some_and(|c| c.is_ascii_alphabetic())
                && s.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c))
        })
        .unwrap_or_default();
    if !scheme.eq_ignore_ascii_case("https") {
        errs.push(FieldError::invalid(path, v(), "URL scheme must be https"));
    }
    // As Go's url.Parse: the fragment and then the query are split off first, whether the
    // rest is hierarchical (`//authority/path`) or opaque (`https:host`, accepted upstream);
    // only a hierarchical URL has user information.
    let rest = url
        .get(scheme.len()..)
        .and_then(|r| r.strip_prefix(':'))
        .unwrap_or_default();
    let (before_fragment, fragment) = rest.split_once('#').unwrap_or((rest, ""));
    let (before_query, query) = before_fragment
        .split_once('?')
        .unwrap_or((before_fragment, ""));
    let authority = before_query
        .strip_prefix("//")
        .and_then(|r| r.split('/').next())
        .unwrap_or_default();
    if authority.contains('@') {
        errs.push(FieldError::invalid(
            path,
            v(),
            "URL must not contain a username or password",
        ));
    }
    if !query.is_empty() {
        errs.push(FieldError::invalid(
            path,
            v(),
            "URL must not contain a query",
        ));
    }
    if !fragment.is_empty() {
        errs.push(FieldError::invalid(
            path,
            v(),
            "URL must not contain a fragment",
        ));
    }
}

/// Upstream's `validateJWTAuthenticator`; the authenticator when it has no error.
fn validate_authenticator(
    a: RawJwt,
    path: &str,
    base: &Path,
    disallowed: &[String],
    errs: &mut Vec<FieldError>,
) -> Option<JwtAuthenticator> {
    let before = errs.len();
    let issuer = a.issuer.unwrap_or_default();
    let ip = format!("{path}.issuer");
    let url = issuer.url.unwrap_or_default();
    if url.is_empty() {
        errs.push(FieldError::required(format!("{ip}.url"), ""));
    } else {
        validate_url(&url, disallowed, &format!("{ip}.url"), errs);
    }
    let discovery = issuer.discovery_url.unwrap_or_default();
    if !discovery.is_empty() {
        let dp = format!("{ip}.discoveryURL");
        if !url.is_empty() && url.trim_end_matches('/') == discovery.trim_end_matches('/') {
            errs.push(FieldError::invalid(
                &dp,
                Value::String(discovery.clone()),
                "discoveryURL must be different from URL",
            ));
        }
        validate_url(&discovery, &[], &dp, errs);
    }
    // Audiences.
    let audiences = issuer.audiences.unwrap_or_default();
    let policy = issuer.audience_match_policy.unwrap_or_default();
    let ap = format!("{ip}.audiences");
    if audiences.is_empty() {
        errs.push(FieldError::required(
            &ap,
            format!("at least one {ap} is required"),
        ));
    } else {
        let mut seen: Vec<&str> = Vec::new();
        for (i, aud) in audiences.iter().enumerate() {
            if aud.is_empty() {
                errs.push(FieldError::required(format!("{ap}[{i}]"), ""));
            }
            if seen.contains(&aud.as_str()) {
                errs.push(FieldError::duplicate(
                    format!("{ap}[{i}]"),
                    Value::String(aud.clone()),
                ));
            }
            seen.push(aud);
        }
        let pp = format!("{ip}.audienceMatchPolicy");
        if audiences.len() > 1 && policy != "MatchAny" {
            errs.push(FieldError::invalid(
                &pp,
                Value::String(policy.clone()),
                "audienceMatchPolicy must be MatchAny for multiple audiences",
            ));
        }
        if audiences.len() == 1 && !policy.is_empty() && policy != "MatchAny" {
            errs.push(FieldError::invalid(
                &pp,
                Value::String(policy.clone()),
                "audienceMatchPolicy must be empty or MatchAny for single audience",
            ));
        }
    }
    let ca = issuer.certificate_authority.unwrap_or_default();
    if !ca.is_empty()
        && let Err(e) = ca_certificates(&ca)
    {
        errs.push(FieldError::invalid(
            format!("{ip}.certificateAuthority"),
            Value::String("<omitted>".into()),
            e,
        ));
    }
    if let Some(e) = issuer.egress_selector_type.filter(|e| !e.is_empty()) {
        errs.push(FieldError::invalid(
            format!("{ip}.egressSelectorType"),
            Value::String(e),
            "egress selector is not supported by crdplane",
        ));
    }
    // The extension: keys from a file.
    let jwks_file = issuer.jwks_file.unwrap_or_default();
    let mut file_keys = None;
    if !jwks_file.is_empty() {
        let fp = format!("{ip}.jwksFile");
        let file = base.join(&jwks_file);
        if !discovery.is_empty() {
            errs.push(FieldError::invalid(
                &fp,
                Value::String(jwks_file.clone()),
                "jwksFile and discoveryURL are mutually exclusive",
            ));
        }
        match std::fs::read(&file)
            .map_err(|e| format!("open {}: {e}", file.display()))
            .and_then(|b| KeySet::from_jwks(&b))
        {
            Ok(k) => file_keys = Some((file, k)),
            Err(e) => errs.push(FieldError::invalid(&fp, Value::String(jwks_file), e)),
        }
    }
    // Claim validation rules.
    let mut required_claims = Vec::new();
    for (i, rule) in a
        .claim_validation_rules
        .unwrap_or_default()
        .into_iter()
        .enumerate()
    {
        let rp = format!("{path}.claimValidationRules[{i}]");
        let claim = rule.claim.unwrap_or_default();
        let expression = rule.expression.unwrap_or_default();
        match (claim.is_empty(), expression.is_empty()) {
            (false, false) => errs.push(FieldError::invalid(
                &rp,
                Value::String(claim),
                "claim and expression can't both be set",
            )),
            (true, true) => errs.push(FieldError::required(&rp, "claim or expression is required")),
            (false, true) => {
                let message = rule.message.unwrap_or_default();
                if !message.is_empty() {
                    errs.push(FieldError::invalid(
                        format!("{rp}.message"),
                        Value::String(message),
                        "may not be specified when claim is set",
                    ));
                }
                if required_claims.iter().any(|(c, _)| *c == claim) {
                    errs.push(FieldError::duplicate(
                        format!("{rp}.claim"),
                        Value::String(claim.clone()),
                    ));
                }
                required_claims.push((claim, rule.required_value.unwrap_or_default()));
            }
            (true, false) => {
                let required = rule.required_value.unwrap_or_default();
                if !required.is_empty() {
                    errs.push(FieldError::invalid(
                        format!("{rp}.requiredValue"),
                        Value::String(required),
                        "may not be specified when expression is set",
                    ));
                }
                errs.push(FieldError::forbidden(
                    format!("{rp}.expression"),
                    CEL_UNSUPPORTED,
                ));
            }
        }
    }
    // Claim mappings.
    let mappings = a.claim_mappings.unwrap_or_default();
    let mp = format!("{path}.claimMappings");
    let username = prefixed(
        mappings.username.unwrap_or_default(),
        &format!("{mp}.username"),
        true,
        errs,
    );
    let groups = prefixed(
        mappings.groups.unwrap_or_default(),
        &format!("{mp}.groups"),
        false,
        errs,
    );
    let uid = mappings.uid.unwrap_or_default();
    let uid_claim = uid.claim.unwrap_or_default();
    let uid_expression = uid.expression.unwrap_or_default();
    match (uid_claim.is_empty(), uid_expression.is_empty()) {
        (false, false) => errs.push(FieldError::invalid(
            format!("{mp}.uid"),
            Value::String(String::new()),
            "claim and expression can't both be set",
        )),
        (true, false) => errs.push(FieldError::forbidden(
            format!("{mp}.uid.expression"),
            CEL_UNSUPPORTED,
        )),
        _ => {}
    }
    let mut seen_keys: Vec<String> = Vec::new();
    for (i, extra) in mappings.extra.unwrap_or_default().into_iter().enumerate() {
        let ep = format!("{mp}.extra[{i}]");
        let key = extra.key.unwrap_or_default();
        if seen_keys.contains(&key) {
            errs.push(FieldError::duplicate(
                format!("{ep}.key"),
                Value::String(key),
            ));
            continue;
        }
        seen_keys.push(key);
        if extra.value_expression.unwrap_or_default().is_empty() {
            errs.push(FieldError::required(format!("{ep}.valueExpression"), ""));
        } else {
            errs.push(FieldError::forbidden(
                format!("{ep}.valueExpression"),
                CEL_UNSUPPORTED,
            ));
        }
    }
    for (i, rule) in a
        .user_validation_rules
        .unwrap_or_default()
        .into_iter()
        .enumerate()
    {
        let up = format!("{path}.userValidationRules[{i}]");
        let _ = rule.message;
        if rule.expression.unwrap_or_default().is_empty() {
            errs.push(FieldError::required(format!("{up}.expression"), ""));
        } else {
            errs.push(FieldError::forbidden(
                format!("{up}.expression"),
                CEL_UNSUPPORTED,
            ));
        }
    }
    if errs.len() != before {
        return None;
    }
    let username = username?;
    let keys = KeyStore::default();
    let source = match file_keys {
        Some((file, k)) => {
            keys.set(k);
            JwksSource::File(file)
        }
        None => JwksSource::Discovery {
            discovery_url: if discovery.is_empty() {
                format!(
                    "{}/.well-known/openid-configuration",
                    url.trim_end_matches('/')
                )
            } else {
                discovery
            },
            certificate_authority: (!ca.is_empty()).then_some(ca),
        },
    };
    Some(JwtAuthenticator {
        issuer: url,
        audiences,
        username,
        groups,
        uid_claim: (!uid_claim.is_empty()).then_some(uid_claim),
        required_claims,
        source,
        keys,
    })
}

/// Upstream's `validatePrefixClaimOrExpression` for a mapping without CEL: the claim and
/// its prefix when a claim is set.
fn prefixed(
    m: RawPrefixed,
    path: &str,
    required: bool,
    errs: &mut Vec<FieldError>,
) -> Option<PrefixedClaim> {
    let claim = m.claim.unwrap_or_default();
    let expression = m.expression.unwrap_or_default();
    match (claim.is_empty(), expression.is_empty()) {
        (false, false) => {
            errs.push(FieldError::invalid(
                path,
                Value::String(String::new()),
                "claim and expression can't both be set",
            ));
            None
        }
        (true, true) => {
            if required {
                errs.push(FieldError::required(
                    path,
                    "claim or expression is required",
                ));
            }
            None
        }
        (true, false) => {
            if let Some(p) = m.prefix {
                errs.push(FieldError::invalid(
                    format!("{path}.prefix"),
                    Value::String(p),
                    "may not be specified when expression is set",
                ));
            }
            errs.push(FieldError::forbidden(
                format!("{path}.expression"),
                CEL_UNSUPPORTED,
            ));
            None
        }
        (false, true) => match m.prefix {
            None => {
                errs.push(FieldError::required(
                    format!("{path}.prefix"),
                    "prefix is required when claim is set. It can be set to an empty string to disable prefixing",
                ));
                None
            }
            Some(prefix) => Some(PrefixedClaim { claim, prefix }),
        },
    }
}

/// The certificates of a PEM bundle (`certificateAuthority`), with client-go's
/// `cert.NewPoolFromBytes` error when it holds none.
pub fn ca_certificates(
    pem: &str,
) -> Result<Vec<rustls_pki_types::CertificateDer<'static>>, String> {
    use rustls_pki_types::pem::PemObject;
    let certs: Vec<_> = rustls_pki_types::CertificateDer::pem_slice_iter(pem.as_bytes())
        .filter_map(Result::ok)
        .collect();
    if certs.is_empty() {
        return Err("data does not contain any valid RSA or ECDSA certificates".into());
    }
    Ok(certs)
}

// ---------------------------------------------------------------------------------------
// Keys.

/// One verification key of a JWKS.
struct VerifyKey {
    kid: Option<String>,
    alg: Option<Algorithm>,
    /// Whether the key is RSA (else EC).
    rsa: bool,
    key: DecodingKey,
}

/// The usable signing keys of one JWKS document.
pub struct KeySet {
    keys: Vec<VerifyKey>,
}

impl std::fmt::Debug for KeySet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kids: Vec<_> = self.keys.iter().map(|k| k.kid.as_deref()).collect();
        f.debug_struct("KeySet").field("kids", &kids).finish()
    }
}

impl KeySet {
    /// The RSA and EC signature keys of a JWKS document (`{"keys": [...]}`); keys of other
    /// types (symmetric ones included), encryption keys and keys that do not parse are left
    /// out. Fails when none is left.
    pub fn from_jwks(bytes: &[u8]) -> Result<Self, String> {
        #[derive(Deserialize)]
        struct Doc {
            keys: Vec<Value>,
        }
        let doc: Doc = serde_json::from_slice(bytes).map_err(|e| format!("not a JWKS: {e}"))?;
        let mut keys = Vec::new();
        for k in doc.keys {
            let Ok(j) = serde_json::from_value::<jwk::Jwk>(k) else {
                continue;
            };
            if matches!(j.common.public_key_use, Some(ref u) if *u != jwk::PublicKeyUse::Signature)
            {
                continue;
            }
            let rsa = match &j.algorithm {
                jwk::AlgorithmParameters::RSA(_) => true,
                jwk::AlgorithmParameters::EllipticCurve(_) => false,
                _ => continue,
            };
            let alg = match j.common.key_algorithm {
                None => None,
                Some(a) => match ALGORITHMS
                    .iter()
                    .find(|(_, name)| format!("{a:?}") == *name)
                {
                    Some((alg, _)) => Some(*alg),
                    None => continue,
                },
            };
            let Ok(key) = DecodingKey::from_jwk(&j) else {
                continue;
            };
            keys.push(VerifyKey {
                kid: j.common.key_id.clone(),
                alg,
                rsa,
                key,
            });
        }
        if keys.is_empty() {
            return Err("the JWKS holds no usable RSA or EC signing key".into());
        }
        Ok(Self { keys })
    }

    /// How many keys it holds.
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    /// Whether it holds none (never, for a key set that loaded).
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// Whether a key has this key id.
    pub fn has_kid(&self, kid: &str) -> bool {
        self.keys.iter().any(|k| k.kid.as_deref() == Some(kid))
    }
}

/// An issuer's current key set, replaced by the gateway's fetcher; and the fetcher's
/// doorbell for tokens of a key id the set lacks.
#[derive(Default)]
pub struct KeyStore {
    current: RwLock<Option<Arc<KeySet>>>,
    on_unknown_kid: OnceLock<Box<dyn Fn() + Send + Sync>>,
    /// How many times the set was replaced: a change drops the tokens cached as verified
    /// ([`Oidc::key_generation`], [`crate::token_cache`]).
    generation: std::sync::atomic::AtomicU64,
}

impl std::fmt::Debug for KeyStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeyStore")
            .field("current", &self.get())
            .finish_non_exhaustive()
    }
}

impl KeyStore {
    /// The current key set, if any was loaded yet.
    pub fn get(&self) -> Option<Arc<KeySet>> {
        self.current
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Replaces the key set.
    pub fn set(&self, keys: KeySet) {
        *self.current.write().unwrap_or_else(|p| p.into_inner()) = Some(Arc::new(keys));
        self.generation
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }

    /// How many times the set was replaced.
    pub fn generation(&self) -> u64 {
        self.generation.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Registers what to call when a token names a key id the set lacks (once; later calls
    /// are ignored). It must not block: the request is refused meanwhile.
    pub fn on_unknown_kid(&self, f: Box<dyn Fn() + Send + Sync>) {
        let _ = self.on_unknown_kid.set(f);
    }

    fn unknown_kid(&self) {
        if let Some(f) = self.on_unknown_kid.get() {
            f();
        }
    }
}

// ---------------------------------------------------------------------------------------
// Tokens.

/// The unverified `iss` of a compact JWT (upstream `untrustedIssuer`), with Google's legacy
/// issuer coalesced; an error when the token is not a compact JWT with a string `iss`.
pub fn untrusted_issuer(token: &str) -> Result<String, String> {
    if token.trim_start().starts_with('{') {
        return Err("token is not compact JWT".into());
    }
    let parts: Vec<&str> = token.split('.').collect();
    if parts.len() != 3 {
        return Err("malformed token".into());
    }
    let payload = RAW_URL
        .decode(parts[1])
        .map_err(|e| format!("error decoding token: {e}"))?;
    let v: Value =
        serde_json::from_slice(&payload).map_err(|e| format!("while unmarshaling token: {e}"))?;
    let iss = match v.get("iss") {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(s)) => s.clone(),
        Some(_) => return Err("while unmarshaling token: iss is not a string".into()),
    };
    if !v.is_object() {
        return Err("while unmarshaling token: the payload is not an object".into());
    }
    Ok(if iss == "accounts.google.com" {
        "https://accounts.google.com".into()
    } else {
        iss
    })
}

/// `claims.unmarshalClaim(name, &string)`.
fn string_claim(c: &Map<String, Value>, name: &str) -> Result<String, String> {
    match c.get(name) {
        None => Err("claim not present".into()),
        Some(Value::Null) => Ok(String::new()),
        Some(Value::String(s)) => Ok(s.clone()),
        Some(v) => Err(format!(
            "json: cannot unmarshal {} into Go value of type string",
            crdplane_core::gofmt::go_json_kind(v)
        )),
    }
}

/// `stringOrArray`: a list of strings (null items read as ""), or one string.
fn string_or_array(v: &Value) -> Result<Vec<String>, String> {
    match v {
        Value::Null => Ok(Vec::new()),
        Value::String(s) => Ok(vec![s.clone()]),
        Value::Array(items)
            if items
                .iter()
                .all(|i| matches!(i, Value::String(_) | Value::Null)) =>
        {
            Ok(items
                .iter()
                .map(|i| i.as_str().unwrap_or_default().to_string())
                .collect())
        }
        other => Err(format!(
            "json: cannot unmarshal {} into Go value of type string",
            crdplane_core::gofmt::go_json_kind(other)
        )),
    }
}

/// Go's `time.Time.String()` of a Unix time, in UTC.
fn go_time(secs: i64) -> String {
    chrono::DateTime::from_timestamp(secs, 0)
        .map(|t| t.format("%Y-%m-%d %H:%M:%S +0000 UTC").to_string())
        .unwrap_or_else(|| secs.to_string())
}

/// A JSON number as Unix seconds (go-oidc's `jsonTime`: an integer, or a float truncated).
fn unix_seconds(v: &Value) -> Option<i64> {
    v.as_i64().or_else(|| v.as_f64().map(|f| f as i64))
}

impl JwtAuthenticator {
    /// The issuer's key set and the fetcher's doorbell.
    pub fn keys(&self) -> &KeyStore {
        &self.keys
    }

    /// go-oidc's `IDTokenVerifier.Verify` with upstream's audience check: the verified
    /// claims, or why the token fails (without the `oidc: verify token: ` prefix).
    fn verify(&self, token: &str, keys: &KeySet, now: i64) -> Result<Map<String, Value>, String> {
        let parts: Vec<&str> = token.split('.').collect();
        let [_, payload, _] = parts.as_slice() else {
            return Err("oidc: malformed jwt: compact JWS format must have three parts".into());
        };
        let payload = RAW_URL
            .decode(payload)
            .map_err(|e| format!("oidc: malformed jwt payload: {e}"))?;
        let claims: Map<String, Value> = serde_json::from_slice(&payload)
            .map_err(|e| format!("oidc: failed to unmarshal claims: {e}"))?;
        let header =
            jsonwebtoken::decode_header(token).map_err(|e| format!("oidc: malformed jwt: {e}"))?;
        let iss = untrusted_issuer(token)?;
        if iss != self.issuer {
            return Err(format!(
                "oidc: id token issued by a different provider, expected {} got {}",
                go_quote(&self.issuer),
                go_quote(&iss)
            ));
        }
        let aud = match claims.get("aud") {
            None => Vec::new(),
            Some(v @ (Value::String(_) | Value::Array(_) | Value::Null)) => {
                string_or_array(v).map_err(|e| format!("oidc: failed to unmarshal claims: {e}"))?
            }
            Some(v) => {
                return Err(format!(
                    "oidc: failed to unmarshal claims: json: cannot unmarshal {} into Go struct field idToken.aud of type string",
                    crdplane_core::gofmt::go_json_kind(v)
                ));
            }
        };
        if !aud.iter().any(|a| self.audiences.contains(a)) {
            let got = go_list(aud.iter().map(String::as_str));
            return Err(if self.audiences.len() == 1 {
                format!(
                    "oidc: expected audience {} got {got}",
                    go_quote(&self.audiences[0])
                )
            } else {
                let mut want: Vec<&str> = self.audiences.iter().map(String::as_str).collect();
                want.sort();
                format!("oidc: expected audience in {} got {got}", go_list(want))
            });
        }
        let exp = claims.get("exp").and_then(unix_seconds);
        if exp.is_none_or(|e| e <= now) {
            return Err(format!(
                "oidc: token is expired (Token Expiry: {})",
                exp.map(go_time)
                    .unwrap_or_else(|| "0001-01-01 00:00:00 +0000 UTC".into())
            ));
        }
        if let Some(nbf) = claims.get("nbf").and_then(unix_seconds)
            && now + NBF_LEEWAY_SECONDS < nbf
        {
            return Err(format!(
                "oidc: current time {} before the nbf (not before) time: {}",
                go_time(now),
                go_time(nbf)
            ));
        }
        if !ALGORITHMS.iter().any(|(a, _)| *a == header.alg) {
            return Err(format!(
                "oidc: id token signed with unsupported algorithm, expected {} got {}",
                go_list(ALGORITHMS.iter().map(|(_, n)| *n)),
                go_quote(&format!("{:?}", header.alg))
            ));
        }
        let rsa = !matches!(header.alg, Algorithm::ES256 | Algorithm::ES384);
        if let Some(kid) = &header.kid
            && !keys.has_kid(kid)
        {
            self.keys.unknown_kid();
        }
        let mut v = Validation::new(header.alg);
        v.validate_exp = false;
        v.validate_nbf = false;
        v.validate_aud = false;
        v.required_spec_claims.clear();
        let verified = keys
            .keys
            .iter()
            .filter(|k| header.kid.is_none() || k.kid == header.kid)
            .filter(|k| k.rsa == rsa && k.alg.is_none_or(|a| a == header.alg))
            .any(|k| jsonwebtoken::decode::<Value>(token, &k.key, &v).is_ok());
        if !verified {
            return Err(
                "failed to verify signature: failed to verify id token signature".to_string(),
            );
        }
        Ok(claims)
    }

    /// Upstream's `Authenticator.AuthenticateToken` for a token of this issuer, at Unix time
    /// `now`.
    pub fn authenticate(&self, token: &str, now: i64) -> Result<UserInfo, String> {
        let Some(keys) = self.keys.get() else {
            return Err("oidc: authenticator not initialized".into());
        };
        let claims = self
            .verify(token, &keys, now)
            .map_err(|e| format!("oidc: verify token: {e}"))?;
        // Username.
        let claim = &self.username.claim;
        let mut name = string_claim(&claims, claim)
            .map_err(|e| format!("oidc: parse username claims {}: {e}", go_quote(claim)))?;
        if claim == "email"
            && let Some(v) = claims.get("email_verified")
        {
            match v {
                Value::Bool(true) => {}
                Value::Bool(false) | Value::Null => return Err("oidc: email not verified".into()),
                other => {
                    return Err(format!(
                        "oidc: parse 'email_verified' claim: json: cannot unmarshal {} into Go value of type bool",
                        crdplane_core::gofmt::go_json_kind(other)
                    ));
                }
            }
        }
        if !self.username.prefix.is_empty() {
            name = format!("{}{name}", self.username.prefix);
        }
        // Groups.
        let mut groups = Vec::new();
        if let Some(g) = &self.groups
            && let Some(v) = claims.get(&g.claim)
        {
            groups = string_or_array(v)
                .map_err(|e| format!("oidc: parse groups claim {}: {e}", go_quote(&g.claim)))?;
            if !g.prefix.is_empty() {
                for group in &mut groups {
                    group.insert_str(0, &g.prefix);
                }
            }
        }
        // UID.
        let uid = match &self.uid_claim {
            Some(c) => string_claim(&claims, c)
                .map_err(|e| format!("oidc: parse uid claim {}: {e}", go_quote(c)))?,
            None => String::new(),
        };
        // Required claims.
        for (claim, want) in &self.required_claims {
            let Some(v) = claims.get(claim) else {
                return Err(format!(
                    "oidc: required claim {claim} not present in ID token"
                ));
            };
            let got = match v {
                Value::String(s) => s.clone(),
                Value::Null => String::new(),
                other => {
                    return Err(format!(
                        "oidc: parse claim {claim}: json: cannot unmarshal {} into Go value of type string",
                        crdplane_core::gofmt::go_json_kind(other)
                    ));
                }
            };
            if got != *want {
                return Err(format!(
                    "oidc: required claim {claim} value does not match. Got = {got}, want = {want}"
                ));
            }
        }
        Ok(UserInfo {
            name,
            uid,
            groups,
            extra: Default::default(),
        })
    }
}

/// Go's `%q` of a `[]string`: `["a" "b"]`.
fn go_list<'a>(items: impl IntoIterator<Item = &'a str>) -> String {
    let quoted: Vec<String> = items.into_iter().map(go_quote).collect();
    format!("[{}]", quoted.join(" "))
}

impl Oidc {
    /// The authenticators, in file order.
    pub fn authenticators(&self) -> &[JwtAuthenticator] {
        &self.authenticators
    }

    /// A bearer token: `Ok(None)` when it is not a JWT of a configured issuer (no opinion),
    /// its user, or why it fails. `now` is the Unix time.
    pub fn authenticate_at(&self, token: &str, now: i64) -> Result<Option<UserInfo>, String> {
        let Ok(iss) = untrusted_issuer(token) else {
            return Ok(None);
        };
        match self.authenticators.iter().find(|a| a.issuer == iss) {
            None => Ok(None),
            Some(a) => a.authenticate(token, now).map(Some),
        }
    }

    /// [`Self::authenticate_at`] now.
    pub fn authenticate(&self, token: &str) -> Result<Option<UserInfo>, String> {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs() as i64)
            .unwrap_or_default();
        self.authenticate_at(token, now)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use jsonwebtoken::{EncodingKey, Header};
    use serde_json::json;

    const ISSUER: &str = "https://issuer.example.com";

    /// A signing key of the tests, with its JWK.
    struct TestKey {
        enc: EncodingKey,
        alg: Algorithm,
        kid: String,
        jwk: Value,
    }

    fn ec_key(kid: &str) -> TestKey {
        let kp = rcgen::KeyPair::generate().unwrap();
        let raw = kp.public_key_raw();
        assert_eq!((raw.len(), raw[0]), (65, 4));
        TestKey {
            enc: EncodingKey::from_ec_pem(kp.serialize_pem().as_bytes()).unwrap(),
            alg: Algorithm::ES256,
            kid: kid.into(),
            jwk: json!({"kty": "EC", "crv": "P-256", "use": "sig", "kid": kid,
                "x": RAW_URL.encode(&raw[1..33]), "y": RAW_URL.encode(&raw[33..])}),
        }
    }

    fn rsa_key(kid: &str) -> TestKey {
        use x509_parser::prelude::FromDer;
        use x509_parser::public_key::PublicKey;
        let der = rustls_pki_types::SubjectPublicKeyInfoDer::from_pem_slice(include_bytes!(
            "../testdata/rsa-test.pub"
        ))
        .unwrap();
        let (_, spki) = x509_parser::x509::SubjectPublicKeyInfo::from_der(der.as_ref()).unwrap();
        let Ok(PublicKey::RSA(rsa)) = spki.parsed() else {
            panic!("not RSA")
        };
        let strip = |b: &[u8]| {
            let i = b.iter().position(|&x| x != 0).unwrap_or(b.len());
            b[i..].to_vec()
        };
        TestKey {
            enc: EncodingKey::from_rsa_pem(include_bytes!("../testdata/rsa-test.key")).unwrap(),
            alg: Algorithm::RS256,
            kid: kid.into(),
            jwk: json!({"kty": "RSA", "alg": "RS256", "kid": kid,
                "n": RAW_URL.encode(strip(rsa.modulus)), "e": RAW_URL.encode(strip(rsa.exponent))}),
        }
    }
    use rustls_pki_types::pem::PemObject;

    fn sign(key: &TestKey, claims: &Value) -> String {
        let mut h = Header::new(key.alg);
        h.kid = Some(key.kid.clone());
        jsonwebtoken::encode(&h, claims, &key.enc).unwrap()
    }

    fn jwks(keys: &[&TestKey]) -> String {
        json!({"keys": keys.iter().map(|k| k.jwk.clone()).collect::<Vec<_>>()}).to_string()
    }

    fn now() -> i64 {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs() as i64
    }

    /// Claims of a valid token of [`ISSUER`].
    fn claims() -> Value {
        json!({"iss": ISSUER, "aud": "crdplane", "sub": "dana", "exp": now() + 600,
            "iat": now(), "nbf": now(), "groups": ["dev", "ops"], "uid": "u-1",
            "hd": "example.com"})
    }

    /// A configuration of `jwt` entries (YAML) with `keys.json` beside it.
    fn config(dir: &Path, jwt: &str, keys: &[&TestKey]) -> Result<Oidc, ConfigError> {
        std::fs::write(dir.join("keys.json"), jwks(keys)).unwrap();
        let text = format!(
            "apiVersion: apiserver.config.k8s.io/v1beta1\nkind: AuthenticationConfiguration\njwt:\n{jwt}"
        );
        parse(
            text.as_bytes(),
            dir,
            &["https://kubernetes.default.svc".into()],
        )
    }

    const BASIC: &str = "- issuer:
    url: https://issuer.example.com
    audiences: [crdplane]
    jwksFile: keys.json
  claimMappings:
    username: {claim: sub, prefix: \"oidc:\"}
    groups: {claim: groups, prefix: \"oidc:\"}
    uid: {claim: uid}
  claimValidationRules:
  - {claim: hd, requiredValue: example.com}
";

    #[test]
    fn configuration_validation_table() {
        let dir = tempfile::tempdir().unwrap();
        let k = ec_key("k1");
        let entry = |issuer: &str, rest: &str| {
            format!(
                "- issuer:\n{issuer}\n  claimMappings:\n    username: {{claim: sub, prefix: \"\"}}\n{rest}"
            )
        };
        let file =
            "    url: https://issuer.example.com\n    audiences: [a]\n    jwksFile: keys.json";
        let cases: Vec<(&str, String, Option<&str>)> = vec![
            ("basic", BASIC.into(), None),
            ("discovery, no file", entry("    url: https://i.example.com\n    audiences: [a]", ""), None),
            ("no url", entry("    audiences: [a]", ""), Some("jwt[0].issuer.url: Required value")),
            (
                "http url",
                entry("    url: http://i.example.com\n    audiences: [a]", ""),
                Some("jwt[0].issuer.url: Invalid value: \"http://i.example.com\": URL scheme must be https"),
            ),
            (
                "url with user, query and fragment",
                entry("    url: https://u:p@i.example.com/?q=1#f\n    audiences: [a]", ""),
                Some("[jwt[0].issuer.url: Invalid value: \"https://u:p@i.example.com/?q=1#f\": URL must not contain a username or password, jwt[0].issuer.url: Invalid value: \"https://u:p@i.example.com/?q=1#f\": URL must not contain a query, jwt[0].issuer.url: Invalid value: \"https://u:p@i.example.com/?q=1#f\": URL must not contain a fragment]"),
            ),
            (
                "opaque url (accepted, as by Go's url.Parse)",
                entry("    url: HTTPS:i.example.com\n    audiences: [a]", ""),
                None,
            ),
            (
                "opaque url with query and fragment",
                entry("    url: https:i.example.com?q=1#f\n    audiences: [a]", ""),
                Some("[jwt[0].issuer.url: Invalid value: \"https:i.example.com?q=1#f\": URL must not contain a query, jwt[0].issuer.url: Invalid value: \"https:i.example.com?q=1#f\": URL must not contain a fragment]"),
            ),
            (
                "service-account issuer",
                entry("    url: https://kubernetes.default.svc\n    audiences: [a]", ""),
                Some("jwt[0].issuer.url: Invalid value: \"https://kubernetes.default.svc\": URL must not overlap with disallowed issuers: [https://kubernetes.default.svc]"),
            ),
            (
                "discoveryURL equal to url",
                entry("    url: https://i.example.com\n    discoveryURL: https://i.example.com/\n    audiences: [a]", ""),
                Some("jwt[0].issuer.discoveryURL: Invalid value: \"https://i.example.com/\": discoveryURL must be different from URL"),
            ),
            (
                "no audiences",
                entry("    url: https://i.example.com", ""),
                Some("jwt[0].issuer.audiences: Required value: at least one jwt[0].issuer.audiences is required"),
            ),
            (
                "duplicate and empty audience",
                entry("    url: https://i.example.com\n    audiences: [a, a, \"\"]\n    audienceMatchPolicy: MatchAny", ""),
                Some("[jwt[0].issuer.audiences[1]: Duplicate value: \"a\", jwt[0].issuer.audiences[2]: Required value]"),
            ),
            (
                "several audiences need MatchAny",
                entry("    url: https://i.example.com\n    audiences: [a, b]", ""),
                Some("jwt[0].issuer.audienceMatchPolicy: Invalid value: \"\": audienceMatchPolicy must be MatchAny for multiple audiences"),
            ),
            (
                "one audience, another policy",
                entry("    url: https://i.example.com\n    audiences: [a]\n    audienceMatchPolicy: MatchAll", ""),
                Some("jwt[0].issuer.audienceMatchPolicy: Invalid value: \"MatchAll\": audienceMatchPolicy must be empty or MatchAny for single audience"),
            ),
            (
                "bad certificateAuthority",
                entry("    url: https://i.example.com\n    audiences: [a]\n    certificateAuthority: nope", ""),
                Some("jwt[0].issuer.certificateAuthority: Invalid value: \"<omitted>\": data does not contain any valid RSA or ECDSA certificates"),
            ),
            (
                "egress selector",
                entry("    url: https://i.example.com\n    audiences: [a]\n    egressSelectorType: cluster", ""),
                Some("jwt[0].issuer.egressSelectorType: Invalid value: \"cluster\": egress selector is not supported by crdplane"),
            ),
            (
                "missing JWKS file",
                entry("    url: https://i.example.com\n    audiences: [a]\n    jwksFile: nowhere.json", ""),
                Some("jwt[0].issuer.jwksFile: Invalid value: \"nowhere.json\": open "),
            ),
            (
                "username without prefix",
                "- issuer:\n    url: https://i.example.com\n    audiences: [a]\n  claimMappings:\n    username: {claim: sub}\n".into(),
                Some("jwt[0].claimMappings.username.prefix: Required value: prefix is required when claim is set. It can be set to an empty string to disable prefixing"),
            ),
            (
                "no username claim",
                "- issuer:\n    url: https://i.example.com\n    audiences: [a]\n".into(),
                Some("jwt[0].claimMappings.username: Required value: claim or expression is required"),
            ),
            (
                "groups without prefix",
                entry(file, "    groups: {claim: groups}\n"),
                Some("jwt[0].claimMappings.groups.prefix: Required value: prefix is required when claim is set"),
            ),
            (
                "username expression",
                "- issuer:\n    url: https://i.example.com\n    audiences: [a]\n  claimMappings:\n    username: {expression: claims.sub}\n".into(),
                Some("jwt[0].claimMappings.username.expression: Forbidden: CEL expressions are not supported by crdplane; use claim"),
            ),
            (
                "claim and expression",
                "- issuer:\n    url: https://i.example.com\n    audiences: [a]\n  claimMappings:\n    username: {claim: sub, prefix: \"\", expression: claims.sub}\n".into(),
                Some("jwt[0].claimMappings.username: Invalid value: \"\": claim and expression can't both be set"),
            ),
            (
                "uid expression",
                entry(file, "    uid: {expression: claims.sub}\n"),
                Some("jwt[0].claimMappings.uid.expression: Forbidden: CEL expressions are not supported by crdplane; use claim"),
            ),
            (
                "extra",
                entry(file, "    extra: [{key: example.com/x, valueExpression: claims.x}]\n"),
                Some("jwt[0].claimMappings.extra[0].valueExpression: Forbidden: CEL expressions are not supported by crdplane; use claim"),
            ),
            (
                "claim validation expression",
                format!("{}  claimValidationRules: [{{expression: 'claims.x == 1'}}]\n", entry(file, "")),
                Some("jwt[0].claimValidationRules[0].expression: Forbidden: CEL expressions are not supported by crdplane; use claim"),
            ),
            (
                "claim rule with a message, twice",
                format!("{}  claimValidationRules: [{{claim: hd, requiredValue: x, message: m}}, {{claim: hd}}]\n", entry(file, "")),
                Some("[jwt[0].claimValidationRules[0].message: Invalid value: \"m\": may not be specified when claim is set, jwt[0].claimValidationRules[1].claim: Duplicate value: \"hd\"]"),
            ),
            (
                "empty claim rule",
                format!("{}  claimValidationRules: [{{requiredValue: x}}]\n", entry(file, "")),
                Some("jwt[0].claimValidationRules[0]: Required value: claim or expression is required"),
            ),
            (
                "user validation rules",
                format!("{}  userValidationRules: [{{expression: 'true'}}]\n", entry(file, "")),
                Some("jwt[0].userValidationRules[0].expression: Forbidden: CEL expressions are not supported by crdplane; use claim"),
            ),
            (
                "duplicate issuer",
                format!("{}{}", entry(file, ""), entry(file, "")),
                Some("jwt[1].issuer.url: Duplicate value: \"https://issuer.example.com\""),
            ),
            (
                "unknown field",
                entry("    url: https://i.example.com\n    audiences: [a]\n    clientID: x", ""),
                Some("strict decoding error: unknown field \"jwt[0].issuer.clientID\""),
            ),
        ];
        for (case, jwt, want) in cases {
            let got = config(dir.path(), &jwt, &[&k]);
            match (got, want) {
                (Ok(o), None) => assert_eq!(o.authenticators().len(), 1, "{case}"),
                (Err(e), Some(w)) => {
                    let text = match &e {
                        ConfigError::Invalid(t) | ConfigError::Load(t) => t.clone(),
                    };
                    assert!(text.starts_with(w), "{case}: {text}");
                }
                (got, want) => panic!("{case}: got {got:?}, want {want:?}"),
            }
        }
    }

    #[test]
    fn file_level_errors() {
        let dir = tempfile::tempdir().unwrap();
        let cases: &[(&str, &str)] = &[
            ("", "empty config data"),
            (
                "kind: AuthenticationConfiguration\napiVersion: apiserver.config.k8s.io/v2\n",
                "no kind \"AuthenticationConfiguration\" is registered for version \"apiserver.config.k8s.io/v2\"",
            ),
            (
                "apiVersion: apiserver.config.k8s.io/v1\n",
                "Object 'Kind' is missing",
            ),
            (
                "apiVersion: apiserver.config.k8s.io/v1\nkind: AuthenticationConfiguration\nfoo: 1\n",
                "strict decoding error: unknown field \"foo\"",
            ),
            (
                "apiVersion: apiserver.config.k8s.io/v1\nkind: AuthenticationConfiguration\njwt: []\njwt: []\n",
                "duplicate",
            ),
        ];
        for (text, want) in cases {
            match parse(text.as_bytes(), dir.path(), &[]) {
                Err(ConfigError::Load(e)) => assert!(e.contains(want), "{text:?}: {e}"),
                other => panic!("{text:?}: {other:?}"),
            }
        }
        // JSON, every version, no authenticators at all.
        for v in VERSIONS {
            let text = format!(
                r#"{{"apiVersion": "apiserver.config.k8s.io/{v}", "kind": "AuthenticationConfiguration", "jwt": []}}"#
            );
            assert!(
                parse(text.as_bytes(), dir.path(), &[])
                    .unwrap()
                    .authenticators()
                    .is_empty()
            );
        }
        match parse(
            b"apiVersion: apiserver.config.k8s.io/v1\nkind: AuthenticationConfiguration\nanonymous: {enabled: true}\n",
            dir.path(),
            &[],
        ) {
            Err(e) => assert_eq!(
                e.to_string(),
                "invalid authentication configuration: anonymous: Forbidden: not supported by crdplane; use --anonymous-auth"
            ),
            Ok(_) => panic!("anonymous accepted"),
        }
        // `load` names the file.
        let p = dir.path().join("missing.yaml");
        let e = load(&p, &[]).unwrap_err();
        assert!(
            e.starts_with(&format!(
                "failed to load authentication configuration from file \"{}\": open ",
                p.display()
            )),
            "{e}"
        );
    }

    #[derive(Debug)]
    enum Want {
        User(&'static str, &'static [&'static str], &'static str),
        NoOpinion,
        Err(&'static str),
    }

    #[test]
    fn token_rules_table() {
        let dir = tempfile::tempdir().unwrap();
        let ec = ec_key("ec-1");
        let rsa = rsa_key("rsa-1");
        let other = ec_key("ec-1");
        let oidc = config(dir.path(), BASIC, &[&ec, &rsa]).unwrap();
        let with = |f: &dyn Fn(&mut Map<String, Value>)| {
            let mut c = claims();
            f(c.as_object_mut().unwrap());
            c
        };
        let n = now();
        let cases: Vec<(&str, String, Want)> = vec![
            (
                "ES256",
                sign(&ec, &claims()),
                Want::User("oidc:dana", &["oidc:dev", "oidc:ops"], "u-1"),
            ),
            (
                "RS256",
                sign(&rsa, &claims()),
                Want::User("oidc:dana", &["oidc:dev", "oidc:ops"], "u-1"),
            ),
            (
                "audience in a list",
                sign(
                    &ec,
                    &with(&|c| {
                        c.insert("aud".into(), json!(["x", "crdplane"]));
                    }),
                ),
                Want::User("oidc:dana", &["oidc:dev", "oidc:ops"], "u-1"),
            ),
            (
                "groups as one string",
                sign(
                    &ec,
                    &with(&|c| {
                        c.insert("groups".into(), json!("admins"));
                    }),
                ),
                Want::User("oidc:dana", &["oidc:admins"], "u-1"),
            ),
            (
                "no groups claim",
                sign(
                    &ec,
                    &with(&|c| {
                        c.remove("groups");
                    }),
                ),
                Want::User("oidc:dana", &[], "u-1"),
            ),
            (
                "nbf within the leeway",
                sign(
                    &ec,
                    &with(&|c| {
                        c.insert("nbf".into(), json!(n + 30));
                    }),
                ),
                Want::User("oidc:dana", &["oidc:dev", "oidc:ops"], "u-1"),
            ),
            (
                "another issuer: no opinion",
                sign(
                    &ec,
                    &with(&|c| {
                        c.insert("iss".into(), json!("https://elsewhere"));
                    }),
                ),
                Want::NoOpinion,
            ),
            ("not a JWT: no opinion", "abc".into(), Want::NoOpinion),
            (
                "JSON token: no opinion",
                "{\"iss\":\"https://issuer.example.com\"}".into(),
                Want::NoOpinion,
            ),
            (
                "wrong audience",
                sign(
                    &ec,
                    &with(&|c| {
                        c.insert("aud".into(), json!(["x"]));
                    }),
                ),
                Want::Err("oidc: verify token: oidc: expected audience \"crdplane\" got [\"x\"]"),
            ),
            (
                "no audience",
                sign(
                    &ec,
                    &with(&|c| {
                        c.remove("aud");
                    }),
                ),
                Want::Err("oidc: verify token: oidc: expected audience \"crdplane\" got []"),
            ),
            (
                "expired",
                sign(
                    &ec,
                    &with(&|c| {
                        c.insert("exp".into(), json!(n - 1));
                    }),
                ),
                Want::Err("oidc: verify token: oidc: token is expired (Token Expiry: "),
            ),
            (
                "no exp",
                sign(
                    &ec,
                    &with(&|c| {
                        c.remove("exp");
                    }),
                ),
                Want::Err(
                    "oidc: verify token: oidc: token is expired (Token Expiry: 0001-01-01 00:00:00 +0000 UTC)",
                ),
            ),
            (
                "nbf beyond the leeway",
                sign(
                    &ec,
                    &with(&|c| {
                        c.insert("nbf".into(), json!(n + 120));
                    }),
                ),
                Want::Err("oidc: verify token: oidc: current time "),
            ),
            (
                "signed by another key with the same kid",
                sign(&other, &claims()),
                Want::Err(
                    "oidc: verify token: failed to verify signature: failed to verify id token signature",
                ),
            ),
            (
                "tampered payload",
                {
                    let t = sign(&ec, &claims());
                    let mut p: Vec<&str> = t.split('.').collect();
                    let forged = RAW_URL.encode(
                        with(&|c| {
                            c.insert("sub".into(), json!("root"));
                        })
                        .to_string(),
                    );
                    p[1] = &forged;
                    p.join(".")
                },
                Want::Err("oidc: verify token: failed to verify signature"),
            ),
            (
                "HS256",
                {
                    let mut h = Header::new(Algorithm::HS256);
                    h.kid = Some("ec-1".into());
                    jsonwebtoken::encode(&h, &claims(), &EncodingKey::from_secret(b"s")).unwrap()
                },
                Want::Err(
                    "oidc: verify token: oidc: id token signed with unsupported algorithm, expected [\"ES256\" \"ES384\" \"PS256\" \"PS384\" \"PS512\" \"RS256\" \"RS384\" \"RS512\"] got \"HS256\"",
                ),
            ),
            (
                "no username claim",
                sign(
                    &ec,
                    &with(&|c| {
                        c.remove("sub");
                    }),
                ),
                Want::Err("oidc: parse username claims \"sub\": claim not present"),
            ),
            (
                "username not a string",
                sign(
                    &ec,
                    &with(&|c| {
                        c.insert("sub".into(), json!(7));
                    }),
                ),
                Want::Err(
                    "oidc: parse username claims \"sub\": json: cannot unmarshal number into Go value of type string",
                ),
            ),
            (
                "groups of numbers",
                sign(
                    &ec,
                    &with(&|c| {
                        c.insert("groups".into(), json!([1]));
                    }),
                ),
                Want::Err(
                    "oidc: parse groups claim \"groups\": json: cannot unmarshal array into Go value of type string",
                ),
            ),
            (
                "uid missing",
                sign(
                    &ec,
                    &with(&|c| {
                        c.remove("uid");
                    }),
                ),
                Want::Err("oidc: parse uid claim \"uid\": claim not present"),
            ),
            (
                "required claim missing",
                sign(
                    &ec,
                    &with(&|c| {
                        c.remove("hd");
                    }),
                ),
                Want::Err("oidc: required claim hd not present in ID token"),
            ),
            (
                "required claim differs",
                sign(
                    &ec,
                    &with(&|c| {
                        c.insert("hd".into(), json!("evil.com"));
                    }),
                ),
                Want::Err(
                    "oidc: required claim hd value does not match. Got = evil.com, want = example.com",
                ),
            ),
            (
                "required claim not a string",
                sign(
                    &ec,
                    &with(&|c| {
                        c.insert("hd".into(), json!(true));
                    }),
                ),
                Want::Err(
                    "oidc: parse claim hd: json: cannot unmarshal bool into Go value of type string",
                ),
            ),
        ];
        for (case, token, want) in cases {
            let got = oidc.authenticate(&token);
            match (&got, &want) {
                (Ok(Some(u)), Want::User(name, groups, uid)) => {
                    assert_eq!((u.name.as_str(), u.uid.as_str()), (*name, *uid), "{case}");
                    assert_eq!(u.groups, *groups, "{case}");
                }
                (Ok(None), Want::NoOpinion) => {}
                (Err(e), Want::Err(prefix)) => assert!(e.starts_with(prefix), "{case}: {e}"),
                _ => panic!("{case}: got {got:?}, want {want:?}"),
            }
        }
    }

    #[test]
    fn email_username_needs_a_verified_email_and_prefix_defaults() {
        let dir = tempfile::tempdir().unwrap();
        let k = ec_key("k");
        let jwt = "- issuer:
    url: https://issuer.example.com
    audiences: [a, crdplane]
    audienceMatchPolicy: MatchAny
    jwksFile: keys.json
  claimMappings:
    username: {claim: email, prefix: \"\"}
";
        let oidc = config(dir.path(), jwt, &[&k]).unwrap();
        let cases: &[(Value, Result<&str, &str>)] = &[
            (json!(null), Ok("dana@example.com")),
            (json!(true), Ok("dana@example.com")),
            (json!(false), Err("oidc: email not verified")),
            (
                json!("true"),
                Err(
                    "oidc: parse 'email_verified' claim: json: cannot unmarshal string into Go value of type bool",
                ),
            ),
        ];
        for (verified, want) in cases {
            let mut c = claims();
            c["email"] = json!("dana@example.com");
            if !verified.is_null() {
                c["email_verified"] = verified.clone();
            }
            let got = oidc.authenticate(&sign(&k, &c)).map(|u| u.unwrap().name);
            match want {
                Ok(name) => assert_eq!(got.as_deref(), Ok(*name), "{verified}"),
                Err(e) => assert_eq!(got.unwrap_err(), *e, "{verified}"),
            }
        }
        // Several audiences: any one matches; none gives upstream's sorted list.
        let mut c = claims();
        c["email"] = json!("x@example.com");
        c["aud"] = json!("b");
        assert_eq!(
            oidc.authenticate(&sign(&k, &c)).unwrap_err(),
            "oidc: verify token: oidc: expected audience in [\"a\" \"crdplane\"] got [\"b\"]"
        );
    }

    #[test]
    fn keys_arrive_later_and_unknown_kids_ring_the_doorbell() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        let dir = tempfile::tempdir().unwrap();
        let old = ec_key("old");
        let new = ec_key("new");
        let jwt = "- issuer:
    url: https://issuer.example.com
    audiences: [crdplane]
  claimMappings:
    username: {claim: sub, prefix: \"\"}
";
        let oidc = config(dir.path(), jwt, &[]).unwrap();
        let a = &oidc.authenticators()[0];
        assert_eq!(
            a.source,
            JwksSource::Discovery {
                discovery_url: "https://issuer.example.com/.well-known/openid-configuration".into(),
                certificate_authority: None
            }
        );
        let rings = Arc::new(AtomicUsize::new(0));
        let r = rings.clone();
        a.keys().on_unknown_kid(Box::new(move || {
            r.fetch_add(1, Ordering::SeqCst);
        }));
        let token = sign(&new, &claims());
        assert_eq!(
            oidc.authenticate(&token).unwrap_err(),
            "oidc: authenticator not initialized"
        );
        a.keys()
            .set(KeySet::from_jwks(jwks(&[&old]).as_bytes()).unwrap());
        assert!(oidc.authenticate(&token).is_err());
        assert_eq!(rings.load(Ordering::SeqCst), 1);
        a.keys()
            .set(KeySet::from_jwks(jwks(&[&old, &new]).as_bytes()).unwrap());
        assert_eq!(oidc.authenticate(&token).unwrap().unwrap().name, "dana");
        assert_eq!(rings.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn jwks_keeps_only_usable_signing_keys() {
        let ec = ec_key("ec");
        let mut enc = ec_key("enc").jwk;
        enc["use"] = json!("enc");
        let doc = json!({"keys": [ec.jwk, enc, {"kty": "oct", "k": "c2VjcmV0"},
            {"kty": "OKP", "crv": "X25519", "x": "abc"}, {"kty": "nope"}]});
        let ks = KeySet::from_jwks(doc.to_string().as_bytes()).unwrap();
        assert_eq!(ks.len(), 1);
        assert!(ks.has_kid("ec") && !ks.has_kid("enc"));
        assert!(KeySet::from_jwks(br#"{"keys": [{"kty": "oct", "k": "c2VjcmV0"}]}"#).is_err());
        assert!(KeySet::from_jwks(b"[]").is_err());
    }

    #[test]
    fn in_the_chain_after_the_token_file_and_service_accounts() {
        use crate::chain::Authenticators;
        let dir = tempfile::tempdir().unwrap();
        let k = ec_key("k");
        let (tokens, _) = crate::token_file::TokenFile::parse("tok,jane,1\n", "t").unwrap();
        let chain = Authenticators {
            tokens: Some(tokens),
            oidc: Some(config(dir.path(), BASIC, &[&k]).unwrap()),
            anonymous: true,
            ..Authenticators::default()
        };
        let bearer = |t: &str| format!("Bearer {t}");
        let user = chain
            .authenticate(Some(bearer(&sign(&k, &claims())).as_bytes()), None)
            .unwrap();
        assert_eq!(user.name, "oidc:dana");
        assert_eq!(
            user.groups,
            ["oidc:dev", "oidc:ops", "system:authenticated"]
        );
        assert_eq!(user.uid, "u-1");
        // Other tokens keep the chain's rules.
        assert_eq!(
            chain.authenticate(Some(b"Bearer tok"), None).unwrap().name,
            "jane"
        );
        let mut foreign = claims();
        foreign["iss"] = json!("https://elsewhere.example.com");
        for t in [sign(&k, &foreign), "nope".to_string()] {
            let e = chain
                .authenticate(Some(bearer(&t).as_bytes()), None)
                .unwrap_err();
            assert_eq!(e.reasons(), ["invalid bearer token"], "{t}");
        }
        let mut expired = claims();
        expired["exp"] = json!(now() - 5);
        let e = chain
            .authenticate(Some(bearer(&sign(&k, &expired)).as_bytes()), None)
            .unwrap_err();
        assert_eq!(e.reasons().len(), 1);
        assert!(
            e.reasons()[0].starts_with("oidc: verify token: oidc: token is expired"),
            "{e}"
        );
        // No token: anonymous, as before.
        assert!(chain.authenticate(None, None).unwrap().is_anonymous());
    }

    #[test]
    fn issuer_peek() {
        let cases: &[(&str, Result<&str, ()>)] = &[
            ("e30.eyJpc3MiOiJodHRwczovL2EifQ.c2ln", Ok("https://a")),
            (
                "e30.eyJpc3MiOiJhY2NvdW50cy5nb29nbGUuY29tIn0.x",
                Ok("https://accounts.google.com"),
            ),
            ("e30.eyJpc3MiOjF9.x", Err(())),
            ("e30.e30.x", Ok("")),
            ("e30.eyJpc3MiOiJodHRwczovL2EifQ", Err(())),
            ("e30.!!!.x", Err(())),
            (" {\"iss\":\"a\"}", Err(())),
        ];
        for (t, want) in cases {
            assert_eq!(
                untrusted_issuer(t).map_err(|_| ()).as_deref(),
                want.as_deref(),
                "{t}"
            );
        }
    }
}
