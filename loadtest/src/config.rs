//! Command line of `crdplane-load` and its checked form, [`Config`].
//!
//! The load tool sits outside the request path: it is a client of the gateway (HTTP, the
//! Kubernetes REST API) or of one service (gRPC). This module only turns arguments into a
//! validated plan; parsing helpers (`--mix`, `--duration`, `--rate`) are pure functions so
//! they are unit-tested without any I/O.

use std::fmt;
use std::time::Duration;

use clap::Parser;

/// Largest `--object-size` accepted: just under upstream's 3 MiB request body limit
/// (`Request entity too large: limit is 3145728`).
pub const MAX_OBJECT_SIZE: usize = 3 * 1024 * 1024 - 4096;
/// Largest `--concurrency` (number of workers); this and the bounds below keep a typo from
/// asking for absurd amounts of work.
pub const MAX_CONCURRENCY: usize = 10_000;
/// Largest `--objects` (working-set size).
pub const MAX_OBJECTS: usize = 1_000_000;
/// Longest `--duration` and `--timeout`.
pub const MAX_DURATION: Duration = Duration::from_secs(24 * 3600);
/// Highest open-loop `--rate`, in requests per second.
pub const MAX_RATE: f64 = 10_000_000.0;

/// One kind of request the tool can issue.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Op {
    /// POST of a new CronTab (storage Create; validation Admit of a CREATE).
    Create,
    /// GET of one working-set CronTab (storage Get).
    Get,
    /// PUT of a working-set CronTab, conditioned on its last resourceVersion (storage Update;
    /// validation Admit of an UPDATE).
    Update,
    /// LIST of the namespace's CronTabs, `limit` per page (storage List).
    List,
    /// Server-side apply of a working-set CronTab (`PATCH` with
    /// `application/apply-patch+yaml`, `fieldManager=crdplane-load-apply`, `force=true`
    /// for the first apply's takeover from the creating manager, no resourceVersion):
    /// what an update costs when the server merges and tracks field ownership. HTTP only.
    Apply,
}

impl Op {
    /// Every operation, in the order reports and `--mix` descriptions list them.
    pub const ALL: [Op; 5] = [Op::Create, Op::Get, Op::Update, Op::List, Op::Apply];

    /// The name used on the command line and in reports (`create`, `get`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            Op::Create => "create",
            Op::Get => "get",
            Op::Update => "update",
            Op::List => "list",
            Op::Apply => "apply",
        }
    }

    /// The operation named `s` (case-insensitive, surrounding spaces ignored).
    pub fn parse(s: &str) -> Option<Op> {
        match s.trim().to_ascii_lowercase().as_str() {
            "create" => Some(Op::Create),
            "get" => Some(Op::Get),
            "update" => Some(Op::Update),
            "list" => Some(Op::List),
            "apply" => Some(Op::Apply),
            _ => None,
        }
    }

    /// Whether the operation needs the pre-created working set.
    pub fn needs_working_set(self) -> bool {
        !matches!(self, Op::Create)
    }
}

impl fmt::Display for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Where the load goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TargetKind {
    /// The gateway, over HTTP/1.1 (Kubernetes REST).
    Http,
    /// The storage service, over gRPC.
    Storage,
    /// The validation service, over gRPC (Admit after LoadSchema).
    Validation,
}

impl TargetKind {
    /// The `--target` value (`http`, `storage`, `validation`).
    pub fn as_str(self) -> &'static str {
        match self {
            TargetKind::Http => "http",
            TargetKind::Storage => "storage",
            TargetKind::Validation => "validation",
        }
    }
}

/// A weighted choice of operations; `mixed` uses it, single scenarios are a mix of one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mix {
    /// (operation, weight), weights > 0, each operation at most once, in `Op` order.
    entries: Vec<(Op, u32)>,
    total: u64,
}

impl Mix {
    /// A mix of one operation (the single-operation scenarios).
    pub fn single(op: Op) -> Mix {
        Mix {
            entries: vec![(op, 1)],
            total: 1,
        }
    }

    /// (operation, weight) pairs, weights > 0, in `Op` order.
    pub fn entries(&self) -> &[(Op, u32)] {
        &self.entries
    }

    /// The operations the mix can pick.
    pub fn ops(&self) -> impl Iterator<Item = Op> + '_ {
        self.entries.iter().map(|(op, _)| *op)
    }

    /// Picks the operation for a uniformly distributed `r` (any u64): the weight line
    /// `[0, total)` is cut into consecutive ranges, one per entry.
    pub fn pick(&self, r: u64) -> Op {
        let mut x = r % self.total;
        for (op, w) in &self.entries {
            let w = u64::from(*w);
            if x < w {
                return *op;
            }
            x -= w;
        }
        // Unreachable: the weights sum to `total`. Fall back to the last entry.
        self.entries.last().map(|e| e.0).unwrap_or(Op::Get)
    }

    /// The mix as `op=weight,...` in `Op` order (as `--mix` takes it).
    pub fn describe(&self) -> String {
        self.entries
            .iter()
            .map(|(op, w)| format!("{op}={w}"))
            .collect::<Vec<_>>()
            .join(",")
    }
}

/// Parses `create=1,get=8,update=1`. Weights are integers 0..=1_000_000; zero-weight entries
/// are dropped; at least one positive weight is required; an operation may appear once.
pub fn parse_mix(s: &str) -> Result<Mix, String> {
    let mut weights: [Option<u32>; 5] = [None; 5];
    if s.trim().is_empty() {
        return Err("empty mix; expected e.g. create=1,get=8,update=1".into());
    }
    for part in s.split(',') {
        let part = part.trim();
        if part.is_empty() {
            continue;
        }
        let (name, w) = part
            .split_once('=')
            .ok_or_else(|| format!("mix entry {part:?} is not op=weight"))?;
        let op = Op::parse(name).ok_or_else(|| {
            format!("unknown operation {name:?} in mix (expected create, get, update, list, apply)")
        })?;
        let w: u32 = w
            .trim()
            .parse()
            .map_err(|_| format!("weight {w:?} of {op} is not a non-negative integer"))?;
        if w > 1_000_000 {
            return Err(format!("weight {w} of {op} is too large (max 1000000)"));
        }
        let slot = &mut weights[op as usize];
        if slot.is_some() {
            return Err(format!("operation {op} appears twice in mix"));
        }
        *slot = Some(w);
    }
    let entries: Vec<(Op, u32)> = Op::ALL
        .iter()
        .zip(weights)
        .filter_map(|(op, w)| w.filter(|w| *w > 0).map(|w| (*op, w)))
        .collect();
    if entries.is_empty() {
        return Err("mix has no operation with a positive weight".into());
    }
    let total = entries.iter().map(|(_, w)| u64::from(*w)).sum();
    Ok(Mix { entries, total })
}

/// Parses durations like `10s`, `500ms`, `2m`, `1h`, `1.5s`, or a bare number of seconds.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let t = s.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    if num.is_empty() {
        return Err(format!("duration {s:?} has no number"));
    }
    let n: f64 = num
        .parse()
        .map_err(|_| format!("duration {s:?}: {num:?} is not a number"))?;
    let secs = match unit.trim() {
        "" | "s" | "sec" | "secs" => n,
        "ms" => n / 1000.0,
        "us" | "µs" => n / 1_000_000.0,
        "m" | "min" => n * 60.0,
        "h" => n * 3600.0,
        other => {
            return Err(format!(
                "duration {s:?}: unknown unit {other:?} (use ms, s, m, h)"
            ));
        }
    };
    if !secs.is_finite() || secs <= 0.0 {
        return Err(format!("duration {s:?} must be positive"));
    }
    let d = Duration::from_secs_f64(secs.min(MAX_DURATION.as_secs_f64() + 1.0));
    if d > MAX_DURATION {
        return Err(format!("duration {s:?} exceeds the 24h maximum"));
    }
    Ok(d)
}

/// Parses a target rate in requests per second (`500`, `1.5k`, `2000/s`).
pub fn parse_rate(s: &str) -> Result<f64, String> {
    let mut t = s.trim();
    t = t.strip_suffix("/s").unwrap_or(t);
    let (num, mult) = if let Some(n) = t.strip_suffix(['k', 'K']) {
        (n, 1000.0)
    } else {
        (t, 1.0)
    };
    let r: f64 = num
        .trim()
        .parse()
        .map_err(|_| format!("rate {s:?} is not a number of requests per second"))?;
    let r = r * mult;
    if !r.is_finite() || r <= 0.0 {
        return Err(format!("rate {s:?} must be positive"));
    }
    if r > MAX_RATE {
        return Err(format!("rate {s:?} exceeds the maximum of {MAX_RATE}/s"));
    }
    Ok(r)
}

/// `crdplane-load`: load generator for crdplane (gateway over HTTP, services over gRPC).
#[derive(Parser, Debug, Clone)]
#[command(name = "crdplane-load", version, about)]
pub struct Args {
    /// Scenario: create, get, update, list, apply or mixed.
    #[arg(default_value = "create")]
    pub scenario: String,

    /// Operation weights for `mixed`, e.g. create=1,get=8,update=1.
    #[arg(long, default_value = "create=1,get=8,update=1")]
    pub mix: String,

    /// Target: http (the gateway), storage or validation (a service over gRPC).
    #[arg(long, default_value = "http")]
    pub target: String,

    /// Gateway base URL (for --target http).
    #[arg(long, default_value = "http://127.0.0.1:6443")]
    pub server: String,

    /// Service gRPC URL (for --target storage|validation).
    #[arg(long)]
    pub grpc: Option<String>,

    /// CA bundle (PEM) the gateway's serving certificate must chain to; needed for an
    /// https:// --server (kubectl's flag name).
    #[arg(long)]
    pub certificate_authority: Option<std::path::PathBuf>,

    /// Client certificate (PEM) to present over https (with --client-key).
    #[arg(long)]
    pub client_certificate: Option<std::path::PathBuf>,

    /// Key (PEM) of --client-certificate.
    #[arg(long)]
    pub client_key: Option<std::path::PathBuf>,

    /// Bearer token sent with every HTTP request.
    #[arg(long)]
    pub token: Option<String>,

    /// Number of concurrent workers.
    #[arg(long, default_value_t = 64)]
    pub concurrency: usize,

    /// How long to run (e.g. 10s, 500ms, 2m). Default 10s unless --requests is given.
    #[arg(long)]
    pub duration: Option<String>,

    /// Total number of requests to issue (instead of, or in addition to, --duration).
    #[arg(long)]
    pub requests: Option<u64>,

    /// Open-loop target rate in requests per second (default: closed loop, as fast as possible).
    #[arg(long)]
    pub rate: Option<String>,

    /// Serialized size in bytes each CronTab should reach (spec.padding is filled up to it).
    #[arg(long, default_value_t = 0)]
    pub object_size: usize,

    /// Tenant: HTTP paths get the `/clusters/<tenant>` prefix; gRPC requests carry it.
    #[arg(long)]
    pub tenant: Option<String>,

    /// Namespace of the CronTabs.
    #[arg(long, default_value = "default")]
    pub namespace: String,

    /// Size of the pre-created working set for get/update/list (not timed).
    #[arg(long, default_value_t = 1000)]
    pub objects: usize,

    /// `limit` of each list request (0 = no limit).
    #[arg(long, default_value_t = 500)]
    pub list_limit: u32,

    /// HTTP list: follow `metadata.continue` to the last page, so one timed operation is the
    /// whole paged list (with `--list-limit N`), as `kubectl get --chunk-size=N` reads it.
    #[arg(long)]
    pub list_all_pages: bool,

    /// Per-request timeout.
    #[arg(long, default_value = "30s")]
    pub timeout: String,

    /// Number of gRPC channels (HTTP/2 connections) shared by the workers.
    #[arg(long, default_value_t = 4)]
    pub grpc_channels: usize,

    /// Write the full report as JSON to this path.
    #[arg(long)]
    pub json_out: Option<String>,

    /// Write an HTML report (table, throughput and latency over time, latency histogram;
    /// one self-contained file) to this path.
    #[arg(long)]
    pub html_out: Option<String>,

    /// Tenant used on gRPC requests when --tenant is not given.
    #[arg(long, default_value = "default")]
    pub grpc_default_tenant: String,

    /// Skip the CRD/namespace setup (HTTP) or the LoadSchema call (validation).
    #[arg(long, default_value_t = false)]
    pub no_setup: bool,

    /// Disable the once-per-second progress lines on stderr.
    #[arg(long, default_value_t = false)]
    pub quiet: bool,
}

/// When the measured phase ends.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct StopCondition {
    /// Stop issuing requests after this long (`--duration`); None = no time limit.
    pub duration: Option<Duration>,
    /// Stop after this many requests in total (`--requests`); None = no count limit.
    pub requests: Option<u64>,
}

/// The validated plan of one run.
#[derive(Clone, Debug)]
pub struct Config {
    /// Scenario name as given, lowercased (`create`, `get`, `update`, `list`, `mixed`).
    pub scenario: String,
    /// Operations the workers draw from, with weights.
    pub mix: Mix,
    /// What receives the load.
    pub target: TargetKind,
    /// Gateway base URL without trailing slash (HTTP) or gRPC endpoint.
    pub endpoint: String,
    /// Number of concurrent workers.
    pub concurrency: usize,
    /// When the measured phase ends.
    pub stop: StopCondition,
    /// Open-loop rate in requests per second; None = closed loop.
    pub rate: Option<f64>,
    /// Serialized size each CronTab is padded to (`spec.padding`); 0 = no padding.
    pub object_size: usize,
    /// Tenant given on the command line (HTTP path prefix); None = plain paths.
    pub tenant: Option<String>,
    /// Tenant carried in gRPC requests.
    pub grpc_tenant: String,
    /// Namespace of the CronTabs.
    pub namespace: String,
    /// Size of the pre-created working set for get/update/list.
    pub objects: usize,
    /// `limit` of each list request; 0 = no limit.
    pub list_limit: u32,
    /// Follow `metadata.continue` to the last page within one timed list.
    pub list_all_pages: bool,
    /// Per-request timeout; a request without an answer by then counts as `timeout`.
    pub timeout: Duration,
    /// Number of gRPC channels (HTTP/2 connections) the workers share.
    pub grpc_channels: usize,
    /// Path the full JSON report is written to.
    pub json_out: Option<String>,
    /// Path the HTML report is written to.
    pub html_out: Option<String>,
    /// Create the CRD and namespace (HTTP) or load the schema (validation) before the run.
    pub setup: bool,
    /// Print a progress line on stderr once per second.
    pub progress: bool,
    /// TLS to the gateway (an https:// endpoint).
    pub tls: Option<TlsFiles>,
    /// Bearer token of every HTTP request.
    pub token: Option<String>,
}

/// What the tool trusts and presents over TLS.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsFiles {
    /// CA bundle (PEM).
    pub ca: std::path::PathBuf,
    /// Client certificate and key (PEM), if any.
    pub client: Option<(std::path::PathBuf, std::path::PathBuf)>,
}

fn check_dns_label(what: &str, s: &str) -> Result<(), String> {
    let ok = !s.is_empty()
        && s.len() <= 63
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !s.starts_with('-')
        && !s.ends_with('-');
    if ok {
        Ok(())
    } else {
        Err(format!(
            "{what} {s:?} must be a DNS label (lowercase letters, digits, '-', at most 63)"
        ))
    }
}

impl Config {
    /// Checks the command line and turns it into a plan; the error is a one-line message for
    /// the user.
    pub fn from_args(a: Args) -> Result<Config, String> {
        let scenario = a.scenario.trim().to_ascii_lowercase();
        let mix = match scenario.as_str() {
            "mixed" => parse_mix(&a.mix)?,
            s => Mix::single(Op::parse(s).ok_or_else(|| {
                format!("unknown scenario {s:?} (expected create, get, update, list, apply, mixed)")
            })?),
        };
        let target = match a.target.trim() {
            "http" => TargetKind::Http,
            "storage" => TargetKind::Storage,
            "validation" => TargetKind::Validation,
            t => {
                return Err(format!(
                    "unknown target {t:?} (expected http, storage, validation)"
                ));
            }
        };
        if target == TargetKind::Validation
            && let Some(op) = mix.ops().find(|op| matches!(op, Op::Get | Op::List))
        {
            return Err(format!(
                "the validation service only admits writes: scenario operation {op} is not available for --target validation (use create, update or a mix of them)"
            ));
        }
        if target != TargetKind::Http && mix.ops().any(|op| op == Op::Apply) {
            return Err(format!(
                "apply is server-side apply through the gateway: it needs --target http, not {}",
                target.as_str()
            ));
        }
        let endpoint = match target {
            TargetKind::Http => a.server.trim().trim_end_matches('/').to_string(),
            _ => a
                .grpc
                .as_deref()
                .map(|s| s.trim().trim_end_matches('/').to_string())
                .ok_or_else(|| format!("--target {} needs --grpc URL", target.as_str()))?,
        };
        let https = target == TargetKind::Http && endpoint.starts_with("https://");
        if !endpoint.starts_with("http://") && !https {
            return Err(format!(
                "endpoint {endpoint:?} must be an http:// URL (or https:// for --target http)"
            ));
        }
        let client = match (&a.client_certificate, &a.client_key) {
            (Some(c), Some(k)) => Some((c.clone(), k.clone())),
            (None, None) => None,
            _ => return Err("--client-certificate and --client-key go together".into()),
        };
        let tls = match (https, &a.certificate_authority) {
            (true, Some(ca)) => Some(TlsFiles {
                ca: ca.clone(),
                client,
            }),
            (true, None) => {
                return Err("an https:// --server needs --certificate-authority".into());
            }
            (false, None) if client.is_none() => None,
            (false, _) => {
                return Err(
                    "--certificate-authority and client certificates need an https:// --server"
                        .into(),
                );
            }
        };
        if a.concurrency == 0 || a.concurrency > MAX_CONCURRENCY {
            return Err(format!("--concurrency must be in 1..={MAX_CONCURRENCY}"));
        }
        let duration = a.duration.as_deref().map(parse_duration).transpose()?;
        if a.requests == Some(0) {
            return Err("--requests must be positive".into());
        }
        let stop = StopCondition {
            duration: match (duration, a.requests) {
                (None, None) => Some(Duration::from_secs(10)),
                (d, _) => d,
            },
            requests: a.requests,
        };
        let rate = a.rate.as_deref().map(parse_rate).transpose()?;
        if a.object_size > MAX_OBJECT_SIZE {
            return Err(format!("--object-size must be at most {MAX_OBJECT_SIZE}"));
        }
        if let Some(t) = &a.tenant {
            check_dns_label("tenant", t)?;
        }
        check_dns_label("namespace", &a.namespace)?;
        let grpc_tenant = a.tenant.clone().unwrap_or(a.grpc_default_tenant);
        if a.objects > MAX_OBJECTS {
            return Err(format!("--objects must be at most {MAX_OBJECTS}"));
        }
        if a.objects == 0 && mix.ops().any(Op::needs_working_set) {
            return Err("--objects must be positive for get/update/list".into());
        }
        let timeout = parse_duration(&a.timeout)?;
        if a.grpc_channels == 0 || a.grpc_channels > 1024 {
            return Err("--grpc-channels must be in 1..=1024".into());
        }
        Ok(Config {
            scenario,
            mix,
            target,
            endpoint,
            concurrency: a.concurrency,
            stop,
            rate,
            object_size: a.object_size,
            tenant: a.tenant,
            grpc_tenant,
            namespace: a.namespace,
            objects: a.objects,
            list_limit: a.list_limit,
            list_all_pages: a.list_all_pages,
            timeout,
            grpc_channels: a.grpc_channels,
            tls,
            token: a.token,
            json_out: a.json_out,
            html_out: a.html_out,
            setup: !a.no_setup,
            progress: !a.quiet,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(extra: &[&str]) -> Args {
        let mut v = vec!["crdplane-load"];
        v.extend_from_slice(extra);
        Args::try_parse_from(v).expect("args parse")
    }

    #[test]
    fn mix_parses_weights_in_op_order() {
        let m = parse_mix("update=1, get=8,create=1").unwrap();
        assert_eq!(
            m.entries(),
            &[(Op::Create, 1), (Op::Get, 8), (Op::Update, 1)]
        );
        assert_eq!(m.describe(), "create=1,get=8,update=1");
        // zero weights are dropped
        let m = parse_mix("create=0,list=3").unwrap();
        assert_eq!(m.entries(), &[(Op::List, 3)]);
    }

    #[test]
    fn mix_rejects_bad_input() {
        assert!(parse_mix("").is_err());
        assert!(parse_mix("create").unwrap_err().contains("op=weight"));
        assert!(
            parse_mix("delete=1")
                .unwrap_err()
                .contains("unknown operation")
        );
        assert!(parse_mix("get=-1").is_err());
        assert!(parse_mix("get=1.5").is_err());
        assert!(parse_mix("get=1,get=2").unwrap_err().contains("twice"));
        assert!(parse_mix("get=0").unwrap_err().contains("positive"));
        assert!(parse_mix("get=2000000").unwrap_err().contains("too large"));
    }

    #[test]
    fn mix_pick_follows_weights() {
        let m = parse_mix("create=1,get=8,update=1").unwrap();
        let mut counts = [0u32; 5];
        for r in 0..10_000u64 {
            counts[m.pick(r) as usize] += 1;
        }
        assert_eq!(counts, [1000, 8000, 1000, 0, 0]);
        assert_eq!(m.pick(0), Op::Create);
        assert_eq!(m.pick(1), Op::Get);
        assert_eq!(m.pick(8), Op::Get);
        assert_eq!(m.pick(9), Op::Update);
        assert_eq!(m.pick(u64::MAX), m.pick(u64::MAX % 10));
    }

    #[test]
    fn durations_parse() {
        assert_eq!(parse_duration("10s").unwrap(), Duration::from_secs(10));
        assert_eq!(parse_duration("10").unwrap(), Duration::from_secs(10));
        assert_eq!(parse_duration("500ms").unwrap(), Duration::from_millis(500));
        assert_eq!(parse_duration("1.5s").unwrap(), Duration::from_millis(1500));
        assert_eq!(parse_duration("2m").unwrap(), Duration::from_secs(120));
        assert_eq!(parse_duration("1h").unwrap(), Duration::from_secs(3600));
        assert!(parse_duration("0s").is_err());
        assert!(parse_duration("s").is_err());
        assert!(parse_duration("10d").unwrap_err().contains("unknown unit"));
        assert!(parse_duration("1.2.3s").is_err());
        assert!(parse_duration("25h").unwrap_err().contains("24h"));
        assert!(parse_duration("99999999999999999999h").is_err());
    }

    #[test]
    fn rates_parse() {
        assert_eq!(parse_rate("500").unwrap(), 500.0);
        assert_eq!(parse_rate("2.5k").unwrap(), 2500.0);
        assert_eq!(parse_rate("2000/s").unwrap(), 2000.0);
        assert!(parse_rate("0").is_err());
        assert!(parse_rate("-3").is_err());
        assert!(parse_rate("fast").is_err());
        assert!(parse_rate("NaN").is_err());
        assert!(parse_rate("1e12").is_err());
    }

    #[test]
    fn config_defaults() {
        let c = Config::from_args(args(&[])).unwrap();
        assert_eq!(c.scenario, "create");
        assert_eq!(c.mix, Mix::single(Op::Create));
        assert_eq!(c.target, TargetKind::Http);
        assert_eq!(c.endpoint, "http://127.0.0.1:6443");
        assert_eq!(c.concurrency, 64);
        assert_eq!(c.stop.duration, Some(Duration::from_secs(10)));
        assert_eq!(c.stop.requests, None);
        assert_eq!(c.objects, 1000);
        assert_eq!(c.rate, None);
        assert_eq!(c.grpc_tenant, "default");
        assert!(c.tenant.is_none());
    }

    #[test]
    fn config_full() {
        let c = Config::from_args(args(&[
            "mixed",
            "--mix",
            "get=3,list=1",
            "--target",
            "storage",
            "--grpc",
            "http://127.0.0.1:7001/",
            "--requests",
            "100",
            "--rate",
            "1k",
            "--tenant",
            "acme",
            "--object-size",
            "2048",
        ]))
        .unwrap();
        assert_eq!(c.mix.describe(), "get=3,list=1");
        assert_eq!(c.target, TargetKind::Storage);
        assert_eq!(c.endpoint, "http://127.0.0.1:7001");
        // --requests alone: no implicit duration
        assert_eq!(c.stop.duration, None);
        assert_eq!(c.stop.requests, Some(100));
        assert_eq!(c.rate, Some(1000.0));
        assert_eq!(c.grpc_tenant, "acme");
        assert_eq!(c.tenant.as_deref(), Some("acme"));
        assert_eq!(c.object_size, 2048);
    }

    #[test]
    fn config_rejects() {
        let e = |x: &[&str]| Config::from_args(args(x)).unwrap_err();
        assert!(e(&["delete"]).contains("unknown scenario"));
        assert!(
            e(&[
                "apply",
                "--target",
                "storage",
                "--grpc",
                "http://127.0.0.1:1"
            ])
            .contains("needs --target http")
        );
        assert!(e(&["--target", "storage"]).contains("--grpc"));
        assert!(
            e(&["get", "--target", "validation", "--grpc", "http://x:1"]).contains("only admits")
        );
        assert!(e(&["--concurrency", "0"]).contains("concurrency"));
        assert!(e(&["--requests", "0"]).contains("requests"));
        assert!(e(&["--tenant", "Acme"]).contains("DNS label"));
        assert!(e(&["--server", "https://x"]).contains("--certificate-authority"));
        assert!(
            e(&["--target", "storage", "--grpc", "https://x:1"]).contains("must be an http://")
        );
        assert!(e(&["--certificate-authority", "ca.crt"]).contains("https://"));
        assert!(
            e(&[
                "--server",
                "https://x",
                "--certificate-authority",
                "ca",
                "--client-key",
                "k"
            ])
            .contains("go together")
        );
        let c = Config::from_args(args(&[
            "--server",
            "https://127.0.0.1:6443",
            "--certificate-authority",
            "ca.crt",
            "--token",
            "t",
        ]))
        .unwrap();
        assert_eq!(
            (c.tls, c.token.as_deref()),
            (
                Some(TlsFiles {
                    ca: "ca.crt".into(),
                    client: None
                }),
                Some("t")
            )
        );
        assert!(e(&["--object-size", "99999999"]).contains("object-size"));
        assert!(e(&["get", "--objects", "0"]).contains("objects"));
    }
}
