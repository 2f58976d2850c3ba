//! kube-rs against the real stack: a `kube::Client` from a kubeconfig pointing at the
//! gateway, `Api<DynamicObject>` for the CronTab CRD (create/get/list/patch/delete, paging),
//! and `kube::runtime::watcher` in both initial-list strategies (list-watch and the streaming
//! watch-list) converging on the truth while objects are created, modified and deleted
//! concurrently, and recovering from a 410 (the storage runs with a 16-event history so a
//! resumed watch falls out of it).

use crdplane_tests::{Stack, http_request, kubeconfig_yaml};
use futures::StreamExt;
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams, Patch,
    PatchParams, PostParams,
};
use kube::runtime::{WatchStreamExt, watcher};
use serde_json::json;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const CRD: &str = r#"{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition",
 "metadata":{"name":"crontabs.stable.example.com"},
 "spec":{"group":"stable.example.com","scope":"Namespaced",
  "names":{"plural":"crontabs","singular":"crontab","kind":"CronTab"},
  "versions":[{"name":"v1","served":true,"storage":true,
   "schema":{"openAPIV3Schema":{"type":"object","properties":{"spec":{"type":"object",
     "properties":{"n":{"type":"integer"}}}}}}}]}}"#;

/// The harness stack with a 16-event storage history (reaches 410 Expired quickly).
struct MiniStack {
    gateway: String,
    _stack: Stack,
}

impl MiniStack {
    fn start() -> Self {
        let stack = Stack::start_with_redis_and(&["--history-len", "16"]).expect("stack");
        let s = Self {
            gateway: stack.gateway.clone(),
            _stack: stack,
        };
        let (code, body) = http_request(
            "POST",
            &format!(
                "{}/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
                s.gateway
            ),
            Some("application/json"),
            Some(CRD),
        )
        .unwrap();
        assert_eq!(code, 201, "{body}");
        s
    }

    /// A kube client built from a kubeconfig for this gateway, and the CronTab API.
    async fn api(&self) -> (Api<DynamicObject>, ApiResource) {
        let kc = kube::config::Kubeconfig::from_yaml(&kubeconfig_yaml(&self.gateway, "crdplane"))
            .expect("kubeconfig");
        let cfg = kube::Config::from_custom_kubeconfig(kc, &Default::default())
            .await
            .expect("config");
        let client = kube::Client::try_from(cfg).expect("client");
        let ar = ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk("stable.example.com", "v1", "CronTab"),
            "crontabs",
        );
        (Api::namespaced_with(client, "default", &ar), ar)
    }
}

fn crontab(ar: &ApiResource, name: &str, n: i64, labels: &[(&str, &str)]) -> DynamicObject {
    let mut o = DynamicObject::new(name, ar).data(json!({"spec":{"n":n}}));
    if !labels.is_empty() {
        o.metadata.labels = Some(
            labels
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        );
    }
    o
}

fn spec_n(o: &DynamicObject) -> i64 {
    o.data["spec"]["n"].as_i64().unwrap_or(-1)
}

fn name(o: &DynamicObject) -> String {
    o.metadata.name.clone().unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crud_and_paging_with_kube_rs() {
    let s = MiniStack::start();
    let (api, ar) = s.api().await;
    for i in 0..5 {
        let o = api
            .create(
                &PostParams::default(),
                &crontab(&ar, &format!("k-{i}"), i, &[]),
            )
            .await
            .expect("create");
        assert_eq!(spec_n(&o), i);
        assert!(o.metadata.resource_version.is_some() && o.metadata.uid.is_some());
    }
    let got = api.get("k-3").await.expect("get");
    assert_eq!((name(&got), spec_n(&got)), ("k-3".to_string(), 3));

    let all = api.list(&ListParams::default()).await.expect("list");
    assert_eq!(
        all.items.iter().map(name).collect::<Vec<_>>(),
        ["k-0", "k-1", "k-2", "k-3", "k-4"]
    );
    // Paging with continue tokens, as the client pages.
    let mut lp = ListParams::default().limit(2);
    let mut paged = Vec::new();
    loop {
        let page = api.list(&lp).await.expect("page");
        paged.extend(page.items.iter().map(name));
        match page.metadata.continue_.filter(|c| !c.is_empty()) {
            Some(c) => lp = lp.continue_token(&c),
            None => break,
        }
    }
    assert_eq!(paged, ["k-0", "k-1", "k-2", "k-3", "k-4"]);

    let patched = api
        .patch(
            "k-1",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec":{"n":42}})),
        )
        .await
        .expect("patch");
    assert_eq!(spec_n(&patched), 42);
    assert_eq!(patched.metadata.generation, Some(2));

    api.delete("k-2", &DeleteParams::default())
        .await
        .expect("delete");
    match api.get("k-2").await {
        Err(kube::Error::Api(s)) => {
            assert_eq!(s.code, 404);
            assert_eq!(s.reason, "NotFound");
            assert_eq!(s.message, "crontabs.stable.example.com \"k-2\" not found");
        }
        other => panic!("expected 404, got {other:?}"),
    }
    // A forged continue token surfaces as upstream's 400.
    match api
        .list(&ListParams::default().limit(1).continue_token(
            "eyJ2IjoibWV0YS5rOHMuaW8vdjEiLCJydiI6MSwic3RhcnQiOiJkZWZhdWx0L2stMFx1MDAwMCJ9",
        ))
        .await
    {
        Err(kube::Error::Api(s)) => {
            assert_eq!((s.code, s.reason.as_str()), (400, "BadRequest"));
            assert_eq!(
                s.message,
                "invalid continue token: continue key is not valid"
            );
        }
        other => panic!("expected 400, got {other:?}"),
    }
}

/// What a consumer of `watcher` events knows: the objects, and how many (re)lists it saw.
#[derive(Default)]
struct Seen {
    state: BTreeMap<String, i64>,
    buffer: BTreeMap<String, i64>,
    inits: usize,
    errors: Vec<String>,
}

fn follow(api: Api<DynamicObject>, cfg: watcher::Config) -> Arc<Mutex<Seen>> {
    let seen = Arc::new(Mutex::new(Seen::default()));
    let out = seen.clone();
    tokio::spawn(async move {
        let mut stream = watcher(api, cfg).default_backoff().boxed();
        while let Some(ev) = stream.next().await {
            let mut g = out.lock().unwrap();
            match ev {
                Ok(watcher::Event::Init) => {
                    g.inits += 1;
                    g.buffer.clear();
                }
                Ok(watcher::Event::InitApply(o)) => {
                    g.buffer.insert(name(&o), spec_n(&o));
                }
                Ok(watcher::Event::InitDone) => {
                    g.state = std::mem::take(&mut g.buffer);
                }
                Ok(watcher::Event::Apply(o)) => {
                    g.state.insert(name(&o), spec_n(&o));
                }
                Ok(watcher::Event::Delete(o)) => {
                    g.state.remove(&name(&o));
                }
                Err(e) => g.errors.push(e.to_string()),
            }
        }
    });
    seen
}

/// The truth, by a plain list.
async fn truth(api: &Api<DynamicObject>, labels: Option<&str>) -> BTreeMap<String, i64> {
    let mut lp = ListParams::default();
    if let Some(l) = labels {
        lp = lp.labels(l);
    }
    api.list(&lp)
        .await
        .expect("list")
        .items
        .iter()
        .map(|o| (name(o), spec_n(o)))
        .collect()
}

async fn converge(seen: &Arc<Mutex<Seen>>, want: &BTreeMap<String, i64>, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        {
            let g = seen.lock().unwrap();
            if &g.state == want {
                return;
            }
            if Instant::now() > deadline {
                panic!(
                    "{what}: watcher state {:?} != truth {want:?} (inits {}, errors {:?})",
                    g.state, g.inits, g.errors
                );
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Creates, modifies and deletes objects concurrently with the watchers.
async fn churn(api: &Api<DynamicObject>, ar: &ApiResource, rounds: i64) {
    for r in 0..rounds {
        let n = format!("c-{}", r % 12);
        match r % 3 {
            0 => {
                let _ = api
                    .create(&PostParams::default(), &crontab(ar, &n, r, &[]))
                    .await;
            }
            1 => {
                let _ = api
                    .patch(
                        &n,
                        &PatchParams::default(),
                        &Patch::Merge(json!({"spec":{"n":r}})),
                    )
                    .await;
            }
            _ => {
                if r % 5 == 0 {
                    let _ = api.delete(&n, &DeleteParams::default()).await;
                }
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watchers_converge_under_concurrent_writes() {
    let s = MiniStack::start();
    let (api, ar) = s.api().await;
    // State before the watchers start; the list-watch pages its initial list by 3.
    for i in 0..8 {
        api.create(
            &PostParams::default(),
            &crontab(&ar, &format!("pre-{i}"), i, &[]),
        )
        .await
        .unwrap();
    }
    let list_watch = follow(api.clone(), watcher::Config::default().page_size(3));
    let streaming = follow(api.clone(), watcher::Config::default().streaming_lists());
    let writer = {
        let (api, ar) = (api.clone(), ar.clone());
        tokio::spawn(async move { churn(&api, &ar, 150).await })
    };
    // Deletes of pre-existing objects while watching.
    for i in 0..4 {
        api.delete(&format!("pre-{i}"), &DeleteParams::default())
            .await
            .unwrap();
    }
    writer.await.unwrap();
    let want = truth(&api, None).await;
    assert!(want.len() > 4, "{want:?}");
    converge(&list_watch, &want, "list-watch").await;
    converge(&streaming, &want, "streaming list").await;
    assert!(list_watch.lock().unwrap().inits >= 1);
    assert!(streaming.lock().unwrap().inits >= 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watcher_recovers_from_expired_resource_version() {
    let s = MiniStack::start();
    let (api, ar) = s.api().await;
    for i in 0..3 {
        api.create(
            &PostParams::default(),
            &crontab(&ar, &format!("w-{i}"), i, &[("app", "watched")]),
        )
        .await
        .unwrap();
    }
    api.create(&PostParams::default(), &crontab(&ar, "noise", 0, &[]))
        .await
        .unwrap();
    // Watches end every second; the selector hides the noise, so each watch resumes from the
    // revision of the last event it saw, which the noise pushes out of the 16-event history:
    // the resumed watch gets 410 Expired and the watcher has to list again.
    let cfg = watcher::Config::default().labels("app=watched").timeout(1);
    let seen = follow(api.clone(), cfg);
    let want = truth(&api, Some("app=watched")).await;
    converge(&seen, &want, "initial").await;
    for i in 0..400 {
        api.patch(
            "noise",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec":{"n":i}})),
        )
        .await
        .unwrap();
    }
    tokio::time::sleep(Duration::from_millis(2500)).await;
    api.create(
        &PostParams::default(),
        &crontab(&ar, "w-late", 9, &[("app", "watched")]),
    )
    .await
    .unwrap();
    api.patch(
        "w-0",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec":{"n":100}})),
    )
    .await
    .unwrap();
    let want = truth(&api, Some("app=watched")).await;
    assert_eq!(want.len(), 4);
    converge(&seen, &want, "after 410").await;
    let g = seen.lock().unwrap();
    assert!(
        g.inits >= 2,
        "the watcher re-listed after 410 (inits {}, errors {:?})",
        g.inits,
        g.errors
    );
}
