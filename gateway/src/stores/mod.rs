//! Concrete stores and strategies of the resource families served through the generic
//! machinery (`crdplane_apiserver`): [`storage::StorageStore`] (the storage gRPC service as a
//! `Store`, also as bytes), custom resources ([`crs`]: store, strategy, schema admission),
//! CRDs ([`crds`]: the registry service), namespaces ([`namespaces`]: strategies, store,
//! admission) and the built-in types' strategies ([`builtin`]).

pub mod builtin;
pub mod crds;
pub mod crs;
pub mod namespaces;
pub mod storage;
