//! crdplane-apiserver: the generic Kubernetes REST machinery under the gateway, in the shape
//! of upstream's k8s.io/apiserver (`pkg/registry/rest`, `pkg/registry/generic/registry`,
//! `pkg/endpoints/handlers`). It knows no gRPC: resource families plug in a [`rest::Store`]
//! and a [`rest::Strategy`], and the generic handlers run every verb over them.
//!
//! Modules: [`audit`] (the audit policy and event), [`rest`] (the `Store` and `Strategy` interfaces, shared metadata and deletion
//! rules), [`handlers`] (one generic handler per verb), [`admission`] (plugin chain),
//! [`patch`] (patch mechanisms over [`jsonpatch`] and [`strategic`]), [`retry`] (the one
//! retry-on-conflict loop), [`fieldmanager`] (managedFields and server-side apply), [`encryption`] (encryption at rest of the listed resources), [`render`] (list splicing, Table printing), [`watch`] (watch
//! options, event frames and one watcher's response), [`testkit`] (an in-memory store).

pub mod admission;
pub mod audit;
pub mod encryption;
pub mod fieldmanager;
pub mod handlers;
pub mod jsonpatch;
pub mod patch;
pub mod render;
pub mod rest;
pub mod retry;
pub mod strategic;
pub mod testkit;
pub mod watch;
