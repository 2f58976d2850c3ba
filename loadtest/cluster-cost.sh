#!/usr/bin/env bash
# What a Redis Cluster and waiting for a replica cost: HTTP creates and gets through the whole
# stack on one Redis (`crdplane up`), on a local Redis Cluster of three masters with a replica
# each (`--redis-cluster 3`), and on that cluster with every write waiting for its replica
# (`--redis-cluster 3 --wait-replicas 1`), side by side: the three stacks run at once and the
# load alternates between them, ROUNDS times, so every mode sees the same machine.
#
# Rounds rotate the order of the modes (each goes first once every three rounds); at the end
# it prints min / median / max of requests/s, p50 and p99 per mode and operation.
#
# On one machine the cluster's six redis-servers share the cores with everything else, so this
# shows the cost of the cluster client and of WAIT, not the scale-out a cluster gives across
# machines.
#
# Knobs: DURATION (10s per run), CONCURRENCY (64), ROUNDS (3), OPS ("create get"), SKIP_BUILD
# (0), PROFILE (release), BIN_DIR (default $CARGO_TARGET_DIR/$PROFILE or target/$PROFILE),
# LISTEN_BASE (6450: the stacks listen on 6450, 6451, 6452).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
DURATION=${DURATION:-10s}
CONCURRENCY=${CONCURRENCY:-64}
ROUNDS=${ROUNDS:-3}
OPS=${OPS:-create get}
SKIP_BUILD=${SKIP_BUILD:-0}
LISTEN_BASE=${LISTEN_BASE:-6450}
PROFILE=${PROFILE:-release}
BIN=${BIN_DIR:-${CARGO_TARGET_DIR:-$ROOT/target}/$PROFILE}
WORK=$(mktemp -d /tmp/crdplane-cluster-cost.XXXXXX)
MODES=(single cluster cluster-wait)
PIDS=()
cleanup() {
  for pid in "${PIDS[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
  rm -rf "$WORK"
}
trap cleanup EXIT
if [[ $SKIP_BUILD != 1 ]]; then
  (cd "$ROOT" && cargo build --release -p crdplane -p crdplane-gateway -p crdplane-storage \
    -p crdplane-validation -p crdplane-registry -p crdplane-load)
fi
listen_of() {
  case $1 in
    single) echo "127.0.0.1:$LISTEN_BASE" ;;
    cluster) echo "127.0.0.1:$((LISTEN_BASE + 1))" ;;
    cluster-wait) echo "127.0.0.1:$((LISTEN_BASE + 2))" ;;
  esac
}
for mode in "${MODES[@]}"; do
  extra=()
  case $mode in
    cluster) extra=(--redis-cluster 3) ;;
    cluster-wait) extra=(--redis-cluster 3 --wait-replicas 1) ;;
  esac
  "$BIN/crdplane" up --insecure-http --data-dir "$WORK/$mode" --listen "$(listen_of "$mode")" \
    "${extra[@]}" >"$WORK/$mode.log" 2>&1 &
  PIDS+=($!)
done
for mode in "${MODES[@]}"; do
  for _ in $(seq 1 600); do
    curl -fs "http://$(listen_of "$mode")/readyz" >/dev/null 2>&1 && break
    sleep 0.1
  done
  curl -fs "http://$(listen_of "$mode")/readyz" >/dev/null || {
    echo "the $mode stack did not start; its output:" >&2
    cat "$WORK/$mode.log" >&2
    exit 1
  }
done
echo "machine: $(nproc) CPUs; $(redis-server --version | cut -d' ' -f1-3); binaries $BIN; $(date -u +%FT%TZ)"
for round in $(seq 1 "$ROUNDS"); do
  shift_by=$(((round - 1) % 3))
  order=("${MODES[@]:shift_by}" "${MODES[@]:0:shift_by}")
  for op in $OPS; do
    for mode in "${order[@]}"; do
      "$BIN/crdplane-load" "$op" --target http --server "http://$(listen_of "$mode")" \
        --concurrency "$CONCURRENCY" --duration "$DURATION" --quiet \
        --json-out "$WORK/$mode-$op-$round.json" >/dev/null
      python3 - "$WORK/$mode-$op-$round.json" "$round" "$mode" "$op" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
l = r["latency_us"]
print(f"round {sys.argv[2]} {sys.argv[3]:>12} {sys.argv[4]:>6}: {r['ok_per_sec']:8.0f}/s, "
      f"p50 {l['p50'] / 1000:.1f} ms, p99 {l['p99'] / 1000:.1f} ms, errors {r['errors']}")
PY
    done
  done
done
python3 - "$WORK" "$ROUNDS" "$OPS" <<'PY'
import json, statistics, sys
work, rounds, ops = sys.argv[1], int(sys.argv[2]), sys.argv[3].split()
for op in ops:
    for mode in ("single", "cluster", "cluster-wait"):
        runs = [json.load(open(f"{work}/{mode}-{op}-{r}.json")) for r in range(1, rounds + 1)]
        cols = {f"{op}s/s": [r["ok_per_sec"] for r in runs],
                "p50 ms": [r["latency_us"]["p50"] / 1000 for r in runs],
                "p99 ms": [r["latency_us"]["p99"] / 1000 for r in runs]}
        print(f"{mode:>12} {op:>6} (min / median / max of {rounds}): " + "; ".join(
            f"{k} {min(v):.1f} / {statistics.median(v):.1f} / {max(v):.1f}" for k, v in cols.items()))
PY
echo "done: $(date -u +%FT%TZ)"
