//! gRPC targets: one service driven directly, below the gateway.
//!
//! - storage: `Create`/`Get`/`Update` (unconditional, expected resourceVersion 0)/`List` of
//!   CronTab objects; writes carry the object split at the resourceVersion slot
//!   (`crdplane_core::rvslot::split`), exactly as the gateway hands them over.
//! - validation: `LoadSchema` once (setup), then `Admit` CREATE / UPDATE of CronTabs.
//!
//! Workers share a few tonic channels (HTTP/2 connections, `--grpc-channels`).

use std::time::Duration;

use bytes::Bytes;
use crdplane_proto::v1::storage_client::StorageClient;
use crdplane_proto::v1::validation_client::ValidationClient;
use crdplane_proto::v1::{
    AdmitRequest, CreateRequest, GetRequest, ListRequest, LoadSchemaRequest, ObjectKey,
    ObjectWrite, ResourceRef, SchemaRef, UpdateRequest, admit_request,
};
use tonic::transport::{Channel, Endpoint};

use crate::Failure;
use crate::config::{Config, Op, TargetKind};
use crate::objects::{self, CronTabSpec};

/// Error key of a gRPC failure: `grpc AlreadyExists`, plus the Kubernetes reason when the
/// status details carry a Status (`grpc Aborted Conflict`).
pub fn grpc_key(s: &tonic::Status) -> String {
    let code = format!("{:?}", s.code());
    match crdplane_proto::status::decode_details(s.details()) {
        Some(e) if e.reason.as_str() != code => format!("grpc {code} {}", e.reason.as_str()),
        _ => format!("grpc {code}"),
    }
}

fn failure(s: tonic::Status) -> Failure {
    Failure::new(grpc_key(&s), s.message().to_string())
}

/// The storage or validation service as a load target: shared channels and the tenant,
/// namespace and object shape of every request.
pub struct GrpcTarget {
    kind: TargetKind,
    channels: Vec<Channel>,
    tenant: String,
    namespace: String,
    object_size: usize,
    list_limit: u32,
}

impl GrpcTarget {
    /// Dials `cfg.grpc_channels` channels to `cfg.endpoint` (each must connect within 5 s).
    pub async fn connect(cfg: &Config) -> anyhow::Result<GrpcTarget> {
        let mut channels = Vec::with_capacity(cfg.grpc_channels);
        for _ in 0..cfg.grpc_channels {
            let ch = Endpoint::from_shared(cfg.endpoint.clone())?
                .connect_timeout(Duration::from_secs(5))
                .tcp_nodelay(true)
                .timeout(cfg.timeout)
                .connect()
                .await
                .map_err(|e| {
                    anyhow::anyhow!(
                        "connecting to {}: {}",
                        cfg.endpoint,
                        crate::http::error_chain(&e)
                    )
                })?;
            channels.push(ch);
        }
        Ok(GrpcTarget {
            kind: cfg.target,
            channels,
            tenant: cfg.grpc_tenant.clone(),
            namespace: cfg.namespace.clone(),
            object_size: cfg.object_size,
            list_limit: cfg.list_limit,
        })
    }

    fn channel(&self, worker: usize) -> Channel {
        self.channels[worker % self.channels.len()].clone()
    }

    fn resource(&self) -> ResourceRef {
        ResourceRef {
            tenant: self.tenant.clone(),
            group: objects::GROUP.into(),
            resource: objects::RESOURCE.into(),
        }
    }

    fn key(&self, name: &str) -> ObjectKey {
        ObjectKey {
            resource: Some(self.resource()),
            namespace: self.namespace.clone(),
            name: name.into(),
        }
    }

    fn object(&self, name: &str, seq: u64) -> serde_json::Value {
        objects::crontab(&CronTabSpec {
            name,
            namespace: &self.namespace,
            seq,
            size: self.object_size,
            server_fields: self.kind == TargetKind::Storage,
            resource_version: None,
        })
    }

    fn write(&self, name: &str, seq: u64) -> Result<ObjectWrite, Failure> {
        let (head, tail) = crdplane_core::rvslot::split(&self.object(name, seq))
            .map_err(|e| Failure::new("rvslot", e.to_string()))?;
        Ok(ObjectWrite {
            head: Bytes::from(head),
            tail: Bytes::from(tail),
        })
    }

    fn schema_ref(&self) -> SchemaRef {
        SchemaRef {
            tenant: self.tenant.clone(),
            crd_uid: objects::LOADTEST_CRD_UID.into(),
            generation: objects::LOADTEST_CRD_GENERATION,
            version: objects::VERSION.into(),
        }
    }

    /// Validation: compiles the CronTab schema. Storage: nothing to set up beyond objects.
    pub async fn setup(&self) -> anyhow::Result<()> {
        if self.kind == TargetKind::Validation {
            self.load_schema()
                .await
                .map_err(|f| anyhow::anyhow!("LoadSchema failed: {}: {}", f.key, f.body))?;
            eprintln!("setup: loaded the CronTab schema into the validation service");
        }
        Ok(())
    }

    async fn load_schema(&self) -> Result<(), Failure> {
        let crd = serde_json::to_vec(&objects::crontab_crd_stored())
            .map_err(|e| Failure::new("json", e.to_string()))?;
        ValidationClient::new(self.channel(0))
            .load_schema(LoadSchemaRequest {
                schema: Some(self.schema_ref()),
                crd_json: Bytes::from(crd),
            })
            .await
            .map_err(failure)?;
        Ok(())
    }

    /// Storage: creates a working-set object; AlreadyExists is fine.
    pub async fn ensure_object(&self, name: &str, seq: u64) -> Result<(), Failure> {
        if self.kind != TargetKind::Storage {
            return Ok(());
        }
        let req = CreateRequest {
            key: Some(self.key(name)),
            object: Some(self.write(name, seq)?),
            dry_run: false,
            ttl_seconds: 0,
        };
        match StorageClient::new(self.channel(0)).create(req).await {
            Ok(_) => Ok(()),
            Err(s) if s.code() == tonic::Code::AlreadyExists => Ok(()),
            Err(s) => Err(failure(s)),
        }
    }

    /// The stored resourceVersion of an object (storage: an untimed Get before its first
    /// update; validation needs none).
    pub async fn read_rv(&self, worker: usize, name: &str) -> Result<String, Failure> {
        if self.kind != TargetKind::Storage {
            return Ok(String::new());
        }
        let o = StorageClient::new(self.channel(worker))
            .get(GetRequest {
                key: Some(self.key(name)),
            })
            .await
            .map_err(failure)?;
        Ok(o.into_inner().resource_version.to_string())
    }

    /// One timed operation; returns the new resourceVersion after a storage update.
    pub async fn op(
        &self,
        worker: usize,
        op: Op,
        name: &str,
        seq: u64,
        rv: Option<&str>,
    ) -> Result<Option<String>, Failure> {
        match self.kind {
            TargetKind::Validation => self.admit(worker, op, name, seq).await.map(|()| None),
            _ => self.storage_op(worker, op, name, seq, rv).await,
        }
    }

    async fn storage_op(
        &self,
        worker: usize,
        op: Op,
        name: &str,
        seq: u64,
        rv: Option<&str>,
    ) -> Result<Option<String>, Failure> {
        let mut c = StorageClient::new(self.channel(worker));
        let r = match op {
            Op::Create => {
                let req = CreateRequest {
                    key: Some(self.key(name)),
                    object: Some(self.write(name, seq)?),
                    dry_run: false,
                    ttl_seconds: 0,
                };
                c.create(req).await.map(|_| None)
            }
            Op::Get => c
                .get(GetRequest {
                    key: Some(self.key(name)),
                })
                .await
                .map(|_| None),
            // Compare-and-swap on the resourceVersion the worker last saw, as the gateway
            // does for a PUT (0 = unconditional when none is known).
            Op::Update => {
                let req = UpdateRequest {
                    key: Some(self.key(name)),
                    object: Some(self.write(name, seq)?),
                    expected_resource_version: rv.and_then(|s| s.parse().ok()).unwrap_or(0),
                    dry_run: false,
                    ttl_seconds: 0,
                };
                c.update(req)
                    .await
                    .map(|o| Some(o.into_inner().resource_version.to_string()))
            }
            // A whole-collection list is larger than tonic's 4 MiB default (the gateway
            // allows 256 MiB).
            Op::List => c
                .max_decoding_message_size(256 << 20)
                .list(ListRequest {
                    resource: Some(self.resource()),
                    namespace: self.namespace.clone(),
                    limit: self.list_limit,
                    ..Default::default()
                })
                .await
                .map(|_| None),
            Op::Apply => {
                return Err(Failure::new(
                    "unsupported",
                    "apply is an HTTP operation (server-side apply in the gateway)",
                ));
            }
        };
        r.map_err(failure)
    }

    fn admit_request(&self, op: Op, name: &str, seq: u64) -> Result<AdmitRequest, Failure> {
        let to_bytes = |v: &serde_json::Value| {
            serde_json::to_vec(v)
                .map(Bytes::from)
                .map_err(|e| Failure::new("json", e.to_string()))
        };
        let (operation, old_object) = match op {
            Op::Create => (admit_request::Operation::Create, Bytes::new()),
            Op::Update => (
                admit_request::Operation::Update,
                to_bytes(&self.object(name, seq.wrapping_add(1)))?,
            ),
            other => {
                return Err(Failure::new(
                    "unsupported",
                    format!("{other} is not an admission operation"),
                ));
            }
        };
        Ok(AdmitRequest {
            schema: Some(self.schema_ref()),
            operation: operation as i32,
            object: to_bytes(&self.object(name, seq))?,
            old_object,
            field_validation: admit_request::FieldValidation::Unspecified as i32,
            subresource: String::new(),
            api_version: format!("{}/{}", objects::GROUP, objects::VERSION),
            kind: objects::KIND.into(),
            namespaced: true,
            crd_json: Default::default(),
        })
    }

    async fn admit(&self, worker: usize, op: Op, name: &str, seq: u64) -> Result<(), Failure> {
        let req = self.admit_request(op, name, seq)?;
        let mut c = ValidationClient::new(self.channel(worker));
        let resp = match c.admit(req.clone()).await {
            Ok(r) => r.into_inner(),
            // The schema cache may have dropped our schema: load it again, retry once.
            Err(s) if s.code() == tonic::Code::NotFound => {
                self.load_schema().await?;
                c.admit(req).await.map_err(failure)?.into_inner()
            }
            Err(s) => return Err(failure(s)),
        };
        if let Some(e) = resp.errors.first() {
            return Err(Failure::new(
                "admit Invalid",
                format!(
                    "{} error(s), first: {} {}: {} (value {})",
                    resp.errors.len(),
                    e.r#type,
                    e.field,
                    e.detail,
                    e.bad_value_json
                ),
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crdplane_core::{ApiError, GroupResource};
    use crdplane_proto::GrpcStatusExt;

    #[test]
    fn grpc_keys() {
        let gr = GroupResource {
            group: "stable.example.com".into(),
            resource: "crontabs".into(),
        };
        let s = ApiError::already_exists(&gr, "x").to_grpc();
        assert_eq!(grpc_key(&s), "grpc AlreadyExists");
        let s = ApiError::conflict(&gr, "x", "changed").to_grpc();
        let key = grpc_key(&s);
        assert!(
            key.starts_with("grpc ") && key.ends_with(" Conflict"),
            "{key}"
        );
        assert_eq!(
            grpc_key(&tonic::Status::unavailable("down")),
            "grpc Unavailable"
        );
    }
}
