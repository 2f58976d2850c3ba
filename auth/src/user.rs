//! The authenticated identity: [`UserInfo`] and the well-known user and group names.
//!
//! Where it sits: every authenticator of this crate returns a [`UserInfo`], and the gateway's
//! authentication layer (`gateway/src/filters/authentication.rs`, which calls
//! [`Authenticators::authenticate`](crate::chain::Authenticators::authenticate) once per request)
//! stores it with the request for authorization, audit and impersonation.
//!
//! Upstream: `staging/src/k8s.io/apiserver/pkg/authentication/user/user.go` (`user.Info`,
//! `user.DefaultInfo` and its constants), the anonymous authenticator
//! (`.../authentication/request/anonymous/anonymous.go`) and `isAnonymousUser` in
//! `staging/src/k8s.io/apiserver/pkg/endpoints/filters/authentication.go`.

use std::collections::BTreeMap;

/// The user name given to requests that no authenticator recognised, when anonymous requests are
/// enabled (upstream `user.Anonymous`).
pub const ANONYMOUS_USER: &str = "system:anonymous";

/// The group every anonymous request belongs to (upstream `user.AllUnauthenticated`).
pub const ALL_UNAUTHENTICATED: &str = "system:unauthenticated";

/// The group every authenticated, non-anonymous user is put in by the chain (upstream
/// `user.AllAuthenticated`, added by `AuthenticatedGroupAdder`).
pub const ALL_AUTHENTICATED: &str = "system:authenticated";

/// The group that the default RBAC policy binds to `cluster-admin` (upstream
/// `user.SystemPrivilegedGroup`).
pub const SYSTEM_MASTERS: &str = "system:masters";

/// The `extra` key under which an authenticator records an identifier of the credential that was
/// used (upstream `user.CredentialIDKey`); the x509 authenticator sets it to
/// `X509SHA256=<hex digest of the certificate>`.
pub const CREDENTIAL_ID_KEY: &str = "authentication.kubernetes.io/credential-id";

/// Who made a request: upstream's `user.DefaultInfo`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct UserInfo {
    /// The user name (for a client certificate, its subject CommonName).
    pub name: String,
    /// A unique identifier of the user, empty when the authenticator has none.
    pub uid: String,
    /// The groups, in the order the authenticator produced them (the chain appends
    /// [`ALL_AUTHENTICATED`] last).
    pub groups: Vec<String>,
    /// Additional authenticator-specific information, keyed by name.
    pub extra: BTreeMap<String, Vec<String>>,
}

impl UserInfo {
    /// The user upstream's anonymous authenticator returns: name [`ANONYMOUS_USER`], the single
    /// group [`ALL_UNAUTHENTICATED`], no uid and no extra.
    pub fn anonymous() -> Self {
        UserInfo {
            name: ANONYMOUS_USER.to_owned(),
            uid: String::new(),
            groups: vec![ALL_UNAUTHENTICATED.to_owned()],
            extra: BTreeMap::new(),
        }
    }

    /// Whether this user counts as anonymous, with upstream's rule (`isAnonymousUser` in the
    /// authentication filter): the name is [`ANONYMOUS_USER`] or one of the groups is
    /// [`ALL_UNAUTHENTICATED`]. Upstream uses it to close HTTP/2 connections of anonymous
    /// clients after the request (`Connection: close`).
    pub fn is_anonymous(&self) -> bool {
        self.name == ANONYMOUS_USER || self.groups.iter().any(|g| g == ALL_UNAUTHENTICATED)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn anonymous_user_is_upstreams() {
        let u = UserInfo::anonymous();
        assert_eq!(u.name, "system:anonymous");
        assert_eq!(u.groups, vec!["system:unauthenticated".to_owned()]);
        assert!(u.uid.is_empty());
        assert!(u.extra.is_empty());
        assert!(u.is_anonymous());
    }

    #[test]
    fn is_anonymous_table() {
        let cases: &[(&str, &[&str], bool)] = &[
            ("system:anonymous", &[], true),
            ("system:anonymous", &["system:authenticated"], true),
            ("jane", &["dev", "system:unauthenticated"], true),
            ("jane", &["dev", "system:authenticated"], false),
            ("jane", &[], false),
            ("", &[], false),
            // Exact, case-sensitive comparisons, as upstream.
            ("System:Anonymous", &["SYSTEM:UNAUTHENTICATED"], false),
        ];
        for (name, groups, want) in cases {
            let u = UserInfo {
                name: (*name).to_owned(),
                groups: groups.iter().map(|g| (*g).to_owned()).collect(),
                ..UserInfo::default()
            };
            assert_eq!(u.is_anonymous(), *want, "{name} {groups:?}");
        }
    }
}
