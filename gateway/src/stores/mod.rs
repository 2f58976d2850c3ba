//! Concrete stores and strategies of the resource families served through the generic
//! machinery (`crdplane_apiserver`): [`storage::StorageStore`] (the storage gRPC service as a
//! `Store`, also as bytes), custom resources ([`crs`]: store, strategy, schema admission),
//! CRDs ([`crds`]: the registry service), namespaces ([`namespaces`]: strategies, store,
//! admission), the built-in types' strategies ([`builtin`]) and the strict decoding of
//! namespaces and CRDs against their Kubernetes types ([`typed`]).

pub mod builtin;
pub mod crds;
pub mod crs;
pub mod namespaces;
pub mod storage;
pub mod tenants;
pub mod typed;
