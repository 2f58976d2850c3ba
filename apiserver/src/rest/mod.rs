//! The REST storage interfaces a resource family implements to be served by the generic
//! handlers ([`crate::handlers`]): a [`Store`] (where objects live) and a [`Strategy`]
//! (what the server sets, keeps and validates), plus the pure metadata rules every resource
//! shares ([`meta`]) and the deletion rules ([`delete`]).
//!
//! Follows k8s.io/apiserver pkg/registry/rest (`RESTCreateStrategy`, `RESTUpdateStrategy`,
//! `RESTDeleteStrategy`) and pkg/registry/generic/registry/store.go.

pub mod delete;
pub mod meta;
pub mod store;
pub mod strategy;

pub use store::{EncodedList, ListOptions, ListResult, Store, Stored, stored_rv};
pub use strategy::{StatusStrategy, Strategy};
