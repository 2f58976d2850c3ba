//! crdplane-apiserver: the generic Kubernetes REST machinery under the gateway, in the shape
//! of upstream's k8s.io/apiserver (`pkg/registry/rest`, `pkg/registry/generic/registry`,
//! `pkg/endpoints/handlers`). It knows no gRPC: resource families plug in a [`rest::Store`]
//! and a [`rest::Strategy`], and the generic handlers run every verb over them.
//!
//! Modules: [`jsonpatch`] and [`strategic`] (patch formats), [`retry`] (the one
//! retry-on-conflict loop), [`render`] (Table printing).

pub mod jsonpatch;
pub mod render;
pub mod retry;
pub mod strategic;
