//! DELETE of one object and of a collection (handlers/delete.go, store.go `Delete`,
//! `DeleteCollection`): preconditions, finalizers and the garbage collector's finalizers
//! ([`crate::rest::delete`]), dry-run.

use super::{Written, meta_str};
use crate::admission::{Attributes, Chain, Operation};
use crate::rest::delete::{DeleteOptions, DeleteOptionsExt, DeletionPlan, plan_deletion};
use crate::rest::store::stored_rv;
use crate::rest::{ListOptions, Store, Stored, Strategy};
use crate::retry::{Failure, guaranteed_update, write_failed};
use crdplane_core::{ApiError, Reason};
use futures::StreamExt;
use serde_json::{Value, json};

/// Page size of the list behind a deletecollection.
pub const DELETE_COLLECTION_PAGE: u32 = 500;

/// Objects a deletecollection deletes at once (upstream's `--delete-collection-workers`
/// defaults to 1; the storage round trip dominates here, so a few run concurrently).
pub const DELETE_COLLECTION_WORKERS: usize = 8;

/// Deletes one object with options `o`. An object without (remaining) finalizers is removed:
/// the answer is 200 with the deleted object when the strategy returns deleted objects, else
/// the Success Status naming it. An object with finalizers is marked as deleting and kept:
/// 200 with it (202 when `orphanDependents: false` was asked, handlers/delete.go). A
/// resource with its own first DELETE (the store's [`Store::mark_deleting`], e.g. CRDs)
/// is marked that way instead, after the strategy's precondition checks.
pub async fn delete<S: Store, T: Strategy>(
    store: &S,
    strategy: &T,
    admission: &Chain<'_>,
    namespace: &str,
    name: &str,
    o: &DeleteOptions,
) -> Result<Written, ApiError> {
    delete_known(store, strategy, admission, namespace, name, o, None).await
}

/// [`delete`], with the object as a list just read it (`known`, deletecollection) in place
/// of the first read; a lost race reads it again.
async fn delete_known<S: Store, T: Strategy>(
    store: &S,
    strategy: &T,
    admission: &Chain<'_>,
    namespace: &str,
    name: &str,
    o: &DeleteOptions,
    mut known: Option<Value>,
) -> Result<Written, ApiError> {
    let dry = o.is_dry_run();
    let gr = strategy.group_resource();
    guaranteed_update(|| {
        let known = known.take();
        async move {
            let old = match known {
                Some(v) => v,
                None => store.get(namespace, name).await?,
            };
            let old_rv = stored_rv(&old);
            strategy.check_delete_preconditions(&old, o)?;
            admission
                .admit(&mut Attributes {
                    operation: Operation::Delete,
                    resource: gr,
                    subresource: "",
                    namespace,
                    name,
                    object: None,
                    old: Some(&old),
                    dry_run: dry,
                    warnings: Vec::new(),
                    errors: Vec::new(),
                })
                .await?;
            let now = crdplane_core::names::now_timestamp();
            let pending = |stored: Stored| Written {
                code: if o.orphan_dependents == Some(false) {
                    202
                } else {
                    200
                },
                object: stored.object,
                warnings: Vec::new(),
                encoded: stored.encoded,
            };
            // A resource with its own first DELETE (the CRD's mark) answers with the marked
            // object; a lost swap reads again.
            if let Some(marked) = store
                .mark_deleting(&old, old_rv, dry)
                .await
                .map_err(write_failed)?
            {
                return Ok(pending(marked.into()));
            }
            match plan_deletion(
                &old,
                o.orphan_dependents,
                o.propagation_policy.as_deref(),
                &now,
            ) {
                DeletionPlan::Delete => {
                    store.before_delete(&old, dry).await?;
                    let gone = store
                        .delete(namespace, name, old_rv, dry)
                        .await
                        .map_err(write_failed)?;
                    let object = if strategy.return_deleted_object() {
                        gone
                    } else {
                        json!({"kind": "Status", "apiVersion": "v1", "metadata": {},
                        "status": "Success", "details": {"name": name, "group": gr.group,
                        "kind": gr.resource, "uid": meta_str(&gone, "uid")}})
                    };
                    Ok(Written {
                        code: 200,
                        object,
                        warnings: Vec::new(),
                        encoded: None,
                    })
                }
                DeletionPlan::Update(v) => {
                    store.before_delete(&old, dry).await?;
                    let stored = store.update(v, &old, dry).await.map_err(write_failed)?;
                    Ok(pending(stored))
                }
                DeletionPlan::Unchanged => Ok::<_, Failure>(pending(old.into())),
            }
        }
    })
    .await
}

/// Deletes every selected object of `namespace` ("" for all) with `o`, each as [`delete`]
/// does, [`DELETE_COLLECTION_WORKERS`] at a time, starting from the object as listed
/// (objects already gone are skipped); answers with the list as it was read.
pub async fn delete_collection<S: Store, T: Strategy>(
    store: &S,
    strategy: &T,
    admission: &Chain<'_>,
    namespace: &str,
    opts: &ListOptions,
    o: &DeleteOptions,
) -> Result<crate::rest::ListResult, ApiError> {
    let mut page = opts.clone();
    if page.limit == 0 {
        page.limit = DELETE_COLLECTION_PAGE;
    }
    let mut all = store.list(namespace, &page).await?;
    while opts.limit == 0 && !all.continue_token.is_empty() {
        page.continue_token = std::mem::take(&mut all.continue_token);
        let next = store.list(namespace, &page).await?;
        all.items.extend(next.items);
        all.continue_token = next.continue_token;
    }
    // Collected first: a lazy `map` handed to the stream makes rustc's higher-ranked `Send`
    // check on the callers' futures fail.
    let deletes: Vec<_> = all
        .items
        .iter()
        .map(|item| {
            let (ns, name) = (meta_str(item, "namespace"), meta_str(item, "name"));
            delete_known(store, strategy, admission, ns, name, o, Some(item.clone()))
        })
        .collect();
    let mut results = futures::stream::iter(deletes).buffer_unordered(DELETE_COLLECTION_WORKERS);
    while let Some(r) = results.next().await {
        match r {
            Err(e) if e.reason == Reason::NotFound => {}
            r => {
                r?;
            }
        }
    }
    drop(results);
    Ok(all)
}
