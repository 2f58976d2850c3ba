//! crdplane gateway: the Kubernetes REST API (paths, verbs, JSON, Table output, watch
//! streams, Status errors) in front of the crdplane gRPC services.
//!
//! Request path: TCP connection → [`http1`] (HTTP/1.1 framing; HTTP/2 connections go to
//! hyper) → [`api::handle_buffered`] / [`api::handle`] (panic → 500 Status, body limit, tenant
//! and [`request_info`] parse) → non-resource endpoints ([`discovery`]: health, version,
//! discovery, OpenAPI) or resource handlers: namespaces ([`namespaces`]), CRDs ([`crds`] →
//! registry), custom resources ([`crs`] → validation + storage; [`watch`] for streams,
//! [`batch`] coalescing concurrent GETs into storage GetMany calls).
//! Metadata-only output (PartialObjectMetadata) is applied around the handlers by
//! [`partial`]; strategic merge patch of built-in types is [`strategic`].
//! Pure strategy lives in [`strategy`], Table printing in [`table`], HTTP details in [`http`].

pub mod api;
pub mod batch;
pub mod config;
pub mod crd;
pub mod crds;
pub mod crs;
pub mod discovery;
pub mod gc;
pub mod http;
pub mod http1;
pub mod jsonpatch;
pub mod namespaces;
pub mod partial;
pub mod request_info;
pub mod retry;
pub mod scale;
pub mod strategic;
pub mod strategy;
pub mod table;
pub mod watch;
pub mod watch_limit;
pub mod watch_mux;

pub use api::{Config, serve};
