//! The Kubernetes manifests of `deploy/` as an operator uses them: `crdplane pki` makes the
//! files, `deploy/kubernetes/secrets.sh` turns them into Secrets (kubectl, `--dry-run=client`),
//! and `kubectl kustomize deploy/` renders the rest. Checked: every rendered object against
//! the Kubernetes API schemas (`kubernetes-validate --strict`, installed by
//! `scripts/deps.sh --test`); every crdplane container's flags accepted by the real binary;
//! every file a flag (or the Envoy configuration) names mounted from a key the Secrets or the
//! generated ConfigMap hold; every service endpoint a flag names served by a Service of the
//! render on that port.

use crdplane_tests::{bin, kubectls};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;
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
            }
            _ => {}
        }
    }

    let mut checked = 0;
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
                let cm = config_maps.values().next().unwrap();
                let cfg = cm[Path::new(cfg_path).file_name().unwrap().to_str().unwrap()]
                    .as_str()
                    .unwrap();
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
}
