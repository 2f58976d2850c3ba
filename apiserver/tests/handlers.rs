//! The generic handlers, in process, against the in-memory store: create, get, update
//! (preconditions, conflicts, no-op), the patch types, /status, delete with finalizers and
//! preconditions, deletecollection, dry-run and the NamespaceLifecycle admission plugin.

use crdplane_apiserver::admission::{Chain, NamespaceLifecycle};
use crdplane_apiserver::handlers::{self, Written};
use crdplane_apiserver::patch::{BuiltinPatch, CustomResourcePatch, PatchMechanism};
use crdplane_apiserver::rest::delete::DeleteOptions;
use crdplane_apiserver::rest::{ListOptions, StatusStrategy, Store, Strategy};
use crdplane_apiserver::testkit::MemStore;
use crdplane_core::field::FieldError;
use crdplane_core::options::FieldValidation;
use crdplane_core::{ApiError, GroupResource};
use serde_json::{Value, json};

/// A namespaced custom resource with a /status subresource; `spec.size` must be >= 0.
struct Widgets {
    gr: GroupResource,
    patch: CustomResourcePatch,
}

/// The write options of a test write (`dry_run` as given).
fn opts(dry_run: bool) -> handlers::WriteOptions<'static> {
    handlers::WriteOptions {
        dry_run,
        manager: "test",
        api_version: "example.com/v1".into(),
    }
}

fn widgets() -> Widgets {
    Widgets {
        gr: GroupResource::new("example.com", "widgets"),
        patch: CustomResourcePatch,
    }
}

impl Strategy for Widgets {
    fn group_resource(&self) -> &GroupResource {
        &self.gr
    }
    fn kind(&self) -> &str {
        "Widget"
    }
    fn namespaced(&self) -> bool {
        true
    }
    fn has_status_subresource(&self) -> bool {
        true
    }
    fn allow_unconditional_update(&self) -> bool {
        false
    }
    fn patch_mechanism(&self) -> &dyn PatchMechanism {
        &self.patch
    }
    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        match obj.pointer("/spec/size").and_then(Value::as_i64) {
            Some(n) if n < 0 => vec![FieldError::invalid(
                "spec.size",
                json!(n),
                "must be greater than or equal to 0",
            )],
            _ => vec![],
        }
    }
    fn validate_update(&self, new: &Value, _old: &Value) -> Vec<FieldError> {
        self.validate(new)
    }
    fn unknown_fields(&self, obj: &Value) -> Vec<String> {
        // A Widget's spec has `size` and `legacy`; anything else is unknown.
        let Some(spec) = obj.get("spec").and_then(Value::as_object) else {
            return vec![];
        };
        spec.keys()
            .filter(|k| !matches!(k.as_str(), "size" | "legacy"))
            .map(|k| format!("unknown field \"spec.{k}\""))
            .collect()
    }
    fn warnings_on_create(&self, obj: &Value) -> Vec<String> {
        if obj.pointer("/spec/legacy").is_some() {
            vec!["spec.legacy is deprecated".into()]
        } else {
            vec![]
        }
    }
}

/// Cluster-scoped namespaces with strategic merge patch, unconditional updates and the
/// deleted object returned (as the core namespace strategy).
struct Namespaces {
    gr: GroupResource,
    patch: BuiltinPatch,
}

fn namespaces() -> Namespaces {
    Namespaces {
        gr: GroupResource::new("", "namespaces"),
        patch: BuiltinPatch(crdplane_apiserver::strategic::NAMESPACE),
    }
}

impl Strategy for Namespaces {
    fn group_resource(&self) -> &GroupResource {
        &self.gr
    }
    fn kind(&self) -> &str {
        "Namespace"
    }
    fn namespaced(&self) -> bool {
        false
    }
    fn return_deleted_object(&self) -> bool {
        true
    }
    fn patch_mechanism(&self) -> &dyn PatchMechanism {
        &self.patch
    }
    fn validate(&self, _obj: &Value) -> Vec<FieldError> {
        vec![]
    }
    fn validate_update(&self, _new: &Value, _old: &Value) -> Vec<FieldError> {
        vec![]
    }
}

fn store() -> MemStore {
    MemStore::new(GroupResource::new("example.com", "widgets"))
}

fn widget(name: &str, size: i64) -> Value {
    json!({"apiVersion": "example.com/v1", "kind": "Widget",
        "metadata": {"name": name}, "spec": {"size": size}})
}

async fn create(s: &MemStore, obj: Value) -> Result<Written, ApiError> {
    handlers::create(s, &widgets(), &Chain::none(), "team", obj, &opts(false)).await
}

fn rv(v: &Value) -> &str {
    v["metadata"]["resourceVersion"].as_str().unwrap_or("")
}

#[tokio::test]
async fn create_sets_system_fields_and_refuses_duplicates_and_invalid_objects() {
    let s = store();
    let mut obj = widget("a", 1);
    obj["status"] = json!({"ready": true});
    obj["spec"]["legacy"] = json!(true);
    let w = create(&s, obj).await.unwrap();
    assert_eq!(w.code, 201);
    assert_eq!(w.warnings, ["spec.legacy is deprecated"]);
    let m = &w.object["metadata"];
    assert_eq!(
        (m["namespace"].as_str(), m["generation"].as_i64()),
        (Some("team"), Some(1))
    );
    assert!(m["uid"].as_str().is_some_and(|u| u.len() == 36));
    assert!(m["creationTimestamp"].is_string());
    assert!(
        w.object.get("status").is_none(),
        "status is dropped on create"
    );
    assert_eq!(rv(&w.object), "1");
    assert_eq!(handlers::get(&s, "team", "a").await.unwrap(), w.object);

    let cases: &[(Value, u16, &str)] = &[
        (
            widget("a", 1),
            409,
            r#"widgets.example.com "a" already exists"#,
        ),
        (
            widget("b", -1),
            422,
            r#"Widget.example.com "b" is invalid: spec.size: Invalid value: -1: must be greater than or equal to 0"#,
        ),
        (
            json!({"metadata": {}}),
            422,
            r#"Widget.example.com "" is invalid: metadata.name: Required value: name or generateName is required"#,
        ),
        (
            json!({"metadata": {"name": "c", "namespace": "other"}}),
            400,
            "the namespace of the provided object does not match the namespace sent on the request",
        ),
        (
            json!({"metadata": {"name": "d", "resourceVersion": "5"}}),
            500,
            "resourceVersion should not be set on objects to be created",
        ),
    ];
    for (obj, code, msg) in cases {
        let e = create(&s, obj.clone()).await.unwrap_err();
        assert_eq!((e.code, e.message.as_str()), (*code, *msg), "{obj}");
    }
    assert_eq!(s.len(), 1);

    let w = create(&s, json!({"metadata": {"generateName": "gen-"}}))
        .await
        .unwrap();
    let name = w.object["metadata"]["name"].as_str().unwrap();
    assert!(name.starts_with("gen-") && name.len() == 9, "{name}");

    // Dry run: checked, not stored.
    let w = handlers::create(
        &s,
        &widgets(),
        &Chain::none(),
        "team",
        widget("dry", 1),
        &opts(true),
    )
    .await
    .unwrap();
    assert_eq!(w.code, 201);
    assert_eq!(
        handlers::get(&s, "team", "dry").await.unwrap_err().code,
        404
    );
    assert_eq!(
        handlers::get(&s, "team", "dry").await.unwrap_err().message,
        r#"widgets.example.com "dry" not found"#
    );
}

#[tokio::test]
async fn update_preconditions_conflicts_and_no_op() {
    let s = store();
    let created = create(&s, widget("a", 1)).await.unwrap().object;
    let upd = |obj: Value| async {
        handlers::update(
            &s,
            &widgets(),
            &Chain::none(),
            "",
            "team",
            "a",
            obj,
            &opts(false),
        )
        .await
    };
    // No resourceVersion: required by a strategy without unconditional updates.
    let e = upd(widget("a", 2)).await.unwrap_err();
    assert_eq!(
        (e.code, e.message.as_str()),
        (
            422,
            r#"widgets.example.com "a" is invalid: metadata.resourceVersion: Invalid value: 0x0: must be specified for an update"#
        )
    );
    // A stale resourceVersion.
    let mut stale = widget("a", 2);
    stale["metadata"]["resourceVersion"] = json!("99");
    let e = upd(stale).await.unwrap_err();
    assert_eq!(
        (e.code, e.message.as_str()),
        (
            409,
            r#"Operation cannot be fulfilled on widgets.example.com "a": the object has been modified; please apply your changes to the latest version and try again"#
        )
    );
    // Name mismatch.
    let e = upd(widget("b", 2)).await.unwrap_err();
    assert_eq!(
        e.message,
        "the name of the object (b) does not match the name on the URL (a)"
    );
    // A real change: new resourceVersion, generation + 1, identity kept.
    let mut next = created.clone();
    next["spec"]["size"] = json!(2);
    next["metadata"]["uid"] = json!("forged");
    let w = upd(next).await.unwrap();
    assert_eq!(w.code, 200);
    assert_eq!(rv(&w.object), "2");
    assert_eq!(w.object["metadata"]["generation"], 2);
    assert_eq!(w.object["metadata"]["uid"], created["metadata"]["uid"]);
    // Nothing changed: no write, the stored object answers.
    let before = s.revision();
    let same = upd(w.object.clone()).await.unwrap();
    assert_eq!(same.object, w.object);
    assert_eq!(s.revision(), before);
    // Status is not changed through the main resource.
    let mut with_status = w.object.clone();
    with_status["status"] = json!({"ready": true});
    let r = upd(with_status).await.unwrap();
    assert!(r.object.get("status").is_none());
    assert_eq!(s.revision(), before);
    // Invalid update: 422 naming the kind.
    let mut bad = w.object.clone();
    bad["spec"]["size"] = json!(-5);
    assert_eq!(upd(bad).await.unwrap_err().code, 422);
}

#[tokio::test]
async fn writes_that_lose_races_are_reapplied_to_the_fresh_object() {
    let s = store();
    create(&s, widget("a", 1)).await.unwrap();
    // Three lost swaps in a row (another writer each time): the patch is re-applied.
    *s.lose_next_writes.lock().unwrap() = 3;
    let w = handlers::patch(
        &s,
        &widgets(),
        &Chain::none(),
        "",
        "team",
        "a",
        &handlers::PatchRequest {
            mime: "application/merge-patch+json",
            body: br#"{"spec":{"size":7}}"#,
            applied: None,
            force: false,
            field_validation: FieldValidation::Warn,
        },
        &opts(false),
    )
    .await
    .unwrap();
    assert_eq!(w.object["spec"]["size"], 7);
    assert_eq!(rv(&w.object), "5");
    // An update's own precondition is final after the race: the stored rv moved on.
    let mut stale = w.object.clone();
    stale["spec"]["size"] = json!(8);
    *s.lose_next_writes.lock().unwrap() = 1;
    let e = handlers::update(
        &s,
        &widgets(),
        &Chain::none(),
        "",
        "team",
        "a",
        stale,
        &opts(false),
    )
    .await
    .unwrap_err();
    assert_eq!(e.code, 409);
}

#[tokio::test]
async fn patch_types() {
    let s = store();
    create(&s, widget("a", 1)).await.unwrap();
    let patch = |mime: &'static str, body: &'static str| {
        let s = &s;
        async move {
            handlers::patch(
                s,
                &widgets(),
                &Chain::none(),
                "",
                "team",
                "a",
                &handlers::PatchRequest {
                    mime,
                    body: body.as_bytes(),
                    applied: None,
                    force: false,
                    field_validation: FieldValidation::Warn,
                },
                &opts(false),
            )
            .await
        }
    };
    let w = patch(
        "application/json-patch+json",
        r#"[{"op":"replace","path":"/spec/size","value":3}]"#,
    )
    .await
    .unwrap();
    assert_eq!(w.object["spec"]["size"], 3);
    let w = patch(
        "application/merge-patch+json",
        r#"{"spec":{"color":"red"}}"#,
    )
    .await
    .unwrap();
    assert_eq!(w.object["spec"], json!({"size": 3, "color": "red"}));
    // No-op patch: nothing written.
    let before = s.revision();
    patch(
        "application/merge-patch+json",
        r#"{"spec":{"color":"red"}}"#,
    )
    .await
    .unwrap();
    assert_eq!(s.revision(), before);
    // A resourceVersion in the patch is a precondition.
    let e = patch(
        "application/merge-patch+json",
        r#"{"metadata":{"resourceVersion":"1"}}"#,
    )
    .await
    .unwrap_err();
    assert_eq!(e.code, 409);
    let cases: &[(&str, &str, u16, &str)] = &[
        (
            "application/strategic-merge-patch+json",
            "{}",
            415,
            "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml",
        ),
        (
            "application/merge-patch+json",
            "5",
            400,
            "Invalid JSON Patch",
        ),
        (
            "application/json-patch+json",
            r#"[{"op":"test","path":"/spec/size","value":9}]"#,
            422,
            "the server rejected our request due to an error in our request",
        ),
        (
            "application/json-patch+json",
            r#"[{"op":"replace","path":"","value":[1]}]"#,
            422,
            "",
        ),
        (
            "application/merge-patch+json",
            r#"{"metadata":{"name":"b"}}"#,
            400,
            "the name of the object (b) does not match the name on the URL (a)",
        ),
    ];
    for (mime, body, code, msg) in cases {
        let e = patch(mime, body).await.unwrap_err();
        assert_eq!(e.code, *code, "{mime} {body}: {}", e.message);
        if !msg.is_empty() {
            assert_eq!(e.message, *msg);
        }
    }
    // Strategic merge patch for a built-in type.
    let ns = MemStore::new(GroupResource::new("", "namespaces"));
    ns.create(
        json!({"metadata": {"name": "team", "labels": {"a": "1"}}}),
        false,
    )
    .await
    .unwrap();
    let w = handlers::patch(
        &ns,
        &namespaces(),
        &Chain::none(),
        "",
        "",
        "team",
        &handlers::PatchRequest {
            mime: "application/strategic-merge-patch+json",
            body: br#"{"metadata":{"labels":{"b":"2"}}}"#,
            applied: None,
            force: false,
            field_validation: FieldValidation::Warn,
        },
        &opts(false),
    )
    .await
    .unwrap();
    assert_eq!(w.object["metadata"]["labels"], json!({"a": "1", "b": "2"}));
}

#[tokio::test]
async fn status_subresource_changes_only_status() {
    let s = store();
    let created = create(&s, widget("a", 1)).await.unwrap().object;
    let mut obj = created.clone();
    obj["spec"]["size"] = json!(100);
    obj["metadata"]["labels"] = json!({"x": "y"});
    obj["status"] = json!({"ready": true});
    let w = handlers::update(
        &s,
        &StatusStrategy(widgets()),
        &Chain::none(),
        "status",
        "team",
        "a",
        obj,
        &opts(false),
    )
    .await
    .unwrap();
    assert_eq!(w.object["status"], json!({"ready": true}));
    assert_eq!(w.object["spec"]["size"], 1);
    assert!(w.object["metadata"].get("labels").is_none());
    assert_eq!(w.object["metadata"]["generation"], 1);
}

#[tokio::test]
async fn delete_with_finalizers_preconditions_and_returned_objects() {
    let s = store();
    let mut obj = widget("a", 1);
    obj["metadata"]["finalizers"] = json!(["example.com/keep"]);
    let created = create(&s, obj).await.unwrap().object;
    let del = |o: DeleteOptions| {
        let s = &s;
        async move { handlers::delete(s, &widgets(), &Chain::none(), "team", "a", &o).await }
    };
    // Preconditions.
    let e = del(crdplane_apiserver::rest::delete::preconditioned(
        Some("other"),
        None,
    ))
    .await
    .unwrap_err();
    assert_eq!(e.code, 409);
    assert!(
        e.message
            .contains("the UID in the precondition (other) does not match"),
        "{}",
        e.message
    );
    // Finalizers pending: marked, kept, 200 (202 with orphanDependents=false).
    let w = del(DeleteOptions::default()).await.unwrap();
    assert_eq!(w.code, 200);
    assert!(w.object["metadata"]["deletionTimestamp"].is_string());
    assert_eq!(w.object["metadata"]["generation"], 2);
    assert_eq!(s.len(), 1);
    let w = del(DeleteOptions {
        orphan_dependents: Some(false),
        ..Default::default()
    })
    .await
    .unwrap();
    assert_eq!(w.code, 202);
    // No new finalizers while deleting.
    let mut more = w.object.clone();
    more["metadata"]["finalizers"] = json!(["example.com/keep", "example.com/new"]);
    let e = handlers::update(
        &s,
        &widgets(),
        &Chain::none(),
        "",
        "team",
        "a",
        more,
        &opts(false),
    )
    .await
    .unwrap_err();
    assert_eq!(e.code, 422);
    assert!(
        e.message.contains("no new finalizers can be added"),
        "{}",
        e.message
    );
    // Removing the last finalizer completes the deletion.
    let mut done = w.object.clone();
    done["metadata"]["finalizers"] = json!([]);
    handlers::update(
        &s,
        &widgets(),
        &Chain::none(),
        "",
        "team",
        "a",
        done,
        &opts(false),
    )
    .await
    .unwrap();
    assert!(s.is_empty());
    // Without finalizers: deleted now, the Success Status names it.
    let c = create(&s, widget("a", 1)).await.unwrap().object;
    let w = del(DeleteOptions::default()).await.unwrap();
    assert_eq!(
        w.object,
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
            "details": {"name": "a", "group": "example.com", "kind": "widgets",
                "uid": c["metadata"]["uid"]}})
    );
    assert_ne!(c["metadata"]["uid"], created["metadata"]["uid"]);
    assert_eq!(del(DeleteOptions::default()).await.unwrap_err().code, 404);
    // Dry run deletes nothing; a strategy that returns deleted objects answers with it.
    let ns = MemStore::new(GroupResource::new("", "namespaces"));
    ns.create(json!({"metadata": {"name": "team"}}), false)
        .await
        .unwrap();
    let dry = DeleteOptions {
        dry_run: Some(vec!["All".into()]),
        ..Default::default()
    };
    let w = handlers::delete(&ns, &namespaces(), &Chain::none(), "", "team", &dry)
        .await
        .unwrap();
    assert_eq!(w.object["metadata"]["name"], "team");
    assert_eq!(ns.len(), 1);
    handlers::delete(
        &ns,
        &namespaces(),
        &Chain::none(),
        "",
        "team",
        &DeleteOptions::default(),
    )
    .await
    .unwrap();
    assert!(ns.is_empty());
}

#[tokio::test]
async fn list_and_delete_collection_with_selectors() {
    let s = store();
    for (n, tier) in [("a", "web"), ("b", "db"), ("c", "web")] {
        let mut o = widget(n, 1);
        o["metadata"]["labels"] = json!({"tier": tier});
        create(&s, o).await.unwrap();
    }
    let opts = ListOptions {
        label_selector: "tier=web".into(),
        limit: 1,
        ..Default::default()
    };
    let page = handlers::list(&s, "team", &opts).await.unwrap();
    assert_eq!(page.items.len(), 1);
    assert_eq!(page.continue_token, "team/a");
    let rest = handlers::list(
        &s,
        "team",
        &ListOptions {
            continue_token: page.continue_token.clone(),
            ..opts.clone()
        },
    )
    .await
    .unwrap();
    assert_eq!(rest.items[0]["metadata"]["name"], "c");
    let gone = handlers::delete_collection(
        &s,
        &widgets(),
        &Chain::none(),
        "team",
        &ListOptions {
            label_selector: "tier=web".into(),
            ..Default::default()
        },
        &DeleteOptions::default(),
    )
    .await
    .unwrap();
    assert_eq!(gone.items.len(), 2);
    let left = handlers::list(&s, "", &ListOptions::default())
        .await
        .unwrap();
    assert_eq!(left.items.len(), 1);
    assert_eq!(left.items[0]["metadata"]["name"], "b");
}

#[tokio::test]
async fn namespace_lifecycle_admission() {
    let ns = MemStore::new(GroupResource::new("", "namespaces"));
    ns.create(json!({"metadata": {"name": "team"}}), false)
        .await
        .unwrap();
    ns.create(
        json!({"metadata": {"name": "old"}, "status": {"phase": "Terminating"}}),
        false,
    )
    .await
    .unwrap();
    let chain = Chain(vec![Box::new(NamespaceLifecycle(ns))]);
    let s = store();
    let w = handlers::create(&s, &widgets(), &chain, "team", widget("a", 1), &opts(false)).await;
    assert_eq!(w.unwrap().code, 201);
    let e = handlers::create(
        &s,
        &widgets(),
        &chain,
        "missing",
        widget("a", 1),
        &opts(false),
    )
    .await
    .unwrap_err();
    assert_eq!(
        (e.code, e.message.as_str()),
        (404, r#"namespaces "missing" not found"#)
    );
    let e = handlers::create(&s, &widgets(), &chain, "old", widget("a", 1), &opts(false))
        .await
        .unwrap_err();
    assert_eq!(
        (e.code, e.message.as_str()),
        (
            403,
            r#"widgets.example.com "a" is forbidden: unable to create new content in namespace old because it is being terminated"#
        )
    );
    // NamespaceLifecycle is mutating admission: it runs before the strategy, so it names
    // the requested name (none with generateName: upstream's NewForbidden then leaves the
    // name out) and comes before validation errors.
    let generated = json!({"metadata": {"generateName": "w-"}, "spec": {"size": 1}});
    let e = handlers::create(&s, &widgets(), &chain, "old", generated, &opts(false))
        .await
        .unwrap_err();
    assert_eq!(
        e.message,
        "widgets.example.com is forbidden: unable to create new content in namespace old because it is being terminated"
    );
    let e = handlers::create(
        &s,
        &widgets(),
        &chain,
        "missing",
        widget("b", -1),
        &opts(false),
    )
    .await
    .unwrap_err();
    assert_eq!(e.code, 404);
    assert_eq!(s.len(), 1);
}

#[tokio::test]
async fn unknown_fields_of_a_patched_object_follow_field_validation() {
    let s = store();
    create(&s, widget("a", 1)).await.unwrap();
    let patch = |validation, body: &'static [u8]| {
        let s = &s;
        async move {
            handlers::patch(
                s,
                &widgets(),
                &Chain::none(),
                "",
                "team",
                "a",
                &handlers::PatchRequest {
                    mime: "application/merge-patch+json",
                    body,
                    applied: None,
                    force: false,
                    field_validation: validation,
                },
                &opts(false),
            )
            .await
        }
    };
    // Strict: the patched object's unknown field fails the patch, nothing is written.
    let e = patch(
        FieldValidation::Strict,
        br#"{"spec":{"colour":"red","size":2}}"#,
    )
    .await
    .unwrap_err();
    assert_eq!(e.code, 400);
    assert_eq!(
        e.message,
        r#"strict decoding error: unknown field "spec.colour""#
    );
    assert_eq!(s.get("team", "a").await.unwrap()["spec"]["size"], 1);
    // Warn: written, with one warning per unknown field.
    let w = patch(
        FieldValidation::Warn,
        br#"{"spec":{"colour":"red","size":2}}"#,
    )
    .await
    .unwrap();
    assert_eq!(w.object["spec"]["size"], 2);
    assert_eq!(
        w.warnings,
        vec![r#"unknown field "spec.colour""#.to_string()]
    );
    // Ignore: written, silently. (Custom resources would prune the field instead; this
    // strategy keeps what it is given.)
    let w = patch(FieldValidation::Ignore, br#"{"spec":{"size":3}}"#)
        .await
        .unwrap();
    assert_eq!(w.object["spec"]["size"], 3);
    assert!(w.warnings.is_empty());
    // Strict with nothing unknown left in the object: fine.
    let w = patch(
        FieldValidation::Strict,
        br#"{"spec":{"colour":null,"size":4}}"#,
    )
    .await
    .unwrap();
    assert_eq!(w.object["spec"]["size"], 4);
    assert!(w.warnings.is_empty());
}

/// `handlers::update_from` of widget `a` in `team` setting `spec.size` to what `size` makes
/// of each read.
async fn update_size(
    s: &MemStore,
    size: impl Fn(&Value) -> Result<i64, ApiError> + Sync,
) -> Result<Written, ApiError> {
    handlers::update_from(
        s,
        &widgets(),
        &Chain::none(),
        "scale",
        "team",
        "a",
        &opts(false),
        |old| {
            let mut new = old.clone();
            new["spec"]["size"] = json!(size(old)?);
            Ok((new, Vec::new()))
        },
        true,
    )
    .await
}

#[tokio::test]
async fn update_from_reapplies_to_each_read_and_checks_its_precondition_each_time() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let s = store();
    create(&s, widget("a", 3)).await.unwrap();
    // Two lost swaps: the transformation runs on three reads and the last one is stored.
    *s.lose_next_writes.lock().unwrap() = 2;
    let calls = AtomicUsize::new(0);
    let w = update_size(&s, |old| {
        calls.fetch_add(1, Ordering::SeqCst);
        Ok(old["spec"]["size"].as_i64().unwrap() * 2)
    })
    .await
    .unwrap();
    assert_eq!(calls.load(Ordering::SeqCst), 3);
    assert_eq!(w.object["spec"]["size"], 6);
    assert_eq!(s.get("team", "a").await.unwrap()["spec"]["size"], 6);
    // A precondition on the resourceVersion first read (a Scale's) fails once a race moved
    // the object on: it is checked against every read.
    let first = rv(&w.object).to_string();
    *s.lose_next_writes.lock().unwrap() = 1;
    let gr = GroupResource::new("example.com", "widgets");
    let e = update_size(&s, |old| {
        if rv(old) != first {
            return Err(ApiError::stale(&gr, "a"));
        }
        Ok(1)
    })
    .await
    .unwrap_err();
    assert_eq!(e.code, 409);
    assert_eq!(s.get("team", "a").await.unwrap()["spec"]["size"], 6);
    // The strategy's validation still applies to what the transformation made.
    let e = update_size(&s, |_| Ok(-1)).await.unwrap_err();
    assert_eq!(e.code, 422);
}

/// An admission plugin that defaults a label and warns about it (as the schema admission of
/// custom resources prunes, defaults and reports unknown fields).
struct DefaultTier;

impl crdplane_apiserver::admission::Admission for DefaultTier {
    fn admit<'a>(
        &'a self,
        a: &'a mut crdplane_apiserver::admission::Attributes<'_>,
    ) -> futures::future::BoxFuture<'a, Result<(), ApiError>> {
        Box::pin(async move {
            if let Some(obj) = a.object.as_deref_mut()
                && obj.pointer("/metadata/labels/tier").is_none()
            {
                obj["metadata"]["labels"] = json!({"tier": "default"});
                a.warnings.push("tier defaulted".into());
            }
            Ok(())
        })
    }
}

#[tokio::test]
async fn admission_plugins_mutate_the_object_and_add_warnings() {
    let s = store();
    let chain = Chain(vec![Box::new(DefaultTier)]);
    let w = handlers::create(&s, &widgets(), &chain, "team", widget("a", 1), &opts(false))
        .await
        .unwrap();
    assert_eq!(w.object["metadata"]["labels"]["tier"], "default");
    assert_eq!(w.warnings, vec!["tier defaulted".to_string()]);
    // On a patch the plugin's warnings come with the answer as well, once, even when the
    // write is retried after lost races.
    *s.lose_next_writes.lock().unwrap() = 2;
    let w = handlers::patch(
        &s,
        &widgets(),
        &chain,
        "",
        "team",
        "a",
        &handlers::PatchRequest {
            mime: "application/merge-patch+json",
            body: br#"{"metadata":{"labels":null},"spec":{"size":2}}"#,
            applied: None,
            force: false,
            field_validation: FieldValidation::Warn,
        },
        &opts(false),
    )
    .await
    .unwrap();
    assert_eq!(w.object["metadata"]["labels"]["tier"], "default");
    assert_eq!(w.object["spec"]["size"], 2);
    assert_eq!(w.warnings, vec!["tier defaulted".to_string()]);
}

#[tokio::test]
async fn encoded_reads_match_the_values_and_name_a_continued_exact_list_by_its_revision() {
    use crdplane_core::options::ListRv;
    let s = store();
    for n in ["a", "b", "c"] {
        create(&s, widget(n, 1)).await.unwrap();
    }
    // GET as bytes is the object's JSON; a missing one is the store's 404.
    let one = handlers::get_encoded(&s, "team", "b").await.unwrap();
    let v: Value = serde_json::from_slice(&one).unwrap();
    assert_eq!(v, handlers::get(&s, "team", "b").await.unwrap());
    let e = handlers::get_encoded(&s, "team", "zz").await.unwrap_err();
    assert_eq!(e.code, 404);

    // LIST as bytes: the same page, item for item.
    let opts = ListOptions {
        limit: 2,
        ..Default::default()
    };
    let values = handlers::list(&s, "team", &opts).await.unwrap();
    let page = handlers::list_encoded(&s, "team", &opts).await.unwrap();
    let parsed: Vec<Value> = page
        .items
        .iter()
        .map(|b| serde_json::from_slice(b).unwrap())
        .collect();
    assert_eq!(parsed, values.items);
    assert_eq!(page.continue_token, values.continue_token);
    assert_eq!(page.resource_version, values.resource_version);

    // A continued list at an exact revision is named by that revision (the token's), not
    // by the store's current one; a first page or a Latest continuation by the store's.
    let continued = ListOptions {
        continue_token: page.continue_token.clone(),
        rv: ListRv::Exact(1),
        continuing: true,
        ..opts.clone()
    };
    let rest = handlers::list_encoded(&s, "team", &continued)
        .await
        .unwrap();
    assert_eq!(rest.items.len(), 1);
    assert_eq!(rest.resource_version, 1);
    let latest = ListOptions {
        rv: ListRv::Latest,
        ..continued.clone()
    };
    let rest = handlers::list_encoded(&s, "team", &latest).await.unwrap();
    assert_eq!(rest.resource_version, values.resource_version);
    assert_ne!(values.resource_version, 1);
}

/// Widgets whose metadata (a missing name too) a validating admission plugin checks along
/// with the rest, as the validation service does for custom resources.
struct SchemaChecked(Widgets);

impl Strategy for SchemaChecked {
    fn group_resource(&self) -> &GroupResource {
        self.0.group_resource()
    }
    fn kind(&self) -> &str {
        self.0.kind()
    }
    fn namespaced(&self) -> bool {
        true
    }
    fn validate(&self, _obj: &Value) -> Vec<FieldError> {
        Vec::new()
    }
    fn validate_update(&self, _new: &Value, _old: &Value) -> Vec<FieldError> {
        Vec::new()
    }
    fn metadata_validated_in_admission(&self) -> bool {
        true
    }
    fn patch_mechanism(&self) -> &dyn PatchMechanism {
        self.0.patch_mechanism()
    }
}

/// The plugin: every error of the object in one 422 (the name when missing, a negative
/// size) — or, with `lenient`, nothing at all.
struct Schema {
    lenient: bool,
}

impl crdplane_apiserver::admission::Admission for Schema {
    fn admit<'a>(
        &'a self,
        a: &'a mut crdplane_apiserver::admission::Attributes<'_>,
    ) -> futures::future::BoxFuture<'a, Result<(), ApiError>> {
        Box::pin(async move {
            let obj = a.object.as_deref().expect("an object");
            let mut errs = Vec::new();
            if obj.pointer("/metadata/name").is_none() {
                errs.push(FieldError::required(
                    "metadata.name",
                    "name or generateName is required",
                ));
            }
            if obj.pointer("/spec/size").and_then(Value::as_i64) < Some(0) {
                errs.push(FieldError::invalid(
                    "spec.size",
                    json!(-1),
                    "must be greater than or equal to 0",
                ));
            }
            if self.lenient || errs.is_empty() {
                return Ok(());
            }
            Err(ApiError::invalid("Widget", "example.com", a.name, &errs))
        })
    }
}

#[tokio::test]
async fn a_nameless_create_gets_every_error_when_admission_validates_metadata() {
    let s = store();
    let strategy = SchemaChecked(widgets());
    let nameless = json!({"apiVersion": "example.com/v1", "kind": "Widget",
        "metadata": {}, "spec": {"size": -1}});
    let chain = Chain(vec![Box::new(Schema { lenient: false })]);
    let e = handlers::create(
        &s,
        &strategy,
        &chain,
        "team",
        nameless.clone(),
        &opts(false),
    )
    .await
    .unwrap_err();
    assert_eq!(
        e.message,
        r#"Widget.example.com "" is invalid: [metadata.name: Required value: name or generateName is required, spec.size: Invalid value: -1: must be greater than or equal to 0]"#
    );
    // A plugin that lets it through: the handler still refuses to store a nameless object.
    let chain = Chain(vec![Box::new(Schema { lenient: true })]);
    let e = handlers::create(&s, &strategy, &chain, "team", nameless, &opts(false))
        .await
        .unwrap_err();
    assert_eq!(
        e.message,
        r#"Widget.example.com "" is invalid: metadata.name: Required value: name or generateName is required"#
    );
    assert!(
        s.list("", &ListOptions::default())
            .await
            .unwrap()
            .items
            .is_empty()
    );
}
