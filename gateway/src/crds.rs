//! `apiextensions.k8s.io/v1` CustomResourceDefinition endpoints of a tenant: routing and
//! rendering only. get, create, update, patch (json, merge and strategic merge patch),
//! delete and deletecollection of the main resource, and get / update / patch of `/status`,
//! run on the generic handlers of `crdplane_apiserver::handlers` over the registry service
//! ([`crate::stores::crds`]: the CRD store and strategy, and which side does what); the
//! registry validates, names, sets conditions and persists. DELETE returns the CRD marked
//! for deletion; the registry's finalizer controller deletes its instances and then the CRD.
//!
//! list and watch stay here on the shared paths (the registry's paged list with the
//! gateway's signed continue tokens, the shared watch streams of [`crate::watch`]); this
//! module also renders the CRD Table.
//!
//! Follows k8s.io/apiserver pkg/endpoints/handlers (verbs) and apiextensions-apiserver
//! pkg/registry/customresourcedefinition (strategy.go, etcd.go).

use crate::context::{Ctx, Req};
use crate::http::{Body, Output, json_response, negotiate_output};
use crate::request::{decode_body, request_delete_options, strict_warnings, write_dry_run};
use crate::stores::crds::{CrdStore, CrdStrategy};
use crate::stores::typed::unknown_fields;
use crate::table::{IncludeObject, ListMeta};
use crate::watch::{self, TableFn};
use crdplane_apiserver::admission::Chain;
use crdplane_apiserver::handlers::{self, Written};
use crdplane_apiserver::rest::ListOptions;
use crdplane_core::{ApiError, ResourceRef};
use http::{Response, StatusCode};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use serde_json::{Value, json};
use std::sync::Arc;

/// The default table of upstream (`rest.NewDefaultTableConvertor`): Name and Created At
/// (RFC 3339), as `kubectl get crd` shows.
pub fn crd_table(objs: &[Value], with_columns: bool, include: IncludeObject) -> Value {
    let rows: Vec<Value> = objs
        .iter()
        .map(|o| {
            let name = o.pointer("/metadata/name").cloned().unwrap_or(Value::Null);
            let created = o.pointer("/metadata/creationTimestamp").cloned().unwrap_or(Value::Null);
            let mut row = json!({"cells": [name, created]});
            match include {
                IncludeObject::None => {}
                IncludeObject::Object => row["object"] = o.clone(),
                IncludeObject::Metadata => {
                    row["object"] = json!({"kind":"PartialObjectMetadata","apiVersion":"meta.k8s.io/v1","metadata": o.get("metadata").cloned().unwrap_or(json!({}))})
                }
            }
            row
        })
        .collect();
    let mut t = json!({"kind":"Table","apiVersion":"meta.k8s.io/v1","metadata":{},"columnDefinitions": null,"rows": rows});
    if with_columns {
        t["columnDefinitions"] = json!([
            {"name":"Name","type":"string","format":"name","description":"Name must be unique within a namespace. Is required when creating resources, although some resources may allow a client to request the generation of an appropriate name automatically. Name is primarily intended for creation idempotence and configuration definition. Cannot be updated. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names","priority":0},
            {"name":"Created At","type":"date","format":"","description":"CreationTimestamp is a timestamp representing the server time when this object was created. It is not guaranteed to be set in happens-before order across separate operations. Clients may not set this value. It is represented in RFC3339 form and is in UTC.\n\nPopulated by the system. Read-only. Null for lists. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata","priority":0}
        ]);
    }
    t
}

fn include(req: &Req) -> IncludeObject {
    crate::request::include_object(req).unwrap_or(IncludeObject::Metadata)
}

fn one(req: &Req, code: StatusCode, json: bytes::Bytes) -> Result<Response<Body>, ApiError> {
    match negotiate_output(req.header("accept"))? {
        Output::Json => Ok(json_response(code, json)),
        Output::Table(_) => {
            let o: Value = serde_json::from_slice(&json).map_err(ApiError::internal)?;
            Ok(json_response(
                code,
                serde_json::to_vec(&crd_table(&[o], true, include(req))).expect("json"),
            ))
        }
    }
}

/// A write's answer: its code and the object (or Status) as JSON, with the request's
/// warnings and the handler's.
fn written(w: Written, extra: &[String]) -> Result<Response<Body>, ApiError> {
    Ok(crate::respond::written(w, extra))
}

/// CRDs select by `metadata.name` only.
fn selectors(req: &Req) -> Result<(String, String), ApiError> {
    crate::list::checked_selectors(req, |f| f == "metadata.name")
}

/// Serves one CustomResourceDefinition request of the tenant.
pub async fn serve(ctx: &Ctx, req: &Req) -> Result<Response<Body>, ApiError> {
    let i = &req.info;
    let tenant = i.tenant.clone();
    let status = match i.subresource.as_str() {
        "" => false,
        "status" => true,
        _ => return Err(ApiError::path_not_found()),
    };
    if !i.namespace.is_empty() {
        return Err(ApiError::path_not_found());
    }
    let dry = match i.verb.as_str() {
        "create" | "update" | "patch" => write_dry_run(req)?,
        _ => false,
    };
    let store = CrdStore {
        registry: ctx.registry.clone(),
        cache: &ctx.crds,
        tenant: &tenant,
        status,
    };
    let strategy = CrdStrategy { status };
    let admission = Chain::none();
    match i.verb.as_str() {
        "create" if !status => {
            // JSON or YAML in; the registry takes JSON.
            let obj = decode_body(req)?;
            let warnings = strict_warnings(req, "CustomResourceDefinition", "v1", || {
                unknown_fields::<CustomResourceDefinition>(&obj)
            })?;
            let w = handlers::create(&store, &strategy, &admission, "", obj, dry).await?;
            written(w, &warnings)
        }
        "get" => {
            let o = handlers::get(&store, "", &i.name).await?;
            one(
                req,
                StatusCode::OK,
                serde_json::to_vec(&o).expect("json").into(),
            )
        }
        "list" => {
            let (label, field) = selectors(req)?;
            // Tokens and list options as for every list; the registry serves the current
            // state (no resourceVersion constraints on CRD lists).
            let scope = [
                tenant.as_str(),
                "apiextensions.k8s.io",
                "customresourcedefinitions",
            ];
            let page = crate::list::page(ctx, req, &store, scope, "", label, field).await?;
            match negotiate_output(req.header("accept"))? {
                Output::Json => Ok(json_response(
                    StatusCode::OK,
                    page.json(
                        "apiextensions.k8s.io/v1",
                        "CustomResourceDefinitionList",
                        &page.items,
                    ),
                )),
                Output::Table(_) => {
                    let objs: Vec<Value> = page
                        .items
                        .iter()
                        .map(|b| crate::request::parse_object(b))
                        .collect::<Result<_, _>>()?;
                    let mut t = crd_table(&objs, true, include(req));
                    t["metadata"] =
                        serde_json::to_value(meta_json(&page.list_meta())).expect("json");
                    Ok(json_response(
                        StatusCode::OK,
                        serde_json::to_vec(&t).expect("json"),
                    ))
                }
            }
        }
        "watch" => {
            let (label, field) = selectors(req)?;
            let table: TableFn = Arc::new(crd_table);
            let t = watch::Target {
                resource: ResourceRef::new(
                    tenant,
                    "apiextensions.k8s.io",
                    "customresourcedefinitions",
                ),
                namespace: String::new(),
                name: i.name.clone(),
                api_version: "apiextensions.k8s.io/v1".into(),
                kind: "CustomResourceDefinition".into(),
                table,
                label_selector: label,
                field_selector: field,
                transform: None,
                normalize: None,
                crd: None,
            };
            watch::serve(ctx, req, t).await
        }
        "update" => {
            let obj = decode_body(req)?;
            let warnings = strict_warnings(req, "CustomResourceDefinition", "v1", || {
                unknown_fields::<CustomResourceDefinition>(&obj)
            })?;
            let w = handlers::update(
                &store,
                &strategy,
                &admission,
                &i.subresource,
                "",
                &i.name,
                obj,
                dry,
            )
            .await?;
            written(w, &warnings)
        }
        "patch" => {
            crate::request::record_patch_findings(req);
            let warnings = strict_warnings(req, "CustomResourceDefinition", "v1", Vec::new)?;
            let mime = crate::request::patch_media_type(req);
            let w = handlers::patch(
                &store,
                &strategy,
                &admission,
                &i.subresource,
                "",
                &i.name,
                &crate::request::patch_request(req, &mime)?,
            )
            .await?;
            written(w, &warnings)
        }
        "delete" if !status => {
            // The first DELETE marks the CRD (deletionTimestamp, cleanup finalizer,
            // Terminating) and returns it; the registry removes the instances and then the
            // CRD in the background (crate::stores::crds).
            let o = request_delete_options(req)?;
            let w = handlers::delete(&store, &strategy, &admission, "", &i.name, &o).await?;
            written(w, &[])
        }
        "deletecollection" if !status => {
            let (label_selector, field_selector) = selectors(req)?;
            let o = request_delete_options(req)?;
            let opts = ListOptions {
                label_selector,
                field_selector,
                limit: crate::request::parse_limit(req)?,
                ..Default::default()
            };
            let all =
                handlers::delete_collection(&store, &strategy, &admission, "", &opts, &o).await?;
            Ok(crate::respond::deleted_collection(
                "apiextensions.k8s.io/v1",
                "CustomResourceDefinitionList",
                &all,
            ))
        }
        _ => Err(ApiError::method_not_supported(
            crate::stores::crds::gr(),
            &i.verb,
        )),
    }
}

fn meta_json(m: &ListMeta) -> Value {
    let mut v = json!({"resourceVersion": m.resource_version});
    if !m.continue_token.is_empty() {
        v["continue"] = json!(m.continue_token);
        if let Some(r) = m.remaining_item_count {
            v["remainingItemCount"] = json!(r);
        }
    }
    v
}
