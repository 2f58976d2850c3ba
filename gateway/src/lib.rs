//! crdplane gateway: the Kubernetes REST API (paths, verbs, JSON, Table output, watch
//! streams, Status errors) in front of the crdplane gRPC services.
//!
//! Request path: TCP connection → [`server`] (accept loop; HTTP/1.1 framing by the
//! crdplane-http1 crate, HTTP/2 by hyper) → the one edge `tower::Service` of [`stack`], one
//! layer per file in [`filters`] in upstream's order (panic → trace → request info + tenant →
//! metrics → limits and timeouts → authentication → impersonation → tenant lifecycle → tenant
//! access → fairness → authorization) → the router, [`api::Router`] → non-resource endpoints ([`discovery`]:
//! health, version, discovery, OpenAPI) or resource handlers: namespaces ([`namespaces`]),
//! built-in types ([`builtin`]: ConfigMap, Secret, ServiceAccount, Events, Lease → the
//! generic machinery over storage), Tenants of the admin scope ([`tenants`]; the purge
//! controller of deleted ones is [`tenant_purge`], which tenants exist [`tenant_directory`]),
//! CRDs ([`crds`] → registry), custom resources ([`crs`]:
//! writes through the generic machinery of [`cr_rest`] over [`stores`] → validation +
//! storage; `/scale` in [`scale_rest`]). Every family's GET, LIST and WATCH go through
//! [`reads`]; [`watch`] for streams over [`watch_mux`], [`batch`] coalescing concurrent
//! GETs into storage GetMany calls.
//! Metadata-only output (PartialObjectMetadata) is applied around the handlers by
//! [`partial`], YAML output by [`yaml`]; strategic merge patch of built-in types is [`strategic`].
//!
//! The modules form a DAG (checked by `tests/module_graph.rs`; layers in ARCHITECTURE.md):
//! the router ([`api`]) is the only module that knows every handler family; the families
//! share what they decode from the request ([`request`]), how they answer ([`respond`]),
//! namespace checks and tenant bootstrap ([`lifecycle`]) and the LIST page ([`list`]); all
//! of them take the process state and the parsed request from [`context`], which imports no
//! handler. The services are reached through typed facades ([`backends`], [`stores`],
//! [`cr_store`], [`batch`], [`gc`], [`watch_mux`]); no handler module names a protobuf type. Pure strategy lives in [`strategy`], Table printing in [`table`], HTTP details in
//! [`http`].

pub mod access_reviews;
pub mod api;
pub mod audit;
pub mod authz;
pub mod backends;
pub mod batch;
pub mod builtin;
pub mod config;
pub mod context;
pub mod cr_rest;
pub mod cr_store;
pub mod crd;
pub mod crds;
pub mod crs;
pub mod discovery;
pub mod encryption;
pub mod filters;
pub mod gc;
pub mod http;
pub mod lifecycle;
pub mod list;
pub mod metrics;
pub mod namespaces;
pub mod oidc_keys;
pub mod partial;
pub mod policy;
pub mod rbac_admission;
pub mod reads;
pub mod request;
pub mod request_info;
pub mod respond;
pub mod reviews;
pub mod scale;
pub mod scale_rest;
pub mod server;
pub mod service_accounts;
pub mod stack;
pub mod stores;
pub mod strategy;
pub mod tenant_directory;
pub mod tenant_purge;
pub mod tenants;
pub mod token_request;
pub mod watch;
pub mod watch_limit;
pub mod watch_mux;
pub mod watch_queue;
pub mod yaml;

pub use context::Config;
pub use server::serve;
// The generic REST machinery, under the names the gateway's modules use.
pub use crdplane_apiserver::render::table;
pub use crdplane_apiserver::{jsonpatch, retry, strategic};
