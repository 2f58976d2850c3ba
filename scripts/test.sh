#!/usr/bin/env bash
# Runs every crdplane test: unit tests, integration tests against real redis-server, and the
# end-to-end tests with real kubectl (every version found, including Debian's 1.20), the
# Python kubernetes client and kube-rs. Installs what is missing first.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh --test
# One full run, usually from a clean clone: incremental caches (~3 GB of disk) would never be
# read again. (The edit-test loop, `cargo test -p <crate>`, keeps them.)
export CARGO_INCREMENTAL=0
# No dependency declared and unused (cargo-machete reads each crate's sources).
cargo machete
# Module docs build without warnings (broken intra-doc links, stray HTML in doc comments).
RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps --quiet
# The end-to-end tests start the real service binaries: build them first.
cargo build --workspace --bins
cargo test --workspace
# The storage suite once more on a Redis Cluster (three masters, a replica each).
# `--workspace` keeps the feature set of the run above, so nothing is built again.
CRDPLANE_TEST_REDIS=cluster cargo test --workspace --test redis_storage
# Fuzzing smoke: every cargo-fuzz target a few seconds (the long run: scripts/fuzz.sh --full).
FUZZ_SECONDS=${FUZZ_SECONDS:-10} scripts/fuzz.sh --smoke
