//! One watcher's response (`crdplane_apiserver::watch::Response`), in process, over an
//! in-memory event source: order (initial events, then the source's), coalescing of waiting
//! events into one chunk, periodic bookmarks at the caught-up revision, the timeout, the
//! end signal (waiting events still go out), an ending source event, and batched
//! preparation with the first-event flag of Table output.

use bytes::Bytes;
use crdplane_apiserver::watch::{Item, Renderer, Response, Source, event_line};
use futures::future::BoxFuture;
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::mpsc;

/// Events sent into a channel; `caught_up` plays the shared stream's dispatched revision.
struct Chan {
    rx: mpsc::UnboundedReceiver<(Item, bool)>,
    caught_up: Option<u64>,
}

impl Source for Chan {
    async fn next(&mut self) -> Option<(Item, bool)> {
        self.rx.recv().await
    }
    fn try_next(&mut self) -> Option<Item> {
        self.rx.try_recv().ok().map(|(i, _)| i)
    }
    fn caught_up_to(&self) -> Option<u64> {
        self.caught_up
    }
}

/// Renders Raw items as `RAW <first> <object>` lines; with `prepare`, records the batch
/// sizes it prepared and turns each Raw item into a line.
#[derive(Default, Clone)]
struct Lines {
    prepare: bool,
    batches: Arc<Mutex<Vec<usize>>>,
}

impl Renderer for Lines {
    fn render(&mut self, _kind: u8, object: Bytes, first: bool) -> Option<Bytes> {
        Some(Bytes::from(format!(
            "RAW {first} {}\n",
            String::from_utf8_lossy(&object)
        )))
    }
    fn bookmark(&self, rv: u64) -> Bytes {
        Bytes::from(format!("BOOKMARK {rv}\n"))
    }
    fn prepares(&self) -> bool {
        self.prepare
    }
    async fn prepare(&self, items: Vec<Item>) -> Vec<Item> {
        self.batches.lock().unwrap().push(items.len());
        items
            .into_iter()
            .map(|i| match i {
                Item::Raw { object, rv, .. } => Item::Line {
                    line: event_line("MODIFIED", &object),
                    rv,
                },
                line => line,
            })
            .collect()
    }
}

fn line(s: &str, rv: u64) -> Item {
    Item::Line {
        line: Bytes::from(format!("{s}\n")),
        rv,
    }
}

fn raw(s: &str, rv: u64) -> Item {
    Item::Raw {
        object: Bytes::from(s.to_string()),
        rv,
        kind: b'M',
        needs_defaults: true,
    }
}

fn chan(caught_up: Option<u64>) -> (mpsc::UnboundedSender<(Item, bool)>, Chan) {
    let (tx, rx) = mpsc::unbounded_channel();
    (tx, Chan { rx, caught_up })
}

fn text(b: &Bytes) -> &str {
    std::str::from_utf8(b).unwrap()
}

#[tokio::test]
async fn initial_events_first_then_waiting_events_coalesced() {
    let (tx, src) = chan(None);
    let initial: VecDeque<Item> = [line("a", 1), line("b", 2)].into();
    tx.send((line("c", 3), false)).unwrap();
    tx.send((line("d", 4), false)).unwrap();
    let mut r = Response::new(
        src,
        Lines::default(),
        initial,
        0,
        Duration::from_secs(60),
        false,
        None,
    );
    // Everything already there goes out as one chunk, in order.
    assert_eq!(text(&r.next_chunk().await.unwrap()), "a\nb\nc\nd\n");
    tx.send((line("e", 5), false)).unwrap();
    assert_eq!(text(&r.next_chunk().await.unwrap()), "e\n");
    // An event that ends the watch goes out, then the body ends.
    tx.send((line("ERROR", 0), true)).unwrap();
    assert_eq!(text(&r.next_chunk().await.unwrap()), "ERROR\n");
    assert!(r.next_chunk().await.is_none());
}

#[tokio::test(start_paused = true)]
async fn bookmarks_name_the_caught_up_revision_and_the_timeout_ends_the_body() {
    let (tx, src) = chan(Some(40));
    let mut r = Response::new(
        src,
        Lines::default(),
        VecDeque::new(),
        7,
        Duration::from_secs(150),
        true,
        None,
    );
    tx.send((line("x", 9), false)).unwrap();
    assert_eq!(text(&r.next_chunk().await.unwrap()), "x\n");
    // After a minute of silence: a bookmark at what the stream dispatched (40), above what
    // was delivered (9).
    let t0 = tokio::time::Instant::now();
    assert_eq!(text(&r.next_chunk().await.unwrap()), "BOOKMARK 40\n");
    assert_eq!(t0.elapsed(), Duration::from_secs(60));
    // An event delivered above the stream's revision: the next bookmark names it.
    tx.send((line("y", 50), false)).unwrap();
    assert_eq!(text(&r.next_chunk().await.unwrap()), "y\n");
    assert_eq!(text(&r.next_chunk().await.unwrap()), "BOOKMARK 50\n");
    assert_eq!(t0.elapsed(), Duration::from_secs(120));
    // Then the 150 s timeout ends it.
    assert!(r.next_chunk().await.is_none());
    assert_eq!(t0.elapsed(), Duration::from_secs(150));
}

#[tokio::test(start_paused = true)]
async fn without_a_caught_up_revision_bookmarks_name_what_was_delivered() {
    let (tx, src) = chan(None);
    let mut r = Response::new(
        src,
        Lines::default(),
        VecDeque::new(),
        7,
        Duration::from_secs(3600),
        true,
        None,
    );
    assert_eq!(text(&r.next_chunk().await.unwrap()), "BOOKMARK 7\n");
    tx.send((line("z", 12), false)).unwrap();
    assert_eq!(text(&r.next_chunk().await.unwrap()), "z\n");
    assert_eq!(text(&r.next_chunk().await.unwrap()), "BOOKMARK 12\n");
}

#[tokio::test]
async fn the_end_signal_sends_what_is_waiting_then_ends() {
    let (tx, src) = chan(None);
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let stop: BoxFuture<'static, ()> = Box::pin(async move {
        let _ = stop_rx.await;
    });
    let mut r = Response::new(
        src,
        Lines::default(),
        VecDeque::new(),
        0,
        Duration::from_secs(60),
        false,
        Some(stop),
    );
    tx.send((line("a", 1), false)).unwrap();
    assert_eq!(text(&r.next_chunk().await.unwrap()), "a\n");
    tx.send((line("b", 2), false)).unwrap();
    tx.send((line("c", 3), false)).unwrap();
    stop_tx.send(()).unwrap();
    // b and c were waiting when the signal came (which branch wins is the scheduler's):
    // both go out, nothing after them.
    let mut out = String::new();
    while let Some(c) = r.next_chunk().await {
        out.push_str(text(&c));
    }
    assert_eq!(out, "b\nc\n");
}

#[tokio::test]
async fn preparation_runs_in_batches_and_only_prepared_items_go_out() {
    let (tx, src) = chan(None);
    let renderer = Lines {
        prepare: true,
        ..Default::default()
    };
    let batches = renderer.batches.clone();
    let n = Response::<Chan, Lines>::PREPARE_BATCH + 10;
    let initial: VecDeque<Item> = (0..n as u64)
        .map(|i| raw(&format!("o{i}"), i + 1))
        .collect();
    let mut r = Response::new(
        src,
        renderer,
        initial,
        0,
        Duration::from_secs(60),
        false,
        None,
    );
    let mut out = String::new();
    while out.lines().count() < n {
        out.push_str(text(&r.next_chunk().await.unwrap()));
    }
    assert_eq!(
        *batches.lock().unwrap(),
        [Response::<Chan, Lines>::PREPARE_BATCH, 10]
    );
    assert!(
        out.starts_with("{\"type\":\"MODIFIED\",\"object\":o0}\n"),
        "{out}"
    );
    // Live events arriving together are prepared together.
    for i in 0..3 {
        tx.send((raw(&format!("l{i}"), 1000 + i), false)).unwrap();
    }
    let c = r.next_chunk().await.unwrap();
    assert_eq!(text(&c).lines().count(), 3, "{}", text(&c));
    assert_eq!(batches.lock().unwrap().last(), Some(&3));
}

#[tokio::test]
async fn table_rows_know_the_first_event() {
    let (tx, src) = chan(None);
    let initial: VecDeque<Item> = [raw("a", 1)].into();
    let mut r = Response::new(
        src,
        Lines::default(),
        initial,
        0,
        Duration::from_secs(60),
        false,
        None,
    );
    tx.send((raw("b", 2), false)).unwrap();
    assert_eq!(
        text(&r.next_chunk().await.unwrap()),
        "RAW true a\nRAW false b\n"
    );
}
