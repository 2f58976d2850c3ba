//! `crdplane-load`: the project's own load generator.
//!
//! It stands outside the request path and drives either the gateway over HTTP/1.1 (the
//! Kubernetes REST API, as kubectl would: POST/GET/PUT/LIST of CronTabs under
//! `/apis/stable.example.com/v1/namespaces/<ns>/crontabs`) or one service directly over gRPC
//! (storage Create/Get/Update/List, validation Admit). It sets up what it needs (CRD,
//! namespace, working set), runs a bounded closed- or open-loop phase with N workers, prints
//! progress once per second, and reports throughput, HDR latency percentiles and errors by
//! HTTP status / gRPC code.
//!
//! Modules: [`config`] (CLI), [`objects`] (CRD and CronTab generation), [`schedule`]
//! (request budget, deadline, open-loop pacing), [`http`] / [`grpc`] (targets), [`stats`]
//! (recorders and the report), [`timeline`] (per-second counts and latencies, the latency
//! histogram), [`html`] (the HTML report with hand-drawn SVG plots), [`report`] (the
//! `report` subcommand: HTML from saved JSON reports, several runs side by side), [`watch`]
//! (watch fan-out scenarios: `watch-fanout`, `watch-selective`).

pub mod config;
pub mod grpc;
pub mod html;
pub mod http;
pub mod objects;
pub mod otlp_sink;
pub mod report;
pub mod schedule;
pub mod stats;
pub mod timeline;
pub mod watch;

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use config::{Config, Op, TargetKind};
use schedule::{Rng, Schedule};
use stats::{LiveCounters, Recorder, Report, RunInfo};

/// A failed request: an error key (`http 409 AlreadyExists`, `grpc Unavailable`, `timeout`,
/// `transport`, ...) and a body or message for the samples.
#[derive(Clone, Debug, PartialEq)]
pub struct Failure {
    /// What the report groups errors by: `http <code> <Status reason>`, `grpc <code>`,
    /// `timeout`, `transport`, ...
    pub key: String,
    /// The response body or error message, truncated, kept as a sample in the report.
    pub body: String,
}

impl Failure {
    /// A failure with an error key and a message as is.
    pub fn new(key: impl Into<String>, body: impl Into<String>) -> Failure {
        Failure {
            key: key.into(),
            body: body.into(),
        }
    }

    /// A failure with an error key and a response body, truncated for the samples.
    pub fn with_body(key: String, body: &[u8]) -> Failure {
        Failure {
            key,
            body: stats::truncate_body(body),
        }
    }
}

/// The system under load.
pub enum Target {
    /// The gateway, over HTTP/1.1 (Kubernetes REST).
    Http(Box<http::HttpTarget>),
    /// The storage or validation service, over gRPC.
    Grpc(grpc::GrpcTarget),
}

impl Target {
    /// Opens the connections to the target `cfg` names (gRPC channels are dialled here; HTTP
    /// connections are opened lazily per worker).
    pub async fn connect(cfg: &Config) -> anyhow::Result<Target> {
        Ok(match cfg.target {
            TargetKind::Http => Target::Http(Box::new(http::HttpTarget::new(cfg)?)),
            _ => Target::Grpc(grpc::GrpcTarget::connect(cfg).await?),
        })
    }

    async fn setup(&self) -> anyhow::Result<()> {
        match self {
            Target::Http(t) => t.setup().await,
            Target::Grpc(t) => t.setup().await,
        }
    }

    async fn ensure_object(&self, name: &str, seq: u64) -> Result<(), Failure> {
        match self {
            Target::Http(t) => t.ensure_object(name, seq).await,
            Target::Grpc(t) => t.ensure_object(name, seq).await,
        }
    }

    async fn op(
        &self,
        worker: usize,
        op: Op,
        name: &str,
        seq: u64,
        rv: Option<&str>,
    ) -> Result<Option<String>, Failure> {
        match self {
            Target::Http(t) => t.op(worker, op, name, seq, rv).await,
            Target::Grpc(t) => t.op(worker, op, name, seq, rv).await,
        }
    }

    async fn read_rv(&self, worker: usize, name: &str) -> Result<String, Failure> {
        match self {
            Target::Http(t) => t.read_rv(worker, name).await,
            Target::Grpc(t) => t.read_rv(worker, name).await,
        }
    }
}

/// The working-set object a worker updates, for a uniform `r`. With at least as many objects
/// as workers, worker `w` owns the objects `w, w + C, w + 2C, ...` so updates of different
/// workers never race on one resourceVersion (no self-inflicted 409 Conflicts); with fewer
/// objects than workers, workers share object `w % N` and conflicts can occur.
pub fn owned_object(worker: usize, concurrency: usize, objects: usize, r: u64) -> u64 {
    let (w, c, n) = (
        worker as u64,
        concurrency.max(1) as u64,
        objects.max(1) as u64,
    );
    if n < c {
        return w % n;
    }
    let owned = (n - w % c).div_ceil(c);
    w % c + c * (r % owned.max(1))
}

/// Name of working-set object `i`.
pub fn working_set_name(i: u64) -> String {
    format!("lt-set-{i}")
}

/// Name of the `seq`-th object created by `worker` in run `run`: unique per run and worker,
/// a valid DNS subdomain.
pub fn created_name(run: &str, worker: usize, seq: u64) -> String {
    format!("lt-{run}-{worker}-{seq}")
}

/// A short run id (base-36 of the start time in ms), so reruns on a persistent store do not
/// collide with objects of earlier runs.
pub fn run_id(now_ms: u128) -> String {
    let mut n = now_ms % 36u128.pow(8);
    let mut s = Vec::new();
    loop {
        let d = (n % 36) as u8;
        s.push(if d < 10 { b'0' + d } else { b'a' + d - 10 });
        n /= 36;
        if n == 0 {
            break;
        }
    }
    s.reverse();
    String::from_utf8(s).unwrap_or_else(|_| "0".into())
}

/// Pre-creates `cfg.objects` working-set objects with `cfg.concurrency` workers (not timed).
async fn prepare_working_set(target: &Arc<Target>, cfg: &Config) -> anyhow::Result<()> {
    let n = cfg.objects as u64;
    let next = Arc::new(AtomicU64::new(0));
    let failed = Arc::new(AtomicU64::new(0));
    let first_error = Arc::new(std::sync::Mutex::new(None::<Failure>));
    let started = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..cfg.concurrency.min(cfg.objects.max(1)) {
        let (target, next, failed, first_error) = (
            target.clone(),
            next.clone(),
            failed.clone(),
            first_error.clone(),
        );
        let timeout = cfg.timeout;
        tasks.spawn(async move {
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= n {
                    break;
                }
                let name = working_set_name(i);
                let r = tokio::time::timeout(timeout, target.ensure_object(&name, i))
                    .await
                    .unwrap_or_else(|_| Err(Failure::new("timeout", "")));
                if let Err(f) = r {
                    failed.fetch_add(1, Ordering::Relaxed);
                    if let Ok(mut g) = first_error.lock() {
                        g.get_or_insert(f);
                    }
                }
            }
        });
    }
    while tasks.join_next().await.is_some() {}
    let failed = failed.load(Ordering::Relaxed);
    let first = first_error.lock().ok().and_then(|g| g.clone());
    eprintln!(
        "setup: working set of {n} objects ready in {:.1} s ({failed} failed)",
        started.elapsed().as_secs_f64()
    );
    if failed == n && n > 0 {
        let f = first.unwrap_or_else(|| Failure::new("unknown", ""));
        anyhow::bail!(
            "could not create any working-set object: {}: {}",
            f.key,
            f.body
        );
    }
    if let Some(f) = first {
        eprintln!(
            "setup: warning: first working-set failure: {}: {}",
            f.key, f.body
        );
    }
    Ok(())
}

struct WorkerCtx {
    target: Arc<Target>,
    schedule: Arc<Schedule>,
    live: Arc<LiveCounters>,
    cfg: Arc<Config>,
    run: String,
    /// Start of the measured phase (the timeline's origin).
    start: Instant,
    /// The run's timeline, fed by every worker once per second.
    timeline: Arc<Mutex<timeline::Timeline>>,
}

async fn worker(id: usize, ctx: Arc<WorkerCtx>) -> Recorder {
    let mut rec = Recorder::with_timeline(ctx.timeline.clone());
    let mut rng = Rng::new(0x5eed_0000_0000_0000 ^ (id as u64).wrapping_mul(0x9e37_79b9));
    let mut seq: u64 = 0;
    let objects = ctx.cfg.objects as u64;
    // Last resourceVersion seen for each owned object (the precondition of its next update).
    let mut rvs: HashMap<u64, String> = HashMap::new();
    let needs_rv = ctx.cfg.target != TargetKind::Validation;
    while let Some(ticket) = ctx.schedule.next(Instant::now()) {
        if let Some(due) = ticket.due {
            tokio::time::sleep_until(due.into()).await;
        }
        let op = ctx.cfg.mix.pick(rng.next_u64());
        let mut index = None;
        let name = match op {
            Op::Create => created_name(&ctx.run, id, seq),
            Op::Get => working_set_name(rng.below(objects)),
            Op::Update => {
                let i = owned_object(id, ctx.cfg.concurrency, ctx.cfg.objects, rng.next_u64());
                index = Some(i);
                working_set_name(i)
            }
            Op::List => String::new(),
            // Its own objects, as updates: concurrent applies to one object would only
            // measure the retries of lost races.
            Op::Apply => working_set_name(owned_object(
                id,
                ctx.cfg.concurrency,
                ctx.cfg.objects,
                rng.next_u64(),
            )),
        };
        // First update of an object: read its resourceVersion (not timed in closed loop).
        let mut rv = None;
        if let (Some(i), true) = (index, needs_rv) {
            rv = match rvs.get(&i) {
                Some(v) => Some(v.clone()),
                None => {
                    let read = tokio::time::timeout(ctx.cfg.timeout, ctx.target.read_rv(id, &name))
                        .await
                        .unwrap_or_else(|_| Err(Failure::new("timeout", "")));
                    match read {
                        Ok(v) => Some(v),
                        Err(f) => {
                            ctx.live.ops.fetch_add(1, Ordering::Relaxed);
                            ctx.live.errors.fetch_add(1, Ordering::Relaxed);
                            rec.error(
                                op,
                                format!("read before update: {}", f.key),
                                f.body.as_bytes(),
                                ctx.start.elapsed(),
                            );
                            seq += 1;
                            continue;
                        }
                    }
                }
            };
        }
        // Open loop: latency counts from when the request was due, not when it was sent.
        let started = ticket.due.unwrap_or_else(Instant::now);
        let r = tokio::time::timeout(
            ctx.cfg.timeout,
            ctx.target.op(id, op, &name, seq, rv.as_deref()),
        )
        .await;
        let done = Instant::now();
        let latency = done.saturating_duration_since(started);
        let at = done.saturating_duration_since(ctx.start);
        ctx.live.ops.fetch_add(1, Ordering::Relaxed);
        if let Some(i) = index {
            match &r {
                Ok(Ok(Some(new_rv))) => {
                    rvs.insert(i, new_rv.clone());
                }
                _ => {
                    rvs.remove(&i);
                }
            }
        }
        match r {
            Ok(Ok(_)) => rec.success(op, latency, at),
            Ok(Err(f)) => {
                ctx.live.errors.fetch_add(1, Ordering::Relaxed);
                rec.error(op, f.key, f.body.as_bytes(), at);
            }
            Err(_) => {
                ctx.live.errors.fetch_add(1, Ordering::Relaxed);
                rec.error(
                    op,
                    "timeout".into(),
                    format!("no answer within {:?}", ctx.cfg.timeout).as_bytes(),
                    at,
                );
            }
        }
        seq += 1;
    }
    rec
}

/// Prints one progress line per second until aborted.
async fn progress(live: Arc<LiveCounters>, start: Instant) {
    let mut tick = tokio::time::interval_at(
        tokio::time::Instant::from_std(start) + Duration::from_secs(1),
        Duration::from_secs(1),
    );
    let (mut last_ops, mut last_t) = (0u64, start);
    loop {
        tick.tick().await;
        let now = Instant::now();
        let (ops, errors) = live.snapshot();
        eprintln!(
            "{}",
            stats::progress_line(now - start, ops, ops - last_ops, now - last_t, errors)
        );
        last_ops = ops;
        last_t = now;
    }
}

/// Runs setup and the measured phase; returns the report.
pub async fn run(cfg: Config) -> anyhow::Result<Report> {
    let cfg = Arc::new(cfg);
    let target = Arc::new(Target::connect(&cfg).await?);
    if cfg.setup {
        target.setup().await?;
    }
    let needs_set = cfg.mix.ops().any(Op::needs_working_set)
        || (cfg.target == TargetKind::Validation && cfg.mix.ops().any(|o| o == Op::Update));
    if needs_set && cfg.target != TargetKind::Validation {
        prepare_working_set(&target, &cfg).await?;
    }
    let run = run_id(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis())
            .unwrap_or(0),
    );
    let start = Instant::now();
    let schedule = Arc::new(Schedule::new(
        start,
        cfg.stop.duration,
        cfg.stop.requests,
        cfg.rate,
    ));
    let live = Arc::new(LiveCounters::default());
    eprintln!(
        "running {} ({}) against {} {} with {} workers{}{}{}",
        cfg.scenario,
        cfg.mix.describe(),
        cfg.target.as_str(),
        cfg.endpoint,
        cfg.concurrency,
        cfg.stop
            .duration
            .map(|d| format!(", for {:.1} s", d.as_secs_f64()))
            .unwrap_or_default(),
        cfg.stop
            .requests
            .map(|n| format!(", at most {n} requests"))
            .unwrap_or_default(),
        cfg.rate
            .map(|r| format!(", open loop at {r}/s"))
            .unwrap_or_default(),
    );
    let progress_task = cfg
        .progress
        .then(|| tokio::spawn(progress(live.clone(), start)));
    let timeline = Arc::new(Mutex::new(timeline::Timeline::default()));
    let ctx = Arc::new(WorkerCtx {
        target: target.clone(),
        schedule,
        live,
        cfg: cfg.clone(),
        run,
        start,
        timeline: timeline.clone(),
    });
    let mut tasks = tokio::task::JoinSet::new();
    for id in 0..cfg.concurrency {
        tasks.spawn(worker(id, ctx.clone()));
    }
    let mut total = Recorder::with_timeline(timeline);
    while let Some(r) = tasks.join_next().await {
        match r {
            Ok(rec) => total.merge(rec),
            Err(e) => eprintln!("worker failed: {e}"),
        }
    }
    let elapsed = start.elapsed();
    if let Some(p) = progress_task {
        p.abort();
    }
    Ok(Report::build(
        RunInfo {
            target: cfg.target.as_str().into(),
            endpoint: cfg.endpoint.clone(),
            scenario: cfg.scenario.clone(),
            mix: cfg.mix.describe(),
            concurrency: cfg.concurrency,
            rate: cfg.rate,
            object_size: cfg.object_size,
            working_set: if needs_set { cfg.objects } else { 0 },
        },
        &total,
        elapsed,
    ))
}

/// Entry point used by `main.rs`: parse, run, print the table and the one-line JSON summary,
/// write `--json-out` and `--html-out`. Exit code 0 = run completed with at least one
/// success, 1 = bad arguments or setup failure, 3 = every request failed.
pub fn main_with_args(args: config::Args) -> std::process::ExitCode {
    use std::process::ExitCode;
    let cfg = match Config::from_args(args) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("crdplane-load: {e}");
            return ExitCode::from(1);
        }
    };
    let json_out = cfg.json_out.clone();
    let html_out = cfg.html_out.clone();
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("crdplane-load: runtime: {e}");
            return ExitCode::from(1);
        }
    };
    let report = match rt.block_on(run(cfg)) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("crdplane-load: {e:#}");
            return ExitCode::from(1);
        }
    };
    print!("{}", report.table());
    println!("{}", report.summary_line());
    if let Some(path) = json_out {
        let pretty = serde_json::to_vec_pretty(&report).unwrap_or_default();
        if let Err(e) = std::fs::write(&path, pretty) {
            eprintln!("crdplane-load: writing {path}: {e}");
            return ExitCode::from(1);
        }
    }
    if let Some(path) = html_out {
        // named after the file: `--html-out before.html` is the report of "before"
        let label = std::path::Path::new(&path).file_stem().map_or_else(
            || report.scenario.clone(),
            |s| s.to_string_lossy().into_owned(),
        );
        let run = html::Run {
            label,
            reports: vec![report.clone()],
        };
        if let Err(e) = std::fs::write(&path, html::render(&[run])) {
            eprintln!("crdplane-load: writing {path}: {e}");
            return ExitCode::from(1);
        }
    }
    if report.ok == 0 {
        ExitCode::from(3)
    } else {
        ExitCode::SUCCESS
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn workers_own_disjoint_objects() {
        // 10 objects, 4 workers: worker 0 owns 0,4,8; worker 3 owns 3,7
        let owned = |w: usize| -> std::collections::BTreeSet<u64> {
            (0..1000).map(|r| owned_object(w, 4, 10, r)).collect()
        };
        assert_eq!(owned(0), [0, 4, 8].into());
        assert_eq!(owned(1), [1, 5, 9].into());
        assert_eq!(owned(2), [2, 6].into());
        assert_eq!(owned(3), [3, 7].into());
        // fewer objects than workers: shared, still in range
        assert_eq!(owned_object(5, 8, 3, 99), 2);
        for w in 0..64 {
            for r in 0..50 {
                assert!(owned_object(w, 64, 1000, r) < 1000);
            }
        }
    }

    #[test]
    fn names_are_valid_and_unique() {
        let run = run_id(1_763_771_000_123);
        assert!(run.len() <= 8 && !run.is_empty());
        assert!(
            run.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
        );
        let a = created_name(&run, 3, 17);
        let b = created_name(&run, 31, 7);
        assert_ne!(a, b);
        assert_eq!(a, format!("lt-{run}-3-17"));
        assert_eq!(working_set_name(42), "lt-set-42");
        assert_eq!(run_id(0), "0");
        assert_eq!(run_id(35), "z");
        assert_eq!(run_id(36), "10");
    }
}
