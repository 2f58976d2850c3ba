//! The Kubernetes manifests of `deploy/` as an operator uses them: `crdplane pki` makes the
//! files, `deploy/kubernetes/secrets.sh` turns them into Secrets (kubectl, `--dry-run=client`),
//! and `kubectl kustomize deploy/` renders the rest. Checked: every rendered object against
//! the Kubernetes API schemas (`kubernetes-validate --strict`, installed by
//! `scripts/deps.sh --test`); every crdplane container's flags accepted by the real binary;
//! every file a flag (or the Envoy configuration) names mounted from a key the Secrets or the
//! generated ConfigMap hold; every service endpoint a flag names served by a Service of the
//! render on that port.
//!
//! And the monitoring assets of `deploy/monitoring/`, with Debian's promtool (extracted into
//! `.tools/prometheus/` by `scripts/deps.sh --test`): the rules pass `promtool check rules`
//! and their unit tests `promtool test rules`, the scrape configuration `promtool check
//! config`; the Grafana dashboard's queries parse; and every metric name the rules and the
//! dashboard use is one the stack exports, so a renamed metric fails here.

use crdplane_tests::{bin, kubectls};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

const ROOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/..");
/// The Kubernetes version the render is validated against.
const KUBERNETES: &str = "1.33.0";

fn run(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{cmd:?}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// The YAML documents of a stream, as JSON.
fn documents(yaml: &str) -> Vec<Value> {
    let mut docs = Vec::new();
    let mut cur = String::new();
    for line in yaml.lines().chain(std::iter::once("---")) {
        if line == "---" {
            if !cur.trim().is_empty() {
                docs.push(serde_saphyr::from_str(&cur).unwrap());
            }
            cur.clear();
        } else {
            cur.push_str(line);
            cur.push('\n');
        }
    }
    docs
}

fn name(o: &Value) -> &str {
    o["metadata"]["name"].as_str().unwrap()
}

#[test]
fn the_manifests_render_validate_and_fit_the_binaries() {
    let dir = tempfile::tempdir().unwrap();
    let kubectl = kubectls().pop().expect("a kubectl");
    let pki = dir.path().join("pki");
    run(Command::new(bin("crdplane")).arg("pki").arg("--dir").arg(&pki).args([
        "--host",
        "crdplane-gateway,crdplane-storage,crdplane-validation,crdplane-registry,api.example.com",
    ]));

    // The Secrets, as secrets.sh makes them (offline: client-side dry run).
    let secrets_json = run(Command::new(format!("{ROOT}/deploy/kubernetes/secrets.sh"))
        .arg(&pki)
        .args(["crdplane", "--dry-run=client", "-o", "json"])
        .env("KUBECTL", &kubectl)
        .env("KUBECONFIG", "/dev/null"));
    let mut secrets: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for s in serde_json::Deserializer::from_str(&secrets_json).into_iter::<Value>() {
        let s = s.unwrap();
        let keys = s["data"].as_object().unwrap().keys().cloned().collect();
        secrets.insert(name(&s).to_string(), keys);
    }
    assert_eq!(
        secrets.keys().collect::<Vec<_>>(),
        [
            "crdplane-envoy",
            "crdplane-gateway",
            "crdplane-services-tls"
        ]
    );

    // The render, against the API schemas.
    let rendered = run(Command::new(&kubectl).args(["kustomize", &format!("{ROOT}/deploy")]));
    let file = dir.path().join("rendered.yaml");
    std::fs::write(&file, &rendered).unwrap();
    let out = Command::new("kubernetes-validate")
        .args(["--strict", "--quiet", "-k", KUBERNETES])
        .arg(&file)
        .output()
        .expect("kubernetes-validate (scripts/deps.sh --test installs it)");
    assert!(
        out.status.success(),
        "kubernetes-validate: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let docs = documents(&rendered);
    let kinds: Vec<String> = docs
        .iter()
        .map(|d| format!("{}/{}", d["kind"].as_str().unwrap(), name(d)))
        .collect();
    for want in [
        "Deployment/crdplane-gateway",
        "Deployment/crdplane-storage",
        "Deployment/crdplane-validation",
        "Deployment/crdplane-registry",
        "Deployment/crdplane-envoy",
        "StatefulSet/crdplane-redis",
        "HorizontalPodAutoscaler/crdplane-gateway",
        "PodDisruptionBudget/crdplane-gateway",
        "Service/crdplane-api",
    ] {
        assert!(kinds.iter().any(|k| k == want), "{want} missing: {kinds:?}");
    }
    let mut config_maps: BTreeMap<String, Value> = BTreeMap::new();
    let mut service_ports: BTreeMap<String, Vec<u64>> = BTreeMap::new();
    // Headless Services: name -> the pods' app name they resolve to.
    let mut headless: BTreeMap<String, String> = BTreeMap::new();
    // App name -> the container ports of its pods.
    let mut pod_ports: BTreeMap<String, Vec<u64>> = BTreeMap::new();
    for d in &docs {
        match d["kind"].as_str().unwrap() {
            "ConfigMap" => {
                config_maps.insert(name(d).to_string(), d["data"].clone());
            }
            "Service" => {
                let ports = d["spec"]["ports"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|p| p["port"].as_u64().unwrap())
                    .collect();
                service_ports.insert(name(d).to_string(), ports);
                if d["spec"]["clusterIP"] == "None" {
                    let app = &d["spec"]["selector"]["app.kubernetes.io/name"];
                    headless.insert(name(d).to_string(), app.as_str().unwrap().to_string());
                }
            }
            "Deployment" | "StatefulSet" => {
                let t = &d["spec"]["template"];
                let app = t["metadata"]["labels"]["app.kubernetes.io/name"]
                    .as_str()
                    .unwrap()
                    .to_string();
                for c in t["spec"]["containers"].as_array().unwrap() {
                    for p in c["ports"].as_array().into_iter().flatten() {
                        let port = p["containerPort"].as_u64().unwrap();
                        pod_ports.entry(app.clone()).or_default().push(port);
                    }
                }
            }
            _ => {}
        }
    }

    let mut checked = 0;
    let mut resolved = 0;
    for d in docs
        .iter()
        .filter(|d| matches!(d["kind"].as_str(), Some("Deployment" | "StatefulSet")))
    {
        let pod = &d["spec"]["template"]["spec"];
        // Mount path -> the keys the volume holds there.
        let volumes: BTreeMap<&str, Vec<String>> = pod["volumes"]
            .as_array()
            .map(|v| v.iter().collect::<Vec<_>>())
            .unwrap_or_default()
            .into_iter()
            .map(|v| {
                let keys: Vec<String> = if let Some(s) = v.get("secret") {
                    let secret = s["secretName"].as_str().unwrap();
                    let held = secrets
                        .get(secret)
                        .unwrap_or_else(|| panic!("{}: no Secret {secret}", name(d)));
                    match s["items"].as_array() {
                        Some(items) => items
                            .iter()
                            .map(|i| {
                                let key = i["key"].as_str().unwrap();
                                assert!(held.iter().any(|k| k == key), "{secret} lacks {key}");
                                i["path"].as_str().unwrap().to_string()
                            })
                            .collect(),
                        None => held.clone(),
                    }
                } else if let Some(c) = v.get("configMap") {
                    let cm = c["name"].as_str().unwrap();
                    let data = config_maps
                        .get(cm)
                        .unwrap_or_else(|| panic!("{}: no ConfigMap {cm}", name(d)));
                    data.as_object().unwrap().keys().cloned().collect()
                } else {
                    Vec::new()
                };
                (v["name"].as_str().unwrap(), keys)
            })
            .collect();
        for c in pod["containers"].as_array().unwrap() {
            let mounts: Vec<(String, &Vec<String>)> = c["volumeMounts"]
                .as_array()
                .map(|m| m.iter().collect::<Vec<_>>())
                .unwrap_or_default()
                .into_iter()
                .filter_map(|m| {
                    let keys = volumes.get(m["name"].as_str().unwrap())?;
                    Some((m["mountPath"].as_str().unwrap().to_string(), keys))
                })
                .collect();
            let mounted = |path: &str| {
                mounts.iter().any(|(dir, keys)| {
                    path.strip_prefix(dir.as_str())
                        .and_then(|r| r.strip_prefix('/'))
                        .is_some_and(|file| keys.iter().any(|k| k == file))
                })
            };
            let args: Vec<&str> = c["args"]
                .as_array()
                .map(|a| a.iter().map(|v| v.as_str().unwrap()).collect())
                .unwrap_or_default();
            for a in &args {
                if a.starts_with("/etc/") {
                    assert!(mounted(a), "{}: {a} is not mounted", name(d));
                }
                // Service endpoints (`https://<service>:<port>`; the issuer URL has no port).
                if let Some((host, port)) =
                    a.strip_prefix("https://").and_then(|r| r.split_once(':'))
                {
                    let ports = service_ports
                        .get(host)
                        .unwrap_or_else(|| panic!("{}: no Service {host}", name(d)));
                    assert!(ports.contains(&port.parse().unwrap()), "{a}");
                }
                // Resolved endpoints (`dns:///<service>:<port>`): the name must list the
                // pods (a headless Service), which listen on that port themselves.
                if let Some((host, port)) =
                    a.strip_prefix("dns:///").and_then(|r| r.split_once(':'))
                {
                    let app = headless
                        .get(host)
                        .unwrap_or_else(|| panic!("{}: no headless Service {host}", name(d)));
                    let port: u64 = port.parse().unwrap();
                    assert!(service_ports[host].contains(&port), "{a}");
                    assert!(
                        pod_ports.get(app).is_some_and(|p| p.contains(&port)),
                        "{a}: the pods of {app} do not listen on {port}"
                    );
                    resolved += 1;
                }
            }
            let command = c["command"].as_array().and_then(|c| c[0].as_str());
            if let Some(binary) = command.filter(|b| b.starts_with("crdplane-")) {
                // The binary accepts every flag (clap stops at the first unknown one).
                let out = Command::new(bin(binary))
                    .args(&args)
                    .arg("--help")
                    .output()
                    .unwrap();
                assert!(
                    out.status.success(),
                    "{binary} {args:?}: {}",
                    String::from_utf8_lossy(&out.stderr)
                );
                checked += 1;
            }
            // Envoy's configuration and the files it names.
            if c["image"].as_str().unwrap().starts_with("envoyproxy/envoy") {
                let cfg_path = args[args.iter().position(|a| *a == "-c").unwrap() + 1];
                assert!(mounted(cfg_path), "{cfg_path}");
                let key = Path::new(cfg_path).file_name().unwrap().to_str().unwrap();
                let cfg = config_maps
                    .values()
                    .find_map(|cm| cm[key].as_str())
                    .unwrap_or_else(|| panic!("no ConfigMap holds {key}"));
                assert_eq!(
                    cfg,
                    std::fs::read_to_string(format!("{ROOT}/deploy/envoy/front-proxy.yaml"))
                        .unwrap()
                );
                for f in cfg
                    .split_whitespace()
                    .filter(|w| w.starts_with("/etc/crdplane/"))
                {
                    let f = f.trim_end_matches(['}', ',']);
                    assert!(mounted(f), "Envoy's {f} is not mounted");
                }
                checked += 1;
            }
        }
    }
    assert_eq!(checked, 5, "gateway, storage, validation, registry, envoy");
    assert_eq!(
        resolved, 5,
        "gateway: 3 services; registry: storage, validation"
    );
    // The gateways' audit policy is deploy/audit/policy.yaml (loaded by the gateway's tests).
    let policy = config_maps
        .values()
        .find_map(|cm| cm["policy.yaml"].as_str())
        .expect("the audit policy ConfigMap");
    assert_eq!(
        policy,
        std::fs::read_to_string(format!("{ROOT}/deploy/audit/policy.yaml")).unwrap()
    );
}

// ---- deploy/monitoring/ ---------------------------------------------------------------------

/// `deploy/monitoring/<name>`.
fn monitoring(name: &str) -> PathBuf {
    Path::new(ROOT).join("deploy/monitoring").join(name)
}

/// Debian's promtool, extracted into `.tools/prometheus/` by `scripts/deps.sh --test`.
fn promtool() -> PathBuf {
    let p = Path::new(ROOT).join(".tools/prometheus/usr/bin/promtool");
    assert!(
        p.exists(),
        "no promtool at {}: run scripts/deps.sh --test (it extracts Debian's prometheus into .tools/)",
        p.display()
    );
    p
}

/// `deploy/monitoring/<name>` (YAML) as JSON.
fn yaml_file(name: &str) -> Value {
    serde_saphyr::from_str(&std::fs::read_to_string(monitoring(name)).unwrap()).unwrap()
}

/// The jobs of `prometheus.yml`, which the rules and the dashboard select on.
const JOBS: [&str; 4] = [
    "crdplane-gateway",
    "crdplane-registry",
    "crdplane-storage",
    "crdplane-validation",
];

/// Every metric the stack exports (and Prometheus' own `up`) with its labels, besides the
/// `job` and `instance` of the scrape: the gateway's kube-apiserver names, go-grpc-prometheus'
/// server names of every service, and crdplane's own.
const METRICS: &[(&str, &[&str])] = &[
    ("up", &[]),
    (
        "apiserver_request_total",
        &[
            "verb",
            "dry_run",
            "group",
            "version",
            "resource",
            "subresource",
            "scope",
            "component",
            "code",
        ],
    ),
    ("apiserver_current_inflight_requests", &["request_kind"]),
    (
        "apiserver_longrunning_requests",
        &[
            "verb",
            "group",
            "version",
            "resource",
            "subresource",
            "scope",
            "component",
        ],
    ),
    (
        "apiserver_registered_watchers",
        &["group", "version", "kind"],
    ),
    (
        "apiserver_watch_events_total",
        &["group", "version", "kind"],
    ),
    ("crdplane_tenant_requests_total", &["tenant", "code"]),
    (
        "crdplane_tenant_request_duration_seconds_total",
        &["tenant"],
    ),
    (
        "grpc_server_handled_total",
        &["grpc_type", "grpc_service", "grpc_method", "grpc_code"],
    ),
    ("crdplane_redis_errors_total", &[]),
    ("crdplane_storage_watchers", &[]),
    ("crdplane_storage_watch_events_total", &[]),
    ("crdplane_validation_schema_cache_entries", &[]),
];

/// The histograms among them, by base name: each is the series `_bucket` (with `le`), `_sum`
/// and `_count`.
const HISTOGRAMS: &[(&str, &[&str])] = &[
    (
        "apiserver_request_duration_seconds",
        &[
            "verb",
            "dry_run",
            "group",
            "version",
            "resource",
            "subresource",
            "scope",
            "component",
        ],
    ),
    (
        "grpc_server_handling_seconds",
        &["grpc_type", "grpc_service", "grpc_method"],
    ),
    ("crdplane_redis_command_duration_seconds", &[]),
];

/// The labels of an exported series, `None` if the stack exports no series of that name.
fn exported_labels(name: &str) -> Option<Vec<&'static str>> {
    if let Some((_, labels)) = METRICS.iter().find(|(n, _)| *n == name) {
        return Some(labels.to_vec());
    }
    HISTOGRAMS
        .iter()
        .find_map(|(base, labels)| match name.strip_prefix(base)? {
            "_bucket" => Some([labels, &["le"][..]].concat()),
            "_sum" | "_count" => Some(labels.to_vec()),
            _ => None,
        })
}

/// Every label any series has (what recording rules, `by` and `on` may name).
fn any_label(label: &str) -> bool {
    ["job", "instance", "le"].contains(&label)
        || METRICS
            .iter()
            .chain(HISTOGRAMS)
            .any(|(_, labels)| labels.contains(&label))
}

/// The names a PromQL expression refers to.
#[derive(Debug, Default)]
struct Names {
    /// Each selector's metric name, with the label names of its matchers.
    selectors: Vec<(String, Vec<String>)>,
    /// Label names of `by`, `without`, `on`, `ignoring`, `group_left`, `group_right` lists
    /// (and of matchers without a metric name).
    labels: Vec<String>,
}

/// The metric and label names of `expr`: a small lexer, enough for the rules and the
/// dashboard (strings, ranges and Grafana's `$variables` are skipped; a word followed by `(`
/// is a function).
fn promql_names(expr: &str) -> Names {
    const AGGREGATIONS: &[&str] = &[
        "sum",
        "min",
        "max",
        "avg",
        "count",
        "stddev",
        "stdvar",
        "topk",
        "bottomk",
        "quantile",
        "count_values",
        "group",
    ];
    const GROUPING: &[&str] = &[
        "by",
        "without",
        "on",
        "ignoring",
        "group_left",
        "group_right",
    ];
    const OPERATORS: &[&str] = &["and", "or", "unless", "bool", "offset", "atan2"];
    let word_char = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == ':';
    let c: Vec<char> = expr.chars().collect();
    let mut names = Names::default();
    // Inside `{…}`: the index of the selector the matchers belong to, if it has a name.
    let mut matchers: Option<Option<usize>> = None;
    // Inside the label list of a grouping keyword.
    let mut grouping = false;
    let mut i = 0;
    while i < c.len() {
        let ch = c[i];
        match ch {
            '"' | '\'' | '`' => {
                i += 1;
                while i < c.len() && c[i] != ch {
                    if c[i] == '\\' && ch != '`' {
                        i += 1;
                    }
                    i += 1;
                }
                i += 1;
            }
            // Ranges and subqueries: durations only.
            '[' => {
                while i < c.len() && c[i] != ']' {
                    i += 1;
                }
                i += 1;
            }
            '{' => {
                matchers.get_or_insert(None);
                i += 1;
            }
            '}' => {
                matchers = None;
                i += 1;
            }
            ')' if grouping => {
                grouping = false;
                i += 1;
            }
            // Grafana's variables: `$name`, `${name}`.
            '$' => {
                i += 1;
                if c.get(i) == Some(&'{') {
                    while i < c.len() && c[i] != '}' {
                        i += 1;
                    }
                    i += 1;
                } else {
                    while i < c.len() && word_char(c[i]) {
                        i += 1;
                    }
                }
            }
            _ if ch.is_ascii_digit() || ch == '.' => {
                while i < c.len() && (word_char(c[i]) || c[i] == '.') {
                    i += 1;
                }
            }
            _ if word_char(ch) => {
                let start = i;
                while i < c.len() && word_char(c[i]) {
                    i += 1;
                }
                let word: String = c[start..i].iter().collect();
                let next = (i..c.len()).find(|&j| !c[j].is_whitespace());
                let next_char = next.map(|j| c[j]);
                if let Some(selector) = matchers {
                    match selector {
                        Some(s) => names.selectors[s].1.push(word),
                        None => names.labels.push(word),
                    }
                } else if grouping {
                    names.labels.push(word);
                } else if GROUPING.contains(&word.as_str()) {
                    if next_char == Some('(') {
                        grouping = true;
                        i = next.unwrap() + 1;
                    }
                } else if AGGREGATIONS.contains(&word.as_str())
                    || OPERATORS.contains(&word.as_str())
                    || next_char == Some('(')
                {
                    // An aggregation, a keyword or a function.
                } else {
                    names.selectors.push((word, Vec::new()));
                    if next_char == Some('{') {
                        matchers = Some(Some(names.selectors.len() - 1));
                        i = next.unwrap() + 1;
                    }
                }
            }
            _ => i += 1,
        }
    }
    names
}

/// Checks that `expr` (of `what`) uses only exported metrics, with their labels, or the
/// recording rules of alerts.yml (`recorded`).
fn check_names(what: &str, expr: &str, recorded: &BTreeSet<String>) {
    let names = promql_names(expr);
    assert!(!names.selectors.is_empty(), "{what}: no metric in {expr}");
    for (metric, labels) in &names.selectors {
        let own = exported_labels(metric);
        assert!(
            own.is_some() || recorded.contains(metric),
            "{what}: {metric} is neither a metric the stack exports nor a recording rule of alerts.yml: {expr}"
        );
        for label in labels {
            let known = match &own {
                Some(own) => {
                    own.contains(&label.as_str()) || ["job", "instance"].contains(&label.as_str())
                }
                None => any_label(label),
            };
            assert!(known, "{what}: {metric} has no label {label}: {expr}");
        }
    }
    for label in &names.labels {
        assert!(
            any_label(label),
            "{what}: no series has a label {label}: {expr}"
        );
    }
}

#[test]
fn the_name_checks_see_metrics_labels_and_nothing_else() {
    let names = promql_names(
        r#"sum by (tenant) (rate(crdplane_tenant_requests_total{job="crdplane-gateway", instance=~"$instance"}[$__rate_interval])) / on (tenant) group_left count(up{job=~"${job}"}) and on (job) histogram_quantile(0.99, x:y:rate5m{le!="0.5"}) > 0.5"#,
    );
    assert_eq!(
        names.selectors,
        [
            (
                "crdplane_tenant_requests_total".to_string(),
                vec!["job".to_string(), "instance".to_string()]
            ),
            ("up".to_string(), vec!["job".to_string()]),
            ("x:y:rate5m".to_string(), vec!["le".to_string()]),
        ]
    );
    assert_eq!(names.labels, ["tenant", "tenant", "job"]);
    let recorded = BTreeSet::from(["x:y:rate5m".to_string()]);
    for bad in [
        "rate(grpc_server_handled{grpc_code=\"OK\"}[5m])",
        "rate(grpc_server_handled_total{code=\"OK\"}[5m])",
        "sum by (status) (rate(apiserver_request_total[5m]))",
        "apiserver_request_duration_seconds_buckets",
    ] {
        let r = std::panic::catch_unwind(|| check_names("t", bad, &recorded));
        assert!(r.is_err(), "{bad} passed");
    }
    check_names(
        "t",
        "histogram_quantile(0.9, sum by (le) (rate(grpc_server_handling_seconds_bucket{grpc_type=\"unary\"}[5m])))",
        &recorded,
    );
}

#[test]
fn prometheus_rules_and_scrape_config_pass_promtool() {
    let promtool = promtool();
    let alerts = monitoring("alerts.yml");
    let out = run(Command::new(&promtool)
        .args(["check", "rules"])
        .arg(&alerts));
    assert!(out.contains("SUCCESS"), "{out}");
    let out = run(Command::new(&promtool)
        .args(["test", "rules"])
        .arg(monitoring("alerts.test.yml")));
    assert!(out.contains("SUCCESS"), "{out}");

    // The scrape configuration: its jobs, its rule file beside it.
    let config = yaml_file("prometheus.yml");
    let jobs: BTreeSet<&str> = config["scrape_configs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["job_name"].as_str().unwrap())
        .collect();
    assert_eq!(jobs, BTreeSet::from(JOBS));
    assert_eq!(config["rule_files"], serde_json::json!(["alerts.yml"]));
    run(Command::new(&promtool)
        .args(["check", "config", "--syntax-only"])
        .arg(monitoring("prometheus.yml")));
    // The full check also loads the rule files and wants the credential files the
    // configuration names: a copy with placeholders for them (paths relative to the
    // configuration, as Prometheus resolves them).
    let dir = tempfile::tempdir().unwrap();
    for f in ["prometheus.yml", "alerts.yml"] {
        std::fs::copy(monitoring(f), dir.path().join(f)).unwrap();
    }
    for s in config["scrape_configs"].as_array().unwrap() {
        for file in [
            &s["tls_config"]["cert_file"],
            &s["tls_config"]["key_file"],
            &s["authorization"]["credentials_file"],
        ]
        .into_iter()
        .filter_map(Value::as_str)
        {
            assert!(Path::new(file).is_relative(), "{file}");
            let placeholder = dir.path().join(file);
            std::fs::create_dir_all(placeholder.parent().unwrap()).unwrap();
            std::fs::write(placeholder, "").unwrap();
        }
    }
    let out = run(Command::new(&promtool)
        .args(["check", "config"])
        .arg(dir.path().join("prometheus.yml")));
    assert!(
        out.contains(&format!("{}", dir.path().join("alerts.yml").display())),
        "the rule file was not checked: {out}"
    );
}

#[test]
fn alerts_and_dashboard_use_exported_metrics_only() {
    // The rules: recording rules, and alerts with a severity and their annotations.
    let rules = yaml_file("alerts.yml");
    let mut recorded = BTreeSet::new();
    let mut exprs: Vec<(String, String)> = Vec::new();
    for g in rules["groups"].as_array().unwrap() {
        for r in g["rules"].as_array().unwrap() {
            let expr = r["expr"].as_str().unwrap().to_string();
            if let Some(name) = r["record"].as_str() {
                assert_eq!(
                    name.matches(':').count(),
                    2,
                    "level:metric:operations, {name}"
                );
                recorded.insert(name.to_string());
                exprs.push((format!("recording rule {name}"), expr));
            } else {
                let name = r["alert"].as_str().unwrap();
                let severity = r["labels"]["severity"].as_str();
                assert!(
                    matches!(severity, Some("critical" | "warning")),
                    "{name}: severity {severity:?}"
                );
                for a in ["summary", "description"] {
                    assert!(
                        r["annotations"][a].as_str().is_some_and(|s| !s.is_empty()),
                        "{name}: no {a}"
                    );
                }
                exprs.push((format!("alert {name}"), expr));
            }
        }
    }
    assert!(!recorded.is_empty());

    // The dashboard: every panel but the rows has targets, each with an expression, and
    // reads the `datasource` variable.
    let dashboard: Value = serde_json::from_str(
        &std::fs::read_to_string(monitoring("grafana-dashboard.json")).unwrap(),
    )
    .unwrap();
    assert!(dashboard["schemaVersion"].as_u64().unwrap() >= 36);
    let vars = dashboard["templating"]["list"].as_array().unwrap();
    assert!(
        vars.iter().any(|v| v["name"] == "datasource"
            && v["type"] == "datasource"
            && v["query"] == "prometheus"),
        "no Prometheus datasource variable"
    );
    for v in vars.iter().filter(|v| v["type"] == "query") {
        let q = v["query"]["query"]
            .as_str()
            .or(v["query"].as_str())
            .unwrap();
        let (expr, label) = q
            .strip_prefix("label_values(")
            .and_then(|q| q.strip_suffix(')'))
            .and_then(|q| q.rsplit_once(','))
            .unwrap_or_else(|| panic!("variable {}: {q}", v["name"]));
        assert!(any_label(label.trim()), "variable {}: {q}", v["name"]);
        check_names(&format!("variable {}", v["name"]), expr, &recorded);
    }
    let mut panels: Vec<&Value> = dashboard["panels"].as_array().unwrap().iter().collect();
    let mut ids = BTreeSet::new();
    let mut queries = 0;
    while let Some(p) = panels.pop() {
        assert!(
            ids.insert(p["id"].as_u64().unwrap()),
            "panel id {} twice",
            p["id"]
        );
        let title = p["title"].as_str().unwrap();
        if p["type"] == "row" {
            panels.extend(p["panels"].as_array().into_iter().flatten());
            continue;
        }
        assert_eq!(p["datasource"]["uid"], "${datasource}", "panel {title}");
        let targets = p["targets"].as_array().filter(|t| !t.is_empty());
        for t in targets.unwrap_or_else(|| panic!("panel {title}: no targets")) {
            let expr = t["expr"].as_str().filter(|e| !e.trim().is_empty());
            let expr = expr.unwrap_or_else(|| panic!("panel {title}: a target without expr"));
            exprs.push((format!("panel {title}"), expr.to_string()));
            queries += 1;
        }
    }
    assert!(queries >= 15, "{queries} queries");

    for (what, expr) in &exprs {
        check_names(what, expr, &recorded);
    }

    // The dashboard's queries parse: as recording rules (Grafana's variables filled in) of
    // a rule file that promtool checks.
    let mut file = String::from("groups:\n  - name: dashboard\n    rules:\n");
    for (i, (_, expr)) in exprs
        .iter()
        .filter(|(what, _)| what.starts_with("panel "))
        .enumerate()
    {
        let expr = expr
            .replace("$__rate_interval", "5m")
            .replace("$instance", ".*")
            .replace("$job", "crdplane-.*");
        // A JSON string is a YAML double-quoted scalar.
        file.push_str(&format!(
            "      - record: dashboard:query_{i}:test\n        expr: {}\n",
            Value::String(expr)
        ));
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("dashboard-queries.yml");
    std::fs::write(&path, file).unwrap();
    run(Command::new(promtool()).args(["check", "rules"]).arg(&path));
}
