//! @kubernetes/client-node 2 (tests/node/controller.mjs, installed by `scripts/deps.sh --test`
//! with `npm ci` in tests/node) against the real stack: what a client-node controller does
//! with a CRD — CoreV1Api namespaces, ApiextensionsV1Api, CustomObjectsApi (merge and JSON
//! patch, status, delete options, dryRun), KubernetesObjectApi, Watch, makeInformer with its
//! re-list after 410, and ApiException carrying our Status; over HTTPS with the launcher's
//! kubeconfig (client certificate) unmodified. The storage keeps a short watch
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
    // Over TLS as `crdplane up` serves it, with the launcher's kubeconfig unmodified (the
    // admin client certificate; client-node 2 refuses plain http without
    // insecure-skip-tls-verify).
    let pki_dir = tempfile::tempdir().unwrap();
    let pki = crdplane::Pki::ensure(pki_dir.path(), &[]).unwrap();
    let stack = crdplane_tests::Stack::start_with_redis_using(|b| {
        b.tls(&pki)
            .args(crdplane::Service::Storage, &["--history-len", "16"])
    })
    .unwrap();
    let kubeconfig = stack.home.path().join("client-node-kubeconfig");
    let server = format!("{}/clusters/clientnode", stack.gateway);
    assert!(server.starts_with("https://"));
    std::fs::write(
        &kubeconfig,
        crdplane::kubeconfig_yaml_tls(
            &server,
            pki.ca_pem(),
            pki.admin_cert_pem(),
            pki.admin_key_pem(),
        ),
    )
    .unwrap();
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
