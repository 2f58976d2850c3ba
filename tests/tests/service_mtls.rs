//! The processes of a TLS stack (as `crdplane up` starts it) talk mutual TLS under the PKI's
//! services CA, so nobody else who reaches a backend port can call it: a plaintext caller, a
//! caller without a certificate (the health service alone answers it) and a caller with a
//! certificate of the users' CA (the admin's) are refused, and none of their writes lands;
//! the gateway's own certificate is served. Real binaries, real Redis.

use crdplane::pki::Pki;
use crdplane_proto::v1 as pb;
use crdplane_proto::v1::storage_client::StorageClient;
use crdplane_tests::{Stack, TlsClient};
use crdplane_transport::mtls::{CLIENT_CERT_REQUIRED, Files, Mtls};
use crdplane_transport::{Channel, ChannelOptions};
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::health_client::HealthClient;

fn channel(url: &str, tls: Option<Mtls>) -> Channel {
    let opts = ChannelOptions {
        tls,
        ..Default::default()
    };
    Channel::with_options(url, opts).unwrap()
}

/// A ConfigMap write straight to storage, in the default tenant's `default` namespace;
/// `object` is the JSON (or not) around the resourceVersion slot.
fn create(name: &str, head: &str, tail: &str) -> pb::CreateRequest {
    pb::CreateRequest {
        key: Some(pb::ObjectKey {
            resource: Some(pb::ResourceRef {
                tenant: "default".into(),
                group: String::new(),
                resource: "configmaps".into(),
            }),
            namespace: "default".into(),
            name: name.into(),
        }),
        object: Some(pb::ObjectWrite {
            head: head.as_bytes().to_vec().into(),
            tail: tail.as_bytes().to_vec().into(),
        }),
        ..Default::default()
    }
}

fn configmap(name: &str) -> pb::CreateRequest {
    let head = format!(
        r#"{{"apiVersion":"v1","kind":"ConfigMap","metadata":{{"name":"{name}","namespace":"default","uid":"u-{name}","creationTimestamp":"2026-01-01T00:00:00Z","resourceVersion":""#
    );
    create(name, &head, r#""},"data":{"k":"v"}}"#)
}

#[test]
fn backend_ports_answer_only_crdplane_processes() {
    let dir = tempfile::tempdir().unwrap();
    let pki = Pki::ensure(&dir.path().join("pki"), &[]).unwrap();
    let mut stack = Stack::start_with_redis_using(|b| b.tls(&pki)).unwrap();
    let procs = stack.processes();
    let storage = procs.storages[0].clone();
    for url in [&storage, &procs.validation, &procs.registry] {
        assert!(url.starts_with("https://"), "{url}");
    }
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        // Plaintext: the handshake fails, nothing is served.
        let plain = format!("http://{}", storage.trim_start_matches("https://"));
        let e = StorageClient::new(channel(&plain, None))
            .create(configmap("plaintext"))
            .await
            .unwrap_err();
        assert_ne!(e.code(), tonic::Code::Ok);

        // TLS without a client certificate: health answers, storage refuses, with what is
        // missing, whatever the bytes (the attack the issue names: non-JSON bytes written
        // straight into a tenant).
        let anonymous = Mtls::anonymous(&pki.services_ca_path()).unwrap();
        let h = HealthClient::new(channel(&storage, Some(anonymous.clone())))
            .check(HealthCheckRequest::default())
            .await
            .unwrap();
        assert_eq!(h.into_inner().status, ServingStatus::Serving as i32);
        let mut s = StorageClient::new(channel(&storage, Some(anonymous.clone())));
        for req in [configmap("anonymous"), create("garbage", "not json {", "")] {
            let e = s.create(req).await.unwrap_err();
            assert_eq!(e.code(), tonic::Code::Unauthenticated, "{e:?}");
            assert_eq!(e.message(), CLIENT_CERT_REQUIRED);
        }
        let e = s
            .list(pb::ListRequest {
                resource: Some(pb::ResourceRef {
                    tenant: "default".into(),
                    group: String::new(),
                    resource: "configmaps".into(),
                }),
                namespace: "default".into(),
                ..Default::default()
            })
            .await
            .unwrap_err();
        assert_eq!(e.code(), tonic::Code::Unauthenticated, "reads too: {e:?}");

        // The admin's certificate is a user's (the users' CA), not a service's: refused at
        // the handshake.
        let admin = Mtls::load(&Files {
            ca: pki.services_ca_path(),
            cert: pki.admin_cert_path(),
            key: pki.admin_key_path(),
        })
        .unwrap();
        let e = StorageClient::new(channel(&storage, Some(admin)))
            .create(configmap("admin-direct"))
            .await
            .unwrap_err();
        assert_ne!(e.code(), tonic::Code::Ok);
        assert_ne!(e.code(), tonic::Code::AlreadyExists);

        // The validation service's certificate is a service's, but validation never calls
        // storage: verified, and refused on every call (the registry is the gateway's only).
        let validation = Mtls::load(&Files {
            ca: pki.services_ca_path(),
            cert: pki.service_cert_path("validation"),
            key: pki.service_key_path("validation"),
        })
        .unwrap();
        let e = StorageClient::new(channel(&storage, Some(validation.clone())))
            .create(configmap("by-validation"))
            .await
            .unwrap_err();
        assert_eq!(e.code(), tonic::Code::PermissionDenied, "{e:?}");
        assert_eq!(
            e.message(),
            crdplane_transport::mtls::caller_refused("crdplane-validation")
        );
        let e = crdplane_proto::v1::registry_client::RegistryClient::new(channel(
            &procs.registry,
            Some(validation),
        ))
        .list_crds(pb::CrdListRequest {
            tenant: "default".into(),
            ..Default::default()
        })
        .await
        .unwrap_err();
        assert_eq!(e.code(), tonic::Code::PermissionDenied, "{e:?}");

        // The gateway's certificate is served, and storage still refuses bytes that are not
        // one JSON object.
        let gateway = Mtls::load(&Files {
            ca: pki.services_ca_path(),
            cert: pki.service_cert_path("gateway"),
            key: pki.service_key_path("gateway"),
        })
        .unwrap();
        let mut s = StorageClient::new(channel(&storage, Some(gateway)));
        s.create(configmap("by-a-service")).await.unwrap();
        let e = s
            .create(create("garbage", "not json {", "\"}"))
            .await
            .unwrap_err();
        assert_eq!(e.code(), tonic::Code::InvalidArgument, "{e:?}");
    });

    // Through the gateway (TLS, admin certificate): only the service's write landed.
    let admin = TlsClient::new(
        pki.ca_pem(),
        Some((pki.admin_cert_pem(), pki.admin_key_pem())),
    )
    .unwrap();
    let (code, _, body) = admin
        .request(
            "GET",
            &format!("{}/api/v1/namespaces/default/configmaps", stack.gateway),
            &[],
            None,
        )
        .unwrap();
    assert_eq!(code, 200, "{body}");
    let list: serde_json::Value = serde_json::from_str(&body).unwrap();
    let names: Vec<&str> = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|i| i["metadata"]["name"].as_str())
        .filter(|n| *n != "kube-root-ca.crt")
        .collect();
    assert_eq!(names, ["by-a-service"], "{body}");
}
