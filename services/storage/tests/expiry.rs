//! Objects with a time to live (upstream `--event-ttl`: an etcd lease attached on every create
//! and update of an event), against a real redis-server and the storage service:
//! - an object written with a ttl is deleted by the sweeper once it is due (GET 404, not
//!   listed), as a normal delete: a watcher opened before receives DELETED;
//! - an update with a ttl moves the expiry out, one without it makes the object permanent;
//! - an object written without a ttl never expires; a delete removes the expiry entry;
//! - several sweepers at once delete each due object once.
//!
//! Expiry times are Redis `TIME` seconds; the tests wait on conditions (bounded polls), never
//! on fixed sleeps.

use crdplane_core::rvslot;
use crdplane_proto::GrpcStatusExt;
use crdplane_proto::v1 as pb;
use crdplane_proto::v1::storage_client::StorageClient;
use crdplane_storage::keys::Keyspace;
use crdplane_storage::store::{Store, StoreOptions};
use crdplane_tests::RedisServer;
use serde_json::{Value, json};
use std::time::{Duration, Instant};
use tonic::transport::Channel;

/// Redis, the storage service on it (sweeping every `sweep`; zero: off), and a [`Store`] of
/// the test's own on the same Redis.
async fn start(sweep: Duration) -> (RedisServer, StorageClient<Channel>, Store) {
    let redis = RedisServer::start().expect("redis");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let cfg = crdplane_storage::Config {
        redis_url: redis.url(),
        expiry_sweep_period: sweep,
        ..Default::default()
    };
    let target = crdplane_storage::backend::Target::discover(&cfg.redis_url, cfg.redis_timeout)
        .await
        .expect("redis");
    let store = Store::connect(
        &target,
        StoreOptions {
            history_len: cfg.history_len,
            history_window_secs: cfg.history_window_secs,
            durability: cfg.durability,
            redis_timeout: cfg.redis_timeout,
            wait_replicas: 0,
        },
    )
    .await
    .expect("store");
    tokio::spawn(crdplane_storage::serve(cfg, listener, Default::default()));
    let client = loop {
        match StorageClient::connect(format!("http://{addr}")).await {
            Ok(c) => break c,
            Err(_) => tokio::task::yield_now().await,
        }
    };
    (redis, client, store)
}

const TENANT: &str = "t1";

fn rref() -> pb::ResourceRef {
    pb::ResourceRef {
        tenant: TENANT.into(),
        group: String::new(),
        resource: "events".into(),
    }
}

fn keyspace() -> Keyspace {
    Keyspace::new(&rref()).unwrap()
}

fn key(name: &str) -> pb::ObjectKey {
    pb::ObjectKey {
        resource: Some(rref()),
        namespace: "default".into(),
        name: name.into(),
    }
}

fn write(name: &str, message: &str) -> pb::ObjectWrite {
    let obj = json!({"apiVersion": "v1", "kind": "Event",
        "metadata": {"name": name, "namespace": "default", "resourceVersion": ""},
        "reason": "Test", "message": message, "type": "Normal"});
    let (h, t) = rvslot::split(&obj).unwrap();
    pb::ObjectWrite {
        head: h.into(),
        tail: t.into(),
    }
}

async fn create(c: &mut StorageClient<Channel>, name: &str, ttl: u64) -> u64 {
    c.create(pb::CreateRequest {
        key: Some(key(name)),
        object: Some(write(name, "created")),
        dry_run: false,
        ttl_seconds: ttl,
    })
    .await
    .unwrap()
    .into_inner()
    .resource_version
}

async fn update(c: &mut StorageClient<Channel>, name: &str, ttl: u64) -> u64 {
    c.update(pb::UpdateRequest {
        key: Some(key(name)),
        object: Some(write(name, "updated")),
        expected_resource_version: 0,
        dry_run: false,
        ttl_seconds: ttl,
    })
    .await
    .unwrap()
    .into_inner()
    .resource_version
}

async fn exists(c: &mut StorageClient<Channel>, name: &str) -> bool {
    match c
        .get(pb::GetRequest {
            key: Some(key(name)),
        })
        .await
    {
        Ok(_) => true,
        Err(s) => {
            assert_eq!(crdplane_core::ApiError::from_grpc(&s).code, 404, "{s:?}");
            false
        }
    }
}

async fn names(c: &mut StorageClient<Channel>) -> Vec<String> {
    let l = c
        .list(pb::ListRequest {
            resource: Some(rref()),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    l.items
        .iter()
        .map(|i| {
            let v: Value = serde_json::from_slice(i).unwrap();
            v["metadata"]["name"].as_str().unwrap().to_string()
        })
        .collect()
}

async fn redis_conn(r: &RedisServer) -> redis::aio::MultiplexedConnection {
    redis::Client::open(r.url())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap()
}

/// The object's expiry (unix second) in the triple's expiry set, if it has one.
async fn expiry(r: &RedisServer, name: &str) -> Option<u64> {
    let mut c = redis_conn(r).await;
    let score: Option<f64> = redis::cmd("ZSCORE")
        .arg(keyspace().ttl)
        .arg(format!("default/{name}"))
        .query_async(&mut c)
        .await
        .unwrap();
    score.map(|s| s as u64)
}

/// Redis's clock (unix seconds), which expiry times are measured on.
async fn redis_now(r: &RedisServer) -> u64 {
    let mut c = redis_conn(r).await;
    let (secs, _): (String, String) = redis::cmd("TIME").query_async(&mut c).await.unwrap();
    secs.parse().unwrap()
}

/// Polls `f` every 50 ms until it holds; fails after `secs`.
async fn wait_until<F, Fut>(secs: u64, what: &str, mut f: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + Duration::from_secs(secs);
    while !f().await {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn objects_expire_as_normal_deletes_seen_by_watchers() {
    let (r, mut c, _) = start(Duration::from_millis(200)).await;
    let first = create(&mut c, "kept", 0).await;
    // One through CreateMany: its items carry the ttl too.
    let batch = c
        .create_many(pb::CreateManyRequest {
            requests: vec![pb::CreateRequest {
                key: Some(key("expiring")),
                object: Some(write("expiring", "created")),
                dry_run: false,
                ttl_seconds: 2,
            }],
        })
        .await
        .unwrap()
        .into_inner();
    let created_rv = batch.results[0].object.as_ref().unwrap().resource_version;
    let now = redis_now(&r).await;
    let at = expiry(&r, "expiring").await.expect("expiry recorded");
    // Written at most a second before `now`; 2 s later, rounded up to a whole second.
    assert!((now + 2..=now + 3).contains(&at), "expiry {at}, now {now}");
    assert_eq!(expiry(&r, "kept").await, None, "no ttl, no expiry");

    let mut w = c
        .watch(pb::WatchRequest {
            resource: Some(rref()),
            from_resource_version: first,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    let added = w.message().await.unwrap().unwrap();
    assert_eq!(
        (added.r#type, added.resource_version),
        (pb::watch_event::Type::Added as i32, created_rv)
    );
    assert!(exists(&mut c, "expiring").await);

    let deleted = tokio::time::timeout(Duration::from_secs(15), w.message())
        .await
        .expect("DELETED within 15 s")
        .unwrap()
        .unwrap();
    assert_eq!(deleted.r#type, pb::watch_event::Type::Deleted as i32);
    assert!(deleted.resource_version > created_rv, "a new revision");
    let v: Value = serde_json::from_slice(&deleted.object).unwrap();
    assert_eq!(v["metadata"]["name"], "expiring");
    assert_eq!(
        v["metadata"]["resourceVersion"],
        deleted.resource_version.to_string()
    );
    assert!(
        redis_now(&r).await >= at,
        "not deleted before its expiry ({at})"
    );
    assert!(!exists(&mut c, "expiring").await);
    assert_eq!(names(&mut c).await, ["kept"]);
    assert_eq!(expiry(&r, "expiring").await, None);
    // The expiry set is gone with its last member: nothing left for the sweeper to find.
    let mut conn = redis_conn(&r).await;
    let n: u64 = redis::cmd("EXISTS")
        .arg(keyspace().ttl)
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(n, 0);
    assert!(exists(&mut c, "kept").await, "no ttl: never expires");
}

#[tokio::test]
async fn updates_move_the_expiry_and_deletes_remove_it() {
    // The sweeper is off; the test sweeps itself.
    let (r, mut c, store) = start(Duration::ZERO).await;
    create(&mut c, "moved", 1).await;
    create(&mut c, "forever", 1).await;
    create(&mut c, "plain", 0).await;
    create(&mut c, "deleted", 100).await;
    let due = expiry(&r, "moved").await.unwrap();

    // Pushed out by an update with a ttl; made permanent by one without.
    update(&mut c, "moved", 60).await;
    let moved = expiry(&r, "moved").await.unwrap();
    assert!(moved >= due + 58, "expiry moved from {due} to {moved}");
    update(&mut c, "forever", 0).await;
    assert_eq!(expiry(&r, "forever").await, None);

    // A delete removes the expiry entry.
    assert!(expiry(&r, "deleted").await.is_some());
    c.delete(pb::DeleteRequest {
        key: Some(key("deleted")),
        expected_resource_version: 0,
        dry_run: false,
    })
    .await
    .unwrap();
    assert_eq!(expiry(&r, "deleted").await, None);

    // Past the first expiry: nothing is due, nothing is deleted.
    wait_until(10, "the first expiry to pass", || {
        let r = &r;
        async move { redis_now(r).await > due }
    })
    .await;
    assert_eq!(crdplane_storage::expiry::sweep(&store).await.unwrap(), 0);
    let mut all = names(&mut c).await;
    all.sort();
    assert_eq!(all, ["forever", "moved", "plain"]);
}

#[tokio::test]
async fn concurrent_sweepers_delete_each_object_once() {
    let (r, mut c, store) = start(Duration::ZERO).await;
    let n = 600; // more than one script call's batch
    let requests: Vec<pb::CreateRequest> = (0..n)
        .map(|i| {
            let name = format!("e{i:04}");
            pb::CreateRequest {
                key: Some(key(&name)),
                object: Some(write(&name, "created")),
                dry_run: false,
                ttl_seconds: 1,
            }
        })
        .collect();
    let first = create(&mut c, "kept", 0).await;
    for chunk in requests.chunks(100) {
        let out = c
            .create_many(pb::CreateManyRequest {
                requests: chunk.to_vec(),
            })
            .await
            .unwrap()
            .into_inner();
        assert!(out.results.iter().all(|r| r.object.is_some()));
    }
    // The last one created expires last.
    let due = expiry(&r, &format!("e{:04}", n - 1)).await.unwrap();
    wait_until(10, "every expiry to pass", || {
        let r = &r;
        async move { redis_now(r).await >= due }
    })
    .await;
    let (a, b, d) = tokio::join!(
        crdplane_storage::expiry::sweep(&store),
        crdplane_storage::expiry::sweep(&store),
        crdplane_storage::expiry::sweep(&store),
    );
    assert_eq!(a.unwrap() + b.unwrap() + d.unwrap(), n as u64);
    assert_eq!(names(&mut c).await, ["kept"]);
    // Exactly one DELETED per object in the history.
    let mut w = c
        .watch(pb::WatchRequest {
            resource: Some(rref()),
            from_resource_version: first,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    let mut deleted = std::collections::HashMap::<String, u32>::new();
    let mut seen = 0;
    while seen < 2 * n {
        let e = w.message().await.unwrap().unwrap();
        seen += 1;
        if e.r#type == pb::watch_event::Type::Deleted as i32 {
            let v: Value = serde_json::from_slice(&e.object).unwrap();
            *deleted
                .entry(v["metadata"]["name"].as_str().unwrap().to_string())
                .or_default() += 1;
        }
    }
    assert_eq!(deleted.len(), n);
    assert!(deleted.values().all(|&k| k == 1));
}
