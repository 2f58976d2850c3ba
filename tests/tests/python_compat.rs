//! The Python `kubernetes` client, every release on this machine (tests/python/client_compat.py):
//! Debian's python3-kubernetes 22.6 for /usr/bin/python3 and the newest pip release for the
//! `python3` on PATH (both installed by scripts/deps.sh --test). 22.6 sends `watch=True`,
//! which upstream parses as true (runtime.Convert_Slice_string_To_bool); a dict given to
//! `patch_namespace` is a strategic merge patch; status, JSON patch, `_continue` pagination and
//! delete options.

use crdplane_tests::Stack;

#[test]
fn python_clients_watch_and_patch_namespace() {
    let pys = crdplane_tests::python_interpreters();
    assert!(
        !pys.is_empty(),
        "no Python interpreter has the kubernetes client: run scripts/deps.sh --test"
    );
    let stack = Stack::start_with_redis().unwrap();
    for (i, (py, ver)) in pys.iter().enumerate() {
        crdplane_tests::run_python_checks(
            py,
            ver,
            "client_compat.py",
            &format!("{}/clusters/pycompat{i}", stack.gateway),
        );
        eprintln!("{py}: kubernetes {ver}: all checks passed");
    }
}
