//! `apiextensions.k8s.io/v1` CustomResourceDefinition endpoints of a tenant: the gateway
//! decodes, applies patches and renders; the registry service validates, names, sets
//! conditions and persists. CRD writes made through this gateway drop its own cache entries
//! at once (other gateways follow the storage change stream). DELETE returns the CRD marked
//! for deletion; the registry's finalizer controller deletes its instances and then the CRD.

use crate::context::{Ctx, Req};
use crate::http::{Body, Output, json_response, negotiate_output};
use crate::request::{decode_body, strict_warnings};
use crate::respond::with_warnings;
use crate::retry::{Failure, guaranteed_update, write_failed};
use crate::table::{IncludeObject, ListMeta};
use crate::watch::{self, TableFn};
use crdplane_core::{ApiError, GroupResource};
use crdplane_proto::GrpcStatusExt;
use crdplane_proto::v1 as pb;
use http::{Response, StatusCode};
use serde_json::{Value, json};
use std::sync::Arc;

fn gr() -> GroupResource {
    GroupResource::new("apiextensions.k8s.io", "customresourcedefinitions")
}

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

/// CRDs select by `metadata.name` only.
fn selectors(req: &Req) -> Result<(String, String), ApiError> {
    crate::list::checked_selectors(req, |f| f == "metadata.name")
}

fn crd_name(v: &Value) -> String {
    v.pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string()
}

/// Serves one CustomResourceDefinition request of the tenant.
pub async fn serve(ctx: &Ctx, req: &Req) -> Result<Response<Body>, ApiError> {
    let i = &req.info;
    let tenant = i.tenant.clone();
    let dry = req.dry_run()?;
    let mut reg = ctx.registry.clone();
    let status = match i.subresource.as_str() {
        "" => false,
        "status" => true,
        _ => return Err(ApiError::path_not_found()),
    };
    if !i.namespace.is_empty() {
        return Err(ApiError::path_not_found());
    }
    match i.verb.as_str() {
        "create" if !status => {
            // JSON or YAML in; the registry takes JSON.
            let body = serde_json::to_vec(&decode_body(req)?).map_err(ApiError::internal)?;
            let warnings = strict_warnings(req, "CustomResourceDefinition", "v1")?;
            let r = reg
                .create_crd(pb::CrdWriteRequest {
                    tenant: tenant.clone(),
                    crd_json: body.into(),
                    dry_run: dry,
                    name: String::new(),
                })
                .await
                .map_err(crdplane_proto::status::from_grpc)?
                .into_inner();
            let v: Value = serde_json::from_slice(&r.json).map_err(ApiError::internal)?;
            ctx.crds.invalidate(&tenant, &crd_name(&v));
            Ok(with_warnings(
                json_response(StatusCode::CREATED, r.json),
                &warnings,
            ))
        }
        "get" => {
            let r = reg
                .get_crd(pb::CrdGetRequest {
                    tenant,
                    name: i.name.clone(),
                })
                .await
                .map_err(crdplane_proto::status::from_grpc)?
                .into_inner();
            one(req, StatusCode::OK, r.json)
        }
        "list" => {
            let (label, field) = selectors(req)?;
            // Tokens and list options as for every list; the registry serves the current
            // state (no resourceVersion constraints on CRD lists).
            let key = crate::strategy::continue_key(&ctx.storage).await?;
            let scope = crate::strategy::token_scope(
                &tenant,
                "apiextensions.k8s.io",
                "customresourcedefinitions",
                "",
            );
            let opts = crate::strategy::list_options(|k| req.query.get(k), &key, &scope)?;
            let r = reg
                .list_crds(pb::CrdListRequest {
                    tenant,
                    limit: opts.limit,
                    start_after: opts.start_after.clone(),
                    name: String::new(),
                    label_selector: label,
                    field_selector: field,
                })
                .await
                .map_err(crdplane_proto::status::from_grpc)?
                .into_inner();
            let rv = match opts.rv {
                crate::strategy::ListRv::Exact(n) if opts.continuing => n,
                _ => r.resource_version,
            };
            let cont = if r.next_start_after.is_empty() {
                String::new()
            } else {
                crate::strategy::encode_continue(&key, &scope, &r.next_start_after, rv as i64)
            };
            let remaining = r.has_remaining_item_count.then_some(r.remaining_item_count);
            match negotiate_output(req.header("accept"))? {
                Output::Json => Ok(json_response(
                    StatusCode::OK,
                    crate::strategy::list_json(
                        "apiextensions.k8s.io/v1",
                        "CustomResourceDefinitionList",
                        &r.items,
                        rv,
                        &cont,
                        remaining,
                    ),
                )),
                Output::Table(_) => {
                    let objs: Vec<Value> = r
                        .items
                        .iter()
                        .map(|b| serde_json::from_slice(b).map_err(ApiError::internal))
                        .collect::<Result<_, _>>()?;
                    let mut t = crd_table(&objs, true, include(req));
                    let meta = ListMeta {
                        resource_version: rv.to_string(),
                        continue_token: cont,
                        remaining_item_count: remaining.map(|r| r as i64),
                    };
                    t["metadata"] = serde_json::to_value(meta_json(&meta)).expect("json");
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
                resource: pb::ResourceRef {
                    tenant,
                    group: "apiextensions.k8s.io".into(),
                    resource: "customresourcedefinitions".into(),
                },
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
            let body = serde_json::to_vec(&decode_body(req)?).map_err(ApiError::internal)?;
            let warnings = strict_warnings(req, "CustomResourceDefinition", "v1")?;
            let w = pb::CrdWriteRequest {
                tenant: tenant.clone(),
                crd_json: body.into(),
                dry_run: dry,
                name: i.name.clone(),
            };
            let r = if status {
                reg.update_crd_status(w).await
            } else {
                reg.update_crd(w).await
            }
            .map_err(crdplane_proto::status::from_grpc)?
            .into_inner();
            ctx.crds.invalidate(&tenant, &i.name);
            Ok(with_warnings(
                json_response(StatusCode::OK, r.json),
                &warnings,
            ))
        }
        "patch" => {
            crate::request::record_patch_findings(req);
            let warnings = strict_warnings(req, "CustomResourceDefinition", "v1")?;
            let (tenant, reg) = (&tenant, &reg);
            // patch.go inside GuaranteedUpdate: the registry's compare-and-swap on the
            // resourceVersion read here loses when another write landed in between; read
            // again and re-apply (a resourceVersion the patch sets fails on the re-read).
            let json = guaranteed_update(|| async move {
                let cur = reg
                    .clone()
                    .get_crd(pb::CrdGetRequest {
                        tenant: tenant.clone(),
                        name: i.name.clone(),
                    })
                    .await
                    .map_err(crdplane_proto::status::from_grpc)?
                    .into_inner();
                let old: Value = serde_json::from_slice(&cur.json).map_err(ApiError::internal)?;
                // Built-in type: strategic merge patch accepted (crate::strategic).
                let mut new = crate::request::patch_builtin(
                    req,
                    &old,
                    crate::strategic::CUSTOM_RESOURCE_DEFINITION,
                )?;
                let old_rv = old.pointer("/metadata/resourceVersion").cloned();
                let precondition = new.pointer("/metadata/resourceVersion").cloned();
                if precondition != old_rv {
                    return Err(Failure::Final(ApiError::stale(&gr(), &i.name)));
                }
                if !new.is_object() {
                    return Err(Failure::Final(ApiError::bad_request(
                        "the patched object is not a JSON object",
                    )));
                }
                new["metadata"]["resourceVersion"] = old_rv.unwrap_or(Value::Null);
                let body = serde_json::to_vec(&new).expect("json");
                let w = pb::CrdWriteRequest {
                    tenant: tenant.clone(),
                    crd_json: body.into(),
                    dry_run: dry,
                    name: i.name.clone(),
                };
                let mut reg = reg.clone();
                let r = if status {
                    reg.update_crd_status(w).await
                } else {
                    reg.update_crd(w).await
                };
                ctx.crds.invalidate(tenant, &i.name);
                r.map(|r| r.into_inner().json)
                    .map_err(|s| write_failed(ApiError::from_grpc(&s)))
            })
            .await?;
            Ok(with_warnings(
                json_response(StatusCode::OK, json),
                &warnings,
            ))
        }
        "delete" if !status => {
            let (want_rv, want_uid) = crate::request::delete_options(&req.body)?;
            if !want_uid.is_empty() {
                // etcd.go REST.Delete: the UID precondition is checked first.
                let cur = reg
                    .get_crd(pb::CrdGetRequest {
                        tenant: tenant.clone(),
                        name: i.name.clone(),
                    })
                    .await
                    .map_err(crdplane_proto::status::from_grpc)?
                    .into_inner();
                let v: Value = serde_json::from_slice(&cur.json).map_err(ApiError::internal)?;
                let uid = v
                    .pointer("/metadata/uid")
                    .and_then(Value::as_str)
                    .unwrap_or("");
                if uid != want_uid {
                    return Err(ApiError::conflict(
                        &gr(),
                        &i.name,
                        &format!(
                            "Precondition failed: UID in precondition: {want_uid}, UID in object meta: {uid}"
                        ),
                    ));
                }
            }
            // The first DELETE marks the CRD (deletionTimestamp, cleanup finalizer,
            // Terminating) and returns it with 200; the registry removes the instances and
            // then the CRD in the background.
            let r = reg
                .delete_crd(pb::CrdDeleteRequest {
                    tenant: tenant.clone(),
                    name: i.name.clone(),
                    expected_resource_version: want_rv,
                    dry_run: dry,
                })
                .await;
            ctx.crds.invalidate(&tenant, &i.name);
            Ok(json_response(
                StatusCode::OK,
                r.map_err(crdplane_proto::status::from_grpc)?
                    .into_inner()
                    .json,
            ))
        }
        "deletecollection" if !status => {
            let (label, field) = selectors(req)?;
            let r = reg
                .list_crds(pb::CrdListRequest {
                    tenant: tenant.clone(),
                    label_selector: label,
                    field_selector: field,
                    ..Default::default()
                })
                .await
                .map_err(crdplane_proto::status::from_grpc)?
                .into_inner();
            let mut deleted = Vec::new();
            for item in r.items {
                let v: Value = serde_json::from_slice(&item).map_err(ApiError::internal)?;
                let name = crd_name(&v);
                match reg
                    .delete_crd(pb::CrdDeleteRequest {
                        tenant: tenant.clone(),
                        name: name.clone(),
                        expected_resource_version: 0,
                        dry_run: dry,
                    })
                    .await
                {
                    Ok(d) => deleted.push(d.into_inner().json),
                    Err(s) if s.code() == tonic::Code::NotFound => {}
                    Err(s) => return Err(ApiError::from_grpc(&s)),
                }
                ctx.crds.invalidate(&tenant, &name);
            }
            Ok(json_response(
                StatusCode::OK,
                crate::strategy::list_json(
                    "apiextensions.k8s.io/v1",
                    "CustomResourceDefinitionList",
                    &deleted,
                    r.resource_version,
                    "",
                    None,
                ),
            ))
        }
        _ => Err(ApiError::method_not_supported(&gr(), &i.verb)),
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
