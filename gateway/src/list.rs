//! One page of a LIST from the storage service, for every family served from it (custom
//! resources, namespaces, built-in types): the request's `resourceVersion`,
//! `resourceVersionMatch`, `limit` and signed `continue` token checked and turned into the
//! storage call, and its answer into the list's resourceVersion, next token and remaining
//! count — or upstream's answer for an expired token (410 with a fresh one) or a
//! resourceVersion ahead of the store (504 with `Retry-After`).
//!
//! Where it sits: called by the families' list handlers, which then render the page (JSON
//! splice or Table). Follows k8s.io/apiserver pkg/endpoints/handlers/get.go `ListResource`
//! and pkg/storage/etcd3/store.go `GetList` (continue tokens, `resourceVersion` rules).

use crate::context::{Ctx, Req};
use crate::http::Body;
use crate::table::ListMeta;
use bytes::Bytes;
use crdplane_core::{ApiError, ResourceRef};
use http::Response;

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

/// The stored objects of one page and the list metadata to send with them.
pub struct Page {
    /// The stored objects' JSON, in key order.
    pub items: Vec<Bytes>,
    /// The list's `metadata.resourceVersion`.
    pub resource_version: u64,
    /// The list's `metadata.continue` ("" = last page).
    pub continue_token: String,
    /// The list's `metadata.remainingItemCount`, when known.
    pub remaining: Option<u64>,
}

impl Page {
    /// The list document (`<Kind>List`) with the stored bytes spliced in.
    pub fn json(&self, api_version: &str, list_kind: &str, items: &[Bytes]) -> Vec<u8> {
        crate::strategy::list_json(
            api_version,
            list_kind,
            items,
            self.resource_version,
            &self.continue_token,
            self.remaining,
        )
    }

    /// The list metadata of a Table of this page.
    pub fn list_meta(&self) -> ListMeta {
        ListMeta {
            resource_version: self.resource_version.to_string(),
            continue_token: self.continue_token.clone(),
            remaining_item_count: self.remaining.map(|r| r as i64),
        }
    }
}

/// A page, or the answer the request gets instead (410 / 504, see the module doc).
pub enum Listed {
    /// The page to send.
    Page(Page),
    /// The response to send instead (410 Expired or 504 Timeout).
    Answer(Response<Body>),
}

/// Reads the page `req` asks for of `resource` in `namespace` ("" = all), with the
/// already-checked selectors.
pub async fn storage_page(
    ctx: &Ctx,
    req: &Req,
    resource: ResourceRef,
    namespace: &str,
    label_selector: String,
    field_selector: String,
) -> Result<Listed, ApiError> {
    let key = crate::backends::storage::continue_key(&ctx.storage).await?;
    let scope = crate::strategy::token_scope(
        &resource.tenant,
        &resource.group,
        &resource.resource,
        namespace,
    );
    let opts = crate::strategy::list_options(|k| req.query.get(k), &key, &scope)?;
    let page = crate::backends::storage::list_page(
        &ctx.storage,
        &resource,
        namespace,
        &opts,
        label_selector,
        field_selector,
    )
    .await;
    let page = match page {
        Ok(p) => p,
        Err(e) => {
            return crate::respond::list_failure(e, &opts, &key, &scope).map(Listed::Answer);
        }
    };
    let rv = page.resource_version;
    let continue_token = if page.continue_token.is_empty() {
        String::new()
    } else {
        crate::strategy::encode_continue(&key, &scope, &page.continue_token, rv as i64)
    };
    Ok(Listed::Page(Page {
        items: page.items,
        resource_version: rv,
        continue_token,
        remaining: page.remaining,
    }))
}
