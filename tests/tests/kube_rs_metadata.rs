//! kube-rs metadata-only requests against the real stack: `Api::get_metadata`,
//! `Api::list_metadata` and `kube::runtime::metadata_watcher` on a CRD's resource, on CRDs
//! and on namespaces. They send `Accept: application/json;as=PartialObjectMetadata[List];
//! g=meta.k8s.io;v=v1` and get PartialObjectMetadata(List) back (upstream
//! handlers/response.go `asPartialObjectMetadata[List]`); before, every one was a 406.

use crdplane_tests::{Stack, http_request, kubeconfig_yaml};
use futures::StreamExt;
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, ListParams, PostParams};
use kube::runtime::watcher;
use serde_json::json;
use std::fmt::Debug;
use std::time::Duration;

const CRD: &str = r#"{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition",
 "metadata":{"name":"gizmos.meta.example.com"},
 "spec":{"group":"meta.example.com","scope":"Namespaced",
  "names":{"plural":"gizmos","singular":"gizmo","kind":"Gizmo"},
  "versions":[{"name":"v1","served":true,"storage":true,
   "schema":{"openAPIV3Schema":{"type":"object","x-kubernetes-preserve-unknown-fields":true}}}]}}"#;

async fn client(gateway: &str) -> kube::Client {
    let kc = kube::config::Kubeconfig::from_yaml(&kubeconfig_yaml(gateway, "crdplane"))
        .expect("kubeconfig");
    let cfg = kube::Config::from_custom_kubeconfig(kc, &Default::default())
        .await
        .expect("config");
    kube::Client::try_from(cfg).expect("client")
}

/// Runs `metadata_watcher` until it reports an object named `name` (initial list or live
/// event), within 20 s.
#[allow(deprecated)] // kube 5 prefers watcher(Api<PartialObjectMeta<K>>), same requests
async fn watch_sees<K>(api: Api<K>, name: &str, create: impl std::future::Future<Output = ()>)
where
    K: kube::Resource + Clone + k8s_openapi::serde::de::DeserializeOwned + Debug + Send + 'static,
{
    let mut s = Box::pin(kube::runtime::metadata_watcher(
        api,
        watcher::Config::default(),
    ));
    // The initial listing first (an InitDone), then the object is created.
    let mut created = Some(create);
    let seen = tokio::time::timeout(Duration::from_secs(20), async {
        while let Some(ev) = s.next().await {
            match ev.expect("metadata watch event") {
                watcher::Event::InitDone => {
                    if let Some(c) = created.take() {
                        c.await;
                    }
                }
                watcher::Event::Apply(o) | watcher::Event::InitApply(o) => {
                    let t = o.types.as_ref().expect("kind and apiVersion");
                    assert_eq!(
                        (t.kind.as_str(), t.api_version.as_str()),
                        ("PartialObjectMetadata", "meta.k8s.io/v1")
                    );
                    if o.metadata.name.as_deref() == Some(name) {
                        return true;
                    }
                }
                _ => {}
            }
        }
        false
    })
    .await;
    assert_eq!(seen, Ok(true), "metadata_watcher never saw {name}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kube_rs_metadata_get_list_watch() {
    let stack = Stack::start_with_redis().expect("stack");
    let gw = stack.gateway.clone();
    let (code, body) = http_request(
        "POST",
        &format!("{gw}/apis/apiextensions.k8s.io/v1/customresourcedefinitions"),
        Some("application/json"),
        Some(CRD),
    )
    .unwrap();
    assert_eq!(code, 201, "{body}");
    let client = client(&gw).await;
    let ar = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("meta.example.com", "v1", "Gizmo"),
        "gizmos",
    );
    let gizmos: Api<DynamicObject> = Api::namespaced_with(client.clone(), "default", &ar);
    let mut served = false;
    for _ in 0..200 {
        let o = DynamicObject::new("g1", &ar).data(json!({"spec": {"x": 1}}));
        if gizmos.create(&PostParams::default(), &o).await.is_ok() {
            served = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(served, "gizmos never served");

    // Custom resources.
    let m = gizmos.get_metadata("g1").await.expect("get_metadata");
    assert_eq!(m.metadata.name.as_deref(), Some("g1"));
    assert!(m.metadata.uid.is_some() && m.metadata.resource_version.is_some());
    assert_eq!(
        m.types.as_ref().map(|t| t.kind.as_str()),
        Some("PartialObjectMetadata")
    );
    let l = gizmos
        .list_metadata(&ListParams::default())
        .await
        .expect("list_metadata");
    assert_eq!(l.items.len(), 1);
    assert_eq!(l.items[0].metadata.name.as_deref(), Some("g1"));
    assert!(l.metadata.resource_version.is_some());
    // An empty list (upstream sends "items": null).
    let other: Api<DynamicObject> = Api::namespaced_with(client.clone(), "kube-public", &ar);
    assert!(
        other
            .list_metadata(&ListParams::default())
            .await
            .expect("empty list_metadata")
            .items
            .is_empty()
    );
    let g = gizmos.clone();
    let ar2 = ar.clone();
    watch_sees(gizmos.clone(), "g2", async move {
        let o = DynamicObject::new("g2", &ar2).data(json!({"spec": {"x": 2}}));
        g.create(&PostParams::default(), &o)
            .await
            .expect("create g2");
    })
    .await;

    // CustomResourceDefinitions.
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let m = crds
        .get_metadata("gizmos.meta.example.com")
        .await
        .expect("crd get_metadata");
    assert_eq!(m.metadata.name.as_deref(), Some("gizmos.meta.example.com"));
    let l = crds
        .list_metadata(&ListParams::default())
        .await
        .expect("crd list_metadata");
    assert!(
        l.items
            .iter()
            .any(|i| i.metadata.name.as_deref() == Some("gizmos.meta.example.com"))
    );
    watch_sees(crds.clone(), "gizmos.meta.example.com", async {}).await;

    // Namespaces.
    let nss: Api<Namespace> = Api::all(client.clone());
    let m = nss.get_metadata("default").await.expect("ns get_metadata");
    assert_eq!(m.metadata.name.as_deref(), Some("default"));
    let l = nss
        .list_metadata(&ListParams::default())
        .await
        .expect("ns list_metadata");
    assert!(
        l.items
            .iter()
            .any(|i| i.metadata.name.as_deref() == Some("kube-system"))
    );
    let n2 = nss.clone();
    watch_sees(nss.clone(), "meta-ns", async move {
        let ns: Namespace =
            serde_json::from_value(json!({"metadata": {"name": "meta-ns"}})).unwrap();
        n2.create(&PostParams::default(), &ns)
            .await
            .expect("create ns");
    })
    .await;

    // The raw forms: v1beta1, and the wrong form for a list is a 406 with upstream's text.
    let list_url = format!("{gw}/apis/meta.example.com/v1/namespaces/default/gizmos");
    let (code, body) = get_with_accept(
        &list_url,
        "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1beta1",
    );
    assert_eq!(code, 200, "{body}");
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["apiVersion"], "meta.k8s.io/v1beta1");
    assert_eq!(v["kind"], "PartialObjectMetadataList");
    assert_eq!(v["items"][0]["kind"], "PartialObjectMetadata");
    assert!(v["items"][0].get("spec").is_none());
    let (code, body) = get_with_accept(
        &list_url,
        "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1",
    );
    assert_eq!(code, 406, "{body}");
    assert!(
        body.contains("you requested PartialObjectMetadata, but the requested object is a list (*unstructured.UnstructuredList)"),
        "{body}"
    );
}

fn get_with_accept(url: &str, accept: &str) -> (u16, String) {
    use std::io::{Read, Write};
    let rest = url.strip_prefix("http://").unwrap();
    let (host, path) = rest.split_once('/').unwrap();
    let mut s = std::net::TcpStream::connect(host).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    write!(
        s,
        "GET /{path} HTTP/1.1\r\nHost: {host}\r\nAccept: {accept}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut buf = Vec::new();
    let _ = s.read_to_end(&mut buf);
    let text = String::from_utf8_lossy(&buf).into_owned();
    let code = text.get(9..12).and_then(|c| c.parse().ok()).unwrap_or(0);
    let body = text.split_once("\r\n\r\n").map(|x| x.1).unwrap_or("");
    // Chunked bodies: the JSON sits between the size lines.
    let body = body
        .lines()
        .filter(|l| l.starts_with('{'))
        .collect::<Vec<_>>()
        .join("");
    (code, body)
}
