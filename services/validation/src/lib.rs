//! crdplane-validation: Kubernetes' structural-schema engine and the gRPC `Validation`
//! service (proto/crdplane/v1/validation.proto).
//!
//! Request path: the registry calls `ValidateCrd` on CRD writes ([`crd_schema`]); the gateway
//! calls `Admit` on every CR write and `Normalize` on reads. Each CRD version's
//! `openAPIV3Schema` is compiled once into a [`structural::Schema`] tree (cached by tenant,
//! CRD uid, generation and version, shared across tenants by content hash) and the passes
//! [`prune`], [`default`], [`validate`] and [`metadata`] run over it as pure functions
//! ([`admit`] composes them; on the write path [`pipeline`] runs pruning, defaulting and
//! validation as one walk with the same results). Results are data: `crdplane_core::FieldError`s with upstream's
//! exact paths and texts ([`convert`] maps them to the proto type).
pub mod admit;
pub mod config;
pub mod convert;
pub mod crd_schema;
pub mod decode;
pub mod default;
pub mod exact;
pub mod formats;
pub mod metadata;
pub mod metrics;
pub mod pipeline;
pub mod prune;
pub mod server;
pub mod structural;
pub mod validate;

pub use server::{Config, serve};
