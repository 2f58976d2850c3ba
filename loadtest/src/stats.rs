//! Measurements of one run: per-worker recorders (HDR histograms with microsecond
//! resolution, error counts by HTTP status / gRPC code, a few sample error bodies), the live
//! counters behind the progress line, and the final [`Report`] with its table and JSON forms.
//! Each recorder also feeds the run's per-second [`timeline`](crate::timeline).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

use crate::config::Op;
use crate::timeline::{
    HistogramBucket, Timeline, TimelinePoint, TimelineRecorder, histogram_buckets,
};

/// Highest latency the histograms track (longer samples are clamped to it): 1 hour in µs.
pub const MAX_LATENCY_US: u64 = 3_600_000_000;
/// Sample error bodies kept per worker and in the report.
pub const MAX_ERROR_SAMPLES: usize = 5;
/// Bytes of an error body kept in a sample.
pub const MAX_SAMPLE_BODY: usize = 600;

/// An empty latency histogram (µs, 1 µs ..= [`MAX_LATENCY_US`], 3 significant digits).
pub fn new_histogram() -> Histogram<u64> {
    // 3 significant digits from 1 µs to 1 h: a few tens of KiB per histogram.
    Histogram::new_with_bounds(1, MAX_LATENCY_US, 3).expect("static histogram bounds are valid")
}

/// Counters read by the progress printer while workers run.
#[derive(Default, Debug)]
pub struct LiveCounters {
    /// Requests completed so far, successful or not.
    pub ops: AtomicU64,
    /// Requests failed so far (error status, transport error or timeout).
    pub errors: AtomicU64,
}

impl LiveCounters {
    /// (completed, failed) at this moment.
    pub fn snapshot(&self) -> (u64, u64) {
        (
            self.ops.load(Ordering::Relaxed),
            self.errors.load(Ordering::Relaxed),
        )
    }
}

/// One failed request kept for display.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct ErrorSample {
    /// Operation name (`create`, `get`, ...).
    pub op: String,
    /// Error key (`http 409 AlreadyExists`, `grpc Unavailable`, `timeout`, ...).
    pub error: String,
    /// Response body or error message, truncated to [`MAX_SAMPLE_BODY`] bytes.
    pub body: String,
}

/// Per-operation measurements.
#[derive(Clone, Debug)]
pub struct OpStats {
    /// Latencies of the successful requests, in µs.
    pub hist: Histogram<u64>,
    /// Successful requests.
    pub ok: u64,
    /// Failed requests.
    pub errors: u64,
}

impl Default for OpStats {
    fn default() -> Self {
        OpStats {
            hist: new_histogram(),
            ok: 0,
            errors: 0,
        }
    }
}

/// What one worker measured (merged into the others at the end; no locks on the hot path).
#[derive(Clone, Debug, Default)]
pub struct Recorder {
    /// Counts and latencies per operation.
    pub per_op: BTreeMap<Op, OpStats>,
    /// (operation, error key such as "http 409" or "grpc AlreadyExists") → count.
    pub errors: BTreeMap<(Op, String), u64>,
    /// The first [`MAX_ERROR_SAMPLES`] failures, with their bodies.
    pub samples: Vec<ErrorSample>,
    /// Counts and latencies per second of the run.
    pub timeline: TimelineRecorder,
}

/// Keeps at most `MAX_SAMPLE_BODY` bytes of `body` (cut on a char boundary), lossily decoded.
pub fn truncate_body(body: &[u8]) -> String {
    let s = String::from_utf8_lossy(&body[..body.len().min(MAX_SAMPLE_BODY + 4)]);
    if s.len() <= MAX_SAMPLE_BODY {
        return s.trim_end().to_string();
    }
    let mut end = MAX_SAMPLE_BODY;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &s[..end])
}

impl Recorder {
    /// A recorder whose timeline goes to `timeline` (shared by the workers of a run).
    pub fn with_timeline(timeline: Arc<Mutex<Timeline>>) -> Recorder {
        Recorder {
            timeline: TimelineRecorder::new(timeline),
            ..Recorder::default()
        }
    }

    /// Records a successful request and its latency (clamped to 1 µs ..= 1 h), completed
    /// `at` after the start of the measured phase.
    pub fn success(&mut self, op: Op, latency: Duration, at: Duration) {
        let us = u64::try_from(latency.as_micros())
            .unwrap_or(u64::MAX)
            .clamp(1, MAX_LATENCY_US);
        let s = self.per_op.entry(op).or_default();
        s.hist.saturating_record(us);
        s.ok += 1;
        self.timeline.ok(at, us);
    }

    /// Records a failed request under its error key, completed `at` after the start of the
    /// measured phase, keeping its body as a sample while there is room.
    pub fn error(&mut self, op: Op, key: String, body: &[u8], at: Duration) {
        self.timeline.error(at);
        self.per_op.entry(op).or_default().errors += 1;
        if self.samples.len() < MAX_ERROR_SAMPLES {
            self.samples.push(ErrorSample {
                op: op.as_str().to_string(),
                error: key.clone(),
                body: truncate_body(body),
            });
        }
        *self.errors.entry((op, key)).or_default() += 1;
    }

    /// Adds another worker's measurements to these.
    pub fn merge(&mut self, other: Recorder) {
        for (op, s) in other.per_op {
            let mine = self.per_op.entry(op).or_default();
            // Same bounds on both sides: add cannot fail; ignore defensively.
            let _ = mine.hist.add(&s.hist);
            mine.ok += s.ok;
            mine.errors += s.errors;
        }
        for (k, n) in other.errors {
            *self.errors.entry(k).or_default() += n;
        }
        for s in other.samples {
            if self.samples.len() >= MAX_ERROR_SAMPLES {
                break;
            }
            self.samples.push(s);
        }
        self.timeline.merge(other.timeline);
    }
}

/// Latency percentiles of successful requests, in microseconds.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct LatencySummary {
    /// Number of successful requests measured.
    pub count: u64,
    /// Fastest request.
    pub min: u64,
    /// Mean, rounded to 0.1 µs.
    pub mean: f64,
    /// Median.
    pub p50: u64,
    /// 90th percentile.
    pub p90: u64,
    /// 99th percentile.
    pub p99: u64,
    /// 99.9th percentile.
    pub p999: u64,
    /// Slowest request.
    pub max: u64,
}

impl LatencySummary {
    /// The summary of a histogram; all zeros when it is empty.
    pub fn from_histogram(h: &Histogram<u64>) -> LatencySummary {
        if h.is_empty() {
            return LatencySummary {
                count: 0,
                min: 0,
                mean: 0.0,
                p50: 0,
                p90: 0,
                p99: 0,
                p999: 0,
                max: 0,
            };
        }
        LatencySummary {
            count: h.len(),
            min: h.min(),
            mean: (h.mean() * 10.0).round() / 10.0,
            p50: h.value_at_quantile(0.50),
            p90: h.value_at_quantile(0.90),
            p99: h.value_at_quantile(0.99),
            p999: h.value_at_quantile(0.999),
            max: h.max(),
        }
    }
}

/// The results of one operation in the report.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct OpReport {
    /// Operation name (`create`, `get`, ...).
    pub op: String,
    /// Requests issued (ok + errors).
    pub requests: u64,
    /// Successful requests.
    pub ok: u64,
    /// Failed requests.
    pub errors: u64,
    /// Successful requests per second.
    pub ok_per_sec: f64,
    /// Latency of its successful requests.
    pub latency_us: LatencySummary,
}

/// How often one error occurred for one operation.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct ErrorCount {
    /// Operation name (`create`, `get`, ...).
    pub op: String,
    /// Error key (`http 409 AlreadyExists`, `grpc Unavailable`, `timeout`, ...).
    pub error: String,
    /// Number of failed requests with that key.
    pub count: u64,
}

/// The result of one run (the JSON written by `--json-out` and summarized on stdout).
///
/// Read back by `crdplane-load report`; the fields added after the first version
/// (`timeline`, `latency_histogram`) default to empty, so older files still load.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Report {
    /// Always `crdplane-load` (tells these JSON files apart from others).
    pub tool: String,
    /// `http`, `storage` or `validation`.
    pub target: String,
    /// Gateway base URL or gRPC endpoint.
    pub endpoint: String,
    /// Scenario name (`create`, ..., `mixed`).
    pub scenario: String,
    /// Operation weights as `op=weight,...`.
    pub mix: String,
    /// Number of concurrent workers.
    pub concurrency: usize,
    /// Target open-loop rate, None for closed loop.
    pub rate: Option<f64>,
    /// Serialized size CronTabs were padded to; 0 = no padding.
    pub object_size: usize,
    /// Objects pre-created for get/update/list; 0 when the scenario needs none.
    pub working_set: usize,
    /// Length of the measured phase, in seconds (ms precision).
    pub elapsed_sec: f64,
    /// Requests issued (ok + errors).
    pub requests: u64,
    /// Successful requests.
    pub ok: u64,
    /// Failed requests.
    pub errors: u64,
    /// Successful requests per second.
    pub ok_per_sec: f64,
    /// All requests per second, failed ones included.
    pub requests_per_sec: f64,
    /// Latency of all successful requests.
    pub latency_us: LatencySummary,
    /// Results per operation, in `Op` order.
    pub ops: Vec<OpReport>,
    /// Failures by operation and error key, most frequent first.
    pub error_counts: Vec<ErrorCount>,
    /// The first few failures with their bodies.
    pub error_samples: Vec<ErrorSample>,
    /// Requests and latency percentiles per second of the measured phase (left out of the
    /// JSON when empty, and of the summary line).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub timeline: Vec<TimelinePoint>,
    /// Latencies of all successful requests in log-spaced buckets (20 per decade), non-empty
    /// buckets only (left out of the JSON when empty, and of the summary line).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub latency_histogram: Vec<HistogramBucket>,
}

/// Run parameters copied into the report.
#[derive(Clone, Debug)]
pub struct RunInfo {
    /// [`Report::target`].
    pub target: String,
    /// [`Report::endpoint`].
    pub endpoint: String,
    /// [`Report::scenario`].
    pub scenario: String,
    /// [`Report::mix`].
    pub mix: String,
    /// [`Report::concurrency`].
    pub concurrency: usize,
    /// [`Report::rate`].
    pub rate: Option<f64>,
    /// [`Report::object_size`].
    pub object_size: usize,
    /// [`Report::working_set`].
    pub working_set: usize,
}

fn per_sec(n: u64, secs: f64) -> f64 {
    if secs > 0.0 {
        ((n as f64 / secs) * 10.0).round() / 10.0
    } else {
        0.0
    }
}

impl Report {
    /// Totals, rates and percentiles of the merged measurements of a run that took `elapsed`.
    pub fn build(info: RunInfo, rec: &Recorder, elapsed: Duration) -> Report {
        let secs = elapsed.as_secs_f64();
        let mut all = new_histogram();
        let mut ops = Vec::new();
        let (mut ok, mut errors) = (0, 0);
        for (op, s) in &rec.per_op {
            let _ = all.add(&s.hist);
            ok += s.ok;
            errors += s.errors;
            ops.push(OpReport {
                op: op.as_str().to_string(),
                requests: s.ok + s.errors,
                ok: s.ok,
                errors: s.errors,
                ok_per_sec: per_sec(s.ok, secs),
                latency_us: LatencySummary::from_histogram(&s.hist),
            });
        }
        let mut error_counts: Vec<ErrorCount> = rec
            .errors
            .iter()
            .map(|((op, e), n)| ErrorCount {
                op: op.as_str().to_string(),
                error: e.clone(),
                count: *n,
            })
            .collect();
        error_counts.sort_by(|a, b| b.count.cmp(&a.count).then(a.op.cmp(&b.op)));
        Report {
            tool: "crdplane-load".into(),
            target: info.target,
            endpoint: info.endpoint,
            scenario: info.scenario,
            mix: info.mix,
            concurrency: info.concurrency,
            rate: info.rate,
            object_size: info.object_size,
            working_set: info.working_set,
            elapsed_sec: (secs * 1000.0).round() / 1000.0,
            requests: ok + errors,
            ok,
            errors,
            ok_per_sec: per_sec(ok, secs),
            requests_per_sec: per_sec(ok + errors, secs),
            latency_us: LatencySummary::from_histogram(&all),
            ops,
            error_counts,
            error_samples: rec.samples.clone(),
            timeline: rec.timeline.snapshot().points(secs),
            latency_histogram: histogram_buckets(&all),
        }
    }

    /// The human-readable table.
    pub fn table(&self) -> String {
        let mut out = String::new();
        let mode = match self.rate {
            Some(r) => format!("open loop at {r}/s"),
            None => "closed loop".to_string(),
        };
        let _ = writeln!(
            out,
            "crdplane-load: {} ({}) via {} {} | concurrency {} | {} | object size {} | {:.2} s",
            self.scenario,
            self.mix,
            self.target,
            self.endpoint,
            self.concurrency,
            mode,
            if self.object_size == 0 {
                "natural".to_string()
            } else {
                format!("{} B", self.object_size)
            },
            self.elapsed_sec
        );
        let _ = writeln!(
            out,
            "{:<8} {:>10} {:>10} {:>8} {:>10} {:>9} {:>9} {:>9} {:>9} {:>9}",
            "op",
            "requests",
            "ok",
            "errors",
            "ok/s",
            "p50 ms",
            "p90 ms",
            "p99 ms",
            "max ms",
            "mean ms"
        );
        let row = |out: &mut String,
                   name: &str,
                   req: u64,
                   ok: u64,
                   err: u64,
                   rate: f64,
                   l: &LatencySummary| {
            let ms = |us: u64| us as f64 / 1000.0;
            let _ = writeln!(
                out,
                "{:<8} {:>10} {:>10} {:>8} {:>10.1} {:>9.3} {:>9.3} {:>9.3} {:>9.3} {:>9.3}",
                name,
                req,
                ok,
                err,
                rate,
                ms(l.p50),
                ms(l.p90),
                ms(l.p99),
                ms(l.max),
                l.mean / 1000.0
            );
        };
        for o in &self.ops {
            row(
                &mut out,
                &o.op,
                o.requests,
                o.ok,
                o.errors,
                o.ok_per_sec,
                &o.latency_us,
            );
        }
        if self.ops.len() > 1 {
            row(
                &mut out,
                "total",
                self.requests,
                self.ok,
                self.errors,
                self.ok_per_sec,
                &self.latency_us,
            );
        }
        if !self.error_counts.is_empty() {
            let _ = writeln!(out, "errors:");
            for e in &self.error_counts {
                let _ = writeln!(out, "  {:<8} {:<28} {:>10}", e.op, e.error, e.count);
            }
        }
        if !self.error_samples.is_empty() {
            let _ = writeln!(out, "sample errors:");
            for s in &self.error_samples {
                let _ = writeln!(out, "  {} {}: {}", s.op, s.error, s.body);
            }
        }
        out
    }

    /// One line of JSON (the whole report, minus the error samples, the timeline and the
    /// histogram, which may be long).
    pub fn summary_line(&self) -> String {
        let mut short = self.clone();
        short.error_samples.clear();
        short.timeline.clear();
        short.latency_histogram.clear();
        serde_json::to_string(&short).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"))
    }
}

/// The once-per-second progress line.
pub fn progress_line(
    elapsed: Duration,
    ops: u64,
    ops_delta: u64,
    dt: Duration,
    errors: u64,
) -> String {
    let rate = if dt.as_secs_f64() > 0.0 {
        ops_delta as f64 / dt.as_secs_f64()
    } else {
        0.0
    };
    format!(
        "[{:>7.1}s] ops {:>10}  rate {:>9.0}/s  errors {}",
        elapsed.as_secs_f64(),
        ops,
        rate,
        errors
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info() -> RunInfo {
        RunInfo {
            target: "http".into(),
            endpoint: "http://127.0.0.1:6443".into(),
            scenario: "mixed".into(),
            mix: "create=1,get=8".into(),
            concurrency: 64,
            rate: None,
            object_size: 0,
            working_set: 1000,
        }
    }

    #[test]
    fn percentiles_from_known_samples() {
        let mut r = Recorder::default();
        // 1..=1000 ms for get: p50 = 500 ms, p90 = 900 ms, p99 = 990 ms, max = 1000 ms
        for ms in 1..=1000u64 {
            r.success(Op::Get, Duration::from_millis(ms), Duration::ZERO);
        }
        let rep = Report::build(info(), &r, Duration::from_secs(2));
        let l = &rep.latency_us;
        assert_eq!(l.count, 1000);
        // HDR with 3 significant digits: within 0.1 %
        let near = |v: u64, want: u64| (v as f64 - want as f64).abs() <= want as f64 * 0.001 + 1.0;
        assert!(near(l.p50, 500_000), "{}", l.p50);
        assert!(near(l.p90, 900_000), "{}", l.p90);
        assert!(near(l.p99, 990_000), "{}", l.p99);
        assert!(near(l.max, 1_000_000), "{}", l.max);
        assert!(near(l.min, 1_000), "{}", l.min);
        assert_eq!(rep.ok_per_sec, 500.0);
        assert_eq!(rep.errors, 0);
    }

    #[test]
    fn errors_are_counted_not_sampled_as_latency() {
        let mut r = Recorder::default();
        r.success(Op::Create, Duration::from_micros(800), Duration::ZERO);
        for i in 0..10 {
            r.error(
                Op::Create,
                "http 409".into(),
                format!("body {i}").as_bytes(),
                Duration::ZERO,
            );
        }
        r.error(Op::Get, "grpc NotFound".into(), b"", Duration::ZERO);
        let rep = Report::build(info(), &r, Duration::from_secs(1));
        assert_eq!(rep.ok, 1);
        assert_eq!(rep.errors, 11);
        assert_eq!(rep.requests, 12);
        assert_eq!(rep.latency_us.count, 1);
        assert_eq!(rep.error_counts[0].error, "http 409");
        assert_eq!(rep.error_counts[0].count, 10);
        assert_eq!(rep.error_counts[1].error, "grpc NotFound");
        assert_eq!(rep.error_samples.len(), MAX_ERROR_SAMPLES);
        let get = rep.ops.iter().find(|o| o.op == "get").unwrap();
        assert_eq!((get.ok, get.errors, get.latency_us.count), (0, 1, 0));
    }

    #[test]
    fn merge_adds_everything() {
        let mut a = Recorder::default();
        let mut b = Recorder::default();
        a.success(Op::Get, Duration::from_micros(100), Duration::ZERO);
        b.success(Op::Get, Duration::from_micros(300), Duration::ZERO);
        b.error(Op::Get, "timeout".into(), b"", Duration::ZERO);
        a.merge(b);
        let s = &a.per_op[&Op::Get];
        assert_eq!((s.ok, s.errors, s.hist.len()), (2, 1, 2));
        assert_eq!(a.errors[&(Op::Get, "timeout".to_string())], 1);
        assert_eq!(s.hist.max(), 300);
    }

    #[test]
    fn table_and_json_format() {
        let mut r = Recorder::default();
        for _ in 0..4 {
            r.success(Op::Create, Duration::from_micros(1500), Duration::ZERO);
        }
        r.success(Op::Get, Duration::from_micros(250), Duration::ZERO);
        r.error(
            Op::Create,
            "http 422".into(),
            b"{\"kind\":\"Status\"}\n",
            Duration::ZERO,
        );
        let rep = Report::build(info(), &r, Duration::from_secs(1));
        let t = rep.table();
        let lines: Vec<&str> = t.lines().collect();
        assert!(lines[0].starts_with("crdplane-load: mixed (create=1,get=8) via http"));
        assert!(lines[1].contains("p50 ms") && lines[1].contains("p99 ms"));
        assert!(
            lines[2].starts_with("create")
                && lines[2].contains("1.500")
                && lines[2].contains(" 4 "),
            "{}",
            lines[2]
        );
        assert!(
            lines[3].starts_with("get") && lines[3].contains("0.250"),
            "{}",
            lines[3]
        );
        assert!(lines[4].starts_with("total"), "{}", lines[4]);
        assert!(t.contains("errors:\n  create   http 422"));
        assert!(t.contains("sample errors:\n  create http 422: {\"kind\":\"Status\"}"));
        let line = rep.summary_line();
        assert!(!line.contains('\n'));
        let v: serde_json::Value = serde_json::from_str(&line).unwrap();
        assert_eq!(v["ok"], 5);
        assert_eq!(v["errors"], 1);
        assert_eq!(v["latency_us"]["max"], 1500);
        assert_eq!(v["ops"][1]["op"], "get");
        assert_eq!(v["error_counts"][0]["count"], 1);
    }

    #[test]
    fn report_json_has_timeline_and_histogram_and_reads_back() {
        let mut r = Recorder::default();
        for ms in 0..2000u64 {
            r.success(
                Op::Get,
                Duration::from_micros(500),
                Duration::from_millis(ms),
            );
        }
        r.error(Op::Get, "timeout".into(), b"", Duration::from_millis(1500));
        let rep = Report::build(info(), &r, Duration::from_millis(2000));
        assert_eq!(rep.timeline.len(), 2);
        assert_eq!((rep.timeline[0].ok, rep.timeline[0].errors), (1000, 0));
        assert_eq!((rep.timeline[1].ok, rep.timeline[1].errors), (1000, 1));
        assert_eq!(rep.timeline[1].p99_us, 500);
        assert_eq!(rep.latency_histogram.len(), 1);
        assert_eq!(rep.latency_histogram[0].count, 2000);
        let full: serde_json::Value = serde_json::to_value(&rep).unwrap();
        assert_eq!(full["timeline"][1]["t_s"], 1.0);
        assert_eq!(full["timeline"][1]["p50_us"], 500);
        assert_eq!(full["latency_histogram"][0]["count"], 2000);
        // the old fields are unchanged, and come first
        let text = serde_json::to_string(&rep).unwrap();
        assert!(text.starts_with("{\"tool\":\"crdplane-load\",\"target\":\"http\""));
        let back: Report = serde_json::from_str(&text).unwrap();
        assert_eq!(back, rep);
        // the summary line stays one short line
        let line: serde_json::Value = serde_json::from_str(&rep.summary_line()).unwrap();
        assert!(line.get("timeline").is_none() && line.get("latency_histogram").is_none());
    }

    #[test]
    fn body_truncation_is_bounded_and_utf8_safe() {
        let long = "é".repeat(1000);
        let t = truncate_body(long.as_bytes());
        assert!(t.len() <= MAX_SAMPLE_BODY + '…'.len_utf8());
        assert!(t.ends_with('…'));
        assert_eq!(truncate_body(b"short\n"), "short");
        assert_eq!(truncate_body(&[0xff, b'a']), "\u{fffd}a");
    }

    #[test]
    fn progress_line_shows_rate() {
        let l = progress_line(
            Duration::from_secs(3),
            3000,
            1500,
            Duration::from_millis(500),
            2,
        );
        assert_eq!(l, "[    3.0s] ops       3000  rate      3000/s  errors 2");
    }

    #[test]
    fn latency_is_clamped() {
        let mut r = Recorder::default();
        r.success(Op::Get, Duration::from_secs(100_000), Duration::ZERO);
        r.success(Op::Get, Duration::ZERO, Duration::ZERO);
        let s = &r.per_op[&Op::Get];
        assert_eq!(s.hist.len(), 2);
        assert_eq!(s.hist.min(), 1);
        assert!(s.hist.max() >= MAX_LATENCY_US);
    }
}
