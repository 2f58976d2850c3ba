//! `authorization.k8s.io/v1` access reviews: SelfSubjectAccessReview (`kubectl auth
//! can-i`), SelfSubjectRulesReview (`kubectl auth can-i --list`), SubjectAccessReview and
//! LocalSubjectAccessReview (another user's access; `kubectl auth can-i --as` asks with
//! impersonation instead). Create-only resources that store nothing: the answer is the
//! gateway authorizer's ([`crate::authz`]) decision for the attributes in the spec, in the
//! request's tenant.
//!
//! Where it sits: a resource handler beside the built-in types; the router sends
//! `/apis/authorization.k8s.io/v1/…` here after the authorization layer allowed the
//! create (the bootstrap role `system:basic-user` grants the self reviews to every
//! authenticated user; the others need a grant, `admin` has LocalSubjectAccessReview).
//! Follows k8s.io/kubernetes pkg/registry/authorization/{selfsubjectaccessreview,
//! selfsubjectrulesreview,subjectaccessreview,localsubjectaccessreview}/rest.go,
//! pkg/registry/authorization/util (`ResourceAttributesFrom`, `NonResourceAttributesFrom`)
//! and the validation of pkg/apis/authorization/validation.

use crate::context::{Ctx, Req};
use crate::http::{Body, json_response};
use crdplane_auth::rbac::{Attributes, Rule};
use crdplane_auth::user::UserInfo;
use crdplane_core::field::FieldError;
use crdplane_core::{ApiError, GroupResource};
use http::{Response, StatusCode};
use k8s_openapi::api::authorization::v1 as authz;
use serde_json::Value;

/// The API group of the access reviews.
pub const GROUP: &str = "authorization.k8s.io";

/// Which review a request creates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    SelfAccess,
    SelfRules,
    Access,
    LocalAccess,
}

impl Kind {
    fn of(resource: &str) -> Option<Kind> {
        Some(match resource {
            "selfsubjectaccessreviews" => Kind::SelfAccess,
            "selfsubjectrulesreviews" => Kind::SelfRules,
            "subjectaccessreviews" => Kind::Access,
            "localsubjectaccessreviews" => Kind::LocalAccess,
            _ => return None,
        })
    }
    fn name(self) -> &'static str {
        match self {
            Kind::SelfAccess => "SelfSubjectAccessReview",
            Kind::SelfRules => "SelfSubjectRulesReview",
            Kind::Access => "SubjectAccessReview",
            Kind::LocalAccess => "LocalSubjectAccessReview",
        }
    }
    fn namespaced(self) -> bool {
        self == Kind::LocalAccess
    }
}

/// Whether the router should send `resource` of `authorization.k8s.io/v1` here.
pub fn serves(resource: &str) -> bool {
    Kind::of(resource).is_some()
}

/// Serves one request for an access review resource.
pub async fn serve(ctx: &Ctx, req: &Req) -> Result<Response<Body>, ApiError> {
    let i = &req.info;
    let kind = Kind::of(&i.resource).ok_or_else(ApiError::path_not_found)?;
    if !i.subresource.is_empty() || kind.namespaced() == i.namespace.is_empty() {
        return Ok(crate::http::page_not_found());
    }
    let gr = GroupResource::new(GROUP, i.resource.clone());
    if i.verb != "create" || !i.name.is_empty() {
        return Err(ApiError::method_not_supported(&gr, &i.verb));
    }
    req.dry_run()?;
    let body = crate::stores::builtin::protobuf::request_object(req, kind.name())?;
    let api_version = format!("{GROUP}/v1");
    if let Some(v) = body.get("apiVersion").and_then(Value::as_str)
        && v != api_version
    {
        return Err(ApiError::bad_request(format!(
            "the API version in the data ({v}) does not match the expected API version ({api_version})"
        )));
    }
    let Some(user) = req.user.as_deref() else {
        return Err(ApiError::bad_request("no user present on request"));
    };
    let decode_err = |e: serde_json::Error| {
        ApiError::bad_request(format!(
            "{k} in version \"v1\" cannot be handled as a {k}: {e}",
            k = kind.name()
        ))
    };
    let tenant = &i.tenant;
    let answer = match kind {
        Kind::SelfRules => {
            let mut r: authz::SelfSubjectRulesReview =
                serde_json::from_value(body).map_err(decode_err)?;
            let ns = r.spec.namespace.clone().unwrap_or_default();
            if ns.is_empty() {
                return Err(ApiError::bad_request("no namespace on request"));
            }
            let (rules, errs) = crate::policy::rules(ctx, user, tenant, &ns).await?;
            r.status = Some(rules_status(&rules, &errs));
            r.metadata = Default::default();
            serde_json::to_value(r)
        }
        Kind::SelfAccess => {
            let mut r: authz::SelfSubjectAccessReview =
                serde_json::from_value(body).map_err(decode_err)?;
            let s = &r.spec;
            let errs = attribute_errors(&s.resource_attributes, &s.non_resource_attributes);
            invalid(kind, &errs)?;
            let status = access(
                ctx,
                user,
                tenant,
                &s.resource_attributes,
                &s.non_resource_attributes,
            )
            .await?;
            r.status = Some(status);
            serde_json::to_value(r)
        }
        Kind::Access | Kind::LocalAccess => {
            let mut r: authz::SubjectAccessReview =
                serde_json::from_value(body).map_err(decode_err)?;
            let s = &r.spec;
            let mut errs = attribute_errors(&s.resource_attributes, &s.non_resource_attributes);
            if s.user.as_deref().unwrap_or("").is_empty()
                && s.groups.as_deref().unwrap_or_default().is_empty()
            {
                errs.push(FieldError::invalid(
                    "spec.user",
                    Value::String(s.user.clone().unwrap_or_default()),
                    "at least one of user or group must be specified",
                ));
            }
            let meta_ns = r.metadata.namespace.clone().unwrap_or_default();
            if kind == Kind::LocalAccess {
                if let Some(ra) = &s.resource_attributes
                    && ra.namespace.as_deref().unwrap_or("") != meta_ns
                {
                    errs.push(FieldError::invalid(
                        "spec.resourceAttributes.namespace",
                        Value::String(ra.namespace.clone().unwrap_or_default()),
                        "must match metadata.namespace",
                    ));
                }
                if s.non_resource_attributes.is_some() {
                    errs.push(FieldError::invalid(
                        "spec.nonResourceAttributes",
                        serde_json::to_value(&s.non_resource_attributes).unwrap_or_default(),
                        "disallowed on this kind of request",
                    ));
                }
            }
            invalid(kind, &errs)?;
            if kind == Kind::LocalAccess && meta_ns != i.namespace {
                return Err(ApiError::bad_request(format!(
                    "spec.resourceAttributes.namespace must match namespace: {}",
                    i.namespace
                )));
            }
            let subject = UserInfo {
                name: s.user.clone().unwrap_or_default(),
                uid: s.uid.clone().unwrap_or_default(),
                groups: s.groups.clone().unwrap_or_default(),
                extra: s.extra.clone().unwrap_or_default().into_iter().collect(),
            };
            let status = access(
                ctx,
                &subject,
                tenant,
                &s.resource_attributes,
                &s.non_resource_attributes,
            )
            .await?;
            r.status = Some(status);
            let mut v = serde_json::to_value(r);
            if let Ok(v) = &mut v {
                v["kind"] = Value::String(kind.name().into());
            }
            v
        }
    };
    let mut v = answer.map_err(|e| ApiError::internal(e.to_string()))?;
    v["apiVersion"] = Value::String(api_version);
    let bytes = serde_json::to_vec(&v).map_err(|e| ApiError::internal(e.to_string()))?;
    Ok(json_response(StatusCode::CREATED, bytes))
}

/// A 422 naming the review's kind, if there are errors.
fn invalid(kind: Kind, errs: &[FieldError]) -> Result<(), ApiError> {
    if errs.is_empty() {
        return Ok(());
    }
    Err(ApiError::invalid(kind.name(), GROUP, "", errs))
}

/// `ValidateSelfSubjectAccessReviewSpec`'s one-of rule.
fn attribute_errors(
    r: &Option<authz::ResourceAttributes>,
    n: &Option<authz::NonResourceAttributes>,
) -> Vec<FieldError> {
    match (r, n) {
        (Some(_), Some(n)) => vec![FieldError::invalid(
            "spec.nonResourceAttributes",
            serde_json::to_value(n).unwrap_or_default(),
            "cannot be specified in combination with resourceAttributes",
        )],
        // Upstream passes the nil pointer, which field errors print as "null".
        (None, None) => vec![FieldError::invalid(
            "spec.resourceAttributes",
            Value::String("null".into()),
            "exactly one of nonResourceAttributes or resourceAttributes must be specified",
        )],
        _ => Vec::new(),
    }
}

/// The decision for the attributes of a review (`ResourceAttributesFrom`,
/// `NonResourceAttributesFrom`).
async fn access(
    ctx: &Ctx,
    user: &UserInfo,
    tenant: &str,
    r: &Option<authz::ResourceAttributes>,
    n: &Option<authz::NonResourceAttributes>,
) -> Result<authz::SubjectAccessReviewStatus, ApiError> {
    let s = |v: &Option<String>| v.clone().unwrap_or_default();
    let (verb, ns, group, version, resource, sub, name, path);
    let a = if let Some(r) = r {
        (verb, ns, group, version, resource, sub, name) = (
            s(&r.verb),
            s(&r.namespace),
            s(&r.group),
            s(&r.version),
            s(&r.resource),
            s(&r.subresource),
            s(&r.name),
        );
        Attributes {
            verb: &verb,
            resource_request: true,
            namespace: &ns,
            api_group: &group,
            api_version: &version,
            resource: &resource,
            subresource: &sub,
            name: &name,
            path: "",
        }
    } else {
        let n = n.clone().unwrap_or_default();
        (verb, path) = (s(&n.verb), s(&n.path));
        Attributes {
            verb: &verb,
            path: &path,
            ..Default::default()
        }
    };
    let (allowed, reason) = crate::policy::review(ctx, user, tenant, &a).await?;
    Ok(authz::SubjectAccessReviewStatus {
        allowed,
        denied: None,
        reason: Some(reason).filter(|r| !r.is_empty()),
        evaluation_error: None,
    })
}

/// `SubjectRulesReviewStatus` of the rules a user holds: resource rules and non-resource
/// rules apart (a rule with both kinds of entries counts as each), resolution errors as
/// the evaluation error.
fn rules_status(rules: &[Rule], errs: &[String]) -> authz::SubjectRulesReviewStatus {
    let o = |v: &Vec<String>| (!v.is_empty()).then(|| v.clone());
    authz::SubjectRulesReviewStatus {
        resource_rules: rules
            .iter()
            .filter(|r| !r.resources.is_empty())
            .map(|r| authz::ResourceRule {
                verbs: r.verbs.clone(),
                api_groups: o(&r.api_groups),
                resources: o(&r.resources),
                resource_names: o(&r.resource_names),
            })
            .collect(),
        non_resource_rules: rules
            .iter()
            .filter(|r| !r.non_resource_urls.is_empty())
            .map(|r| authz::NonResourceRule {
                verbs: r.verbs.clone(),
                non_resource_urls: o(&r.non_resource_urls),
            })
            .collect(),
        incomplete: false,
        evaluation_error: (!errs.is_empty()).then(|| crdplane_auth::rbac::aggregate_errors(errs)),
    }
}
