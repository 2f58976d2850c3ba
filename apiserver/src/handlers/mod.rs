//! Generic verb handlers: get, list, create, update, patch, delete and deletecollection of
//! any resource, over its [`Store`](crate::rest::Store), [`Strategy`](crate::rest::Strategy)
//! and admission [`Chain`](crate::admission::Chain).
//!
//! Where it sits: below request decoding (the caller parsed the URL, query options and
//! body) and above rendering ([`crate::render`]): a handler answers with the object (or list)
//! and the HTTP code, warnings to send, or the Status error. Follows k8s.io/apiserver
//! pkg/endpoints/handlers/{get,create,update,patch,delete}.go together with
//! pkg/registry/generic/registry/store.go (`Create`, `Update`, `Delete`,
//! `DeleteCollection`): dry-run goes down to the store, an update that changes nothing
//! writes nothing, every write of an existing object runs in the one retry-on-conflict loop
//! ([`crate::retry`]).

mod create;
mod delete;
mod get;
mod update;

pub use crate::fieldmanager::WriteOptions;
pub use create::create;
pub use delete::{DELETE_COLLECTION_PAGE, DELETE_COLLECTION_WORKERS, delete, delete_collection};
pub use get::{get, get_encoded, list, list_encoded};
pub use update::{PatchRequest, check_identity, patch, rv_required, update, update_from};

use crdplane_core::ApiError;
use serde_json::Value;

/// The answer of a write: HTTP code, the object (or Status) to render, warnings to send.
#[derive(Debug, Clone, PartialEq)]
pub struct Written {
    /// HTTP status code (200 OK, 201 Created, 202 Accepted).
    pub code: u16,
    /// The object (or Status) to send back.
    pub object: Value,
    /// `Warning` headers to send (e.g. unknown fields under `fieldValidation=Warn`).
    pub warnings: Vec<String>,
    /// `object` already encoded as JSON, when the store answered with its encoding
    /// ([`crate::rest::Stored::encoded`]): send these bytes as they are.
    pub encoded: Option<Vec<u8>>,
}

/// A string field of `metadata` ("" when absent).
pub(crate) fn meta_str<'a>(obj: &'a Value, key: &str) -> &'a str {
    obj.get("metadata")
        .and_then(|m| m.get(key))
        .and_then(Value::as_str)
        .unwrap_or("")
}

/// `Invalid` from field errors of `kind` (nothing when there are none).
pub(crate) fn invalid(
    s: &dyn crate::rest::Strategy,
    name: &str,
    errs: &[crdplane_core::field::FieldError],
) -> Result<(), ApiError> {
    if errs.is_empty() {
        Ok(())
    } else {
        Err(ApiError::invalid(
            s.kind(),
            &s.group_resource().group,
            name,
            errs,
        ))
    }
}
