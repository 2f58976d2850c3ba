//! kube-rs's `runtime::finalizer` + `Controller` against the real stack: the finalizer is
//! added with kube-rs's JSON patch (`test` of a missing `/metadata/finalizers` against null,
//! then `add`), the reconciler writes the same status on every run without a hot loop (a
//! write that changes nothing stores nothing: the resourceVersion stays, watchers see no
//! MODIFIED), and deleting the object runs the cleanup and lets it go.

use crdplane_tests::{Stack, WatchStream, http_request, kubeconfig_yaml};
use futures::StreamExt;
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams,
};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::finalizer::{Event, finalizer};
use kube::runtime::watcher;
use serde_json::json;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

const CRD: &str = r#"{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition",
 "metadata":{"name":"widgets.example.com"},
 "spec":{"group":"example.com","scope":"Namespaced",
  "names":{"plural":"widgets","singular":"widget","kind":"Widget"},
  "versions":[{"name":"v1","served":true,"storage":true,"subresources":{"status":{}},
   "schema":{"openAPIV3Schema":{"type":"object","properties":{
     "spec":{"type":"object","properties":{"n":{"type":"integer"}}},
     "status":{"type":"object","properties":{"phase":{"type":"string"}}}}}}}]}}"#;
const FINALIZER: &str = "example.com/cleanup";

struct Ctx {
    api: Api<DynamicObject>,
    reconciles: AtomicUsize,
    cleanups: AtomicUsize,
}

async fn reconcile(
    obj: Arc<DynamicObject>,
    ctx: Arc<Ctx>,
) -> Result<Action, kube::runtime::finalizer::Error<kube::Error>> {
    let api = ctx.api.clone();
    let c = ctx.clone();
    finalizer(&ctx.api, FINALIZER, obj, |ev| async move {
        match ev {
            Event::Apply(o) => {
                // The same status every time, and a quick requeue: each run is a no-op write.
                let name = o.metadata.name.clone().unwrap_or_default();
                api.patch_status(
                    &name,
                    &PatchParams::default(),
                    &Patch::Merge(json!({"status":{"phase":"Ready"}})),
                )
                .await?;
                c.reconciles.fetch_add(1, Ordering::SeqCst);
                Ok(Action::requeue(Duration::from_millis(20)))
            }
            Event::Cleanup(_) => {
                c.cleanups.fetch_add(1, Ordering::SeqCst);
                Ok(Action::await_change())
            }
        }
    })
    .await
}

fn error_policy(
    _: Arc<DynamicObject>,
    e: &kube::runtime::finalizer::Error<kube::Error>,
    _: Arc<Ctx>,
) -> Action {
    eprintln!("reconcile error: {e}");
    Action::requeue(Duration::from_millis(100))
}

async fn wait_for(what: &str, mut f: impl AsyncFnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !f().await {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn finalizer_controller_without_hot_loop() {
    let stack = Stack::start_with_redis().expect("stack");
    let crds = format!(
        "{}/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
        stack.gateway
    );
    let (code, body) = http_request("POST", &crds, Some("application/json"), Some(CRD)).unwrap();
    assert_eq!(code, 201, "{body}");
    let kc = kube::config::Kubeconfig::from_yaml(&kubeconfig_yaml(&stack.gateway, "crdplane"))
        .expect("kubeconfig");
    let cfg = kube::Config::from_custom_kubeconfig(kc, &Default::default())
        .await
        .expect("config");
    let client = kube::Client::try_from(cfg).expect("client");
    let ar = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("example.com", "v1", "Widget"),
        "widgets",
    );
    let api: Api<DynamicObject> = Api::namespaced_with(client, "default", &ar);
    wait_for("the CRD to serve", async || {
        api.list(&Default::default()).await.is_ok()
    })
    .await;

    let ctx = Arc::new(Ctx {
        api: api.clone(),
        reconciles: AtomicUsize::new(0),
        cleanups: AtomicUsize::new(0),
    });
    let controller = tokio::spawn(
        Controller::new_with(api.clone(), watcher::Config::default(), ar.clone())
            .run(reconcile, error_policy, ctx.clone())
            .for_each(|_| async {}),
    );

    let w = DynamicObject::new("w", &ar).data(json!({"spec":{"n":1}}));
    api.create(&PostParams::default(), &w)
        .await
        .expect("create");

    // The finalizer is added (kube-rs's JSON patch with `test … null`) and the status written.
    wait_for("finalizer and status", async || {
        let o = api.get("w").await.expect("get");
        o.metadata.finalizers.unwrap_or_default() == vec![FINALIZER.to_string()]
            && o.data["status"]["phase"] == "Ready"
    })
    .await;
    let settled = api.get("w").await.expect("get");
    let rv = settled.metadata.resource_version.clone().expect("rv");
    let watch = WatchStream::open(
        &format!(
            "{}/apis/example.com/v1/namespaces/default/widgets?watch=1&resourceVersion={rv}",
            stack.gateway
        ),
        None,
    )
    .unwrap();
    // Twenty more reconciles, each writing the unchanged status: nothing is stored.
    let seen = ctx.reconciles.load(Ordering::SeqCst);
    wait_for("twenty more reconciles", async || {
        ctx.reconciles.load(Ordering::SeqCst) >= seen + 20
    })
    .await;
    let now = api.get("w").await.expect("get");
    assert_eq!(now.metadata.resource_version.as_deref(), Some(rv.as_str()));
    // The watch's first event is the next real change, no MODIFIED before it.
    api.patch(
        "w",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata":{"labels":{"changed":"yes"}}})),
    )
    .await
    .expect("label");
    let ev = watch.next(Duration::from_secs(10)).expect("an event");
    assert_eq!(ev["type"], "MODIFIED", "{ev}");
    assert_eq!(ev["object"]["metadata"]["labels"]["changed"], "yes", "{ev}");

    // Deleting runs the cleanup, which removes the finalizer; the object goes away.
    api.delete("w", &DeleteParams::default())
        .await
        .expect("delete");
    wait_for("the object to go", async || {
        matches!(api.get_opt("w").await, Ok(None))
    })
    .await;
    assert!(ctx.cleanups.load(Ordering::SeqCst) >= 1);
    controller.abort();
}
