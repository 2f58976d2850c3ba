//! `trait Strategy`: what a resource family's server-side rules are — the fields the server
//! sets on create, keeps on update, how objects are validated and which warnings they get —
//! and [`StatusStrategy`], the `/status` variant that wraps a main strategy.
//!
//! Where it sits: the generic create/update/patch/delete handlers ([`crate::handlers`]) call
//! it between decoding the body and admission; the metadata rules every resource shares are
//! the defaults (from [`crate::rest::meta`]). Follows k8s.io/apiserver pkg/registry/rest
//! create.go (`RESTCreateStrategy`, `BeforeCreate`), update.go (`RESTUpdateStrategy`,
//! `BeforeUpdate`), delete.go, and apiextensions-apiserver pkg/registry/customresource
//! strategy.go / status_strategy.go.

use crate::patch::PatchMechanism;
use crate::rest::meta::{self, CreateParams};
use crdplane_core::field::FieldError;
use crdplane_core::{ApiError, GroupResource};
use serde_json::Value;

/// The server-side rules of one resource (one served version of it).
pub trait Strategy: Send + Sync {
    /// Group and plural resource name (errors name it: `crontabs.stable.example.com "x"`).
    fn group_resource(&self) -> &GroupResource;
    /// The kind (`Invalid` errors name it: `CronTab.stable.example.com "x" is invalid`).
    fn kind(&self) -> &str;
    /// Whether objects live in namespaces.
    fn namespaced(&self) -> bool;
    /// Whether the resource has a `/status` subresource: then the main endpoint neither sets
    /// nor changes `.status`.
    fn has_status_subresource(&self) -> bool {
        false
    }
    /// `AllowCreateOnUpdate`: a PUT of a missing object creates it.
    fn allow_create_on_update(&self) -> bool {
        false
    }
    /// `AllowUnconditionalUpdate`: a PUT without resourceVersion overwrites (else 422).
    fn allow_unconditional_update(&self) -> bool {
        true
    }
    /// store.go `ReturnDeletedObject`: an immediate delete answers with the object instead
    /// of a Success Status.
    fn return_deleted_object(&self) -> bool {
        false
    }
    /// The PATCH formats of this resource.
    fn patch_mechanism(&self) -> &dyn PatchMechanism;
    /// The structural schema that field management reads the object with (list and map
    /// types; `metadata` typed as ObjectMeta): by default the type deduced from the value
    /// ([`crate::fieldmanager::deduced_schema`]).
    fn field_schema(&self) -> &Value {
        crate::fieldmanager::deduced_schema()
    }

    /// `BeforeCreate` + `PrepareForCreate`: system fields, namespace, generateName, status.
    fn prepare_for_create(&self, obj: &mut Value, namespace: &str) -> Result<(), ApiError> {
        meta::prepare_for_create(
            obj,
            &CreateParams {
                namespace,
                namespaced: self.namespaced(),
                uid: uuid::Uuid::new_v4().to_string(),
                now: crdplane_core::names::now_timestamp(),
                drop_status: self.has_status_subresource(),
            },
        )
    }
    /// `BeforeUpdate` + `PrepareForUpdate`: identity kept from `old`, generation bookkeeping.
    fn prepare_for_update(&self, new: &mut Value, old: &Value) -> Result<(), ApiError> {
        meta::prepare_for_update(new, old, self.has_status_subresource())
    }
    /// `Validate` of a new object.
    fn validate(&self, obj: &Value) -> Vec<FieldError>;
    /// Whether a validating admission plugin validates the object's metadata (a missing
    /// name included) together with the rest of the type's rules. Custom resources: the
    /// validation service checks ObjectMeta with the schema, as upstream's
    /// `strategy.Validate` reports both in one list, so the generic create leaves a missing
    /// name to it and the client gets every error in one 422. False by default: the create
    /// handler refuses a missing name itself, first.
    fn metadata_validated_in_admission(&self) -> bool {
        false
    }
    /// `ValidateUpdate`; the shared finalizer rule of objects being deleted is always added
    /// by the handlers.
    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError>;
    /// `BeforeDelete`'s precondition checks (UID, resourceVersion) against the stored
    /// object, with rest/delete.go's texts; a resource whose REST.Delete checks them itself
    /// (with its own texts) overrides this.
    fn check_delete_preconditions(
        &self,
        obj: &Value,
        o: &crate::rest::delete::DeleteOptions,
    ) -> Result<(), ApiError> {
        crate::rest::delete::check_delete_preconditions(
            obj,
            o,
            self.kind(),
            &self.group_resource().group,
        )
    }
    /// store.go `ShouldDeleteDuringUpdate`: whether the update `new` of `old` completes a
    /// pending deletion (the last finalizer removed), so the object is removed instead.
    fn should_delete_during_update(&self, new: &Value, old: &Value) -> bool {
        crate::rest::delete::should_delete_during_update(new, old)
    }
    /// The fields of `obj` its type does not have, as upstream's strict decoding reports
    /// them (`unknown field "spec.x"`). The PATCH handler checks the patched object with it
    /// (create and update bodies are checked where they are decoded). Nothing by default:
    /// custom resources prune against their schema in the validation service instead.
    fn unknown_fields(&self, _obj: &Value) -> Vec<String> {
        Vec::new()
    }
    /// `WarningsOnCreate`.
    fn warnings_on_create(&self, _obj: &Value) -> Vec<String> {
        Vec::new()
    }
    /// `WarningsOnUpdate`.
    fn warnings_on_update(&self, _new: &Value, _old: &Value) -> Vec<String> {
        Vec::new()
    }
}

/// The `/status` subresource of a resource: only `.status` changes (status_strategy.go
/// `PrepareForUpdate` copies the old object and sets the new status; the request's
/// resourceVersion stays, as the precondition it was checked against). Creates and
/// deletes do not exist on `/status`.
pub struct StatusStrategy<S>(pub S);

impl<S: Strategy> Strategy for StatusStrategy<S> {
    fn group_resource(&self) -> &GroupResource {
        self.0.group_resource()
    }
    fn kind(&self) -> &str {
        self.0.kind()
    }
    fn namespaced(&self) -> bool {
        self.0.namespaced()
    }
    fn has_status_subresource(&self) -> bool {
        true
    }
    fn allow_unconditional_update(&self) -> bool {
        self.0.allow_unconditional_update()
    }
    fn patch_mechanism(&self) -> &dyn PatchMechanism {
        self.0.patch_mechanism()
    }
    fn field_schema(&self) -> &Value {
        self.0.field_schema()
    }
    fn prepare_for_create(&self, _obj: &mut Value, _namespace: &str) -> Result<(), ApiError> {
        Err(ApiError::method_not_supported(
            self.group_resource(),
            "create",
        ))
    }
    fn prepare_for_update(&self, new: &mut Value, old: &Value) -> Result<(), ApiError> {
        *new = status_only(new, old);
        Ok(())
    }
    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        self.0.validate(obj)
    }
    fn metadata_validated_in_admission(&self) -> bool {
        self.0.metadata_validated_in_admission()
    }
    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        self.0.validate_update(new, old)
    }
    fn warnings_on_update(&self, new: &Value, old: &Value) -> Vec<String> {
        self.0.warnings_on_update(new, old)
    }
    fn unknown_fields(&self, obj: &Value) -> Vec<String> {
        self.0.unknown_fields(obj)
    }
    fn should_delete_during_update(&self, new: &Value, old: &Value) -> bool {
        self.0.should_delete_during_update(new, old)
    }
}

/// `old` with the status of `new` (none when `new` has none) and `new`'s resourceVersion.
pub fn status_only(new: &Value, old: &Value) -> Value {
    let mut out = old.clone();
    if let Some(m) = out.as_object_mut() {
        match new.get("status") {
            Some(s) => m.insert("status".into(), s.clone()),
            None => m.remove("status"),
        };
        if let Some(rv) = new.pointer("/metadata/resourceVersion")
            && let Some(meta) = m.get_mut("metadata").and_then(Value::as_object_mut)
        {
            meta.insert("resourceVersion".into(), rv.clone());
        }
    }
    out
}
