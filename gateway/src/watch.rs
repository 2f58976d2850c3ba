//! Watch streams: `?watch=true` and the legacy `/watch/` paths, for custom resources, CRDs
//! and namespaces.
//!
//! HTTP request → parameters checked with upstream's rules
//! (k8s.io/apimachinery/pkg/apis/meta/internalversion/validation) → initial state from one
//! storage `List` when the watch starts from "0"/unset or asks for initial events → the
//! gateway's shared upstream stream of the resource ([`crate::watch_mux`]: one storage
//! `Watch` per (tenant, resource), events rendered once, per-watcher selector transitions,
//! bounded per-watcher queues), or a private storage `Watch` when the requested revision is
//! older than the shared stream remembers → newline-delimited `{"type":…,"object":…}`
//! frames (Table rows when asked; `columnDefinitions` only on the first event, as apiserver
//! handlers/response.go). Bookmarks (`allowWatchBookmarks`), watch-list
//! (`sendInitialEvents=true` ends the initial state with a BOOKMARK annotated
//! `k8s.io/initial-events-end: "true"`), `timeoutSeconds`. Events already queued for a
//! watcher are written together, so a watcher that is behind catches up in few writes.
//! Objects are served as stored apart from the apiVersion rewrite (no read-time defaulting
//! for watches, as for the rest of the gateway's watch path).

use crate::context::{Ctx, Req};
use crate::crd::{CrdInfo, CrdNow};
use crate::http::{Body, Output, negotiate_output};
use crate::table::IncludeObject;
use bytes::Bytes;
use crdplane_core::{ApiError, ResourceRef};
use http::{HeaderValue, Response, StatusCode, header};
use http_body_util::{BodyExt, StreamBody};
use serde_json::{Value, json};
use std::sync::Arc;
use tokio::sync::broadcast;

/// Renders objects as a Table (with or without column definitions).
pub type TableFn = Arc<dyn Fn(&[Value], bool, IncludeObject) -> Value + Send + Sync>;

/// The [`TableFn`] of a resource whose rows come from `table` alone (no list metadata).
pub fn table_fn(table: &'static crate::table::TableConvertor) -> TableFn {
    Arc::new(move |objs, with_cols, include| {
        table.to_table_with(
            objs,
            include,
            &crate::table::ListMeta::default(),
            chrono::Utc::now(),
            with_cols,
        )
    })
}

/// What one watch streams.
pub struct Target {
    /// The tenant's resource in the storage service.
    pub resource: ResourceRef,
    /// Namespace watched ("" = all namespaces or cluster scope).
    pub namespace: String,
    /// Name of the single object watched ("" = every object).
    pub name: String,
    /// apiVersion of the served objects and of BOOKMARK events.
    pub api_version: String,
    /// Kind of the served objects and of BOOKMARK events.
    pub kind: String,
    /// Table rendering, for `Accept: ...;as=Table` watches.
    pub table: TableFn,
    /// The `labelSelector` query parameter.
    pub label_selector: String,
    /// The `fieldSelector` query parameter.
    pub field_selector: String,
    /// Post-processing of each event object (version conversion).
    pub transform: Option<Arc<dyn Fn(Bytes) -> Bytes + Send + Sync>>,
    /// Read defaulting of event objects (custom resources whose served version's schema has
    /// defaults); applied after `transform`, a batch of objects per call.
    pub normalize: Option<Normalizer>,
    /// The CRD a custom resource watch serves (of `resource.tenant`): the watch ends once
    /// that CRD is gone or re-specified (see `crd_gone`).
    pub crd: Option<Arc<CrdInfo>>,
}

/// Resolves once the watched CRD (`crd` of `tenant`) is reported deleted, replaced (another
/// uid under the same name) or changed in what its serving depends on (spec, accepted names,
/// see [`crate::crd::serving_hash`]); never when `rx` is None. Upstream ends such watches
/// when it tears down the CRD's storage (apiextensions-apiserver `customresource_handler.go`:
/// `removeStorage_locked` → `tearDown` destroys the storage, whose cacher stops its
/// watchers, which ends their responses); clients such as informers then watch again from
/// their last resourceVersion.
async fn crd_gone(
    crd: Option<&CrdInfo>,
    tenant: &str,
    rx: &mut Option<broadcast::Receiver<Arc<CrdNow>>>,
) {
    let (Some(crd), Some(rx)) = (crd, rx) else {
        return std::future::pending().await;
    };
    loop {
        match rx.recv().await {
            Ok(c)
                if c.tenant == tenant
                    && c.name == crd.name
                    && c.now.as_ref().is_none_or(|(uid, serving)| {
                        *uid != crd.uid || *serving != crd.serving
                    }) =>
            {
                return;
            }
            Ok(_) | Err(broadcast::error::RecvError::Lagged(_)) => {}
            Err(broadcast::error::RecvError::Closed) => return std::future::pending().await,
        }
    }
}

/// The end signal of a custom-resource watch: [`crd_gone`] over its own receiver.
fn crd_stop(
    crd: Arc<CrdInfo>,
    tenant: String,
    rx: broadcast::Receiver<Arc<CrdNow>>,
) -> futures::future::BoxFuture<'static, ()> {
    Box::pin(async move {
        let mut rx = Some(rx);
        crd_gone(Some(&crd), &tenant, &mut rx).await
    })
}

/// What ends a watch early: its CRD going away (`gone`, custom resources only) or the
/// gateway stopping (the client then watches again, from its last resourceVersion, on
/// another gateway).
fn stop_on(
    gone: Option<futures::future::BoxFuture<'static, ()>>,
    shutdown: &crdplane_transport::Shutdown,
) -> futures::future::BoxFuture<'static, ()> {
    let stopping = shutdown.triggered();
    match gone {
        None => Box::pin(stopping),
        Some(gone) => Box::pin(async move {
            tokio::select! {
                _ = gone => {}
                _ = stopping => {}
            }
        }),
    }
}

/// The request's watch options, checked with upstream's rules
/// (`crdplane_apiserver::watch::watch_options`).
pub fn params(req: &Req) -> Result<WatchOptions, ApiError> {
    let q = &req.query;
    watch_options(WatchQuery {
        resource_version: q.get("resourceVersion").unwrap_or(""),
        resource_version_match: q.get("resourceVersionMatch").unwrap_or(""),
        // A `*bool` of the parameter codec: any value parses (http::query_bool).
        send_initial_events: q.opt_flag("sendInitialEvents"),
        allow_watch_bookmarks: q.flag("allowWatchBookmarks"),
        timeout_seconds: q.get("timeoutSeconds"),
    })
}

use crate::watch_mux::{
    self, DirectWatch, Joined, Mux, Normalizer, Spec, Subscription, WatchFilter, WatchScope,
    normalize_items,
};
use crdplane_apiserver::watch::{
    Item, Renderer, Response as WatchResponse, Source, WatchOptions, WatchQuery, bookmark_line,
    event_line, type_name, watch_options,
};

/// Where a watcher's events come from.
enum Events {
    /// A shared upstream stream of this gateway (the normal case).
    Shared(Subscription),
    /// A private storage watch (resume from a revision older than the shared ring), with
    /// what the watcher asked for.
    Direct(DirectWatch, Arc<Spec>),
}

impl Source for Events {
    async fn next(&mut self) -> Option<(Item, bool)> {
        match self {
            Events::Shared(sub) => sub.rx.recv().await.map(|i| (i, false)),
            Events::Direct(stream, spec) => loop {
                match stream.next().await? {
                    Ok((kind, object, rv)) => {
                        // Defense in depth: storage decides namespace and name already; an
                        // event of another namespace or name never goes out (upstream's
                        // cacher filters every event by the watcher's key prefix).
                        if !watch_mux::object_in_scope(&spec.filter, &object) {
                            continue;
                        }
                        return Some((spec.item(kind, object, rv), false));
                    }
                    // The storage service went away mid-stream (a restart, a Redis outage):
                    // the watch ends cleanly, as the shared streams hide such a gap from
                    // their watchers; the client watches again from its last revision and
                    // storage replays the gap from its history. An ERROR event here would be
                    // a failure the client must handle although nothing is lost.
                    Err(e) if e.code == 503 || e.code == 504 => return None,
                    Err(e) => {
                        let line = event_line("ERROR", &e.to_json());
                        return Some((Item::Line { line, rv: 0 }, true));
                    }
                }
            },
        }
    }

    fn try_next(&mut self) -> Option<Item> {
        match self {
            Events::Shared(sub) => sub.rx.try_recv().ok(),
            Events::Direct(..) => None,
        }
    }

    fn caught_up_to(&self) -> Option<u64> {
        match self {
            Events::Shared(sub) => Some(sub.current_rv()),
            Events::Direct(..) => None,
        }
    }
}

/// What one watch renders itself: Table rows, its kind's BOOKMARKs, read defaulting.
struct Render {
    target: Target,
    output: Output,
    include: IncludeObject,
}

impl Renderer for Render {
    fn render(&mut self, kind: u8, object: Bytes, first: bool) -> Option<Bytes> {
        let object = match &self.target.transform {
            Some(f) => f(object),
            None => object,
        };
        let o = serde_json::from_slice::<Value>(&object).ok()?;
        let mut table = (self.target.table)(&[o], first, self.include);
        if self.output == Output::Table("v1beta1") {
            table["apiVersion"] = json!("meta.k8s.io/v1beta1");
        }
        Some(event_line(
            type_name(kind),
            &serde_json::to_vec(&table).expect("json"),
        ))
    }

    fn bookmark(&self, rv: u64) -> Bytes {
        bookmark_line(&self.target.kind, &self.target.api_version, rv, false)
    }

    fn prepares(&self) -> bool {
        self.target.normalize.is_some()
    }

    /// Read defaulting (see [`normalize_items`]).
    async fn prepare(&self, items: Vec<Item>) -> Vec<Item> {
        match &self.target.normalize {
            Some(norm) => {
                let table = matches!(self.output, Output::Table(_));
                normalize_items(items, &self.target.transform, norm, table).await
            }
            None => items,
        }
    }
}

/// What a watch's read defaulting depends on: the served apiVersion and the CRD's uid and
/// serving hash (schema included). Watchers with equal keys share the shared stream's
/// defaulted events.
fn defaulting_key(t: &Target) -> String {
    match &t.crd {
        Some(c) => format!("defaulted {} {} {}", t.api_version, c.uid, c.serving),
        None => format!("defaulted {}", t.api_version),
    }
}

/// Serves one watch request on `t`: a chunked stream of `WatchEvent` lines (JSON or Table).
pub async fn serve(ctx: &Ctx, req: &Req, t: Target) -> Result<Response<Body>, ApiError> {
    let p = params(req)?;
    let output = negotiate_output(req.header(http::header::ACCEPT))?;
    let include = match req.query.get("includeObject") {
        Some("None") => IncludeObject::None,
        Some("Object") => IncludeObject::Object,
        _ => IncludeObject::Metadata,
    };
    let spec = Arc::new(Spec {
        filter: WatchFilter::new(&t.namespace, &t.name, &t.label_selector, &t.field_selector)?,
        api_version: t.api_version.clone(),
        transform: t.transform.clone(),
        raw: matches!(output, Output::Table(_)),
        defaulting: t.normalize.clone().map(|normalize| {
            Arc::new(watch_mux::Defaulting {
                key: defaulting_key(&t),
                normalize,
            })
        }),
    });
    let mux = Mux::for_endpoint(&ctx.cfg.storage_endpoint, &ctx.storage);
    let mut pending = std::collections::VecDeque::new();
    // Watch from "0"/unset starts with the current state (synthetic ADDED events), read
    // with one list; live events then follow from the list's revision.
    let send_initial = p.send_initial_events || p.from_rv.is_none();
    let scope = WatchScope {
        resource: &t.resource,
        namespace: &t.namespace,
        name: &t.name,
        label_selector: &t.label_selector,
        field_selector: &t.field_selector,
    };
    let (from, start) = if send_initial {
        let (items, rv) = mux.initial_state(&scope).await?;
        pending.extend(items.into_iter().map(|o| spec.item(b'A', o, rv)));
        if p.send_initial_events {
            let line = bookmark_line(&t.kind, &t.api_version, rv, true);
            pending.push_back(Item::Line { line, rv });
        }
        (rv, Some(rv))
    } else {
        let from = p.from_rv.unwrap_or(0);
        let start = if mux.running(&t.resource) {
            None
        } else {
            Some(mux.current_revision(&t.resource).await?)
        };
        (from, start)
    };
    let src = match mux.join(&t.resource, from, start, spec.clone()) {
        Joined::Shared(mut sub) => {
            pending.extend(sub.replay.drain(..));
            Events::Shared(sub)
        }
        Joined::NotCovered => {
            // Older than the shared stream remembers: storage replays history (or answers
            // 410 Expired as an ERROR event).
            Events::Direct(mux.watch_direct(&scope, from).await?, spec)
        }
    };
    let gone = t
        .crd
        .clone()
        .map(|crd| crd_stop(crd, t.resource.tenant.clone(), ctx.crd_changes.subscribe()));
    let stop = Some(stop_on(gone, &ctx.closing));
    // Counted as a registered watcher while the body lives; each event is one line.
    let watching = ctx.metrics.watch(&req.info, &t.kind);
    let render = Render {
        target: t,
        output,
        include,
    };
    let run = WatchResponse::new(src, render, pending, from, p.timeout, p.bookmarks, stop);
    let stream = futures::StreamExt::map(run.into_stream(), move |chunk| {
        watching.sent(chunk.iter().filter(|b| **b == b'\n').count() as u64);
        Ok::<_, std::io::Error>(http_body::Frame::data(chunk))
    });
    let body = StreamBody::new(stream).boxed_unsync();
    let mut r = Response::new(body);
    *r.status_mut() = StatusCode::OK;
    let ct = match output {
        Output::Json => "application/json",
        Output::Table("v1beta1") => "application/json;as=Table;v=v1beta1;g=meta.k8s.io",
        Output::Table(_) => "application/json;as=Table;v=v1;g=meta.k8s.io",
    };
    r.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(ct));
    Ok(r)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::Query;

    fn req(q: &str) -> Req {
        Req {
            info: Default::default(),
            method: http::Method::GET,
            query: Query::parse(Some(q)),
            headers: Default::default(),
            body: Bytes::new(),
            body_dups: Default::default(),
            user: None,
        }
    }

    #[test]
    fn parameters_from_the_query() {
        // The query's names and the `*bool` codec of sendInitialEvents; the rules
        // themselves are the machinery's (crdplane_apiserver::watch::options).
        let p = params(&req("watch=1&resourceVersion=12&timeoutSeconds=5")).unwrap();
        assert_eq!(
            (
                p.from_rv,
                p.timeout.as_secs(),
                p.send_initial_events,
                p.bookmarks
            ),
            (Some(12), 5, false, false)
        );
        let ok = params(&req("watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true")).unwrap();
        assert!(ok.send_initial_events && ok.bookmarks);
        let e = params(&req(
            "watch=1&sendInitialEvents=1&resourceVersionMatch=NotOlderThan",
        ))
        .unwrap_err();
        assert!(
            e.message.contains("allowWatchBookmarks required"),
            "{}",
            e.message
        );
        assert_eq!(
            params(&req("watch=1&resourceVersionMatch=NotOlderThan"))
                .unwrap_err()
                .code,
            422
        );
    }
}
