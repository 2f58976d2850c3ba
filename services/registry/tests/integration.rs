//! Integration tests: a private redis-server, the real storage service and the registry,
//! all in-process except redis, talking gRPC over loopback.

use crdplane_core::ApiError;
use crdplane_proto::GrpcStatusExt;
use crdplane_proto::v1 as pb;
use crdplane_proto::v1::registry_client::RegistryClient;
use crdplane_proto::v1::storage_client::StorageClient;
use serde_json::{Value, json};
use std::process::{Child, Command, Stdio};
use std::time::Duration;
use tonic::transport::Channel;

struct Stack {
    _dir: tempfile::TempDir,
    redis: Child,
    registry: RegistryClient<Channel>,
    storage: StorageClient<Channel>,
}

impl Drop for Stack {
    fn drop(&mut self) {
        let _ = self.redis.kill();
        let _ = self.redis.wait();
    }
}

async fn listener() -> (tokio::net::TcpListener, String) {
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", l.local_addr().unwrap());
    (l, url)
}

async fn connect(url: &str) -> Channel {
    for _ in 0..100 {
        if let Ok(c) = Channel::from_shared(url.to_string())
            .unwrap()
            .connect()
            .await
        {
            return c;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("cannot connect to {url}");
}

async fn stack() -> Stack {
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("r.sock");
    let redis = Command::new("redis-server")
        .args(["--port", "0", "--unixsocket"])
        .arg(&sock)
        .args(["--save", "", "--appendonly", "no"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("redis-server must be installed");
    for _ in 0..200 {
        if sock.exists() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let (sl, storage_url) = listener().await;
    let redis_url = format!("redis+unix://{}", sock.display());
    tokio::spawn(async move {
        crdplane_storage::serve(
            crdplane_storage::Config {
                redis_url,
                durability: crdplane_storage::durability::Durability::Memory,
                ..Default::default()
            },
            sl,
            Default::default(),
        )
        .await
        .unwrap();
    });
    let (vl, validation_url) = listener().await;
    tokio::spawn(async move {
        let svc = crdplane_validation::server::ValidationService::new(
            &crdplane_validation::server::Config::default(),
        );
        tonic::transport::Server::builder()
            .add_service(crdplane_proto::v1::validation_server::ValidationServer::new(svc))
            .serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(vl))
            .await
            .unwrap();
    });
    let (rl, registry_url) = listener().await;
    let su = storage_url.clone();
    tokio::spawn(async move {
        crdplane_registry::serve(
            crdplane_registry::Config {
                storage_endpoint: su,
                validation_endpoint: validation_url,
                ..Default::default()
            },
            rl,
            Default::default(),
        )
        .await
        .unwrap();
    });
    let storage = StorageClient::new(connect(&storage_url).await);
    let registry = RegistryClient::new(connect(&registry_url).await);
    Stack {
        _dir: dir,
        redis,
        registry,
        storage,
    }
}

fn crontab() -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "crontabs.stable.example.com"},
        "spec": {
            "group": "stable.example.com",
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {"spec": {"type": "object",
                    "properties": {"cronSpec": {"type": "string"}, "image": {"type": "string"}, "replicas": {"type": "integer"}}}}}},
                "subresources": {"status": {}}
            }],
            "scope": "Namespaced",
            "names": {"plural": "crontabs", "singular": "crontab", "kind": "CronTab", "shortNames": ["ct"]}
        }
    })
}

fn write(tenant: &str, v: &Value) -> pb::CrdWriteRequest {
    pb::CrdWriteRequest {
        tenant: tenant.into(),
        crd_json: serde_json::to_vec(v).unwrap().into(),
        dry_run: false,
        name: v["metadata"]["name"].as_str().unwrap_or_default().into(),
    }
}

fn obj(o: &pb::CrdObject) -> Value {
    serde_json::from_slice(&o.json).unwrap()
}

fn err(s: tonic::Status) -> ApiError {
    ApiError::from_grpc(&s)
}

fn condition<'a>(v: &'a Value, t: &str) -> &'a Value {
    v["status"]["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == t)
        .unwrap_or_else(|| panic!("no {t} condition in {v}"))
}

#[tokio::test]
async fn create_get_list_update_conflict() {
    let mut s = stack().await;
    let created = s
        .registry
        .create_crd(write("t1", &crontab()))
        .await
        .unwrap()
        .into_inner();
    let c = obj(&created);
    assert_eq!(c["metadata"]["generation"], 1);
    assert!(c["metadata"]["uid"].as_str().unwrap().len() == 36);
    assert_eq!(
        c["metadata"]["resourceVersion"],
        created.resource_version.to_string()
    );
    assert_eq!(c["spec"]["names"]["listKind"], "CronTabList");
    assert_eq!(c["spec"]["conversion"]["strategy"], "None");
    assert_eq!(c["status"]["storedVersions"], json!(["v1"]));
    assert_eq!(
        c["status"]["acceptedNames"],
        json!({"plural": "crontabs", "singular": "crontab", "shortNames": ["ct"], "kind": "CronTab", "listKind": "CronTabList"})
    );
    let na = condition(&c, "NamesAccepted");
    assert_eq!(
        (
            na["status"].as_str(),
            na["reason"].as_str(),
            na["message"].as_str()
        ),
        (
            Some("True"),
            Some("NoConflicts"),
            Some("no conflicts found")
        )
    );
    let est = condition(&c, "Established");
    assert_eq!(
        (
            est["status"].as_str(),
            est["reason"].as_str(),
            est["message"].as_str()
        ),
        (
            Some("True"),
            Some("InitialNamesAccepted"),
            Some("the initial names have been accepted")
        )
    );
    assert!(est["lastTransitionTime"].is_string());

    // Get and list pass through.
    let got = s
        .registry
        .get_crd(pb::CrdGetRequest {
            tenant: "t1".into(),
            name: "crontabs.stable.example.com".into(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(obj(&got), c);
    let list = s
        .registry
        .list_crds(pb::CrdListRequest {
            tenant: "t1".into(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(list.items.len(), 1);
    let other = s
        .registry
        .list_crds(pb::CrdListRequest {
            tenant: "t2".into(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert!(other.items.is_empty(), "tenants are isolated");

    // Create again: AlreadyExists from storage.
    let e = err(s
        .registry
        .create_crd(write("t1", &crontab()))
        .await
        .unwrap_err());
    assert_eq!(e.code, 409);
    assert_eq!(
        e.message,
        "customresourcedefinitions.apiextensions.k8s.io \"crontabs.stable.example.com\" already exists"
    );

    // Update without resourceVersion.
    let mut upd = c.clone();
    upd["metadata"]
        .as_object_mut()
        .unwrap()
        .remove("resourceVersion");
    let e = err(s.registry.update_crd(write("t1", &upd)).await.unwrap_err());
    assert_eq!(e.code, 422);
    assert_eq!(
        e.message,
        "customresourcedefinitions.apiextensions.k8s.io \"crontabs.stable.example.com\" is invalid: metadata.resourceVersion: Invalid value: 0x0: must be specified for an update"
    );

    // Update with a spec change: generation 2, status kept (client status ignored).
    let mut upd = c.clone();
    upd["spec"]["names"]["shortNames"] = json!(["ct", "cron"]);
    upd["status"] = json!({"storedVersions": ["bogus"]});
    let updated = obj(&s
        .registry
        .update_crd(write("t1", &upd))
        .await
        .unwrap()
        .into_inner());
    assert_eq!(updated["metadata"]["generation"], 2);
    assert_eq!(updated["metadata"]["uid"], c["metadata"]["uid"]);
    assert_eq!(
        updated["metadata"]["creationTimestamp"],
        c["metadata"]["creationTimestamp"]
    );
    assert_eq!(updated["status"]["storedVersions"], json!(["v1"]));
    assert_eq!(
        updated["status"]["acceptedNames"]["shortNames"],
        json!(["ct", "cron"])
    );
    assert_eq!(
        condition(&updated, "Established")["lastTransitionTime"],
        est["lastTransitionTime"]
    );

    // A metadata-only change keeps the generation.
    let mut upd2 = updated.clone();
    upd2["metadata"]["labels"] = json!({"a": "b"});
    let updated2 = obj(&s
        .registry
        .update_crd(write("t1", &upd2))
        .await
        .unwrap()
        .into_inner());
    assert_eq!(updated2["metadata"]["generation"], 2);

    // Stale resourceVersion: 409 Conflict.
    let e = err(s.registry.update_crd(write("t1", &upd)).await.unwrap_err());
    assert_eq!(e.code, 409);
    assert_eq!(
        e.message,
        "Operation cannot be fulfilled on customresourcedefinitions.apiextensions.k8s.io \"crontabs.stable.example.com\": the object has been modified; please apply your changes to the latest version and try again"
    );

    // Immutable scope.
    let mut upd3 = updated2.clone();
    upd3["spec"]["scope"] = json!("Cluster");
    let e = err(s.registry.update_crd(write("t1", &upd3)).await.unwrap_err());
    assert_eq!(e.code, 422);
    assert_eq!(
        e.message,
        "CustomResourceDefinition.apiextensions.k8s.io \"crontabs.stable.example.com\" is invalid: spec.scope: Invalid value: \"Cluster\": field is immutable"
    );

    // URL name mismatch.
    let mut req = write("t1", &updated2);
    req.name = "other.stable.example.com".into();
    let e = err(s.registry.update_crd(req).await.unwrap_err());
    assert_eq!(e.code, 400);
    assert_eq!(
        e.message,
        "the name of the object (crontabs.stable.example.com) does not match the name on the URL (other.stable.example.com)"
    );

    // Missing object on update: 404.
    let mut missing = updated2.clone();
    missing["metadata"]["name"] = json!("nopes.stable.example.com");
    missing["spec"]["names"]["plural"] = json!("nopes");
    let e = err(s
        .registry
        .update_crd(write("t1", &missing))
        .await
        .unwrap_err());
    assert_eq!(e.code, 404);
}

#[tokio::test]
async fn invalid_crds_are_rejected_with_upstream_texts() {
    let mut s = stack().await;
    let mut bad = crontab();
    bad["metadata"]["name"] = json!("crontab.stable.example.com");
    let e = err(s.registry.create_crd(write("t1", &bad)).await.unwrap_err());
    assert_eq!(e.code, 422);
    assert_eq!(
        e.message,
        "CustomResourceDefinition.apiextensions.k8s.io \"crontab.stable.example.com\" is invalid: metadata.name: Invalid value: \"crontab.stable.example.com\": must be spec.names.plural+\".\"+spec.group"
    );
    let d = e.details.unwrap();
    assert_eq!(d.kind, "CustomResourceDefinition");
    assert_eq!(d.group, "apiextensions.k8s.io");
    assert_eq!(d.causes[0].field, "metadata.name");

    let mut bad = crontab();
    bad["spec"]["versions"][0]["storage"] = json!(false);
    let e = err(s.registry.create_crd(write("t1", &bad)).await.unwrap_err());
    assert_eq!(e.code, 422);
    assert!(e.message.starts_with("CustomResourceDefinition.apiextensions.k8s.io \"crontabs.stable.example.com\" is invalid: [spec.versions: Invalid value: "), "{}", e.message);
    assert!(
        e.message
            .ends_with(": must have exactly one version marked as storage version, status.storedVersions: Invalid value: []string(nil): must have at least one stored version]"),
        "{}",
        e.message
    );

    // Schema errors come from the validation service and are merged in; a missing schema
    // is reported once although both services check it.
    let mut bad = crontab();
    bad["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["uniqueItems"] =
        json!(true);
    let e = err(s.registry.create_crd(write("t1", &bad)).await.unwrap_err());
    assert_eq!(e.code, 422);
    assert!(
        e.message.contains("spec.versions[0].schema.openAPIV3Schema.properties[spec].uniqueItems: Forbidden: uniqueItems cannot be set to true since the runtime complexity becomes quadratic"),
        "{}",
        e.message
    );
    let mut bad = crontab();
    bad["spec"]["versions"][0]
        .as_object_mut()
        .unwrap()
        .remove("schema");
    let e = err(s.registry.create_crd(write("t1", &bad)).await.unwrap_err());
    assert_eq!(
        e.message,
        "CustomResourceDefinition.apiextensions.k8s.io \"crontabs.stable.example.com\" is invalid: spec.versions[0].schema.openAPIV3Schema: Required value: schemas are required"
    );
    assert_eq!(e.details.unwrap().causes.len(), 1);

    // Nothing was stored.
    let list = s
        .registry
        .list_crds(pb::CrdListRequest {
            tenant: "t1".into(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert!(list.items.is_empty());
}

fn rival() -> Value {
    let mut r = crontab();
    r["metadata"]["name"] = json!("crontabz.stable.example.com");
    r["spec"]["names"] = json!({"plural": "crontabz", "singular": "crontabz", "kind": "CronTabZ", "shortNames": ["ct"]});
    r
}

/// Waits (bounded) until the CRD is gone from storage.
async fn wait_gone(s: &mut Stack, tenant: &str, name: &str) {
    let deadline = std::time::Instant::now() + Duration::from_secs(15);
    loop {
        let r = s
            .registry
            .get_crd(pb::CrdGetRequest {
                tenant: tenant.into(),
                name: name.into(),
            })
            .await;
        match r {
            Err(e) if e.code() == tonic::Code::NotFound => return,
            _ => {}
        }
        assert!(
            std::time::Instant::now() < deadline,
            "CRD {name} still there: {r:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn resolve(s: &mut Stack, tenant: &str, plural: &str) -> Result<Value, ApiError> {
    s.registry
        .resolve(pb::ResolveRequest {
            tenant: tenant.into(),
            group: "stable.example.com".into(),
            resource: plural.into(),
        })
        .await
        .map(|r| obj(&r.into_inner()))
        .map_err(err)
}

#[tokio::test]
async fn name_conflicts_between_crds() {
    let mut s = stack().await;
    s.registry
        .create_crd(write("t1", &crontab()))
        .await
        .unwrap();
    let b = obj(&s
        .registry
        .create_crd(write("t1", &rival()))
        .await
        .unwrap()
        .into_inner());
    let na = condition(&b, "NamesAccepted");
    assert_eq!(na["status"], "False");
    assert_eq!(na["reason"], "ShortNamesConflict");
    assert_eq!(na["message"], "\"ct\" is already in use");
    let est = condition(&b, "Established");
    assert_eq!(
        (
            est["status"].as_str(),
            est["reason"].as_str(),
            est["message"].as_str()
        ),
        (
            Some("False"),
            Some("NotAccepted"),
            Some("not all names are accepted")
        )
    );
    assert_eq!(
        b["status"]["acceptedNames"],
        json!({"plural": "crontabz", "singular": "crontabz", "kind": "CronTabZ", "listKind": "CronTabZList"})
    );

    // Not established: not served, not in discovery.
    let e = resolve(&mut s, "t1", "crontabz").await.unwrap_err();
    assert_eq!(e.code, 404);
    assert_eq!(
        e.message,
        "the server could not find the requested resource"
    );
    assert!(resolve(&mut s, "t1", "crontabs").await.is_ok());
    let d = s
        .registry
        .discovery(pb::DiscoveryRequest {
            tenant: "t1".into(),
        })
        .await
        .unwrap()
        .into_inner();
    let v1: Value = serde_json::from_slice(&d.resource_lists["stable.example.com/v1"]).unwrap();
    let names: Vec<&str> = v1["resources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, vec!["crontabs", "crontabs/status"]);

    // Same plural in another group does not conflict.
    let mut other_group = crontab();
    other_group["metadata"]["name"] = json!("crontabs.other.example.com");
    other_group["spec"]["group"] = json!("other.example.com");
    let og = obj(&s
        .registry
        .create_crd(write("t1", &other_group))
        .await
        .unwrap()
        .into_inner());
    assert_eq!(condition(&og, "NamesAccepted")["status"], "True");

    // Deleting the holder frees the name: the rival gets accepted and established.
    s.registry
        .delete_crd(pb::CrdDeleteRequest {
            tenant: "t1".into(),
            name: "crontabs.stable.example.com".into(),
            ..Default::default()
        })
        .await
        .unwrap();
    wait_gone(&mut s, "t1", "crontabs.stable.example.com").await;
    assert_eq!(
        resolve(&mut s, "t1", "crontabs").await.unwrap_err().code,
        404
    );
    let b = resolve(&mut s, "t1", "crontabz").await.unwrap();
    assert_eq!(condition(&b, "NamesAccepted")["reason"], "NoConflicts");
    assert_eq!(condition(&b, "Established")["status"], "True");
    assert_eq!(b["status"]["acceptedNames"]["shortNames"], json!(["ct"]));
}

#[tokio::test]
async fn discovery_contents() {
    let mut s = stack().await;
    let mut c = crontab();
    c["spec"]["versions"] = json!([
        {"name": "v1beta1", "served": true, "storage": false, "schema": {"openAPIV3Schema": {"type": "object"}}},
        {"name": "v1", "served": true, "storage": true, "schema": {"openAPIV3Schema": {"type": "object"}},
         "subresources": {"status": {}, "scale": {"specReplicasPath": ".spec.replicas", "statusReplicasPath": ".status.replicas"}}}
    ]);
    c["spec"]["names"]["categories"] = json!(["all"]);
    let before = s
        .registry
        .discovery(pb::DiscoveryRequest {
            tenant: "t1".into(),
        })
        .await
        .unwrap()
        .into_inner();
    s.registry.create_crd(write("t1", &c)).await.unwrap();
    let d = s
        .registry
        .discovery(pb::DiscoveryRequest {
            tenant: "t1".into(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_ne!(before.etag, d.etag);
    let gl: Value = serde_json::from_slice(&d.group_list).unwrap();
    assert_eq!(gl["kind"], "APIGroupList");
    // The built-in groups first, by kube-aggregator's group priority, then the CRD groups.
    let groups: Vec<&str> = gl["groups"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g["name"].as_str().unwrap())
        .collect();
    assert_eq!(groups[..2], ["events.k8s.io", "authentication.k8s.io"]);
    let pos = |n: &str| groups.iter().position(|x| *x == n).expect(n);
    assert!(pos("rbac.authorization.k8s.io") < pos("apiextensions.k8s.io"));
    assert!(pos("apiextensions.k8s.io") < pos("coordination.k8s.io"));
    assert_eq!(groups.last(), Some(&"stable.example.com"));
    assert_eq!(
        gl["groups"][pos("stable.example.com")],
        json!({"name": "stable.example.com",
        "versions": [{"groupVersion": "stable.example.com/v1", "version": "v1"}, {"groupVersion": "stable.example.com/v1beta1", "version": "v1beta1"}],
        "preferredVersion": {"groupVersion": "stable.example.com/v1", "version": "v1"}})
    );
    let v1: Value = serde_json::from_slice(&d.resource_lists["stable.example.com/v1"]).unwrap();
    assert_eq!(v1["groupVersion"], "stable.example.com/v1");
    let r = &v1["resources"];
    assert_eq!(r[0]["name"], "crontabs");
    assert_eq!(r[0]["kind"], "CronTab");
    assert_eq!(r[0]["shortNames"], json!(["ct"]));
    assert_eq!(r[0]["categories"], json!(["all"]));
    assert_eq!(
        r[0]["verbs"],
        json!([
            "delete",
            "deletecollection",
            "get",
            "list",
            "patch",
            "create",
            "update",
            "watch"
        ])
    );
    assert_eq!(r[1]["name"], "crontabs/status");
    assert_eq!(
        r[2],
        json!({"name": "crontabs/scale", "singularName": "", "namespaced": true, "group": "autoscaling", "version": "v1", "kind": "Scale", "verbs": ["get", "patch", "update"]})
    );
    assert!(d.resource_lists.contains_key("stable.example.com/v1beta1"));
    assert!(d.resource_lists.contains_key("apiextensions.k8s.io/v1"));
    let agg: Value = serde_json::from_slice(&d.aggregated).unwrap();
    assert_eq!(agg["kind"], "APIGroupDiscoveryList");
    let g = &agg["items"][pos("stable.example.com")];
    assert_eq!(g["metadata"]["name"], "stable.example.com");
    assert_eq!(g["versions"][0]["version"], "v1");
    assert_eq!(
        g["versions"][0]["resources"][0]["shortNames"],
        json!(["ct"])
    );
    assert_eq!(
        g["versions"][0]["resources"][0]["categories"],
        json!(["all"])
    );
    assert_eq!(
        g["versions"][0]["resources"][0]["subresources"][1]["subresource"],
        "scale"
    );
    // Other tenants see only the built-in groups.
    let d2 = s
        .registry
        .discovery(pb::DiscoveryRequest {
            tenant: "t2".into(),
        })
        .await
        .unwrap()
        .into_inner();
    let gl2: Value = serde_json::from_slice(&d2.group_list).unwrap();
    assert_eq!(
        gl2["groups"].as_array().unwrap().len(),
        groups.len() - 1,
        "all but stable.example.com"
    );
}

#[tokio::test]
async fn delete_cascades_to_custom_resources() {
    let mut s = stack().await;
    let created = s
        .registry
        .create_crd(write("t1", &crontab()))
        .await
        .unwrap()
        .into_inner();
    let cr_ref = pb::ResourceRef {
        tenant: "t1".into(),
        group: "stable.example.com".into(),
        resource: "crontabs".into(),
    };
    for (ns, name) in [("default", "a"), ("default", "b"), ("other", "c")] {
        let cr = json!({"apiVersion": "stable.example.com/v1", "kind": "CronTab", "metadata": {"name": name, "namespace": ns}});
        let (head, tail) = crdplane_core::rvslot::split(&cr).unwrap();
        s.storage
            .create(pb::CreateRequest {
                key: Some(pb::ObjectKey {
                    resource: Some(cr_ref.clone()),
                    namespace: ns.into(),
                    name: name.into(),
                }),
                object: Some(pb::ObjectWrite {
                    head: head.into(),
                    tail: tail.into(),
                }),
                dry_run: false,
                ttl_seconds: 0,
            })
            .await
            .unwrap();
    }
    // A CR of the same plural in another tenant survives.
    let other_ref = pb::ResourceRef {
        tenant: "t2".into(),
        ..cr_ref.clone()
    };
    let cr = json!({"metadata": {"name": "keep", "namespace": "default"}});
    let (head, tail) = crdplane_core::rvslot::split(&cr).unwrap();
    s.storage
        .create(pb::CreateRequest {
            key: Some(pb::ObjectKey {
                resource: Some(other_ref.clone()),
                namespace: "default".into(),
                name: "keep".into(),
            }),
            object: Some(pb::ObjectWrite {
                head: head.into(),
                tail: tail.into(),
            }),
            dry_run: false,
            ttl_seconds: 0,
        })
        .await
        .unwrap();
    assert!(resolve(&mut s, "t1", "crontabs").await.is_ok());

    // Wrong precondition: 409, nothing deleted.
    let e = err(s
        .registry
        .delete_crd(pb::CrdDeleteRequest {
            tenant: "t1".into(),
            name: "crontabs.stable.example.com".into(),
            expected_resource_version: created.resource_version + 100,
            dry_run: false,
        })
        .await
        .unwrap_err());
    assert_eq!(e.code, 409);
    // Dry run: nothing deleted.
    s.registry
        .delete_crd(pb::CrdDeleteRequest {
            tenant: "t1".into(),
            name: "crontabs.stable.example.com".into(),
            expected_resource_version: 0,
            dry_run: true,
        })
        .await
        .unwrap();
    let list = s
        .storage
        .list(pb::ListRequest {
            resource: Some(cr_ref.clone()),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(list.items.len(), 3);

    // One instance carries a finalizer: the CRD waits for it.
    let held = json!({"apiVersion": "stable.example.com/v1", "kind": "CronTab",
        "metadata": {"name": "held", "namespace": "default", "finalizers": ["example.com/hold"]}});
    let (head, tail) = crdplane_core::rvslot::split(&held).unwrap();
    let held_key = pb::ObjectKey {
        resource: Some(cr_ref.clone()),
        namespace: "default".into(),
        name: "held".into(),
    };
    s.storage
        .create(pb::CreateRequest {
            key: Some(held_key.clone()),
            object: Some(pb::ObjectWrite {
                head: head.into(),
                tail: tail.into(),
            }),
            dry_run: false,
            ttl_seconds: 0,
        })
        .await
        .unwrap();

    let deleted = s
        .registry
        .delete_crd(pb::CrdDeleteRequest {
            tenant: "t1".into(),
            name: "crontabs.stable.example.com".into(),
            expected_resource_version: 0,
            dry_run: false,
        })
        .await
        .unwrap()
        .into_inner();
    // The response is the CRD marked for deletion (etcd.go REST.Delete).
    let d = obj(&deleted);
    assert_eq!(d["metadata"]["name"], "crontabs.stable.example.com");
    assert!(d["metadata"]["deletionTimestamp"].is_string());
    assert_eq!(
        d["metadata"]["finalizers"],
        json!(["customresourcecleanup.apiextensions.k8s.io"])
    );
    let t = condition(&d, "Terminating");
    assert_eq!(
        (&t["status"], &t["reason"], &t["message"]),
        (
            &json!("True"),
            &json!("InstanceDeletionPending"),
            &json!(
                "CustomResourceDefinition marked for deletion; CustomResource deletion will begin soon"
            )
        )
    );
    assert_eq!(condition(&d, "Established")["status"], "True");

    // The finalizer controller deletes what it can, marks the held object and waits.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let held_now = loop {
        let list = s
            .storage
            .list(pb::ListRequest {
                resource: Some(cr_ref.clone()),
                ..Default::default()
            })
            .await
            .unwrap()
            .into_inner();
        if list.items.len() == 1 {
            let v: Value = serde_json::from_slice(&list.items[0]).unwrap();
            if v["metadata"]["deletionTimestamp"].is_string() {
                break v;
            }
        }
        assert!(
            std::time::Instant::now() < deadline,
            "instances not deleted"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(held_now["metadata"]["name"], "held");
    assert_eq!(held_now["metadata"]["deletionGracePeriodSeconds"], 0);
    let waiting = obj(&s
        .registry
        .get_crd(pb::CrdGetRequest {
            tenant: "t1".into(),
            name: "crontabs.stable.example.com".into(),
        })
        .await
        .unwrap()
        .into_inner());
    let t = condition(&waiting, "Terminating");
    assert_eq!(t["reason"], "InstanceDeletionInProgress");
    assert_eq!(t["message"], "CustomResource deletion is in progress");
    // A second DELETE returns the CRD unchanged while the finalizer holds it.
    let again = obj(&s
        .registry
        .delete_crd(pb::CrdDeleteRequest {
            tenant: "t1".into(),
            name: "crontabs.stable.example.com".into(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner());
    assert_eq!(
        again["metadata"]["deletionTimestamp"],
        d["metadata"]["deletionTimestamp"]
    );
    // Discovery drops create/update/patch while Terminating.
    let disc = s
        .registry
        .discovery(pb::DiscoveryRequest {
            tenant: "t1".into(),
        })
        .await
        .unwrap()
        .into_inner();
    let rl: Value = serde_json::from_slice(&disc.resource_lists["stable.example.com/v1"]).unwrap();
    assert_eq!(
        rl["resources"][0]["verbs"],
        json!(["delete", "deletecollection", "get", "list", "watch"])
    );

    // The finalizer goes (the object's owner removes it): the object and the CRD go.
    let mut released = held_now.clone();
    released["metadata"]
        .as_object_mut()
        .unwrap()
        .remove("finalizers");
    let (head, tail) = crdplane_core::rvslot::split(&released).unwrap();
    s.storage
        .update(pb::UpdateRequest {
            key: Some(held_key),
            object: Some(pb::ObjectWrite {
                head: head.into(),
                tail: tail.into(),
            }),
            expected_resource_version: 0,
            dry_run: false,
            ttl_seconds: 0,
        })
        .await
        .unwrap();
    wait_gone(&mut s, "t1", "crontabs.stable.example.com").await;
    let list = s
        .storage
        .list(pb::ListRequest {
            resource: Some(cr_ref.clone()),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert!(list.items.is_empty());
    let list = s
        .storage
        .list(pb::ListRequest {
            resource: Some(other_ref),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(list.items.len(), 1);
    // Consistent immediately: no stale Resolve, Get is 404.
    assert_eq!(
        resolve(&mut s, "t1", "crontabs").await.unwrap_err().code,
        404
    );
    let e = err(s
        .registry
        .get_crd(pb::CrdGetRequest {
            tenant: "t1".into(),
            name: "crontabs.stable.example.com".into(),
        })
        .await
        .unwrap_err());
    assert_eq!(e.code, 404);
    assert_eq!(
        e.message,
        "customresourcedefinitions.apiextensions.k8s.io \"crontabs.stable.example.com\" not found"
    );
    let e = err(s
        .registry
        .delete_crd(pb::CrdDeleteRequest {
            tenant: "t1".into(),
            name: "crontabs.stable.example.com".into(),
            ..Default::default()
        })
        .await
        .unwrap_err());
    assert_eq!(e.code, 404);
}

#[tokio::test]
async fn changes_from_another_writer_invalidate_the_cache() {
    let mut s = stack().await;
    // Warm the cache (and give the change feed a moment to connect).
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        resolve(&mut s, "t1", "crontabs").await.unwrap_err().code,
        404
    );
    let created = obj(&s
        .registry
        .create_crd(write("t1", &crontab()))
        .await
        .unwrap()
        .into_inner());
    assert!(resolve(&mut s, "t1", "crontabs").await.is_ok());
    // Delete the CRD behind the registry's back, directly in storage.
    s.storage
        .delete(pb::DeleteRequest {
            key: Some(pb::ObjectKey {
                resource: Some(pb::ResourceRef {
                    tenant: "t1".into(),
                    group: "apiextensions.k8s.io".into(),
                    resource: "customresourcedefinitions".into(),
                }),
                namespace: String::new(),
                name: created["metadata"]["name"].as_str().unwrap().into(),
            }),
            expected_resource_version: 0,
            dry_run: false,
        })
        .await
        .unwrap();
    let mut gone = false;
    for _ in 0..50 {
        if resolve(&mut s, "t1", "crontabs").await.is_err() {
            gone = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(gone, "the change feed must drop the cached CRD");
}

#[tokio::test]
async fn openapi_documents_are_served() {
    let mut s = stack().await;
    s.registry
        .create_crd(write("t1", &crontab()))
        .await
        .unwrap();
    let v2 = s
        .registry
        .open_api_v2(pb::OpenApiRequest {
            tenant: "t1".into(),
            path: String::new(),
        })
        .await
        .unwrap()
        .into_inner();
    let doc: Value = serde_json::from_slice(&v2.json).unwrap();
    assert_eq!(doc["swagger"], "2.0");
    assert!(!v2.etag.is_empty());
    let again = s
        .registry
        .open_api_v2(pb::OpenApiRequest {
            tenant: "t1".into(),
            path: String::new(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(again.etag, v2.etag);
    let idx = s
        .registry
        .open_api_v3(pb::OpenApiRequest {
            tenant: "t1".into(),
            path: String::new(),
        })
        .await
        .unwrap()
        .into_inner();
    assert!(idx.found);
    let index: Value = serde_json::from_slice(&idx.json).unwrap();
    let url = index["paths"]["apis/stable.example.com/v1"]["serverRelativeURL"]
        .as_str()
        .unwrap()
        .to_string();
    let gv = s
        .registry
        .open_api_v3(pb::OpenApiRequest {
            tenant: "t1".into(),
            path: "apis/stable.example.com/v1".into(),
        })
        .await
        .unwrap()
        .into_inner();
    assert!(gv.found);
    // The index hash is the group-version document's ETag.
    assert_eq!(
        url,
        format!("/openapi/v3/apis/stable.example.com/v1?hash={}", gv.etag)
    );
    let gv_doc: Value = serde_json::from_slice(&gv.json).unwrap();
    assert_eq!(
        gv_doc["openapi"].as_str().map(|s| s.starts_with("3.")),
        Some(true)
    );
    let missing = s
        .registry
        .open_api_v3(pb::OpenApiRequest {
            tenant: "t1".into(),
            path: "apis/nope.io/v1".into(),
        })
        .await
        .unwrap()
        .into_inner();
    assert!(!missing.found);
}

#[tokio::test]
async fn concurrent_conflicting_creates_establish_one() {
    let s = stack().await;
    // Eight CRDs of one group, all asking for short name "ct", created at once.
    let mut tasks = Vec::new();
    for i in 0..8 {
        let mut c = crontab();
        let plural = format!("crontabs{i}");
        c["metadata"]["name"] = json!(format!("{plural}.stable.example.com"));
        c["spec"]["names"] = json!({"plural": plural, "singular": format!("crontab{i}"),
            "kind": format!("CronTab{i}"), "shortNames": ["ct"]});
        let mut client = s.registry.clone();
        tasks.push(tokio::spawn(async move {
            obj(&client
                .create_crd(write("t1", &c))
                .await
                .unwrap()
                .into_inner())
        }));
    }
    let mut established = 0;
    for t in tasks {
        if condition(&t.await.unwrap(), "Established")["status"] == "True" {
            established += 1;
        }
    }
    assert_eq!(established, 1, "exactly one CRD may hold short name \"ct\"");
}

#[tokio::test]
async fn never_established_crd_is_finalized_without_instance_deletion() {
    let mut s = stack().await;
    s.registry
        .create_crd(write("t1", &crontab()))
        .await
        .unwrap();
    // The rival never gets its names, so it is never established.
    let r = obj(&s
        .registry
        .create_crd(write("t1", &rival()))
        .await
        .unwrap()
        .into_inner());
    assert_eq!(condition(&r, "Established")["status"], "False");
    let name = r["metadata"]["name"].as_str().unwrap().to_string();
    let d = obj(&s
        .registry
        .delete_crd(pb::CrdDeleteRequest {
            tenant: "t1".into(),
            name: name.clone(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner());
    assert_eq!(
        condition(&d, "Terminating")["reason"],
        "InstanceDeletionPending"
    );
    wait_gone(&mut s, "t1", &name).await;
    // The established one is untouched.
    assert!(resolve(&mut s, "t1", "crontabs").await.is_ok());
}

#[tokio::test]
async fn removing_the_last_finalizer_of_a_terminating_crd_deletes_it() {
    let mut s = stack().await;
    let mut c = crontab();
    c["metadata"]["finalizers"] = json!(["example.com/keep"]);
    s.registry.create_crd(write("t1", &c)).await.unwrap();
    s.registry
        .delete_crd(pb::CrdDeleteRequest {
            tenant: "t1".into(),
            name: "crontabs.stable.example.com".into(),
            ..Default::default()
        })
        .await
        .unwrap();
    // The controller removes its own finalizer; the user's one keeps the CRD.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let cur = loop {
        let cur = obj(&s
            .registry
            .get_crd(pb::CrdGetRequest {
                tenant: "t1".into(),
                name: "crontabs.stable.example.com".into(),
            })
            .await
            .unwrap()
            .into_inner());
        if cur["metadata"]["finalizers"] == json!(["example.com/keep"]) {
            break cur;
        }
        assert!(std::time::Instant::now() < deadline, "{cur}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let t = condition(&cur, "Terminating");
    assert_eq!(
        (
            t["status"].as_str(),
            t["reason"].as_str(),
            t["message"].as_str()
        ),
        (
            Some("False"),
            Some("InstanceDeletionCompleted"),
            Some("removed all instances")
        )
    );
    // An update dropping the last finalizer deletes it (store.go ShouldDeleteDuringUpdate).
    let mut next = cur.clone();
    next["metadata"]
        .as_object_mut()
        .unwrap()
        .remove("finalizers");
    s.registry.update_crd(write("t1", &next)).await.unwrap();
    let e = err(s
        .registry
        .get_crd(pb::CrdGetRequest {
            tenant: "t1".into(),
            name: "crontabs.stable.example.com".into(),
        })
        .await
        .unwrap_err());
    assert_eq!(e.code, 404);
}

#[tokio::test]
async fn openapi_of_the_admin_scope_has_the_tenant_type() {
    use crdplane_core::tenancy::ADMIN_SCOPE;
    let mut s = stack().await;
    let req = |tenant: &str, path: &str| pb::OpenApiRequest {
        tenant: tenant.into(),
        path: path.into(),
    };
    let root = s
        .registry
        .open_api_v2(req(ADMIN_SCOPE, ""))
        .await
        .unwrap()
        .into_inner();
    let doc: Value = serde_json::from_slice(&root.json).unwrap();
    assert_eq!(
        doc["definitions"]["io.crdplane.v1alpha1.Tenant"]["x-kubernetes-group-version-kind"][0]["kind"],
        "Tenant"
    );
    assert!(doc["paths"]["/apis/crdplane.io/v1alpha1/tenants/{name}"].is_object());
    let gv = s
        .registry
        .open_api_v3(req(ADMIN_SCOPE, "apis/crdplane.io/v1alpha1"))
        .await
        .unwrap()
        .into_inner();
    assert!(gv.found);
    let gv_doc: Value = serde_json::from_slice(&gv.json).unwrap();
    assert!(gv_doc["components"]["schemas"]["io.crdplane.v1alpha1.TenantList"].is_object());

    // Other tenants' documents do not have it.
    let t1 = s
        .registry
        .open_api_v2(req("t1", ""))
        .await
        .unwrap()
        .into_inner();
    assert!(!String::from_utf8_lossy(&t1.json).contains("crdplane.io"));
    assert_ne!(t1.etag, root.etag);
    let missing = s
        .registry
        .open_api_v3(req("t1", "apis/crdplane.io/v1alpha1"))
        .await
        .unwrap()
        .into_inner();
    assert!(!missing.found);
}
