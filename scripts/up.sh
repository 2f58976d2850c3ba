#!/usr/bin/env bash
# One command to run crdplane on this machine: installs redis-server if missing, builds the
# stack (release), and runs `crdplane up` with any flags you pass (see `crdplane up --help`).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
cargo build --release --bins --quiet
exec target/release/crdplane up "$@"
