//! Namespace lifecycle checks and tenant bootstrap, shared by the handlers that write into
//! a namespace (custom resources, built-in types) and by the router.
//!
//! Where it sits: below the handler families (`crs`, `builtin`, `namespaces`) and the
//! router, above the context and the namespace store
//! ([`crate::stores::namespaces`]). A write into a namespace that does not exist is upstream's
//! 404, into a Terminating one the 403 of the NamespaceLifecycle admission plugin
//! (plugin/pkg/admission/namespace/lifecycle/admission.go); known namespaces are cached in
//! [`Ctx::namespaces`]. A tenant's first request creates its default namespaces (upstream's
//! system namespaces controller, pkg/controlplane/controller/systemnamespaces) through the
//! generic create handler with the namespace strategy.

use crate::context::Ctx;
use crate::stores::namespaces::{Endpoint, NamespaceStore, NamespaceStrategy};
use crdplane_apiserver::admission::{Admission, Attributes, Chain, Operation};
use crdplane_apiserver::handlers;
use crdplane_apiserver::rest::Store;
use crdplane_core::{ApiError, GroupResource};
use futures::future::BoxFuture;
use serde_json::Value;

fn gr() -> GroupResource {
    GroupResource::new("", "namespaces")
}

/// Fails with upstream's 404 (`namespaces "x" not found`) when the namespace does not exist.
pub async fn require_namespace(ctx: &Ctx, tenant: &str, ns: &str) -> Result<(), ApiError> {
    require_namespace_for(ctx, tenant, ns, &gr(), ns).await
}

/// As [`require_namespace`], for a create of object `name` of resource `target`: a
/// Terminating namespace refuses it with the NamespaceLifecycle admission plugin's 403,
/// which names the object being created (`crontabs.stable.example.com "x" is forbidden:
/// unable to create new content in namespace team because it is being terminated`).
pub async fn require_namespace_for(
    ctx: &Ctx,
    tenant: &str,
    ns: &str,
    target: &GroupResource,
    name: &str,
) -> Result<(), ApiError> {
    let k = (tenant.to_string(), ns.to_string());
    if ctx.namespaces.read().expect("lock").contains(&k) {
        return Ok(());
    }
    let v = NamespaceStore::new(ctx, tenant).get("", ns).await?;
    if v.pointer("/status/phase").and_then(Value::as_str) == Some("Terminating") {
        return Err(ApiError::forbidden(
            target,
            name,
            &format!(
                "unable to create new content in namespace {ns} because it is being terminated"
            ),
        ));
    }
    ctx.namespaces.write().expect("lock").insert(k);
    Ok(())
}

/// Creates a namespace of `tenant` through the generic create handler with the namespace
/// strategy (`crate::stores::namespaces`): the request's own namespaces and the default
/// ones of a new tenant alike.
pub async fn create_namespace(
    ctx: &Ctx,
    tenant: &str,
    obj: Value,
    opts: &handlers::WriteOptions<'_>,
) -> Result<Value, ApiError> {
    let store = NamespaceStore::new(ctx, tenant);
    if !obj.is_object() {
        return Err(ApiError::bad_request(
            "the object provided is not a JSON object",
        ));
    }
    let w = handlers::create(
        &store,
        &NamespaceStrategy(Endpoint::Main),
        &Chain::none(),
        "",
        obj,
        opts,
    )
    .await?;
    Ok(w.object)
}

pub use crate::stores::namespaces::DEFAULT_NAMESPACES;

/// Creates the tenant's default namespaces and bootstrap RBAC objects on its first request
/// (once per gateway process; each object only if absent).
pub async fn ensure_tenant(ctx: &Ctx, tenant: &str) -> Result<(), ApiError> {
    if ctx.tenants.read().expect("lock").contains(tenant) {
        return Ok(());
    }
    ensure_bootstrap_rbac(ctx, tenant).await?;
    for ns in DEFAULT_NAMESPACES {
        match create_namespace(
            ctx,
            tenant,
            serde_json::json!({"metadata": {"name": ns}}),
            &handlers::WriteOptions::system("v1"),
        )
        .await
        {
            Ok(_) => {}
            Err(e) if e.code == 409 => {}
            Err(e) => return Err(e),
        }
    }
    ctx.tenants
        .write()
        .expect("lock")
        .insert(tenant.to_string());
    Ok(())
}

/// The storage of one RBAC resource of `tenant` (RBAC objects are stored as served) and
/// the built-in strategy of its type.
fn rbac_store<'a>(
    ctx: &'a Ctx,
    tenant: &'a str,
    resource: &'static str,
) -> (
    crate::stores::storage::StorageStore<'a>,
    crate::stores::builtin::BuiltinStrategy,
) {
    let r = crdplane_core::builtin::lookup(crdplane_auth::rbac::GROUP, "v1", resource)
        .expect("RBAC types are built-in");
    let ty = crate::stores::builtin::type_of(r);
    let store = crate::stores::storage::StorageStore {
        storage: &ctx.storage,
        tenant,
        group: r.storage.0,
        resource: r.storage.1,
        ttl_seconds: 0,
    };
    (store, crate::stores::builtin::BuiltinStrategy::new(ty))
}

/// Creates upstream's bootstrap ClusterRoles and ClusterRoleBindings
/// (`crdplane_auth::rbac::bootstrap`) that the tenant lacks, through the generic create
/// handler (so they carry uid, creationTimestamp and resourceVersion like any object). One
/// that exists is left as the tenant's admins made it.
async fn ensure_bootstrap_rbac(ctx: &Ctx, tenant: &str) -> Result<(), ApiError> {
    use crdplane_auth::rbac::bootstrap;
    let create = |resource: &'static str, obj: serde_json::Value| async move {
        let (store, strategy) = rbac_store(ctx, tenant, resource);
        let opts = handlers::WriteOptions::system("rbac.authorization.k8s.io/v1");
        match handlers::create(&store, &strategy, &Chain::none(), "", obj, &opts).await {
            Ok(_) => Ok(()),
            Err(e) if e.code == 409 => Ok(()),
            Err(e) => Err(e),
        }
    };
    let roles = bootstrap::cluster_roles()
        .into_iter()
        .map(|o| create("clusterroles", o));
    futures::future::try_join_all(roles).await?;
    let bindings = bootstrap::cluster_role_bindings()
        .into_iter()
        .map(|o| create("clusterrolebindings", o));
    futures::future::try_join_all(bindings).await?;
    // Without RBAC no policy read writes the aggregated roles' rules back: do it once here.
    if ctx.authz.mode() == crate::authz::Mode::AlwaysAllow {
        crate::policy::aggregate(ctx, tenant).await?;
    }
    Ok(())
}

/// Makes the ClusterRoleBinding `crdplane:tenant-owners` of `tenant` bind `owners` (a
/// Tenant's `spec.owners`, RBAC subjects) to `cluster-admin`: created, updated to the
/// list, or deleted when the list is empty. Through the generic handlers, so RBAC
/// validation and the change stream see it like any binding.
pub async fn sync_owners(ctx: &Ctx, tenant: &str, owners: &[Value]) -> Result<(), ApiError> {
    use crate::stores::tenants::OWNERS_BINDING;
    let (store, strategy) = rbac_store(ctx, tenant, "clusterrolebindings");
    let want = |rv: Option<&Value>| {
        let mut b = serde_json::json!({
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": OWNERS_BINDING},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
            "subjects": owners,
        });
        if let Some(rv) = rv {
            b["metadata"]["resourceVersion"] = rv.clone();
        }
        b
    };
    match store.get("", OWNERS_BINDING).await {
        Ok(old) if owners.is_empty() => {
            let rv = old
                .pointer("/metadata/resourceVersion")
                .and_then(Value::as_str);
            let o = crdplane_apiserver::rest::delete::preconditioned(None, rv);
            match handlers::delete(&store, &strategy, &Chain::none(), "", OWNERS_BINDING, &o).await
            {
                Ok(_) => Ok(()),
                Err(e) if e.code == 404 => Ok(()),
                Err(e) => Err(e),
            }
        }
        Ok(old) => {
            if old.get("subjects").map(|s| s.as_array().map(Vec::as_slice)) == Some(Some(owners)) {
                return Ok(());
            }
            let rv = old.pointer("/metadata/resourceVersion");
            handlers::update(
                &store,
                &strategy,
                &Chain::none(),
                "",
                "",
                OWNERS_BINDING,
                want(rv),
                &handlers::WriteOptions::system("rbac.authorization.k8s.io/v1"),
            )
            .await
            .map(|_| ())
        }
        Err(e) if e.code == 404 && owners.is_empty() => Ok(()),
        Err(e) if e.code == 404 => {
            let opts = handlers::WriteOptions::system("rbac.authorization.k8s.io/v1");
            match handlers::create(&store, &strategy, &Chain::none(), "", want(None), &opts).await {
                Ok(_) => Ok(()),
                Err(e) if e.code == 409 => Box::pin(sync_owners(ctx, tenant, owners)).await,
                Err(e) => Err(e),
            }
        }
        Err(e) => Err(e),
    }
}

/// The NamespaceLifecycle admission plugin over [`require_namespace_for`]: a create in a
/// namespace that does not exist is 404, in a Terminating one the 403 naming the object.
/// Other operations and cluster-scoped objects pass.
pub struct NamespaceExists<'a> {
    /// The gateway's context (namespace cache, storage client).
    pub ctx: &'a Ctx,
    /// The tenant whose namespace it is.
    pub tenant: &'a str,
}

impl Admission for NamespaceExists<'_> {
    fn admit<'a>(&'a self, a: &'a mut Attributes<'_>) -> BoxFuture<'a, Result<(), ApiError>> {
        Box::pin(async move {
            if a.operation != Operation::Create || a.namespace.is_empty() {
                return Ok(());
            }
            require_namespace_for(self.ctx, self.tenant, a.namespace, a.resource, a.name).await
        })
    }
    /// Upstream's NamespaceLifecycle is mutating admission: it runs before the object is
    /// prepared and validated.
    fn mutating(&self) -> bool {
        true
    }
}
