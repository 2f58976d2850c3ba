//! Storage service against a real redis-server (or, with `CRDPLANE_TEST_REDIS=cluster`, a real
//! Redis Cluster of three masters): CRUD with resourceVersion CAS, ordered paging, tenant
//! isolation, history replay and live watch, 410 for compacted history.

use crdplane_core::rvslot;
use crdplane_proto::GrpcStatusExt;
use crdplane_proto::v1 as pb;
use crdplane_proto::v1::storage_client::StorageClient;
use crdplane_tests::{RedisServer, TestRedis};
use serde_json::{Value, json};
use tonic::transport::Channel;

async fn start(history_len: usize) -> (TestRedis, StorageClient<Channel>) {
    let redis = TestRedis::start().expect("redis");
    let client = serve(redis.url(), history_len).await;
    (redis, client)
}

/// A storage on `redis_url`, on an ephemeral port, and a client of it.
async fn serve(redis_url: String, history_len: usize) -> StorageClient<Channel> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let cfg = crdplane_storage::Config {
        redis_url,
        history_len,
        ..Default::default()
    };
    tokio::spawn(crdplane_storage::serve(cfg, listener, Default::default()));
    loop {
        match StorageClient::connect(format!("http://{addr}")).await {
            Ok(c) => break c,
            Err(_) => tokio::task::yield_now().await,
        }
    }
}

/// A watch of tenant `t`'s crontabs from revision `from`.
async fn watch_from(
    c: &mut StorageClient<Channel>,
    t: &str,
    from: u64,
) -> tonic::Streaming<pb::WatchEvent> {
    c.watch(pb::WatchRequest {
        resource: Some(rref(t)),
        from_resource_version: from,
        ..Default::default()
    })
    .await
    .unwrap()
    .into_inner()
}

fn rref(tenant: &str) -> pb::ResourceRef {
    pb::ResourceRef {
        tenant: tenant.into(),
        group: "stable.example.com".into(),
        resource: "crontabs".into(),
    }
}

fn key(tenant: &str, ns: &str, name: &str) -> pb::ObjectKey {
    pb::ObjectKey {
        resource: Some(rref(tenant)),
        namespace: ns.into(),
        name: name.into(),
    }
}

fn write(obj: &Value) -> pb::ObjectWrite {
    let (h, t) = rvslot::split(obj).unwrap();
    pb::ObjectWrite {
        head: h.into(),
        tail: t.into(),
    }
}

fn crontab(ns: &str, name: &str, replicas: i64) -> Value {
    json!({"apiVersion":"stable.example.com/v1","kind":"CronTab","metadata":{"name":name,"namespace":ns},"spec":{"replicas":replicas}})
}

async fn create(c: &mut StorageClient<Channel>, t: &str, ns: &str, name: &str) -> pb::StoredObject {
    c.create(pb::CreateRequest {
        key: Some(key(t, ns, name)),
        object: Some(write(&crontab(ns, name, 1))),
        dry_run: false,
        ttl_seconds: 0,
    })
    .await
    .unwrap()
    .into_inner()
}

fn api_error(s: tonic::Status) -> crdplane_core::ApiError {
    crdplane_core::ApiError::from_grpc(&s)
}

#[tokio::test]
async fn crud_with_resource_version_concurrency() {
    let (_r, mut c) = start(100).await;
    let a = create(&mut c, "t1", "default", "a").await;
    let v: Value = serde_json::from_slice(&a.json).unwrap();
    assert_eq!(
        v["metadata"]["resourceVersion"],
        a.resource_version.to_string()
    );
    let dup = c
        .create(pb::CreateRequest {
            key: Some(key("t1", "default", "a")),
            object: Some(write(&crontab("default", "a", 1))),
            dry_run: false,
            ttl_seconds: 0,
        })
        .await
        .unwrap_err();
    let e = api_error(dup);
    assert_eq!(
        (e.code, e.message.as_str()),
        (409, "crontabs.stable.example.com \"a\" already exists")
    );

    let got = c
        .get(pb::GetRequest {
            key: Some(key("t1", "default", "a")),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(got.json, a.json);
    assert_eq!(got.resource_version, a.resource_version);

    let upd = c
        .update(pb::UpdateRequest {
            key: Some(key("t1", "default", "a")),
            object: Some(write(&crontab("default", "a", 2))),
            expected_resource_version: a.resource_version,
            dry_run: false,
            ttl_seconds: 0,
        })
        .await
        .unwrap()
        .into_inner();
    assert!(upd.resource_version > a.resource_version);
    let stale = c
        .update(pb::UpdateRequest {
            key: Some(key("t1", "default", "a")),
            object: Some(write(&crontab("default", "a", 3))),
            expected_resource_version: a.resource_version,
            dry_run: false,
            ttl_seconds: 0,
        })
        .await
        .unwrap_err();
    let e = api_error(stale);
    assert_eq!(e.code, 409);
    assert_eq!(
        e.message,
        "Operation cannot be fulfilled on crontabs.stable.example.com \"a\": the object has been modified; please apply your changes to the latest version and try again"
    );

    let dry = c
        .delete(pb::DeleteRequest {
            key: Some(key("t1", "default", "a")),
            expected_resource_version: 0,
            dry_run: true,
        })
        .await
        .unwrap();
    assert_eq!(
        dry.into_inner().resource_version,
        upd.resource_version,
        "dry-run delete changes nothing"
    );
    let del = c
        .delete(pb::DeleteRequest {
            key: Some(key("t1", "default", "a")),
            expected_resource_version: 0,
            dry_run: false,
        })
        .await
        .unwrap()
        .into_inner();
    let dv: Value = serde_json::from_slice(&del.json).unwrap();
    assert_eq!(
        dv["metadata"]["resourceVersion"],
        del.resource_version.to_string(),
        "DELETED state carries the deletion revision"
    );
    assert_eq!(dv["spec"]["replicas"], 2);
    let e = api_error(
        c.get(pb::GetRequest {
            key: Some(key("t1", "default", "a")),
        })
        .await
        .unwrap_err(),
    );
    assert_eq!(
        (e.code, e.message.as_str()),
        (404, "crontabs.stable.example.com \"a\" not found")
    );
}

#[tokio::test]
async fn lists_page_in_key_order_and_tenants_are_isolated() {
    let (_r, mut c) = start(100).await;
    for ns in ["b", "a"] {
        for n in ["z", "x", "y"] {
            create(&mut c, "t1", ns, n).await;
        }
    }
    create(&mut c, "t2", "a", "other").await;
    let names = |items: &[bytes::Bytes]| -> Vec<String> {
        items
            .iter()
            .map(|i| {
                let v: Value = serde_json::from_slice(i).unwrap();
                format!(
                    "{}/{}",
                    v["metadata"]["namespace"].as_str().unwrap(),
                    v["metadata"]["name"].as_str().unwrap()
                )
            })
            .collect()
    };
    let all = c
        .list(pb::ListRequest {
            resource: Some(rref("t1")),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        names(&all.items),
        ["a/x", "a/y", "a/z", "b/x", "b/y", "b/z"]
    );
    let p1 = c
        .list(pb::ListRequest {
            resource: Some(rref("t1")),
            limit: 4,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(names(&p1.items), ["a/x", "a/y", "a/z", "b/x"]);
    assert_eq!(
        (p1.remaining_item_count, p1.has_remaining_item_count),
        (2, true)
    );
    let p2 = c
        .list(pb::ListRequest {
            resource: Some(rref("t1")),
            limit: 4,
            start_after: p1.next_start_after.clone(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(names(&p2.items), ["b/y", "b/z"]);
    assert!(p2.next_start_after.is_empty());
    let ns_b = c
        .list(pb::ListRequest {
            resource: Some(rref("t1")),
            namespace: "b".into(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(names(&ns_b.items), ["b/x", "b/y", "b/z"]);
    let by_name = c
        .list(pb::ListRequest {
            resource: Some(rref("t1")),
            namespace: "a".into(),
            field_selector: "metadata.name=y".into(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(names(&by_name.items), ["a/y"]);
    let t2 = c
        .list(pb::ListRequest {
            resource: Some(rref("t2")),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(names(&t2.items), ["a/other"]);
    assert_eq!(
        t2.resource_version, 1,
        "each (tenant, resource) has its own revision counter"
    );
}

#[tokio::test]
async fn watch_replays_history_then_follows_live_writes() {
    let (_r, mut c) = start(100).await;
    let a = create(&mut c, "t1", "default", "a").await;
    create(&mut c, "t1", "default", "b").await;
    let mut w = watch_from(&mut c, "t1", a.resource_version).await;
    let e1 = w.message().await.unwrap().unwrap();
    assert_eq!(
        (e1.r#type, e1.resource_version),
        (pb::watch_event::Type::Added as i32, a.resource_version + 1)
    );
    c.delete(pb::DeleteRequest {
        key: Some(key("t1", "default", "a")),
        expected_resource_version: 0,
        dry_run: false,
    })
    .await
    .unwrap();
    let e2 = w.message().await.unwrap().unwrap();
    assert_eq!(e2.r#type, pb::watch_event::Type::Deleted as i32);
    assert_eq!(e2.resource_version, a.resource_version + 2);

    // From "0": the current state first, then a progress marker at the list revision.
    let mut w0 = c
        .watch(pb::WatchRequest {
            resource: Some(rref("t1")),
            send_initial_state: true,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    let first = w0.message().await.unwrap().unwrap();
    assert_eq!(first.r#type, pb::watch_event::Type::Added as i32);
    let v: Value = serde_json::from_slice(&first.object).unwrap();
    assert_eq!(v["metadata"]["name"], "b");
    let p = w0.message().await.unwrap().unwrap();
    assert_eq!(
        (p.r#type, p.resource_version),
        (
            pb::watch_event::Type::Progress as i32,
            a.resource_version + 2
        )
    );
}

#[tokio::test]
async fn watch_from_compacted_history_is_410_with_upstream_text() {
    let (_r, mut c) = start(16).await;
    for i in 0..400 {
        create(&mut c, "t1", "default", &format!("o{i}")).await;
    }
    let mut w = watch_from(&mut c, "t1", 1).await;
    let e = api_error(w.message().await.unwrap_err());
    assert_eq!(e.code, 410);
    assert!(
        e.message.starts_with("too old resource version: 1 ("),
        "{}",
        e.message
    );
}

/// Redis comes back without the data an open watch has seen (its disk was lost): the
/// watch's revision is past everything the store holds, so the watch ends with 410 and its
/// client lists again — instead of going on silently and skipping every new event up to
/// the revision it had (the counter starts again from 1).
#[tokio::test]
async fn watch_ends_with_410_when_redis_returns_without_what_it_saw() {
    let mut redis = RedisServer::start().expect("redis");
    let mut c = serve(redis.url(), 100).await;
    let a = create(&mut c, "t1", "default", "a").await;
    let mut w = watch_from(&mut c, "t1", a.resource_version).await;
    for n in ["b", "c", "d"] {
        create(&mut c, "t1", "default", n).await;
    }
    for _ in 0..3 {
        w.message().await.unwrap().unwrap();
    }

    redis.stop();
    for e in std::fs::read_dir(redis.dir.path()).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            std::fs::remove_dir_all(&p).unwrap();
        } else {
            std::fs::remove_file(&p).unwrap();
        }
    }
    redis.restart().expect("restart redis");

    let end = tokio::time::timeout(std::time::Duration::from_secs(30), w.message())
        .await
        .expect("the watch neither ended nor sent anything after Redis lost its data");
    let e = api_error(end.expect_err("the watch went on past data Redis no longer has"));
    assert_eq!(e.code, 410, "{e:?}");
    assert!(
        e.message.starts_with("too old resource version: 4 ("),
        "{}",
        e.message
    );
    // The store itself is usable again, from revision 1.
    let again = loop {
        match c
            .create(pb::CreateRequest {
                key: Some(key("t1", "default", "e")),
                object: Some(write(&crontab("default", "e", 1))),
                dry_run: false,
                ttl_seconds: 0,
            })
            .await
        {
            Ok(o) => break o.into_inner(),
            Err(s) if s.code() == tonic::Code::Unavailable => {
                tokio::time::sleep(std::time::Duration::from_millis(50)).await
            }
            Err(s) => panic!("create after the restart: {s:?}"),
        }
    };
    assert_eq!(again.resource_version, 1);
}

#[tokio::test]
async fn get_many_answers_in_request_order_across_tenants() {
    let (_redis, mut c) = start(100).await;
    let a = create(&mut c, "t1", "ns", "a").await;
    let b = create(&mut c, "t2", "ns", "b").await;
    let r = c
        .get_many(pb::GetManyRequest {
            keys: vec![
                key("t2", "ns", "b"),
                key("t1", "ns", "missing"),
                key("t1", "ns", "a"),
                key("t2", "ns", "a"),
            ],
        })
        .await
        .unwrap()
        .into_inner()
        .results;
    let got: Vec<(bool, u64)> = r.iter().map(|g| (g.found, g.resource_version)).collect();
    assert_eq!(
        got,
        [
            (true, b.resource_version),
            (false, 0),
            (true, a.resource_version),
            (false, 0)
        ]
    );
    assert_eq!(r[0].json, b.json);
    assert_eq!(r[2].json, a.json);
    // A bad key fails the whole call, as Get does.
    let e = c
        .get_many(pb::GetManyRequest {
            keys: vec![key("t1", "ns", "a"), key("t1", "ns", "x/y")],
        })
        .await
        .unwrap_err();
    assert_eq!(api_error(e).code, 400);
}

/// Pages read while other writers update the same objects are still each the state at the
/// page's revision: every item's resourceVersion is at most the list's, and no item is lost
/// (the page read falls back to the atomic script when a write lands between its two steps).
#[tokio::test]
async fn pages_under_concurrent_updates_are_consistent_snapshots() {
    let (_r, mut c) = start(1000).await;
    let n = 40;
    for i in 0..n {
        create(&mut c, "t1", "ns", &format!("o{i:02}")).await;
    }
    let mut w = c.clone();
    let writer = tokio::spawn(async move {
        for round in 0..60 {
            for i in 0..n {
                let name = format!("o{i:02}");
                let obj = crontab("ns", &name, round);
                w.update(pb::UpdateRequest {
                    key: Some(key("t1", "ns", &name)),
                    object: Some(write(&obj)),
                    expected_resource_version: 0,
                    dry_run: false,
                    ttl_seconds: 0,
                })
                .await
                .unwrap();
            }
        }
    });
    let mut pages = 0;
    while !writer.is_finished() {
        let p = c
            .list(pb::ListRequest {
                resource: Some(rref("t1")),
                namespace: "ns".into(),
                limit: 15,
                start_after: "ns/o10".into(),
                ..Default::default()
            })
            .await
            .unwrap()
            .into_inner();
        assert_eq!(p.items.len(), 15);
        assert_eq!(p.remaining_item_count, (n - 11 - 15) as u64);
        for item in &p.items {
            let v: Value = serde_json::from_slice(item).unwrap();
            let rv: u64 = v["metadata"]["resourceVersion"]
                .as_str()
                .unwrap()
                .parse()
                .unwrap();
            assert!(
                rv <= p.resource_version,
                "item rv {rv} > list rv {}",
                p.resource_version
            );
        }
        pages += 1;
    }
    writer.await.unwrap();
    assert!(pages > 10, "only {pages} pages read while writing");
}

/// CreateMany answers each item as Create would, in request order, with revisions assigned in
/// request order: new objects, a duplicate of an earlier item of the same batch
/// (AlreadyExists), a bad key (400, the others unaffected), a dry run (nothing stored), and
/// another tenant. After the script cache is flushed (NOSCRIPT) the batch still goes through.
#[tokio::test]
async fn create_many_answers_each_item_as_create_would() {
    let (redis, mut c) = start(100).await;
    let item = |t: &str, name: &str, dry_run: bool| pb::CreateRequest {
        key: Some(key(t, "ns", name)),
        object: Some(write(&crontab("ns", name, 1))),
        dry_run,
        ttl_seconds: 0,
    };
    let requests = vec![
        item("t1", "a", false),
        item("t1", "b", false),
        item("t1", "a", false),
        item("t1", "x/y", false),
        item("t1", "dry", true),
        item("t2", "a", false),
    ];
    let r = c
        .create_many(pb::CreateManyRequest { requests })
        .await
        .unwrap()
        .into_inner()
        .results;
    assert_eq!(r.len(), 6);
    let rv = |i: usize| r[i].object.as_ref().unwrap().resource_version;
    let err = |i: usize| api_error(r[i].error.as_ref().unwrap().to_status());
    assert!(rv(0) > 0 && rv(1) > rv(0), "{} {}", rv(0), rv(1));
    assert_eq!(err(2).code, 409);
    assert_eq!(
        err(2).message,
        r#"crontabs.stable.example.com "a" already exists"#
    );
    assert_eq!(err(3).code, 400);
    assert_eq!(r[4].object.as_ref().unwrap().resource_version, 0);
    assert!(rv(5) > 0);
    // What was stored is what a Get returns; the dry run and the duplicate left nothing.
    for (i, t, name) in [(0, "t1", "a"), (1, "t1", "b"), (5, "t2", "a")] {
        let g = c
            .get(pb::GetRequest {
                key: Some(key(t, "ns", name)),
            })
            .await
            .unwrap()
            .into_inner();
        assert_eq!(g.json, r[i].object.as_ref().unwrap().json);
        let v: Value = serde_json::from_slice(&g.json).unwrap();
        assert_eq!(v["metadata"]["resourceVersion"], rv(i).to_string());
    }
    let e = c
        .get(pb::GetRequest {
            key: Some(key("t1", "ns", "dry")),
        })
        .await
        .unwrap_err();
    assert_eq!(api_error(e).code, 404);

    // Every created object has its own event in the history, in revision order: a watch
    // from before the batch replays exactly a and b (the duplicate and the dry run none).
    let mut w = c
        .watch(pb::WatchRequest {
            resource: Some(rref("t1")),
            from_resource_version: rv(0) - 1,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    for (i, name) in [(0, "a"), (1, "b")] {
        let e = w.message().await.unwrap().unwrap();
        assert_eq!(
            (e.r#type, e.resource_version),
            (pb::watch_event::Type::Added as i32, rv(i))
        );
        let v: Value = serde_json::from_slice(&e.object).unwrap();
        assert_eq!(v["metadata"]["name"], name);
    }

    // Script cache flushed behind the service's back: the items still get created.
    redis.on_all(&["SCRIPT", "FLUSH"]);
    let r = c
        .create_many(pb::CreateManyRequest {
            requests: vec![item("t1", "c", false), item("t1", "d", false)],
        })
        .await
        .unwrap()
        .into_inner()
        .results;
    let rvs: Vec<u64> = r
        .iter()
        .map(|w| w.object.as_ref().expect("created").resource_version)
        .collect();
    assert!(rvs[0] > rv(1) && rvs[1] > rvs[0], "{rvs:?}");
    // The live watch sees them next, one event each.
    for want in rvs {
        let e = w.message().await.unwrap().unwrap();
        assert_eq!(e.resource_version, want);
    }
}

/// The owner index behind `ListDependents` follows creates, updates (references added and
/// removed) and deletes, per owner uid, in key order, with paging.
#[tokio::test]
async fn dependents_follow_owner_references_through_writes() {
    let (_redis, mut c) = start(100).await;
    let with_owners = |name: &str, uids: &[&str]| {
        let refs: Vec<Value> = uids
            .iter()
            .map(|u| json!({"apiVersion": "a.io/v1", "kind": "A", "name": "o", "uid": u}))
            .collect();
        json!({"apiVersion":"stable.example.com/v1","kind":"CronTab",
               "metadata":{"name":name,"namespace":"ns","ownerReferences":refs}})
    };
    let list = |c: &mut StorageClient<Channel>, uids: &[&str], limit: u32, after: &str| {
        let mut c = c.clone();
        let req = pb::ListDependentsRequest {
            resource: Some(rref("t1")),
            owner_uids: uids.iter().map(|u| u.to_string()).collect(),
            limit,
            start_after: after.into(),
        };
        async move {
            c.list_dependents(req)
                .await
                .unwrap()
                .into_inner()
                .items
                .into_iter()
                .map(|d| format!("{}:{}", d.owner_uid, d.key))
                .collect::<Vec<_>>()
        }
    };
    for (name, uids) in [("b", &["u1"][..]), ("a", &["u1", "u2"][..]), ("c", &[][..])] {
        c.create(pb::CreateRequest {
            key: Some(key("t1", "ns", name)),
            object: Some(write(&with_owners(name, uids))),
            dry_run: false,
            ttl_seconds: 0,
        })
        .await
        .unwrap();
    }
    assert_eq!(
        list(&mut c, &["u1", "u2"], 0, "").await,
        ["u1:ns/a", "u1:ns/b", "u2:ns/a"]
    );
    assert_eq!(list(&mut c, &["u1"], 1, "").await, ["u1:ns/a"]);
    assert_eq!(list(&mut c, &["u1"], 1, "ns/a").await, ["u1:ns/b"]);
    // Another tenant's index is separate.
    let mut other = rref("t2");
    other.group = "stable.example.com".into();
    let r = c
        .list_dependents(pb::ListDependentsRequest {
            resource: Some(other),
            owner_uids: vec!["u1".into()],
            ..Default::default()
        })
        .await
        .unwrap();
    assert!(r.into_inner().items.is_empty());
    // An update that drops u1 and adds u3; a delete.
    c.update(pb::UpdateRequest {
        key: Some(key("t1", "ns", "a")),
        object: Some(write(&with_owners("a", &["u3"]))),
        expected_resource_version: 0,
        dry_run: false,
        ttl_seconds: 0,
    })
    .await
    .unwrap();
    assert_eq!(
        list(&mut c, &["u1", "u3"], 0, "").await,
        ["u1:ns/b", "u3:ns/a"]
    );
    c.delete(pb::DeleteRequest {
        key: Some(key("t1", "ns", "b")),
        expected_resource_version: 0,
        dry_run: false,
    })
    .await
    .unwrap();
    assert!(list(&mut c, &["u1", "u2"], 0, "").await.is_empty());
}

/// The collector's resync RPCs: `ScanResources` walks every (tenant, resource) triple with a
/// SCAN cursor; `ScanOwned` pages through one resource's objects, returns those with owner
/// references and writes their owner-index entries back when they are missing (deleted here
/// from Redis, as for objects written before the index existed).
#[tokio::test]
async fn resync_scans_find_resources_and_rebuild_the_owner_index() {
    let (redis, mut c) = start(100).await;
    let owned = |name: &str, uid: &str| {
        json!({"apiVersion":"stable.example.com/v1","kind":"CronTab",
               "metadata":{"name":name,"namespace":"ns","ownerReferences":[
                   {"apiVersion":"a.io/v1","kind":"A","name":"o","uid":uid}]}})
    };
    for i in 0..7 {
        let obj = if i % 2 == 0 {
            owned(&format!("o{i}"), &format!("u{i}"))
        } else {
            crontab("ns", &format!("o{i}"), 1)
        };
        c.create(pb::CreateRequest {
            key: Some(key("t1", "ns", &format!("o{i}"))),
            object: Some(write(&obj)),
            dry_run: false,
            ttl_seconds: 0,
        })
        .await
        .unwrap();
    }
    create(&mut c, "t2", "ns", "x").await;
    // Every triple, across SCAN pages of one key each.
    let mut found = Vec::new();
    let mut cursor = 0;
    loop {
        let r = c
            .scan_resources(pb::ScanResourcesRequest { cursor, count: 1 })
            .await
            .unwrap()
            .into_inner();
        found.extend(
            r.resources
                .into_iter()
                .map(|r| (r.tenant, r.group, r.resource)),
        );
        cursor = r.cursor;
        if cursor == 0 {
            break;
        }
    }
    found.sort();
    found.dedup();
    let crontabs = |t: &str| {
        (
            t.to_string(),
            "stable.example.com".to_string(),
            "crontabs".to_string(),
        )
    };
    assert_eq!(found, [crontabs("t1"), crontabs("t2")]);
    // The owner index lost (as before it existed): rebuilt by the scan, page by page.
    let own = "cp:{t1|crontabs.stable.example.com}:own";
    assert_eq!(redis.cli(&["DEL", own]).trim(), "1");
    let deps = |c: &mut StorageClient<Channel>| {
        let mut c = c.clone();
        async move {
            c.list_dependents(pb::ListDependentsRequest {
                resource: Some(rref("t1")),
                owner_uids: vec!["u0".into(), "u4".into()],
                ..Default::default()
            })
            .await
            .unwrap()
            .into_inner()
            .items
            .len()
        }
    };
    assert_eq!(deps(&mut c).await, 0);
    let mut after = String::new();
    let (mut names, mut repaired, mut examined) = (Vec::new(), 0, 0);
    loop {
        let r = c
            .scan_owned(pb::ScanOwnedRequest {
                resource: Some(rref("t1")),
                start_after: after.clone(),
                limit: 3,
            })
            .await
            .unwrap()
            .into_inner();
        names.extend(r.items.iter().map(|d| d.key.clone()));
        repaired += r.repaired;
        examined += r.examined;
        if r.next_start_after.is_empty() {
            break;
        }
        after = r.next_start_after;
    }
    assert_eq!(names, ["ns/o0", "ns/o2", "ns/o4", "ns/o6"]);
    assert_eq!((repaired, examined), (4, 7));
    assert_eq!(deps(&mut c).await, 2);
    // A second scan finds the index complete.
    let r = c
        .scan_owned(pb::ScanOwnedRequest {
            resource: Some(rref("t1")),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        (r.items.len(), r.repaired, r.next_start_after.as_str()),
        (4, 0, "")
    );
}

/// Redis not yet up (or still loading its AOF) when storage starts: the service waits for it
/// with backoff instead of exiting, and serves once Redis answers.
#[tokio::test]
async fn startup_waits_for_redis() {
    let mut redis = RedisServer::start().expect("redis");
    redis.stop();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let cfg = crdplane_storage::Config {
        redis_url: redis.url(),
        ..Default::default()
    };
    let mut serving = tokio::spawn(crdplane_storage::serve(cfg, listener, Default::default()));
    // A refused connection fails at once: without the wait, `serve` has returned by now.
    let early = tokio::time::timeout(std::time::Duration::from_millis(500), &mut serving).await;
    assert!(
        early.is_err(),
        "storage ended while Redis was down: {early:?}"
    );
    redis.restart().expect("redis restart");
    let served = tokio::time::timeout(std::time::Duration::from_secs(30), async {
        let mut c = loop {
            match StorageClient::connect(format!("http://{addr}")).await {
                Ok(c) => break c,
                Err(_) => tokio::task::yield_now().await,
            }
        };
        create(&mut c, "t1", "default", "late").await
    })
    .await
    .expect("storage serves once Redis is up");
    assert!(served.resource_version > 0);
    assert!(!serving.is_finished());
}

/// A resource never written lists at a revision above 0 (a watch from "0" would mean "any"
/// and replay the current state instead of the writes after the list), and its first write
/// lands right after that revision.
#[tokio::test]
async fn a_never_written_resource_lists_at_a_real_revision() {
    let (_r, mut c) = start(100).await;
    let empty = c
        .list(pb::ListRequest {
            resource: Some(rref("fresh")),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert!(empty.items.is_empty());
    assert!(empty.resource_version > 0, "{}", empty.resource_version);
    let first = create(&mut c, "fresh", "default", "a").await;
    assert_eq!(first.resource_version, empty.resource_version + 1);
}

/// A caller that bypasses the gateway cannot store bytes that are not one JSON object
/// (create, update, or an item of CreateMany): 400, nothing written, and the resource's
/// list still answers.
#[tokio::test]
async fn bytes_that_are_not_a_json_object_are_refused() {
    let (_r, mut c) = start(100).await;
    create(&mut c, "t1", "default", "good").await;
    let bad = pb::ObjectWrite {
        head: b"not json, \"metadata\":{\"resourceVersion\":\""
            .to_vec()
            .into(),
        tail: b"\"}}".to_vec().into(),
    };
    let e = api_error(
        c.create(pb::CreateRequest {
            key: Some(key("t1", "default", "bad")),
            object: Some(bad.clone()),
            dry_run: false,
            ttl_seconds: 0,
        })
        .await
        .unwrap_err(),
    );
    assert_eq!(e.code, 400, "{e:?}");
    assert!(
        e.message.starts_with("object is not valid JSON"),
        "{}",
        e.message
    );
    let good = c
        .get(pb::GetRequest {
            key: Some(key("t1", "default", "good")),
        })
        .await
        .unwrap()
        .into_inner();
    let e = api_error(
        c.update(pb::UpdateRequest {
            key: Some(key("t1", "default", "good")),
            object: Some(bad.clone()),
            expected_resource_version: 0,
            dry_run: false,
            ttl_seconds: 0,
        })
        .await
        .unwrap_err(),
    );
    assert_eq!(e.code, 400, "{e:?}");
    let many = c
        .create_many(pb::CreateManyRequest {
            requests: vec![pb::CreateRequest {
                key: Some(key("t1", "default", "bad2")),
                object: Some(bad),
                dry_run: false,
                ttl_seconds: 0,
            }],
        })
        .await;
    match many {
        Err(s) => assert_eq!(api_error(s).code, 400),
        Ok(r) => {
            let r = r.into_inner();
            assert!(
                r.results
                    .iter()
                    .all(|x| x.error.is_some() && x.object.is_none()),
                "every item refused: {r:?}"
            );
        }
    }
    let list = c
        .list(pb::ListRequest {
            resource: Some(rref("t1")),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(list.items.len(), 1);
    let stored: Value = serde_json::from_slice(&list.items[0]).unwrap();
    assert_eq!(stored["metadata"]["name"], "good");
    // The update wrote nothing either.
    assert_eq!(list.items[0], good.json);
}

/// `PurgeTenant` walks one tenant's keys with SCAN, a few keys per call: every object of
/// every resource of the tenant is deleted the normal way (DELETED watch events, change
/// notifications), then every key but the revision counters is dropped. Tenants whose name
/// starts with the purged one's (`acme2`) and other tenants are untouched; a second walk
/// finds nothing to delete; a tenant name that is not a DNS label is refused.
#[tokio::test]
async fn purge_tenant_deletes_every_object_and_keeps_only_revision_counters() {
    let (redis, c) = start(100).await;
    let res = |tenant: &str, group: &str, resource: &str| pb::ResourceRef {
        tenant: tenant.into(),
        group: group.into(),
        resource: resource.into(),
    };
    let crontabs = |t: &str| res(t, "stable.example.com", "crontabs");
    let widgets = |t: &str| res(t, "example.io", "widgets");
    let namespaces = |t: &str| res(t, "", "namespaces");
    let put = |r: pb::ResourceRef, ns: &str, name: &str| {
        let mut c = c.clone();
        let obj = json!({"apiVersion":"v1","kind":"X","metadata":{"name":name,"namespace":ns}});
        let (ns, name) = (ns.to_string(), name.to_string());
        async move {
            c.create(pb::CreateRequest {
                key: Some(pb::ObjectKey {
                    resource: Some(r),
                    namespace: ns,
                    name,
                }),
                object: Some(write(&obj)),
                dry_run: false,
                ttl_seconds: 0,
            })
            .await
            .unwrap()
            .into_inner()
        }
    };
    let mut created = 0u64;
    let mut last_crontab_rv = 0;
    for (ns, name) in [("a", "x"), ("a", "y"), ("b", "x"), ("b", "y"), ("b", "z")] {
        last_crontab_rv = put(crontabs("acme"), ns, name).await.resource_version;
        created += 1;
    }
    for name in ["w1", "w2", "w3"] {
        put(widgets("acme"), "a", name).await;
        created += 1;
    }
    for name in ["a", "b"] {
        put(namespaces("acme"), "", name).await;
        created += 1;
    }
    assert_eq!(created, 10);
    put(crontabs("acme2"), "a", "x").await;
    put(namespaces("acme2"), "", "a").await;
    put(crontabs("other"), "a", "x").await;

    let mut watch = c
        .clone()
        .watch(pb::WatchRequest {
            resource: Some(crontabs("acme")),
            from_resource_version: last_crontab_rv,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    let mut changes = c
        .clone()
        .changes(pb::ChangesRequest {
            group: String::new(),
            resource: "namespaces".into(),
        })
        .await
        .unwrap()
        .into_inner();

    let walk = || {
        let mut c = c.clone();
        async move {
            let (mut cursor, mut calls, mut deleted, mut dropped) = (0, 0, 0, 0);
            loop {
                let r = c
                    .purge_tenant(pb::PurgeTenantRequest {
                        tenant: "acme".into(),
                        cursor,
                        count: 2,
                    })
                    .await
                    .unwrap()
                    .into_inner();
                calls += 1;
                deleted += r.deleted;
                dropped += r.dropped;
                cursor = r.cursor;
                if cursor == 0 {
                    return (calls, deleted, dropped);
                }
            }
        }
    };
    let (calls, deleted, dropped) = walk().await;
    assert!(calls > 1, "a walk of several SCAN steps ({calls})");
    assert_eq!(deleted, created);
    // Each resource's event stream and checkpoints (obj, idx, own, ttl are gone with the
    // last object).
    assert_eq!(dropped, 6, "ev and evt of three resources");

    let list = |r: pb::ResourceRef| {
        let mut c = c.clone();
        async move {
            c.list(pb::ListRequest {
                resource: Some(r),
                ..Default::default()
            })
            .await
            .unwrap()
            .into_inner()
            .items
            .iter()
            .map(|i| {
                let v: Value = serde_json::from_slice(i).unwrap();
                format!(
                    "{}/{}",
                    v["metadata"]["namespace"].as_str().unwrap_or(""),
                    v["metadata"]["name"].as_str().unwrap()
                )
            })
            .collect::<Vec<_>>()
        }
    };
    for r in [crontabs("acme"), widgets("acme"), namespaces("acme")] {
        assert_eq!(list(r.clone()).await, Vec::<String>::new(), "{r:?}");
    }
    assert_eq!(list(crontabs("acme2")).await, ["a/x"]);
    assert_eq!(list(namespaces("acme2")).await, ["/a"]);
    assert_eq!(list(crontabs("other")).await, ["a/x"]);

    // Watchers saw the deletions.
    let mut gone = Vec::new();
    while gone.len() < 5 {
        let e = tokio::time::timeout(std::time::Duration::from_secs(5), watch.message())
            .await
            .expect("DELETED event")
            .unwrap()
            .unwrap();
        assert_eq!(e.r#type, pb::watch_event::Type::Deleted as i32);
        let v: Value = serde_json::from_slice(&e.object).unwrap();
        gone.push(format!(
            "{}/{}",
            v["metadata"]["namespace"].as_str().unwrap(),
            v["metadata"]["name"].as_str().unwrap()
        ));
    }
    gone.sort();
    assert_eq!(gone, ["a/x", "a/y", "b/x", "b/y", "b/z"]);
    // Caches following namespaces were told.
    let mut told = Vec::new();
    while told.len() < 2 {
        let ch = tokio::time::timeout(std::time::Duration::from_secs(5), changes.message())
            .await
            .expect("change notification")
            .unwrap()
            .unwrap();
        told.push((ch.tenant, ch.name));
    }
    told.sort();
    assert_eq!(
        told,
        [("acme".into(), "a".into()), ("acme".into(), "b".into())]
    );

    // In Redis, only acme's revision counters are left; acme2's keys are all there.
    let scan = |pattern: &str| redis.scan(pattern);
    assert_eq!(
        scan("cp:{acme|*"),
        [
            "cp:{acme|crontabs.stable.example.com}:rev",
            "cp:{acme|namespaces}:rev",
            "cp:{acme|widgets.example.io}:rev",
        ]
    );
    let acme2 = scan("cp:{acme2|*");
    for k in [
        "cp:{acme2|crontabs.stable.example.com}:obj",
        "cp:{acme2|crontabs.stable.example.com}:idx",
        "cp:{acme2|crontabs.stable.example.com}:ev",
        "cp:{acme2|namespaces}:obj",
    ] {
        assert!(acme2.iter().any(|a| a == k), "{k} in {acme2:?}");
    }

    // A second walk finds only the counters: nothing to delete or drop.
    let (_, deleted, dropped) = walk().await;
    assert_eq!((deleted, dropped), (0, 0));
    // A tenant of the same name created again continues the revisions.
    let again = put(crontabs("acme"), "a", "x").await;
    assert!(again.resource_version > last_crontab_rv + 5);

    for bad in ["Acme", "a|b", "", "a*", "-acme", &"a".repeat(64)] {
        let s = c
            .clone()
            .purge_tenant(pb::PurgeTenantRequest {
                tenant: bad.into(),
                cursor: 0,
                count: 0,
            })
            .await
            .unwrap_err();
        assert_eq!(s.code(), tonic::Code::InvalidArgument, "{bad:?}");
        assert_eq!(api_error(s).code, 400, "{bad:?}");
    }
}
