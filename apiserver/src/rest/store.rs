//! `trait Store`: the storage a resource family's objects live in, as the generic handlers
//! see it — objects (`serde_json::Value`, with `metadata.resourceVersion` set) in and out,
//! compare-and-swap writes on the resourceVersion, errors as Kubernetes Status
//! ([`ApiError`]).
//!
//! Where it sits: below the generic handlers ([`crate::handlers`]), which run the strategy,
//! admission, the retry-on-conflict loop and dry-run around these calls. The gateway
//! implements it over the storage gRPC service; [`crate::testkit::MemStore`] implements it
//! in memory. Follows k8s.io/apiserver pkg/storage/interfaces.go (`storage.Interface`: Get,
//! GetList, Create, GuaranteedUpdate's conditional write, Delete with preconditions).

use bytes::Bytes;
use crdplane_core::ApiError;
use crdplane_core::options::ListRv;
use serde_json::Value;
use std::future::Future;

/// Options of one list, validated (`crdplane_core::options::list_options`: apimachinery
/// `ValidateListOptions` and storage `ValidateListOptions`) and with the continue token
/// already verified and decoded at the edge, as upstream's storage layer gets them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ListOptions {
    /// Label selector text ("" selects everything).
    pub label_selector: String,
    /// Field selector text ("" selects everything).
    pub field_selector: String,
    /// Page size (0: no limit).
    pub limit: u32,
    /// Where the previous page stopped: the exclusive start key the request's continue
    /// token holds ("" for the first page).
    pub continue_token: String,
    /// Which state the list reads (`resourceVersion`, `resourceVersionMatch`, or the
    /// revision the continue token holds).
    pub rv: ListRv,
    /// The request continued a previous list (its token may name no revision: -1).
    pub continuing: bool,
}

impl ListOptions {
    /// The options of a list request, from its validated options and selectors.
    pub fn from_request(
        validated: crdplane_core::options::ListOptions,
        label_selector: String,
        field_selector: String,
    ) -> Self {
        ListOptions {
            label_selector,
            field_selector,
            limit: validated.limit,
            continue_token: validated.start_after,
            rv: validated.rv,
            continuing: validated.continuing,
        }
    }
}

/// One page of a list as the objects' JSON bytes, as the store keeps them (what
/// [`ListResult`] holds parsed): lists that serve stored objects unchanged splice these
/// bytes into the list document ([`crate::render::list`]) instead of parsing and
/// re-encoding every object.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct EncodedList {
    /// The objects' JSON, in key order.
    pub items: Vec<Bytes>,
    /// The list's resourceVersion.
    pub resource_version: u64,
    /// Where this page stopped, for the next page's token ("" when this is the last one).
    pub continue_token: String,
    /// Objects left after this page, when the store knows.
    pub remaining: Option<u64>,
}

impl EncodedList {
    /// The list document (`<Kind>List`) of this page with `items` (its own, or what the
    /// served form made of them) spliced in ([`crate::render::list::list_json`]).
    pub fn json(&self, api_version: &str, list_kind: &str, items: &[Bytes]) -> Vec<u8> {
        crate::render::list::list_json(
            api_version,
            list_kind,
            items,
            self.resource_version,
            &self.continue_token,
            self.remaining,
        )
    }

    /// The list metadata of a Table of this page.
    pub fn list_meta(&self) -> crate::render::table::ListMeta {
        crate::render::table::ListMeta {
            resource_version: Some(self.resource_version.to_string()),
            continue_: (!self.continue_token.is_empty()).then(|| self.continue_token.clone()),
            remaining_item_count: self.remaining.map(|r| r as i64),
            self_link: None,
        }
    }

    /// The page with each item made a JSON value by `item`.
    pub fn into_list(
        self,
        item: impl Fn(&[u8]) -> Result<Value, ApiError>,
    ) -> Result<ListResult, ApiError> {
        Ok(ListResult {
            items: self
                .items
                .iter()
                .map(|b| item(b))
                .collect::<Result<_, _>>()?,
            resource_version: self.resource_version,
            continue_token: self.continue_token,
            remaining: self.remaining,
        })
    }
}

/// `v` as JSON bytes.
fn encode(v: &Value) -> Bytes {
    serde_json::to_vec(v).expect("a JSON value encodes").into()
}

/// One page of a list.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ListResult {
    /// The matching objects, in key order.
    pub items: Vec<Value>,
    /// The list's resourceVersion.
    pub resource_version: u64,
    /// Token for the next page ("" when this is the last one).
    pub continue_token: String,
    /// Objects left after this page, when the store knows.
    pub remaining: Option<u64>,
}

/// An object as a store wrote it (create, update).
#[derive(Debug, Clone, PartialEq)]
pub struct Stored {
    /// The object as stored, resourceVersion set.
    pub object: Value,
    /// Its JSON encoding, when the store has it at hand and it is what the request's version
    /// shows: the answer is then sent as these bytes instead of encoding `object` again
    /// (measured for custom-resource creates: 199,238 → 194,634 gateway instructions per
    /// request, `loadtest/instructions-per-request.sh`).
    pub encoded: Option<Vec<u8>>,
}

impl From<Value> for Stored {
    fn from(object: Value) -> Self {
        Stored {
            object,
            encoded: None,
        }
    }
}

/// Where the objects of one resource live. `namespace` is "" for cluster-scoped resources.
///
/// Errors are the Status the client sees: NotFound / AlreadyExists built by the store for
/// its resource, and Conflict when a conditional write lost its compare-and-swap (the
/// generic handlers re-read and re-apply then, see [`crate::retry`]).
pub trait Store: Send + Sync {
    /// The stored object (404 when absent).
    fn get(
        &self,
        namespace: &str,
        name: &str,
    ) -> impl Future<Output = Result<Value, ApiError>> + Send;

    /// One page of the objects of `namespace` ("" for all namespaces).
    fn list(
        &self,
        namespace: &str,
        opts: &ListOptions,
    ) -> impl Future<Output = Result<ListResult, ApiError>> + Send;

    /// [`Store::get`] as the JSON the client receives. By default the object encoded; a
    /// store that holds objects as bytes sends them as they are.
    fn get_encoded(
        &self,
        namespace: &str,
        name: &str,
    ) -> impl Future<Output = Result<Bytes, ApiError>> + Send {
        async move { Ok(encode(&self.get(namespace, name).await?)) }
    }

    /// [`Store::list`] as the objects' JSON bytes (see [`EncodedList`]). By default each
    /// object of the page encoded.
    fn list_encoded(
        &self,
        namespace: &str,
        opts: &ListOptions,
    ) -> impl Future<Output = Result<EncodedList, ApiError>> + Send {
        async move {
            let l = self.list(namespace, opts).await?;
            Ok(EncodedList {
                items: l.items.iter().map(encode).collect(),
                resource_version: l.resource_version,
                continue_token: l.continue_token,
                remaining: l.remaining,
            })
        }
    }

    /// Stores a new object (409 AlreadyExists when the name is taken) and returns it as
    /// stored, resourceVersion set. With `dry_run` every check runs but nothing is written
    /// (upstream's `DryRunnableStorage`).
    fn create(
        &self,
        obj: Value,
        dry_run: bool,
    ) -> impl Future<Output = Result<Stored, ApiError>> + Send;

    /// Whether `old`, read from this store, is stored in a stale form that an update must
    /// rewrite even when nothing changed: encryption at rest opened it with a key that no
    /// longer writes (etcd3 store.go `GuaranteedUpdate` writes when `origState.stale`,
    /// which is how `kubectl replace` moves Secrets to a new key). By default never.
    fn stale(&self, old: &Value) -> bool {
        let _ = old;
        false
    }

    /// Replaces `old`, the stored state the write was prepared from, iff the stored
    /// resourceVersion is still `old`'s ([`stored_rv`], else a Conflict); returns the object
    /// as stored. `old` also lets a store compare the two states (the gateway records the
    /// owner references an update adds for the garbage collector).
    fn update(
        &self,
        obj: Value,
        old: &Value,
        dry_run: bool,
    ) -> impl Future<Output = Result<Stored, ApiError>> + Send;

    /// Runs before a deletion write of the object `obj` (its last state): its removal, by a
    /// DELETE or by the update that removes its last finalizer, or its marking as deleting
    /// (store.go's deletion hooks). The gateway records the garbage collector's work item
    /// there. Nothing by default.
    fn before_delete(
        &self,
        obj: &Value,
        dry_run: bool,
    ) -> impl Future<Output = Result<(), ApiError>> + Send {
        let _ = (obj, dry_run);
        async { Ok(()) }
    }

    /// The first DELETE of a resource whose REST.Delete marks objects its own way
    /// (apiextensions-apiserver pkg/registry/customresourcedefinition/etcd.go `REST.Delete`:
    /// a CRD not yet being deleted gets deletionTimestamp, its cleanup finalizer and the
    /// Terminating condition, whatever the propagation policy). `Some(marked)` answers the
    /// request; the mark is a compare-and-swap on `expected_rv` (a Conflict when it lost).
    /// `None`, the default: the generic deletion plan runs.
    fn mark_deleting(
        &self,
        old: &Value,
        expected_rv: u64,
        dry_run: bool,
    ) -> impl Future<Output = Result<Option<Value>, ApiError>> + Send {
        let _ = (old, expected_rv, dry_run);
        async { Ok(None) }
    }

    /// Removes the object iff its stored resourceVersion is still `expected_rv` (else a
    /// Conflict); returns the last state.
    fn delete(
        &self,
        namespace: &str,
        name: &str,
        expected_rv: u64,
        dry_run: bool,
    ) -> impl Future<Output = Result<Value, ApiError>> + Send;
}

/// The resourceVersion of a stored object (0 when missing or unparsable).
pub fn stored_rv(obj: &Value) -> u64 {
    obj.pointer("/metadata/resourceVersion")
        .and_then(Value::as_str)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0)
}
