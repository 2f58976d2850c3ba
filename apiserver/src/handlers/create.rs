//! POST of a new object (handlers/create.go, store.go `Create`, rest/create.go
//! `BeforeCreate`): mutating admission, the strategy (prepare, validate, warnings),
//! validating admission, the store.

use super::{Written, invalid, meta_str};
use crate::admission::{Attributes, Chain, Operation};
use crate::fieldmanager::WriteOptions;
use crate::rest::meta::rv_set_on_create;
use crate::rest::{Store, Strategy};
use crdplane_core::{ApiError, Reason};
use serde_json::Value;

/// Creates `obj` in `namespace`: prepare, validate (422), warnings, admission, then the
/// store's create (409 AlreadyExists when the name is taken). Answers 201 with the stored
/// object, whose managedFields record the create by `opts.manager`.
pub async fn create<S: Store, T: Strategy>(
    store: &S,
    strategy: &T,
    admission: &Chain<'_>,
    namespace: &str,
    obj: Value,
    opts: &WriteOptions<'_>,
) -> Result<Written, ApiError> {
    create_tracked(store, strategy, admission, namespace, obj, opts, true).await
}

/// [`create`]; `track`: record the write in managedFields (an apply has set them already).
pub(crate) async fn create_tracked<S: Store, T: Strategy>(
    store: &S,
    strategy: &T,
    admission: &Chain<'_>,
    namespace: &str,
    mut obj: Value,
    opts: &WriteOptions<'_>,
    track: bool,
) -> Result<Written, ApiError> {
    let dry_run = opts.dry_run;
    // etcd3 store.go Create refuses an object that carries a resourceVersion (not on dry
    // run); the error is no Status, so upstream answers 500 with reason Unknown.
    let rv_set = rv_set_on_create(&obj);
    // Mutating admission first, on the object as the request sent it (NamespaceLifecycle's
    // 404/403 come before validation errors and name the requested name).
    let requested = meta_str(&obj, "name").to_string();
    let mut a = Attributes {
        operation: Operation::Create,
        resource: strategy.group_resource(),
        subresource: "",
        namespace,
        name: &requested,
        object: Some(&mut obj),
        old: None,
        dry_run,
        warnings: Vec::new(),
        errors: Vec::new(),
    };
    admission.admit_phase(&mut a, true).await?;
    let mut early = a.warnings;
    strategy.prepare_for_create(&mut obj, namespace)?;
    let name = meta_str(&obj, "name").to_string();
    let nameless = || {
        ApiError::invalid(
            strategy.kind(),
            &strategy.group_resource().group,
            "",
            &[crdplane_core::field::FieldError::required(
                "metadata.name",
                "name or generateName is required",
            )],
        )
    };
    if name.is_empty() && !strategy.metadata_validated_in_admission() {
        return Err(nameless());
    }
    invalid(strategy, &name, &strategy.validate(&obj))?;
    let mut warnings = strategy.warnings_on_create(&obj);
    warnings.splice(0..0, early.drain(..));
    let mut a = Attributes {
        operation: Operation::Create,
        resource: strategy.group_resource(),
        subresource: "",
        namespace,
        name: &name,
        object: Some(&mut obj),
        old: None,
        dry_run,
        warnings: Vec::new(),
        errors: Vec::new(),
    };
    admission.admit_phase(&mut a, false).await?;
    warnings.append(&mut a.warnings);
    // An admission that validates metadata has refused a missing name already; a name is
    // still required before anything is stored.
    if name.is_empty() {
        return Err(nameless());
    }
    if track {
        crate::fieldmanager::track_update(opts, "", None, &mut obj, strategy.field_schema());
    }
    if rv_set && !dry_run {
        return Err(ApiError::new(
            Reason::Unknown,
            "resourceVersion should not be set on objects to be created",
        ));
    }
    let stored = store.create(obj, dry_run).await?;
    Ok(Written {
        code: 201,
        object: stored.object,
        warnings,
        encoded: stored.encoded,
    })
}
