//! The services' `--disabled-metrics` (kube's escape hatch for a misbehaving metric) against
//! the real binaries: a named metric is gone from the process's `/metrics` while its other
//! metrics still count the calls.

use crdplane_tests::{Service, Stack, crontab, http_get};

#[test]
fn a_disabled_metric_of_storage_is_neither_recorded_nor_exposed() {
    let disabled = "crdplane_redis_command_duration_seconds,grpc_server_handling_seconds";
    let mut stack = Stack::start_with_redis_using(|b| {
        b.args(
            Service::Storage,
            &[format!("--disabled-metrics={disabled}")],
        )
    })
    .unwrap();
    crdplane_tests::serve_crontabs(&stack.gateway, &crontab("first", "x"));
    let targets = stack.processes().metrics_targets();
    let url = |name: &str| {
        targets
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, u)| u.clone())
            .unwrap_or_else(|| panic!("no metrics target {name}: {targets:?}"))
    };
    let (code, storage) = http_get(&url("storage")).unwrap();
    assert_eq!(code, 200, "{storage}");
    // Still recorded: the calls the create made, and the batch it was in.
    assert!(storage.contains("grpc_server_handled_total{"), "{storage}");
    assert!(storage.contains("crdplane_storage_batch_size"), "{storage}");
    for gone in disabled.split(',') {
        assert!(
            !storage.contains(gone),
            "{gone} is still exposed:\n{storage}"
        );
    }
    // Another process is not affected by storage's flag.
    let (code, validation) = http_get(&url("validation")).unwrap();
    assert_eq!(code, 200, "{validation}");
    assert!(
        validation.contains("grpc_server_handling_seconds_bucket{"),
        "{validation}"
    );
}
