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
use crate::table::{IncludeObject, ListMeta};
use bytes::Bytes;
use crdplane_core::field::FieldError;
use crdplane_core::{ApiError, ResourceRef};
use http::{HeaderValue, Response, StatusCode, header};
use http_body_util::{BodyExt, StreamBody};
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::broadcast;

/// How often an idle watch with `allowWatchBookmarks` gets a BOOKMARK (upstream: 1 min).
pub const BOOKMARK_EVERY: Duration = Duration::from_secs(60);

/// Largest body chunk made by joining events already queued for a watcher.
const COALESCE_BYTES: usize = 64 << 10;

/// Renders objects as a Table (with or without column definitions).
pub type TableFn = Arc<dyn Fn(&[Value], bool, IncludeObject) -> Value + Send + Sync>;

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

/// Most events defaulted in one call (a watcher that is behind catches up in batches).
const NORMALIZE_BATCH: usize = crate::watch_mux::DEFAULT_BATCH;

/// Parsed watch parameters.
#[derive(Debug, Clone, PartialEq)]
pub struct Params {
    /// `resourceVersion` to stream the changes after; None for "" or "0" (start with the
    /// current state as ADDED events).
    pub from_rv: Option<u64>,
    /// `sendInitialEvents=true` (watch-list: initial ADDED events ended by a BOOKMARK).
    pub send_initial_events: bool,
    /// `allowWatchBookmarks=true`.
    pub bookmarks: bool,
    /// `timeoutSeconds`, or upstream's random 30–60 min when absent.
    pub timeout: Duration,
}

fn invalid_list_options(errs: Vec<FieldError>) -> ApiError {
    ApiError::invalid("ListOptions", "meta.k8s.io", "", &errs)
}

/// Watch parameter rules of upstream `ValidateListOptions` (watch branch).
pub fn params(req: &Req) -> Result<Params, ApiError> {
    let q = &req.query;
    let rv = q.get("resourceVersion").unwrap_or("");
    let rvm = q.get("resourceVersionMatch").unwrap_or("");
    // A `*bool` of the parameter codec: any value parses (http::query_bool).
    let sie = q.opt_flag("sendInitialEvents");
    let bookmarks = q.flag("allowWatchBookmarks");
    let mut errs = Vec::new();
    match sie {
        Some(_) => {
            if rvm != "NotOlderThan" {
                errs.push(FieldError::forbidden(
                    "resourceVersionMatch",
                    "sendInitialEvents requires setting resourceVersionMatch to NotOlderThan",
                ));
            }
            if !bookmarks {
                errs.push(FieldError::forbidden(
                    "allowWatchBookmarks",
                    "allowWatchBookmarks required when sendInitialEvents is set",
                ));
            }
        }
        None if !rvm.is_empty() => {
            errs.push(FieldError::forbidden(
                "resourceVersionMatch",
                "resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided",
            ));
        }
        None => {}
    }
    if !errs.is_empty() {
        return Err(invalid_list_options(errs));
    }
    let from_rv = match rv {
        "" | "0" => None,
        s => Some(s.parse::<u64>().map_err(|_| {
            ApiError::bad_request(format!(
                "resourceVersion: Invalid value: {s:?}: must be a non-negative integer"
            ))
        })?),
    };
    let timeout =
        match q.get("timeoutSeconds") {
            Some(t) if !t.is_empty() => Duration::from_secs(t.parse::<u64>().map_err(|_| {
                ApiError::bad_request(format!("timeoutSeconds: invalid value {t:?}"))
            })?),
            // Upstream picks a random timeout in [MinRequestTimeout, 2×MinRequestTimeout].
            _ => Duration::from_secs(1800 + rand::random::<u64>() % 1800),
        };
    Ok(Params {
        from_rv,
        send_initial_events: sie == Some(true),
        bookmarks,
        timeout,
    })
}

use crate::watch_mux::{
    self, DirectWatch, Item, Joined, Mux, Normalizer, Spec, Subscription, WatchFilter, WatchScope,
    event_line, normalize_items,
};

fn bookmark(t: &Target, rv: u64, initial_end: bool) -> Bytes {
    bookmark_line(&t.kind, &t.api_version, rv, initial_end)
}

fn bookmark_line(kind: &str, api_version: &str, rv: u64, initial_end: bool) -> Bytes {
    let mut meta = json!({"resourceVersion": rv.to_string()});
    if initial_end {
        meta["annotations"] = json!({"k8s.io/initial-events-end": "true"});
    }
    let obj = json!({"kind": kind, "apiVersion": api_version, "metadata": meta});
    event_line("BOOKMARK", &serde_json::to_vec(&obj).expect("json"))
}

/// Where a watcher's events come from.
enum Source {
    /// A shared upstream stream of this gateway (the normal case).
    Shared(Subscription),
    /// A private storage watch (resume from a revision older than the shared ring).
    Direct(DirectWatch),
}

/// One watch response in progress: the state behind its body stream.
struct Run {
    src: Source,
    pending: std::collections::VecDeque<Item>,
    deadline: std::pin::Pin<Box<tokio::time::Sleep>>,
    ticker: Option<tokio::time::Interval>,
    /// Highest revision handed to the client (bookmarks never go below it).
    delivered: u64,
    first: bool,
    done: bool,
    spec: Arc<Spec>,
    target: Target,
    output: Output,
    include: IncludeObject,
    /// With read defaulting: how many items at the front of `pending` are defaulted already.
    checked: usize,
    /// For custom resources: the reports of CRD changes (see [`crd_gone`]).
    crd_changes: Option<broadcast::Receiver<Arc<CrdNow>>>,
}

async fn tick(t: &mut Option<tokio::time::Interval>) {
    match t {
        Some(t) => {
            t.tick().await;
        }
        None => std::future::pending().await,
    }
}

impl Run {
    /// The next chunk of the body, None at the end of the watch.
    async fn next_chunk(&mut self) -> Option<Bytes> {
        loop {
            self.prepare().await;
            if let Some(item) = self.pending.pop_front() {
                self.checked = self.checked.saturating_sub(1);
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
                _ = crd_gone(
                    self.target.crd.as_deref(),
                    &self.target.resource.tenant,
                    &mut self.crd_changes,
                ) => {
                    // Deliver what has arrived already (the DELETED events of the CRD's
                    // objects come before the CRD itself goes), then end.
                    if let Source::Shared(sub) = &mut self.src {
                        while let Ok(i) = sub.rx.try_recv() {
                            self.pending.push_back(i);
                        }
                    }
                    self.done = true;
                    self.crd_changes = None;
                }
                m = next_item(&mut self.src, &self.spec) => match m {
                    Some((item, end)) => {
                        self.pending.push_back(item);
                        self.done = end;
                        // With read defaulting, take what else is waiting so one call
                        // defaults the whole batch.
                        if self.target.normalize.is_some()
                            && let Source::Shared(sub) = &mut self.src
                        {
                            while self.pending.len() < NORMALIZE_BATCH
                                && let Ok(i) = sub.rx.try_recv()
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

    /// Read defaulting of the items not yet defaulted (see [`normalize_items`]).
    async fn prepare(&mut self) {
        let Some(norm) = self.target.normalize.clone() else {
            return;
        };
        if self.checked >= self.pending.len() {
            return;
        }
        let table = matches!(self.output, Output::Table(_));
        let mut rest: Vec<Item> = self.pending.drain(self.checked..).collect();
        while !rest.is_empty() {
            let tail = rest.split_off(rest.len().min(NORMALIZE_BATCH));
            let done = normalize_items(rest, &self.target.transform, &norm, table).await;
            self.pending.extend(done);
            rest = tail;
        }
        self.checked = self.pending.len();
    }

    /// Appends events that are already waiting to `first`, so a watcher that is behind
    /// catches up with few large writes instead of one write per event.
    fn coalesce(&mut self, first: Bytes) -> Bytes {
        let mut out: Option<Vec<u8>> = None;
        while out.as_ref().map_or(first.len(), Vec::len) < COALESCE_BYTES {
            // With read defaulting only items defaulted already may go out.
            let defaulting = self.target.normalize.is_some();
            if defaulting && self.checked == 0 {
                break;
            }
            let next = match self.pending.pop_front() {
                Some(i) => {
                    self.checked = self.checked.saturating_sub(1);
                    i
                }
                None if defaulting => break,
                None => match &mut self.src {
                    Source::Shared(sub) => match sub.rx.try_recv() {
                        Ok(i) => i,
                        Err(_) => break,
                    },
                    Source::Direct(_) => break,
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
        if let Source::Shared(sub) = &mut self.src {
            // Everything this watcher wants up to `current` is queued already: take it all,
            // then bookmark at `current`.
            let current = sub.current_rv();
            while let Ok(item) = sub.rx.try_recv() {
                rv = rv.max(item.rv());
                self.pending.push_back(item);
            }
            rv = rv.max(current);
        }
        for i in &self.pending {
            rv = rv.max(i.rv());
        }
        let line = bookmark(&self.target, rv, false);
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
                let object = match &self.target.transform {
                    Some(f) => f(object),
                    None => object,
                };
                let o = serde_json::from_slice::<Value>(&object).ok()?;
                let mut table = (self.target.table)(&[o], self.first, self.include);
                if self.output == Output::Table("v1beta1") {
                    table["apiVersion"] = json!("meta.k8s.io/v1beta1");
                }
                self.first = false;
                Some(event_line(
                    watch_mux::type_name(kind),
                    &serde_json::to_vec(&table).expect("json"),
                ))
            }
        }
    }
}

/// The next event of a source: (item, this ends the watch); None when the source ended.
async fn next_item(src: &mut Source, spec: &Spec) -> Option<(Item, bool)> {
    match src {
        Source::Shared(sub) => sub.rx.recv().await.map(|i| (i, false)),
        Source::Direct(stream) => loop {
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
                // The storage service went away mid-stream (a restart, a Redis outage): the
                // watch ends cleanly, as the shared streams hide such a gap from their
                // watchers; the client watches again from its last revision and storage
                // replays the gap from its history. An ERROR event here would be a failure
                // the client must handle although nothing is lost.
                Err(e) if e.code == 503 || e.code == 504 => return None,
                Err(e) => {
                    let line = event_line("ERROR", &e.to_json());
                    return Some((Item::Line { line, rv: 0 }, true));
                }
            }
        },
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
    let output = negotiate_output(req.header("accept"))?;
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
            let line = bookmark(&t, rv, true);
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
            Source::Shared(sub)
        }
        Joined::NotCovered => {
            // Older than the shared stream remembers: storage replays history (or answers
            // 410 Expired as an ERROR event).
            Source::Direct(mux.watch_direct(&scope, from).await?)
        }
    };
    let crd_changes = t.crd.is_some().then(|| ctx.crd_changes.subscribe());
    let ticker = p.bookmarks.then(|| {
        tokio::time::interval_at(tokio::time::Instant::now() + BOOKMARK_EVERY, BOOKMARK_EVERY)
    });
    let run = Run {
        src,
        pending,
        deadline: Box::pin(tokio::time::sleep(p.timeout)),
        ticker,
        delivered: from,
        first: true,
        done: false,
        spec,
        target: t,
        output,
        include,
        checked: 0,
        crd_changes,
    };
    let stream = futures::stream::unfold(run, |mut run| async move {
        let chunk = run.next_chunk().await?;
        Some((Ok::<_, std::io::Error>(http_body::Frame::data(chunk)), run))
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

/// Watch of a custom resource.
pub async fn serve_cr(ctx: &Ctx, req: &Req, crd: Arc<CrdInfo>) -> Result<Response<Body>, ApiError> {
    let i = &req.info;
    let ver = crd
        .version(&i.api_version)
        .ok_or_else(ApiError::path_not_found)?;
    let (label, field) = crate::request::check_selectors(req, &crd, ver)?;
    let api_version = format!("{}/{}", crd.group, ver.name);
    let crd2 = crd.clone();
    let vname = ver.name.clone();
    let table: TableFn = Arc::new(move |objs, with_columns, include| {
        let v = crd2.version(&vname).expect("served version");
        let meta = ListMeta::default();
        v.table
            .to_table_with(objs, include, &meta, chrono::Utc::now(), with_columns)
    });
    let want = api_version.clone();
    let transform: Arc<dyn Fn(Bytes) -> Bytes + Send + Sync> = Arc::new(move |b: Bytes| {
        let prefix = format!(
            "{{\"apiVersion\":{}",
            serde_json::to_string(&want).expect("json")
        );
        if b.starts_with(prefix.as_bytes()) {
            return b;
        }
        match serde_json::from_slice::<Value>(&b) {
            Ok(mut v) => {
                v["apiVersion"] = Value::String(want.clone());
                Bytes::from(serde_json::to_vec(&v).expect("json"))
            }
            Err(_) => b,
        }
    });
    let target = Target {
        resource: crate::cr_store::resource_ref(&crd, &i.tenant),
        namespace: i.namespace.clone(),
        name: i.name.clone(),
        api_version,
        kind: crd.kind.clone(),
        table,
        label_selector: label,
        field_selector: field,
        transform: Some(transform),
        normalize: crate::cr_store::watch_normalizer(ctx, &crd, &i.tenant, ver),
        crd: Some(crd.clone()),
    };
    serve(ctx, req, target).await
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
        }
    }

    #[test]
    fn parameter_rules() {
        let p = params(&req("watch=1&resourceVersion=12&timeoutSeconds=5")).unwrap();
        assert_eq!(
            (p.from_rv, p.timeout, p.send_initial_events),
            (Some(12), Duration::from_secs(5), false)
        );
        assert_eq!(
            params(&req("watch=1&resourceVersion=0")).unwrap().from_rv,
            None
        );
        let e = params(&req("watch=1&resourceVersionMatch=NotOlderThan")).unwrap_err();
        assert_eq!(e.code, 422);
        assert!(
            e.message.contains(
                "resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided"
            ),
            "{}",
            e.message
        );
        let ok = params(&req("watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true")).unwrap();
        assert!(ok.send_initial_events && ok.bookmarks);
        assert_eq!(
            params(&req("watch=1&resourceVersion=abc"))
                .unwrap_err()
                .code,
            400
        );
    }

    #[test]
    fn frames() {
        assert_eq!(
            &event_line("ADDED", b"{\"a\":1}")[..],
            b"{\"type\":\"ADDED\",\"object\":{\"a\":1}}\n"
        );
        let t = Target {
            resource: Default::default(),
            namespace: String::new(),
            name: String::new(),
            api_version: "g/v1".into(),
            kind: "K".into(),
            table: Arc::new(|_, _, _| Value::Null),
            label_selector: String::new(),
            field_selector: String::new(),
            transform: None,
            normalize: None,
            crd: None,
        };
        let b: Value = serde_json::from_slice(&bookmark(&t, 7, true)[..]).unwrap();
        assert_eq!(b["type"], "BOOKMARK");
        assert_eq!(b["object"]["kind"], "K");
        assert_eq!(
            b["object"]["metadata"]["annotations"]["k8s.io/initial-events-end"],
            "true"
        );
    }
}
