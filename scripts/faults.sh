#!/usr/bin/env bash
# The full fault suite (tests/tests/faults.rs): under a create/update load with every
# acknowledged write recorded, kill -9 the gateway, storage, validation, registry and
# redis-server in turn and restart them; Redis down for 10 s; Redis power loss with the
# default durability (appendfsync always) and with --durability everysec (last second of
# the AOF cut). Checks: 0 acknowledged writes lost (default durability), no resourceVersion
# reused, watchers saw every write once and in order or got 410 and relisted consistently.
# The normal test run includes a short smoke version (storage kill, Redis power loss).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
cargo build --workspace --bins
CRDPLANE_FAULTS=full cargo test -p crdplane-tests --test faults -- --nocapture --test-threads=1
