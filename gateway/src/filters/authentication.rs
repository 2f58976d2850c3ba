//! Authentication: sixth layer of the edge stack (`stack.rs`), after the limits and before
//! tenant access, where upstream's `WithAuthentication`
//! (staging/src/k8s.io/apiserver/pkg/endpoints/filters/authentication.go) sits.
//!
//! It decides who the request is, once: the authenticator chain of `crdplane-auth`
//! (x509 client certificate, then a bearer token from `--token-auth-file`, a
//! service-account token or an OIDC token of `--authentication-config` — whose issuers'
//! keys `oidc_keys.rs` keeps fresh in the background, so no request waits on the network —
//! then anonymous when `--anonymous-auth` allows it) turns the connection's client certificate and the
//! `Authorization` header into a [`UserInfo`], which goes into the request's extensions
//! for the layers after it (tenant access, authorization, the watch limits, the call
//! context of every backend call). As upstream, the `Authorization` header is removed once
//! it was used, and a request whose credentials fail gets upstream's 401 Status
//! (`Unauthorized`), whatever `--anonymous-auth` says. A bearer token after two spaces
//! (`Bearer  abc`) is no token at all; as upstream, the answer then carries the warning
//! `the provided Authorization header contains extra space before the bearer token, and is
//! ignored`.
//!
//! A client certificate is verified once per connection (the handshake accepted it
//! unverified, see `crdplane_transport::tls`) and the outcome kept with the connection
//! ([`PeerCertificates`]); a connection that outlives its certificate's `notAfter` gets
//! 401s from then on, as upstream, which verifies on every request.
//!
//! Impersonation is the next layer (`impersonation.rs`).

use crate::http::{Body, Payload};
use crate::request_info::RequestInfo;
use crdplane_auth::chain::Authenticators;
use crdplane_auth::user::UserInfo;
use http::{Request, Response, StatusCode, header};
use std::convert::Infallible;
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll};
use std::time::SystemTime;

/// What verifying a connection's certificate gave: the user and when the certificate
/// expires, or why it failed.
type Verified = Result<(UserInfo, Option<SystemTime>), String>;

/// The client certificate chain of a TLS connection (leaf first), put into each request's
/// extensions by the accept loop, with the outcome of its verification, computed by the
/// first request that needs it.
pub struct PeerCertificates {
    chain: Vec<rustls::pki_types::CertificateDer<'static>>,
    /// None: the certificate names no one (no CommonName), which upstream treats as no
    /// opinion, leaving the request to the next authenticators.
    verified: OnceLock<Option<Verified>>,
}

impl PeerCertificates {
    /// The chain a client presented (leaf first).
    pub fn new(chain: Vec<rustls::pki_types::CertificateDer<'static>>) -> Self {
        Self {
            chain,
            verified: OnceLock::new(),
        }
    }
}

/// The layer of [`Authentication`].
#[derive(Clone)]
pub struct AuthenticationLayer {
    authn: Arc<Authenticators>,
    accounts: Option<Arc<crate::context::Ctx>>,
    audit: Option<Arc<crate::audit::Auditor>>,
}

impl AuthenticationLayer {
    /// Authenticates with `authn`; service-account tokens are checked against the service
    /// accounts of `accounts` (None: every service-account token is refused).
    pub fn new(authn: Arc<Authenticators>, accounts: Option<Arc<crate::context::Ctx>>) -> Self {
        Self {
            authn,
            accounts,
            audit: None,
        }
    }

    /// Records refused requests in `audit` (upstream `WithFailedAuthenticationAudit`).
    pub fn auditing(mut self, audit: Option<Arc<crate::audit::Auditor>>) -> Self {
        self.audit = audit;
        self
    }
}

impl<S> tower::Layer<S> for AuthenticationLayer {
    type Service = Authentication<S>;
    fn layer(&self, inner: S) -> Authentication<S> {
        Authentication {
            inner,
            authn: self.authn.clone(),
            accounts: self.accounts.clone(),
            audit: self.audit.clone(),
        }
    }
}

/// Authenticates every request (see the module docs).
#[derive(Clone)]
pub struct Authentication<S> {
    inner: S,
    authn: Arc<Authenticators>,
    accounts: Option<Arc<crate::context::Ctx>>,
    audit: Option<Arc<crate::audit::Auditor>>,
}

/// upstream `getAuthMethods`: which credentials a refused request tried.
fn auth_methods<B>(req: &Request<B>) -> String {
    let mut m: Vec<&str> = Vec::new();
    let auth = req
        .headers()
        .get(http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .trim();
    let mut parts = auth.split(' ');
    let scheme = parts.next().unwrap_or("");
    if scheme.eq_ignore_ascii_case("basic") {
        m.push("basic");
    }
    if parts.next().is_some() && scheme.eq_ignore_ascii_case("bearer") {
        m.push("bearer");
    }
    if req.uri().query().is_some_and(|q| {
        q.split('&')
            .any(|p| p.starts_with("access_token=") && p.len() > 13)
    }) {
        m.push("access_token");
    }
    if req.extensions().get::<Arc<PeerCertificates>>().is_some() {
        m.push("x509");
    }
    if m.is_empty() {
        "Authentication failed, no credentials provided".into()
    } else {
        format!("Authentication failed, attempted: {}", m.join(", "))
    }
}

/// The authenticated user of a request, in its extensions.
pub type User = Arc<UserInfo>;

/// `system:anonymous`, shared by the requests that carry no credentials.
fn anonymous() -> &'static User {
    static ANON: std::sync::OnceLock<User> = std::sync::OnceLock::new();
    ANON.get_or_init(|| Arc::new(UserInfo::anonymous()))
}

/// Upstream's 401 (`responsewriters.Unauthorized` → `apierrors.NewUnauthorized`).
pub fn unauthorized() -> Response<Body> {
    let mut r = crate::http::json_response(
        StatusCode::UNAUTHORIZED,
        crdplane_auth::chain::unauthorized_status_json(),
    );
    r.headers_mut().insert(
        header::CACHE_CONTROL,
        http::HeaderValue::from_static("no-cache, private"),
    );
    r
}

impl Authentication<()> {
    /// Who `req` is (and the service account of its token, if it used one), or why it is
    /// not anyone.
    fn identify<B>(
        authn: &Authenticators,
        req: &Request<B>,
    ) -> Result<crdplane_auth::chain::Authenticated, String> {
        let x509 = match (req.extensions().get::<Arc<PeerCertificates>>(), &authn.x509) {
            (Some(p), Some(x)) => {
                let v = p.verified.get_or_init(|| match x.authenticate(&p.chain) {
                    Ok(u) => Some(Ok((u, crdplane_auth::x509::not_after(&p.chain[0])))),
                    Err(e) if e.is_no_opinion() => None,
                    Err(e) => Some(Err(e.to_string())),
                });
                v.as_ref().map(|v| match v {
                    Ok((_, Some(end))) if SystemTime::now() > *end => {
                        Err("x509: certificate has expired or is not yet valid".to_string())
                    }
                    Ok((u, _)) => Ok(u.clone()),
                    Err(e) => Err(e.clone()),
                })
            }
            _ => None,
        };
        let authorization = req
            .headers()
            .get(header::AUTHORIZATION)
            .map(|v| v.as_bytes());
        authn
            .authenticate_full(authorization, x509)
            .map_err(|e| e.to_string())
    }
}

pin_project_lite::pin_project! {
    /// The answer of [`Authentication`]: the inner service's, or the 401; either with
    /// upstream's warning about an ignored bearer token when there was one.
    // pin-project-lite takes no docs on variant fields.
    #[allow(missing_docs)]
    #[project = AnswerProj]
    pub enum Answer<F> {
        /// The request went on: the inner service's answer, and a warning to add to it.
        Inner {
            #[pin]
            fut: F,
            warning: Option<&'static str>,
        },
        /// The request was refused: the 401, until it is taken.
        Refused { resp: Option<Response<Body>> },
        /// A service-account token: its account is being looked up first.
        Checking {
            #[pin]
            fut: futures::future::BoxFuture<'static, Result<Response<Body>, Infallible>>,
        },
    }
}

impl<F> Future for Answer<F>
where
    F: Future<Output = Result<Response<Body>, Infallible>>,
{
    type Output = Result<Response<Body>, Infallible>;

    fn poll(self: std::pin::Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.project() {
            AnswerProj::Inner { fut, warning } => {
                let Ok(mut resp) = std::task::ready!(fut.poll(cx));
                if let Some(w) = warning.take() {
                    crate::respond::add_warnings(&mut resp, &[w.to_string()]);
                }
                Poll::Ready(Ok(resp))
            }
            AnswerProj::Refused { resp } => Poll::Ready(Ok(resp
                .take()
                .expect("an authentication answer is polled once it is ready"))),
            AnswerProj::Checking { fut } => fut.poll(cx),
        }
    }
}

impl<S> tower::Service<Request<Payload>> for Authentication<S>
where
    S: tower::Service<Request<Payload>, Response = Response<Body>, Error = Infallible>
        + Clone
        + Send
        + 'static,
    S::Future: Send + 'static,
{
    type Response = Response<Body>;
    type Error = Infallible;
    type Future = Answer<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut req: Request<Payload>) -> Self::Future {
        // `Bearer  token` (two spaces) is no token at all; upstream says so in a warning.
        let warning = self.authn.bearer_warning(
            req.headers()
                .get(header::AUTHORIZATION)
                .map(|v| v.as_bytes()),
        );
        // No credentials at all: the chain's answer is the anonymous user (when enabled),
        // the same value for every such request.
        let no_credentials = self.authn.anonymous
            && req.headers().get(header::AUTHORIZATION).is_none()
            && req.extensions().get::<Arc<PeerCertificates>>().is_none();
        let identified = if no_credentials {
            Ok((anonymous().clone(), None))
        } else {
            Authentication::identify(&self.authn, &req)
                .map(|a| (Arc::new(a.user), a.service_account))
        };
        match identified {
            Ok((user, service_account)) => {
                req.headers_mut().remove(header::AUTHORIZATION);
                // A plain path goes to the identity's own tenant: a service account's,
                // else the one its groups name, else the configured default.
                let own = service_account
                    .as_ref()
                    .map(|sa| sa.tenant.as_str())
                    .or_else(|| crate::request_info::identity_tenant(&user.groups))
                    .map(str::to_string);
                if let (Some(t), Some(info)) = (own, req.extensions_mut().get_mut::<RequestInfo>())
                    && !info.tenant_from_path
                {
                    info.tenant = t;
                }
                req.extensions_mut().insert::<User>(user);
                let Some(sa) = service_account else {
                    return Answer::Inner {
                        fut: self.inner.call(req),
                        warning,
                    };
                };
                // A service-account token is valid in its own tenant only, and only while
                // its account exists with the uid it was issued for.
                let clone = self.inner.clone();
                let mut inner = std::mem::replace(&mut self.inner, clone);
                let accounts = self.accounts.clone();
                let audit = self.audit.clone();
                Answer::Checking {
                    fut: Box::pin(async move {
                        let tenant =
                            crate::filters::request_info::of(&req).map(|i| i.tenant.clone());
                        let ok = match (&accounts, tenant) {
                            (Some(ctx), Some(t)) if t == sa.tenant => {
                                match crate::service_accounts::uid(ctx, &t, &sa.namespace, &sa.name)
                                    .await
                                {
                                    Ok(Some(uid)) if uid == sa.uid => {
                                        // A token bound to a Secret lives as long as it.
                                        match &sa.bound_secret {
                                            None => true,
                                            Some(s) => match crate::service_accounts::secret_uid(
                                                ctx,
                                                &t,
                                                &sa.namespace,
                                                &s.name,
                                            )
                                            .await
                                            {
                                                Ok(u) => u.as_deref() == Some(s.uid.as_str()),
                                                Err(e) => {
                                                    return Ok(crate::http::error_response(&e));
                                                }
                                            },
                                        }
                                    }
                                    Ok(_) => false,
                                    Err(e) => return Ok(crate::http::error_response(&e)),
                                }
                            }
                            _ => false,
                        };
                        if !ok {
                            tracing::debug!(
                                "unable to authenticate the request: service account {}/{} of tenant {} is not valid here",
                                sa.namespace,
                                sa.name,
                                sa.tenant
                            );
                            if let Some(a) = &audit {
                                // The token was taken off the request once verified.
                                let tried = "Authentication failed, attempted: bearer".into();
                                crate::filters::audit::failed_authentication(a, &req, tried);
                            }
                            return Ok(unauthorized());
                        }
                        inner.call(req).await
                    }),
                }
            }
            Err(why) => {
                tracing::debug!(uri = %req.uri(), "unable to authenticate the request: {why}");
                if let Some(a) = &self.audit {
                    crate::filters::audit::failed_authentication(a, &req, auth_methods(&req));
                }
                let mut resp = unauthorized();
                if let Some(w) = warning {
                    crate::respond::add_warnings(&mut resp, &[w.to_string()]);
                }
                Answer::Refused { resp: Some(resp) }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::filters::testing::{echo, read, request};
    use crdplane_auth::token_file::TokenFile;
    use tower::{Layer, ServiceExt};

    fn layer(anonymous: bool) -> AuthenticationLayer {
        let (tokens, _) =
            TokenFile::parse("jane-token,jane,1001,\"dev,ops\"\n", "tokens.csv").unwrap();
        AuthenticationLayer::new(
            Arc::new(Authenticators {
                x509: None,
                tokens: Some(tokens),
                service_accounts: None,
                oidc: None,
                anonymous,
                token_cache: Default::default(),
            }),
            None,
        )
    }

    /// What the inner service saw: the user and groups, and whether Authorization was left.
    fn seen(r: &Request<Payload>) -> String {
        let u = r
            .extensions()
            .get::<User>()
            .expect("a user for every request");
        format!(
            "{} {:?} authorization={}",
            u.name,
            u.groups,
            r.headers().contains_key(header::AUTHORIZATION)
        )
    }

    #[tokio::test]
    async fn decides_who_each_request_is() {
        let unauthorized = (
            StatusCode::UNAUTHORIZED,
            crdplane_auth::chain::unauthorized_status_json().to_string(),
        );
        let cases: &[(bool, Option<&str>, (StatusCode, String))] = &[
            (
                true,
                None,
                (
                    StatusCode::OK,
                    "system:anonymous [\"system:unauthenticated\"] authorization=false".into(),
                ),
            ),
            (false, None, unauthorized.clone()),
            (
                false,
                Some("Bearer jane-token"),
                (
                    StatusCode::OK,
                    "jane [\"dev\", \"ops\", \"system:authenticated\"] authorization=false".into(),
                ),
            ),
            // A token that fails is a 401 even where anonymous requests are allowed.
            (true, Some("Bearer nope"), unauthorized.clone()),
            (false, Some("Bearer nope"), unauthorized.clone()),
            // No basic authenticator: the header is nobody's credential.
            (false, Some("Basic YWRtaW46YWRtaW4="), unauthorized.clone()),
            // Two spaces: no token at all (anonymous where allowed), with a warning.
            (
                true,
                Some("Bearer  jane-token"),
                (
                    StatusCode::OK,
                    "system:anonymous [\"system:unauthenticated\"] authorization=false".into(),
                ),
            ),
            (false, Some("Bearer  jane-token"), unauthorized.clone()),
        ];
        for (anonymous, authz, want) in cases {
            let mut req = request("GET", "/api/v1/namespaces");
            if let Some(a) = authz {
                req.headers_mut()
                    .insert(header::AUTHORIZATION, a.parse().unwrap());
            }
            let resp = layer(*anonymous)
                .layer(echo(seen))
                .oneshot(req)
                .await
                .unwrap();
            let ct = resp.headers().get(header::CONTENT_TYPE).cloned();
            let warning = resp.headers().get("warning").cloned();
            assert_eq!(
                warning.is_some(),
                authz.is_some_and(|a| a.contains("  ")),
                "{authz:?}"
            );
            if let Some(w) = warning {
                assert_eq!(
                    w,
                    "299 - \"the provided Authorization header contains extra space before the bearer token, and is ignored\""
                );
            }
            let got = read(resp).await;
            assert_eq!(&got, want, "anonymous={anonymous} {authz:?}");
            if got.0 == StatusCode::UNAUTHORIZED {
                assert_eq!(ct.unwrap(), "application/json");
            }
        }
    }

    #[test]
    fn the_credentials_a_refused_request_tried() {
        use crate::filters::testing::request;
        let mut req = request("GET", "/api?access_token=abc");
        assert_eq!(
            auth_methods(&req),
            "Authentication failed, attempted: access_token"
        );
        req.headers_mut().insert(
            header::AUTHORIZATION,
            http::HeaderValue::from_static("Bearer abc"),
        );
        assert_eq!(
            auth_methods(&req),
            "Authentication failed, attempted: bearer, access_token"
        );
        assert_eq!(
            auth_methods(&request("GET", "/api")),
            "Authentication failed, no credentials provided"
        );
    }
}
