//! [`StorageStore`]: the storage gRPC service as a `crdplane_apiserver::rest::Store` for one
//! resource of one tenant. Objects cross as JSON with the resourceVersion slot split out
//! (`rvslot`), conditional writes carry the expected resourceVersion, and the service's
//! Status errors come back as they are.
//!
//! Where it sits: under the generic handlers for the families ported to them (namespaces'
//! update, patch, /status and /finalize); the removal of an object records the garbage
//! collector's work item first ([`crate::gc::record`]), as the hand-written paths do.

use crate::context::Channel;
use bytes::Bytes;
use crdplane_apiserver::rest::{EncodedList, ListOptions, ListResult, Store, Stored};
use crdplane_core::{ApiError, rvslot};
use crdplane_proto::v1 as pb;
use crdplane_proto::v1::storage_client::StorageClient;
use serde_json::Value;

/// One resource of one tenant in the storage service.
pub struct StorageStore<'a> {
    /// gRPC client of the storage service.
    pub storage: &'a StorageClient<Channel>,
    /// The tenant whose objects these are.
    pub tenant: &'a str,
    /// The API group whose objects these are (storage's name for it).
    pub group: &'a str,
    /// The resource whose objects these are (storage's name for it).
    pub resource: &'a str,
    /// Seconds the objects written live after each write (0: for ever); see the storage
    /// service's expiry.
    pub ttl_seconds: u64,
}

impl StorageStore<'_> {
    fn key(&self, namespace: &str, name: &str) -> pb::ObjectKey {
        pb::ObjectKey {
            resource: Some(pb::ResourceRef {
                tenant: self.tenant.into(),
                group: self.group.into(),
                resource: self.resource.into(),
            }),
            namespace: namespace.into(),
            name: name.into(),
        }
    }

    fn key_of(&self, obj: &Value) -> pb::ObjectKey {
        let m = |k: &str| {
            obj.pointer(&format!("/metadata/{k}"))
                .and_then(Value::as_str)
                .unwrap_or("")
        };
        self.key(m("namespace"), m("name"))
    }
}

fn write(obj: &Value) -> Result<pb::ObjectWrite, ApiError> {
    let (head, tail) = rvslot::split(obj).map_err(|e| ApiError::bad_request(e.to_string()))?;
    Ok(pb::ObjectWrite {
        head: head.into(),
        tail: tail.into(),
    })
}

fn parse(json: &[u8]) -> Result<Value, ApiError> {
    serde_json::from_slice(json).map_err(ApiError::internal)
}

/// The storage calls as bytes, for stores that convert the stored objects before
/// parsing them (custom resources: version conversion and read defaults work on bytes).
impl StorageStore<'_> {
    /// The stored object's bytes (404 when absent).
    pub async fn get_raw(&self, namespace: &str, name: &str) -> Result<Bytes, ApiError> {
        let s = self
            .storage
            .clone()
            .get(pb::GetRequest {
                key: Some(self.key(namespace, name)),
            })
            .await
            .map_err(crdplane_proto::status::from_grpc)?
            .into_inner();
        Ok(s.json)
    }

    /// [`Store::update`], answering with the stored bytes and their resourceVersion.
    pub async fn update_raw(
        &self,
        obj: &Value,
        old: &Value,
        dry_run: bool,
    ) -> Result<(Bytes, u64), ApiError> {
        let w = self
            .storage
            .clone()
            .update(pb::UpdateRequest {
                key: Some(self.key_of(obj)),
                object: Some(write(obj)?),
                expected_resource_version: crdplane_apiserver::rest::stored_rv(old),
                dry_run,
                ttl_seconds: self.ttl_seconds,
            })
            .await
            .map_err(crdplane_proto::status::from_grpc)?
            .into_inner();
        Ok((w.json, w.resource_version))
    }

    /// [`Store::delete`], answering with the last stored bytes.
    pub async fn delete_raw(
        &self,
        namespace: &str,
        name: &str,
        expected_rv: u64,
        dry_run: bool,
    ) -> Result<Bytes, ApiError> {
        let d = self
            .storage
            .clone()
            .delete(pb::DeleteRequest {
                key: Some(self.key(namespace, name)),
                expected_resource_version: expected_rv,
                dry_run,
            })
            .await
            .map_err(crdplane_proto::status::from_grpc)?
            .into_inner();
        Ok(d.json)
    }
}

impl Store for StorageStore<'_> {
    async fn get(&self, namespace: &str, name: &str) -> Result<Value, ApiError> {
        parse(&self.get_raw(namespace, name).await?)
    }

    async fn list(&self, namespace: &str, opts: &ListOptions) -> Result<ListResult, ApiError> {
        self.list_encoded(namespace, opts).await?.into_list(parse)
    }

    async fn get_encoded(&self, namespace: &str, name: &str) -> Result<Bytes, ApiError> {
        self.get_raw(namespace, name).await
    }

    /// The page as stored, at the revision `opts.rv` asks for (a too-new one is the storage
    /// service's 504 with a retry hint; an expired one its 410).
    async fn list_encoded(
        &self,
        namespace: &str,
        opts: &ListOptions,
    ) -> Result<EncodedList, ApiError> {
        crate::backends::storage::list_page(
            self.storage,
            [self.tenant, self.group, self.resource],
            namespace,
            opts,
        )
        .await
    }

    async fn create(&self, obj: Value, dry_run: bool) -> Result<Stored, ApiError> {
        let s = self
            .storage
            .clone()
            .create(pb::CreateRequest {
                key: Some(self.key_of(&obj)),
                object: Some(write(&obj)?),
                dry_run,
                ttl_seconds: self.ttl_seconds,
            })
            .await
            .map_err(crdplane_proto::status::from_grpc)?
            .into_inner();
        parse(&s.json).map(Stored::from)
    }

    async fn update(&self, obj: Value, old: &Value, dry_run: bool) -> Result<Stored, ApiError> {
        parse(&self.update_raw(&obj, old, dry_run).await?.0).map(Stored::from)
    }

    async fn before_delete(&self, obj: &Value, dry_run: bool) -> Result<(), ApiError> {
        if dry_run {
            return Ok(());
        }
        crate::gc::record(self.storage, self.tenant, self.group, self.resource, obj).await
    }

    async fn delete(
        &self,
        namespace: &str,
        name: &str,
        expected_rv: u64,
        dry_run: bool,
    ) -> Result<Value, ApiError> {
        parse(
            &self
                .delete_raw(namespace, name, expected_rv, dry_run)
                .await?,
        )
    }
}
