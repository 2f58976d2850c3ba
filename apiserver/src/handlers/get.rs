//! GET of one object and LIST (handlers/get.go `GetResource`, `ListResource`), as values
//! or as the objects' JSON bytes (`*_encoded`: what a JSON answer sends, without a parse
//! and re-encode of what the store already holds as bytes).

use crate::rest::{EncodedList, ListOptions, ListResult, Store};
use bytes::Bytes;
use crdplane_core::ApiError;
use serde_json::Value;

/// The stored object (404 when absent).
pub async fn get<S: Store>(store: &S, namespace: &str, name: &str) -> Result<Value, ApiError> {
    store.get(namespace, name).await
}

/// The stored object's JSON (404 when absent).
pub async fn get_encoded<S: Store>(
    store: &S,
    namespace: &str,
    name: &str,
) -> Result<Bytes, ApiError> {
    store.get_encoded(namespace, name).await
}

/// One page of the objects of `namespace` ("" for all), filtered by the options' selectors.
pub async fn list<S: Store>(
    store: &S,
    namespace: &str,
    opts: &ListOptions,
) -> Result<ListResult, ApiError> {
    store.list(namespace, opts).await
}

/// [`list`] as the objects' JSON; the page's resourceVersion is the one a continued exact
/// list names (`ListRv::page_rv`).
pub async fn list_encoded<S: Store>(
    store: &S,
    namespace: &str,
    opts: &ListOptions,
) -> Result<EncodedList, ApiError> {
    let mut page = store.list_encoded(namespace, opts).await?;
    page.resource_version = opts.rv.page_rv(opts.continuing, page.resource_version);
    Ok(page)
}
