//! The watch response: the watch options and their upstream validation ([`options`]), the
//! `WatchEvent` frames ([`frame`]) and one watcher's response body ([`response`]: its queue,
//! bookmarks, timeout, batching and coalescing over an event [`response::Source`]).
//!
//! Where it sits: under a family's watch handler, which resolves what is watched and where
//! the events come from (the gateway's shared storage streams or a private storage watch)
//! and hands both to [`response::Response`]. Follows k8s.io/apiserver
//! pkg/endpoints/handlers/watch.go (`WatchServer.HandleHTTP`) and apimachinery
//! pkg/apis/meta/internalversion/validation (`ValidateListOptions`, watch branch).

pub mod frame;
pub mod options;
pub mod response;

pub use frame::{Item, bookmark_line, event_line, type_name};
pub use options::{WatchOptions, WatchQuery, watch_options};
pub use response::{Renderer, Response, Source};
