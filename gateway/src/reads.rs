//! The read verbs of every resource family as one path: GET and LIST over the family's
//! [`Store`], answered as JSON or as a `meta.k8s.io` Table of the family's
//! [`TableConvertor`], and the [`Target`] of a WATCH. Custom resources, CRDs,
//! namespaces and the built-in types differ here only in the [`Resource`] they describe
//! themselves with, the store they pass and the selectors they accept.
//!
//! JSON is the store's encoding as it is (`Store::get_encoded` / `list_encoded`: the stored
//! bytes for the stores that hold bytes, spliced into the list document), so a GET or LIST
//! of JSON parses no object; a Table parses the objects it renders.
//!
//! Where it sits: below the handler families' routing (`crs.rs`, `crds.rs`,
//! `namespaces.rs`, `builtin.rs`), above the generic handlers of
//! `crdplane_apiserver::handlers`, the pages and signed continue tokens of [`crate::list`]
//! and the shared watch streams of [`crate::watch`]. Follows k8s.io/apiserver
//! pkg/endpoints/handlers/get.go (`GetResource`, `ListResource`: the output media type is
//! negotiated before the store is read) and response.go (`transformResponseObject`, the
//! Table conversion).

use crate::context::{Ctx, Req};
use crate::http::{Body, Output, json_response, negotiate_output};
use crate::request::include_object;
use crate::respond::{table_api_version, with_warnings};
use crate::table::{ListMeta, RenderOptions, TableConvertor};
use crate::watch::{TableFn, Target};
use crdplane_apiserver::handlers;
use crdplane_apiserver::rest::Store;
use crdplane_core::{ApiError, ResourceRef};
use http::{Response, StatusCode};
use serde_json::Value;

/// What the read verbs need to know of a resource family.
#[derive(Clone, Copy)]
pub struct Resource<'a> {
    /// apiVersion of the served objects and lists (`v1`, `stable.example.com/v1`).
    pub api_version: &'a str,
    /// Kind of the served objects (and of BOOKMARK events).
    pub kind: &'a str,
    /// Kind of the list document (`ConfigMapList`).
    pub list_kind: &'a str,
    /// `[tenant, group, resource]` as stored: what continue tokens are bound to and what a
    /// watch streams (the served resource may share another's storage, as events do).
    pub stored: [&'a str; 3],
    /// The Table rendering.
    pub table: &'a TableConvertor,
}

/// The render options of a Table answer in `version` (`v1` or `v1beta1`).
fn table_options(req: &Req, version: &str) -> Result<RenderOptions<'static>, ApiError> {
    Ok(RenderOptions {
        include_object: include_object(req)?,
        with_columns: true,
        api_version: table_api_version(version),
        now: chrono::Utc::now(),
    })
}

fn table_response(code: StatusCode, t: &Value) -> Response<Body> {
    json_response(code, serde_json::to_vec(t).expect("json"))
}

/// One object as the client asked for it: JSON, or a one-row Table whose resourceVersion is
/// the object's. `warnings` become `Warning` headers.
pub fn object(
    req: &Req,
    table: &TableConvertor,
    code: StatusCode,
    obj: &Value,
    warnings: &[String],
) -> Result<Response<Body>, ApiError> {
    let resp = match negotiate_output(req.header(http::header::ACCEPT))? {
        Output::Json => json_response(code, serde_json::to_vec(obj).expect("json")),
        Output::Table(v) => {
            table_response(code, &table.object_to_table(obj, &table_options(req, v)?))
        }
    };
    Ok(with_warnings(resp, warnings))
}

/// GET of `req`'s object from `store` (handlers/get.go `GetResource`).
pub async fn get<S: Store>(
    req: &Req,
    r: &Resource<'_>,
    store: &S,
) -> Result<Response<Body>, ApiError> {
    let i = &req.info;
    let output = negotiate_output(req.header(http::header::ACCEPT))?;
    let json = handlers::get_encoded(store, &i.namespace, &i.name).await?;
    match output {
        Output::Json => Ok(json_response(StatusCode::OK, json)),
        Output::Table(v) => {
            let obj = crate::request::parse_object(&json)?;
            let t = r.table.object_to_table(&obj, &table_options(req, v)?);
            Ok(table_response(StatusCode::OK, &t))
        }
    }
}

/// LIST of `req`'s page of `store` (handlers/get.go `ListResource`): the output media type,
/// then the family's checked selectors (`selectors`: the label and field selector as the
/// store matches them), the list options and continue token of [`crate::list::page`]; the
/// page as `<list_kind>` or as a Table with the page's list metadata.
pub async fn list<S: Store>(
    ctx: &Ctx,
    req: &Req,
    r: &Resource<'_>,
    store: &S,
    selectors: impl FnOnce() -> Result<(String, String), ApiError>,
) -> Result<Response<Body>, ApiError> {
    let output = negotiate_output(req.header(http::header::ACCEPT))?;
    let (label, field) = selectors()?;
    let page =
        crate::list::page(ctx, req, store, r.stored, &req.info.namespace, label, field).await?;
    match output {
        Output::Json => Ok(json_response(
            StatusCode::OK,
            page.json(r.api_version, r.list_kind, &page.items),
        )),
        Output::Table(v) => {
            let objs: Vec<Value> = page
                .items
                .iter()
                .map(|b| crate::request::parse_object(b))
                .collect::<Result<_, _>>()?;
            let meta: ListMeta = page.list_meta();
            let t = r.table.render(&objs, &meta, &table_options(req, v)?);
            Ok(table_response(StatusCode::OK, &t))
        }
    }
}

/// The [`Target`] of a WATCH of `req`'s objects (one object when the request names one)
/// with the family's checked selectors, rendered in Tables by `table`. A family that
/// converts or defaults event objects, or ends its watches with a CRD, sets those fields on
/// the result.
pub fn watch_target(
    req: &Req,
    r: &Resource<'_>,
    table: TableFn,
    (label_selector, field_selector): (String, String),
) -> Target {
    let [tenant, group, resource] = r.stored;
    Target {
        resource: ResourceRef::new(tenant, group, resource),
        namespace: req.info.namespace.clone(),
        name: req.info.name.clone(),
        api_version: r.api_version.into(),
        kind: r.kind.into(),
        table,
        label_selector,
        field_selector,
        transform: None,
        normalize: None,
        crd: None,
    }
}
