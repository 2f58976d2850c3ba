//! The authenticator chain: which authenticator decides, and what a failure is.
//!
//! Where it sits: the gateway's authentication layer (`gateway/src/filters/authentication.rs`)
//! calls [`Authenticators::authenticate_with`] once per request, with the request's first
//! `Authorization` header value and the outcome of verifying its TLS connection's client
//! certificate, which it keeps per connection ([`Authenticators::authenticate`] verifies the
//! chain itself, for callers without such a cache). On
//! `Ok(user)` it removes the `Authorization` header (upstream's `WithAuthentication` deletes it
//! after any successful authentication, anonymous included, so no later stage can use the
//! credential) and carries the user on; on `Err` it logs [`Unauthorized`]'s reasons and answers
//! 401 with [`unauthorized_status_json`].
//!
//! Upstream: kube-apiserver builds the chain in `pkg/kubeapiserver/authenticator/config.go` as
//! `union.NewFailOnError(AuthenticatedGroupAdder(union.New(x509, bearertoken, …)), anonymous)`,
//! from `staging/src/k8s.io/apiserver/pkg/authentication/request/union/union.go`,
//! `.../authentication/group/authenticated_group_adder.go`,
//! `.../authentication/request/anonymous/anonymous.go` and
//! `.../authentication/request/bearertoken/bearertoken.go`. The rules, each pinned by a test:
//!
//! 1. Authenticators are tried in order, client certificate first, then bearer token; the first
//!    that accepts the request decides, and later ones are not consulted (a valid certificate
//!    wins over an invalid token).
//! 2. An authenticator that is not configured, or that finds no credential of its kind, has no
//!    opinion. A verified certificate without CommonName also has no opinion.
//! 3. Errors (a certificate that does not verify, a bearer token no token authenticator accepts:
//!    `invalid bearer token`) are collected, and a later authenticator may still accept the
//!    request. When none does and there were errors, the request is rejected, even with anonymous
//!    requests enabled (a bad credential is never downgraded to anonymous).
//! 4. When no authenticator has an opinion, the request is anonymous ([`UserInfo::anonymous`]) if
//!    anonymous requests are enabled, and rejected otherwise.
//! 5. An accepted user gets [`ALL_AUTHENTICATED`] appended to its groups, unless its name is
//!    [`ANONYMOUS_USER`] or its groups already hold [`ALL_AUTHENTICATED`] or
//!    [`ALL_UNAUTHENTICATED`]. The anonymous user is not given it.
//! 6. The bearer parser: the header value is trimmed of white space; it is split on single spaces
//!    into at most three parts; the first must be `bearer` in any case and a second part must
//!    exist, else there is no bearer token (no opinion: `Basic …` is ignored, not an error). The
//!    token is the second part; anything after a further space is ignored (`Bearer abc def`
//!    presents `abc`). An empty second part (`Bearer  abc`, two spaces) is no token at all, and
//!    upstream then adds the warning [`BEARER_EXTRA_SPACE_WARNING`]
//!    (see [`Authenticators::bearer_warning`]).
//!
//! 7. Bearer tokens go to the token authenticators in upstream's order: the token file, the
//!    service-account verifier, then the JWT authenticators of `--authentication-config`
//!    ([`crate::oidc`]). A JWT authenticator has an opinion only on tokens of its issuer
//!    (the unverified `iss` claim), so any other token keeps rules 2–4: a token nobody has an
//!    opinion on is `invalid bearer token`; one that an authenticator refused carries that
//!    authenticator's reason instead.
//!
//! Not covered: upstream's front-proxy (request header) authenticator, the WebSocket
//! `base64url.bearer.authorization.k8s.io.` sub-protocol, webhook tokens, and per-path
//! anonymous conditions.

use std::fmt;

use rustls_pki_types::CertificateDer;

use crate::token_file::TokenFile;
use crate::user::{ALL_AUTHENTICATED, ALL_UNAUTHENTICATED, ANONYMOUS_USER, UserInfo};
use crate::x509::X509Authenticator;
#[cfg(doc)]
use crate::x509::X509Error;

/// The error text of a bearer token that no token authenticator accepts (upstream's
/// `invalidToken`).
pub const INVALID_BEARER_TOKEN: &str = "invalid bearer token";

/// The warning upstream adds to the response when the `Authorization` header has a second space
/// before the bearer token (`Bearer  abc`), which makes the token empty and ignored.
pub const BEARER_EXTRA_SPACE_WARNING: &str = "the provided Authorization header contains extra space before the bearer token, and is ignored";

/// The body upstream's `Unauthorized` handler writes with a 401: the `metav1.Status`
/// `NewUnauthorized("Unauthorized")`, encoded by the JSON serializer, whose `json.Encoder` ends it
/// with a newline. (Upstream pretty-prints it instead, with two-space indentation and no final
/// newline, when the request has `?pretty=true` or a `curl`, `Wget` or `Mozilla/5.0` user agent.)
const UNAUTHORIZED_STATUS_JSON: &str = "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\",\"message\":\"Unauthorized\",\"reason\":\"Unauthorized\",\"code\":401}\n";

/// The exact body of upstream's 401 response (see the module documentation for when it is sent),
/// newline included; the content type is `application/json`.
pub fn unauthorized_status_json() -> &'static str {
    UNAUTHORIZED_STATUS_JSON
}

/// The configured authenticators of a gateway (kube-apiserver's `--client-ca-file`,
/// `--token-auth-file` and `--anonymous-auth`).
#[derive(Debug, Clone, Default)]
pub struct Authenticators {
    /// Client-certificate authentication, when a client CA bundle is configured.
    pub x509: Option<X509Authenticator>,
    /// Bearer-token authentication from a token file, when one is configured (an empty file still
    /// counts: every presented token is then rejected).
    pub tokens: Option<TokenFile>,
    /// Service-account tokens (JWTs of our issuers), when keys are configured; tried for
    /// bearer tokens the token file does not know.
    pub service_accounts: Option<crate::service_account::Verifier>,
    /// OIDC / JWT authenticators of `--authentication-config` (see [`crate::oidc`]); tried
    /// for bearer tokens that neither the token file nor the service-account verifier
    /// accepted.
    pub oidc: Option<crate::oidc::Oidc>,
    /// Whether requests that no authenticator has an opinion on are let through as
    /// [`UserInfo::anonymous`] (upstream's default for kube-apiserver is `true`).
    pub anonymous: bool,
    /// Service-account and OIDC tokens accepted in the last seconds, so that a client's
    /// every request does not verify its token's signature again
    /// ([`crate::token_cache`]).
    pub token_cache: crate::token_cache::TokenCache,
}

/// An accepted request: its user, and the service-account token it authenticated with, if
/// any.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Authenticated {
    /// Who the request is.
    pub user: UserInfo,
    /// The service account of a service-account token.
    pub service_account: Option<crate::service_account::ServiceAccountToken>,
}

/// A rejected request: the 401 reasons, for the log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unauthorized {
    reasons: Vec<String>,
}

impl Unauthorized {
    /// The errors of the authenticators that rejected the request, in chain order; empty when no
    /// authenticator had an opinion and anonymous requests are disabled.
    pub fn reasons(&self) -> &[String] {
        &self.reasons
    }
}

impl fmt::Display for Unauthorized {
    /// Upstream's aggregate error text: one reason as is, several as `[a, b]` without repeats;
    /// with none, a sentence saying that no credential was recognised.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut distinct: Vec<&str> = Vec::new();
        for reason in &self.reasons {
            if !distinct.contains(&reason.as_str()) {
                distinct.push(reason);
            }
        }
        match distinct.as_slice() {
            [] => f.write_str(
                "no authenticator recognised a credential and anonymous requests are disabled",
            ),
            [one] => f.write_str(one),
            many => write!(f, "[{}]", many.join(", ")),
        }
    }
}

impl std::error::Error for Unauthorized {}

/// What the bearer parser makes of an `Authorization` header value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Bearer<'a> {
    /// No bearer token: no header, another scheme, or no token after `Bearer`.
    Absent,
    /// `Bearer` followed by two spaces: the token is empty and ignored, with a warning.
    ExtraSpace,
    /// The presented token.
    Token(&'a [u8]),
}

/// Upstream's bearer-token header parsing (`bearertoken.go`).
fn parse_bearer(authorization: Option<&[u8]>) -> Bearer<'_> {
    let Some(value) = authorization else {
        return Bearer::Absent;
    };
    let value = trim_white_space(value);
    if value.is_empty() {
        return Bearer::Absent;
    }
    // Go's `strings.SplitN(auth, " ", 3)`.
    let mut parts = value.splitn(3, |&b| b == b' ');
    let scheme = parts.next().unwrap_or_default();
    let Some(token) = parts.next() else {
        return Bearer::Absent;
    };
    // Go lower-cases with Unicode rules, but no non-ASCII character lower-cases into the letters
    // of "bearer", so an ASCII case-insensitive comparison is the same test.
    if !scheme.eq_ignore_ascii_case(b"bearer") {
        return Bearer::Absent;
    }
    if token.is_empty() {
        // A third part exists exactly when the second, empty, part was between two spaces.
        return if parts.next().is_some() {
            Bearer::ExtraSpace
        } else {
            Bearer::Absent
        };
    }
    Bearer::Token(token)
}

/// Go's `strings.TrimSpace` on raw header bytes: strips leading and trailing Unicode white space
/// (Rust's `char::is_whitespace` and Go's `unicode.IsSpace` are both Unicode's `White_Space`),
/// stopping at bytes that are not valid UTF-8.
fn trim_white_space(mut bytes: &[u8]) -> &[u8] {
    // The common case, `Bearer <token>`: an ASCII byte that is not white space at each end
    // (every other White_Space character is encoded in bytes ≥ 0x80), so nothing to trim and
    // no UTF-8 decoding to do.
    let plain = |b: &u8| b.is_ascii() && !matches!(b, b'\t' | b'\n' | 0x0b | 0x0c | b'\r' | b' ');
    if bytes.first().is_some_and(plain) && bytes.last().is_some_and(plain) {
        return bytes;
    }
    while let Some(len) = white_space_prefix(bytes) {
        bytes = &bytes[len..];
    }
    while let Some(len) = white_space_suffix(bytes) {
        bytes = &bytes[..bytes.len() - len];
    }
    bytes
}

/// Whether `bytes` is exactly one white-space character.
fn is_one_white_space(bytes: &[u8]) -> bool {
    let Ok(s) = std::str::from_utf8(bytes) else {
        return false;
    };
    let mut chars = s.chars();
    matches!((chars.next(), chars.next()), (Some(c), None) if c.is_whitespace())
}

/// The length of the white-space character `bytes` starts with, if it starts with one.
fn white_space_prefix(bytes: &[u8]) -> Option<usize> {
    (1..=bytes.len().min(4)).find(|&len| is_one_white_space(&bytes[..len]))
}

/// The length of the white-space character `bytes` ends with, if it ends with one.
fn white_space_suffix(bytes: &[u8]) -> Option<usize> {
    (1..=bytes.len().min(4)).find(|&len| is_one_white_space(&bytes[bytes.len() - len..]))
}

/// Upstream's `AuthenticatedGroupAdder`.
fn add_authenticated_group(mut user: UserInfo) -> UserInfo {
    let exempt = user.name == ANONYMOUS_USER
        || user
            .groups
            .iter()
            .any(|g| g == ALL_AUTHENTICATED || g == ALL_UNAUTHENTICATED);
    if !exempt {
        user.groups.push(ALL_AUTHENTICATED.to_owned());
    }
    user
}

impl Authenticators {
    /// Authenticates one request (see the module documentation for the rules).
    ///
    /// `authorization` is the raw value of the request's first `Authorization` header (what Go's
    /// `Header.Get` returns); `peer_chain` is the certificate chain the client presented in the
    /// TLS handshake (end-entity first), `None` or empty when there was none.
    pub fn authenticate(
        &self,
        authorization: Option<&[u8]>,
        peer_chain: Option<&[CertificateDer<'_>]>,
    ) -> Result<UserInfo, Unauthorized> {
        let x509 = match (&self.x509, peer_chain) {
            (Some(x509), Some(chain)) if !chain.is_empty() => match x509.authenticate(chain) {
                Ok(user) => Some(Ok(user)),
                Err(e) if e.is_no_opinion() => None,
                Err(e) => Some(Err(e.to_string())),
            },
            _ => None,
        };
        self.authenticate_with(authorization, x509)
    }

    /// [`Authenticators::authenticate`] with the client-certificate step already done by the
    /// caller, for a gateway that verifies a connection's certificate once and reuses the
    /// outcome for each of its requests. `x509` is that step's opinion: `None` for none (no
    /// x509 authenticator configured, no certificate presented, or
    /// [`X509Error::is_no_opinion`]), `Some(Ok(user))` for the user of a verified certificate
    /// (as [`X509Authenticator::authenticate`] returns it; `system:authenticated` is added here),
    /// `Some(Err(reason))` for a certificate that failed. The rest of the chain is as in
    /// [`Authenticators::authenticate`]; the [`Authenticators::x509`] field is not consulted.
    pub fn authenticate_with(
        &self,
        authorization: Option<&[u8]>,
        x509: Option<Result<UserInfo, String>>,
    ) -> Result<UserInfo, Unauthorized> {
        self.authenticate_full(authorization, x509).map(|a| a.user)
    }

    /// [`Self::authenticate_with`], also saying which service account a service-account
    /// token named (the caller checks its tenant and that it still exists).
    pub fn authenticate_full(
        &self,
        authorization: Option<&[u8]>,
        x509: Option<Result<UserInfo, String>>,
    ) -> Result<Authenticated, Unauthorized> {
        let mut reasons = Vec::new();
        let mut service_account = None;
        // Upstream's `union.New(x509, bearertoken)`: the first user, collecting errors on the
        // way.
        let mut accepted = match x509 {
            Some(Ok(user)) => Some(user),
            Some(Err(reason)) => {
                reasons.push(reason);
                None
            }
            None => None,
        };
        // Bearer tokens: the token file, then service-account JWTs, then the JWT
        // authenticators (upstream's union of token authenticators: the first that accepts
        // the token decides; the errors of those that refused it are the reasons; a token
        // none of them has an opinion on is `invalid bearer token`).
        if accepted.is_none()
            && (self.tokens.is_some() || self.service_accounts.is_some() || self.oidc.is_some())
            && let Bearer::Token(token) = parse_bearer(authorization)
        {
            // One digest for the token file's lookup and the token cache's.
            let d = crate::token_file::digest(token);
            if let Some(user) = self.tokens.as_ref().and_then(|t| t.authenticate_digest(&d)) {
                accepted = Some(user);
            } else if self.service_accounts.is_none() && self.oidc.is_none() {
                reasons.push(INVALID_BEARER_TOKEN.to_owned());
            } else if let Some(hit) = self.token_cache.get(&d, self.key_generation()) {
                accepted = Some(hit.user);
                service_account = hit.service_account;
            } else {
                // Read before verifying: a key set replaced meanwhile leaves the entry stale.
                let generation = self.key_generation();
                let text = std::str::from_utf8(token).ok();
                let mut token_errors = Vec::new();
                if let (Some(v), Some(t)) = (&self.service_accounts, text) {
                    match v.verify(t) {
                        Ok(Some(sa)) => {
                            accepted = Some(sa.user.clone());
                            service_account = Some(sa);
                        }
                        Ok(None) => {}
                        Err(e) => token_errors.push(e),
                    }
                }
                if accepted.is_none()
                    && let (Some(o), Some(t)) = (&self.oidc, text)
                {
                    match o.authenticate(t) {
                        Ok(Some(user)) => accepted = Some(user),
                        Ok(None) => {}
                        Err(e) => token_errors.push(e),
                    }
                }
                match &accepted {
                    Some(user) => self.token_cache.insert(
                        d,
                        generation,
                        token,
                        &crate::token_cache::Verified {
                            user: user.clone(),
                            service_account: service_account.clone(),
                        },
                    ),
                    None if token_errors.is_empty() => {
                        reasons.push(INVALID_BEARER_TOKEN.to_owned());
                    }
                    None => reasons.extend(token_errors),
                }
            }
        }
        // `AuthenticatedGroupAdder` around the union, then `union.NewFailOnError(…, anonymous)`.
        if let Some(user) = accepted {
            return Ok(Authenticated {
                user: add_authenticated_group(user),
                service_account,
            });
        }
        if reasons.is_empty() && self.anonymous {
            return Ok(Authenticated {
                user: UserInfo::anonymous(),
                service_account: None,
            });
        }
        Err(Unauthorized { reasons })
    }

    /// The generation of the JWT issuers' key sets the token cache keys its entries by (the
    /// service-account keys are fixed at start-up).
    fn key_generation(&self) -> u64 {
        self.oidc
            .as_ref()
            .map_or(0, crate::oidc::Oidc::key_generation)
    }

    /// The warning upstream's bearer-token authenticator adds to the response (a `Warning: 299`
    /// header) for this `Authorization` value: [`BEARER_EXTRA_SPACE_WARNING`] when a token
    /// authenticator is configured and the token follows `Bearer` after two spaces, else `None`.
    pub fn bearer_warning(&self, authorization: Option<&[u8]>) -> Option<&'static str> {
        ((self.tokens.is_some() || self.service_accounts.is_some())
            && parse_bearer(authorization) == Bearer::ExtraSpace)
            .then_some(BEARER_EXTRA_SPACE_WARNING)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::user::CREDENTIAL_ID_KEY;
    use crate::x509::tests::TestCa;

    #[test]
    fn bearer_parser_table() {
        use Bearer::*;
        let cases: &[(Option<&[u8]>, Bearer<'_>)] = &[
            (None, Absent),
            (Some(b""), Absent),
            (Some(b"   "), Absent),
            (Some(b"Bearer abc"), Token(b"abc")),
            (Some(b"bearer abc"), Token(b"abc")),
            (Some(b"BEARER abc"), Token(b"abc")),
            (Some(b"BeArEr abc"), Token(b"abc")),
            // Surrounding white space is trimmed, Unicode white space included.
            (Some(b"  Bearer abc \t\r\n"), Token(b"abc")),
            (Some("\u{a0}Bearer abc\u{2003}".as_bytes()), Token(b"abc")),
            // Only the second space-separated part is the token.
            (Some(b"Bearer abc def"), Token(b"abc")),
            (Some(b"Bearer abc  def"), Token(b"abc")),
            // A tab is not a separator: it stays in the scheme or the token.
            (Some(b"Bearer\tabc"), Absent),
            (Some(b"Bearer abc\tdef"), Token(b"abc\tdef")),
            // No token.
            (Some(b"Bearer"), Absent),
            (Some(b"Bearer "), Absent),
            (Some(b"Bearer    "), Absent),
            // Two spaces: the token part is empty, the request is not a bearer one.
            (Some(b"Bearer  abc"), ExtraSpace),
            (Some(b"Bearer   abc"), ExtraSpace),
            // Other schemes are not bearer tokens.
            (Some(b"Basic YWxhZGRpbjpvcGVuc2VzYW1l"), Absent),
            (Some(b"Bearerabc"), Absent),
            (Some(b"Token abc"), Absent),
            (Some(b"abc"), Absent),
            // Bytes that are not UTF-8 are part of the token, and stop trimming.
            (Some(b"Bearer a\xffb"), Token(b"a\xffb")),
            (Some(b"Bearer ab\xff "), Token(b"ab\xff")),
        ];
        for (value, want) in cases {
            assert_eq!(
                parse_bearer(*value),
                *want,
                "{:?}",
                value.map(String::from_utf8_lossy)
            );
        }
    }

    #[test]
    fn trim_white_space_table() {
        let cases: &[(&[u8], &[u8])] = &[
            (b"", b""),
            (b" \t\n\x0b\x0c\r", b""),
            (b" a b ", b"a b"),
            ("\u{85}a\u{3000}".as_bytes(), b"a"),
            (b"\xff ", b"\xff"),
            (b" \xe2\x80", b"\xe2\x80"),
            // U+200B ZERO WIDTH SPACE is not White_Space, in Go or in Rust.
            ("\u{200b}a".as_bytes(), "\u{200b}a".as_bytes()),
            (b"Bearer abc", b"Bearer abc"),
            (b"Bearer abc\x0b", b"Bearer abc"),
            ("Bearer abc\u{85}".as_bytes(), b"Bearer abc"),
        ];
        for (input, want) in cases {
            assert_eq!(trim_white_space(input), *want, "{input:?}");
        }
    }

    #[test]
    fn authenticated_group_adder_table() {
        let cases: &[(&str, &[&str], &[&str])] = &[
            ("jane", &[], &["system:authenticated"]),
            (
                "jane",
                &["dev", "ops"],
                &["dev", "ops", "system:authenticated"],
            ),
            ("jane", &[""], &["", "system:authenticated"]),
            // Already present: not added again, order kept.
            (
                "jane",
                &["system:authenticated", "dev"],
                &["system:authenticated", "dev"],
            ),
            // A user in system:unauthenticated is not given system:authenticated.
            (
                "jane",
                &["system:unauthenticated"],
                &["system:unauthenticated"],
            ),
            // Neither is a user named system:anonymous.
            ("system:anonymous", &["dev"], &["dev"]),
            ("system:anonymous", &[], &[]),
        ];
        for (name, groups, want) in cases {
            let user = UserInfo {
                name: (*name).to_owned(),
                groups: groups.iter().map(|g| (*g).to_owned()).collect(),
                ..UserInfo::default()
            };
            assert_eq!(
                add_authenticated_group(user).groups,
                *want,
                "{name} {groups:?}"
            );
        }
    }

    #[test]
    fn unauthorized_body_is_upstreams() {
        assert_eq!(
            unauthorized_status_json(),
            "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\",\
             \"message\":\"Unauthorized\",\"reason\":\"Unauthorized\",\"code\":401}\n"
        );
    }

    #[test]
    fn unauthorized_display_is_upstreams_aggregate() {
        let u = |r: &[&str]| Unauthorized {
            reasons: r.iter().map(|s| (*s).to_owned()).collect(),
        };
        assert_eq!(u(&["a"]).to_string(), "a");
        assert_eq!(u(&["a", "b"]).to_string(), "[a, b]");
        assert_eq!(u(&["a", "a"]).to_string(), "a");
        assert_eq!(u(&["a", "b", "a"]).to_string(), "[a, b]");
        assert!(!u(&[]).to_string().is_empty());
        assert_eq!(u(&["x", "y"]).reasons(), ["x", "y"]);
    }

    /// What a chain outcome should be.
    #[derive(Debug)]
    enum Want {
        /// A user with this name and these groups.
        User(&'static str, &'static [&'static str]),
        /// The anonymous user.
        Anonymous,
        /// A 401 with these reasons (each a prefix of the actual reason, in order).
        Rejected(&'static [&'static str]),
    }

    /// The start of a certificate verification failure.
    const VERIFY_FAILED: &str = "verifying certificate SN=";

    #[test]
    fn chain_rules_table() {
        let ca = TestCa::new("client-ca");
        let other = TestCa::new("other-ca");
        let x509 = X509Authenticator::from_pem(ca.pem.as_bytes()).unwrap();
        let (tokens, _) = TokenFile::parse(
            "good,tokenuser,1,\"tg1,tg2\"\nmaster,admin,2,system:masters\nanon,system:anonymous,3,x\n",
            "tokens.csv",
        )
        .unwrap();

        let jane = vec![ca.client("jane", &["dev", "ops"])];
        let foreign = vec![other.client("mallory", &["dev"])];
        let no_cn = vec![ca.client("", &["dev"])];

        let config = |x: bool, t: bool, anonymous: bool| Authenticators {
            x509: x.then(|| x509.clone()),
            tokens: t.then(|| tokens.clone()),
            service_accounts: None,
            oidc: None,
            anonymous,
            token_cache: Default::default(),
        };

        #[allow(clippy::type_complexity)]
        let cases: Vec<(
            &str,
            Authenticators,
            Option<&[u8]>,
            Option<&[CertificateDer<'static>]>,
            Want,
        )> = vec![
            // Nothing presented.
            (
                "nothing, anonymous on",
                config(true, true, true),
                None,
                None,
                Want::Anonymous,
            ),
            (
                "nothing, anonymous off",
                config(true, true, false),
                None,
                None,
                Want::Rejected(&[]),
            ),
            (
                "empty chain is no certificate",
                config(true, true, true),
                None,
                Some(&[]),
                Want::Anonymous,
            ),
            (
                "nothing configured, anonymous on",
                config(false, false, true),
                None,
                None,
                Want::Anonymous,
            ),
            (
                "nothing configured, anonymous off",
                config(false, false, false),
                None,
                None,
                Want::Rejected(&[]),
            ),
            // Client certificates.
            (
                "valid certificate",
                config(true, true, false),
                None,
                Some(&jane),
                Want::User("jane", &["dev", "ops", "system:authenticated"]),
            ),
            (
                "bad certificate is rejected even with anonymous on",
                config(true, true, true),
                None,
                Some(&foreign),
                Want::Rejected(&[VERIFY_FAILED]),
            ),
            (
                "certificate without CommonName has no opinion: anonymous",
                config(true, true, true),
                None,
                Some(&no_cn),
                Want::Anonymous,
            ),
            (
                "certificate without CommonName has no opinion: rejected without reasons",
                config(true, true, false),
                None,
                Some(&no_cn),
                Want::Rejected(&[]),
            ),
            (
                "certificate without x509 configured is ignored",
                config(false, true, true),
                None,
                Some(&foreign),
                Want::Anonymous,
            ),
            // Bearer tokens.
            (
                "valid token",
                config(true, true, false),
                Some(b"Bearer good"),
                None,
                Want::User("tokenuser", &["tg1", "tg2", "system:authenticated"]),
            ),
            (
                "scheme is case-insensitive",
                config(true, true, false),
                Some(b"bEARER good"),
                None,
                Want::User("tokenuser", &["tg1", "tg2", "system:authenticated"]),
            ),
            (
                "text after the token is ignored",
                config(true, true, false),
                Some(b"Bearer good trailing"),
                None,
                Want::User("tokenuser", &["tg1", "tg2", "system:authenticated"]),
            ),
            (
                "token user in system:masters",
                config(true, true, false),
                Some(b"Bearer master"),
                None,
                Want::User("admin", &["system:masters", "system:authenticated"]),
            ),
            (
                "token user named system:anonymous gets no system:authenticated",
                config(true, true, false),
                Some(b"Bearer anon"),
                None,
                Want::User("system:anonymous", &["x"]),
            ),
            (
                "unknown token is rejected even with anonymous on",
                config(true, true, true),
                Some(b"Bearer nope"),
                None,
                Want::Rejected(&["invalid bearer token"]),
            ),
            (
                "tokens match exactly",
                config(true, true, true),
                Some(b"Bearer GOOD"),
                None,
                Want::Rejected(&["invalid bearer token"]),
            ),
            (
                "empty token file rejects every token",
                Authenticators {
                    x509: None,
                    tokens: Some(TokenFile::default()),
                    service_accounts: None,
                    oidc: None,
                    anonymous: true,
                    token_cache: Default::default(),
                },
                Some(b"Bearer good"),
                None,
                Want::Rejected(&["invalid bearer token"]),
            ),
            (
                "two spaces: no token, anonymous",
                config(true, true, true),
                Some(b"Bearer  good"),
                None,
                Want::Anonymous,
            ),
            (
                "`Bearer` alone: no token, anonymous",
                config(true, true, true),
                Some(b"Bearer"),
                None,
                Want::Anonymous,
            ),
            (
                "`Bearer` alone, anonymous off",
                config(true, true, false),
                Some(b"Bearer "),
                None,
                Want::Rejected(&[]),
            ),
            (
                "other scheme is ignored: anonymous",
                config(true, true, true),
                Some(b"Basic Zm9vOmJhcg=="),
                None,
                Want::Anonymous,
            ),
            (
                "other scheme is ignored: rejected without reasons",
                config(true, true, false),
                Some(b"Basic Zm9vOmJhcg=="),
                None,
                Want::Rejected(&[]),
            ),
            (
                "bearer token without a token file is ignored",
                config(true, false, true),
                Some(b"Bearer nope"),
                None,
                Want::Anonymous,
            ),
            (
                "bearer token without a token file, anonymous off",
                config(true, false, false),
                Some(b"Bearer good"),
                None,
                Want::Rejected(&[]),
            ),
            // Order and union.
            (
                "certificate first: a valid certificate wins over a valid token",
                config(true, true, false),
                Some(b"Bearer good"),
                Some(&jane),
                Want::User("jane", &["dev", "ops", "system:authenticated"]),
            ),
            (
                "a valid certificate wins over an invalid token",
                config(true, true, false),
                Some(b"Bearer nope"),
                Some(&jane),
                Want::User("jane", &["dev", "ops", "system:authenticated"]),
            ),
            (
                "a bad certificate, then a valid token: the token's user",
                config(true, true, false),
                Some(b"Bearer good"),
                Some(&foreign),
                Want::User("tokenuser", &["tg1", "tg2", "system:authenticated"]),
            ),
            (
                "a certificate without CommonName, then a valid token",
                config(true, true, false),
                Some(b"Bearer good"),
                Some(&no_cn),
                Want::User("tokenuser", &["tg1", "tg2", "system:authenticated"]),
            ),
            (
                "a bad certificate and a bad token: both reasons, in order",
                config(true, true, true),
                Some(b"Bearer nope"),
                Some(&foreign),
                Want::Rejected(&[VERIFY_FAILED, "invalid bearer token"]),
            ),
            (
                "a bad certificate and a non-bearer header",
                config(true, true, true),
                Some(b"Basic Zm9vOmJhcg=="),
                Some(&foreign),
                Want::Rejected(&[VERIFY_FAILED]),
            ),
        ];

        for (case, auth, authorization, chain, want) in cases {
            let got = auth.authenticate(authorization, chain);
            match (&got, &want) {
                (Ok(user), Want::User(name, groups)) => {
                    assert_eq!(user.name, *name, "{case}");
                    assert_eq!(user.groups, *groups, "{case}");
                    assert!(
                        !user.is_anonymous() || *name == "system:anonymous",
                        "{case}"
                    );
                }
                (Ok(user), Want::Anonymous) => {
                    assert_eq!(*user, UserInfo::anonymous(), "{case}");
                }
                (Err(rejected), Want::Rejected(prefixes)) => {
                    assert_eq!(
                        rejected.reasons().len(),
                        prefixes.len(),
                        "{case}: {rejected}"
                    );
                    for (reason, prefix) in rejected.reasons().iter().zip(prefixes.iter()) {
                        assert!(reason.starts_with(prefix), "{case}: {reason:?}");
                    }
                }
                _ => panic!("{case}: got {got:?}, want {want:?}"),
            }
        }
    }

    #[test]
    fn certificate_user_keeps_its_extra_and_uid() {
        let ca = TestCa::new("client-ca");
        let auth = Authenticators {
            x509: Some(X509Authenticator::from_pem(ca.pem.as_bytes()).unwrap()),
            tokens: None,
            service_accounts: None,
            oidc: None,
            anonymous: false,
            token_cache: Default::default(),
        };
        let cert = ca.client("jane", &["dev"]);
        let user = auth
            .authenticate(None, Some(std::slice::from_ref(&cert)))
            .unwrap();
        assert_eq!(user.uid, "");
        assert_eq!(user.extra.len(), 1);
        assert!(user.extra[CREDENTIAL_ID_KEY][0].starts_with("X509SHA256="));
    }

    #[test]
    fn authenticate_with_precomputed_x509_outcome() {
        let (tokens, _) = TokenFile::parse("good,tokenuser,1\n", "t").unwrap();
        let auth = Authenticators {
            x509: None,
            tokens: Some(tokens),
            service_accounts: None,
            oidc: None,
            anonymous: true,
            token_cache: Default::default(),
        };
        let jane = || UserInfo {
            name: "jane".into(),
            groups: vec!["dev".into()],
            ..UserInfo::default()
        };
        let failed = || Err("verifying certificate failed".to_owned());
        type Outcome = Option<Result<UserInfo, String>>;
        let cases: Vec<(&str, Option<&[u8]>, Outcome, Want)> = vec![
            ("no opinion, nothing else", None, None, Want::Anonymous),
            (
                "accepted certificate",
                None,
                Some(Ok(jane())),
                Want::User("jane", &["dev", "system:authenticated"]),
            ),
            (
                "accepted certificate wins over a bad token",
                Some(b"Bearer nope"),
                Some(Ok(jane())),
                Want::User("jane", &["dev", "system:authenticated"]),
            ),
            (
                "failed certificate: rejected despite anonymous",
                None,
                Some(failed()),
                Want::Rejected(&["verifying certificate failed"]),
            ),
            (
                "failed certificate, then a valid token",
                Some(b"Bearer good"),
                Some(failed()),
                Want::User("tokenuser", &["system:authenticated"]),
            ),
            (
                "failed certificate and a bad token",
                Some(b"Bearer nope"),
                Some(failed()),
                Want::Rejected(&["verifying certificate failed", "invalid bearer token"]),
            ),
        ];
        for (case, authorization, x509, want) in cases {
            let got = auth.authenticate_with(authorization, x509);
            match (&got, &want) {
                (Ok(user), Want::User(name, groups)) => {
                    assert_eq!(user.name, *name, "{case}");
                    assert_eq!(user.groups, *groups, "{case}");
                }
                (Ok(user), Want::Anonymous) => assert_eq!(*user, UserInfo::anonymous(), "{case}"),
                (Err(rejected), Want::Rejected(reasons)) => {
                    assert_eq!(rejected.reasons(), *reasons, "{case}")
                }
                _ => panic!("{case}: got {got:?}, want {want:?}"),
            }
        }
    }

    #[test]
    fn bearer_warning_table() {
        let (tokens, _) = TokenFile::parse("good,u,1\n", "t").unwrap();
        let with_tokens = Authenticators {
            x509: None,
            tokens: Some(tokens),
            service_accounts: None,
            oidc: None,
            anonymous: true,
            token_cache: Default::default(),
        };
        let without_tokens = Authenticators {
            service_accounts: None,
            oidc: None,
            anonymous: true,
            ..Authenticators::default()
        };
        let warn = Some(BEARER_EXTRA_SPACE_WARNING);
        /// (header value, warning with a token file, warning without one)
        type Case<'a> = (Option<&'a [u8]>, Option<&'a str>, Option<&'a str>);
        let cases: &[Case<'_>] = &[
            (Some(b"Bearer  good"), warn, None),
            (Some(b" bearer   good "), warn, None),
            (Some(b"Bearer good"), None, None),
            (Some(b"Bearer "), None, None),
            (Some(b"Basic  abc"), None, None),
            (None, None, None),
        ];
        for (value, want_with, want_without) in cases {
            assert_eq!(with_tokens.bearer_warning(*value), *want_with, "{value:?}");
            assert_eq!(
                without_tokens.bearer_warning(*value),
                *want_without,
                "{value:?}"
            );
        }
        // The request itself is anonymous: the empty token is ignored, not rejected.
        assert_eq!(
            with_tokens.authenticate(Some(b"Bearer  good"), None),
            Ok(UserInfo::anonymous())
        );
    }

    /// A service-account token accepted once is accepted again from the token cache without
    /// its signature being checked (the verifier swapped for one of another key would refuse
    /// it); with a zero TTL nothing is kept.
    #[test]
    fn accepted_service_account_tokens_are_served_from_the_cache() {
        use crate::service_account::{DEFAULT_ISSUER, Signer, Verifier};
        let key = || rcgen::KeyPair::generate().unwrap();
        let (signing, other) = (key(), key());
        let aud = vec![DEFAULT_ISSUER.to_string()];
        let signer = Signer::from_pem(&signing.serialize_pem(), DEFAULT_ISSUER).unwrap();
        let verifier =
            |k: &rcgen::KeyPair| Verifier::from_pems(&[k.public_key_pem()], &aud, &aud).unwrap();
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs() as i64;
        let (token, _) = signer
            .issue("acme", "ns1", "bot", "uid-1", &aud, now, 3600, "j1")
            .unwrap();
        let header = format!("Bearer {token}");
        for (ttl, served_from_cache) in [
            (crate::token_cache::SUCCESS_TTL, true),
            (std::time::Duration::ZERO, false),
        ] {
            let chain = Authenticators {
                service_accounts: Some(verifier(&signing)),
                token_cache: crate::token_cache::TokenCache::new(ttl),
                ..Authenticators::default()
            };
            let first = chain
                .authenticate_full(Some(header.as_bytes()), None)
                .unwrap();
            assert_eq!(first.user.name, "system:serviceaccount:ns1:bot");
            assert_eq!(first.service_account.as_ref().unwrap().uid, "uid-1");
            let rotated = Authenticators {
                service_accounts: Some(verifier(&other)),
                ..chain.clone()
            };
            let again = rotated.authenticate_full(Some(header.as_bytes()), None);
            if served_from_cache {
                assert_eq!(
                    again.unwrap(),
                    first,
                    "the same user and account, from the cache"
                );
            } else {
                assert!(again.is_err(), "verified again with a zero TTL");
            }
            // Refusals are never cached.
            assert!(
                chain
                    .authenticate_full(Some(b"Bearer not-a-token"), None)
                    .is_err()
            );
        }
    }
}
