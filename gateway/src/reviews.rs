//! `authentication.k8s.io/v1` SelfSubjectReview (`kubectl auth whoami`): a cluster-scoped,
//! create-only resource that stores nothing; the answer to a create is the request's own
//! authenticated user, as the authentication layer (`filters/authentication.rs`) decided it.
//!
//! Where it sits: a resource handler beside the built-in types; the router sends
//! `/apis/authentication.k8s.io/v1/selfsubjectreviews` here. Follows k8s.io/kubernetes
//! pkg/registry/authentication/selfsubjectreview/rest.go (`Create`: the user's name, uid,
//! groups and extra; `creationTimestamp` now; 201) and the create handler's body checks
//! (k8s.io/apiserver pkg/endpoints/handlers/create.go: the data's apiVersion must be the
//! endpoint's). Discovery lists it from `crdplane_core::builtin::REVIEWS`.

use crate::context::Req;
use crate::http::{Body, json_response};
use crdplane_core::{ApiError, GroupResource};
use http::{Response, StatusCode};
use k8s_openapi::api::authentication::v1::{SelfSubjectReview, SelfSubjectReviewStatus, UserInfo};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};

/// The group of the review APIs served here.
pub const GROUP: &str = "authentication.k8s.io";

fn gr() -> GroupResource {
    GroupResource {
        group: GROUP.into(),
        resource: "selfsubjectreviews".into(),
    }
}

/// The current time in whole seconds (metav1.Time's precision on the wire).
fn now() -> Option<Time> {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .ok()?
        .as_secs();
    k8s_openapi::jiff::Timestamp::from_second(i64::try_from(secs).ok()?)
        .ok()
        .map(Time)
}

/// Serves one request for `selfsubjectreviews` in `version` (`v1`, or `v1beta1` for
/// kubectl 1.27; the same object either way).
pub fn serve_self_subject_review(req: &Req, version: &str) -> Result<Response<Body>, ApiError> {
    let api_version = format!("{GROUP}/{version}");
    let i = &req.info;
    if !i.subresource.is_empty() || !i.namespace.is_empty() {
        return Ok(crate::http::page_not_found());
    }
    if i.verb != "create" || !i.name.is_empty() {
        return Err(ApiError::method_not_supported(&gr(), &i.verb));
    }
    // dryRun is accepted and changes nothing: nothing is stored either way.
    req.dry_run()?;
    // kubectl's typed client sends protobuf.
    let body = crate::stores::builtin::protobuf::request_object(req, "SelfSubjectReview")?;
    if let Some(v) = body.get("apiVersion").and_then(|v| v.as_str())
        && v != api_version
    {
        return Err(ApiError::bad_request(format!(
            "the API version in the data ({v}) does not match the expected API version ({api_version})"
        )));
    }
    if let Some(k) = body.get("kind").and_then(|k| k.as_str())
        && k != "SelfSubjectReview"
    {
        return Err(ApiError::bad_request(format!(
            "not a SelfSubjectReview: the data is a {}",
            crdplane_core::field::go_quote(k)
        )));
    }
    let Some(user) = req.user.as_deref() else {
        return Err(ApiError::bad_request("no user present on request"));
    };
    let review = SelfSubjectReview {
        metadata: ObjectMeta {
            creation_timestamp: now(),
            ..Default::default()
        },
        status: Some(SelfSubjectReviewStatus {
            user_info: Some(UserInfo {
                username: Some(user.name.clone()).filter(|s| !s.is_empty()),
                uid: Some(user.uid.clone()).filter(|s| !s.is_empty()),
                groups: Some(user.groups.clone()).filter(|g| !g.is_empty()),
                extra: Some(user.extra.clone()).filter(|e| !e.is_empty()),
            }),
        }),
    };
    let mut v = serde_json::to_value(&review).map_err(|e| ApiError::internal(e.to_string()))?;
    // k8s-openapi writes v1's apiVersion; v1beta1 is the same object under its own.
    v["apiVersion"] = serde_json::Value::String(api_version);
    let bytes = serde_json::to_vec(&v).map_err(|e| ApiError::internal(e.to_string()))?;
    Ok(json_response(StatusCode::CREATED, bytes))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::Query;
    use bytes::Bytes;
    use crdplane_auth::user::UserInfo;
    use http_body_util::BodyExt;
    use std::sync::Arc;

    fn req(verb: &str, body: &str, user: Option<UserInfo>) -> Req {
        Req {
            info: crate::request_info::RequestInfo {
                verb: verb.into(),
                api_group: GROUP.into(),
                api_version: "v1".into(),
                resource: "selfsubjectreviews".into(),
                is_resource_request: true,
                ..Default::default()
            },
            method: http::Method::POST,
            query: Query::parse(None),
            headers: Default::default(),
            body: Bytes::from(body.to_string()),
            body_dups: Default::default(),
            user: user.map(Arc::new),
        }
    }

    async fn json(r: Response<Body>) -> (StatusCode, serde_json::Value) {
        let (p, b) = r.into_parts();
        let b = b.collect().await.unwrap().to_bytes();
        (p.status, serde_json::from_slice(&b).unwrap())
    }

    #[tokio::test]
    async fn answers_with_the_requests_user() {
        let jane = UserInfo {
            name: "jane".into(),
            uid: "1001".into(),
            groups: vec!["dev".into(), "system:authenticated".into()],
            ..Default::default()
        };
        for version in ["v1", "v1beta1"] {
            let r = serve_self_subject_review(
                &req(
                    "create",
                    r#"{"kind":"SelfSubjectReview"}"#,
                    Some(jane.clone()),
                ),
                version,
            )
            .unwrap();
            let (code, v) = json(r).await;
            assert_eq!(code, StatusCode::CREATED);
            assert_eq!(v["apiVersion"], format!("authentication.k8s.io/{version}"));
            assert_eq!(v["kind"], "SelfSubjectReview");
            assert_eq!(
                v["status"],
                serde_json::json!({"userInfo": {"username": "jane", "uid": "1001",
                    "groups": ["dev", "system:authenticated"]}})
            );
            let ts = v["metadata"]["creationTimestamp"].as_str().unwrap();
            assert!(ts.ends_with('Z') && ts.len() == 20, "{ts}");
        }
    }

    #[test]
    fn refusals() {
        let anyone = Some(UserInfo::anonymous());
        let cases: &[(&str, &str, Option<UserInfo>, u16, &str)] = &[
            ("list", "", anyone.clone(), 405, "list is not supported"),
            (
                "create",
                r#"{"apiVersion":"v1","kind":"SelfSubjectReview"}"#,
                anyone.clone(),
                400,
                "the API version in the data (v1) does not match the expected API version (authentication.k8s.io/v1)",
            ),
            (
                "create",
                r#"{"kind":"Pod"}"#,
                anyone.clone(),
                400,
                "not a SelfSubjectReview",
            ),
            ("create", "[]", anyone, 400, "not a JSON object"),
            ("create", "{}", None, 400, "no user present on request"),
        ];
        for (verb, body, user, code, text) in cases {
            let e = serve_self_subject_review(&req(verb, body, user.clone()), "v1").unwrap_err();
            assert_eq!(e.code, *code, "{verb} {body}");
            assert!(e.message.contains(text), "{verb} {body}: {}", e.message);
        }
    }
}
