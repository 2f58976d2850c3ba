//! Identity for the crdplane gateway: who made a request, with upstream Kubernetes'
//! (`k8s.io/apiserver`) authentication semantics.
//!
//! Where it sits in the request path: the gateway's authentication layer
//! (`gateway/src/filters/authentication.rs`) calls [`Authenticators::authenticate`] once per
//! request, before authorization, with the request's `Authorization` header and the client
//! certificate chain of its TLS connection. It gets a [`UserInfo`] back, or an [`Unauthorized`]
//! that it logs and answers with a 401 ([`unauthorized_status_json`]).
//!
//! - [`user`]: [`UserInfo`] and the well-known names (`user.Info`, the anonymous user).
//! - [`token_file`]: static bearer tokens (`--token-auth-file`, `tokenfile.go`).
//! - [`x509`]: client certificates (`--client-ca-file`, `request/x509/x509.go`).
//! - [`chain`]: their order, the bearer-token header parser, anonymous requests and the
//!   `system:authenticated` group (`union.go`, `bearertoken.go`, `anonymous.go`,
//!   `authenticated_group_adder.go`).
//! - [`service_account`]: service-account tokens, issued and verified
//!   (`pkg/serviceaccount`).
//! - [`oidc`]: OIDC / JWT bearer tokens of `--authentication-config` (upstream's structured
//!   authentication configuration and `plugin/pkg/authenticator/token/oidc`); the key sets
//!   are fetched by the gateway, not here.
//! - [`rbac`]: the RBAC authorizer's decisions, escalation prevention and the bootstrap
//!   roles (`plugin/pkg/auth/authorizer/rbac`, `pkg/registry/rbac/validation`).
//!
//! The crate is pure: no async runtime, no network; it reads files only when asked to load a
//! token file, a CA bundle, an authentication configuration or the JWKS file it names. Certificate verification is rustls's WebPKI verifier on the ring
//! provider.

pub mod chain;
pub mod oidc;
pub mod rbac;
pub mod service_account;
pub mod token_cache;
pub mod token_file;
pub mod user;
pub mod x509;

pub use chain::{Authenticators, Unauthorized, unauthorized_status_json};
pub use token_file::{TokenFile, TokenFileError};
pub use user::UserInfo;
pub use x509::{X509Authenticator, X509Error};
