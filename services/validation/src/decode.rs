//! Request body decoding that also reports duplicate object keys; it lives in
//! [`crdplane_core::decode`] so that the gateway and this service decode alike.

pub use crdplane_core::decode::decode_with_duplicates;
