//! Concrete stores and strategies of the resource families served through the generic
//! machinery (`crdplane_apiserver`): [`storage::StorageStore`] (the storage gRPC service as a
//! `Store`), the namespace strategies ([`namespaces`]) and the built-in types' strategies
//! ([`builtin`]).

pub mod builtin;
pub mod crds;
pub mod crs;
pub mod namespaces;
pub mod storage;
