//! Watch scenarios of `crdplane-load`: fan-out latency and memory per watcher.
//!
//! - `watch-fanout`: N watchers (default 1,000) of one namespace's CronTabs through the
//!   gateway's HTTP watch, creates at a fixed rate (default 200/s); every watcher should get
//!   every write. With `--defaults` the watched resource is a CRD version with schema
//!   defaults (`defaultedcrontabs`, [`crate::objects::defaulted_crontab_crd`]), so every
//!   event is read-defaulted: the gateway's shared stream makes one validation call per
//!   batch of events for all watchers of the version, none per watcher.
//! - `watch-selective`: N watchers (default 10,000), each on its own namespace (created
//!   first), creates at a fixed rate (default 1,000/s) spread round-robin over the
//!   namespaces; each write should reach exactly its namespace's watcher. Also measures
//!   memory per idle watcher = (VmRSS of gateway + storage with the watchers open − before)
//!   / watchers, from `/proc/<pid>/status` (pids by `--pids`, else every process named
//!   `crdplane-gateway` / `crdplane-storage`).
//!
//! Latency = delivery time at the watcher − time the write's HTTP response arrived (the
//! acknowledgement), clamped at 0 when the event beats the acknowledgement; HDR histogram in
//! µs. Missed = expected deliveries that did not arrive within `--grace` after the last
//! write. Watchers start from the list's resourceVersion, so they get no initial events.

use bytes::Bytes;
use clap::Parser;
use hdrhistogram::Histogram;
use http_body_util::{BodyExt, Empty, Full};
use hyper::{Method, Request, StatusCode};
use serde_json::{Value, json};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::net::TcpStream;

/// Command line of the watch scenarios (`crdplane-load watch-fanout|watch-selective`).
#[derive(Parser, Debug, Clone)]
#[command(name = "crdplane-load watch", about = "watch fan-out scenarios")]
pub struct WatchArgs {
    /// `watch-fanout` or `watch-selective`.
    pub scenario: String,
    /// Gateway base URL.
    #[arg(long, default_value = "http://127.0.0.1:6443")]
    pub server: String,
    /// Watchers (default 1,000 for fanout, 10,000 for selective).
    #[arg(long)]
    pub watchers: Option<usize>,
    /// Writes per second (default 200 for fanout, 1,000 for selective).
    #[arg(long)]
    pub rate: Option<f64>,
    /// How long writes go on.
    #[arg(long, default_value = "10s", value_parser = crate::config::parse_duration)]
    pub duration: Duration,
    /// Time allowed after the last write for deliveries to arrive.
    #[arg(long, default_value = "5s", value_parser = crate::config::parse_duration)]
    pub grace: Duration,
    /// Concurrent writers (HTTP connections for the writes).
    #[arg(long, default_value_t = 32)]
    pub writers: usize,
    /// Pids whose VmRSS is measured (comma-separated); default: find crdplane-gateway and
    /// crdplane-storage processes.
    #[arg(long)]
    pub pids: Option<String>,
    /// Tenant (`/clusters/<tenant>` prefix); empty = default tenant.
    #[arg(long, default_value = "")]
    pub tenant: String,
    /// Namespace of the fan-out scenario / prefix of the selective ones.
    #[arg(long, default_value = "lt-watch")]
    pub namespace: String,
    /// Watchers opened concurrently during setup.
    #[arg(long, default_value_t = 256)]
    pub connect_concurrency: usize,
    /// 0: HTTP/1.1, one connection per watcher (kubectl and most clients over plain HTTP).
    /// N > 0: HTTP/2 with prior knowledge, N watch streams per connection (client-go
    /// multiplexes its watches over one HTTP/2 connection per server).
    #[arg(long, default_value_t = 0)]
    pub http2_streams: usize,
    /// Watch a CRD version with schema defaults (every event read-defaulted).
    #[arg(long)]
    pub defaults: bool,
}

struct Target {
    host: String,
    base: String,
}

fn authority(server: &str) -> anyhow::Result<String> {
    Ok(server
        .strip_prefix("http://")
        .ok_or_else(|| anyhow::anyhow!("--server must be http://host:port"))?
        .trim_end_matches('/')
        .to_string())
}

/// One keep-alive HTTP/1.1 connection for requests.
struct Conn {
    send: hyper::client::conn::http1::SendRequest<Full<Bytes>>,
}

impl Conn {
    async fn open(host: &str) -> anyhow::Result<Conn> {
        let tcp = TcpStream::connect(host).await?;
        tcp.set_nodelay(true)?;
        let (send, conn) =
            hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(tcp)).await?;
        tokio::spawn(conn);
        Ok(Conn { send })
    }

    async fn call(
        &mut self,
        t: &Target,
        method: Method,
        path: &str,
        body: Option<Value>,
    ) -> anyhow::Result<(StatusCode, Bytes)> {
        self.send.ready().await?;
        let b = body
            .map(|v| Bytes::from(serde_json::to_vec(&v).expect("json")))
            .unwrap_or_default();
        let req = Request::builder()
            .method(method)
            .uri(format!("{}{path}", t.base))
            .header("host", &t.host)
            .header("content-type", "application/json")
            .body(Full::new(b))?;
        let resp = self.send.send_request(req).await?;
        let status = resp.status();
        let body = resp.into_body().collect().await?.to_bytes();
        Ok((status, body))
    }
}

fn crontab(ns: &str, name: &str, kind: &str) -> Value {
    json!({"apiVersion": "stable.example.com/v1", "kind": kind,
        "metadata": {"name": name, "namespace": ns},
        "spec": {"cronSpec": "* * * * */5", "image": "img", "replicas": 1}})
}

fn rv_in(line: &[u8]) -> Option<u64> {
    const NEEDLE: &[u8] = b"\"resourceVersion\":\"";
    let at = line.windows(NEEDLE.len()).position(|w| w == NEEDLE)? + NEEDLE.len();
    let digits = line[at..].iter().take_while(|b| b.is_ascii_digit()).count();
    std::str::from_utf8(&line[at..at + digits])
        .ok()?
        .parse()
        .ok()
}

/// Sum of VmRSS (KiB) of `pids`.
fn rss_kib(pids: &[u32]) -> u64 {
    pids.iter()
        .filter_map(|p| std::fs::read_to_string(format!("/proc/{p}/status")).ok())
        .filter_map(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse::<u64>().ok())
        })
        .sum()
}

fn find_pids() -> Vec<u32> {
    let mut out = Vec::new();
    let Ok(rd) = std::fs::read_dir("/proc") else {
        return out;
    };
    for e in rd.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
        // comm is truncated to 15 bytes.
        if comm.trim() == "crdplane-gatewa" || comm.trim() == "crdplane-storag" {
            out.push(pid);
        }
    }
    out
}

/// Deliveries seen by one watcher: (resourceVersion, arrival).
type Seen = Vec<(u64, Instant)>;

/// Opens one watch and records every event's revision and arrival until `stop`.
/// An HTTP/2 connection shared by several watchers.
type H2 = hyper::client::conn::http2::SendRequest<Empty<Bytes>>;

/// Opens an HTTP/2 (prior knowledge) connection to `host`.
async fn h2_connect(host: &str) -> anyhow::Result<H2> {
    let tcp = TcpStream::connect(host).await?;
    tcp.set_nodelay(true)?;
    let (send, conn) =
        hyper::client::conn::http2::Builder::new(hyper_util::rt::TokioExecutor::new())
            .handshake(hyper_util::rt::TokioIo::new(tcp))
            .await?;
    tokio::spawn(conn);
    Ok(send)
}

async fn watcher(
    t: Arc<Target>,
    path: String,
    h2: Option<H2>,
    ready: tokio::sync::mpsc::Sender<anyhow::Result<()>>,
    stop: tokio::sync::watch::Receiver<bool>,
) -> Seen {
    let mut seen = Vec::new();
    let open = async {
        let req = Request::builder()
            .uri(format!("{}{path}", t.base))
            .header("host", &t.host)
            .body(Empty::<Bytes>::new())?;
        // The HTTP/1.1 connection's request handle lives as long as the watch.
        let (h1, resp) = match h2 {
            Some(mut send) => {
                send.ready().await?;
                (None, send.send_request(req).await?)
            }
            None => {
                let tcp = TcpStream::connect(&t.host).await?;
                tcp.set_nodelay(true)?;
                let (mut send, conn) =
                    hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(tcp))
                        .await?;
                tokio::spawn(conn);
                let resp = send.send_request(req).await?;
                (Some(send), resp)
            }
        };
        if resp.status() != StatusCode::OK {
            anyhow::bail!("watch answered {}", resp.status());
        }
        anyhow::Ok((h1, resp.into_body()))
    };
    let (_h1, mut body) = match open.await {
        Ok(x) => {
            let _ = ready.send(Ok(())).await;
            x
        }
        Err(e) => {
            let _ = ready.send(Err(e)).await;
            return seen;
        }
    };
    drop(ready);
    let mut stop = stop;
    let mut buf: Vec<u8> = Vec::new();
    loop {
        tokio::select! {
            _ = stop.changed() => break,
            f = body.frame() => match f {
                Some(Ok(frame)) => {
                    let now = Instant::now();
                    let Ok(data) = frame.into_data() else { continue };
                    buf.extend_from_slice(&data);
                    while let Some(i) = buf.iter().position(|&b| b == b'\n') {
                        if let Some(rv) = rv_in(&buf[..i]) {
                            seen.push((rv, now));
                        }
                        buf.drain(..=i);
                    }
                }
                _ => break,
            }
        }
    }
    seen
}

/// Runs one watch scenario (setup, watchers, writes, grace period) and returns its report
/// as JSON: deliveries, missed events, latency in ms, and the memory per idle watcher of the
/// measured processes.
pub async fn run(a: WatchArgs) -> anyhow::Result<Value> {
    let selective = match a.scenario.as_str() {
        "watch-fanout" => false,
        "watch-selective" => true,
        s => anyhow::bail!("unknown watch scenario {s:?}"),
    };
    let watchers = a.watchers.unwrap_or(if selective { 10_000 } else { 1_000 });
    let rate = a.rate.unwrap_or(if selective { 1_000.0 } else { 200.0 });
    let host = authority(&a.server)?;
    let prefix = if a.tenant.is_empty() {
        String::new()
    } else {
        format!("/clusters/{}", a.tenant)
    };
    let t = Arc::new(Target {
        base: format!("http://{host}{prefix}"),
        host,
    });
    let pids: Vec<u32> = match &a.pids {
        Some(p) => p.split(',').filter_map(|s| s.trim().parse().ok()).collect(),
        None => find_pids(),
    };

    // Setup: the tenant (when named; its creation is the platform admin's, in the admin
    // scope), the CRD, the namespaces.
    let mut c = Conn::open(&t.host).await?;
    if !a.tenant.is_empty() {
        use crdplane_core::tenancy::{ADMIN_SCOPE, API_VERSION, GROUP, KIND, RESOURCE, VERSION};
        let admin = Target {
            base: format!("http://{}/clusters/{ADMIN_SCOPE}", t.host),
            host: t.host.clone(),
        };
        let body = serde_json::json!({"apiVersion": API_VERSION, "kind": KIND, "metadata": {"name": a.tenant}});
        let (s, b) = c
            .call(
                &admin,
                Method::POST,
                &format!("/apis/{GROUP}/{VERSION}/{RESOURCE}"),
                Some(body),
            )
            .await?;
        if !(s.is_success() || s == StatusCode::CONFLICT) {
            eprintln!(
                "setup: warning: creating tenant {}: {s}: {}",
                a.tenant,
                String::from_utf8_lossy(&b)
            );
        }
    }
    let (s, b) = c
        .call(
            &t,
            Method::POST,
            "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
            Some(if a.defaults {
                crate::objects::defaulted_crontab_crd()
            } else {
                crate::objects::crontab_crd()
            }),
        )
        .await?;
    if !(s.is_success() || s == StatusCode::CONFLICT) {
        anyhow::bail!("creating the CRD: {s}: {}", String::from_utf8_lossy(&b));
    }
    let namespaces: Vec<String> = if selective {
        (0..watchers)
            .map(|i| format!("{}-{i}", a.namespace))
            .collect()
    } else {
        vec![a.namespace.clone()]
    };
    let t0 = Instant::now();
    {
        let next = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let nss = Arc::new(namespaces.clone());
        let mut tasks = Vec::new();
        for _ in 0..32 {
            let (t, next, nss) = (t.clone(), next.clone(), nss.clone());
            tasks.push(tokio::spawn(async move {
                let mut c = Conn::open(&t.host).await?;
                loop {
                    let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    let Some(ns) = nss.get(i) else { break };
                    let (s, b) = c
                        .call(
                            &t,
                            Method::POST,
                            "/api/v1/namespaces",
                            Some(json!({"apiVersion":"v1","kind":"Namespace","metadata":{"name":ns}})),
                        )
                        .await?;
                    if !(s.is_success() || s == StatusCode::CONFLICT) {
                        anyhow::bail!("namespace {ns}: {s}: {}", String::from_utf8_lossy(&b));
                    }
                }
                anyhow::Ok(())
            }));
        }
        for task in tasks {
            task.await??;
        }
    }
    eprintln!(
        "setup: {} namespace(s) in {:.1}s",
        namespaces.len(),
        t0.elapsed().as_secs_f64()
    );
    let (resource, kind) = if a.defaults {
        (crate::objects::DEFAULTED_RESOURCE, "DefaultedCronTab")
    } else {
        (crate::objects::RESOURCE, crate::objects::KIND)
    };
    let collection = |ns: &str| format!("/apis/stable.example.com/v1/namespaces/{ns}/{resource}");
    let list_rv = loop {
        let (s, b) = c
            .call(&t, Method::GET, &collection(&namespaces[0]), None)
            .await?;
        if s == StatusCode::OK {
            let v: Value = serde_json::from_slice(&b)?;
            break v["metadata"]["resourceVersion"]
                .as_str()
                .unwrap_or("0")
                .to_string();
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    // A first write, so the list revision is never "0" (which would mean "any").
    c.call(
        &t,
        Method::POST,
        &collection(&namespaces[0]),
        Some(crontab(
            &namespaces[0],
            &format!("seed-{}", std::process::id()),
            kind,
        )),
    )
    .await?;
    let (_, b) = c
        .call(&t, Method::GET, &collection(&namespaces[0]), None)
        .await?;
    let v: Value = serde_json::from_slice(&b)?;
    let start_rv = v["metadata"]["resourceVersion"]
        .as_str()
        .unwrap_or(&list_rv)
        .to_string();

    tokio::time::sleep(Duration::from_millis(500)).await;
    let rss_before = rss_kib(&pids);

    // Watchers.
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let (ready_tx, mut ready_rx) = tokio::sync::mpsc::channel(1024);
    let mut handles = Vec::with_capacity(watchers);
    let t1 = Instant::now();
    let sem = Arc::new(tokio::sync::Semaphore::new(a.connect_concurrency.max(1)));
    let mut h2_conns: Vec<H2> = Vec::new();
    if a.http2_streams > 0 {
        for _ in 0..watchers.div_ceil(a.http2_streams) {
            h2_conns.push(h2_connect(&t.host).await?);
        }
    }
    for i in 0..watchers {
        let h2 = (a.http2_streams > 0).then(|| h2_conns[i / a.http2_streams].clone());
        let ns = &namespaces[if selective { i } else { 0 }];
        let path = format!("{}?watch=1&resourceVersion={start_rv}", collection(ns));
        let permit = sem.clone().acquire_owned().await?;
        let (t, ready, stop) = (t.clone(), ready_tx.clone(), stop_rx.clone());
        handles.push(tokio::spawn(async move {
            let (inner_tx, mut inner_rx) = tokio::sync::mpsc::channel(1);
            let h = tokio::spawn(watcher(t, path, h2, inner_tx, stop));
            let r = inner_rx.recv().await.unwrap_or(Ok(()));
            drop(permit);
            let _ = ready.send(r).await;
            h.await.unwrap_or_default()
        }));
    }
    drop(ready_tx);
    let mut failed = 0usize;
    let mut first_err = None;
    for _ in 0..watchers {
        match ready_rx.recv().await {
            Some(Ok(())) => {}
            Some(Err(e)) => {
                failed += 1;
                first_err.get_or_insert(e.to_string());
            }
            None => break,
        }
    }
    eprintln!(
        "setup: {} watchers open in {:.1}s ({failed} failed{})",
        watchers - failed,
        t1.elapsed().as_secs_f64(),
        first_err
            .map(|e| format!(", first: {e}"))
            .unwrap_or_default()
    );
    tokio::time::sleep(Duration::from_secs(2)).await;
    let rss_open = rss_kib(&pids);
    let open = (watchers - failed).max(1);
    let per_watcher_bytes = (rss_open.saturating_sub(rss_before) * 1024) as f64 / open as f64;

    // Writes at a fixed rate, round-robin over the namespaces.
    let acks: Arc<Mutex<HashMap<u64, (Instant, usize)>>> = Default::default();
    let errors = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let total = (rate * a.duration.as_secs_f64()).round() as u64;
    let interval = Duration::from_secs_f64(1.0 / rate.max(0.001));
    let t2 = Instant::now();
    let next = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let mut writers = Vec::new();
    let run = std::process::id();
    for _ in 0..a.writers.max(1) {
        let (t, acks, errors, next, nss) = (
            t.clone(),
            acks.clone(),
            errors.clone(),
            next.clone(),
            namespaces.clone(),
        );
        writers.push(tokio::spawn(async move {
            let mut c = Conn::open(&t.host).await?;
            loop {
                let seq = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                if seq >= total {
                    break;
                }
                let due = t2 + interval * seq as u32;
                tokio::time::sleep_until(due.into()).await;
                let w = (seq as usize) % nss.len();
                let ns = &nss[w];
                let path = format!("/apis/stable.example.com/v1/namespaces/{ns}/{resource}");
                match c
                    .call(
                        &t,
                        Method::POST,
                        &path,
                        Some(crontab(ns, &format!("w{run}-{seq}"), kind)),
                    )
                    .await
                {
                    Ok((s, b)) if s.is_success() => {
                        let at = Instant::now();
                        if let Some(rv) = rv_in(&b) {
                            acks.lock().expect("acks").insert(rv, (at, w));
                        }
                    }
                    _ => {
                        errors.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        c = Conn::open(&t.host).await?;
                    }
                }
            }
            anyhow::Ok(())
        }));
    }
    for w in writers {
        w.await??;
    }
    let write_secs = t2.elapsed().as_secs_f64();
    tokio::time::sleep(a.grace).await;
    let _ = stop_tx.send(true);
    let mut seen_all = Vec::with_capacity(handles.len());
    for h in handles {
        seen_all.push(h.await.unwrap_or_default());
    }
    let acks = acks.lock().expect("acks").clone();

    // Latency and misses.
    let mut hist = Histogram::<u64>::new_with_bounds(1, 120_000_000, 3)?;
    let mut delivered = 0u64;
    let mut missed = 0u64;
    let mut first_delivery = None::<Instant>;
    let mut last_delivery = None::<Instant>;
    for (i, seen) in seen_all.iter().enumerate() {
        let mut got = std::collections::HashSet::new();
        for (rv, at) in seen {
            if let Some((ack, _)) = acks.get(rv) {
                got.insert(*rv);
                delivered += 1;
                let us = at.saturating_duration_since(*ack).as_micros() as u64;
                hist.record(us.max(1))?;
                first_delivery = Some(first_delivery.map_or(*at, |f: Instant| f.min(*at)));
                last_delivery = Some(last_delivery.map_or(*at, |l: Instant| l.max(*at)));
            }
        }
        let expected = acks
            .iter()
            .filter(|(_, (_, w))| !selective || *w == i)
            .count() as u64;
        missed += expected.saturating_sub(got.len() as u64);
    }
    let span = match (first_delivery, last_delivery) {
        (Some(f), Some(l)) => l.duration_since(f).as_secs_f64().max(1e-3),
        _ => 1.0,
    };
    let ms = |q: f64| hist.value_at_quantile(q) as f64 / 1000.0;
    let report = json!({
        "scenario": a.scenario,
        "defaults": a.defaults,
        "watchers": watchers,
        "watchers_failed": failed,
        "rate_target": rate,
        "writes_ok": acks.len(),
        "write_errors": errors.load(std::sync::atomic::Ordering::Relaxed),
        "write_seconds": write_secs,
        "deliveries": delivered,
        "deliveries_per_sec": delivered as f64 / span,
        "missed": missed,
        "latency_ms": {"p50": ms(0.5), "p90": ms(0.9), "p99": ms(0.99), "max": hist.max() as f64 / 1000.0, "mean": hist.mean() / 1000.0},
        "rss_kib_before": rss_before,
        "rss_kib_open": rss_open,
        "rss_pids": pids,
        "bytes_per_idle_watcher": per_watcher_bytes,
    });
    Ok(report)
}

/// Entry point for `crdplane-load watch-fanout|watch-selective …`.
pub fn main_with_args(a: WatchArgs) -> std::process::ExitCode {
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("runtime: {e}");
            return std::process::ExitCode::from(1);
        }
    };
    match rt.block_on(run(a)) {
        Ok(r) => {
            let l = &r["latency_ms"];
            println!(
                "{}: {} watchers ({} failed), {} writes ok ({} errors) in {:.1}s\n  deliveries {} ({:.0}/s), missed {}\n  latency ms p50 {:.2} p90 {:.2} p99 {:.2} max {:.2}\n  RSS gateway+storage {} KiB → {} KiB: {:.0} bytes per idle watcher",
                r["scenario"].as_str().unwrap_or(""),
                r["watchers"],
                r["watchers_failed"],
                r["writes_ok"],
                r["write_errors"],
                r["write_seconds"].as_f64().unwrap_or(0.0),
                r["deliveries"],
                r["deliveries_per_sec"].as_f64().unwrap_or(0.0),
                r["missed"],
                l["p50"].as_f64().unwrap_or(0.0),
                l["p90"].as_f64().unwrap_or(0.0),
                l["p99"].as_f64().unwrap_or(0.0),
                l["max"].as_f64().unwrap_or(0.0),
                r["rss_kib_before"],
                r["rss_kib_open"],
                r["bytes_per_idle_watcher"].as_f64().unwrap_or(0.0),
            );
            println!("{r}");
            std::process::ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("watch scenario failed: {e:#}");
            std::process::ExitCode::from(1)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_revision_in_an_event_line() {
        let l = br#"{"type":"ADDED","object":{"metadata":{"name":"x","resourceVersion":"1234"}}}"#;
        assert_eq!(rv_in(l), Some(1234));
        assert_eq!(rv_in(b"{}"), None);
    }

    #[test]
    fn parses_arguments() {
        let a = WatchArgs::try_parse_from([
            "w",
            "watch-selective",
            "--watchers",
            "5",
            "--duration",
            "2s",
        ])
        .unwrap();
        assert_eq!((a.watchers, a.duration), (Some(5), Duration::from_secs(2)));
        assert!(!a.defaults);
        let a = WatchArgs::try_parse_from(["w", "watch-fanout", "--defaults"]).unwrap();
        assert!(a.defaults);
    }
}
