//! Impersonation: the layer right after authentication, where upstream's
//! `WithImpersonation` (staging/src/k8s.io/apiserver/pkg/endpoints/filters/impersonation.go)
//! sits. `kubectl --as=bob --as-group=dev` sends `Impersonate-User`, `Impersonate-Group`
//! (repeated), `Impersonate-Uid` and `Impersonate-Extra-<key>` headers; the request then runs
//! as that identity, if the authenticated user may `impersonate` each part of it in the
//! request's tenant:
//! - the user: resource `users` (or `serviceaccounts` in its namespace for
//!   `system:serviceaccount:<ns>:<name>`, which also brings the service-account groups),
//! - each group: `groups`; each extra value: `userextras/<key>` in `authentication.k8s.io`;
//!   the uid: `uids` in `authentication.k8s.io`.
//!
//! Unlike upstream's single cluster, where whoever may impersonate anything is cluster-admin
//! already, a tenant's RBAC is written by that tenant's admins: it cannot let anyone
//! impersonate `system:masters`, the platform's admin group across all tenants; only its
//! members may.
//!
//! A part not allowed is upstream's 403 for that check (`users "bob" is forbidden: User
//! "jane" cannot impersonate resource "users" in API group "" at the cluster scope`); groups,
//! uid or extras without a user are upstream's 500 (`... without impersonating a user`).
//! The impersonated identity gets `system:authenticated` (or `system:unauthenticated` when it
//! is `system:anonymous`) unless a group says otherwise, as upstream. The headers are removed
//! once used. A request without them passes untouched (its future is the inner one).

use crate::authz::forbidden;
use crate::context::Ctx;
use crate::filters::authentication::User;
use crate::http::{Body, Payload, error_response};
use crdplane_auth::rbac::Attributes;
use crdplane_auth::user::{
    ALL_AUTHENTICATED, ALL_UNAUTHENTICATED, ANONYMOUS_USER, SYSTEM_MASTERS, UserInfo,
};
use futures::future::{BoxFuture, Either};
use http::{HeaderMap, Request, Response, StatusCode};
use std::collections::BTreeMap;
use std::convert::Infallible;
use std::sync::Arc;
use std::task::{Context, Poll};

const USER: &str = "impersonate-user";
const GROUP: &str = "impersonate-group";
const UID: &str = "impersonate-uid";
const EXTRA: &str = "impersonate-extra-";

/// One part of the identity asked for, as the authorizer checks it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Part {
    /// `users`, `serviceaccounts`, `groups`, `userextras`, `uids`.
    resource: &'static str,
    /// The extra's key (subresource of `userextras`).
    subresource: String,
    namespace: String,
    name: String,
}

impl Part {
    fn group(&self) -> &'static str {
        match self.resource {
            "userextras" | "uids" => "authentication.k8s.io",
            _ => "",
        }
    }
    /// Go's `%v` of the `v1.ObjectReference` upstream builds for it (in its 500 text).
    fn go_value(&self) -> String {
        let (kind, api_version) = match self.resource {
            "users" => ("User", "authentication.k8s.io/v1"),
            "serviceaccounts" => ("ServiceAccount", "v1"),
            "groups" => ("Group", "authentication.k8s.io/v1"),
            "uids" => ("UID", "authentication.k8s.io/v1"),
            _ => ("UserExtra", "authentication.k8s.io/v1"),
        };
        let field_path = if self.resource == "userextras" {
            self.subresource.as_str()
        } else {
            ""
        };
        format!(
            "{{{kind} {} {}  {api_version}  {field_path}}}",
            self.namespace, self.name
        )
    }
}

/// What the impersonation headers ask for (`buildImpersonationRequests`), or the error
/// text; None without any impersonation header.
fn requested(h: &HeaderMap) -> Option<Result<(Vec<Part>, UserInfo), String>> {
    // Nearly every request has none: one pass over the names (stored lower-case), no
    // lookups by name (each parses and hashes it).
    if !h.keys().any(|k| k.as_str().starts_with("impersonate-")) {
        return None;
    }
    let has = |n: &str| h.contains_key(n);
    let extra_keys: Vec<&str> = h
        .keys()
        .map(|k| k.as_str())
        .filter(|k| k.starts_with(EXTRA))
        .collect();
    if !has(USER) && !has(GROUP) && !has(UID) && extra_keys.is_empty() {
        return None;
    }
    let text = |v: &http::HeaderValue| String::from_utf8_lossy(v.as_bytes()).into_owned();
    let mut parts = Vec::new();
    let mut user = UserInfo::default();
    let mut sa_groups = Vec::new();
    if let Some(u) = h.get(USER).map(text).filter(|u| !u.is_empty()) {
        match u
            .strip_prefix("system:serviceaccount:")
            .and_then(|r| r.split_once(':'))
            .filter(|(ns, n)| !ns.is_empty() && !n.is_empty() && !n.contains(':'))
        {
            Some((ns, n)) => {
                parts.push(Part {
                    resource: "serviceaccounts",
                    subresource: String::new(),
                    namespace: ns.into(),
                    name: n.into(),
                });
                sa_groups = vec![
                    "system:serviceaccounts".to_string(),
                    format!("system:serviceaccounts:{ns}"),
                ];
            }
            None => parts.push(Part {
                resource: "users",
                subresource: String::new(),
                namespace: String::new(),
                name: u.clone(),
            }),
        }
        user.name = u;
    }
    let has_user = !user.name.is_empty();
    let mut others = Vec::new();
    for g in h.get_all(GROUP).iter().map(text) {
        others.push(Part {
            resource: "groups",
            subresource: String::new(),
            namespace: String::new(),
            name: g.clone(),
        });
        user.groups.push(g);
    }
    let mut extra: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for k in extra_keys {
        let key = percent_encoding::percent_decode_str(&k[EXTRA.len()..])
            .decode_utf8_lossy()
            .to_lowercase();
        for v in h.get_all(k).iter().map(text) {
            others.push(Part {
                resource: "userextras",
                subresource: key.clone(),
                namespace: String::new(),
                name: v.clone(),
            });
            extra.entry(key.clone()).or_default().push(v);
        }
    }
    if let Some(uid) = h.get(UID).map(text) {
        others.push(Part {
            resource: "uids",
            subresource: String::new(),
            namespace: String::new(),
            name: uid.clone(),
        });
        user.uid = uid;
    }
    if !has_user {
        let list: Vec<String> = others.iter().map(Part::go_value).collect();
        return Some(Err(format!(
            "requested [{}] without impersonating a user",
            list.join(" ")
        )));
    }
    parts.extend(others);
    user.extra = extra;
    let mut groups = sa_groups;
    groups.append(&mut user.groups);
    if user.name == ANONYMOUS_USER {
        if !groups.iter().any(|g| g == ALL_UNAUTHENTICATED) {
            groups.push(ALL_UNAUTHENTICATED.into());
        }
    } else if !groups
        .iter()
        .any(|g| g == ALL_AUTHENTICATED || g == ALL_UNAUTHENTICATED)
    {
        groups.push(ALL_AUTHENTICATED.into());
    }
    user.groups = groups;
    Some(Ok((parts, user)))
}

/// The identity the impersonation headers of `h` ask for, with how many parts need an
/// `impersonate` grant; None without any such header (the fuzz target's entry point).
pub fn requested_identity(h: &HeaderMap) -> Option<Result<(usize, UserInfo), String>> {
    requested(h).map(|r| r.map(|(parts, user)| (parts.len(), user)))
}

/// Go's `http.Error` 500 of `responsewriters.InternalError`.
fn internal_error(uri: &str, err: &str) -> Response<Body> {
    let mut r = crate::http::text_response_owned(
        StatusCode::INTERNAL_SERVER_ERROR,
        format!(
            "Internal Server Error: {}: {err}\n",
            crdplane_core::field::go_quote(uri)
        ),
    );
    r.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    r.headers_mut().insert(
        "x-content-type-options",
        http::HeaderValue::from_static("nosniff"),
    );
    r
}

/// The layer of [`Impersonation`].
#[derive(Clone, Default)]
pub struct ImpersonationLayer {
    ctx: Option<Arc<Ctx>>,
}

impl ImpersonationLayer {
    /// Authorizes impersonation with the authorizer of `ctx` (None: the headers are left
    /// alone, for stacks without a gateway behind them).
    pub fn new(ctx: Option<Arc<Ctx>>) -> Self {
        Self { ctx }
    }
}

impl<S> tower::Layer<S> for ImpersonationLayer {
    type Service = Impersonation<S>;
    fn layer(&self, inner: S) -> Impersonation<S> {
        Impersonation {
            inner,
            ctx: self.ctx.clone(),
        }
    }
}

/// Runs requests as the identity their impersonation headers ask for, when allowed.
#[derive(Clone)]
pub struct Impersonation<S> {
    inner: S,
    ctx: Option<Arc<Ctx>>,
}

impl<S> tower::Service<Request<Payload>> for Impersonation<S>
where
    S: tower::Service<Request<Payload>, Response = Response<Body>, Error = Infallible>
        + Clone
        + Send
        + 'static,
    S::Future: Send + 'static,
{
    type Response = Response<Body>;
    type Error = Infallible;
    type Future = Either<S::Future, BoxFuture<'static, Result<Response<Body>, Infallible>>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut req: Request<Payload>) -> Self::Future {
        let Some(ctx) = &self.ctx else {
            return Either::Left(self.inner.call(req));
        };
        let Some(asked) = requested(req.headers()) else {
            return Either::Left(self.inner.call(req));
        };
        let clone = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, clone);
        let ctx = ctx.clone();
        Either::Right(Box::pin(async move {
            let (parts, user) = match asked {
                Ok(a) => a,
                Err(e) => return Ok(internal_error(&req.uri().to_string(), &e)),
            };
            let Some(info) = crate::filters::request_info::of(&req).cloned() else {
                return inner.call(req).await;
            };
            let requestor = req
                .extensions()
                .get::<User>()
                .cloned()
                .unwrap_or_else(|| Arc::new(UserInfo::anonymous()));
            for p in &parts {
                let a = Attributes {
                    verb: "impersonate",
                    resource_request: true,
                    namespace: &p.namespace,
                    api_group: p.group(),
                    resource: p.resource,
                    subresource: &p.subresource,
                    name: &p.name,
                    ..Default::default()
                };
                // `system:masters` is the platform's admin group, across every tenant: a
                // tenant's RBAC (which its own admins write) cannot hand it out, so only its
                // members may impersonate it.
                if p.resource == "groups"
                    && p.name == SYSTEM_MASTERS
                    && !crdplane_auth::rbac::is_privileged(&requestor)
                    && ctx.authz.mode() == crate::authz::Mode::Rbac
                {
                    return Ok(error_response(&forbidden(&requestor.name, &a, "")));
                }
                match crate::policy::decide(&ctx, &requestor, &info.tenant, &a).await {
                    Ok(d) if d.allowed() => {}
                    Ok(crdplane_auth::rbac::Decision::Deny(reason)) => {
                        return Ok(error_response(&forbidden(&requestor.name, &a, &reason)));
                    }
                    Ok(_) => unreachable!("allowed was matched above"),
                    Err(e) => return Ok(error_response(&e)),
                }
            }
            let h = req.headers_mut();
            let names: Vec<http::HeaderName> = h
                .keys()
                .filter(|k| k.as_str().starts_with("impersonate-"))
                .cloned()
                .collect();
            for n in names {
                h.remove(n);
            }
            // A plain path goes to the impersonated identity's own tenant when its groups
            // name one (the requestor was authorized in the tenant it reached).
            if let Some(t) = crate::request_info::identity_tenant(&user.groups)
                && let Some(i) = req
                    .extensions_mut()
                    .get_mut::<crate::request_info::RequestInfo>()
                && !i.tenant_from_path
                && i.tenant != t
            {
                return Ok(error_response(&forbidden(
                    &requestor.name,
                    &crate::authz::attributes(i),
                    &format!(
                        "the impersonated identity belongs to tenant {t}; name it in the path (/clusters/{t}/...)"
                    ),
                )));
            }
            crate::filters::audit::record_impersonation(&req, &user);
            req.extensions_mut().insert::<User>(Arc::new(user));
            inner.call(req).await
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(h: &[(&str, &str)]) -> HeaderMap {
        let mut m = HeaderMap::new();
        for (k, v) in h {
            m.append(
                http::HeaderName::from_bytes(k.as_bytes()).unwrap(),
                v.parse().unwrap(),
            );
        }
        m
    }

    #[test]
    fn what_the_headers_ask_for() {
        assert!(requested(&headers(&[("Accept", "x")])).is_none());
        let (parts, u) = requested(&headers(&[
            ("Impersonate-User", "bob"),
            ("Impersonate-Group", "dev"),
            ("Impersonate-Group", "ops"),
            ("Impersonate-Extra-Scopes%2FA", "s1"),
            ("Impersonate-Uid", "42"),
        ]))
        .unwrap()
        .unwrap();
        assert_eq!(u.name, "bob");
        assert_eq!(u.uid, "42");
        assert_eq!(u.groups, ["dev", "ops", "system:authenticated"]);
        assert_eq!(u.extra["scopes/a"], ["s1"]);
        let res: Vec<(&str, &str, &str)> = parts
            .iter()
            .map(|p| (p.resource, p.subresource.as_str(), p.name.as_str()))
            .collect();
        assert_eq!(
            res,
            [
                ("users", "", "bob"),
                ("groups", "", "dev"),
                ("groups", "", "ops"),
                ("userextras", "scopes/a", "s1"),
                ("uids", "", "42")
            ]
        );
        // A service account: its namespace, its groups.
        let (parts, u) = requested(&headers(&[(
            "Impersonate-User",
            "system:serviceaccount:ns1:builder",
        )]))
        .unwrap()
        .unwrap();
        assert_eq!(
            (parts[0].resource, parts[0].namespace.as_str()),
            ("serviceaccounts", "ns1")
        );
        assert_eq!(
            u.groups,
            [
                "system:serviceaccounts",
                "system:serviceaccounts:ns1",
                "system:authenticated"
            ]
        );
        // Anonymous gets system:unauthenticated; an explicit all-users group is kept alone.
        let (_, u) = requested(&headers(&[("Impersonate-User", "system:anonymous")]))
            .unwrap()
            .unwrap();
        assert_eq!(u.groups, ["system:unauthenticated"]);
        let (_, u) = requested(&headers(&[
            ("Impersonate-User", "x"),
            ("Impersonate-Group", "system:unauthenticated"),
        ]))
        .unwrap()
        .unwrap();
        assert_eq!(u.groups, ["system:unauthenticated"]);
        // Groups without a user.
        let e = requested(&headers(&[("Impersonate-Group", "dev")]))
            .unwrap()
            .unwrap_err();
        assert_eq!(
            e,
            "requested [{Group  dev  authentication.k8s.io/v1  }] without impersonating a user"
        );
    }
}
