//! PUT and PATCH of an existing object (handlers/update.go, handlers/patch.go, store.go
//! `Update` inside `GuaranteedUpdate`).

use super::{Written, invalid};
use crate::admission::{Attributes, Chain, Operation};
use crate::fieldmanager::{APPLY_PATCH, ApplyRequest, WriteOptions};
use crate::patch::not_an_object;
use crate::rest::delete::no_new_finalizers;
use crate::rest::meta::{object_rv, unchanged};
use crate::rest::store::stored_rv;
use crate::rest::{Store, Strategy};
use crate::retry::{Failure, guaranteed_update, write_failed};
use crdplane_core::field::FieldError;
use crdplane_core::options::FieldValidation;
use crdplane_core::{ApiError, GroupResource, Reason};
use serde_json::{Value, json};

/// The 422 of an update without resourceVersion (generic registry store.go Update): the
/// value is printed as Go prints a uint64 with %#v, and the "kind" is the resource.
pub fn rv_required(gr: &GroupResource, name: &str) -> ApiError {
    let e = FieldError::invalid(
        "metadata.resourceVersion",
        json!("\u{0}0x0"),
        "must be specified for an update",
    );
    let mut err = ApiError::invalid(&gr.resource, &gr.group, name, &[e]);
    let fix = |s: &str| s.replace("\"\\x000x0\"", "0x0");
    err.message = fix(&err.message);
    if let Some(d) = err.details.as_mut() {
        for c in &mut d.causes {
            c.message = fix(&c.message);
        }
    }
    err
}

/// Name and namespace of a PUT/PATCH body must match the URL (upstream texts); a
/// namespaced object without namespace gets the URL's.
pub fn check_identity(
    obj: &mut Value,
    namespaced: bool,
    namespace: &str,
    name: &str,
) -> Result<(), ApiError> {
    let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) else {
        return Err(ApiError::bad_request(format!(
            "the name of the object () does not match the name on the URL ({name})"
        )));
    };
    let got = meta.get("name").and_then(Value::as_str).unwrap_or("");
    if got != name {
        return Err(ApiError::bad_request(format!(
            "the name of the object ({got}) does not match the name on the URL ({name})"
        )));
    }
    if namespaced {
        match meta.get("namespace").and_then(Value::as_str) {
            Some(ns) if !ns.is_empty() && ns != namespace => {
                return Err(ApiError::bad_request(
                    "the namespace of the provided object does not match the namespace sent on the request",
                ));
            }
            _ => {
                meta.insert("namespace".into(), Value::String(namespace.to_string()));
            }
        }
    }
    Ok(())
}

/// A create inside a [`guaranteed_update`] loop (an update or apply of a missing object): a
/// name taken meanwhile is a lost race, so the loop reads the object again and writes over it.
async fn created_in_loop(
    create: impl Future<Output = Result<Written, ApiError>>,
) -> Result<Written, Failure> {
    create.await.map_err(|e| match e.reason {
        Reason::AlreadyExists => Failure::Lost(e),
        _ => Failure::Final(e),
    })
}

/// PUT: replaces the object. A missing object is 404 unless the strategy allows create on
/// update (then it is created, 201); a resourceVersion is required unless the strategy
/// allows unconditional updates, and must be the stored one; a lost swap re-reads and
/// checks again.
#[allow(clippy::too_many_arguments)]
pub async fn update<S: Store, T: Strategy>(
    store: &S,
    strategy: &T,
    admission: &Chain<'_>,
    subresource: &str,
    namespace: &str,
    name: &str,
    mut obj: Value,
    opts: &WriteOptions<'_>,
) -> Result<Written, ApiError> {
    check_identity(&mut obj, strategy.namespaced(), namespace, name)?;
    let rv = object_rv(&obj)?;
    let obj = &obj;
    let w = guaranteed_update(|| async move {
        let old = match store.get(namespace, name).await {
            Err(e) if e.reason == Reason::NotFound && strategy.allow_create_on_update() => {
                // Created meanwhile: read it again and update it.
                return created_in_loop(super::create(
                    store,
                    strategy,
                    admission,
                    namespace,
                    obj.clone(),
                    opts,
                ))
                .await;
            }
            r => r?,
        };
        let old_rv = stored_rv(&old);
        if rv == 0 && !strategy.allow_unconditional_update() {
            return Err(Failure::Final(rv_required(strategy.group_resource(), name)));
        }
        if rv != 0 && rv != old_rv {
            return Err(Failure::Final(ApiError::stale(
                strategy.group_resource(),
                name,
            )));
        }
        write_existing(
            store,
            strategy,
            admission,
            subresource,
            namespace,
            name,
            obj.clone(),
            &old,
            opts,
            true,
        )
        .await
    })
    .await?;
    Ok(w)
}

/// What a PATCH request carries besides the object it addresses.
#[derive(Debug, Clone)]
pub struct PatchRequest<'a> {
    /// The patch's media type (`application/merge-patch+json`, …), parameters removed.
    pub mime: &'a str,
    /// The patch document.
    pub body: &'a [u8],
    /// The applied configuration of an `application/apply-patch+yaml` patch: the body as
    /// the caller decoded it (YAML or JSON).
    pub applied: Option<Value>,
    /// `force=true` of an apply: conflicting fields change hands.
    pub force: bool,
    /// `fieldValidation`: what an unknown field of the patched object does
    /// ([`Strategy::unknown_fields`]).
    pub field_validation: FieldValidation,
}

/// PATCH: the strategy's patch mechanism applied to each fresh read of the object, then the
/// same write as an update. A resourceVersion the patch sets is a precondition.
///
/// The patched object is checked for fields its type does not have, as upstream decodes it
/// strictly (patch.go `applyPatchToCurrentObject`): under `Strict` they fail the request
/// with 400 `strict decoding error: unknown field "…"`, under `Warn` they become warnings.
#[allow(clippy::too_many_arguments)]
pub async fn patch<S: Store, T: Strategy>(
    store: &S,
    strategy: &T,
    admission: &Chain<'_>,
    subresource: &str,
    namespace: &str,
    name: &str,
    req: &PatchRequest<'_>,
    opts: &WriteOptions<'_>,
) -> Result<Written, ApiError> {
    let (mime, body) = (req.mime, req.body);
    if mime == APPLY_PATCH {
        let Some(config) = &req.applied else {
            return Err(ApiError::bad_request(
                "error decoding YAML: no applied configuration",
            ));
        };
        return apply(
            store,
            strategy,
            admission,
            subresource,
            namespace,
            name,
            req,
            config,
            opts,
        )
        .await;
    }
    let mech = strategy.patch_mechanism();
    if !mech.content_types().contains(&mime) {
        return Err(mech.unsupported());
    }
    let patched = |old: &Value| {
        let mut obj = mech.apply(mime, body, old)?;
        if !obj.is_object() {
            return Err(not_an_object(&obj));
        }
        let unknown = unknown_field_findings(strategy, &obj, req.field_validation)?;
        check_identity(&mut obj, strategy.namespaced(), namespace, name)?;
        // The patched object carries the stored resourceVersion unless the patch changed
        // (or removed) it: then it is a precondition that fails.
        if object_rv(&obj)? != stored_rv(old) {
            return Err(ApiError::stale(strategy.group_resource(), name));
        }
        Ok((obj, unknown))
    };
    update_from(
        store,
        strategy,
        admission,
        subresource,
        namespace,
        name,
        opts,
        patched,
        true,
    )
    .await
}

/// Server-side apply (patch.go `applyPatcher`, with `forceAllowCreate`): the applied
/// configuration merged into each fresh read of the object by the field manager
/// ([`crate::fieldmanager::apply`]), then the same write as an update; a missing object is
/// created from it (201). Conflicts with other managers are the 409 of the field manager
/// unless `force`. A resourceVersion in the configuration is a precondition.
#[allow(clippy::too_many_arguments)]
async fn apply<S: Store, T: Strategy>(
    store: &S,
    strategy: &T,
    admission: &Chain<'_>,
    subresource: &str,
    namespace: &str,
    name: &str,
    req: &PatchRequest<'_>,
    config: &Value,
    opts: &WriteOptions<'_>,
) -> Result<Written, ApiError> {
    let areq = ApplyRequest {
        config,
        force: req.force,
        kind: strategy.kind(),
        subresource,
        status_subresource: strategy.has_status_subresource(),
    };
    let areq = &areq;
    let schema = strategy.field_schema();
    guaranteed_update(|| async move {
        let old = match store.get(namespace, name).await {
            Err(e) if e.reason == Reason::NotFound && subresource.is_empty() => {
                let mut obj = crate::fieldmanager::apply(opts, None, areq, schema)?;
                check_identity(&mut obj, strategy.namespaced(), namespace, name)?;
                // Created meanwhile: apply to it.
                return created_in_loop(super::create::create_tracked(
                    store, strategy, admission, namespace, obj, opts, false,
                ))
                .await;
            }
            r => r?,
        };
        let mut obj = crate::fieldmanager::apply(opts, Some(&old), areq, schema)?;
        check_identity(&mut obj, strategy.namespaced(), namespace, name)?;
        if object_rv(&obj)? != stored_rv(&old) {
            return Err(Failure::Final(ApiError::stale(
                strategy.group_resource(),
                name,
            )));
        }
        write_existing(
            store,
            strategy,
            admission,
            subresource,
            namespace,
            name,
            obj,
            &old,
            opts,
            false,
        )
        .await
    })
    .await
}

/// An update computed from the stored object (upstream's `rest.UpdatedObjectInfo`; the
/// `/scale` subresource and [`patch`] are written with it): `to_write` turns each fresh read
/// into the object to write and warnings that go first, which then takes the same write as
/// an update. It runs again after a lost race, so a precondition it checks (a
/// resourceVersion) is checked against every read. `track`: record the write in
/// managedFields as an Update; false when `to_write` sets them itself (a server-side apply
/// to `/scale`, whose fields upstream's `ScaleHandler` maps onto the object's).
#[allow(clippy::too_many_arguments)]
pub async fn update_from<S, T, F>(
    store: &S,
    strategy: &T,
    admission: &Chain<'_>,
    subresource: &str,
    namespace: &str,
    name: &str,
    opts: &WriteOptions<'_>,
    to_write: F,
    track: bool,
) -> Result<Written, ApiError>
where
    S: Store,
    T: Strategy,
    F: Fn(&Value) -> Result<(Value, Vec<String>), ApiError> + Sync,
{
    let to_write = &to_write;
    guaranteed_update(|| async move {
        let old = store.get(namespace, name).await?;
        let (obj, first) = to_write(&old)?;
        let mut w = write_existing(
            store,
            strategy,
            admission,
            subresource,
            namespace,
            name,
            obj,
            &old,
            opts,
            track,
        )
        .await?;
        w.warnings.splice(0..0, first);
        Ok(w)
    })
    .await
}

/// The unknown fields of a patched object under `fieldValidation`: the warnings to send
/// (`Warn`), nothing (`Ignore`), or the final 400 (`Strict`).
fn unknown_field_findings<T: Strategy>(
    strategy: &T,
    obj: &Value,
    validation: FieldValidation,
) -> Result<Vec<String>, ApiError> {
    if validation == FieldValidation::Ignore {
        return Ok(Vec::new());
    }
    let found = strategy.unknown_fields(obj);
    if validation == FieldValidation::Strict && !found.is_empty() {
        return Err(ApiError::bad_request(format!(
            "strict decoding error: {}",
            found.join(", ")
        )));
    }
    Ok(found)
}

/// One write of an existing object (update, patch, status): strategy, validation, admission,
/// then a compare-and-swap on the stored resourceVersion. An update that leaves no
/// finalizers on an object being deleted deletes it instead (store.go Update →
/// `deleteWithoutFinalizers`); one that changes nothing writes nothing (etcd3 store.go
/// `GuaranteedUpdate`) and answers with the stored object. `track`: record the write in
/// managedFields (an apply has set them already).
#[allow(clippy::too_many_arguments)]
async fn write_existing<S: Store, T: Strategy>(
    store: &S,
    strategy: &T,
    admission: &Chain<'_>,
    subresource: &str,
    namespace: &str,
    name: &str,
    mut obj: Value,
    old: &Value,
    opts: &WriteOptions<'_>,
    track: bool,
) -> Result<Written, Failure> {
    let dry_run = opts.dry_run;
    let old_rv = stored_rv(old);
    strategy.prepare_for_update(&mut obj, old)?;
    let mut errs = strategy.validate_update(&obj, old);
    errs.extend(no_new_finalizers(&obj, old));
    let deferred = if strategy.metadata_validated_in_admission() {
        std::mem::take(&mut errs)
    } else {
        Vec::new()
    };
    invalid(strategy, name, &errs)?;
    let mut warnings = strategy.warnings_on_update(&obj, old);
    let mut a = Attributes {
        operation: Operation::Update,
        resource: strategy.group_resource(),
        subresource,
        namespace,
        name,
        object: Some(&mut obj),
        old: Some(old),
        dry_run,
        warnings: Vec::new(),
        errors: deferred,
    };
    admission.admit(&mut a).await?;
    invalid(strategy, name, &a.errors)?;
    warnings.append(&mut a.warnings);
    if strategy.should_delete_during_update(&obj, old) {
        // store.go `deleteWithoutFinalizers`: the answer is the object as it was stored.
        store.before_delete(&obj, dry_run).await?;
        let object = store
            .delete(namespace, name, old_rv, dry_run)
            .await
            .map_err(write_failed)?;
        return Ok(Written {
            code: 200,
            object,
            warnings,
            encoded: None,
        });
    }
    if track {
        crate::fieldmanager::track_update(
            opts,
            subresource,
            Some(old),
            &mut obj,
            strategy.field_schema(),
        );
    }
    // The stored bytes carry no resourceVersion (the versioner clears it before encoding),
    // so an unconditional update that changes nothing is a no-op too.
    if let Some(rv) = old.pointer("/metadata/resourceVersion")
        && let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut)
    {
        meta.insert("resourceVersion".into(), rv.clone());
    }
    if unchanged(&obj, old) && !store.stale(old) {
        return Ok(Written {
            code: 200,
            object: old.clone(),
            warnings,
            encoded: None,
        });
    }
    let stored = store
        .update(obj, old, dry_run)
        .await
        .map_err(write_failed)?;
    Ok(Written {
        code: 200,
        object: stored.object,
        warnings,
        encoded: stored.encoded,
    })
}
