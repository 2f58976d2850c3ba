//! The generic machinery of one custom-resource request: the custom resource's store,
//! strategy and admission chain (NamespaceLifecycle, then the schema admission of the
//! validation service), as the custom-resource writes (`crs.rs`) and the `/scale` endpoint
//! (`scale_rest.rs`) hand them to the generic handlers of `crdplane_apiserver::handlers`.
//!
//! Where it sits: below those two handler modules, above the namespace checks
//! ([`crate::lifecycle`]) and the concrete store and strategy ([`crate::stores::crs`]).
//! Upstream builds the same per resource once (apiextensions-apiserver
//! customresource_handler.go `crdHandler.getOrCreateServingInfoFor`); here the pieces only
//! borrow the request, so building them per request costs two small allocations.

use crate::context::{Ctx, Req};
use crate::crd::{CrdInfo, VersionInfo};
use crate::lifecycle::NamespaceExists;
use crate::stores::crs::{CrStore, CrStrategy, SchemaAdmission};
use crdplane_apiserver::admission::Chain;

/// The generic machinery for one served version: the store, the strategy and the
/// admission chain (NamespaceLifecycle, then the schema).
pub fn machinery<'a>(
    ctx: &'a Ctx,
    req: &'a Req,
    crd: &'a CrdInfo,
    ver: &'a VersionInfo,
) -> (CrStore<'a>, CrStrategy<'a>, Chain<'a>) {
    let tenant = req.info.tenant.as_str();
    let admission = Chain(vec![
        Box::new(NamespaceExists { ctx, tenant }),
        Box::new(SchemaAdmission { ctx, req, crd, ver }),
    ]);
    (
        CrStore::new(ctx, tenant, crd, ver),
        CrStrategy::new(crd, ver),
        admission,
    )
}
