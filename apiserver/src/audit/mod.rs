//! Auditing, the pure half: the audit policy (`audit.k8s.io/v1` `Policy`: which requests are
//! recorded, at which level, which stages are left out) and the audit event
//! (`audit.k8s.io/v1` `Event`, the JSON line a log or webhook backend receives).
//!
//! Where it sits: the gateway's audit layer (`gateway/src/filters/audit.rs`, right after
//! authentication, as upstream's `WithAudit`) asks [`policy::Policy::evaluate`] once per
//! request and builds one [`event::Event`], which it hands to the backends
//! (`gateway/src/audit/`) at each stage. No IO here.
//!
//! Follows upstream's `k8s.io/apiserver/pkg/apis/audit` (types and `validation`) and
//! `pkg/audit/policy` (`checker.go`, `reader.go`), written anew.

pub mod event;
pub mod policy;
