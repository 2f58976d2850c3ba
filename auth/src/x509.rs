//! Client-certificate authentication: kube-apiserver's `--client-ca-file`.
//!
//! Where it sits: the gateway's TLS handshake accepts any client certificate (it only proves that
//! the client holds the certificate's key) and keeps the presented chain with the connection. Per
//! request, the authentication layer (`gateway/src/filters/authentication.rs`) calls
//! [`Authenticators::authenticate`](crate::chain::Authenticators::authenticate), which first asks
//! [`X509Authenticator::authenticate`] to verify that chain against the client CA bundle. So a
//! certificate that does not verify becomes a 401 with the reason logged, as upstream (Go's server
//! asks for certificates with `tls.RequestClientCert`, and its x509 authenticator verifies them).
//!
//! Upstream: `staging/src/k8s.io/apiserver/pkg/authentication/request/x509/x509.go`
//! (`Authenticator.AuthenticateRequest`, `CommonNameUserConversion`, `parseUIDFromCert`), with the
//! CA bundle read as `staging/src/k8s.io/apiserver/pkg/server/dynamiccertificates` and client-go's
//! `cert.ParseCertsPEM` do. The rules:
//!
//! - The end-entity certificate (`chain[0]`) must chain to one of the CA certificates, through the
//!   other presented certificates as intermediates, be valid now, and allow client
//!   authentication (an extended key usage extension, when present, must list `clientAuth`).
//!   Upstream verifies with Go's `x509.Certificate.Verify`; here rustls's
//!   [`WebPkiClientVerifier`] (ring provider) does it. A failure is an error,
//!   `verifying certificate SN=…, SKID=…, AKID=… failed: …`.
//! - The user name is the subject's CommonName (the last one if there are several, as Go's
//!   `pkix.Name` keeps the last). An empty or missing CommonName makes upstream return neither a
//!   user nor an error ("no opinion"); here that is [`X509Error::EmptyCommonName`], which the
//!   chain treats as no opinion, not as a failure.
//! - The groups are the subject's Organization values, in order.
//! - The uid is the subject's `1.3.6.1.4.1.57683.2` attribute (upstream's
//!   `AllowParsingUserUIDFromCertAuth` feature, beta and on by default since Kubernetes 1.33):
//!   empty when absent, an error when repeated or empty.
//! - `extra` holds [`CREDENTIAL_ID_KEY`] = `X509SHA256=<lowercase hex SHA-256 of the
//!   certificate's DER>`.
//! - [`ALL_AUTHENTICATED`](crate::user::ALL_AUTHENTICATED) is not added here; the chain adds it.
//! - Subject attribute values are decoded as Go's certificate parser does (PrintableString,
//!   UTF8String, IA5String, NumericString, T61String as Latin-1, BMPString as UTF-16); any other
//!   string type, or a value that breaks its type's alphabet, is an error.

use std::fmt;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rustls::RootCertStore;
use rustls::server::WebPkiClientVerifier;
use rustls::server::danger::ClientCertVerifier;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, UnixTime};
use sha2::{Digest, Sha256};
use x509_parser::asn1_rs::{Class, Tag};
use x509_parser::certificate::X509Certificate;
use x509_parser::extensions::ParsedExtension;
use x509_parser::oid_registry::{OID_X509_COMMON_NAME, OID_X509_ORGANIZATION_NAME};
use x509_parser::x509::AttributeTypeAndValue;

use crate::user::{CREDENTIAL_ID_KEY, UserInfo};

/// The DER content octets of the OID `1.3.6.1.4.1.57683.2` (upstream `asn1util.X509UID()`, the
/// Kubernetes private-enterprise arc), the subject attribute that carries the user's uid.
const X509_UID_OID_DER: &[u8] = &[0x2b, 0x06, 0x01, 0x04, 0x01, 0x83, 0xc2, 0x53, 0x02];

/// Why a CA bundle could not be loaded or a client certificate was not accepted.
#[derive(Debug, thiserror::Error)]
pub enum X509Error {
    /// The CA bundle file could not be read.
    #[error("unable to read CA bundle {path:?}: {source}")]
    Read {
        /// The file's path.
        path: String,
        /// The operating system's error.
        #[source]
        source: std::io::Error,
    },
    /// The CA bundle file was read but is unusable (the inner error says why).
    #[error("error loading CA bundle for {path:?}: {source}")]
    Load {
        /// The file's path.
        path: String,
        /// What is wrong with its content.
        #[source]
        source: Box<X509Error>,
    },
    /// The CA bundle has no `CERTIFICATE` block (client-go's text).
    #[error("data does not contain any valid RSA or ECDSA certificates")]
    NoCaCertificates,
    /// The CA bundle is not well-formed PEM.
    #[error("invalid PEM in CA bundle: {reason}")]
    Pem {
        /// The PEM reader's error.
        reason: String,
    },
    /// A CA certificate could not be parsed or used as a trust anchor.
    #[error("invalid CA certificate: {reason}")]
    InvalidCaCertificate {
        /// The parser's error.
        reason: String,
    },
    /// The verifier could not be built from the CA certificates.
    #[error("unable to build the client certificate verifier: {reason}")]
    Verifier {
        /// rustls's error.
        reason: String,
    },
    /// [`X509Authenticator::authenticate`] was given no certificate. The chain never asks then
    /// (upstream: no certificate, no opinion).
    #[error("no client certificate was presented")]
    NoCertificate,
    /// The end-entity certificate could not be parsed.
    #[error("unable to parse the client certificate: {reason}")]
    Parse {
        /// The parser's error.
        reason: String,
    },
    /// The chain does not verify against the CA bundle for client authentication now.
    #[error("verifying certificate {identifier} failed: {source}")]
    Verify {
        /// Upstream's identifier of the certificate: `SN=<decimal serial>, SKID=<hex>, AKID=<hex>`,
        /// the key identifiers in upper-case hex with `:` between bytes.
        identifier: String,
        /// rustls's verdict.
        #[source]
        source: rustls::Error,
    },
    /// The verified certificate's subject has no, or an empty, CommonName. Upstream's
    /// `CommonNameUserConversion` then returns neither a user nor an error, so the chain does not
    /// count this as a failure: other authenticators, then anonymous, may still apply.
    #[error("the client certificate's subject has no CommonName")]
    EmptyCommonName,
    /// A subject attribute value is not a string Go's parser accepts.
    #[error("invalid certificate subject: {reason}")]
    Subject {
        /// What is wrong.
        reason: String,
    },
    /// The uid attribute is repeated or empty (upstream's texts).
    #[error("{reason}")]
    Uid {
        /// Upstream's message.
        reason: String,
    },
}

impl X509Error {
    /// Whether upstream would have had no opinion rather than an error: true only for
    /// [`X509Error::EmptyCommonName`] (and [`X509Error::NoCertificate`], which upstream never
    /// reaches). The chain then goes on as if no certificate had been presented.
    pub fn is_no_opinion(&self) -> bool {
        matches!(self, X509Error::EmptyCommonName | X509Error::NoCertificate)
    }
}

/// The `notAfter` time of a certificate, `None` when it cannot be parsed. A gateway that caches
/// a connection's verification uses it to reject requests once the certificate has expired, as
/// upstream's per-request verification would.
pub fn not_after(certificate: &CertificateDer<'_>) -> Option<SystemTime> {
    let (_, parsed) = x509_parser::parse_x509_certificate(certificate).ok()?;
    let seconds = parsed.validity().not_after.timestamp();
    let offset = Duration::from_secs(seconds.unsigned_abs());
    if seconds >= 0 {
        UNIX_EPOCH.checked_add(offset)
    } else {
        UNIX_EPOCH.checked_sub(offset)
    }
}

/// Verifies client certificate chains against a CA bundle and turns a verified certificate into a
/// user, with upstream's `CommonNameUserConversion`.
#[derive(Clone)]
pub struct X509Authenticator {
    verifier: Arc<dyn ClientCertVerifier>,
    ca_certificates: usize,
}

impl fmt::Debug for X509Authenticator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("X509Authenticator")
            .field("ca_certificates", &self.ca_certificates)
            .finish_non_exhaustive()
    }
}

impl X509Authenticator {
    /// Builds the authenticator from a PEM bundle of one or more CA certificates.
    ///
    /// As client-go's `cert.ParseCertsPEM`: blocks other than `CERTIFICATE` are skipped, a
    /// certificate that does not parse fails the bundle, and a bundle without any certificate is
    /// [`X509Error::NoCaCertificates`].
    pub fn from_pem(ca_bundle_pem: &[u8]) -> Result<Self, X509Error> {
        let mut roots = RootCertStore::empty();
        for item in CertificateDer::pem_slice_iter(ca_bundle_pem) {
            let der = item.map_err(|e| X509Error::Pem {
                reason: e.to_string(),
            })?;
            x509_parser::parse_x509_certificate(&der).map_err(|e| {
                X509Error::InvalidCaCertificate {
                    reason: e.to_string(),
                }
            })?;
            roots
                .add(der)
                .map_err(|e| X509Error::InvalidCaCertificate {
                    reason: e.to_string(),
                })?;
        }
        if roots.is_empty() {
            return Err(X509Error::NoCaCertificates);
        }
        let ca_certificates = roots.len();
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
            .build()
            .map_err(|e| X509Error::Verifier {
                reason: e.to_string(),
            })?;
        Ok(X509Authenticator {
            verifier,
            ca_certificates,
        })
    }

    /// Reads the PEM CA bundle at `path` (kube-apiserver's `--client-ca-file`) and builds the
    /// authenticator (see [`X509Authenticator::from_pem`]).
    pub fn load(path: &Path) -> Result<Self, X509Error> {
        let name = path.display().to_string();
        let pem = std::fs::read(path).map_err(|source| X509Error::Read {
            path: name.clone(),
            source,
        })?;
        Self::from_pem(&pem).map_err(|e| X509Error::Load {
            path: name,
            source: Box::new(e),
        })
    }

    /// How many CA certificates the bundle holds.
    pub fn ca_certificates(&self) -> usize {
        self.ca_certificates
    }

    /// Verifies `chain` (the end-entity certificate first, then any intermediates, as the client
    /// sent them) for client authentication at the current time, and returns its user: name from
    /// the subject CommonName, groups from the subject Organizations, uid from the Kubernetes uid
    /// attribute, the credential id in `extra`. See the module documentation for the rules.
    pub fn authenticate(&self, chain: &[CertificateDer<'_>]) -> Result<UserInfo, X509Error> {
        self.authenticate_at(chain, UnixTime::now())
    }

    /// [`X509Authenticator::authenticate`] at the time `now`.
    pub(crate) fn authenticate_at(
        &self,
        chain: &[CertificateDer<'_>],
        now: UnixTime,
    ) -> Result<UserInfo, X509Error> {
        let (end_entity, intermediates) = chain.split_first().ok_or(X509Error::NoCertificate)?;
        let (_, certificate) =
            x509_parser::parse_x509_certificate(end_entity).map_err(|e| X509Error::Parse {
                reason: e.to_string(),
            })?;
        self.verifier
            .verify_client_cert(end_entity, intermediates, now)
            .map_err(|source| X509Error::Verify {
                identifier: certificate_identifier(&certificate),
                source,
            })?;
        user_from_certificate(&certificate, end_entity)
    }
}

/// The user a certificate names, WITHOUT verifying it: the subject conversion of
/// [`X509Authenticator::authenticate`] alone, for the fuzz target (`fuzz/`, target `authn`)
/// and diagnostics. Never use its answer to authenticate anyone.
pub fn unverified_user(der: &[u8]) -> Result<UserInfo, X509Error> {
    let (_, certificate) =
        x509_parser::parse_x509_certificate(der).map_err(|e| X509Error::Parse {
            reason: e.to_string(),
        })?;
    user_from_certificate(&certificate, der)
}

/// Upstream's `CommonNameUserConversion` on a verified certificate.
fn user_from_certificate(
    certificate: &X509Certificate<'_>,
    der: &[u8],
) -> Result<UserInfo, X509Error> {
    let mut common_name = String::new();
    let mut organizations = Vec::new();
    let mut uids = Vec::new();
    for attribute in certificate.subject().iter_attributes() {
        let value = attribute_string(attribute).map_err(|reason| X509Error::Subject { reason })?;
        let oid = attribute.attr_type();
        if *oid == OID_X509_COMMON_NAME {
            common_name = value;
        } else if *oid == OID_X509_ORGANIZATION_NAME {
            organizations.push(value);
        } else if oid.as_bytes() == X509_UID_OID_DER {
            uids.push(value);
        }
    }
    if common_name.is_empty() {
        return Err(X509Error::EmptyCommonName);
    }
    let uid = uid_from_values(uids)?;
    let id = format!("X509SHA256={}", hex_lower(&Sha256::digest(der)));
    Ok(UserInfo {
        name: common_name,
        uid,
        groups: organizations,
        extra: [(CREDENTIAL_ID_KEY.to_owned(), vec![id])].into(),
    })
}

/// Upstream's `parseUIDFromCert` on the values of the uid attributes, in subject order.
fn uid_from_values(mut uids: Vec<String>) -> Result<String, X509Error> {
    match uids.len() {
        0 => Ok(String::new()),
        1 => {
            let uid = uids.remove(0);
            if uid.is_empty() {
                Err(X509Error::Uid {
                    reason: "UID cannot be an empty string".to_owned(),
                })
            } else {
                Ok(uid)
            }
        }
        _ => Err(X509Error::Uid {
            // Go's `%v` of a string slice: `[a b]`.
            reason: format!("expected 1 UID, but found multiple: [{}]", uids.join(" ")),
        }),
    }
}

/// Decodes a subject attribute value the way Go's certificate parser (`parseASN1String`) does.
fn attribute_string(attribute: &AttributeTypeAndValue<'_>) -> Result<String, String> {
    let value = attribute.attr_value();
    let bytes = value.data;
    if value.class() != Class::Universal {
        return Err(format!("unsupported string type: {}", value.tag().0));
    }
    match value.tag() {
        Tag::PrintableString => {
            if bytes.iter().all(|&b| is_printable(b)) {
                Ok(latin1(bytes))
            } else {
                Err("invalid PrintableString".to_owned())
            }
        }
        Tag::Utf8String => std::str::from_utf8(bytes)
            .map(str::to_owned)
            .map_err(|_| "invalid UTF-8 string".to_owned()),
        Tag::Ia5String => {
            if bytes.is_ascii() {
                Ok(latin1(bytes))
            } else {
                Err("invalid IA5String".to_owned())
            }
        }
        Tag::NumericString => {
            if bytes.iter().all(|&b| b.is_ascii_digit() || b == b' ') {
                Ok(latin1(bytes))
            } else {
                Err("invalid NumericString".to_owned())
            }
        }
        // T.61 is read as Latin-1, as Go (and BoringSSL) do.
        Tag::T61String => Ok(latin1(bytes)),
        Tag::BmpString => {
            if bytes.len() % 2 != 0 {
                return Err("invalid BMPString".to_owned());
            }
            // A trailing NUL code unit is a terminator, not content.
            let bytes = bytes.strip_suffix(&[0, 0]).unwrap_or(bytes);
            let units = bytes
                .chunks_exact(2)
                .map(|c| u16::from_be_bytes([c[0], c[1]]));
            Ok(char::decode_utf16(units)
                .map(|c| c.unwrap_or(char::REPLACEMENT_CHARACTER))
                .collect())
        }
        // Go prints the tag number.
        other => Err(format!("unsupported string type: {}", other.0)),
    }
}

/// Go's PrintableString alphabet, which also lets `*` and `&` through (both occur in real
/// certificates).
fn is_printable(b: u8) -> bool {
    b.is_ascii_alphanumeric()
        || matches!(
            b,
            b' ' | b'\'' | b'(' | b')' | b'+' | b',' | b'-' | b'.' | b'/' | b':' | b'=' | b'?'
        )
        || b == b'*'
        || b == b'&'
}

/// Each byte as the character of the same number (ASCII stays ASCII; T.61 is read as Latin-1).
fn latin1(bytes: &[u8]) -> String {
    bytes.iter().map(|&b| char::from(b)).collect()
}

fn hex_lower(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Upstream's `columnSeparatedHex`: upper-case hex, `:` between bytes.
fn column_separated_hex(bytes: &[u8]) -> String {
    bytes
        .iter()
        .map(|b| format!("{b:02X}"))
        .collect::<Vec<_>>()
        .join(":")
}

/// Upstream's `certificateIdentifier`: `SN=<decimal serial>, SKID=<hex>, AKID=<hex>`.
fn certificate_identifier(certificate: &X509Certificate<'_>) -> String {
    let mut subject_key_id: &[u8] = &[];
    let mut authority_key_id: &[u8] = &[];
    for extension in certificate.extensions() {
        match extension.parsed_extension() {
            ParsedExtension::SubjectKeyIdentifier(id) => subject_key_id = id.0,
            ParsedExtension::AuthorityKeyIdentifier(aki) => {
                if let Some(id) = &aki.key_identifier {
                    authority_key_id = id.0;
                }
            }
            _ => {}
        }
    }
    format!(
        "SN={}, SKID={}, AKID={}",
        certificate.serial,
        column_separated_hex(subject_key_id),
        column_separated_hex(authority_key_id)
    )
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use rcgen::{
        BasicConstraints, CertificateParams, DistinguishedName, DnType, DnValue,
        ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair, KeyUsagePurpose, SerialNumber,
    };
    use rustls::CertificateError;

    /// A certificate authority for tests.
    pub(crate) struct TestCa {
        pub(crate) params: CertificateParams,
        pub(crate) key: KeyPair,
        pub(crate) pem: String,
        pub(crate) der: CertificateDer<'static>,
    }

    impl TestCa {
        pub(crate) fn new(name: &str) -> TestCa {
            let key = KeyPair::generate().unwrap();
            let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
            params.distinguished_name = DistinguishedName::new();
            params.distinguished_name.push(DnType::CommonName, name);
            params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
            params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
            let cert = params.self_signed(&key).unwrap();
            TestCa {
                pem: cert.pem(),
                der: cert.der().clone(),
                params,
                key,
            }
        }

        /// An intermediate CA signed by this one.
        pub(crate) fn intermediate(&self, name: &str) -> TestCa {
            let key = KeyPair::generate().unwrap();
            let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
            params.distinguished_name = DistinguishedName::new();
            params.distinguished_name.push(DnType::CommonName, name);
            params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
            params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
            let cert = params
                .signed_by(&key, &Issuer::from_params(&self.params, &self.key))
                .unwrap();
            TestCa {
                pem: cert.pem(),
                der: cert.der().clone(),
                params,
                key,
            }
        }

        /// Signs a leaf certificate with the given subject attributes; `edit` adjusts the rest.
        pub(crate) fn leaf(
            &self,
            subject: &[(DnType, DnValue)],
            edit: impl FnOnce(&mut CertificateParams),
        ) -> CertificateDer<'static> {
            let key = KeyPair::generate().unwrap();
            let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
            params.distinguished_name = DistinguishedName::new();
            for (ty, value) in subject {
                params.distinguished_name.push(ty.clone(), value.clone());
            }
            params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
            params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
            edit(&mut params);
            params
                .signed_by(&key, &Issuer::from_params(&self.params, &self.key))
                .unwrap()
                .der()
                .clone()
        }

        /// A client certificate `CN=<cn>` with one Organization per group. rcgen keeps one value
        /// per attribute type, so the second Organization is written under a custom attribute
        /// type with the same OID (2.5.4.10), which encodes identically.
        pub(crate) fn client(&self, cn: &str, groups: &[&str]) -> CertificateDer<'static> {
            assert!(
                groups.len() <= 2,
                "rcgen can encode at most two Organizations"
            );
            let mut subject = vec![(DnType::CommonName, DnValue::from(cn))];
            for (i, g) in groups.iter().enumerate() {
                let ty = if i == 0 {
                    DnType::OrganizationName
                } else {
                    DnType::CustomDnType(vec![2, 5, 4, 10])
                };
                subject.push((ty, DnValue::from(*g)));
            }
            self.leaf(&subject, |_| {})
        }
    }

    fn o2() -> DnType {
        DnType::CustomDnType(vec![2, 5, 4, 10])
    }

    fn uid_type() -> DnType {
        DnType::CustomDnType(vec![1, 3, 6, 1, 4, 1, 57683, 2])
    }

    fn credential_id(der: &CertificateDer<'_>) -> String {
        format!("X509SHA256={}", hex_lower(&Sha256::digest(der.as_ref())))
    }

    fn verify_source(err: X509Error) -> rustls::Error {
        match err {
            X509Error::Verify { source, .. } => source,
            other => panic!("expected a verification failure, got {other:?}"),
        }
    }

    #[test]
    fn uid_oid_bytes_are_1_3_6_1_4_1_57683_2() {
        let oid = x509_parser::oid_registry::Oid::new(X509_UID_OID_DER.into());
        assert_eq!(oid.to_id_string(), "1.3.6.1.4.1.57683.2");
    }

    #[test]
    fn client_certificate_becomes_user() {
        let ca = TestCa::new("client-ca");
        let auth = X509Authenticator::from_pem(ca.pem.as_bytes()).unwrap();
        assert_eq!(auth.ca_certificates(), 1);
        let cert = ca.client("jane", &["dev", "ops"]);
        let user = auth.authenticate(std::slice::from_ref(&cert)).unwrap();
        assert_eq!(
            user,
            UserInfo {
                name: "jane".into(),
                uid: String::new(),
                groups: vec!["dev".into(), "ops".into()],
                extra: [(CREDENTIAL_ID_KEY.to_owned(), vec![credential_id(&cert)])].into(),
            }
        );
        // Not added by this authenticator: the chain adds system:authenticated.
        assert!(!user.groups.iter().any(|g| g == "system:authenticated"));
    }

    #[test]
    fn verification_failures() {
        let ca = TestCa::new("client-ca");
        let other = TestCa::new("other-ca");
        let auth = X509Authenticator::from_pem(ca.pem.as_bytes()).unwrap();

        // Signed by a CA that is not in the bundle.
        let foreign = other.client("jane", &["dev"]);
        let src = verify_source(auth.authenticate(&[foreign]).unwrap_err());
        assert_eq!(
            src,
            rustls::Error::InvalidCertificate(CertificateError::UnknownIssuer)
        );

        // Expired.
        let expired = ca.leaf(&[(DnType::CommonName, "jane".into())], |p| {
            p.not_before = rcgen::date_time_ymd(2000, 1, 1);
            p.not_after = rcgen::date_time_ymd(2001, 1, 1);
        });
        let src = verify_source(auth.authenticate(&[expired]).unwrap_err());
        assert!(
            matches!(
                src,
                rustls::Error::InvalidCertificate(
                    CertificateError::Expired | CertificateError::ExpiredContext { .. }
                )
            ),
            "{src:?}"
        );

        // Not yet valid.
        let future = ca.leaf(&[(DnType::CommonName, "jane".into())], |p| {
            p.not_before = rcgen::date_time_ymd(2200, 1, 1);
            p.not_after = rcgen::date_time_ymd(2201, 1, 1);
        });
        let src = verify_source(auth.authenticate(&[future]).unwrap_err());
        assert!(
            matches!(
                src,
                rustls::Error::InvalidCertificate(
                    CertificateError::NotValidYet | CertificateError::NotValidYetContext { .. }
                )
            ),
            "{src:?}"
        );

        // Server authentication only.
        let server_only = ca.leaf(&[(DnType::CommonName, "jane".into())], |p| {
            p.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        });
        let src = verify_source(auth.authenticate(&[server_only]).unwrap_err());
        assert!(
            matches!(
                src,
                rustls::Error::InvalidCertificate(
                    CertificateError::InvalidPurpose
                        | CertificateError::InvalidPurposeContext { .. }
                )
            ),
            "{src:?}"
        );
    }

    #[test]
    fn no_extended_key_usage_allows_client_auth() {
        // Go and webpki both treat a missing EKU extension as "any usage".
        let ca = TestCa::new("client-ca");
        let auth = X509Authenticator::from_pem(ca.pem.as_bytes()).unwrap();
        let cert = ca.leaf(&[(DnType::CommonName, "jane".into())], |p| {
            p.extended_key_usages.clear();
        });
        assert_eq!(auth.authenticate(&[cert]).unwrap().name, "jane");
    }

    #[test]
    fn verify_error_names_the_certificate_like_upstream() {
        let ca = TestCa::new("client-ca");
        let mut other = TestCa::new("other-ca");
        let auth = X509Authenticator::from_pem(ca.pem.as_bytes()).unwrap();
        // The issuer's key identifier becomes the leaf's AKID.
        other.params.key_identifier_method = rcgen::KeyIdMethod::PreSpecified(vec![0x12, 0xef]);
        let cert = other.leaf(&[(DnType::CommonName, "jane".into())], |p| {
            p.serial_number = Some(SerialNumber::from_slice(&[0x01, 0x00]));
            // rcgen writes the SKID only with basic constraints, the AKID only on request.
            p.is_ca = IsCa::ExplicitNoCa;
            p.key_identifier_method = rcgen::KeyIdMethod::PreSpecified(vec![0xab, 0x0c, 0x01]);
            p.use_authority_key_identifier_extension = true;
        });
        let err = auth.authenticate(&[cert]).unwrap_err();
        assert_eq!(
            err.to_string(),
            "verifying certificate SN=256, SKID=AB:0C:01, AKID=12:EF failed: \
             invalid peer certificate: UnknownIssuer"
        );

        // Without key identifiers, both are empty.
        let cert = other.leaf(&[(DnType::CommonName, "jane".into())], |p| {
            p.serial_number = Some(SerialNumber::from_slice(&[0x2a]));
        });
        let err = auth.authenticate(&[cert]).unwrap_err();
        assert_eq!(
            err.to_string(),
            "verifying certificate SN=42, SKID=, AKID= failed: invalid peer certificate: UnknownIssuer"
        );
    }

    #[test]
    fn intermediates_from_the_presented_chain() {
        let root = TestCa::new("root-ca");
        let intermediate = root.intermediate("intermediate-ca");
        let auth = X509Authenticator::from_pem(root.pem.as_bytes()).unwrap();
        let cert = intermediate.client("jane", &["dev"]);
        let user = auth
            .authenticate(&[cert.clone(), intermediate.der.clone()])
            .unwrap();
        assert_eq!(user.name, "jane");
        assert_eq!(user.groups, vec!["dev".to_owned()]);
        // Without the intermediate the chain cannot be built.
        let src = verify_source(auth.authenticate(&[cert]).unwrap_err());
        assert_eq!(
            src,
            rustls::Error::InvalidCertificate(CertificateError::UnknownIssuer)
        );
    }

    #[test]
    fn bundle_with_several_cas() {
        let a = TestCa::new("ca-a");
        let b = TestCa::new("ca-b");
        let bundle = format!(
            "junk before\n{}-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n{}",
            a.pem, b.pem
        );
        let auth = X509Authenticator::from_pem(bundle.as_bytes()).unwrap();
        assert_eq!(auth.ca_certificates(), 2);
        assert_eq!(auth.authenticate(&[a.client("x", &[])]).unwrap().name, "x");
        assert_eq!(auth.authenticate(&[b.client("y", &[])]).unwrap().name, "y");
    }

    #[test]
    fn bundle_errors() {
        let cases: &[(&str, &[u8], &str)] = &[
            (
                "empty",
                b"",
                "data does not contain any valid RSA or ECDSA certificates",
            ),
            (
                "no certificate block",
                b"-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n",
                "data does not contain any valid RSA or ECDSA certificates",
            ),
            (
                "not PEM",
                b"hello",
                "data does not contain any valid RSA or ECDSA certificates",
            ),
        ];
        for (case, pem, want) in cases {
            let err = X509Authenticator::from_pem(pem).unwrap_err();
            assert!(
                matches!(err, X509Error::NoCaCertificates),
                "{case}: {err:?}"
            );
            assert_eq!(err.to_string(), *want, "{case}");
        }
        let garbage = b"-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n";
        let err = X509Authenticator::from_pem(garbage).unwrap_err();
        assert!(
            matches!(err, X509Error::InvalidCaCertificate { .. }),
            "{err:?}"
        );
    }

    #[test]
    fn load_reads_the_bundle() {
        let ca = TestCa::new("client-ca");
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ca.crt");
        std::fs::write(&path, &ca.pem).unwrap();
        let auth = X509Authenticator::load(&path).unwrap();
        assert_eq!(
            auth.authenticate(&[ca.client("jane", &[])]).unwrap().name,
            "jane"
        );

        std::fs::write(&path, "").unwrap();
        let err = X509Authenticator::load(&path).unwrap_err();
        assert_eq!(
            err.to_string(),
            format!(
                "error loading CA bundle for {:?}: data does not contain any valid RSA or ECDSA certificates",
                path.display().to_string()
            )
        );
        let err = X509Authenticator::load(&dir.path().join("missing.crt")).unwrap_err();
        assert!(matches!(err, X509Error::Read { .. }), "{err:?}");
    }

    #[test]
    fn subject_to_user_table() {
        let ca = TestCa::new("client-ca");
        let auth = X509Authenticator::from_pem(ca.pem.as_bytes()).unwrap();
        let bmp = |s: &str| DnValue::BmpString(rcgen::string::BmpString::try_from(s).unwrap());
        let printable = |s: &str| {
            DnValue::PrintableString(rcgen::string::PrintableString::try_from(s).unwrap())
        };
        let teletex =
            |s: &str| DnValue::TeletexString(rcgen::string::TeletexString::try_from(s).unwrap());
        let ia5 = |s: &str| DnValue::Ia5String(rcgen::string::Ia5String::try_from(s).unwrap());

        type Want = Result<(&'static str, &'static str, Vec<&'static str>), &'static str>;
        type Subject = Vec<(DnType, DnValue)>;
        let cases: Vec<(&str, Subject, Want)> = vec![
            (
                "CN and two Organizations, in order",
                vec![
                    (DnType::CommonName, "jane".into()),
                    (DnType::OrganizationName, "dev".into()),
                    (o2(), "ops".into()),
                ],
                Ok(("jane", "", vec!["dev", "ops"])),
            ),
            (
                "Organizations before the CN keep their order",
                vec![
                    (o2(), "b".into()),
                    (DnType::OrganizationName, "a".into()),
                    (DnType::CommonName, "jane".into()),
                ],
                Ok(("jane", "", vec!["b", "a"])),
            ),
            (
                "no Organization: no groups",
                vec![(DnType::CommonName, "jane".into())],
                Ok(("jane", "", vec![])),
            ),
            (
                "other attributes are ignored",
                vec![
                    (DnType::CountryName, printable("DE")),
                    (DnType::OrganizationalUnitName, "unit".into()),
                    (DnType::CommonName, "jane".into()),
                ],
                Ok(("jane", "", vec![])),
            ),
            (
                "the last CommonName wins",
                vec![
                    (DnType::CommonName, "first".into()),
                    (DnType::CustomDnType(vec![2, 5, 4, 3]), "last".into()),
                ],
                Ok(("last", "", vec![])),
            ),
            (
                "string types Go accepts",
                vec![
                    (DnType::CommonName, printable("jane")),
                    (DnType::OrganizationName, bmp("d\u{e9}v")),
                    (o2(), ia5("ops")),
                ],
                Ok(("jane", "", vec!["d\u{e9}v", "ops"])),
            ),
            (
                "T61String is read as Latin-1",
                vec![(DnType::CommonName, teletex("jane"))],
                Ok(("jane", "", vec![])),
            ),
            (
                "uid attribute",
                vec![
                    (DnType::CommonName, "jane".into()),
                    (uid_type(), "42".into()),
                ],
                Ok(("jane", "42", vec![])),
            ),
            (
                "empty uid attribute",
                vec![(DnType::CommonName, "jane".into()), (uid_type(), "".into())],
                Err("UID cannot be an empty string"),
            ),
            (
                "empty CommonName",
                vec![
                    (DnType::CommonName, "".into()),
                    (DnType::OrganizationName, "dev".into()),
                ],
                Err("the client certificate's subject has no CommonName"),
            ),
            (
                "no CommonName",
                vec![(DnType::OrganizationName, "dev".into())],
                Err("the client certificate's subject has no CommonName"),
            ),
            (
                "an empty last CommonName",
                vec![
                    (DnType::CommonName, "jane".into()),
                    (DnType::CustomDnType(vec![2, 5, 4, 3]), "".into()),
                ],
                Err("the client certificate's subject has no CommonName"),
            ),
            (
                "UniversalString is not a type Go accepts",
                vec![
                    (DnType::CommonName, "jane".into()),
                    (
                        DnType::OrganizationName,
                        DnValue::UniversalString(
                            rcgen::string::UniversalString::try_from("dev").unwrap(),
                        ),
                    ),
                ],
                Err("invalid certificate subject: unsupported string type: 28"),
            ),
        ];
        for (case, subject, want) in cases {
            let cert = ca.leaf(&subject, |_| {});
            let got = auth.authenticate(std::slice::from_ref(&cert));
            match (got, want) {
                (Ok(user), Ok((name, uid, groups))) => {
                    assert_eq!(user.name, name, "{case}");
                    assert_eq!(user.uid, uid, "{case}");
                    assert_eq!(user.groups, groups, "{case}");
                    assert_eq!(
                        user.extra,
                        [(CREDENTIAL_ID_KEY.to_owned(), vec![credential_id(&cert)])].into(),
                        "{case}"
                    );
                }
                (Err(err), Err(text)) => assert_eq!(err.to_string(), text, "{case}"),
                (got, want) => panic!("{case}: got {got:?}, want {want:?}"),
            }
        }
    }

    #[test]
    fn uid_rules() {
        let one = |v: &[&str]| uid_from_values(v.iter().map(|s| (*s).to_owned()).collect());
        assert_eq!(one(&[]).unwrap(), "");
        assert_eq!(one(&["42"]).unwrap(), "42");
        assert_eq!(
            one(&[""]).unwrap_err().to_string(),
            "UID cannot be an empty string"
        );
        assert_eq!(
            one(&["1", "2"]).unwrap_err().to_string(),
            "expected 1 UID, but found multiple: [1 2]"
        );
    }

    #[test]
    fn string_alphabets() {
        assert!("AZaz09 '()+,-./:=?*&".bytes().all(is_printable));
        assert!(!"@_!\"#<>\u{7f}".bytes().any(is_printable));
        assert_eq!(latin1(&[0x6a, 0xe9]), "j\u{e9}");
        assert_eq!(column_separated_hex(&[]), "");
        assert_eq!(column_separated_hex(&[0x0a]), "0A");
        assert_eq!(column_separated_hex(&[0x0a, 0xff, 0x00]), "0A:FF:00");
    }

    #[test]
    fn not_after_is_the_certificates() {
        let ca = TestCa::new("client-ca");
        let cert = ca.leaf(&[(DnType::CommonName, "jane".into())], |p| {
            p.not_before = rcgen::date_time_ymd(2000, 1, 1);
            p.not_after = rcgen::date_time_ymd(2001, 1, 1);
        });
        assert_eq!(
            not_after(&cert),
            Some(UNIX_EPOCH + Duration::from_secs(978_307_200))
        );
        assert_eq!(not_after(&CertificateDer::from(vec![0x30, 0x00])), None);
    }

    #[test]
    fn no_opinion_errors() {
        assert!(X509Error::EmptyCommonName.is_no_opinion());
        assert!(X509Error::NoCertificate.is_no_opinion());
        assert!(!X509Error::NoCaCertificates.is_no_opinion());
        assert!(!X509Error::Uid { reason: "x".into() }.is_no_opinion());
    }

    #[test]
    fn empty_chain_is_no_certificate() {
        let ca = TestCa::new("client-ca");
        let auth = X509Authenticator::from_pem(ca.pem.as_bytes()).unwrap();
        assert!(matches!(
            auth.authenticate(&[]),
            Err(X509Error::NoCertificate)
        ));
    }

    #[test]
    fn garbage_end_entity_is_a_parse_error() {
        let ca = TestCa::new("client-ca");
        let auth = X509Authenticator::from_pem(ca.pem.as_bytes()).unwrap();
        let err = auth
            .authenticate(&[CertificateDer::from(vec![0x30, 0x03, 0x02, 0x01, 0x01])])
            .unwrap_err();
        assert!(matches!(err, X509Error::Parse { .. }), "{err:?}");
    }

    #[test]
    fn authenticate_at_uses_the_given_time() {
        let ca = TestCa::new("client-ca");
        let auth = X509Authenticator::from_pem(ca.pem.as_bytes()).unwrap();
        let cert = ca.leaf(&[(DnType::CommonName, "jane".into())], |p| {
            p.not_before = rcgen::date_time_ymd(2000, 1, 1);
            p.not_after = rcgen::date_time_ymd(2001, 1, 1);
        });
        let mid_2000 = UnixTime::since_unix_epoch(std::time::Duration::from_secs(962_409_600));
        let user = auth
            .authenticate_at(std::slice::from_ref(&cert), mid_2000)
            .unwrap();
        assert_eq!(user.name, "jane");
        assert!(auth.authenticate(&[cert]).is_err());
    }
}
