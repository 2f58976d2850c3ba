//! The CRD corpus end to end: every CustomResourceDefinition of 14 well-known projects
//! (`<repo root>/../shared/crd-corpus`, provenance in its MANIFEST.md; never copied into the
//! repository) installs through real kubectl, becomes Established, and every example object
//! beside it is accepted — except the examples upstream itself refuses, which must be refused
//! with upstream's message.
//!
//! Per kubectl (the oldest and the newest found; `CRDPLANE_CORPUS_ALL_KUBECTLS=1` runs every
//! one) one stack, and per project:
//! 1. `kubectl apply -f <project>/crds/` (one process). A CRD whose last-applied annotation
//!    exceeds 256 KiB is refused by the server with a 422 (`metadata.annotations: Too long:
//!    may not be more than 262144 bytes`, apimachinery `ValidateAnnotationsSize`), as
//!    kube-apiserver does; those CRDs are then installed with `kubectl create` (or `replace`
//!    when the other gateway-api channel installed the same name), as users do upstream.
//! 2. `kubectl wait --for=condition=Established crd --all`.
//! 3. The namespaces the examples name are created, then every example expected to be
//!    accepted is applied in one `kubectl apply -f … -f …`, and each expected refusal alone.
//!
//! `--validate=false` keeps each kubectl from downloading the (tens of MB) OpenAPI document on
//! every invocation; the server-side schema validation under test is unaffected.
//!
//! Set `CRDPLANE_CRD_CORPUS` to read the corpus elsewhere; without a corpus the test skips.

use crdplane_tests::{KubectlOutput, Stack, kubectls};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// Examples refused by kube-apiserver's schema validation (pkg/apiserver/validation), with the
/// object's name and the causes of the 422 (kubectl prints them as `"<name>" is invalid: …`).
/// Some are upstream "invalid" examples, the others upstream fixtures lacking a required field.
const REFUSED: &[(&str, &str, &[&str])] = &[
    (
        "argo-workflows/examples/invalid-11-workflowtemplate-workflow-template-invalid-onexit.yaml",
        "workflow-template-invalid-onexit",
        &["spec.templates[1].container.volumeMounts[0].mountPath: Required value"],
    ),
    (
        "external-secrets/examples/04-secretstore-demo-store.yaml",
        "demo-store",
        &[
            r#"spec.provider.gcpsm.projectID: Invalid value: "array": spec.provider.gcpsm.projectID in body must be of type string: "array""#,
        ],
    ),
    (
        "istio/examples/invalid-08-proxyconfig-bad-concurrency.yaml",
        "bad-concurrency",
        &[
            "spec.concurrency: Invalid value: -1: spec.concurrency in body should be greater than or equal to 0",
        ],
    ),
    (
        "keda/examples/03-scaledjob-scaledjob-sample.yaml",
        "scaledjob-sample",
        &["spec.jobTargetRef.template: Required value"],
    ),
    (
        "kyverno/examples/03-globalcontextentry-ingress-3.yaml",
        "ingress-3",
        &[
            r#"<nil>: Invalid value: "": "spec" must validate one and only one schema (oneOf). Found none valid"#,
            "spec.kubernetesResource: Required value",
        ],
    ),
    (
        "kyverno/examples/04-imagevalidatingpolicy-ivpol-autogen-sample.yaml",
        "ivpol-autogen-sample",
        &["spec: Required value"],
    ),
    (
        "kyverno/examples/07-policyexception-pod-security-exception.yaml",
        "pod-security-exception",
        &["spec.policyRefs: Required value"],
    ),
    (
        "prometheus-operator/examples/02-servicemonitor-servicemonitor-example.yaml",
        "servicemonitor-example",
        &["spec.selector: Required value"],
    ),
];

/// Examples kube-apiserver refuses only through `x-kubernetes-validations` (CEL) rules, which
/// this server does not evaluate: not applied (reported as skipped).
const REFUSED_BY_CEL: &[&str] = &[
    "crossplane/examples/invalid-08-composition-invalid-missing-pipeline.yaml",
    "crossplane/examples/invalid-09-composition-invalid-empty-pipeline.yaml",
    "crossplane/examples/invalid-10-composition-invalid-missing-secretref.yaml",
    "crossplane/examples/invalid-11-usage-using-uses-used-across-namespaces-invali.yaml",
    "istio/examples/invalid-09-proxyconfig-empty-key-selector.yaml",
    "istio/examples/invalid-10-authorizationpolicy-service-account-and-namespace.yaml",
    "istio/examples/invalid-11-authorizationpolicy-service-account-and-namespace-principal.yaml",
];

/// The rest of the `invalid-*` examples are invalid for their projects' controllers or
/// webhooks only; the API server accepts them (their schemas do not forbid what they do).
const ANNOTATION_TOO_LONG: &str =
    "metadata.annotations: Too long: may not be more than 262144 bytes";

fn corpus_dir() -> Option<PathBuf> {
    let dir = match std::env::var_os("CRDPLANE_CRD_CORPUS") {
        Some(d) => PathBuf::from(d),
        None => Path::new(env!("CARGO_MANIFEST_DIR"))
            .parent()?
            .parent()?
            .join("shared/crd-corpus"),
    };
    dir.join("MANIFEST.md").exists().then_some(dir)
}

fn yaml_files(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

/// The path of `p` relative to the corpus, as the tables above name it.
fn rel(corpus: &Path, p: &Path) -> String {
    p.strip_prefix(corpus)
        .unwrap_or(p)
        .to_string_lossy()
        .into_owned()
}

/// `metadata.namespace` of an example (a two-space-indented `namespace:` line).
fn example_namespace(text: &str) -> Option<String> {
    text.lines()
        .find_map(|l| l.strip_prefix("  namespace: "))
        .map(|n| n.trim().trim_matches('"').to_string())
        .filter(|n| !n.is_empty())
}

/// CRDs kubectl reported as refused with the annotation-size 422 in its
/// `The CustomResourceDefinition "<name>" is invalid: …` form (a Status with causes).
fn annotation_too_long_names(stderr: &str) -> BTreeSet<String> {
    const MARKER: &str = "The CustomResourceDefinition \"";
    stderr
        .lines()
        .filter(|l| l.contains(ANNOTATION_TOO_LONG))
        .filter_map(|l| {
            let rest = &l[l.find(MARKER)? + MARKER.len()..];
            Some(rest[..rest.find('"')?].to_string())
        })
        .collect()
}

/// Files kubectl reported as refused with the annotation-size 422 (in `error when creating
/// "<file>": …` / `error when patching "<file>": …` lines).
fn annotation_too_long_files(stderr: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for line in stderr.lines().filter(|l| l.contains(ANNOTATION_TOO_LONG)) {
        for marker in ["error when creating \"", "error when patching \""] {
            if let Some(i) = line.find(marker) {
                let rest = &line[i + marker.len()..];
                if let Some(end) = rest.find('"') {
                    out.insert(rest[..end].to_string());
                }
            }
        }
    }
    out
}

/// Error lines of a kubectl run other than the annotation-size refusals (and the patch dumps
/// kubectl prints with them).
fn other_errors(o: &KubectlOutput) -> Vec<String> {
    o.stderr
        .lines()
        .filter(|l| {
            (l.starts_with("Error") || l.starts_with("error") || l.contains("error when"))
                && !l.contains(ANNOTATION_TOO_LONG)
                && !l.starts_with("Error from server (Invalid): error when applying patch:")
        })
        .map(|l| l.chars().take(600).collect())
        .collect()
}

fn install_project(stack: &Stack, kubectl: &Path, corpus: &Path, project: &Path) {
    let crds = project.join("crds");
    let crd_dir = crds.to_string_lossy().into_owned();
    let o = stack.kubectl(kubectl, &["apply", "--validate=false", "-f", &crd_dir]);
    let others = other_errors(&o);
    assert!(
        others.is_empty(),
        "{}: kubectl apply of the CRDs failed: {others:#?}",
        kubectl.display()
    );
    let mut too_long = annotation_too_long_files(&o.stderr);
    // kubectl prints a 422 that carries causes as `The CustomResourceDefinition "<name>" is
    // invalid: …`, without the file: find the file that defines that CRD.
    for name in annotation_too_long_names(&o.stderr) {
        let file = yaml_files(&crds)
            .into_iter()
            .find(|f| crd_names(&std::fs::read_to_string(f).unwrap_or_default()).contains(&name))
            .unwrap_or_else(|| panic!("no file of {crd_dir} defines CRD {name}"));
        too_long.insert(file.to_string_lossy().into_owned());
    }
    for f in &too_long {
        // The server refused exactly the CRDs too big for client-side apply: the annotation
        // carries the whole object, so those files are large.
        let size = std::fs::metadata(f).map(|m| m.len()).unwrap_or(0);
        assert!(
            size > 200 * 1024,
            "{f} ({size} bytes) refused for its annotation size"
        );
        let c = stack.kubectl(kubectl, &["create", "--validate=false", "-f", f]);
        if !c.ok && c.stderr.contains("AlreadyExists") {
            let r = stack.kubectl(kubectl, &["replace", "--validate=false", "-f", f]);
            assert!(r.ok, "{}: replace {f}: {}", kubectl.display(), r.stderr);
        } else {
            assert!(c.ok, "{}: create {f}: {}", kubectl.display(), c.stderr);
        }
    }
    if !too_long.is_empty() {
        eprintln!(
            "{}: {} CRD(s) of {} refused by apply with the 422 ({ANNOTATION_TOO_LONG}), installed with create",
            kubectl.display(),
            too_long.len(),
            rel(corpus, project)
        );
    }
    let w = stack.kubectl(
        kubectl,
        &[
            "wait",
            "--for=condition=Established",
            "crd",
            "--all",
            "--timeout=300s",
        ],
    );
    assert!(
        w.ok,
        "{}: CRDs of {} not Established: {}",
        kubectl.display(),
        rel(corpus, project),
        w.stderr
    );
}

fn apply_examples(stack: &Stack, kubectl: &Path, corpus: &Path, project: &Path) {
    let examples = yaml_files(&project.join("examples"));
    let mut namespaces = BTreeSet::new();
    let mut accepted = Vec::new();
    let mut refused = Vec::new();
    for e in &examples {
        let name = rel(corpus, e);
        let text = std::fs::read_to_string(e).expect("read example");
        if let Some(ns) = example_namespace(&text) {
            namespaces.insert(ns);
        }
        if REFUSED_BY_CEL.contains(&name.as_str()) {
            eprintln!("skipped {name}: refused upstream by an x-kubernetes-validations rule");
        } else if let Some((_, obj, causes)) = REFUSED.iter().find(|(f, _, _)| *f == name) {
            refused.push((e.to_string_lossy().into_owned(), *obj, *causes));
        } else {
            accepted.push(e.to_string_lossy().into_owned());
        }
    }
    // Refresh kubectl's discovery cache (CRDs created after the last invocation's discovery).
    let d = stack.kubectl(kubectl, &["api-resources", "-o", "name"]);
    assert!(d.ok, "api-resources: {}", d.stderr);
    for ns in &namespaces {
        let o = stack.kubectl(kubectl, &["create", "namespace", ns]);
        assert!(
            o.ok || o.stderr.contains("AlreadyExists"),
            "create namespace {ns}: {}",
            o.stderr
        );
    }
    if !accepted.is_empty() {
        let mut args = vec!["apply", "--validate=false"];
        for f in &accepted {
            args.extend(["-f", f.as_str()]);
        }
        let o = stack.kubectl(kubectl, &args);
        assert!(
            o.ok,
            "{}: examples of {} refused:\n{}",
            kubectl.display(),
            rel(corpus, project),
            o.stderr
        );
    }
    for (f, obj, causes) in &refused {
        let o = stack.kubectl(kubectl, &["apply", "--validate=false", "-f", f]);
        assert!(!o.ok, "{}: {f} was accepted", kubectl.display());
        let subject = format!("\"{obj}\" is invalid");
        assert!(
            o.stderr.contains(&subject) && causes.iter().all(|c| o.stderr.contains(c)),
            "{}: {f}: expected {subject} with {causes:?}, got {}",
            kubectl.display(),
            o.stderr
        );
    }
}

/// The oldest kubectl found (Debian's 1.20). The two kubectls run as two tests so that the test
/// harness runs them side by side (each on its own stack).
#[test]
fn every_corpus_crd_installs_and_its_examples_apply_oldest_kubectl() {
    corpus_run(Which::Oldest);
}

/// The newest kubectl found (and, with `CRDPLANE_CORPUS_ALL_KUBECTLS`, every one in between).
#[test]
fn every_corpus_crd_installs_and_its_examples_apply_newest_kubectl() {
    corpus_run(Which::Newest);
}

#[derive(Clone, Copy, PartialEq)]
enum Which {
    Oldest,
    Newest,
}

fn corpus_run(which: Which) {
    let Some(corpus) = corpus_dir() else {
        eprintln!(
            "skipped: no CRD corpus (set CRDPLANE_CRD_CORPUS or put shared/ beside the repo)"
        );
        return;
    };
    let all = kubectls();
    if all.is_empty() {
        eprintln!("skipped: no kubectl found");
        return;
    }
    let chosen: Vec<PathBuf> = match which {
        Which::Oldest => vec![all[0].clone()],
        // With one kubectl only, the oldest test already covers it.
        Which::Newest if all.len() == 1 => Vec::new(),
        Which::Newest if std::env::var_os("CRDPLANE_CORPUS_ALL_KUBECTLS").is_some() => {
            all[1..].to_vec()
        }
        Which::Newest => vec![all[all.len() - 1].clone()],
    };
    let mut projects: Vec<PathBuf> = std::fs::read_dir(&corpus)
        .expect("read corpus")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.join("crds").is_dir())
        .collect();
    projects.sort();
    // Every `REFUSED`/`REFUSED_BY_CEL` entry names a file of the corpus (the tables stay true).
    for f in REFUSED
        .iter()
        .map(|(f, _, _)| *f)
        .chain(REFUSED_BY_CEL.iter().copied())
    {
        assert!(corpus.join(f).exists(), "{f} is not in the corpus");
    }
    for kubectl in &chosen {
        let stack = Stack::start_with_redis().expect("stack");
        for project in &projects {
            install_project(&stack, kubectl, &corpus, project);
            apply_examples(&stack, kubectl, &corpus, project);
        }
        let o = stack.kubectl(kubectl, &["get", "crd", "-o", "name"]);
        assert!(o.ok, "{}", o.stderr);
        let installed: BTreeSet<String> = o
            .stdout
            .lines()
            .filter_map(|l| l.rsplit('/').next().map(str::to_string))
            .collect();
        let expected: BTreeSet<String> = projects
            .iter()
            .flat_map(|p| yaml_files(&p.join("crds")))
            .flat_map(|f| crd_names(&std::fs::read_to_string(f).expect("read CRD")))
            .collect();
        let missing: Vec<&String> = expected.difference(&installed).collect();
        assert!(
            missing.is_empty() && expected.len() > 100,
            "{}: {} CRDs expected, missing {missing:?}",
            kubectl.display(),
            expected.len()
        );
    }
}

/// `metadata.name` of every document of a CRD file (the first two-space-indented `name:`
/// line of each top-level `metadata:` block).
fn crd_names(text: &str) -> Vec<String> {
    let mut names = Vec::new();
    let mut in_meta = false;
    for l in text.lines() {
        if l == "metadata:" {
            in_meta = true;
        } else if in_meta && !l.is_empty() && !l.starts_with(' ') {
            in_meta = false;
        } else if in_meta && let Some(n) = l.strip_prefix("  name: ") {
            names.push(n.trim().to_string());
            in_meta = false;
        }
    }
    names
}

#[test]
fn annotation_refusals_are_parsed_from_kubectl_output() {
    let stderr = format!(
        "Error from server (Invalid): error when creating \"a/crds/x.yaml\": CustomResourceDefinition.apiextensions.k8s.io \"x.g\" is invalid: {ANNOTATION_TOO_LONG}\n\
         for: \"b/y.yaml\": error when patching \"b/y.yaml\": CustomResourceDefinition.apiextensions.k8s.io \"y.g\" is invalid: {ANNOTATION_TOO_LONG}\n\
         Error from server (Invalid): error when creating \"c.yaml\": other"
    );
    let files: Vec<String> = annotation_too_long_files(&stderr).into_iter().collect();
    assert_eq!(files, vec!["a/crds/x.yaml", "b/y.yaml"]);
    let names: Vec<String> = annotation_too_long_names(&format!(
        "The CustomResourceDefinition \"h.g\" is invalid: {ANNOTATION_TOO_LONG}\nThe CustomResourceDefinition \"z.g\" is invalid: spec: other"
    ))
    .into_iter()
    .collect();
    assert_eq!(names, vec!["h.g"]);
    assert_eq!(
        example_namespace("metadata:\n  name: a\n  namespace: argo\nspec:\n    namespace: x\n"),
        Some("argo".into())
    );
}
