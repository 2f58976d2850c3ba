//! The spec's walkthrough ("Create a CustomResourceDefinition", "Create custom objects",
//! validation, deleting the CRD; shared/spec/extend-the-api-with-crds.txt) with every real
//! kubectl on the machine against the real stack (real redis-server, real service binaries).
//! Each kubectl runs in its own tenant (`/clusters/<tenant>` in the kubeconfig's server URL).

use crdplane_tests::{Stack, kubeconfig_yaml, kubectls};
use std::path::Path;

const CRD: &str = include_str!("../testdata/crontab-crd.yaml");
const CT: &str = include_str!("../testdata/my-crontab.yaml");
const CT_INVALID: &str = include_str!("../testdata/my-crontab-invalid.yaml");

fn version_of(k: &Path) -> String {
    let o = std::process::Command::new(k)
        .args(["version", "--client"])
        .output()
        .expect("kubectl version");
    let s = String::from_utf8_lossy(&o.stdout).to_string();
    s.split("GitVersion:\"")
        .nth(1)
        .and_then(|r| r.split('"').next())
        .map(str::to_string)
        .unwrap_or_else(|| {
            s.lines()
                .find(|l| l.contains("Client Version"))
                .unwrap_or("")
                .trim()
                .to_string()
        })
}

#[test]
fn spec_walkthrough_with_every_kubectl() {
    let ks = kubectls();
    assert!(
        !ks.is_empty(),
        "no kubectl found (install Debian's kubernetes-client or set CRDPLANE_KUBECTLS)"
    );
    let stack = Stack::start_with_redis().expect("stack");
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, content: &str| {
        let p = dir.path().join(name);
        std::fs::write(&p, content).unwrap();
        p.to_string_lossy().to_string()
    };
    let crd = write("crd.yaml", CRD);
    let ct = write("ct.yaml", CT);
    let ct2 = write(
        "ct2.yaml",
        &CT.replace("my-awesome-cron-image", "edited-image"),
    );
    let bad = write("bad.yaml", CT_INVALID);
    for (n, k) in ks.iter().enumerate() {
        let version = version_of(k);
        eprintln!("== kubectl {version} ({})", k.display());
        let tenant = format!("kubectl-{n}");
        // A kubeconfig for this tenant and a private HOME (discovery cache) per kubectl.
        let home = tempfile::tempdir().unwrap();
        let kubeconfig = home.path().join("kubeconfig");
        std::fs::write(
            &kubeconfig,
            kubeconfig_yaml(&format!("{}/clusters/{tenant}", stack.gateway), &tenant),
        )
        .unwrap();
        let run = |args: &[&str]| {
            let o = std::process::Command::new(k)
                .args(args)
                .env("KUBECONFIG", &kubeconfig)
                .env("HOME", home.path())
                .output()
                .expect("run kubectl");
            let (out, err) = (
                String::from_utf8_lossy(&o.stdout).to_string(),
                String::from_utf8_lossy(&o.stderr).to_string(),
            );
            eprintln!("$ kubectl {}\n{out}{err}", args.join(" "));
            (o.status.success(), out, err)
        };
        let ok = |args: &[&str]| {
            let (success, out, err) = run(args);
            assert!(success, "kubectl {version} {args:?} failed: {err}");
            out
        };

        assert_eq!(
            ok(&["apply", "-f", &crd]).trim(),
            "customresourcedefinition.apiextensions.k8s.io/crontabs.stable.example.com created"
        );
        assert!(
            ok(&[
                "wait",
                "--for=condition=Established",
                "crd/crontabs.stable.example.com",
                "--timeout=30s"
            ])
            .contains("condition met")
        );
        assert_eq!(
            ok(&["apply", "-f", &ct]).trim(),
            "crontab.stable.example.com/my-new-cron-object created"
        );
        for resource in ["crontab", "ct", "crontabs"] {
            let out = ok(&["get", resource]);
            let mut lines = out.lines();
            let header: Vec<&str> = lines.next().unwrap_or("").split_whitespace().collect();
            assert_eq!(header, ["NAME", "AGE"], "kubectl {version} get {resource}");
            let row: Vec<&str> = lines.next().unwrap_or("").split_whitespace().collect();
            assert_eq!(row.first(), Some(&"my-new-cron-object"));
        }
        let yaml = ok(&["get", "ct", "-o", "yaml"]);
        for needle in [
            "kind: List",
            "apiVersion: stable.example.com/v1",
            "kind: CronTab",
            "cronSpec: '* * * * */5'",
            "image: my-awesome-cron-image",
            "namespace: default",
            "generation: 1",
            "uid: ",
        ] {
            assert!(
                yaml.contains(needle),
                "kubectl {version}: {needle:?} missing from\n{yaml}"
            );
        }
        let explain = ok(&["explain", "crontab.spec"]);
        for needle in ["cronSpec", "image", "replicas", "<string>", "<integer>"] {
            assert!(
                explain.contains(needle),
                "kubectl {version} explain: {needle:?} missing from\n{explain}"
            );
        }
        // Client-side apply of an edited manifest: a merge patch computed from last-applied.
        assert_eq!(
            ok(&["apply", "-f", &ct2]).trim(),
            "crontab.stable.example.com/my-new-cron-object configured"
        );
        assert_eq!(
            ok(&[
                "get",
                "ct",
                "my-new-cron-object",
                "-o",
                "jsonpath={.spec.image} {.metadata.generation}"
            ]),
            "edited-image 2"
        );
        assert_eq!(
            ok(&["apply", "-f", &ct2]).trim(),
            "crontab.stable.example.com/my-new-cron-object unchanged"
        );

        // The spec's invalid CronTab: both schema errors, upstream's texts.
        let (success, _, err) = run(&["apply", "-f", &bad]);
        assert!(!success);
        assert!(
            err.contains(r#"The CronTab "my-new-cron-object2" is invalid: "#),
            "{err}"
        );
        assert!(err.contains(r#"spec.cronSpec: Invalid value: "* * * *": spec.cronSpec in body should match '^(\d+|\*)(/\d+)?(\s+(\d+|\*)(/\d+)?){4}$'"#), "{err}");
        assert!(err.contains("spec.replicas: Invalid value: 15: spec.replicas in body should be less than or equal to 10"), "{err}");

        assert_eq!(
            ok(&["delete", "-f", &ct]).trim(),
            r#"crontab.stable.example.com "my-new-cron-object" deleted"#
        );
        let (_, out, err) = run(&["get", "ct"]);
        assert!(
            out.is_empty() && err.trim() == "No resources found in default namespace.",
            "{out}{err}"
        );

        // A second object, so deleting the CRD has something to delete.
        ok(&["apply", "-f", &ct]);
        assert_eq!(
            ok(&["delete", "-f", &crd]).trim(),
            r#"customresourcedefinition.apiextensions.k8s.io "crontabs.stable.example.com" deleted"#
        );
        let (success, _, err) = run(&["get", "crontabs"]);
        assert!(!success);
        assert!(
            err.contains("the server could not find the requested resource")
                || err.contains(r#"the server doesn't have a resource type "crontabs""#),
            "{err}"
        );
        // With a cold discovery cache kubectl cannot map the resource at all.
        let _ = std::fs::remove_dir_all(home.path().join(".kube/cache"));
        let (success, _, err) = run(&["get", "crontabs"]);
        assert!(!success);
        assert!(
            err.contains(r#"the server doesn't have a resource type "crontabs""#),
            "{err}"
        );

        // Recreated, the CRD starts out empty.
        ok(&["apply", "-f", &crd]);
        ok(&[
            "wait",
            "--for=condition=Established",
            "crd/crontabs.stable.example.com",
            "--timeout=30s",
        ]);
        let (_, out, err) = run(&["get", "crontabs"]);
        assert!(
            out.is_empty() && err.contains("No resources found"),
            "{out}{err}"
        );
    }
}
