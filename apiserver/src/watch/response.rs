//! One watcher's response body: the queue of events it has not sent yet, periodic
//! BOOKMARKs (`allowWatchBookmarks`), the watch's timeout, an end signal (the watched
//! resource going away), batched preparation (read defaulting) and coalescing of events
//! already waiting into one body chunk, so a watcher that is behind catches up in few
//! writes.
//!
//! Where it sits: the last step of every watch handler. The handler opens the event
//! [`Source`] (the gateway's shared storage stream of the resource, or a private storage
//! watch replaying older history), queues the initial events, and gives a [`Renderer`]
//! for what only it knows how to render (Table rows, BOOKMARK objects of its kind, read
//! defaulting). Follows k8s.io/apiserver pkg/endpoints/handlers/watch.go
//! (`WatchServer.HandleHTTP`: the timeout, one frame per event, flushing) and the cacher's
//! bookmark timer (pkg/storage/cacher: a bookmark about once a minute).

use super::frame::Item;
use bytes::Bytes;
use futures::future::BoxFuture;
use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

/// How often an idle watch with `allowWatchBookmarks` gets a BOOKMARK (upstream: 1 min).
pub const BOOKMARK_EVERY: Duration = Duration::from_secs(60);

/// Largest body chunk made by joining events already queued for a watcher.
pub const COALESCE_BYTES: usize = 64 << 10;

/// Where one watcher's events come from.
pub trait Source: Send {
    /// The next event, waiting for it: (item, this ends the watch); None when the source
    /// ended.
    fn next(&mut self) -> impl Future<Output = Option<(Item, bool)>> + Send;

    /// An event that is already waiting, without waiting (None: none, or the source cannot
    /// tell without waiting).
    fn try_next(&mut self) -> Option<Item>;

    /// The revision up to which every event this watcher wants has been handed to it
    /// already or is waiting for [`Source::try_next`]; None when the source cannot tell.
    /// A periodic bookmark then names it.
    fn caught_up_to(&self) -> Option<u64>;
}

/// What only the watch handler knows how to render.
pub trait Renderer: Send {
    /// The event line of a [`Item::Raw`] (Table output); `first` is the watcher's first
    /// rendered event (upstream sends column definitions only with it). None skips it.
    fn render(&mut self, kind: u8, object: Bytes, first: bool) -> Option<Bytes>;

    /// A BOOKMARK line at `rv`.
    fn bookmark(&self, rv: u64) -> Bytes;

    /// Whether [`Item::Raw`] items need [`Renderer::prepare`] before they can go out.
    fn prepares(&self) -> bool {
        false
    }

    /// Prepares a batch of queued items (read defaulting), in order; at most
    /// [`Response::PREPARE_BATCH`] per call.
    fn prepare(&self, items: Vec<Item>) -> impl Future<Output = Vec<Item>> + Send {
        async move { items }
    }
}

/// One watch response in progress: the state behind its body stream.
pub struct Response<S, R> {
    src: S,
    renderer: R,
    pending: VecDeque<Item>,
    deadline: Pin<Box<tokio::time::Sleep>>,
    ticker: Option<tokio::time::Interval>,
    /// Ends the watch once it resolves (events already waiting are still sent).
    stop: Option<BoxFuture<'static, ()>>,
    /// Highest revision handed to the client (bookmarks never go below it).
    delivered: u64,
    first: bool,
    done: bool,
    /// With preparation: how many items at the front of `pending` are prepared already.
    prepared: usize,
}

async fn tick(t: &mut Option<tokio::time::Interval>) {
    match t {
        Some(t) => {
            t.tick().await;
        }
        None => std::future::pending().await,
    }
}

async fn stopped(s: &mut Option<BoxFuture<'static, ()>>) {
    match s {
        Some(f) => f.await,
        None => std::future::pending().await,
    }
}

impl<S: Source, R: Renderer> Response<S, R> {
    /// Most items prepared in one [`Renderer::prepare`] call (a watcher that is behind
    /// catches up in batches).
    pub const PREPARE_BATCH: usize = 256;

    /// The response of a watch that has sent nothing yet: `initial` goes out first, then
    /// the source's events; revisions after `from` only (bookmarks never name less). It
    /// ends after `timeout`, when the source ends, or when `stop` resolves; with
    /// `bookmarks` an idle watcher gets a BOOKMARK every [`BOOKMARK_EVERY`].
    pub fn new(
        src: S,
        renderer: R,
        initial: VecDeque<Item>,
        from: u64,
        timeout: Duration,
        bookmarks: bool,
        stop: Option<BoxFuture<'static, ()>>,
    ) -> Self {
        let ticker = bookmarks.then(|| {
            tokio::time::interval_at(tokio::time::Instant::now() + BOOKMARK_EVERY, BOOKMARK_EVERY)
        });
        Response {
            src,
            renderer,
            pending: initial,
            deadline: Box::pin(tokio::time::sleep(timeout)),
            ticker,
            stop,
            delivered: from,
            first: true,
            done: false,
            prepared: 0,
        }
    }

    /// The body as a stream of chunks.
    pub fn into_stream(self) -> impl futures::Stream<Item = Bytes> + Send
    where
        S: 'static,
        R: 'static,
    {
        futures::stream::unfold(self, |mut r| async move {
            let chunk = r.next_chunk().await?;
            Some((chunk, r))
        })
    }

    /// The next chunk of the body, None at the end of the watch.
    pub async fn next_chunk(&mut self) -> Option<Bytes> {
        loop {
            self.prepare().await;
            if let Some(item) = self.pending.pop_front() {
                self.prepared = self.prepared.saturating_sub(1);
                if let Some(b) = self.render(item) {
                    return Some(self.coalesce(b));
                }
                continue;
            }
            if self.done {
                return None;
            }
            tokio::select! {
                _ = self.deadline.as_mut() => return None,
                _ = tick(&mut self.ticker) => self.queue_bookmark(),
                _ = stopped(&mut self.stop) => {
                    // Deliver what has arrived already (for a custom resource, the DELETED
                    // events of its objects come before its CRD goes), then end.
                    while let Some(i) = self.src.try_next() {
                        self.pending.push_back(i);
                    }
                    self.done = true;
                    self.stop = None;
                }
                m = self.src.next() => match m {
                    Some((item, end)) => {
                        self.pending.push_back(item);
                        self.done = end;
                        // With preparation, take what else is waiting so one call
                        // prepares the whole batch.
                        if self.renderer.prepares() {
                            while self.pending.len() < Self::PREPARE_BATCH
                                && let Some(i) = self.src.try_next()
                            {
                                self.pending.push_back(i);
                            }
                        }
                    }
                    None => return None,
                }
            }
        }
    }

    /// Prepares the queued items not prepared yet, in batches.
    async fn prepare(&mut self) {
        if !self.renderer.prepares() || self.prepared >= self.pending.len() {
            return;
        }
        let mut rest: Vec<Item> = self.pending.drain(self.prepared..).collect();
        while !rest.is_empty() {
            let tail = rest.split_off(rest.len().min(Self::PREPARE_BATCH));
            let done = self.renderer.prepare(rest).await;
            self.pending.extend(done);
            rest = tail;
        }
        self.prepared = self.pending.len();
    }

    /// Appends events that are already waiting to `first`, so a watcher that is behind
    /// catches up with few large writes instead of one write per event.
    fn coalesce(&mut self, first: Bytes) -> Bytes {
        let mut out: Option<Vec<u8>> = None;
        let preparing = self.renderer.prepares();
        while out.as_ref().map_or(first.len(), Vec::len) < COALESCE_BYTES {
            // With preparation only items prepared already may go out.
            if preparing && self.prepared == 0 {
                break;
            }
            let next = match self.pending.pop_front() {
                Some(i) => {
                    self.prepared = self.prepared.saturating_sub(1);
                    i
                }
                None if preparing => break,
                None => match self.src.try_next() {
                    Some(i) => i,
                    None => break,
                },
            };
            if let Some(b) = self.render(next) {
                out.get_or_insert_with(|| first.to_vec())
                    .extend_from_slice(&b);
            }
        }
        out.map(Bytes::from).unwrap_or(first)
    }

    /// A periodic BOOKMARK at the revision the watcher has caught up to.
    fn queue_bookmark(&mut self) {
        let mut rv = self.delivered;
        if let Some(current) = self.src.caught_up_to() {
            // Everything this watcher wants up to `current` is queued already: take it
            // all, then bookmark at `current`.
            while let Some(item) = self.src.try_next() {
                rv = rv.max(item.rv());
                self.pending.push_back(item);
            }
            rv = rv.max(current);
        }
        for i in &self.pending {
            rv = rv.max(i.rv());
        }
        let line = self.renderer.bookmark(rv);
        self.pending.push_back(Item::Line { line, rv });
    }

    fn render(&mut self, item: Item) -> Option<Bytes> {
        match item {
            Item::Line { line, rv } => {
                self.delivered = self.delivered.max(rv);
                Some(line)
            }
            Item::Raw {
                kind, object, rv, ..
            } => {
                self.delivered = self.delivered.max(rv);
                let line = self.renderer.render(kind, object, self.first);
                self.first = false;
                line
            }
        }
    }
}
