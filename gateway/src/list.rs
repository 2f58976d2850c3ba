//! One page of a LIST, for every family served from the storage service (custom
//! resources, namespaces, built-in types): the request's `resourceVersion`,
//! `resourceVersionMatch`, `limit` and signed `continue` token checked, the generic
//! `handlers::list_encoded` over the family's store, and its answer turned into the list's
//! resourceVersion, next token and remaining count — or upstream's error for an expired
//! token (410 with a fresh one in the Status).
//!
//! Where it sits: called by the families' list handlers, which then render the page (JSON
//! splice or Table). Follows k8s.io/apiserver pkg/endpoints/handlers/get.go `ListResource`
//! and pkg/storage/etcd3/store.go `GetList` (continue tokens, `resourceVersion` rules);
//! the tokens are signed here, at the edge, because their key is the gateway's.

use crate::context::{Ctx, Req};
use crdplane_apiserver::handlers;
use crdplane_apiserver::rest::{EncodedList, ListOptions, Store};
use crdplane_core::ApiError;

/// The request's `labelSelector` and `fieldSelector`, checked: both parse, and every field
/// label is one `known` accepts (else upstream's 400 `field label not supported: x`, the
/// field label conversion's answer).
pub fn checked_selectors(
    req: &Req,
    known: impl Fn(&str) -> bool,
) -> Result<(String, String), ApiError> {
    use crdplane_core::selector::{FieldSelector, LabelSelector};
    let label = req.query.get("labelSelector").unwrap_or("").to_string();
    let field = req.query.get("fieldSelector").unwrap_or("").to_string();
    if !label.is_empty() {
        LabelSelector::parse(&label).map_err(ApiError::bad_request)?;
    }
    if !field.is_empty() {
        let f = FieldSelector::parse(&field).map_err(ApiError::bad_request)?;
        if let Some(r) = f.requirements().iter().find(|r| !known(&r.field)) {
            return Err(ApiError::bad_request(format!(
                "field label not supported: {}",
                r.field
            )));
        }
    }
    Ok((label, field))
}

/// Reads the page `req` asks for of `store`'s objects in `namespace` ("" = all), with the
/// already-checked selectors: the list options validated and the continue token verified
/// against `scope` (`[tenant, group, resource]` the token is bound to, with the
/// namespace), the generic LIST over the store, the next page's token signed.
pub async fn page<S: Store>(
    ctx: &Ctx,
    req: &Req,
    store: &S,
    [tenant, group, resource]: [&str; 3],
    namespace: &str,
    label_selector: String,
    field_selector: String,
) -> Result<EncodedList, ApiError> {
    let key = crate::backends::storage::continue_key(&ctx.storage).await?;
    let scope = crate::strategy::token_scope(tenant, group, resource, namespace);
    let validated = crate::strategy::list_options(|k| req.query.get(k), &key, &scope)?;
    let opts = ListOptions::from_request(validated, label_selector, field_selector);
    let mut page = handlers::list_encoded(store, namespace, &opts)
        .await
        .map_err(|e| list_error(e, &opts, &key, &scope))?;
    if !page.continue_token.is_empty() {
        let rv = page.resource_version as i64;
        page.continue_token =
            crate::strategy::encode_continue(&key, &scope, &page.continue_token, rv);
    }
    Ok(page)
}

/// A failed list as upstream answers it: a continue token whose revision left the history
/// gets 410 with a fresh token (revision -1) in the Status's `metadata.continue`; anything
/// else as it is (a resourceVersion ahead of the store is the storage's 504 with a retry
/// hint, sent as `Retry-After` like every Status that has one).
fn list_error(e: ApiError, opts: &ListOptions, key: &[u8], scope: &str) -> ApiError {
    if e.reason == crdplane_core::Reason::Expired && opts.continuing {
        return crdplane_core::continue_token::expired_continue(key, scope, &opts.continue_token);
    }
    e
}
