//! crdplane-core: the small, IO-free crate under every crdplane service.
//!
//! It holds what more than one component must agree on byte for byte:
//! - [`status`]: the one table from a Kubernetes `Status` reason to its HTTP and gRPC codes,
//!   and [`status::ApiError`], the edge error that travels inside gRPC statuses and is
//!   rendered by the gateway as the upstream `Status` JSON;
//! - [`decode`]: JSON decoding that reports duplicate keys (strict field validation);
//! - [`discovery`]: discovery documents as types (legacy from k8s-openapi, aggregated v2);
//! - [`meta`]: typed read access to an object's `metadata` (ObjectMeta over JSON);
//! - [`gofmt`]: Go-style printing (`%v`, `%q`, `%#v`, `%T`, `fmt.Sprint`, `encoding/json`);
//! - [`field`]: validation failures as data (upstream `field.Error`) and their exact texts;
//! - [`fieldpath`]: field sets of server-side apply and their `fieldsV1` encoding;
//! - [`structured`]: the schema-driven merge, comparison and removal of server-side apply;
//! - [`managedfields`]: `metadata.managedFields` kept by every write, and apply's
//!   conflicts and pruning;
//! - [`rvslot`]: how a writer hands an object to storage so that the resourceVersion can be
//!   filled in inside Redis without parsing JSON there;
//! - [`builtin`]: the built-in resource types (ConfigMap, Secret, …) as one table of facts;
//! - [`objectmeta`]: ObjectMeta/TypeMeta validation with upstream's texts;
//! - [`names`]: group/resource/kind naming helpers and timestamps;
//! - [`continue_token`]: signed continue tokens of paginated lists (HMAC-SHA256);
//! - [`ports`]: the default addresses of every component, written once;
//! - [`options`]: request options (list query parameters) with upstream's validation texts;
//! - [`gcqueue`]: the garbage collector's durable work items (entry JSON, leases);
//! - [`validation`]: DNS/qualified-name/label-value rules with upstream's texts;
//! - [`selector`] and [`filter`]: label/field selectors and what a list or filtered watch
//!   returns (selector transitions as upstream's cacher).
pub mod builtin;
pub mod continue_token;
pub mod decode;
pub mod discovery;
pub mod field;
pub mod fieldpath;
pub mod filter;
pub mod gcqueue;
pub mod gofmt;
pub mod managedfields;
pub mod meta;
pub mod names;
pub mod objectmeta;
pub mod options;
pub mod ports;
pub mod rvslot;
pub mod scalefields;
pub mod selector;
pub mod status;
pub mod structured;
pub mod tenancy;
pub mod validation;

pub use field::{FieldError, FieldErrorType};
pub use names::{GroupResource, ResourceRef};
pub use status::{ApiError, Reason};
