//! The write verbs of `apiextensions.k8s.io/v1` CustomResourceDefinitions against the real
//! stack (real redis-server, real service binaries), over HTTP for exact codes and Status
//! texts: every PATCH type (strategic merge patch included: CRDs are a built-in type),
//! dry-run, stale resourceVersions, the `/status` endpoint, DELETE preconditions with
//! apiextensions' etcd.go texts, and the first DELETE marking the CRD whatever the
//! propagation policy (etcd.go `REST.Delete`).

use crdplane_tests::{Rest, Stack};
use serde_json::{Value, json};
use std::time::{Duration, Instant};

const CRD_YAML: &str = include_str!("../testdata/sub-crontab-crd.yaml");
const CRDS: &str = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";
const NAME: &str = "crontabs.stable.example.com";
const CLEANUP: &str = "customresourcecleanup.apiextensions.k8s.io";
const MODIFIED: &str = "Operation cannot be fulfilled on customresourcedefinitions.apiextensions.k8s.io \"crontabs.stable.example.com\": the object has been modified; please apply your changes to the latest version and try again";

/// The shared REST client with this file's helpers on top.
struct Api(Rest);

impl std::ops::Deref for Api {
    type Target = Rest;
    fn deref(&self) -> &Rest {
        &self.0
    }
}

impl Api {
    fn crd(&self) -> Value {
        let (code, v) = self.get(&format!("{CRDS}/{NAME}"));
        assert_eq!(code, 200, "{v}");
        v
    }
}

fn setup(stack: &Stack, tenant: &str) -> Api {
    let api = Api(Rest::new(format!("{}/clusters/{tenant}", stack.gateway)));
    let (code, v) = api.call("POST", CRDS, Some("application/yaml"), Some(CRD_YAML));
    assert_eq!(code, 201, "{v}");
    api
}

fn rv(v: &Value) -> String {
    v["metadata"]["resourceVersion"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

fn finalizers(v: &Value) -> Vec<String> {
    v["metadata"]["finalizers"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|f| f.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn crd_patches_of_every_type_dry_run_and_stale_writes() {
    let stack = Stack::start_with_redis().unwrap();
    let api = setup(&stack, "crdverbs");
    let one = format!("{CRDS}/{NAME}");

    // JSON patch, merge patch, strategic merge patch; labels do not move the generation.
    let (code, v) = api.send(
        "PATCH",
        &one,
        "application/json-patch+json",
        &json!([{"op": "add", "path": "/metadata/labels", "value": {"j": "1"}}]),
    );
    assert_eq!(code, 200, "{v}");
    let (code, v) = api.send(
        "PATCH",
        &one,
        "application/merge-patch+json",
        &json!({"metadata": {"labels": {"m": "1"}}}),
    );
    assert_eq!(code, 200, "{v}");
    assert_eq!(v["metadata"]["labels"], json!({"j": "1", "m": "1"}), "{v}");
    assert_eq!(v["metadata"]["generation"], 1, "{v}");
    // Strategic merge patch merges finalizers (ObjectMeta `patchStrategy:"merge"`) where a
    // merge patch would replace them; the patch's items come first (normalizeElementOrder).
    for f in ["example.com/a", "example.com/b"] {
        let (code, v) = api.send(
            "PATCH",
            &one,
            "application/strategic-merge-patch+json",
            &json!({"metadata": {"finalizers": [f]}}),
        );
        assert_eq!(code, 200, "{v}");
    }
    assert_eq!(
        finalizers(&api.crd()),
        vec!["example.com/b".to_string(), "example.com/a".to_string()]
    );
    let (code, v) = api.send(
        "PATCH",
        &one,
        "application/strategic-merge-patch+json",
        &json!({"metadata": {"$deleteFromPrimitiveList/finalizers": ["example.com/a"]}}),
    );
    assert_eq!(code, 200, "{v}");
    assert_eq!(finalizers(&v), vec!["example.com/b".to_string()], "{v}");
    let (code, v) = api.send(
        "PATCH",
        &one,
        "application/merge-patch+json",
        &json!({"metadata": {"finalizers": null}}),
    );
    assert_eq!(code, 200, "{v}");
    assert!(finalizers(&v).is_empty(), "{v}");
    // Any other patch type: 415 naming the accepted ones.
    let (code, v) = api.call("PATCH", &one, Some("text/plain"), Some("{}"));
    assert_eq!(code, 415, "{v}");
    assert_eq!(v["reason"], "UnsupportedMediaType", "{v}");
    // A spec change moves the generation.
    let (code, v) = api.send(
        "PATCH",
        &one,
        "application/merge-patch+json",
        &json!({"spec": {"names": {"shortNames": ["ct", "cts"]}}}),
    );
    assert_eq!(code, 200, "{v}");
    assert_eq!(v["metadata"]["generation"], 2, "{v}");

    // dry-run: create, patch, update and delete answer as if written; nothing is stored.
    let before = api.crd();
    let widget = json!({"apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.stable.example.com"},
        "spec": {"group": "stable.example.com", "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object",
                    "x-kubernetes-preserve-unknown-fields": true}}}]}});
    let (code, v) = api.send(
        "POST",
        &format!("{CRDS}?dryRun=All"),
        "application/json",
        &widget,
    );
    assert_eq!(code, 201, "{v}");
    assert_eq!(v["metadata"]["generation"], 1, "{v}");
    let (code, v) = api.get(&format!("{CRDS}/widgets.stable.example.com"));
    assert_eq!(code, 404, "{v}");
    assert_eq!(
        v["message"],
        "customresourcedefinitions.apiextensions.k8s.io \"widgets.stable.example.com\" not found"
    );
    let (code, v) = api.send(
        "PATCH",
        &format!("{one}?dryRun=All"),
        "application/merge-patch+json",
        &json!({"metadata": {"labels": {"dry": "1"}}}),
    );
    assert_eq!(code, 200, "{v}");
    assert_eq!(v["metadata"]["labels"]["dry"], "1", "{v}");
    let mut put = before.clone();
    put["metadata"]["labels"]["dry"] = json!("2");
    let (code, v) = api.send(
        "PUT",
        &format!("{one}?dryRun=All"),
        "application/json",
        &put,
    );
    assert_eq!(code, 200, "{v}");
    assert_eq!(v["metadata"]["labels"]["dry"], "2", "{v}");
    let (code, v) = api.call("DELETE", &format!("{one}?dryRun=All"), None, None);
    assert_eq!(code, 200, "{v}");
    assert!(v["metadata"]["deletionTimestamp"].is_string(), "{v}");
    let after = api.crd();
    assert_eq!(rv(&after), rv(&before), "{after}");
    assert!(after["metadata"]["deletionTimestamp"].is_null(), "{after}");

    // A stale resourceVersion: 409 with upstream's text, in a PUT and in a patch.
    let mut stale = after.clone();
    stale["metadata"]["resourceVersion"] = json!("1");
    stale["metadata"]["labels"]["late"] = json!("1");
    let (code, v) = api.send("PUT", &one, "application/json", &stale);
    assert_eq!(code, 409, "{v}");
    assert_eq!(v["message"], MODIFIED);
    let (code, v) = api.send(
        "PATCH",
        &one,
        "application/merge-patch+json",
        &json!({"metadata": {"resourceVersion": "1", "labels": {"late": "1"}}}),
    );
    assert_eq!(code, 409, "{v}");
    assert_eq!(v["message"], MODIFIED);
    // The name of the body must be the URL's.
    let mut other = after.clone();
    other["metadata"]["name"] = json!("other.stable.example.com");
    let (code, v) = api.send("PUT", &one, "application/json", &other);
    assert_eq!(code, 400, "{v}");
    assert_eq!(
        v["message"],
        "the name of the object (other.stable.example.com) does not match the name on the URL (crontabs.stable.example.com)"
    );
    // A missing CRD: 404 for PUT and PATCH.
    let (code, v) = api.send(
        "PATCH",
        &format!("{CRDS}/nope.stable.example.com"),
        "application/merge-patch+json",
        &json!({}),
    );
    assert_eq!(code, 404, "{v}");

    // /status: GET answers the CRD; writes there keep the spec.
    let (code, v) = api.get(&format!("{one}/status"));
    assert_eq!((code, rv(&v)), (200, rv(&after)), "{v}");
    let (code, v) = api.send(
        "PATCH",
        &format!("{one}/status"),
        "application/merge-patch+json",
        &json!({"spec": {"names": {"shortNames": ["x"]}}}),
    );
    assert_eq!(code, 200, "{v}");
    assert_eq!(
        v["spec"]["names"]["shortNames"],
        json!(["ct", "cts"]),
        "{v}"
    );
    assert_eq!(rv(&v), rv(&after), "nothing changed: {v}");

    // DELETE preconditions, with apiextensions' etcd.go texts.
    let uid = after["metadata"]["uid"].as_str().unwrap().to_string();
    let (code, v) = api.send(
        "DELETE",
        &one,
        "application/json",
        &json!({"preconditions": {"uid": "not-the-uid"}}),
    );
    assert_eq!(code, 409, "{v}");
    assert_eq!(
        v["message"],
        format!(
            "Operation cannot be fulfilled on customresourcedefinitions.apiextensions.k8s.io \"{NAME}\": Precondition failed: UID in precondition: not-the-uid, UID in object meta: {uid}"
        )
    );
    let (code, v) = api.send(
        "DELETE",
        &one,
        "application/json",
        &json!({"preconditions": {"resourceVersion": "1"}}),
    );
    assert_eq!(code, 409, "{v}");
    assert_eq!(
        v["message"],
        format!(
            "Operation cannot be fulfilled on customresourcedefinitions.apiextensions.k8s.io \"{NAME}\": Precondition failed: ResourceVersion in precondition: 1, ResourceVersion in object meta: {}",
            rv(&after)
        )
    );
    assert!(api.crd()["metadata"]["deletionTimestamp"].is_null());
}

#[test]
fn first_crd_delete_marks_it_whatever_the_propagation_policy() {
    let stack = Stack::start_with_redis().unwrap();
    let api = setup(&stack, "crdmark");
    let one = format!("{CRDS}/{NAME}");
    let (code, v) = api.send(
        "PATCH",
        &one,
        "application/merge-patch+json",
        &json!({"metadata": {"finalizers": ["example.com/hold"]}}),
    );
    assert_eq!(code, 200, "{v}");

    // Orphan would add the garbage collector's `orphan` finalizer to any other object; the
    // CRD's own REST.Delete marks it with its cleanup finalizer and Terminating instead.
    let (code, v) = api.send(
        "DELETE",
        &one,
        "application/json",
        &json!({"propagationPolicy": "Orphan"}),
    );
    assert_eq!(code, 200, "{v}");
    assert!(v["metadata"]["deletionTimestamp"].is_string(), "{v}");
    assert_eq!(
        finalizers(&v),
        vec!["example.com/hold".to_string(), CLEANUP.to_string()],
        "{v}"
    );
    let terminating = v["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|c| c["type"] == "Terminating")
        .cloned()
        .unwrap_or(Value::Null);
    assert_eq!(terminating["status"], "True", "{v}");
    assert_eq!(terminating["reason"], "InstanceDeletionPending", "{v}");

    // The registry's finalizer controller removes its finalizer; ours holds the CRD.
    let deadline = Instant::now() + Duration::from_secs(30);
    let held = loop {
        let c = api.crd();
        if finalizers(&c) == vec!["example.com/hold".to_string()] {
            break c;
        }
        assert!(Instant::now() < deadline, "cleanup finalizer stays: {c}");
        std::thread::sleep(Duration::from_millis(50));
    };
    // Later DELETEs answer the CRD while finalizers remain.
    let (code, v) = api.call("DELETE", &one, None, None);
    assert_eq!((code, rv(&v)), (200, rv(&held)), "{v}");
    // Removing the last finalizer deletes it (store.go ShouldDeleteDuringUpdate).
    let (code, v) = api.send(
        "PATCH",
        &one,
        "application/merge-patch+json",
        &json!({"metadata": {"finalizers": null}}),
    );
    assert_eq!(code, 200, "{v}");
    let (code, v) = api.get(&one);
    assert_eq!(code, 404, "{v}");
}

fn simple_crd(plural: &str, kind: &str, label: &str) -> Value {
    json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("{plural}.stable.example.com"), "labels": {"set": label}},
        "spec": {"group": "stable.example.com", "scope": "Namespaced",
            "names": {"plural": plural, "singular": kind.to_lowercase(), "kind": kind},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object",
                    "x-kubernetes-preserve-unknown-fields": true}}}]}})
}

#[test]
fn crd_deletecollection_marks_the_selected_ones() {
    let stack = Stack::start_with_redis().unwrap();
    let api = Api(Rest::new(format!("{}/clusters/crdcoll", stack.gateway)));
    for (plural, kind, label) in [
        ("apples", "Apple", "a"),
        ("pears", "Pear", "a"),
        ("plums", "Plum", "b"),
    ] {
        let (code, v) = api.send(
            "POST",
            CRDS,
            "application/json",
            &simple_crd(plural, kind, label),
        );
        assert_eq!(code, 201, "{v}");
    }
    // LIST pages through the generic list handler: continue tokens, remaining count, and
    // the label selector.
    let (code, first) = api.get(&format!("{CRDS}?limit=2"));
    assert_eq!(code, 200, "{first}");
    assert_eq!(first["kind"], "CustomResourceDefinitionList", "{first}");
    assert_eq!(first["items"].as_array().unwrap().len(), 2, "{first}");
    assert_eq!(first["metadata"]["remainingItemCount"], 1, "{first}");
    let cont = first["metadata"]["continue"].as_str().unwrap().to_string();
    let (code, rest) = api.get(&format!("{CRDS}?limit=2&continue={cont}"));
    assert_eq!(code, 200, "{rest}");
    assert_eq!(
        rest["items"][0]["metadata"]["name"], "plums.stable.example.com",
        "{rest}"
    );
    assert!(rest["metadata"].get("continue").is_none(), "{rest}");
    let (_, b) = api.get(&format!("{CRDS}?labelSelector=set%3Db"));
    assert_eq!(b["items"].as_array().unwrap().len(), 1, "{b}");
    // `kubectl get crd`'s Table: upstream's default columns, the creation time in RFC 3339,
    // the list's metadata and a selected page.
    let (code, _, body) = crdplane_tests::exchange(
        "GET",
        &format!(
            "{}/clusters/crdcoll{CRDS}?labelSelector=set%3Db",
            stack.gateway
        ),
        &[("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io")],
        "",
    );
    let t: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(code, 200, "{t}");
    assert_eq!(
        crdplane_tests::column_names(&t),
        ["Name", "Created At"],
        "{t}"
    );
    assert_eq!(
        t["metadata"]["resourceVersion"],
        b["metadata"]["resourceVersion"]
    );
    let rows = t["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 1, "{t}");
    assert_eq!(rows[0]["cells"][0], "plums.stable.example.com");
    assert_eq!(
        rows[0]["cells"][1],
        b["items"][0]["metadata"]["creationTimestamp"]
    );
    assert_eq!(rows[0]["object"]["kind"], "PartialObjectMetadata", "{t}");
    // An unsupported dryRun value: 422 on DeleteOptions (ValidateDeleteOptions).
    let (code, v) = api.call(
        "DELETE",
        &format!("{CRDS}?labelSelector=set%3Da&dryRun=Some"),
        None,
        None,
    );
    assert_eq!(code, 422, "{v}");
    // The answer is the list as it was read (store.go DeleteCollection); each selected CRD is
    // deleted as a DELETE of it would: marked, its instances cleaned up, then removed.
    let (code, v) = api.call(
        "DELETE",
        &format!("{CRDS}?labelSelector=set%3Da"),
        None,
        None,
    );
    assert_eq!(code, 200, "{v}");
    assert_eq!(v["kind"], "CustomResourceDefinitionList", "{v}");
    let names: Vec<&str> = v["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["metadata"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        ["apples.stable.example.com", "pears.stable.example.com"],
        "{v}"
    );
    let deadline = Instant::now() + Duration::from_secs(30);
    for name in names {
        loop {
            let (code, v) = api.get(&format!("{CRDS}/{name}"));
            if code == 404 {
                break;
            }
            assert!(
                v["metadata"]["deletionTimestamp"].is_string(),
                "not marked: {v}"
            );
            assert!(Instant::now() < deadline, "not removed: {v}");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    let (code, v) = api.get(&format!("{CRDS}/plums.stable.example.com"));
    assert_eq!(code, 200, "{v}");
    assert!(v["metadata"]["deletionTimestamp"].is_null(), "{v}");
}
