//! @kubernetes/client-node 2 (tests/node/controller.mjs, installed by `scripts/deps.sh --test`
//! with `npm ci` in tests/node) against the real stack: what a client-node controller does
//! with a CRD — CoreV1Api namespaces, ApiextensionsV1Api, CustomObjectsApi (merge and JSON
//! patch, status, delete options, dryRun), KubernetesObjectApi, Watch, makeInformer with its
//! re-list after 410, and ApiException carrying our Status. The storage keeps a short watch
//! history (`--history-len 16`) so the informer's stale resourceVersion gets 410 quickly.

use std::path::Path;
use std::process::Command;

#[test]
fn client_node_controller() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("node");
    let node_ok = Command::new("node")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !node_ok {
        eprintln!("skipping: node is not installed (client-node needs Node.js)");
        return;
    }
    assert!(
        dir.join("node_modules/@kubernetes/client-node/package.json")
            .exists(),
        "@kubernetes/client-node is missing: run scripts/deps.sh --test (npm ci in tests/node)"
    );
    let stack = crdplane_tests::Stack::start_with_redis_and(&["--history-len", "16"]).unwrap();
    // client-node 2 refuses plain http unless the cluster says insecure-skip-tls-verify.
    let kubeconfig = stack.home.path().join("client-node-kubeconfig");
    let server = format!("{}/clusters/clientnode", stack.gateway);
    let yaml = crdplane_tests::kubeconfig_yaml(&server, "crdplane").replace(
        &format!("    server: {server}\n"),
        &format!("    server: {server}\n    insecure-skip-tls-verify: true\n"),
    );
    assert!(yaml.contains("insecure-skip-tls-verify"));
    std::fs::write(&kubeconfig, yaml).unwrap();
    let out = Command::new("node")
        .arg(dir.join("controller.mjs"))
        .arg(&kubeconfig)
        .current_dir(&dir)
        .output()
        .unwrap();
    let (o, e) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(out.status.success(), "{o}{e}");
    assert!(o.contains("all checks passed"), "{o}{e}");
}
