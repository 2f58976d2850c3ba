//! GET of one object and LIST (handlers/get.go `GetResource`, `ListResource`).

use crate::rest::{ListOptions, ListResult, Store};
use crdplane_core::ApiError;
use serde_json::Value;

/// The stored object (404 when absent).
pub async fn get<S: Store>(store: &S, namespace: &str, name: &str) -> Result<Value, ApiError> {
    store.get(namespace, name).await
}

/// One page of the objects of `namespace` ("" for all), filtered by the options' selectors.
pub async fn list<S: Store>(
    store: &S,
    namespace: &str,
    opts: &ListOptions,
) -> Result<ListResult, ApiError> {
    store.list(namespace, opts).await
}
