//! Service-account tokens: signed, expiring, audience-bound JWTs that name a service
//! account of one tenant, issued by the TokenRequest API (`kubectl create token`) and
//! accepted as bearer tokens.
//!
//! Where it sits: the gateway's TokenRequest handler calls [`Signer::issue`]; the
//! authenticator chain ([`crate::chain`]) calls [`Verifier::verify`] for bearer tokens the
//! token file does not know. The gateway then checks what a JWT cannot: that the token's
//! tenant is the request's and that the service account still exists with the token's uid.
//!
//! Follows k8s.io/kubernetes pkg/serviceaccount (`claims.go`: the `kubernetes.io` private
//! claims, `jwt.go`: issuer check before validation, key ids, 60 s leeway;
//! `util.go`: `system:serviceaccount:<ns>:<name>` and the `system:serviceaccounts[:<ns>]`
//! groups) and the TokenRequest defaults of pkg/registry/core/serviceaccount/storage. Tokens
//! are ES256 (ECDSA P-256, as upstream accepts besides RS256), signed and verified by the
//! `jsonwebtoken` crate; the key id is upstream's: base64url(SHA-256(PKIX public key)).
//! crdplane adds one private claim, `crdplane.io: {tenant}`, so a token is valid in its own
//! tenant only.

use crate::user::{CREDENTIAL_ID_KEY, UserInfo};
use base64::Engine;
use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Header, Validation};
use serde::{Deserialize, Serialize};
use sha2::Digest;
use std::collections::BTreeMap;
use std::path::Path;

/// kubeadm's (and the kube-apiserver docs') service-account issuer.
pub const DEFAULT_ISSUER: &str = "https://kubernetes.default.svc.cluster.local";

/// The shortest lifetime a TokenRequest may ask for (upstream: 10 minutes).
pub const MIN_EXPIRATION_SECONDS: i64 = 600;

/// The lifetime of a TokenRequest that asks for none (upstream: one hour).
pub const DEFAULT_EXPIRATION_SECONDS: i64 = 3600;

const B64: base64::engine::GeneralPurpose = base64::engine::general_purpose::URL_SAFE_NO_PAD;

/// `kubernetes.io.serviceaccount`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ref {
    /// Service account name.
    pub name: String,
    /// Its uid when the token was issued.
    pub uid: String,
}

/// The `kubernetes.io` private claims.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KubernetesClaims {
    /// The service account's namespace.
    pub namespace: String,
    /// The service account.
    pub serviceaccount: Ref,
    /// The Secret the token is bound to (TokenRequest `boundObjectRef`), if any: the token
    /// is valid only while that Secret exists with this uid.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret: Option<Ref>,
}

/// crdplane's private claims.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CrdplaneClaims {
    /// The tenant the service account lives in.
    pub tenant: String,
}

/// The claims of a service-account token.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Claims {
    /// Audiences.
    pub aud: Vec<String>,
    /// Expiry (Unix seconds).
    pub exp: i64,
    /// Issued at.
    pub iat: i64,
    /// Issuer.
    pub iss: String,
    /// Token id.
    pub jti: String,
    /// Not before.
    pub nbf: i64,
    /// `system:serviceaccount:<ns>:<name>`.
    pub sub: String,
    /// Namespace and service account.
    #[serde(rename = "kubernetes.io")]
    pub kubernetes: KubernetesClaims,
    /// The tenant.
    #[serde(rename = "crdplane.io")]
    pub crdplane: CrdplaneClaims,
}

/// A verified token: its service account, tenant and the user it authenticates.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServiceAccountToken {
    /// Tenant of the service account.
    pub tenant: String,
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// Uid the token was issued for.
    pub uid: String,
    /// The Secret (same namespace) the token is bound to, if any.
    pub bound_secret: Option<Ref>,
    /// The user (`system:serviceaccount:…`, its groups, the token id as credential id).
    pub user: UserInfo,
}

/// Upstream's key id: base64url of the SHA-256 of the PKIX (SPKI DER) public key.
pub fn key_id(spki_der: &[u8]) -> String {
    B64.encode(sha2::Sha256::digest(spki_der))
}

/// The SPKI DER of a PEM public key (`PUBLIC KEY`), or of the key pair of a PEM private key.
fn public_der(pem_text: &str) -> Result<Vec<u8>, String> {
    if pem_text.contains("PRIVATE KEY") {
        let kp = rcgen::KeyPair::from_pem(pem_text).map_err(|e| e.to_string())?;
        return public_der(&kp.public_key_pem());
    }
    let der = rustls_pki_types::SubjectPublicKeyInfoDer::from_pem_slice(pem_text.as_bytes())
        .map_err(|e| format!("no PEM public key: {e}"))?;
    Ok(der.as_ref().to_vec())
}

/// Issues tokens with one private key (`--service-account-signing-key-file`).
pub struct Signer {
    key: EncodingKey,
    kid: String,
    issuer: String,
}

impl std::fmt::Debug for Signer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Signer")
            .field("kid", &self.kid)
            .field("issuer", &self.issuer)
            .finish_non_exhaustive()
    }
}

use rustls_pki_types::pem::PemObject;

impl Signer {
    /// The signer of the ECDSA P-256 private key in PEM `pem_text` (PKCS#8), for `issuer`.
    pub fn from_pem(pem_text: &str, issuer: &str) -> Result<Self, String> {
        let key = EncodingKey::from_ec_pem(pem_text.as_bytes())
            .map_err(|e| format!("not an ECDSA P-256 private key (PKCS#8 PEM): {e}"))?;
        Ok(Self {
            key,
            kid: key_id(&public_der(pem_text)?),
            issuer: issuer.to_string(),
        })
    }

    /// [`Self::from_pem`] of a file.
    pub fn load(path: &Path, issuer: &str) -> Result<Self, String> {
        let t = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
        Self::from_pem(&t, issuer).map_err(|e| format!("{}: {e}", path.display()))
    }

    /// The issuer it writes into tokens.
    pub fn issuer(&self) -> &str {
        &self.issuer
    }

    /// A token for service account `namespace/name` (uid `uid`) of `tenant`, for
    /// `audiences`, valid from `now` for `seconds`; with its expiry (Unix seconds).
    #[allow(clippy::too_many_arguments)]
    pub fn issue(
        &self,
        tenant: &str,
        namespace: &str,
        name: &str,
        uid: &str,
        audiences: &[String],
        now: i64,
        seconds: i64,
        jti: &str,
    ) -> Result<(String, i64), String> {
        self.issue_bound(
            tenant, namespace, name, uid, audiences, now, seconds, jti, None,
        )
    }

    /// [`Signer::issue`] for a token bound to Secret `bound_secret` (its name and uid).
    #[allow(clippy::too_many_arguments)]
    pub fn issue_bound(
        &self,
        tenant: &str,
        namespace: &str,
        name: &str,
        uid: &str,
        audiences: &[String],
        now: i64,
        seconds: i64,
        jti: &str,
        bound_secret: Option<Ref>,
    ) -> Result<(String, i64), String> {
        let claims = Claims {
            aud: audiences.to_vec(),
            exp: now + seconds,
            iat: now,
            iss: self.issuer.clone(),
            jti: jti.to_string(),
            nbf: now,
            sub: crate::rbac::service_account_username(namespace, name),
            kubernetes: KubernetesClaims {
                namespace: namespace.into(),
                serviceaccount: Ref {
                    name: name.into(),
                    uid: uid.into(),
                },
                secret: bound_secret,
            },
            crdplane: CrdplaneClaims {
                tenant: tenant.into(),
            },
        };
        let mut header = Header::new(Algorithm::ES256);
        header.kid = Some(self.kid.clone());
        let token = jsonwebtoken::encode(&header, &claims, &self.key).map_err(|e| e.to_string())?;
        Ok((token, claims.exp))
    }
}

/// Verifies tokens (`--service-account-key-file`, `--service-account-issuer`,
/// `--api-audiences`).
#[derive(Clone)]
pub struct Verifier {
    keys: Vec<(String, DecodingKey)>,
    issuers: Vec<String>,
    audiences: Vec<String>,
}

impl std::fmt::Debug for Verifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Verifier")
            .field("issuers", &self.issuers)
            .field("audiences", &self.audiences)
            .finish_non_exhaustive()
    }
}

impl Verifier {
    /// A verifier of the public keys in the PEM texts (a private key stands for its public
    /// half), accepting tokens of `issuers` for any of `audiences`.
    pub fn from_pems(
        pems: &[String],
        issuers: &[String],
        audiences: &[String],
    ) -> Result<Self, String> {
        let mut keys = Vec::new();
        for p in pems {
            let der = public_der(p)?;
            let text = format!(
                "-----BEGIN PUBLIC KEY-----\n{}\n-----END PUBLIC KEY-----\n",
                base64::engine::general_purpose::STANDARD.encode(&der)
            );
            let key = DecodingKey::from_ec_pem(text.as_bytes())
                .map_err(|e| format!("not an ECDSA P-256 public key: {e}"))?;
            keys.push((key_id(&der), key));
        }
        if keys.is_empty() {
            return Err("no service-account key".into());
        }
        Ok(Self {
            keys,
            issuers: issuers.to_vec(),
            audiences: audiences.to_vec(),
        })
    }

    /// [`Self::from_pems`] of files.
    pub fn load(
        paths: &[std::path::PathBuf],
        issuers: &[String],
        audiences: &[String],
    ) -> Result<Self, String> {
        let mut pems = Vec::new();
        for p in paths {
            pems.push(std::fs::read_to_string(p).map_err(|e| format!("{}: {e}", p.display()))?);
        }
        Self::from_pems(&pems, issuers, audiences)
    }

    /// Upstream's `jwtTokenAuthenticator.AuthenticateToken`: `Ok(None)` when the token is
    /// not a JWT of one of our issuers (another authenticator's business), the verified
    /// token, or why it fails (signature, expiry, audience, claims).
    pub fn verify(&self, token: &str) -> Result<Option<ServiceAccountToken>, String> {
        // The issuer decides whose token it is, before any verification (jwt.go
        // `hasCorrectIssuer`).
        let mut parts = token.split('.');
        let (Some(_), Some(payload), Some(_), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Ok(None);
        };
        let Some(iss) = B64
            .decode(payload)
            .ok()
            .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
            .and_then(|v| v.get("iss").and_then(|i| i.as_str()).map(str::to_string))
        else {
            return Ok(None);
        };
        if !self.issuers.contains(&iss) {
            return Ok(None);
        }
        let header = jsonwebtoken::decode_header(token).map_err(|e| e.to_string())?;
        let mut v = Validation::new(Algorithm::ES256);
        v.leeway = 60;
        v.validate_nbf = true;
        v.set_issuer(&self.issuers);
        v.set_audience(&self.audiences);
        v.set_required_spec_claims(&["exp", "iss", "aud", "sub", "nbf"]);
        let candidates = self
            .keys
            .iter()
            .filter(|(kid, _)| header.kid.as_deref().is_none_or(|k| k == kid));
        let mut last = "no key matches the token's key id".to_string();
        for (_, key) in candidates {
            match jsonwebtoken::decode::<Claims>(token, key, &v) {
                Ok(d) => return token_of(d.claims).map(Some),
                Err(e) => last = e.to_string(),
            }
        }
        Err(format!("service account token is invalid: {last}"))
    }
}

fn token_of(c: Claims) -> Result<ServiceAccountToken, String> {
    let ns = c.kubernetes.namespace;
    let name = c.kubernetes.serviceaccount.name;
    if ns.is_empty() || name.is_empty() || c.crdplane.tenant.is_empty() {
        return Err("service account token claims are incomplete".into());
    }
    if c.sub != crate::rbac::service_account_username(&ns, &name) {
        return Err("service account token's subject does not match its claims".into());
    }
    let mut extra = BTreeMap::new();
    extra.insert(
        CREDENTIAL_ID_KEY.to_string(),
        vec![format!("JTI={}", c.jti)],
    );
    Ok(ServiceAccountToken {
        user: UserInfo {
            name: c.sub,
            uid: c.kubernetes.serviceaccount.uid.clone(),
            groups: vec![
                "system:serviceaccounts".into(),
                format!("system:serviceaccounts:{ns}"),
            ],
            extra,
        },
        tenant: c.crdplane.tenant,
        namespace: ns,
        name,
        uid: c.kubernetes.serviceaccount.uid,
        bound_secret: c.kubernetes.secret,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys() -> (String, String) {
        let kp = rcgen::KeyPair::generate().unwrap();
        (kp.serialize_pem(), kp.public_key_pem())
    }

    fn now() -> i64 {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs() as i64
    }

    #[test]
    fn issued_tokens_verify_and_name_the_service_account() {
        let (private, public) = keys();
        let s = Signer::from_pem(&private, DEFAULT_ISSUER).unwrap();
        let aud = vec![DEFAULT_ISSUER.to_string()];
        let v = Verifier::from_pems(std::slice::from_ref(&public), &aud, &aud).unwrap();
        let (t, exp) = s
            .issue("acme", "ns1", "builder", "uid-1", &aud, now(), 3600, "j1")
            .unwrap();
        assert_eq!(exp, now() + 3600);
        let got = v.verify(&t).unwrap().unwrap();
        assert_eq!(got.tenant, "acme");
        assert_eq!(
            (got.namespace.as_str(), got.name.as_str(), got.uid.as_str()),
            ("ns1", "builder", "uid-1")
        );
        assert_eq!(got.user.name, "system:serviceaccount:ns1:builder");
        assert_eq!(
            got.user.groups,
            ["system:serviceaccounts", "system:serviceaccounts:ns1"]
        );
        assert_eq!(got.user.extra[CREDENTIAL_ID_KEY], ["JTI=j1"]);
        assert_eq!(got.bound_secret, None);
        // Bound to a Secret: the claim travels and comes back.
        let secret = Ref {
            name: "db".into(),
            uid: "s-1".into(),
        };
        let (t, _) = s
            .issue_bound(
                "acme",
                "ns1",
                "builder",
                "uid-1",
                &aud,
                now(),
                3600,
                "j2",
                Some(secret.clone()),
            )
            .unwrap();
        assert_eq!(v.verify(&t).unwrap().unwrap().bound_secret, Some(secret));
        // The private key stands for its public half.
        let v2 = Verifier::from_pems(std::slice::from_ref(&private), &aud, &aud).unwrap();
        assert!(v2.verify(&t).unwrap().is_some());
        // Expired (beyond the leeway), another audience, another key, tampered, not ours.
        let (old, _) = s
            .issue("acme", "ns1", "b", "u", &aud, now() - 7200, 600, "j")
            .unwrap();
        assert!(
            v.verify(&old).unwrap_err().contains("ExpiredSignature"),
            "{:?}",
            v.verify(&old)
        );
        let (other_aud, _) = s
            .issue(
                "acme",
                "ns1",
                "b",
                "u",
                &["vault".to_string()],
                now(),
                600,
                "j",
            )
            .unwrap();
        assert!(v.verify(&other_aud).is_err());
        let (_, other_public) = keys();
        let v3 = Verifier::from_pems(&[other_public], &aud, &aud).unwrap();
        assert!(v3.verify(&t).is_err());
        let mut forged = t.clone();
        forged.pop();
        forged.push(if t.ends_with('A') { 'B' } else { 'A' });
        assert!(v.verify(&forged).is_err());
        assert_eq!(v.verify("not-a-jwt"), Ok(None));
        let s_other = Signer::from_pem(&private, "https://elsewhere").unwrap();
        let (foreign, _) = s_other
            .issue("acme", "ns1", "b", "u", &aud, now(), 600, "j")
            .unwrap();
        assert_eq!(v.verify(&foreign), Ok(None));
    }

    #[test]
    fn key_ids_are_upstreams_form() {
        let (_, public) = keys();
        let kid = key_id(&public_der(&public).unwrap());
        assert_eq!(kid.len(), 43);
        assert!(!kid.contains('=') && !kid.contains('+') && !kid.contains('/'));
    }
}
