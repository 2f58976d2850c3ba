//! Coalescing of concurrent service calls into one batched call: sits between the custom
//! resource handlers (`crs::get`, `crs::create`, `crs::admit`) and the storage and validation
//! services (`GetMany`, `CreateMany`, `AdmitMany`).
//!
//! At most `max_in_flight` batched calls of one kind run at once. A request that finds a slot
//! free goes out at once, alone, so an idle gateway adds no latency; the requests that arrive
//! while every slot is busy wait for the next free slot and then go out together, as one gRPC
//! call (and, at the storage service, one Redis pipeline). Under load the per-request cost of
//! a gRPC exchange and a Redis round trip is shared by the whole batch. Nothing is cached or
//! merged: every request is still answered by the service, after it arrived, exactly as its
//! single call would be answered (each item of a batch carries its own result or status).

use crdplane_proto::v1 as pb;
use crdplane_proto::v1::storage_client::StorageClient;
use crdplane_proto::v1::validation_client::ValidationClient;
use crdplane_transport::Channel;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, OnceLock};
use tokio::sync::{Semaphore, mpsc, oneshot};
use tonic::Status;

/// Most requests sent in one call (the services accept up to 1024).
pub const MAX_BATCH: usize = 256;

/// Most request bytes (objects) gathered into one call; a larger single request goes alone.
/// Well under the services' 16 MiB message limit.
pub const MAX_BATCH_BYTES: usize = 4 << 20;

type Reply<R> = oneshot::Sender<Result<R, Status>>;
/// A request, where its answer goes, and the `traceparent` of its span when its trace is
/// sampled (the batch's call carries the first such one; see `run`).
type Pending<Q, R> = (Q, Reply<R>, Option<crdplane_transport::CallContext>);
/// The outcome of a batched call: one result per request, in request order.
type ManyResult<R> = Result<Vec<Result<R, Status>>, Status>;
type CallMany<Q, R> =
    Arc<dyn Fn(Vec<Q>) -> Pin<Box<dyn Future<Output = ManyResult<R>> + Send>> + Send + Sync>;

/// Handle to one batching task (started on first use, on the caller's runtime).
pub struct Batcher<Q, R> {
    call: CallMany<Q, R>,
    weight: fn(&Q) -> usize,
    max_in_flight: usize,
    tx: OnceLock<mpsc::UnboundedSender<Pending<Q, R>>>,
}

impl<Q: Send + 'static, R: Send + 'static> Batcher<Q, R> {
    /// `call` sends one batch; `weight` is a request's size in bytes for [`MAX_BATCH_BYTES`].
    pub fn new<F, Fut>(max_in_flight: usize, weight: fn(&Q) -> usize, call: F) -> Self
    where
        F: Fn(Vec<Q>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = ManyResult<R>> + Send + 'static,
    {
        Self {
            call: Arc::new(move |qs| Box::pin(call(qs))),
            weight,
            max_in_flight: max_in_flight.max(1),
            tx: OnceLock::new(),
        }
    }

    /// The service's answer to `q`, sent alone or in a batch.
    pub async fn call(&self, q: Q) -> Result<R, Status> {
        let tx = self.tx.get_or_init(|| {
            let (tx, rx) = mpsc::unbounded_channel();
            tokio::spawn(run(self.call.clone(), self.weight, rx, self.max_in_flight));
            tx
        });
        let (reply, wait) = oneshot::channel();
        let traced = crdplane_transport::CallContext::current_sampled_trace();
        tx.send((q, reply, traced))
            .map_err(|_| Status::unavailable("request batcher stopped"))?;
        wait.await
            .map_err(|_| Status::unavailable("request batcher dropped the request"))?
    }
}

async fn run<Q: Send + 'static, R: Send + 'static>(
    call: CallMany<Q, R>,
    weight: fn(&Q) -> usize,
    mut rx: mpsc::UnboundedReceiver<Pending<Q, R>>,
    max_in_flight: usize,
) {
    let slots = Arc::new(Semaphore::new(max_in_flight));
    // A request taken off the queue that did not fit the previous batch.
    let mut carry: Option<Pending<Q, R>> = None;
    loop {
        let Ok(slot) = slots.clone().acquire_owned().await else {
            return;
        };
        let first = match carry.take() {
            Some(p) => p,
            None => match rx.recv().await {
                Some(p) => p,
                None => return,
            },
        };
        let (mut batch, mut replies) = (Vec::new(), Vec::new());
        let mut bytes = weight(&first.0);
        let mut traced = first.2;
        batch.push(first.0);
        replies.push(first.1);
        while batch.len() < MAX_BATCH {
            match rx.try_recv() {
                Ok(p) => {
                    let w = weight(&p.0);
                    if bytes + w > MAX_BATCH_BYTES {
                        carry = Some(p);
                        break;
                    }
                    bytes += w;
                    batch.push(p.0);
                    replies.push(p.1);
                    if traced.is_none() {
                        traced = p.2;
                    }
                }
                Err(_) => break,
            }
        }
        // A batch serves many requests, so its call carries no tenant or user (each item
        // names its tenant). When one of its requests is traced, the call continues that
        // request's trace: the services' spans of the batch appear under it. Other traced
        // requests of the same batch (rare at the default sampling) show the gateway's span
        // only.
        let fut = call(batch);
        let fut: Pin<Box<dyn Future<Output = ManyResult<R>> + Send>> = match traced {
            Some(trace) => Box::pin(trace.scope(fut)),
            None => fut,
        };
        tokio::spawn(async move {
            let n = replies.len();
            match fut.await {
                Ok(results) if results.len() == n => {
                    for (r, res) in replies.into_iter().zip(results) {
                        let _ = r.send(res);
                    }
                }
                Ok(results) => {
                    let s = Status::internal(format!(
                        "service answered {} results for {n} requests",
                        results.len()
                    ));
                    for r in replies {
                        let _ = r.send(Err(s.clone()));
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

/// Custom resource GETs, coalesced into storage `GetMany` calls.
pub type GetBatcher = Batcher<pb::ObjectKey, pb::GetResult>;
/// Custom resource creates, coalesced into storage `CreateMany` calls.
pub type CreateBatcher = Batcher<pb::CreateRequest, pb::StoredObject>;
/// Admissions of writes, coalesced into validation `AdmitMany` calls.
pub type AdmitBatcher = Batcher<pb::AdmitRequest, pb::AdmitResponse>;

/// The GET batcher over `storage`, at most `max_in_flight` `GetMany` calls at once.
pub fn gets(storage: StorageClient<Channel>, max_in_flight: usize) -> GetBatcher {
    Batcher::new(
        max_in_flight,
        |_| 0,
        move |keys| {
            let mut storage = storage.clone();
            async move {
                let r = storage.get_many(pb::GetManyRequest { keys }).await?;
                Ok(r.into_inner().results.into_iter().map(Ok).collect())
            }
        },
    )
}

/// One item of a batched answer: its value, or the status it failed with.
fn item<T>(value: Option<T>, error: Option<pb::ItemStatus>) -> Result<T, Status> {
    match (value, error) {
        (_, Some(e)) => Err(e.to_status()),
        (Some(v), None) => Ok(v),
        (None, None) => Err(Status::internal("the service answered an empty result")),
    }
}

/// The create batcher over `storage`, at most `max_in_flight` `CreateMany` calls at once.
pub fn creates(storage: StorageClient<Channel>, max_in_flight: usize) -> CreateBatcher {
    Batcher::new(
        max_in_flight,
        |q| q.object.as_ref().map_or(0, |o| o.head.len() + o.tail.len()),
        move |requests| {
            let mut storage = storage.clone();
            async move {
                let r = storage
                    .create_many(pb::CreateManyRequest { requests })
                    .await?;
                let items = r.into_inner().results.into_iter();
                Ok(items.map(|w| item(w.object, w.error)).collect())
            }
        },
    )
}

/// The admission batcher over `validation`, at most `max_in_flight` `AdmitMany` calls at once.
pub fn admits(validation: ValidationClient<Channel>, max_in_flight: usize) -> AdmitBatcher {
    Batcher::new(
        max_in_flight,
        |q| q.object.len() + q.old_object.len(),
        move |requests| {
            let mut validation = validation.clone();
            async move {
                let r = validation
                    .admit_many(pb::AdmitManyRequest { requests })
                    .await?;
                let items = r.into_inner().results.into_iter();
                Ok(items.map(|a| item(a.response, a.error)).collect())
            }
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::FutureExt;
    use std::sync::Mutex;
    use tokio::sync::Semaphore;

    type Seen = Arc<Mutex<Vec<Vec<u32>>>>;

    /// A batcher (one call in flight) over a fake service that records the batches it was
    /// sent, holds each until `gate` gives it a permit, and answers each number with its
    /// double (odd numbers fail on their own).
    fn doubler(gate: Arc<Semaphore>) -> (Arc<Batcher<u32, u32>>, Seen) {
        let seen: Seen = Default::default();
        let s = seen.clone();
        let b = Batcher::new(
            1,
            |q: &u32| *q as usize,
            move |qs: Vec<u32>| {
                s.lock().unwrap().push(qs.clone());
                let gate = gate.clone();
                async move {
                    gate.acquire().await.unwrap().forget();
                    Ok(qs
                        .into_iter()
                        .map(|q| {
                            if q % 2 == 1 {
                                Err(Status::already_exists(format!("{q}")))
                            } else {
                                Ok(q * 2)
                            }
                        })
                        .collect())
                }
            },
        );
        (Arc::new(b), seen)
    }

    /// Starts `b.call(q)` and polls it once, so the request is queued when this returns.
    fn queued(
        b: &Arc<Batcher<u32, u32>>,
        q: u32,
    ) -> Pin<Box<dyn Future<Output = Result<u32, Status>> + Send>> {
        let b = b.clone();
        let mut f: Pin<Box<dyn Future<Output = _> + Send>> =
            Box::pin(async move { b.call(q).await });
        assert!((&mut f).now_or_never().is_none());
        f
    }

    async fn until_batches(seen: &Seen, n: usize) {
        while seen.lock().unwrap().len() < n {
            tokio::task::yield_now().await;
        }
    }

    #[tokio::test]
    async fn requests_arriving_while_the_slot_is_busy_go_out_together_in_order() {
        let gate = Arc::new(Semaphore::new(0));
        let (b, seen) = doubler(gate.clone());
        let first = queued(&b, 2);
        // The first request goes out alone at once and is held by the service.
        until_batches(&seen, 1).await;
        let rest = [queued(&b, 4), queued(&b, 5), queued(&b, 6)];
        gate.add_permits(2);
        assert_eq!(first.await.unwrap(), 4);
        let got: Vec<_> = futures::future::join_all(rest)
            .await
            .into_iter()
            .map(|r| r.map_err(|s| s.message().to_string()))
            .collect();
        assert_eq!(got, vec![Ok(8), Err("5".to_string()), Ok(12)]);
        assert_eq!(*seen.lock().unwrap(), vec![vec![2], vec![4, 5, 6]]);
    }

    #[tokio::test]
    async fn a_batch_stops_at_the_byte_limit_and_the_rest_goes_next() {
        let gate = Arc::new(Semaphore::new(0));
        let (b, seen) = doubler(gate.clone());
        let big = (MAX_BATCH_BYTES / 2) as u32 & !1;
        let first = queued(&b, 0);
        until_batches(&seen, 1).await;
        let rest = [queued(&b, big), queued(&b, big), queued(&b, big)];
        gate.add_permits(3);
        first.await.unwrap();
        for r in futures::future::join_all(rest).await {
            assert_eq!(r.unwrap(), 2 * big);
        }
        assert_eq!(
            *seen.lock().unwrap(),
            vec![vec![0], vec![big, big], vec![big]]
        );
    }

    #[tokio::test]
    async fn a_failed_call_fails_every_request_of_its_batch() {
        let b: Batcher<u32, u32> = Batcher::new(
            1,
            |_| 0,
            |_qs| async { Err(Status::unavailable("storage down")) },
        );
        let e = b.call(1).await.unwrap_err();
        assert_eq!(
            (e.code(), e.message()),
            (tonic::Code::Unavailable, "storage down")
        );
        let short: Batcher<u32, u32> = Batcher::new(1, |_| 0, |_qs| async { Ok(vec![]) });
        let e = short.call(1).await.unwrap_err();
        assert_eq!(e.message(), "service answered 0 results for 1 requests");
    }
}
