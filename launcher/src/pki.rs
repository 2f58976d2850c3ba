//! crdplane's own PKI for a local stack, as kubeadm's `certs` phase makes one for a cluster
//! (cmd/kubeadm/app/phases/certs, names and lifetimes from cmd/kubeadm/app/constants): in
//! `<data-dir>/pki/`, a CA (`ca.crt`, `ca.key`), the gateway's serving certificate
//! (`apiserver.crt`, `apiserver.key`) and the admin's client certificate (`admin.crt`,
//! `admin.key`), which `crdplane up` puts in the kubeconfig.
//!
//! [`Pki::ensure`] keeps an existing CA (whoever made it: an operator may put their own
//! `ca.crt`/`ca.key` there, as with kubeadm's external CA) and an existing admin certificate
//! that the CA still vouches for and that is not about to expire, so kubeconfigs keep working
//! across restarts; it creates whatever is missing and issues the serving certificate anew
//! each time, for `localhost`, `127.0.0.1`, `::1` and the hosts it is given (the listen
//! host). Keys are ECDSA P-256 (rcgen on ring), key files mode 0600, every file written
//! atomically (a temporary file renamed over it). The CA lives 10 years, leaf certificates 1
//! year, backdated 5 minutes against clock skew (kubeadm's `CertificateBackdate`). Client
//! certificates carry the user as CN and the groups as O, which is how upstream's x509
//! authenticator (staging/src/k8s.io/apiserver/pkg/authentication/request/x509) reads them;
//! the admin is `crdplane-admin` in `system:masters`, upstream's superuser group.
//!
//! The processes' gRPC connections to each other are mutual TLS (`crdplane_transport::mtls`)
//! under a CA of their own, `services-ca.crt`/`services-ca.key` (kept like the CA): any
//! certificate that CA signs may call the services, so it must not be the CA of the users'
//! client certificates. Each process kind (storage, validation, registry, gateway, and the
//! optional Envoy between them, mesh-proxy) gets
//! `services/<kind>.crt`/`.key`, CN `crdplane-<kind>`, O `crdplane:services`, usable for
//! serving and calling (EKU serverAuth and clientAuth), for the same names as the serving
//! certificate, issued anew each time like it.
//!
//! Beside them, `encryption-config.yaml` (mode 0600, kept): the gateway's
//! `--encryption-provider-config`, made once with a random 32-byte `secretbox` key `key1`
//! for Secrets and `identity` second, so Secrets are written encrypted and those stored
//! before the file existed still read (rotation: add a key first, rewrite, drop the old).
//!
//! [`make`] is `crdplane pki`: the same files in a directory of the operator's, for the names a
//! deployment's processes are reached by (deploy/README.md), plus the Envoy front proxy's
//! health-check client certificate.
//!
//! Each certificate issued or kept is checked with webpki ([`crate::tls`]): the serving one
//! must chain to `ca.crt` for every SAN, the admin one must verify as a client certificate.
//! Not on the request path.

use crate::tls;
use anyhow::{Context, Result};
use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose, PKCS_ECDSA_P256_SHA256, SanType,
};
use std::io::Write;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// The CA certificate's file name.
pub const CA_CERT: &str = "ca.crt";
/// The CA key's file name.
pub const CA_KEY: &str = "ca.key";
/// The gateway's serving certificate's file name (kubeadm's `apiserver.crt`).
pub const SERVING_CERT: &str = "apiserver.crt";
/// The gateway's serving key's file name.
pub const SERVING_KEY: &str = "apiserver.key";
/// The admin's client certificate's file name.
pub const ADMIN_CERT: &str = "admin.crt";
/// The admin's client key's file name.
pub const ADMIN_KEY: &str = "admin.key";

/// The service-account signing key (kubeadm's `sa.key`, here ECDSA P-256 PKCS#8).
pub const SA_KEY: &str = "sa.key";
/// Its public half (kubeadm's `sa.pub`), which verifies service-account tokens.
pub const SA_PUB: &str = "sa.pub";
/// The service-account token issuer (and API audience) the gateways get: kubeadm's.
pub const SA_ISSUER: &str = "https://kubernetes.default.svc.cluster.local";

/// The services CA's certificate file name (mutual TLS between crdplane's processes).
pub const SERVICES_CA_CERT: &str = "services-ca.crt";
/// The services CA's key file name.
pub const SERVICES_CA_KEY: &str = "services-ca.key";
/// The directory (in the PKI directory) of the processes' certificates.
pub const SERVICES_DIR: &str = "services";
/// Common name of the services CA.
pub const SERVICES_CA_NAME: &str = "crdplane-services-ca";
/// The group (O) of the processes' certificates.
pub const SERVICES_GROUP: &str = "crdplane:services";
/// The process kinds that get a certificate of the services CA.
/// `mesh-proxy` is the optional Envoy between them (`deploy/envoy/services-mesh.yaml`), which
/// the services serve as the caller it forwards (`crdplane_transport::mtls`).
pub const SERVICE_KINDS: [&str; 5] = ["storage", "validation", "registry", "gateway", "mesh-proxy"];

/// The encryption-at-rest configuration's file name (the gateway's
/// `--encryption-provider-config`).
pub const ENCRYPTION_CONFIG: &str = "encryption-config.yaml";

/// The admin user (CN of its client certificate).
pub const ADMIN_USER: &str = "crdplane-admin";
/// The admin's group (O of its client certificate): upstream's superuser group.
pub const ADMIN_GROUP: &str = "system:masters";

/// Common name of the CA.
pub const CA_NAME: &str = "crdplane-ca";
/// Common name of the serving certificate.
pub const SERVING_NAME: &str = "crdplane-apiserver";

const DAY: u64 = 24 * 60 * 60;
/// Lifetime of the CA (kubeadm's `CACertificateValidityPeriod`).
pub const CA_VALIDITY: Duration = Duration::from_secs(10 * 365 * DAY);
/// Lifetime of a leaf certificate (kubeadm's `CertificateValidityPeriod`).
pub const CERT_VALIDITY: Duration = Duration::from_secs(365 * DAY);
/// How far certificates are backdated (kubeadm's `CertificateBackdate`).
pub const BACKDATE: Duration = Duration::from_secs(5 * 60);
/// A kept admin certificate that expires sooner than this is issued anew.
pub const RENEW_BEFORE: Duration = Duration::from_secs(30 * DAY);

/// The names every serving certificate is valid for.
pub const LOCAL_HOSTS: [&str; 3] = ["localhost", "127.0.0.1", "::1"];

/// The PKI of a local stack: where its files are and their PEM contents (see the module
/// docs).
pub struct Pki {
    dir: PathBuf,
    ca_cert_pem: String,
    ca_key_pem: String,
    serving_cert_pem: String,
    admin_cert_pem: String,
    admin_key_pem: String,
}

impl std::fmt::Debug for Pki {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pki")
            .field("dir", &self.dir)
            .finish_non_exhaustive()
    }
}

impl Pki {
    /// Makes sure `dir` holds the stack's PKI: keeps the CA and a still valid admin
    /// certificate, creates what is missing, issues the serving certificate for
    /// [`LOCAL_HOSTS`] and `hosts` (IPs or DNS names, also `[v6]`; unspecified addresses
    /// are left out).
    pub fn ensure(dir: &Path, hosts: &[String]) -> Result<Pki> {
        std::fs::create_dir_all(dir).with_context(|| format!("create {}", dir.display()))?;
        let now = SystemTime::now();
        let (ca_cert_pem, ca_key_pem, new_ca) =
            match (read_opt(&dir.join(CA_CERT))?, read_opt(&dir.join(CA_KEY))?) {
                (Some(c), Some(k)) => (c, k, false),
                _ => {
                    let (c, k) = new_ca(now)?;
                    write_public(&dir.join(CA_CERT), &c)?;
                    write_private(&dir.join(CA_KEY), &k)?;
                    (c, k, true)
                }
            };
        let mut pki = Pki {
            dir: dir.to_path_buf(),
            ca_cert_pem,
            ca_key_pem,
            serving_cert_pem: String::new(),
            admin_cert_pem: String::new(),
            admin_key_pem: String::new(),
        };
        let ca_path = pki.ca_cert_path();
        let broken_ca = |what: &str| {
            format!(
                "{what} does not chain to {}; remove {} to start a new CA",
                ca_path.display(),
                dir.display()
            )
        };

        let names = san_names(hosts);
        let mut params = leaf_params(SERVING_NAME, ExtendedKeyUsagePurpose::ServerAuth, now)?;
        for n in &names {
            params.subject_alt_names.push(san(n)?);
        }
        let (cert, key) = pki.sign(params)?;
        for n in &names {
            tls::verify_server_cert(&pki.ca_cert_pem, &cert, n, now)
                .with_context(|| broken_ca(&format!("the serving certificate for {n}")))?;
        }
        write_private(&pki.serving_key_path(), &key)?;
        write_public(&pki.serving_cert_path(), &cert)?;
        pki.serving_cert_pem = cert;

        let kept = match (
            read_opt(&pki.admin_cert_path())?,
            read_opt(&pki.admin_key_path())?,
        ) {
            (Some(c), Some(k)) if !new_ca && pki.still_good_client(&c, &k, now) => Some((c, k)),
            _ => None,
        };
        let (cert, key) = match kept {
            Some(ck) => ck,
            None => {
                let (c, k) = pki.issue_client(ADMIN_USER, &[ADMIN_GROUP])?;
                tls::verify_client_cert(&pki.ca_cert_pem, &c, now)
                    .with_context(|| broken_ca("the admin certificate"))?;
                write_private(&pki.admin_key_path(), &k)?;
                write_public(&pki.admin_cert_path(), &c)?;
                (c, k)
            }
        };
        pki.admin_cert_pem = cert;
        pki.admin_key_pem = key;

        // The services CA (kept) and a certificate per process kind (issued anew).
        let (services_ca_cert, services_ca_key) = match (
            read_opt(&dir.join(SERVICES_CA_CERT))?,
            read_opt(&dir.join(SERVICES_CA_KEY))?,
        ) {
            (Some(c), Some(k)) => (c, k),
            _ => {
                let (c, k) = new_ca_named(SERVICES_CA_NAME, now)?;
                write_public(&dir.join(SERVICES_CA_CERT), &c)?;
                write_private(&dir.join(SERVICES_CA_KEY), &k)?;
                (c, k)
            }
        };
        std::fs::create_dir_all(dir.join(SERVICES_DIR))
            .with_context(|| format!("create {}", dir.join(SERVICES_DIR).display()))?;
        for kind in SERVICE_KINDS {
            let mut params = leaf_params(
                &format!("crdplane-{kind}"),
                ExtendedKeyUsagePurpose::ServerAuth,
                now,
            )?;
            params
                .extended_key_usages
                .push(ExtendedKeyUsagePurpose::ClientAuth);
            params
                .distinguished_name
                .push(DnType::OrganizationName, SERVICES_GROUP);
            for n in &names {
                params.subject_alt_names.push(san(n)?);
            }
            let (cert, key) = sign_with(&services_ca_cert, &services_ca_key, params)
                .with_context(|| format!("read {}", dir.join(SERVICES_CA_KEY).display()))?;
            let broken = |what: &str| {
                format!(
                    "{what} does not chain to {}; remove {} and {} to start a new services CA",
                    dir.join(SERVICES_CA_CERT).display(),
                    dir.join(SERVICES_CA_CERT).display(),
                    dir.join(SERVICES_CA_KEY).display(),
                )
            };
            tls::verify_server_cert(&services_ca_cert, &cert, "127.0.0.1", now)
                .with_context(|| broken(&format!("the {kind} certificate")))?;
            tls::verify_client_cert(&services_ca_cert, &cert, now)
                .with_context(|| broken(&format!("the {kind} certificate")))?;
            write_private(&pki.service_key_path(kind), &key)?;
            write_public(&pki.service_cert_path(kind), &cert)?;
        }

        // Encryption at rest: kept (its keys must outlive every object they sealed).
        if read_opt(&pki.encryption_config_path())?.is_none() {
            let mut key = [0u8; 32];
            rand::RngCore::fill_bytes(&mut rand::rng(), &mut key);
            let secret = base64::Engine::encode(&base64::engine::general_purpose::STANDARD, key);
            write_private(
                &pki.encryption_config_path(),
                &format!(
                    "apiVersion: apiserver.config.k8s.io/v1\nkind: EncryptionConfiguration\nresources:\n- resources: [secrets]\n  providers:\n  - secretbox:\n      keys:\n      - name: key1\n        secret: {secret}\n  - identity: {{}}\n"
                ),
            )?;
        }

        // The service-account key pair: kept across restarts (tokens stay valid), made once.
        if read_opt(&pki.sa_key_path())?.is_none() || read_opt(&pki.sa_pub_path())?.is_none() {
            let key = KeyPair::generate_for(&PKCS_ECDSA_P256_SHA256)?;
            write_private(&pki.sa_key_path(), &key.serialize_pem())?;
            write_public(&pki.sa_pub_path(), &key.public_key_pem())?;
        }
        Ok(pki)
    }

    /// `<dir>/services-ca.crt`: the CA of the processes' mutual TLS (`--grpc-tls-ca-file`).
    pub fn services_ca_path(&self) -> PathBuf {
        self.dir.join(SERVICES_CA_CERT)
    }

    /// `<dir>/services/<kind>.crt`: a process kind's `--grpc-tls-cert-file`.
    pub fn service_cert_path(&self, kind: &str) -> PathBuf {
        self.dir.join(SERVICES_DIR).join(format!("{kind}.crt"))
    }

    /// `<dir>/services/<kind>.key`: its `--grpc-tls-key-file`.
    pub fn service_key_path(&self, kind: &str) -> PathBuf {
        self.dir.join(SERVICES_DIR).join(format!("{kind}.key"))
    }

    /// `<dir>/encryption-config.yaml`: the gateway's `--encryption-provider-config`.
    pub fn encryption_config_path(&self) -> PathBuf {
        self.dir.join(ENCRYPTION_CONFIG)
    }

    /// Path of the service-account signing key.
    pub fn sa_key_path(&self) -> PathBuf {
        self.dir.join(SA_KEY)
    }

    /// Path of the service-account public key.
    pub fn sa_pub_path(&self) -> PathBuf {
        self.dir.join(SA_PUB)
    }

    /// Issues a client certificate (EKU clientAuth, 1 year) for user `cn` in `groups`
    /// (its O), signed by the CA; returns the certificate and key PEMs. Nothing is written.
    ///
    /// At most one group: rcgen keeps one value per attribute type in a subject, and this
    /// PKI does not write certificates by hand. Users in several groups get them from a
    /// certificate of the operator's own tooling, or from their tokens.
    pub fn issue_client(&self, cn: &str, groups: &[&str]) -> Result<(String, String)> {
        let mut params = leaf_params(cn, ExtendedKeyUsagePurpose::ClientAuth, SystemTime::now())?;
        match groups {
            [] => {}
            [g] => params.distinguished_name.push(DnType::OrganizationName, *g),
            _ => anyhow::bail!(
                "a client certificate of this PKI names at most one group (O), not {groups:?}"
            ),
        }
        self.sign(params)
    }

    /// Signs `params` for a new P-256 key with the CA; returns the certificate and key PEMs.
    fn sign(&self, params: CertificateParams) -> Result<(String, String)> {
        sign_with(&self.ca_cert_pem, &self.ca_key_pem, params)
            .with_context(|| format!("read {}", self.ca_key_path().display()))
    }

    /// Whether a kept client certificate still verifies against the CA [`RENEW_BEFORE`]
    /// from now and `key_pem` is its key.
    fn still_good_client(&self, cert_pem: &str, key_pem: &str, now: SystemTime) -> bool {
        tls::verify_client_cert(&self.ca_cert_pem, cert_pem, now + RENEW_BEFORE).is_ok()
            && tls::client_config(&self.ca_cert_pem, cert_pem, key_pem).is_ok()
    }

    /// The directory of the files.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// `<dir>/ca.crt`: the CA bundle clients and the gateway's `--client-ca-file` trust.
    pub fn ca_cert_path(&self) -> PathBuf {
        self.dir.join(CA_CERT)
    }

    /// `<dir>/ca.key`.
    pub fn ca_key_path(&self) -> PathBuf {
        self.dir.join(CA_KEY)
    }

    /// `<dir>/apiserver.crt`: the gateway's `--tls-cert-file`.
    pub fn serving_cert_path(&self) -> PathBuf {
        self.dir.join(SERVING_CERT)
    }

    /// `<dir>/apiserver.key`: the gateway's `--tls-private-key-file`.
    pub fn serving_key_path(&self) -> PathBuf {
        self.dir.join(SERVING_KEY)
    }

    /// `<dir>/admin.crt`.
    pub fn admin_cert_path(&self) -> PathBuf {
        self.dir.join(ADMIN_CERT)
    }

    /// `<dir>/admin.key`.
    pub fn admin_key_path(&self) -> PathBuf {
        self.dir.join(ADMIN_KEY)
    }

    /// The CA certificate (PEM).
    pub fn ca_pem(&self) -> &str {
        &self.ca_cert_pem
    }

    /// The serving certificate (PEM).
    pub fn serving_cert_pem(&self) -> &str {
        &self.serving_cert_pem
    }

    /// The admin's client certificate (PEM).
    pub fn admin_cert_pem(&self) -> &str {
        &self.admin_cert_pem
    }

    /// The admin's private key (PEM).
    pub fn admin_key_pem(&self) -> &str {
        &self.admin_key_pem
    }
}

/// Signs `params` for a new P-256 key with the CA of `ca_cert_pem`/`ca_key_pem`; returns
/// the certificate and key PEMs.
fn sign_with(
    ca_cert_pem: &str,
    ca_key_pem: &str,
    params: CertificateParams,
) -> Result<(String, String)> {
    let ca_key = KeyPair::from_pem(ca_key_pem)?;
    let issuer = Issuer::from_ca_cert_pem(ca_cert_pem, ca_key)?;
    let key = KeyPair::generate_for(&PKCS_ECDSA_P256_SHA256)?;
    let cert = params.signed_by(&key, &issuer)?;
    Ok((cert.pem(), key.serialize_pem()))
}

/// A new self-signed CA: certificate and key PEMs.
fn new_ca(now: SystemTime) -> Result<(String, String)> {
    new_ca_named(CA_NAME, now)
}

/// A new self-signed CA with common name `name`.
fn new_ca_named(name: &str, now: SystemTime) -> Result<(String, String)> {
    let mut params = CertificateParams::default();
    params.distinguished_name = DistinguishedName::new();
    params.distinguished_name.push(DnType::CommonName, name);
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
    ];
    set_validity(&mut params, now, CA_VALIDITY);
    let key = KeyPair::generate_for(&PKCS_ECDSA_P256_SHA256)?;
    let cert = params.self_signed(&key)?;
    Ok((cert.pem(), key.serialize_pem()))
}

/// The parameters of a leaf certificate: CN `cn`, EKU `eku`, 1 year.
fn leaf_params(
    cn: &str,
    eku: ExtendedKeyUsagePurpose,
    now: SystemTime,
) -> Result<CertificateParams> {
    anyhow::ensure!(!cn.is_empty(), "a certificate needs a common name");
    let mut params = CertificateParams::default();
    params.distinguished_name = DistinguishedName::new();
    params.distinguished_name.push(DnType::CommonName, cn);
    params.is_ca = IsCa::ExplicitNoCa;
    params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    params.extended_key_usages = vec![eku];
    params.use_authority_key_identifier_extension = true;
    set_validity(&mut params, now, CERT_VALIDITY);
    Ok(params)
}

fn set_validity(params: &mut CertificateParams, now: SystemTime, lifetime: Duration) {
    let since_epoch = now.duration_since(UNIX_EPOCH).unwrap_or_default();
    let epoch = rcgen::date_time_ymd(1970, 1, 1);
    params.not_before = epoch + since_epoch.saturating_sub(BACKDATE);
    params.not_after = epoch + since_epoch + lifetime;
}

/// [`LOCAL_HOSTS`] and `hosts` (brackets of `[v6]` removed), without unspecified addresses,
/// empty names and repeats.
pub fn san_names(hosts: &[String]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for h in LOCAL_HOSTS
        .iter()
        .copied()
        .chain(hosts.iter().map(String::as_str))
    {
        let h = h.trim().trim_start_matches('[').trim_end_matches(']');
        let h = match h.parse::<IpAddr>() {
            Ok(ip) if ip.is_unspecified() => continue,
            Ok(ip) => ip.to_string(),
            Err(_) => h.to_ascii_lowercase(),
        };
        if !h.is_empty() && !out.contains(&h) {
            out.push(h);
        }
    }
    out
}

/// The SAN of `name`: an IP address, else a DNS name (checked as TLS clients check names).
/// Whether `name` can be a subject alternative name: an IP address or a DNS name (as TLS
/// clients check names); the error says which it is not.
pub fn check_name(name: &str) -> std::result::Result<(), String> {
    san(name).map(|_| ()).map_err(|e| e.to_string())
}

fn san(name: &str) -> Result<SanType> {
    if let Ok(ip) = name.parse::<IpAddr>() {
        return Ok(SanType::IpAddress(ip));
    }
    let bad = || format!("{name:?} is neither an IP address nor a DNS name");
    rustls_pki_types::DnsName::try_from(name).with_context(bad)?;
    Ok(SanType::DnsName(
        name.to_string().try_into().with_context(bad)?,
    ))
}

fn read_opt(path: &Path) -> Result<Option<String>> {
    match std::fs::read_to_string(path) {
        Ok(s) => Ok(Some(s)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e).with_context(|| format!("read {}", path.display())),
    }
}

/// Writes `contents` to `path` readable by its owner only (mode 0600), atomically (a
/// temporary file beside it renamed over it); for keys and for kubeconfigs holding one.
pub fn write_private(path: &Path, contents: &str) -> Result<()> {
    write_mode(path, contents, 0o600)
}

/// [`write_private`] for public files (certificates; mode 0644).
pub fn write_public(path: &Path, contents: &str) -> Result<()> {
    write_mode(path, contents, 0o644)
}

fn write_mode(path: &Path, contents: &str, mode: u32) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let write = || -> std::io::Result<()> {
        // A temporary file starts with mode 0600, so a key is never readable by others.
        let mut f = tempfile::NamedTempFile::new_in(dir)?;
        f.write_all(contents.as_bytes())?;
        f.as_file().sync_all()?;
        f.as_file()
            .set_permissions(std::fs::Permissions::from_mode(mode))?;
        f.persist(path).map_err(|e| e.error)?;
        Ok(())
    };
    write().with_context(|| format!("write {}", path.display()))
}

/// The common name of the Envoy front proxy's health-check client certificate (a user of
/// the gateways' client CA in no group: `/readyz` is open to every authenticated user).
pub const ENVOY_HEALTH_USER: &str = "crdplane-envoy";

/// `crdplane pki`: [`Pki::ensure`] in `dir` for `hosts`, plus the Envoy health checker's
/// client certificate (`envoy-health.crt`/`.key`, issued anew); prints what it wrote.
pub fn make(dir: &Path, hosts: &[String]) -> Result<()> {
    for h in hosts {
        check_name(h).map_err(anyhow::Error::msg)?;
    }
    let pki = Pki::ensure(dir, hosts)?;
    let (cert, key) = pki.issue_client(ENVOY_HEALTH_USER, &[])?;
    write_private(&dir.join("envoy-health.key"), &key)?;
    write_public(&dir.join("envoy-health.crt"), &cert)?;
    println!(
        "wrote the PKI of a crdplane deployment to {} for {}",
        dir.display(),
        san_names(hosts).join(", ")
    );
    println!("(deploy/README.md says which Secret holds which file)");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;
    use x509_parser::prelude::{FromDer, GeneralName, X509Certificate};

    fn with_cert<T>(pem: &str, f: impl FnOnce(&X509Certificate<'_>) -> T) -> T {
        let der = tls::certs_from_pem(pem).unwrap()[0].to_vec();
        let (_, cert) = X509Certificate::from_der(&der).unwrap();
        f(&cert)
    }

    fn names(cert: &X509Certificate<'_>) -> (Vec<String>, Vec<String>) {
        let cn = cert
            .subject()
            .iter_common_name()
            .map(|a| a.as_str().unwrap().to_string())
            .collect();
        let o = cert
            .subject()
            .iter_organization()
            .map(|a| a.as_str().unwrap().to_string())
            .collect();
        (cn, o)
    }

    fn sans(cert: &X509Certificate<'_>) -> Vec<String> {
        let ext = cert.subject_alternative_name().unwrap().unwrap();
        ext.value
            .general_names
            .iter()
            .map(|n| match n {
                GeneralName::DNSName(d) => d.to_string(),
                GeneralName::IPAddress(b) => match b.len() {
                    4 => IpAddr::from(<[u8; 4]>::try_from(*b).unwrap()).to_string(),
                    _ => IpAddr::from(<[u8; 16]>::try_from(*b).unwrap()).to_string(),
                },
                other => format!("{other:?}"),
            })
            .collect()
    }

    fn mode(p: &Path) -> u32 {
        std::fs::metadata(p).unwrap().permissions().mode() & 0o777
    }

    #[test]
    fn ensure_creates_the_files_with_private_keys() {
        let d = tempfile::tempdir().unwrap();
        let pki = Pki::ensure(&d.path().join("pki"), &[]).unwrap();
        for f in [
            CA_CERT,
            CA_KEY,
            SERVING_CERT,
            SERVING_KEY,
            ADMIN_CERT,
            ADMIN_KEY,
        ] {
            assert!(pki.dir().join(f).is_file(), "{f}");
        }
        for k in [
            pki.ca_key_path(),
            pki.serving_key_path(),
            pki.admin_key_path(),
        ] {
            assert_eq!(mode(&k), 0o600, "{}", k.display());
        }
        assert_eq!(mode(&pki.ca_cert_path()), 0o644);
        assert_eq!(
            std::fs::read_to_string(pki.ca_cert_path()).unwrap(),
            pki.ca_pem()
        );
        assert_eq!(
            std::fs::read_to_string(pki.admin_key_path()).unwrap(),
            pki.admin_key_pem()
        );
        assert!(format!("{pki:?}").contains("Pki"));
        assert!(!format!("{pki:?}").contains("PRIVATE KEY"));
        // The services CA is not the users' CA; each process kind's certificate chains to
        // it (and not to the users' CA) for serving and calling.
        let services_ca = std::fs::read_to_string(pki.services_ca_path()).unwrap();
        assert_ne!(services_ca, pki.ca_pem());
        assert_eq!(mode(&pki.dir().join(SERVICES_CA_KEY)), 0o600);
        for kind in SERVICE_KINDS {
            let cert = std::fs::read_to_string(pki.service_cert_path(kind)).unwrap();
            assert_eq!(mode(&pki.service_key_path(kind)), 0o600, "{kind}");
            let now = SystemTime::now();
            tls::verify_server_cert(&services_ca, &cert, "127.0.0.1", now).unwrap();
            tls::verify_server_cert(&services_ca, &cert, "localhost", now).unwrap();
            tls::verify_client_cert(&services_ca, &cert, now).unwrap();
            assert!(
                tls::verify_client_cert(pki.ca_pem(), &cert, now).is_err(),
                "{kind}"
            );
            with_cert(&cert, |c| {
                assert_eq!(
                    names(c),
                    (
                        vec![format!("crdplane-{kind}")],
                        vec![SERVICES_GROUP.to_string()]
                    )
                );
            });
        }
        with_cert(pki.ca_pem(), |c| {
            assert!(c.is_ca());
            assert_eq!(names(c).0, [CA_NAME]);
            let life = c.validity().not_after.timestamp() - c.validity().not_before.timestamp();
            assert_eq!(life as u64, (CA_VALIDITY + BACKDATE).as_secs());
        });
    }

    #[test]
    fn a_second_ensure_keeps_the_ca_and_the_admin_and_reissues_the_serving_cert() {
        let d = tempfile::tempdir().unwrap();
        let first = Pki::ensure(d.path(), &["10.1.2.3".to_string()]).unwrap();
        let enc = std::fs::read_to_string(first.encryption_config_path()).unwrap();
        let second = Pki::ensure(d.path(), &["node-a.example".to_string()]).unwrap();
        // The encryption keys are kept: they must outlive what they sealed.
        assert_eq!(
            std::fs::read_to_string(second.encryption_config_path()).unwrap(),
            enc
        );
        assert_eq!(mode(&second.encryption_config_path()), 0o600);
        assert!(
            enc.contains("- secretbox:") && enc.contains("- identity: {}"),
            "{enc}"
        );
        assert_eq!(first.ca_pem(), second.ca_pem());
        assert_eq!(first.admin_cert_pem(), second.admin_cert_pem());
        assert_eq!(first.admin_key_pem(), second.admin_key_pem());
        assert_ne!(first.serving_cert_pem(), second.serving_cert_pem());
        with_cert(second.serving_cert_pem(), |c| {
            let s = sans(c);
            assert!(s.contains(&"node-a.example".to_string()), "{s:?}");
            assert!(!s.contains(&"10.1.2.3".to_string()), "{s:?}");
        });
        tls::verify_client_cert(second.ca_pem(), first.admin_cert_pem(), SystemTime::now())
            .unwrap();
    }

    #[test]
    fn a_lost_ca_key_means_a_new_ca_and_a_new_admin() {
        let d = tempfile::tempdir().unwrap();
        let first = Pki::ensure(d.path(), &[]).unwrap();
        std::fs::remove_file(first.ca_key_path()).unwrap();
        let second = Pki::ensure(d.path(), &[]).unwrap();
        assert_ne!(first.ca_pem(), second.ca_pem());
        assert_ne!(first.admin_cert_pem(), second.admin_cert_pem());
        tls::verify_client_cert(second.ca_pem(), second.admin_cert_pem(), SystemTime::now())
            .unwrap();
        // A lost admin key: a new admin certificate from the same CA.
        std::fs::remove_file(second.admin_key_path()).unwrap();
        let third = Pki::ensure(d.path(), &[]).unwrap();
        assert_eq!(second.ca_pem(), third.ca_pem());
        assert_ne!(second.admin_cert_pem(), third.admin_cert_pem());
    }

    #[test]
    fn an_admin_certificate_that_does_not_match_its_key_is_issued_anew() {
        let d = tempfile::tempdir().unwrap();
        let first = Pki::ensure(d.path(), &[]).unwrap();
        let (_, other_key) = first.issue_client("x", &[]).unwrap();
        std::fs::write(first.admin_key_path(), &other_key).unwrap();
        let second = Pki::ensure(d.path(), &[]).unwrap();
        assert_ne!(first.admin_cert_pem(), second.admin_cert_pem());
        tls::client_config(
            second.ca_pem(),
            second.admin_cert_pem(),
            second.admin_key_pem(),
        )
        .unwrap();
    }

    #[test]
    fn the_serving_certificate_names_the_local_and_given_hosts_and_chains_to_the_ca() {
        let d = tempfile::tempdir().unwrap();
        let hosts =
            ["0.0.0.0", "[::]", "192.168.7.9", "[fd00::5]", "Crd.Example"].map(String::from);
        let pki = Pki::ensure(d.path(), &hosts).unwrap();
        let s = with_cert(pki.serving_cert_pem(), |c| {
            assert_eq!(names(c).0, [SERVING_NAME]);
            let eku = c.extended_key_usage().unwrap().unwrap().value;
            assert!(eku.server_auth && !eku.client_auth);
            assert!(!c.is_ca());
            let life = c.validity().not_after.timestamp() - c.validity().not_before.timestamp();
            assert_eq!(life as u64, (CERT_VALIDITY + BACKDATE).as_secs());
            sans(c)
        });
        assert_eq!(
            s,
            [
                "localhost",
                "127.0.0.1",
                "::1",
                "192.168.7.9",
                "fd00::5",
                "crd.example"
            ]
        );
        let now = SystemTime::now();
        for host in [
            "localhost",
            "127.0.0.1",
            "::1",
            "192.168.7.9",
            "fd00::5",
            "crd.example",
        ] {
            tls::verify_server_cert(pki.ca_pem(), pki.serving_cert_pem(), host, now)
                .unwrap_or_else(|e| panic!("{host}: {e}"));
        }
        assert!(
            tls::verify_server_cert(pki.ca_pem(), pki.serving_cert_pem(), "10.0.0.1", now).is_err()
        );
        // Not a client certificate, and not trusted by another CA.
        assert!(tls::verify_client_cert(pki.ca_pem(), pki.serving_cert_pem(), now).is_err());
        let other = Pki::ensure(&d.path().join("other"), &[]).unwrap();
        assert!(
            tls::verify_server_cert(other.ca_pem(), pki.serving_cert_pem(), "127.0.0.1", now)
                .is_err()
        );
        // Expired after a year.
        assert!(
            tls::verify_server_cert(
                pki.ca_pem(),
                pki.serving_cert_pem(),
                "127.0.0.1",
                now + CERT_VALIDITY + Duration::from_secs(DAY)
            )
            .is_err()
        );
    }

    #[test]
    fn client_certificates_carry_user_and_groups() {
        let d = tempfile::tempdir().unwrap();
        let pki = Pki::ensure(d.path(), &[]).unwrap();
        with_cert(pki.admin_cert_pem(), |c| {
            assert_eq!(
                names(c),
                (vec![ADMIN_USER.into()], vec![ADMIN_GROUP.into()])
            );
            let eku = c.extended_key_usage().unwrap().unwrap().value;
            assert!(eku.client_auth && !eku.server_auth);
        });
        let (cert, key) = pki.issue_client("jane", &["dev"]).unwrap();
        with_cert(&cert, |c| {
            assert_eq!(names(c), (vec!["jane".into()], vec!["dev".into()]));
        });
        tls::verify_client_cert(pki.ca_pem(), &cert, SystemTime::now()).unwrap();
        tls::client_config(pki.ca_pem(), &cert, &key).unwrap();
        assert!(
            tls::verify_server_cert(pki.ca_pem(), &cert, "127.0.0.1", SystemTime::now()).is_err()
        );
        assert!(pki.issue_client("", &[]).is_err());
    }

    #[test]
    fn an_operators_own_ca_is_used_as_it_is() {
        let d = tempfile::tempdir().unwrap();
        let mut params = CertificateParams::default();
        params.distinguished_name = DistinguishedName::new();
        params
            .distinguished_name
            .push(DnType::CommonName, "ops root");
        params
            .distinguished_name
            .push(DnType::OrganizationName, "Example Ops");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign];
        set_validity(&mut params, SystemTime::now(), CA_VALIDITY);
        let key = KeyPair::generate_for(&PKCS_ECDSA_P256_SHA256).unwrap();
        let ca = params.self_signed(&key).unwrap().pem();
        std::fs::write(d.path().join(CA_CERT), &ca).unwrap();
        std::fs::write(d.path().join(CA_KEY), key.serialize_pem()).unwrap();
        let pki = Pki::ensure(d.path(), &[]).unwrap();
        assert_eq!(pki.ca_pem(), ca);
        tls::verify_server_cert(&ca, pki.serving_cert_pem(), "localhost", SystemTime::now())
            .unwrap();
        tls::verify_client_cert(&ca, pki.admin_cert_pem(), SystemTime::now()).unwrap();
    }

    #[test]
    fn a_ca_key_that_does_not_belong_to_the_ca_is_refused() {
        let d = tempfile::tempdir().unwrap();
        let first = Pki::ensure(d.path(), &[]).unwrap();
        let other = Pki::ensure(&d.path().join("other"), &[]).unwrap();
        std::fs::copy(other.ca_key_path(), first.ca_key_path()).unwrap();
        let e = Pki::ensure(d.path(), &[]).unwrap_err();
        assert!(format!("{e:#}").contains("does not chain to"), "{e:#}");
    }

    #[test]
    fn one_group_or_none() {
        let d = tempfile::tempdir().unwrap();
        let pki = Pki::ensure(d.path(), &[]).unwrap();
        let (cert, _) = pki.issue_client("nobody", &[]).unwrap();
        with_cert(&cert, |c| {
            assert_eq!(names(c), (vec!["nobody".into()], vec![]))
        });
        tls::verify_client_cert(pki.ca_pem(), &cert, SystemTime::now()).unwrap();
        let e = pki.issue_client("u", &["a", "b"]).unwrap_err();
        assert!(e.to_string().contains("at most one group"), "{e}");
    }

    #[test]
    fn san_names_table() {
        let s = |v: &[&str]| san_names(&v.iter().map(|x| x.to_string()).collect::<Vec<_>>());
        assert_eq!(s(&[]), LOCAL_HOSTS);
        assert_eq!(s(&["0.0.0.0", "::", "[::]", ""]), LOCAL_HOSTS);
        assert_eq!(s(&["LOCALHOST", "[::1]", "127.0.0.1"]), LOCAL_HOSTS);
        assert_eq!(
            s(&["10.0.0.1", "[fe80::1]", "a.example"])[3..],
            ["10.0.0.1", "fe80::1", "a.example"]
        );
        assert!(san("not a name").is_err());
        assert!(san("a.example").is_ok());
    }
}
