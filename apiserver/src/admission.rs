//! Admission: plugins that see every write after the strategy prepared it and may mutate
//! or refuse it, run in order as one [`Chain`].
//!
//! Where it sits: the generic create/update/patch/delete handlers ([`crate::handlers`]) run
//! the chain after `prepare_for_*` and validation, before the store write (upstream runs
//! mutating admission before validation and validating admission after it; one ordered
//! chain of plugins that may do either is enough here). Follows k8s.io/apiserver
//! pkg/admission (interfaces.go `Attributes`, chain.go) and the NamespaceLifecycle plugin
//! (plugin/namespace/lifecycle/admission.go). Resource families add their own plugins
//! (schema validation of custom resources, scale paths) by implementing [`Admission`].

use crate::rest::Store;
use crdplane_core::field::FieldError;
use crdplane_core::{ApiError, GroupResource};
use futures::future::BoxFuture;
use serde_json::Value;

/// What a write does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operation {
    /// `CREATE`: a new object is stored.
    Create,
    /// `UPDATE`: an existing object is replaced (update, patch, subresource writes).
    Update,
    /// `DELETE`: an object is removed.
    Delete,
}

/// The request as admission sees it (admission.Attributes).
#[derive(Debug)]
pub struct Attributes<'a> {
    /// Which kind of write this is.
    pub operation: Operation,
    /// The group/resource written.
    pub resource: &'a GroupResource,
    /// "" or the subresource (`status`, `scale`).
    pub subresource: &'a str,
    /// Namespace of the object ("" when cluster-scoped).
    pub namespace: &'a str,
    /// Name of the object (on a create with `generateName`, the generated one).
    pub name: &'a str,
    /// The object to be stored (create, update); plugins may change it.
    pub object: Option<&'a mut Value>,
    /// The stored object (update, delete).
    pub old: Option<&'a Value>,
    /// The write is a dry run (`dryRun=All`): plugins must not have side effects.
    pub dry_run: bool,
    /// `Warning` headers plugins add (upstream's `warning.AddWarning` on the request's
    /// context); the handler sends them with the answer.
    pub warnings: Vec<String>,
    /// Field errors the handler found (the ObjectMeta update rules, such as no new
    /// finalizers while deleting) and left to a plugin that validates the object
    /// (`Strategy::metadata_validated_in_admission`): the plugin takes them and reports them
    /// first, with its own, in one 422, as upstream's `strategy.ValidateUpdate` lists
    /// ObjectMeta and schema errors together. The handler refuses what no plugin took.
    pub errors: Vec<FieldError>,
}

/// One admission plugin.
pub trait Admission: Send + Sync {
    /// Admits (possibly mutating `a.object`) or refuses the request with its Status.
    fn admit<'a>(&'a self, a: &'a mut Attributes<'_>) -> BoxFuture<'a, Result<(), ApiError>>;
    /// Whether the plugin is mutating admission in upstream's sense: a create runs it
    /// before the strategy prepares the object (handlers/create.go admits before
    /// `rest.BeforeCreate`), so it sees the name the request carries ("" with
    /// `generateName`) and its refusal comes before validation errors. Other writes run
    /// every plugin after validation, in order. `false` by default.
    fn mutating(&self) -> bool {
        false
    }
}

/// Plugins in order; the first refusal ends the request. Plugins may borrow what the
/// request borrows (`'a`).
#[derive(Default)]
pub struct Chain<'a>(pub Vec<Box<dyn Admission + 'a>>);

impl Chain<'_> {
    /// A chain of no plugins (admits everything).
    pub fn none() -> Self {
        Chain(Vec::new())
    }
    /// Runs every plugin in order.
    pub async fn admit(&self, a: &mut Attributes<'_>) -> Result<(), ApiError> {
        for p in &self.0 {
            p.admit(a).await?;
        }
        Ok(())
    }
    /// Runs the plugins of one phase ([`Admission::mutating`]) in order.
    pub async fn admit_phase(
        &self,
        a: &mut Attributes<'_>,
        mutating: bool,
    ) -> Result<(), ApiError> {
        for p in self.0.iter().filter(|p| p.mutating() == mutating) {
            p.admit(a).await?;
        }
        Ok(())
    }
}

/// NamespaceLifecycle (plugin/namespace/lifecycle/admission.go) over the namespaces'
/// [`Store`]: a create in a namespace that does not exist is 404 `namespaces "x" not
/// found`; in a Terminating namespace it is the 403 naming the object being created.
/// Cluster-scoped requests and namespaces themselves pass.
pub struct NamespaceLifecycle<S>(pub S);

impl<S: Store> Admission for NamespaceLifecycle<S> {
    fn admit<'a>(&'a self, a: &'a mut Attributes<'_>) -> BoxFuture<'a, Result<(), ApiError>> {
        Box::pin(async move {
            if a.operation != Operation::Create
                || a.namespace.is_empty()
                || (a.resource.group.is_empty() && a.resource.resource == "namespaces")
            {
                return Ok(());
            }
            let ns = self.0.get("", a.namespace).await?;
            if ns.pointer("/status/phase").and_then(Value::as_str) == Some("Terminating") {
                return Err(namespace_terminating(a.resource, a.name, a.namespace));
            }
            Ok(())
        })
    }
    fn mutating(&self) -> bool {
        true
    }
}

/// The NamespaceLifecycle 403 for a create in a Terminating namespace.
pub fn namespace_terminating(target: &GroupResource, name: &str, ns: &str) -> ApiError {
    ApiError::forbidden(
        target,
        name,
        &format!("unable to create new content in namespace {ns} because it is being terminated"),
    )
}
