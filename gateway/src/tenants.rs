//! `crdplane.io/v1alpha1` Tenants (`/clusters/root/apis/crdplane.io/v1alpha1/tenants`): the
//! platform admins' API that creates and deletes tenants, and the lookup of a tenant's
//! phase that the edge asks on every request.
//!
//! Where it sits: the router sends the Tenant requests of the admin scope
//! ([`ADMIN_SCOPE`]) here; create, get, list, watch, update, patch and delete run on the
//! generic handlers of `crdplane_apiserver` with the Tenant strategy and store
//! (`crate::stores::tenants`). Creating a Tenant seeds its tenant (default namespaces,
//! bootstrap RBAC, the owners' binding: `crate::lifecycle`) before it answers; deleting one
//! marks it Terminating for the purge controller (the `tenant_purge` module). The
//! tenant-lifecycle layer of the edge (`filters/tenant_lifecycle.rs`) asks [`phase`]
//! for every request, through the cache of `crate::tenant_directory`.
//!
//! Upstream has no tenants; the API follows upstream's namespaces (k8s.io/kubernetes
//! pkg/registry/core/namespace), and the admin scope is a logical cluster as in kcp's
//! root workspace.

use crate::context::{Ctx, Req, TenantCreation};
use crate::http::{Body, json_response};
use crate::reads;
use crate::request::decode_body;
use crate::stores::tenants::{
    self as store, ADMIN_SCOPE, API_VERSION, GROUP, KIND, RESOURCE, TenantStore, TenantStrategy,
    VERSION, gr,
};
use crate::table::TableConvertor;
use crate::tenant_directory::Phase;
use crate::watch;
use crdplane_apiserver::admission::{Admission, Attributes, Chain, Operation};
use crdplane_apiserver::handlers;
use crdplane_core::ApiError;
use futures::future::BoxFuture;
use http::{Response, StatusCode};
use serde_json::{Value, json};
use std::sync::OnceLock;

fn table() -> &'static TableConvertor {
    static T: OnceLock<TableConvertor> = OnceLock::new();
    T.get_or_init(|| {
        TableConvertor::new(&json!([
            {"name": "Status", "type": "string", "description": "The phase of the tenant: Active, or Terminating while its objects are removed", "jsonPath": ".status.phase"},
            {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}
        ]))
    })
}

/// The read verbs' description of the Tenants.
fn resource() -> reads::Resource<'static> {
    reads::Resource {
        api_version: API_VERSION,
        kind: KIND,
        list_kind: crdplane_core::tenancy::LIST_KIND,
        stored: [ADMIN_SCOPE, GROUP, RESOURCE],
        table: table(),
    }
}

fn phase_of(t: &Value) -> Phase {
    if store::terminating(t) {
        Phase::Terminating
    } else {
        Phase::Active
    }
}

/// The phase of `tenant` (None: no such tenant). The admin scope is always Active; the
/// `--default-tenant`, and with `--tenant-creation=on-first-use` any tenant, is created
/// here when it does not exist yet.
pub async fn phase(ctx: &Ctx, tenant: &str) -> Result<Option<Phase>, ApiError> {
    if tenant == ADMIN_SCOPE {
        return Ok(Some(Phase::Active));
    }
    if let Some(p) = ctx.tenant_dir.cached(tenant) {
        return Ok(Some(p));
    }
    let epoch = ctx.tenant_dir.epoch();
    let tenants = TenantStore::new(&ctx.storage, &ctx.tenant_purge);
    match handlers::get(&tenants, "", tenant).await {
        Ok(t) => {
            let p = phase_of(&t);
            ctx.tenant_dir.remember(tenant, p, epoch);
            Ok(Some(p))
        }
        Err(e) if e.code == 404 => {
            let create = tenant == ctx.cfg.default_tenant
                || ctx.cfg.tenant_creation == TenantCreation::OnFirstUse;
            if !create || store::reserved(tenant) {
                return Ok(None);
            }
            let opts = handlers::WriteOptions::system(API_VERSION);
            match create_tenant(ctx, json!({"metadata": {"name": tenant}}), &opts).await {
                Ok(_) => Ok(Some(Phase::Active)),
                // Created meanwhile by another request or replica: read it again.
                Err(e) if e.code == 409 => Box::pin(phase(ctx, tenant)).await,
                Err(e) => Err(e),
            }
        }
        Err(e) => Err(e),
    }
}

/// The default tenant may not be deleted (as upstream's `default` namespace: the
/// NamespaceLifecycle plugin's 403); the admin scope is no Tenant at all.
struct ImmortalTenants<'a> {
    default_tenant: &'a str,
}

impl Admission for ImmortalTenants<'_> {
    fn admit<'a>(&'a self, a: &'a mut Attributes<'_>) -> BoxFuture<'a, Result<(), ApiError>> {
        Box::pin(async move {
            if a.operation == Operation::Delete && a.name == self.default_tenant {
                return Err(ApiError::forbidden(
                    gr(),
                    a.name,
                    "the default tenant may not be deleted",
                ));
            }
            Ok(())
        })
    }
}

/// Creates a Tenant through the generic create handler, then seeds its tenant (default
/// namespaces, bootstrap RBAC, owners' binding) before answering; a seeding that failed is
/// completed by the tenant's first request (`crate::lifecycle::ensure_tenant`).
pub async fn create_tenant(
    ctx: &Ctx,
    obj: Value,
    opts: &handlers::WriteOptions<'_>,
) -> Result<Value, ApiError> {
    let tenants = TenantStore::new(&ctx.storage, &ctx.tenant_purge);
    let w = handlers::create(&tenants, &TenantStrategy, &Chain::none(), "", obj, opts).await?;
    if !opts.dry_run {
        let name = w
            .object
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        ctx.forget_tenant(&name);
        crate::lifecycle::ensure_tenant(ctx, &name).await?;
        crate::lifecycle::sync_owners(ctx, &name, &owners(&w.object)).await?;
    }
    Ok(w.object)
}

/// `spec.owners` of a Tenant as RBAC subjects (with the `apiGroup` RBAC requires of users
/// and groups when the Tenant left it out).
fn owners(t: &Value) -> Vec<Value> {
    t.pointer("/spec/owners")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .map(|o| {
                    let mut o = o.clone();
                    if o.get("apiGroup").is_none_or(Value::is_null) {
                        let g = match o.get("kind").and_then(Value::as_str) {
                            Some("ServiceAccount") => "",
                            _ => crdplane_auth::rbac::GROUP,
                        };
                        o["apiGroup"] = json!(g);
                    }
                    o
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Serves one Tenant request of the admin scope.
pub async fn serve(ctx: &Ctx, req: &Req) -> Result<Response<Body>, ApiError> {
    let i = &req.info;
    if i.tenant != ADMIN_SCOPE || !i.namespace.is_empty() {
        return Ok(crate::http::page_not_found());
    }
    if !i.subresource.is_empty() {
        return Err(ApiError::not_found(gr(), &i.name));
    }
    let dry = req.dry_run()?;
    let tenants = TenantStore::new(&ctx.storage, &ctx.tenant_purge);
    match i.verb.as_str() {
        "create" => {
            let obj = decode_body(req)?;
            let warnings = crate::request::strict_warnings(req, KIND, API_VERSION, || {
                crate::stores::typed::unknown_fields::<store::Tenant>(&obj)
            })?;
            let opts = crate::request::write_options(req)?;
            let v = create_tenant(ctx, obj, &opts).await?;
            Ok(crate::respond::with_warnings(
                json_response(StatusCode::CREATED, serde_json::to_vec(&v).expect("json")),
                &warnings,
            ))
        }
        "get" => reads::get(req, &resource(), &tenants).await,
        "list" => reads::list(ctx, req, &resource(), &tenants, || selectors(req)).await,
        "watch" => {
            let table = watch::table_fn(table());
            let t = reads::watch_target(req, &resource(), table, selectors(req)?);
            watch::serve(ctx, req, t).await
        }
        "update" | "patch" => {
            let body = if i.verb == "update" {
                Some(decode_body(req)?)
            } else {
                crate::request::record_patch_findings(req);
                None
            };
            let warnings = crate::request::strict_warnings(req, KIND, API_VERSION, || {
                body.as_ref()
                    .map(crate::stores::typed::unknown_fields::<store::Tenant>)
                    .unwrap_or_default()
            })?;
            let admission = Chain::none();
            let opts = crate::request::write_options(req)?;
            let w = match body {
                Some(obj) => {
                    handlers::update(
                        &tenants,
                        &TenantStrategy,
                        &admission,
                        "",
                        "",
                        &i.name,
                        obj,
                        &opts,
                    )
                    .await?
                }
                None => {
                    let mime = crate::request::patch_media_type(req);
                    handlers::patch(
                        &tenants,
                        &TenantStrategy,
                        &admission,
                        "",
                        "",
                        &i.name,
                        &crate::request::patch_request(req, &mime)?,
                        &opts,
                    )
                    .await?
                }
            };
            if !dry && !store::terminating(&w.object) {
                crate::lifecycle::sync_owners(ctx, &i.name, &owners(&w.object)).await?;
            }
            Ok(crate::respond::written(w, &warnings))
        }
        "delete" => {
            let o = crate::request::request_delete_options(req)?;
            let admission = Chain(vec![Box::new(ImmortalTenants {
                default_tenant: &ctx.cfg.default_tenant,
            })]);
            let w =
                handlers::delete(&tenants, &TenantStrategy, &admission, "", &i.name, &o).await?;
            if !dry {
                ctx.forget_tenant(&i.name);
            }
            Ok(crate::respond::written(w, &[]))
        }
        _ => Err(ApiError::method_not_supported(gr(), &i.verb)),
    }
}

/// Tenants select by `metadata.name` and `status.phase`, as namespaces do.
fn selectors(req: &Req) -> Result<(String, String), ApiError> {
    crate::list::checked_selectors(req, |f| matches!(f, "metadata.name" | "status.phase"))
}

/// The legacy `APIResourceList` of `crdplane.io/v1alpha1`.
fn resource_list() -> Vec<u8> {
    use crdplane_core::discovery::{APIResource, non_empty, resource_list, strings};
    let r = APIResource {
        name: RESOURCE.into(),
        singular_name: crdplane_core::tenancy::SINGULAR.into(),
        namespaced: false,
        kind: KIND.into(),
        verbs: strings(crdplane_core::tenancy::VERBS),
        short_names: non_empty(&[]),
        ..Default::default()
    };
    serde_json::to_vec(&resource_list(API_VERSION, vec![r])).expect("json")
}

/// The discovery documents of the admin scope: those of its CRDs and built-in types, plus
/// the `crdplane.io` group of Tenants.
pub fn add_discovery(d: &mut crate::backends::registry::Discovery) {
    use crdplane_core::discovery::{
        APIGroupDiscovery, APIResourceDiscovery, APIVersionDiscovery, GroupMeta, GroupVersionKind,
        scope, strings,
    };
    let gv = json!({"groupVersion": API_VERSION, "version": VERSION});
    let group = json!({"name": GROUP, "versions": [gv], "preferredVersion": gv});
    if let Ok(mut list) = serde_json::from_slice::<Value>(&d.group_list)
        && let Some(groups) = list.get_mut("groups").and_then(Value::as_array_mut)
    {
        groups.push(group);
        d.group_list = serde_json::to_vec(&list).expect("json").into();
    }
    let aggregated = APIGroupDiscovery {
        metadata: GroupMeta {
            name: GROUP.into(),
            ..Default::default()
        },
        versions: vec![APIVersionDiscovery {
            version: VERSION.into(),
            resources: vec![APIResourceDiscovery {
                resource: RESOURCE.into(),
                response_kind: Some(GroupVersionKind::new(GROUP, VERSION, KIND)),
                scope: scope(false),
                singular_resource: crdplane_core::tenancy::SINGULAR.into(),
                verbs: strings(crdplane_core::tenancy::VERBS),
                ..Default::default()
            }],
            freshness: "Current".into(),
        }],
    };
    if let Ok(mut list) = serde_json::from_slice::<Value>(&d.aggregated)
        && let Some(items) = list.get_mut("items").and_then(Value::as_array_mut)
    {
        items.push(serde_json::to_value(aggregated).expect("json"));
        d.aggregated = serde_json::to_vec(&list).expect("json").into();
    }
    d.resource_lists
        .insert(API_VERSION.to_string(), resource_list().into());
}
