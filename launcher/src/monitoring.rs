//! The Prometheus scrape configuration of a running stack: `crdplane up` writes it to
//! `<data-dir>/prometheus.yml` (so `prometheus --config.file=…` watches the whole stack at
//! once), and the end-to-end test of the metrics runs a real Prometheus on it. Not on the
//! request path.
//!
//! One job per kind of process, with upstream's and the deploy/monitoring dashboard's job
//! names (`crdplane-gateway`, `crdplane-storage`, `crdplane-registry`,
//! `crdplane-validation`). With the stack's PKI the gateway is scraped over HTTPS with the
//! admin's client certificate (its `/metrics` is authorized like every request), and each
//! service's metrics port with a certificate of the services CA, as its gRPC callers are.

use crate::pki::Pki;
use crate::stack::Service;
use serde_json::{Value, json};

/// The job of a child named `name` (`storage`, `storage-1`, `gateway-0`, …).
pub fn job_of(name: &str) -> Option<Service> {
    let kind = name.split('-').next()?;
    Service::ALL.into_iter().find(|s| s.name() == kind)
}

/// The configuration (JSON, which Prometheus reads as the YAML subset it is) scraping every
/// `(name, url)` of `targets` ([`crate::stack::RunningStack::metrics_targets`]) every
/// `interval` (a Prometheus duration, e.g. `5s`), loading `rule_files`.
pub fn prometheus_config(
    targets: &[(String, String)],
    pki: Option<&Pki>,
    interval: &str,
    rule_files: &[String],
) -> String {
    let mut jobs = Vec::new();
    for service in Service::ALL {
        let mut scheme = "http";
        let mut path = "/metrics".to_string();
        let addrs: Vec<Value> = targets
            .iter()
            .filter(|(name, _)| job_of(name) == Some(service))
            .filter_map(|(name, url)| {
                let (s, rest) = url.split_once("://")?;
                scheme = if s == "https" { "https" } else { "http" };
                let (addr, p) = rest.split_once('/').unwrap_or((rest, "metrics"));
                path = format!("/{p}");
                Some(json!({"targets": [addr], "labels": {"process": name}}))
            })
            .collect();
        if addrs.is_empty() {
            continue;
        }
        let mut job = json!({
            "job_name": format!("crdplane-{}", service.name()),
            "scheme": scheme,
            "metrics_path": path,
            "static_configs": addrs,
        });
        if let (Some(p), "https") = (pki, scheme) {
            job["tls_config"] = if service == Service::Gateway {
                json!({
                    "ca_file": p.ca_cert_path(),
                    "cert_file": p.admin_cert_path(),
                    "key_file": p.admin_key_path(),
                })
            } else {
                json!({
                    "ca_file": p.services_ca_path(),
                    "cert_file": p.service_cert_path(Service::Gateway.name()),
                    "key_file": p.service_key_path(Service::Gateway.name()),
                })
            };
        }
        jobs.push(job);
    }
    let cfg = json!({
        "global": {"scrape_interval": interval, "evaluation_interval": interval},
        "rule_files": rule_files,
        "scrape_configs": jobs,
    });
    serde_json::to_string_pretty(&cfg).expect("json") + "\n"
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_job_per_kind_of_process() {
        let targets = [
            (
                "storage-0".to_string(),
                "http://127.0.0.1:1/metrics".to_string(),
            ),
            (
                "storage-1".to_string(),
                "http://127.0.0.1:2/metrics".to_string(),
            ),
            (
                "registry".to_string(),
                "http://127.0.0.1:3/metrics".to_string(),
            ),
            (
                "gateway".to_string(),
                "http://127.0.0.1:4/metrics".to_string(),
            ),
        ];
        let cfg: Value =
            serde_json::from_str(&prometheus_config(&targets, None, "5s", &[])).unwrap();
        let jobs = cfg["scrape_configs"].as_array().unwrap();
        let names: Vec<&str> = jobs
            .iter()
            .map(|j| j["job_name"].as_str().unwrap())
            .collect();
        assert_eq!(
            names,
            ["crdplane-storage", "crdplane-registry", "crdplane-gateway"]
        );
        assert_eq!(
            jobs[0]["static_configs"][1],
            json!({"targets": ["127.0.0.1:2"], "labels": {"process": "storage-1"}})
        );
        assert_eq!(jobs[2]["metrics_path"], "/metrics");
        assert_eq!(job_of("validation-3"), Some(Service::Validation));
        assert_eq!(job_of("redis-0"), None);
    }
}
