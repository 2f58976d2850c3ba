//! The TokenRequest API (`POST /api/v1/namespaces/<ns>/serviceaccounts/<name>/token`,
//! `kubectl create token <name>`): a signed, expiring, audience-bound token for an existing
//! service account of the request's tenant.
//!
//! Where it sits: the built-in handler (`builtin.rs`) sends the `token` subresource of
//! service accounts here, after the authorization layer allowed `create` on
//! `serviceaccounts/token` (the bootstrap `edit` and `admin` roles grant it). Follows
//! k8s.io/kubernetes pkg/registry/core/serviceaccount/storage/token.go (`Create`: the
//! account must exist, audiences default to the API audiences, the token names the
//! account's uid) and pkg/apis/authentication/validation (`ValidateTokenRequest`: at least
//! 10 minutes, at most 2^32 seconds). Without `--service-account-signing-key-file` the
//! subresource does not exist (404), as upstream without a signing key.
//!
//! `spec.boundObjectRef` as upstream: a Secret of the namespace binds the token to it (the
//! token names the Secret's uid, and the authentication layer refuses it once that Secret
//! is gone or recreated; a `uid` in the reference must be the Secret's, else 409); a Pod
//! or Node reference is that object's 404 (crdplane serves neither, so there is nothing to
//! bind to); any other kind is upstream's 400 `cannot bind token for object of type …`.

use crate::context::{Ctx, Req};
use crate::http::{Body, json_response};
use crdplane_apiserver::rest::Store;
use crdplane_auth::service_account::{DEFAULT_EXPIRATION_SECONDS, MIN_EXPIRATION_SECONDS};
use crdplane_core::field::FieldError;
use crdplane_core::{ApiError, GroupResource};
use http::{Response, StatusCode};
use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestStatus};
use serde_json::Value;

/// Serves one request for `serviceaccounts/<name>/token`.
pub async fn serve(ctx: &Ctx, req: &Req) -> Result<Response<Body>, ApiError> {
    let i = &req.info;
    let Some(signer) = &ctx.cfg.service_account_signer else {
        return Ok(crate::http::page_not_found());
    };
    if i.verb != "create" {
        return Err(ApiError::method_not_supported(
            &GroupResource::new("", "serviceaccounts/token"),
            &i.verb,
        ));
    }
    let body = crate::stores::builtin::protobuf::request_object(req, "TokenRequest")?;
    let mut tr: TokenRequest = serde_json::from_value(body).map_err(|e| {
        ApiError::bad_request(format!(
            "TokenRequest in version \"v1\" cannot be handled as a TokenRequest: {e}"
        ))
    })?;
    let seconds = tr
        .spec
        .expiration_seconds
        .unwrap_or(DEFAULT_EXPIRATION_SECONDS);
    let mut errs = Vec::new();
    if seconds < MIN_EXPIRATION_SECONDS {
        errs.push(FieldError::invalid(
            "spec.expirationSeconds",
            Value::from(seconds),
            "may not specify a duration less than 10 minutes",
        ));
    } else if seconds > 1 << 32 {
        errs.push(FieldError::invalid(
            "spec.expirationSeconds",
            Value::from(seconds),
            "may not specify a duration larger than 2^32 seconds",
        ));
    }
    if !errs.is_empty() {
        return Err(ApiError::invalid(
            "TokenRequest",
            "authentication.k8s.io",
            &i.name,
            &errs,
        ));
    }
    let store = crate::stores::storage::StorageStore {
        storage: &ctx.storage,
        tenant: &i.tenant,
        group: "",
        resource: "serviceaccounts",
        ttl_seconds: 0,
    };
    let sa = store.get(&i.namespace, &i.name).await.map_err(|e| {
        if e.code == 404 {
            ApiError::not_found(&GroupResource::new("", "serviceaccounts"), &i.name)
        } else {
            e
        }
    })?;
    let uid = sa
        .pointer("/metadata/uid")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let bound_secret = match &tr.spec.bound_object_ref {
        None => None,
        Some(r) => Some(bound_secret(ctx, req, r).await?),
    };
    let audiences = if tr.spec.audiences.is_empty() {
        ctx.cfg.api_audiences.clone()
    } else {
        tr.spec.audiences.clone()
    };
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_err(ApiError::internal)?
        .as_secs() as i64;
    let (token, exp) = signer
        .issue_bound(
            &i.tenant,
            &i.namespace,
            &i.name,
            uid,
            &audiences,
            now,
            seconds,
            &uuid::Uuid::new_v4().to_string(),
            bound_secret,
        )
        .map_err(ApiError::internal)?;
    tr.spec.audiences = audiences;
    tr.spec.expiration_seconds = Some(seconds);
    tr.status = Some(TokenRequestStatus {
        token,
        expiration_timestamp: k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
            k8s_openapi::jiff::Timestamp::from_second(exp).map_err(ApiError::internal)?,
        ),
    });
    tr.metadata.name = Some(i.name.clone());
    tr.metadata.namespace = Some(i.namespace.clone());
    let mut v = serde_json::to_value(&tr).map_err(ApiError::internal)?;
    v["apiVersion"] = Value::String("authentication.k8s.io/v1".into());
    v["kind"] = Value::String("TokenRequest".into());
    Ok(json_response(
        StatusCode::CREATED,
        serde_json::to_vec(&v).map_err(ApiError::internal)?,
    ))
}

/// The Secret a `boundObjectRef` names, as the token's claim (see the module docs;
/// upstream: pkg/registry/core/serviceaccount/storage/token.go).
async fn bound_secret(
    ctx: &Ctx,
    req: &Req,
    r: &k8s_openapi::api::authentication::v1::BoundObjectReference,
) -> Result<crdplane_auth::service_account::Ref, ApiError> {
    let api_version = r.api_version.as_deref().unwrap_or_default();
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    let kind = r.kind.as_deref().unwrap_or_default();
    let name = r.name.as_deref().unwrap_or_default();
    let not_found = |resource: &str| ApiError::not_found(&GroupResource::new("", resource), name);
    let uid = match (group, kind) {
        ("", "Pod") => return Err(not_found("pods")),
        ("", "Node") => return Err(not_found("nodes")),
        ("", "Secret") => {
            let ty =
                crdplane_core::builtin::lookup("", "v1", "secrets").expect("secrets are built-in");
            let store = crate::stores::builtin::BuiltinStore::new(
                ctx,
                &req.info.tenant,
                crate::stores::builtin::type_of(ty),
            );
            let s = store.get(&req.info.namespace, name).await?;
            s.pointer("/metadata/uid")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string()
        }
        _ => {
            return Err(ApiError::bad_request(format!(
                "cannot bind token for object of type {group}/{version}, Kind={kind}"
            )));
        }
    };
    if let Some(want) = r.uid.as_deref().filter(|u| !u.is_empty())
        && want != uid
    {
        return Err(ApiError::conflict(
            &GroupResource::new(group, kind),
            name,
            &format!(
                "the UID in the bound object reference ({want}) does not match the UID in record. The object might have been deleted and then recreated"
            ),
        ));
    }
    Ok(crdplane_auth::service_account::Ref {
        name: name.to_string(),
        uid,
    })
}
