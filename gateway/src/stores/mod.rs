//! Concrete stores and strategies of the resource families served through the generic
//! machinery (`crdplane_apiserver`): [`storage::StorageStore`] (the storage gRPC service as a
//! `Store`) and the namespace strategies ([`namespaces`]).

pub mod namespaces;
pub mod storage;
