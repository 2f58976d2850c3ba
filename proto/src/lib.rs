//! gRPC contracts between the crdplane gateway and its services (storage, validation,
//! registry). Generated from `proto/crdplane/v1/*.proto` at build time.
#![allow(clippy::all, missing_docs)]

pub mod v1 {
    tonic::include_proto!("crdplane.v1");
}
pub use v1::*;
