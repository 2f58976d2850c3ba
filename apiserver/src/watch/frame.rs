//! `WatchEvent` frames as the JSON stream carries them: one `{"type":…,"object":…}` line per
//! event, BOOKMARK objects, and the queue item a watcher's response takes them from.
//!
//! Where it sits: rendered once per event by the gateway's shared streams (shared by every
//! watcher that gets the same bytes) and per watcher by [`super::response`]. Follows
//! apimachinery pkg/apis/meta/v1 `WatchEvent` and apiserver handlers/watch.go (bookmarks,
//! the `k8s.io/initial-events-end` annotation of watch-list).

use bytes::Bytes;
use serde_json::json;

/// The `type` of an event from its storage byte (`A`dded, `D`eleted, anything else
/// Modified).
pub fn type_name(kind: u8) -> &'static str {
    match kind {
        b'A' => "ADDED",
        b'D' => "DELETED",
        _ => "MODIFIED",
    }
}

/// `{"type":"<T>","object":<object>}\n`.
pub fn event_line(kind: &str, object: &[u8]) -> Bytes {
    let mut v = Vec::with_capacity(object.len() + 32);
    v.extend_from_slice(b"{\"type\":\"");
    v.extend_from_slice(kind.as_bytes());
    v.extend_from_slice(b"\",\"object\":");
    v.extend_from_slice(object);
    v.extend_from_slice(b"}\n");
    Bytes::from(v)
}

/// A BOOKMARK event at `rv` for objects of `kind`/`api_version`; `initial_end` marks the
/// end of a watch-list's initial events (`k8s.io/initial-events-end: "true"`).
pub fn bookmark_line(kind: &str, api_version: &str, rv: u64, initial_end: bool) -> Bytes {
    let mut meta = json!({"resourceVersion": rv.to_string()});
    if initial_end {
        meta["annotations"] = json!({"k8s.io/initial-events-end": "true"});
    }
    let obj = json!({"kind": kind, "apiVersion": api_version, "metadata": meta});
    event_line("BOOKMARK", &serde_json::to_vec(&obj).expect("json"))
}

/// What a watcher's queue carries.
#[derive(Debug, Clone)]
pub enum Item {
    /// A rendered JSON line (shared between watchers).
    Line {
        /// The `{"type":...,"object":...}` line.
        line: Bytes,
        /// Revision of the event.
        rv: u64,
    },
    /// The object for a watcher that renders itself (Table output), or that still needs
    /// read defaulting (`needs_defaults`: as stored, not yet transformed).
    Raw {
        /// The object's JSON.
        object: Bytes,
        /// Revision of the event.
        rv: u64,
        /// Storage event kind byte (`A`, `M`, `D`; [`type_name`] gives the watch event
        /// type). A byte rather than the type's name: with the flag below it fits in the
        /// padding, so an `Item` is 48 bytes (the gateway's `watch_mux` tests check it).
        kind: u8,
        /// The object still needs read defaulting.
        needs_defaults: bool,
    },
}

impl Item {
    /// Revision of the event.
    pub fn rv(&self) -> u64 {
        match self {
            Item::Line { rv, .. } | Item::Raw { rv, .. } => *rv,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    #[test]
    fn frames() {
        assert_eq!(
            &event_line("ADDED", b"{\"a\":1}")[..],
            b"{\"type\":\"ADDED\",\"object\":{\"a\":1}}\n"
        );
        assert_eq!(
            [type_name(b'A'), type_name(b'D'), type_name(b'M')],
            ["ADDED", "DELETED", "MODIFIED"]
        );
        let b: Value = serde_json::from_slice(&bookmark_line("K", "g/v1", 7, true)).unwrap();
        assert_eq!(b["type"], "BOOKMARK");
        assert_eq!(b["object"]["kind"], "K");
        assert_eq!(b["object"]["apiVersion"], "g/v1");
        assert_eq!(b["object"]["metadata"]["resourceVersion"], "7");
        assert_eq!(
            b["object"]["metadata"]["annotations"]["k8s.io/initial-events-end"],
            "true"
        );
        let b: Value = serde_json::from_slice(&bookmark_line("K", "g/v1", 7, false)).unwrap();
        assert!(b["object"]["metadata"].get("annotations").is_none());
    }
}
