//! The gateway's Prometheus metrics: kube-apiserver's request metrics under upstream's names
//! and labels (staging/src/k8s.io/apiserver/pkg/endpoints/metrics/metrics.go), the
//! per-tenant counts a multi-tenant operator needs, and their text exposition at
//! `GET /metrics` (served by the discovery module, authorized as upstream: non-resource URL
//! `get /metrics`, in the admin scope, since the numbers cover every tenant).
//!
//! Where it sits: the metrics layer of the edge (`filters/metrics.rs`) records every
//! request; the watch handler (the watch module) holds a [`WatchGuard`] for the life of each
//! watch and counts the events it writes.
//!
//! Label cardinality is bounded whatever clients send (tenants define their own resources;
//! anybody can send a path): the (group, version, resource) triples labelled are the first
//! [`MAX_RESOURCES`] seen, later ones are counted under `other`; tenants likewise (the
//! first `--metrics-max-tenants` that exist; unknown tenant names are never labels);
//! non-resource paths are labelled only when they are one the gateway serves. Verbs come
//! from a fixed set.
//!
//! Differences from upstream: a request is observed when its response head is ready, so a
//! WATCH's duration is the time to its first byte (upstream's covers the whole watch), and
//! `apiserver_current_inflight_requests` is the current count, not the maximum of the last
//! second.

use crate::request_info::RequestInfo;
use prometheus::{
    CounterVec, HistogramOpts, HistogramVec, IntCounter, IntCounterVec, IntGauge, IntGaugeVec,
    Opts, Registry,
};
use std::collections::HashSet;
use std::sync::RwLock;

/// Upstream's buckets of `apiserver_request_duration_seconds` (seconds).
pub const DURATION_BUCKETS: [f64; 23] = [
    0.005, 0.025, 0.05, 0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 1.25, 1.5, 2.0, 3.0, 4.0, 5.0, 6.0, 8.0,
    10.0, 15.0, 20.0, 30.0, 45.0, 60.0,
];

/// The most (group, version, resource) triples labelled; later ones count as `other`.
pub const MAX_RESOURCES: usize = 1000;

/// Default of `--metrics-max-tenants`.
pub const DEFAULT_MAX_TENANTS: usize = 1000;

/// The label value of everything past a bound.
pub const OTHER: &str = "other";

/// The non-resource paths labelled by their path (upstream puts the path in `subresource`);
/// any other non-resource path is `other`.
const PATHS: [&str; 16] = [
    "/",
    "/api",
    "/api/v1",
    "/apis",
    "/healthz",
    "/livez",
    "/readyz",
    "/version",
    "/metrics",
    "/openapi/v2",
    "/openapi/v3",
    "/healthz/ping",
    "/livez/ping",
    "/readyz/ping",
    "/.well-known/openid-configuration",
    "/openid/v1/jwks",
];

/// A bounded set of label values: the first `max` admitted are kept.
#[derive(Debug)]
pub struct LabelBudget {
    max: usize,
    seen: RwLock<HashSet<String>>,
}

impl LabelBudget {
    /// A budget of `max` values.
    pub fn new(max: usize) -> Self {
        Self {
            max,
            seen: RwLock::new(HashSet::new()),
        }
    }

    /// Whether `value` may be a label: already admitted, or admitted now within the bound.
    pub fn admit(&self, value: &str) -> bool {
        if self.seen.read().expect("label budget").contains(value) {
            return true;
        }
        let mut seen = self.seen.write().expect("label budget");
        if seen.contains(value) {
            return true;
        }
        if seen.len() >= self.max {
            return false;
        }
        seen.insert(value.to_owned());
        true
    }
}

/// The labels of one request, as upstream cleans them (`CleanVerb`, `CleanScope`,
/// `cleanDryRun`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestLabels {
    /// Upper-case verb: GET, LIST, WATCH, POST, PUT, PATCH, APPLY, DELETE,
    /// DELETECOLLECTION, or the HTTP method of a non-resource request.
    pub verb: &'static str,
    /// `All` for a dry run, else empty.
    pub dry_run: &'static str,
    /// API group.
    pub group: String,
    /// API version.
    pub version: String,
    /// Resource (empty for non-resource requests).
    pub resource: String,
    /// Subresource, or the path of a non-resource request.
    pub subresource: String,
    /// `resource`, `namespace`, `cluster`, or empty (non-resource).
    pub scope: &'static str,
}

/// The reported verb (upstream `CleanVerb`: upper case; a PATCH with the apply content type
/// is APPLY; `create` is reported as POST and `update` as PUT, the HTTP methods, as
/// upstream's instrumented routes name them).
pub fn verb_label(info: &RequestInfo, apply: bool) -> &'static str {
    if !info.is_resource_request {
        return match info.verb.as_str() {
            "get" => "GET",
            "head" => "HEAD",
            "post" => "POST",
            "put" => "PUT",
            "patch" => "PATCH",
            "delete" => "DELETE",
            "options" => "OPTIONS",
            _ => "OTHER",
        };
    }
    match info.verb.as_str() {
        "get" => "GET",
        "list" => "LIST",
        "watch" => "WATCH",
        "create" => "POST",
        "update" => "PUT",
        "patch" if apply => "APPLY",
        "patch" => "PATCH",
        "delete" => "DELETE",
        "deletecollection" => "DELETECOLLECTION",
        _ => "OTHER",
    }
}

/// The scope label (upstream `CleanScope`).
pub fn scope_label(info: &RequestInfo) -> &'static str {
    if !info.name.is_empty() || info.verb == "create" {
        "resource"
    } else if !info.namespace.is_empty() {
        "namespace"
    } else if info.is_resource_request {
        "cluster"
    } else {
        ""
    }
}

/// Whether the verb is a mutation (upstream's `readOnly` / `mutating` request kinds).
pub fn mutating(info: &RequestInfo) -> bool {
    !matches!(
        info.verb.as_str(),
        "get" | "list" | "watch" | "head" | "options"
    )
}

/// The gateway's metrics (see the module docs).
pub struct ApiMetrics {
    registry: Registry,
    requests: IntCounterVec,
    durations: HistogramVec,
    inflight_read: IntGauge,
    inflight_write: IntGauge,
    longrunning: IntGaugeVec,
    watchers: IntGaugeVec,
    watch_events: IntCounterVec,
    tenant_requests: IntCounterVec,
    tenant_seconds: CounterVec,
    resources: LabelBudget,
    tenants: LabelBudget,
    on: Enabled,
    /// Resolved children by what a request's labels are made of ([`SeriesKey`]); bounded
    /// as the labels are. hashbrown's map with its default hasher (foldhash): the lookup
    /// hashes a borrowed key, allocates nothing, and costs a fraction of std's SipHash
    /// (measured with callgrind on the GET path: formatting a string key and SipHashing it
    /// were a quarter of what metrics and traces added per request).
    series: RwLock<hashbrown::HashMap<SeriesKey, std::sync::Arc<Series>>>,
    /// Resolved per-tenant children by tenant label (at most `--metrics-max-tenants` + 1).
    tenant_series: RwLock<hashbrown::HashMap<String, std::sync::Arc<TenantSeries>>>,
}

/// What the labels of a request are computed from ([`ApiMetrics::labels`]): the key of the
/// series cache. [`SeriesKeyRef`] is the same borrowed from a request, for lookups.
#[derive(Debug, PartialEq, Eq)]
struct SeriesKey {
    verb: &'static str,
    dry_run: bool,
    resource_request: bool,
    group: String,
    version: String,
    resource: String,
    /// The subresource of a resource request, else the path.
    sub: String,
    scope: &'static str,
}

/// A [`SeriesKey`] borrowed from a request.
#[derive(Debug, Clone, Copy)]
struct SeriesKeyRef<'a> {
    verb: &'static str,
    dry_run: bool,
    resource_request: bool,
    group: &'a str,
    version: &'a str,
    resource: &'a str,
    sub: &'a str,
    scope: &'static str,
}

impl<'a> SeriesKeyRef<'a> {
    fn of(info: &'a RequestInfo, apply: bool, dry_run: bool) -> Self {
        Self {
            verb: verb_label(info, apply),
            dry_run,
            resource_request: info.is_resource_request,
            group: &info.api_group,
            version: &info.api_version,
            resource: &info.resource,
            sub: if info.is_resource_request {
                &info.subresource
            } else {
                &info.path
            },
            scope: scope_label(info),
        }
    }

    fn to_owned_key(self) -> SeriesKey {
        SeriesKey {
            verb: self.verb,
            dry_run: self.dry_run,
            resource_request: self.resource_request,
            group: self.group.to_owned(),
            version: self.version.to_owned(),
            resource: self.resource.to_owned(),
            sub: self.sub.to_owned(),
            scope: self.scope,
        }
    }
}

impl SeriesKey {
    fn borrowed(&self) -> SeriesKeyRef<'_> {
        SeriesKeyRef {
            verb: self.verb,
            dry_run: self.dry_run,
            resource_request: self.resource_request,
            group: &self.group,
            version: &self.version,
            resource: &self.resource,
            sub: &self.sub,
            scope: self.scope,
        }
    }
}

// One hash for both forms: the borrowed form's fields in order.
impl std::hash::Hash for SeriesKeyRef<'_> {
    fn hash<H: std::hash::Hasher>(&self, h: &mut H) {
        self.verb.hash(h);
        self.dry_run.hash(h);
        self.resource_request.hash(h);
        self.group.hash(h);
        self.version.hash(h);
        self.resource.hash(h);
        self.sub.hash(h);
        self.scope.hash(h);
    }
}

impl std::hash::Hash for SeriesKey {
    fn hash<H: std::hash::Hasher>(&self, h: &mut H) {
        self.borrowed().hash(h);
    }
}

impl hashbrown::Equivalent<SeriesKey> for SeriesKeyRef<'_> {
    fn equivalent(&self, key: &SeriesKey) -> bool {
        let k = key.borrowed();
        self.verb == k.verb
            && self.dry_run == k.dry_run
            && self.resource_request == k.resource_request
            && self.group == k.group
            && self.version == k.version
            && self.resource == k.resource
            && self.sub == k.sub
            && self.scope == k.scope
    }
}

/// Which per-request metrics are recorded (`--disabled-metrics` turns them off one by one).
#[derive(Debug, Clone, Copy)]
struct Enabled {
    requests: bool,
    durations: bool,
    inflight: bool,
    tenant_requests: bool,
    tenant_seconds: bool,
}

impl Enabled {
    /// Whether the metrics layer has anything to record when a request ends.
    fn any_at_end(&self) -> bool {
        self.requests || self.durations || self.tenant_requests || self.tenant_seconds
    }
}

impl std::fmt::Debug for ApiMetrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApiMetrics").finish_non_exhaustive()
    }
}

impl Default for ApiMetrics {
    fn default() -> Self {
        Self::new(DEFAULT_MAX_TENANTS)
    }
}

const REQUEST_LABELS: [&str; 8] = [
    "verb",
    "dry_run",
    "group",
    "version",
    "resource",
    "subresource",
    "scope",
    "component",
];

impl ApiMetrics {
    /// A registry of its own with every metric, labelling at most `max_tenants` tenants.
    pub fn new(max_tenants: usize) -> Self {
        Self::with_disabled(max_tenants, &[])
    }

    /// As [`ApiMetrics::new`], without the metrics `disabled` names (kube-apiserver's
    /// `--disabled-metrics`): they are neither recorded nor exposed. Names of no metric here
    /// are ignored.
    pub fn with_disabled(max_tenants: usize, disabled: &[String]) -> Self {
        let off = |name: &str| disabled.iter().any(|d| d == name);
        let registry = Registry::new();
        let mut with_code = REQUEST_LABELS.to_vec();
        with_code.push("code");
        let requests = IntCounterVec::new(
            Opts::new(
                "apiserver_request_total",
                "Counter of apiserver requests broken out for each verb, dry run value, group, version, resource, scope, component, and HTTP response code.",
            ),
            &with_code,
        )
        .expect("metric");
        let durations = HistogramVec::new(
            HistogramOpts::new(
                "apiserver_request_duration_seconds",
                "Response latency distribution in seconds for each verb, dry run value, group, version, resource, subresource, scope and component.",
            )
            .buckets(DURATION_BUCKETS.to_vec()),
            &REQUEST_LABELS,
        )
        .expect("metric");
        let gauges = |name: &str, help: &str, labels: &[&str]| {
            IntGaugeVec::new(Opts::new(name, help), labels).expect("metric")
        };
        let counters = |name: &str, help: &str, labels: &[&str]| {
            IntCounterVec::new(Opts::new(name, help), labels).expect("metric")
        };
        let inflight = gauges(
            "apiserver_current_inflight_requests",
            "Number of requests being served, per request kind (readOnly, mutating); long-running requests are not counted.",
            &["request_kind"],
        );
        let longrunning = gauges(
            "apiserver_longrunning_requests",
            "Gauge of all active long-running apiserver requests broken out by verb, group, version, resource, scope and component.",
            // The request labels but dry_run, as upstream's.
            &REQUEST_LABELS
                .iter()
                .copied()
                .filter(|l| *l != "dry_run")
                .collect::<Vec<_>>(),
        );
        let watchers = gauges(
            "apiserver_registered_watchers",
            "Number of currently registered watchers for a given resources",
            &["group", "version", "kind"],
        );
        let watch_events = counters(
            "apiserver_watch_events_total",
            "Number of events sent in watch clients",
            &["group", "version", "kind"],
        );
        let tenant_requests = counters(
            "crdplane_tenant_requests_total",
            "Requests per tenant and HTTP response code (tenants past --metrics-max-tenants count as \"other\").",
            &["tenant", "code"],
        );
        let tenant_seconds = CounterVec::new(
            Opts::new(
                "crdplane_tenant_request_duration_seconds_total",
                "Seconds spent answering each tenant's requests (to the response head); divided by crdplane_tenant_requests_total, the mean latency.",
            ),
            &["tenant"],
        )
        .expect("metric");
        for m in [
            Box::new(requests.clone()) as Box<dyn prometheus::core::Collector>,
            Box::new(durations.clone()),
            Box::new(inflight.clone()),
            Box::new(longrunning.clone()),
            Box::new(watchers.clone()),
            Box::new(watch_events.clone()),
            Box::new(tenant_requests.clone()),
            Box::new(tenant_seconds.clone()),
        ] {
            let name = m.desc()[0].fq_name.clone();
            if !off(&name) {
                registry.register(m).expect("metric registered once");
            }
        }
        Self {
            on: Enabled {
                requests: !off("apiserver_request_total"),
                durations: !off("apiserver_request_duration_seconds"),
                inflight: !off("apiserver_current_inflight_requests"),
                tenant_requests: !off("crdplane_tenant_requests_total"),
                tenant_seconds: !off("crdplane_tenant_request_duration_seconds_total"),
            },
            inflight_read: inflight.with_label_values(&["readOnly"]),
            inflight_write: inflight.with_label_values(&["mutating"]),
            registry,
            requests,
            durations,
            longrunning,
            watchers,
            watch_events,
            tenant_requests,
            tenant_seconds,
            resources: LabelBudget::new(MAX_RESOURCES),
            tenants: LabelBudget::new(max_tenants),
            series: RwLock::default(),
            tenant_series: RwLock::default(),
        }
    }

    /// The resolved children of the labels of a request with `info` (see [`Series`]).
    pub fn series(&self, info: &RequestInfo, apply: bool, dry_run: bool) -> std::sync::Arc<Series> {
        let key = SeriesKeyRef::of(info, apply, dry_run);
        if let Some(s) = self.series.read().expect("series").get(&key) {
            return s.clone();
        }
        let labels = self.labels(info, apply, dry_run);
        let series = std::sync::Arc::new(Series {
            duration: self.on.durations.then(|| {
                self.durations.with_label_values(&[
                    labels.verb,
                    labels.dry_run,
                    &labels.group,
                    &labels.version,
                    &labels.resource,
                    &labels.subresource,
                    labels.scope,
                    "apiserver",
                ])
            }),
            codes: Default::default(),
            requests: self.on.requests.then(|| self.requests.clone()),
            labels,
        });
        // Keys of label sets past the budgets all resolve to the `other` children; the map
        // holds at most one entry per key ever seen, and keys are bounded as labels are
        // only while the budget admits them, so past it the series is not kept.
        let bounded = series.labels.resource != OTHER && series.labels.subresource != OTHER;
        if bounded {
            self.series
                .write()
                .expect("series")
                .entry(key.to_owned_key())
                .or_insert(series)
                .clone()
        } else {
            series
        }
    }

    /// Records one answered request of `series`.
    pub fn observe_series(&self, series: &Series, code: u16, seconds: f64, tenant: Option<&str>) {
        if let Some(h) = &series.duration {
            h.observe(seconds);
        }
        series.count(code);
        if let Some(t) = tenant
            && (self.on.tenant_requests || self.on.tenant_seconds)
        {
            let ts = self.tenant(t);
            if let Some(c) = &ts.seconds {
                c.inc_by(seconds);
            }
            if let Some(vec) = &ts.requests {
                let i = code_index(code);
                ts.codes[i]
                    .get_or_init(|| vec.with_label_values(&[&ts.tenant, CODE_LABELS[i]]))
                    .inc();
            }
        }
    }

    /// The resolved per-tenant children of tenant `t` (`other` past the budget).
    fn tenant(&self, t: &str) -> std::sync::Arc<TenantSeries> {
        if let Some(s) = self.tenant_series.read().expect("tenants").get(t) {
            return s.clone();
        }
        let label = if self.tenants.admit(t) { t } else { OTHER };
        let mut map = self.tenant_series.write().expect("tenants");
        if let Some(s) = map.get(label) {
            return s.clone();
        }
        let ts = std::sync::Arc::new(TenantSeries {
            seconds: self
                .on
                .tenant_seconds
                .then(|| self.tenant_seconds.with_label_values(&[label])),
            codes: Default::default(),
            requests: self
                .on
                .tenant_requests
                .then(|| self.tenant_requests.clone()),
            tenant: label.to_string(),
        });
        map.insert(label.to_string(), ts.clone());
        ts
    }

    /// The labels of a request with `info`, bounded as the module docs say.
    pub fn labels(&self, info: &RequestInfo, apply: bool, dry_run: bool) -> RequestLabels {
        let verb = verb_label(info, apply);
        let scope = scope_label(info);
        let dry_run = if dry_run { "All" } else { "" };
        if !info.is_resource_request {
            let path = info.path.as_str();
            let path = if PATHS.contains(&path) { path } else { OTHER };
            return RequestLabels {
                verb,
                dry_run,
                group: String::new(),
                version: String::new(),
                resource: String::new(),
                subresource: path.to_owned(),
                scope,
            };
        }
        let key = format!(
            "{}/{}/{}/{}",
            info.api_group, info.api_version, info.resource, info.subresource
        );
        if self.resources.admit(&key) {
            RequestLabels {
                verb,
                dry_run,
                group: info.api_group.clone(),
                version: info.api_version.clone(),
                resource: info.resource.clone(),
                subresource: info.subresource.clone(),
                scope,
            }
        } else {
            RequestLabels {
                verb,
                dry_run,
                group: OTHER.into(),
                version: OTHER.into(),
                resource: OTHER.into(),
                subresource: String::new(),
                scope,
            }
        }
    }

    /// Counts one request in flight of the kind of `info` until the guard is dropped (None
    /// when `apiserver_current_inflight_requests` is disabled).
    pub fn in_flight(&self, info: &RequestInfo) -> Option<InFlight> {
        if !self.on.inflight {
            return None;
        }
        let g = if mutating(info) {
            self.inflight_write.clone()
        } else {
            self.inflight_read.clone()
        };
        g.inc();
        Some(InFlight(g))
    }

    /// Whether an answered request is recorded at all (false when every per-request metric
    /// is disabled: the metrics layer then does nothing but the in-flight count).
    pub fn records_requests(&self) -> bool {
        self.on.any_at_end()
    }

    /// Registers one watch of `info` serving `kind` until the guard is dropped
    /// (`apiserver_longrunning_requests`, `apiserver_registered_watchers`), with the counter
    /// of the events it sends.
    pub fn watch(&self, info: &RequestInfo, kind: &str) -> WatchGuard {
        let l = self.labels(info, false, false);
        let kind = if l.resource == OTHER { OTHER } else { kind };
        let longrunning = self.longrunning.with_label_values(&[
            "WATCH",
            &l.group,
            &l.version,
            &l.resource,
            &l.subresource,
            l.scope,
            "apiserver",
        ]);
        let watchers = self
            .watchers
            .with_label_values(&[&l.group, &l.version, kind]);
        longrunning.inc();
        watchers.inc();
        WatchGuard {
            events: self
                .watch_events
                .with_label_values(&[&l.group, &l.version, kind]),
            gauges: [longrunning, watchers],
        }
    }

    /// Requests with `verb` answered with `code` so far (any other label).
    pub fn count(&self, verb: &str, code: u16) -> u64 {
        self.sum(
            "apiserver_request_total",
            &[("verb", verb), ("code", &code.to_string())],
        )
    }

    /// Requests answered so far.
    pub fn total(&self) -> u64 {
        self.sum("apiserver_request_total", &[])
    }

    /// The sum of the samples of counter or gauge `name` whose labels include `labels`.
    pub fn sum(&self, name: &str, labels: &[(&str, &str)]) -> u64 {
        self.registry
            .gather()
            .iter()
            .filter(|f| f.name() == name)
            .flat_map(|f| {
                let counter = f.get_field_type() == prometheus::proto::MetricType::COUNTER;
                f.get_metric().iter().map(move |m| (counter, m))
            })
            .filter(|(_, m)| {
                labels.iter().all(|(k, v)| {
                    m.get_label()
                        .iter()
                        .any(|p| p.name() == *k && p.value() == *v)
                })
            })
            .map(|(counter, m)| {
                if counter {
                    m.get_counter().get_value() as u64
                } else {
                    m.get_gauge().get_value() as u64
                }
            })
            .sum()
    }

    /// The text exposition of these metrics and the process's default registry (the
    /// backend clients' metrics, if any).
    pub fn encode(&self) -> Vec<u8> {
        let mut out = crdplane_transport::metrics::encode_registry(&self.registry);
        out.extend(crdplane_transport::metrics::encode());
        out
    }
}

/// The codes the gateway answers with, then the classes of any other code.
const CODE_VALUES: [u16; 22] = [
    200, 201, 202, 204, 206, 304, 400, 401, 403, 404, 405, 406, 409, 410, 413, 415, 422, 429, 500,
    501, 503, 504,
];
const CODE_LABELS: [&str; 27] = [
    "200", "201", "202", "204", "206", "304", "400", "401", "403", "404", "405", "406", "409",
    "410", "413", "415", "422", "429", "500", "501", "503", "504", "1xx", "2xx", "3xx", "4xx",
    "5xx",
];

/// The position of `code`'s label in [`CODE_LABELS`].
fn code_index(code: u16) -> usize {
    match CODE_VALUES.iter().position(|c| *c == code) {
        Some(i) => i,
        None => match code / 100 {
            1 => 22,
            2 => 23,
            3 => 24,
            4 => 25,
            _ => 26,
        },
    }
}

/// The metric children of one label set (see [`ApiMetrics::series`]), resolved once: a
/// request then costs one map lookup instead of hashing its labels into every metric vector.
/// Hand-written over the `prometheus` vectors because the GET path measured the per-request
/// label hashing (two vectors of 8–9 labels, the label budget, the tenant's two vectors) at
/// several percent of the gateway's CPU per request.
pub struct Series {
    duration: Option<prometheus::Histogram>,
    /// `apiserver_request_total` by code ([`CODE_LABELS`] positions), made on first use.
    codes: [std::sync::OnceLock<IntCounter>; CODE_LABELS.len()],
    requests: Option<IntCounterVec>,
    labels: RequestLabels,
}

impl Series {
    fn count(&self, code: u16) {
        if let Some(vec) = &self.requests {
            let i = code_index(code);
            self.codes[i]
                .get_or_init(|| {
                    let l = &self.labels;
                    vec.with_label_values(&[
                        l.verb,
                        l.dry_run,
                        &l.group,
                        &l.version,
                        &l.resource,
                        &l.subresource,
                        l.scope,
                        "apiserver",
                        CODE_LABELS[i],
                    ])
                })
                .inc();
        }
    }
}

/// The per-tenant children of one tenant label, resolved once (see [`Series`]).
struct TenantSeries {
    seconds: Option<prometheus::Counter>,
    codes: [std::sync::OnceLock<IntCounter>; CODE_LABELS.len()],
    requests: Option<IntCounterVec>,
    tenant: String,
}

/// A request in flight (see [`ApiMetrics::in_flight`]).
pub struct InFlight(IntGauge);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.dec();
    }
}

/// A watch being served (see [`ApiMetrics::watch`]).
pub struct WatchGuard {
    events: IntCounter,
    gauges: [IntGauge; 2],
}

impl WatchGuard {
    /// Counts `n` events sent.
    pub fn sent(&self, n: u64) {
        self.events.inc_by(n);
    }
}

impl Drop for WatchGuard {
    fn drop(&mut self) {
        for g in &self.gauges {
            g.dec();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(method: &str, path: &str, watch: bool) -> RequestInfo {
        crate::request_info::parse(method, path, watch, "default").unwrap()
    }

    #[test]
    fn resolved_series_count_as_the_label_vectors_do() {
        let m = ApiMetrics::new(2);
        let with_tenant = |path: &str, code: u16, tenant: &str| {
            let i = crate::request_info::parse("GET", path, false, tenant).unwrap();
            let s = m.series(&i, false, false);
            m.observe_series(&s, code, 0.001, Some(tenant));
        };
        // More resources than the budget: the late ones count as `other`.
        for r in 0..MAX_RESOURCES + 5 {
            with_tenant(&format!("/apis/g/v1/r{r}"), 200, "t1");
        }
        with_tenant("/apis/g/v1/r0", 404, "t2");
        with_tenant("/apis/g/v1/r0", 999, "t3");
        assert_eq!(
            m.sum("apiserver_request_total", &[]),
            MAX_RESOURCES as u64 + 7
        );
        assert_eq!(m.sum("apiserver_request_total", &[("resource", OTHER)]), 5);
        assert_eq!(
            m.sum(
                "apiserver_request_total",
                &[("resource", "r0"), ("code", "200")]
            ),
            1
        );
        assert_eq!(
            m.sum(
                "apiserver_request_total",
                &[("resource", "r0"), ("code", "404")]
            ),
            1
        );
        assert_eq!(
            m.sum(
                "apiserver_request_total",
                &[("resource", "r0"), ("code", "5xx")]
            ),
            1
        );
        // One duration series per label set, whatever the code: r0's holds its 3 requests.
        let text = String::from_utf8(m.encode()).unwrap();
        let r0 = text
            .lines()
            .find(|l| {
                l.starts_with("apiserver_request_duration_seconds_count")
                    && l.contains("resource=\"r0\"")
            })
            .unwrap();
        assert!(r0.ends_with(" 3"), "{r0}");
        // Two tenants are labels; the third counts as `other`.
        assert_eq!(
            m.sum("crdplane_tenant_requests_total", &[("tenant", "t1")]),
            MAX_RESOURCES as u64 + 5
        );
        assert_eq!(
            m.sum(
                "crdplane_tenant_requests_total",
                &[("tenant", "t2"), ("code", "404")]
            ),
            1
        );
        assert_eq!(
            m.sum("crdplane_tenant_requests_total", &[("tenant", OTHER)]),
            1
        );
        // The series map holds no more than the label sets the budget admitted.
        assert_eq!(m.series.read().unwrap().len(), MAX_RESOURCES);
    }

    #[test]
    fn verbs_and_scopes_are_upstreams() {
        // (method, path, watch, apply) → (verb, scope)
        let cases = [
            (
                "GET",
                "/apis/g/v1/namespaces/a/xs/n",
                false,
                false,
                "GET",
                "resource",
            ),
            (
                "GET",
                "/apis/g/v1/namespaces/a/xs",
                false,
                false,
                "LIST",
                "namespace",
            ),
            ("GET", "/apis/g/v1/xs", false, false, "LIST", "cluster"),
            ("GET", "/apis/g/v1/xs", true, false, "WATCH", "cluster"),
            (
                "POST",
                "/apis/g/v1/namespaces/a/xs",
                false,
                false,
                "POST",
                "resource",
            ),
            (
                "PUT",
                "/apis/g/v1/namespaces/a/xs/n",
                false,
                false,
                "PUT",
                "resource",
            ),
            (
                "PATCH",
                "/apis/g/v1/namespaces/a/xs/n",
                false,
                false,
                "PATCH",
                "resource",
            ),
            (
                "PATCH",
                "/apis/g/v1/namespaces/a/xs/n",
                false,
                true,
                "APPLY",
                "resource",
            ),
            (
                "DELETE",
                "/apis/g/v1/namespaces/a/xs",
                false,
                false,
                "DELETECOLLECTION",
                "namespace",
            ),
            ("GET", "/healthz", false, false, "GET", ""),
        ];
        for (method, path, watch, apply, verb, scope) in cases {
            let i = info(method, path, watch);
            assert_eq!(
                (verb_label(&i, apply), scope_label(&i)),
                (verb, scope),
                "{method} {path}"
            );
        }
    }

    #[test]
    fn labels_stay_bounded() {
        let m = ApiMetrics::new(2);
        // Resources past the bound are `other`.
        for n in 0..MAX_RESOURCES {
            let l = m.labels(
                &info("GET", &format!("/apis/g{n}/v1/xs"), false),
                false,
                false,
            );
            assert_eq!(l.group, format!("g{n}"));
        }
        let l = m.labels(&info("GET", "/apis/late/v1/xs", false), false, false);
        assert_eq!((l.group.as_str(), l.resource.as_str()), (OTHER, OTHER));
        // A resource already seen keeps its labels.
        let l = m.labels(&info("GET", "/apis/g7/v1/xs", false), false, false);
        assert_eq!(l.group, "g7");
        // Non-resource paths: only the ones the gateway serves.
        let l = m.labels(&info("GET", "/no/such/path", false), false, false);
        assert_eq!(l.subresource, OTHER);
        let l = m.labels(&info("GET", "/readyz", false), false, false);
        assert_eq!(l.subresource, "/readyz");
        // Tenants past the bound are `other`.
        let readyz = m.series(&info("GET", "/readyz", false), false, false);
        for t in ["a", "b", "c", "a"] {
            m.observe_series(&readyz, 200, 0.01, Some(t));
        }
        assert_eq!(
            m.sum("crdplane_tenant_requests_total", &[("tenant", "a")]),
            2
        );
        assert_eq!(
            m.sum("crdplane_tenant_requests_total", &[("tenant", OTHER)]),
            1
        );
        assert_eq!(m.count("GET", 200), 4);
    }

    #[test]
    fn codes_are_bounded_too() {
        assert_eq!(CODE_LABELS[code_index(404)], "404");
        assert_eq!(CODE_LABELS[code_index(418)], "4xx");
        assert_eq!(CODE_LABELS[code_index(599)], "5xx");
    }

    #[test]
    fn guards_count_while_alive() {
        let m = ApiMetrics::default();
        let i = info("GET", "/apis/g/v1/xs", true);
        let w = m.watch(&i, "X");
        w.sent(3);
        let f = m.in_flight(&info("POST", "/apis/g/v1/namespaces/a/xs", false));
        assert_eq!(m.sum("apiserver_registered_watchers", &[("kind", "X")]), 1);
        assert_eq!(
            m.sum("apiserver_longrunning_requests", &[("verb", "WATCH")]),
            1
        );
        assert_eq!(
            m.sum(
                "apiserver_current_inflight_requests",
                &[("request_kind", "mutating")]
            ),
            1
        );
        drop((w, f));
        assert_eq!(m.sum("apiserver_registered_watchers", &[]), 0);
        assert_eq!(m.sum("apiserver_current_inflight_requests", &[]), 0);
        assert_eq!(m.sum("apiserver_watch_events_total", &[("kind", "X")]), 3);
        let text = String::from_utf8(m.encode()).unwrap();
        assert!(
            text.contains("apiserver_watch_events_total{group=\"g\",kind=\"X\",version=\"v1\"} 3"),
            "{text}"
        );
    }
}
