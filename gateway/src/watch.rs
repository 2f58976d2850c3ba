//! Watch streams: `?watch=true` and the legacy `/watch/` paths, for custom resources, CRDs
//! and namespaces.
//!
//! HTTP request → parameters checked with upstream's rules
//! (k8s.io/apimachinery/pkg/apis/meta/internalversion/validation) → one storage `Watch`
//! gRPC stream → newline-delimited `{"type":…,"object":…}` frames (Table rows when asked;
//! `columnDefinitions` only on the first event, as apiserver handlers/response.go). Bookmarks
//! (`allowWatchBookmarks`), watch-list (`sendInitialEvents=true` ends the initial state with a
//! BOOKMARK annotated `k8s.io/initial-events-end: "true"`), `timeoutSeconds`.

use crate::api::{Ctx, Req};
use crate::crd::CrdInfo;
use crate::http::{Body, Output, negotiate_output};
use crate::table::{IncludeObject, ListMeta};
use bytes::Bytes;
use crdplane_core::ApiError;
use crdplane_core::field::FieldError;
use crdplane_proto::v1 as pb;
use http::{HeaderValue, Response, StatusCode, header};
use http_body_util::{BodyExt, StreamBody};
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;

/// How often an idle watch with `allowWatchBookmarks` gets a BOOKMARK (upstream: 1 min).
pub const BOOKMARK_EVERY: Duration = Duration::from_secs(60);

/// Renders objects as a Table (with or without column definitions).
pub type TableFn = Arc<dyn Fn(&[Value], bool, IncludeObject) -> Value + Send + Sync>;

/// What one watch streams.
pub struct Target {
    pub resource: pb::ResourceRef,
    pub namespace: String,
    pub name: String,
    pub api_version: String,
    pub kind: String,
    pub table: TableFn,
    pub label_selector: String,
    pub field_selector: String,
    /// Post-processing of each event object (version conversion, read defaults).
    pub transform: Option<Arc<dyn Fn(Bytes) -> Bytes + Send + Sync>>,
}

/// Parsed watch parameters.
#[derive(Debug, Clone, PartialEq)]
pub struct Params {
    pub from_rv: Option<u64>,
    pub send_initial_events: bool,
    pub bookmarks: bool,
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
    let sie = match q.get("sendInitialEvents") {
        None => None,
        Some("true") | Some("1") => Some(true),
        Some("false") | Some("0") => Some(false),
        Some(o) => {
            return Err(ApiError::bad_request(format!(
                "sendInitialEvents: invalid boolean {o:?}"
            )));
        }
    };
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

fn event_line(kind: &str, object: &[u8]) -> Bytes {
    let mut v = Vec::with_capacity(object.len() + 32);
    v.extend_from_slice(b"{\"type\":\"");
    v.extend_from_slice(kind.as_bytes());
    v.extend_from_slice(b"\",\"object\":");
    v.extend_from_slice(object);
    v.extend_from_slice(b"}\n");
    Bytes::from(v)
}

fn bookmark(t: &Target, rv: u64, initial_end: bool) -> Bytes {
    let mut meta = json!({"resourceVersion": rv.to_string()});
    if initial_end {
        meta["annotations"] = json!({"k8s.io/initial-events-end": "true"});
    }
    let obj = json!({"kind": t.kind, "apiVersion": t.api_version, "metadata": meta});
    event_line("BOOKMARK", &serde_json::to_vec(&obj).expect("json"))
}

pub async fn serve(ctx: &Ctx, req: &Req, t: Target) -> Result<Response<Body>, ApiError> {
    let p = params(req)?;
    let output = negotiate_output(req.header("accept"))?;
    let include = match req.query.get("includeObject") {
        Some("None") => IncludeObject::None,
        Some("Object") => IncludeObject::Object,
        _ => IncludeObject::Metadata,
    };
    // Watch from "0"/unset starts with the current state (synthetic ADDED events).
    let send_initial = p.send_initial_events || p.from_rv.is_none();
    let wreq = pb::WatchRequest {
        resource: Some(t.resource.clone()),
        namespace: t.namespace.clone(),
        from_resource_version: p.from_rv.unwrap_or(0),
        send_initial_state: send_initial,
        label_selector: t.label_selector.clone(),
        field_selector: t.field_selector.clone(),
        name: t.name.clone(),
    };
    // Open the stream before answering, so errors (410, 400) can still be a plain Status.
    let mut stream = ctx.storage.clone().watch(wreq).await?.into_inner();
    let (tx, rx) = mpsc::channel::<Result<http_body::Frame<Bytes>, std::io::Error>>(64);
    tokio::spawn(async move {
        let deadline = tokio::time::sleep(p.timeout);
        tokio::pin!(deadline);
        let mut ticker = tokio::time::interval(BOOKMARK_EVERY);
        ticker.tick().await;
        let mut last_rv = p.from_rv.unwrap_or(0);
        let mut first = true;
        let send = |b: Bytes| {
            let tx = tx.clone();
            async move { tx.send(Ok(http_body::Frame::data(b))).await.is_ok() }
        };
        loop {
            tokio::select! {
                _ = &mut deadline => break,
                _ = tx.closed() => break,
                _ = ticker.tick(), if p.bookmarks => {
                    if !send(bookmark(&t, last_rv, false)).await { break; }
                }
                m = stream.message() => match m {
                    Ok(Some(ev)) => {
                        last_rv = last_rv.max(ev.resource_version);
                        let kind = match pb::watch_event::Type::try_from(ev.r#type) {
                            Ok(pb::watch_event::Type::Added) => "ADDED",
                            Ok(pb::watch_event::Type::Deleted) => "DELETED",
                            Ok(pb::watch_event::Type::Modified) => "MODIFIED",
                            Ok(pb::watch_event::Type::Progress) => {
                                if p.send_initial_events && !send(bookmark(&t, ev.resource_version, true)).await {
                                    break;
                                }
                                continue;
                            }
                            _ => continue,
                        };
                        let mut obj = ev.object;
                        if let Some(f) = &t.transform {
                            obj = f(obj);
                        }
                        let line = match output {
                            Output::Json => event_line(kind, &obj),
                            Output::Table(v) => {
                                let Ok(o) = serde_json::from_slice::<Value>(&obj) else { continue };
                                let mut table = (t.table)(&[o], first, include);
                                if v == "v1beta1" {
                                    table["apiVersion"] = json!("meta.k8s.io/v1beta1");
                                }
                                first = false;
                                event_line(kind, &serde_json::to_vec(&table).expect("json"))
                            }
                        };
                        if !send(line).await { break; }
                    }
                    Ok(None) => break,
                    Err(s) => {
                        let e = ApiError::from_grpc(&s);
                        let _ = send(event_line("ERROR", &e.to_json())).await;
                        break;
                    }
                }
            }
        }
    });
    let body = StreamBody::new(tokio_stream::wrappers::ReceiverStream::new(rx)).boxed_unsync();
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
    let (label, field) = crate::crs::check_selectors(req, &crd, ver)?;
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
        resource: crate::crs::resource_ref(&crd, &i.tenant),
        namespace: i.namespace.clone(),
        name: i.name.clone(),
        api_version,
        kind: crd.kind.clone(),
        table,
        label_selector: label,
        field_selector: field,
        transform: Some(transform),
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
