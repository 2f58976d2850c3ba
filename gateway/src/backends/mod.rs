//! Typed facades over the gRPC services for the gateway's non-resource endpoints and its
//! LIST page: the registry's discovery and OpenAPI documents ([`registry`]), the storage
//! service's list pages and continue-token key ([`storage`]), and the readiness probe of
//! all three services ([`readiness`]). Callers get plain Rust values and `ApiError`s; the
//! protobuf messages and `tonic::Status` stay in here.
//!
//! Where it sits: under `discovery.rs`, `list.rs` and the CRD list, beside the other
//! facades (`stores/`, `cr_store.rs`, `batch.rs`, `gc.rs`, `watch_mux.rs`), above
//! `crdplane-proto` (which holds the one conversion per wire type). It takes service
//! clients, never the request context, so it imports no handler.

pub mod readiness;
pub mod registry;
pub mod storage;
