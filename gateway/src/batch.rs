//! Coalescing of concurrent GETs into storage `GetMany` calls: sits between the custom
//! resource GET handler (`crs::get`) and the storage service.
//!
//! At most `max_in_flight` GetMany calls run at once. A GET that finds a slot free goes out
//! at once, alone, so an idle gateway adds no latency; the GETs that arrive while every slot
//! is busy wait for the next free slot and then go out together, as one gRPC call and one
//! Redis pipeline. Under load the per-request cost of a gRPC exchange and a Redis round trip
//! is shared by the whole batch. Every GET still reads Redis after it arrived, so the result
//! is as current as a lone `Get` (the read is served from storage, never from a cache).

use crate::api::Channel;
use crdplane_proto::v1 as pb;
use crdplane_proto::v1::storage_client::StorageClient;
use std::sync::{Arc, OnceLock};
use tokio::sync::{Semaphore, mpsc, oneshot};
use tonic::Status;

/// Most keys sent in one call (storage accepts up to `MAX_GET_MANY`).
pub const MAX_BATCH: usize = 256;

type Reply = oneshot::Sender<Result<pb::GetResult, Status>>;

/// Handle to the batching task (started on first use, on the caller's runtime).
pub struct GetBatcher {
    storage: StorageClient<Channel>,
    max_in_flight: usize,
    tx: OnceLock<mpsc::UnboundedSender<(pb::ObjectKey, Reply)>>,
}

impl GetBatcher {
    pub fn new(storage: StorageClient<Channel>, max_in_flight: usize) -> Self {
        Self {
            storage,
            max_in_flight: max_in_flight.max(1),
            tx: OnceLock::new(),
        }
    }

    /// The stored object at `key` (`found: false` when there is none).
    pub async fn get(&self, key: pb::ObjectKey) -> Result<pb::GetResult, Status> {
        let tx = self.tx.get_or_init(|| {
            let (tx, rx) = mpsc::unbounded_channel();
            tokio::spawn(run(self.storage.clone(), rx, self.max_in_flight));
            tx
        });
        let (reply, wait) = oneshot::channel();
        tx.send((key, reply))
            .map_err(|_| Status::unavailable("get batcher stopped"))?;
        wait.await
            .map_err(|_| Status::unavailable("get batcher dropped the request"))?
    }
}

async fn run(
    storage: StorageClient<Channel>,
    mut rx: mpsc::UnboundedReceiver<(pb::ObjectKey, Reply)>,
    max_in_flight: usize,
) {
    let slots = Arc::new(Semaphore::new(max_in_flight));
    loop {
        let Ok(slot) = slots.clone().acquire_owned().await else {
            return;
        };
        let Some(first) = rx.recv().await else {
            return;
        };
        let mut keys = vec![first.0];
        let mut replies = vec![first.1];
        while keys.len() < MAX_BATCH {
            match rx.try_recv() {
                Ok((k, r)) => {
                    keys.push(k);
                    replies.push(r);
                }
                Err(_) => break,
            }
        }
        let mut storage = storage.clone();
        tokio::spawn(async move {
            let n = keys.len();
            match storage.get_many(pb::GetManyRequest { keys }).await {
                Ok(r) => {
                    let results = r.into_inner().results;
                    if results.len() != n {
                        let s = Status::internal(format!(
                            "storage answered {} results for {n} keys",
                            results.len()
                        ));
                        for r in replies {
                            let _ = r.send(Err(s.clone()));
                        }
                    } else {
                        for (r, res) in replies.into_iter().zip(results) {
                            let _ = r.send(Ok(res));
                        }
                    }
                }
                Err(s) => {
                    for r in replies {
                        let _ = r.send(Err(s.clone()));
                    }
                }
            }
            drop(slot);
        });
    }
}
