//! Mutual TLS between the transport's own server and client on 127.0.0.1:0, with
//! certificates made here by rcgen: a verified caller is served (call metadata intact); a
//! caller without a certificate reaches the health service only; a certificate of another
//! CA, a server of another CA and a plaintext caller are refused; a verified caller whose
//! common name the server does not list gets PERMISSION_DENIED; the configuration errors
//! of mismatched schemes; a `dns:///` target checks the name, not the address it dials.

use std::path::Path;

mod common;

use common::Echo;
use crdplane_proto::v1 as pb;
use crdplane_proto::v1::validation_client::ValidationClient;
use crdplane_proto::v1::validation_server::ValidationServer;
use crdplane_transport::mtls::{CLIENT_CERT_REQUIRED, Files, Mtls};
use crdplane_transport::{CallContext, Channel, ChannelOptions, ServeOptions};
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
};
use tonic::Status;
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::health_client::HealthClient;

/// A CA: its certificate PEM and an issuer for leaves.
struct Ca {
    pem: String,
    issuer: Issuer<'static, KeyPair>,
}

fn ca(name: &str) -> Ca {
    let mut p = CertificateParams::default();
    p.distinguished_name.push(DnType::CommonName, name);
    p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let key = KeyPair::generate().unwrap();
    let cert = p.self_signed(&key).unwrap();
    Ca {
        pem: cert.pem(),
        issuer: Issuer::new(p, key),
    }
}

/// A leaf for 127.0.0.1 with both usages, written as `<name>.crt/.key` with `ca` beside it.
fn files(dir: &Path, name: &str, signer: &Ca, trusted: &Ca) -> Files {
    files_for(dir, name, "127.0.0.1", signer, trusted)
}

/// [`files`] for the subject alternative name `san`.
fn files_for(dir: &Path, name: &str, san: &str, signer: &Ca, trusted: &Ca) -> Files {
    let mut p = CertificateParams::new(vec![san.to_string()]).unwrap();
    p.distinguished_name.push(DnType::CommonName, name);
    p.extended_key_usages = vec![
        ExtendedKeyUsagePurpose::ServerAuth,
        ExtendedKeyUsagePurpose::ClientAuth,
    ];
    let key = KeyPair::generate().unwrap();
    let cert = p.signed_by(&key, &signer.issuer).unwrap();
    let f = Files {
        ca: dir.join(format!("{name}-ca.crt")),
        cert: dir.join(format!("{name}.crt")),
        key: dir.join(format!("{name}.key")),
    };
    std::fs::write(&f.ca, &trusted.pem).unwrap();
    std::fs::write(&f.cert, cert.pem()).unwrap();
    std::fs::write(&f.key, key.serialize_pem()).unwrap();
    f
}

async fn serve(tls: Mtls) -> std::net::SocketAddr {
    serve_for(tls, &[]).await
}

/// A server of `tls` that serves only the `callers` common names (empty: any).
async fn serve_for(tls: Mtls, callers: &'static [&'static str]) -> std::net::SocketAddr {
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    tokio::spawn(crdplane_transport::serve_one_with(
        l,
        ValidationServer::new(Echo {
            name: "server".into(),
        }),
        ServeOptions {
            tls: Some(tls),
            callers,
            ..Default::default()
        },
    ));
    addr
}

#[tokio::test]
async fn a_service_serves_only_the_callers_it_lists() {
    use crdplane_transport::mtls::{caller_refused, callers};
    let dir = tempfile::tempdir().unwrap();
    let services = ca("services-ca");
    let server = Mtls::load(&files(dir.path(), "crdplane-storage", &services, &services)).unwrap();
    let addr = serve_for(server, &[callers::GATEWAY, callers::REGISTRY]).await;
    let url = format!("https://{addr}");
    for name in [callers::GATEWAY, callers::REGISTRY] {
        let ok = Mtls::load(&files(dir.path(), name, &services, &services)).unwrap();
        assert_eq!(
            admit(&mut client(&url, Some(ok))).await.unwrap(),
            "tenant-a",
            "{name}"
        );
    }
    // Another service of the same CA: verified, but refused on every call but health.
    let other = Mtls::load(&files(
        dir.path(),
        "crdplane-validation",
        &services,
        &services,
    ))
    .unwrap();
    let mut c = client(&url, Some(other.clone()));
    let e = admit(&mut c).await.unwrap_err();
    assert_eq!(e.code(), tonic::Code::PermissionDenied);
    assert_eq!(e.message(), caller_refused("crdplane-validation"));
    let opts = ChannelOptions {
        tls: Some(other),
        ..Default::default()
    };
    let mut health = HealthClient::new(Channel::with_options(&url, opts).unwrap());
    let r = health.check(HealthCheckRequest::default()).await.unwrap();
    assert_eq!(r.into_inner().status, ServingStatus::Serving as i32);
}

fn client(url: &str, tls: Option<Mtls>) -> ValidationClient<Channel> {
    let opts = ChannelOptions {
        tls,
        ..Default::default()
    };
    ValidationClient::new(Channel::with_options(url, opts).unwrap())
}

async fn admit(c: &mut ValidationClient<Channel>) -> Result<String, Status> {
    let call = c.admit(pb::AdmitRequest::default());
    let r = CallContext::new("tenant-a", "jane", None)
        .scope(call)
        .await?;
    // The server's view of the call's tenant (see `common::Echo`).
    Ok(r.into_inner().warnings[0].clone())
}

#[tokio::test]
async fn only_callers_with_a_certificate_of_the_ca_are_served() {
    let dir = tempfile::tempdir().unwrap();
    let services = ca("services-ca");
    let other = ca("other-ca");
    let server = Mtls::load(&files(dir.path(), "server", &services, &services)).unwrap();
    let addr = serve(server).await;
    let url = format!("https://{addr}");

    // A caller with a certificate of the CA: served, call metadata intact.
    let good = Mtls::load(&files(dir.path(), "gateway", &services, &services)).unwrap();
    let mut c = client(&url, Some(good));
    assert_eq!(admit(&mut c).await.unwrap(), "tenant-a");

    // Without a certificate: the health service answers, every other call is refused.
    let ca_file = dir.path().join("server-ca.crt");
    let anonymous = Mtls::anonymous(&ca_file).unwrap();
    let opts = ChannelOptions {
        tls: Some(anonymous.clone()),
        ..Default::default()
    };
    let mut health = HealthClient::new(Channel::with_options(&url, opts).unwrap());
    let r = health.check(HealthCheckRequest::default()).await.unwrap();
    assert_eq!(r.into_inner().status, ServingStatus::Serving as i32);
    let mut c = client(&url, Some(anonymous.clone()));
    let e = admit(&mut c).await.unwrap_err();
    assert_eq!(e.code(), tonic::Code::Unauthenticated);
    assert_eq!(
        e.message(),
        CLIENT_CERT_REQUIRED,
        "the refusal says what is missing"
    );
    // Whatever the request's size (one frame, several, beyond what the server reads of a
    // refused call), the caller gets the refusal.
    for size in [1 << 10, 48 << 10, 200 << 10] {
        for _ in 0..20 {
            let req = pb::AdmitRequest {
                object: vec![b'x'; size].into(),
                ..Default::default()
            };
            let e = c.admit(req).await.unwrap_err();
            assert_eq!(
                e.code(),
                tonic::Code::Unauthenticated,
                "{size} bytes: {e:?}"
            );
        }
    }
    // ... and it cannot serve.
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let e = crdplane_transport::serve_one_with(
        l,
        ValidationServer::new(Echo {
            name: "server".into(),
        }),
        ServeOptions {
            tls: Some(anonymous),
            ..Default::default()
        },
    )
    .await
    .unwrap_err();
    assert!(e.to_string().contains("cannot serve"), "{e}");

    // A certificate of another CA fails the handshake: no call gets through.
    let foreign = Mtls::load(&files(dir.path(), "intruder", &other, &services)).unwrap();
    let mut c = client(&url, Some(foreign));
    let e = admit(&mut c).await.unwrap_err();
    assert_ne!(e.code(), tonic::Code::Ok);
    assert!(
        !e.message().contains("tenant-a"),
        "no answer from the service: {e:?}"
    );

    // A server the caller's CA did not sign is not trusted by the caller.
    let trusting_other = Mtls::load(&files(dir.path(), "lost", &services, &other)).unwrap();
    let mut c = client(&url, Some(trusting_other));
    let e = admit(&mut c).await.unwrap_err();
    assert!(
        e.message().contains("TLS handshake") || e.to_string().contains("certificate"),
        "{e:?}"
    );

    // Plaintext to a TLS listener: refused.
    let mut c = client(&format!("http://{addr}"), None);
    assert!(admit(&mut c).await.is_err());
}

#[tokio::test]
async fn schemes_must_match_the_configuration() {
    let dir = tempfile::tempdir().unwrap();
    let services = ca("services-ca");
    let tls = Mtls::load(&files(dir.path(), "gw", &services, &services)).unwrap();
    let e = crdplane_transport::client::Endpoint::new("https://127.0.0.1:1", None).unwrap_err();
    assert!(e.to_string().contains("https:// needs mutual TLS"), "{e}");
    let e =
        crdplane_transport::client::Endpoint::new("http://127.0.0.1:1", Some(&tls)).unwrap_err();
    assert!(e.to_string().contains("must be https://"), "{e}");
    crdplane_transport::client::Endpoint::new("https://127.0.0.1:1", Some(&tls)).unwrap();
    crdplane_transport::client::Endpoint::new("https://localhost:1", Some(&tls)).unwrap();
}

/// A `dns:///name:port` target dials the addresses `name` resolves to, and the server's
/// certificate must hold `name` (as for `https://name:port`), not the address.
#[tokio::test]
async fn a_dns_target_checks_the_name_it_resolved() {
    let dir = tempfile::tempdir().unwrap();
    let services = ca("services-ca");
    let gateway = Mtls::load(&files(dir.path(), "gateway", &services, &services)).unwrap();
    for (san, served) in [("crdplane-storage", true), ("127.0.0.1", false)] {
        let server =
            Mtls::load(&files_for(dir.path(), "server", san, &services, &services)).unwrap();
        let addr = serve(server).await;
        let opts = ChannelOptions {
            tls: Some(gateway.clone()),
            resolver: crdplane_transport::resolve::Resolver::new(move |host, port| {
                assert_eq!((host.as_str(), port), ("crdplane-storage", 7001));
                Box::pin(async move { Ok(vec![addr]) })
            }),
            ..Default::default()
        };
        let c = Channel::with_options("dns:///crdplane-storage:7001", opts).unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while c.endpoints().is_empty() {
            assert!(std::time::Instant::now() < deadline, "never resolved");
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        let r = admit(&mut ValidationClient::new(c)).await;
        match served {
            true => assert_eq!(r.unwrap(), "tenant-a"),
            false => {
                let e = r.unwrap_err();
                assert!(e.message().contains("TLS handshake"), "{e}");
            }
        }
    }
}
