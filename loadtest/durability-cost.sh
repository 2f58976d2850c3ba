#!/usr/bin/env bash
# What fsync-before-acknowledge costs: HTTP creates through the whole stack with the default
# durability (`crdplane up`, Redis `appendfsync always`: Redis fsyncs once per event-loop
# iteration for all the writes in it, then replies) against `--durability everysec` (Redis
# `appendfsync everysec`: a machine crash may lose ~2 s of acknowledged writes), side by side:
# both stacks run at once and the load alternates between them, ROUNDS times, so both modes
# see the same machine.
#
# Rounds alternate A B A B (fsync first in odd rounds, everysec first in even ones, so neither
# mode always runs right after the other's load); at the end it prints min / median / max of
# creates/s, p50 and p99 per mode.
#
# Knobs: DURATION (10s per run), CONCURRENCY (64), ROUNDS (3), SKIP_BUILD (0), PROFILE (release;
# debug with SKIP_BUILD=1 uses the binaries of `cargo build --workspace --bins`), BIN_DIR
# (default $CARGO_TARGET_DIR/$PROFILE or target/$PROFILE), FSYNC_LISTEN (127.0.0.1:6445),
# EVERYSEC_LISTEN (127.0.0.1:6446).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
DURATION=${DURATION:-10s}
CONCURRENCY=${CONCURRENCY:-64}
ROUNDS=${ROUNDS:-3}
SKIP_BUILD=${SKIP_BUILD:-0}
FSYNC_LISTEN=${FSYNC_LISTEN:-127.0.0.1:6445}
EVERYSEC_LISTEN=${EVERYSEC_LISTEN:-127.0.0.1:6446}
PROFILE=${PROFILE:-release}
BIN=${BIN_DIR:-${CARGO_TARGET_DIR:-$ROOT/target}/$PROFILE}
WORK=$(mktemp -d /tmp/crdplane-durability.XXXXXX)
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
for mode in fsync everysec; do
  listen=FSYNC_LISTEN
  [[ $mode == everysec ]] && listen=EVERYSEC_LISTEN
  "$BIN/crdplane" up --insecure-http --data-dir "$WORK/$mode" --listen "${!listen}" --durability "$mode" \
    >"$WORK/$mode.log" 2>&1 &
  PIDS+=($!)
done
for mode in fsync everysec; do
  listen=FSYNC_LISTEN
  [[ $mode == everysec ]] && listen=EVERYSEC_LISTEN
  for _ in $(seq 1 300); do
    curl -fs "http://${!listen}/readyz" >/dev/null 2>&1 && break
    sleep 0.1
  done
done
echo "machine: $(nproc) CPUs; $(redis-server --version | cut -d' ' -f1-3); binaries $BIN; $(date -u +%FT%TZ)"
for round in $(seq 1 "$ROUNDS"); do
  order="fsync everysec"
  ((round % 2 == 0)) && order="everysec fsync"
  for mode in $order; do
    listen=FSYNC_LISTEN
    [[ $mode == everysec ]] && listen=EVERYSEC_LISTEN
    "$BIN/crdplane-load" create --target http --server "http://${!listen}" \
      --concurrency "$CONCURRENCY" --duration "$DURATION" --quiet \
      --json-out "$WORK/$mode-$round.json" >/dev/null
    python3 - "$WORK/$mode-$round.json" "$round" "$mode" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
l = r["latency_us"]
print(f"round {sys.argv[2]} {sys.argv[3]:>8}: {r['ok_per_sec']:8.0f} creates/s, "
      f"p50 {l['p50'] / 1000:.1f} ms, p99 {l['p99'] / 1000:.1f} ms, errors {r['errors']}")
PY
  done
done
python3 - "$WORK" "$ROUNDS" <<'PY'
import json, statistics, sys
work, rounds = sys.argv[1], int(sys.argv[2])
for mode in ("fsync", "everysec"):
    runs = [json.load(open(f"{work}/{mode}-{r}.json")) for r in range(1, rounds + 1)]
    cols = {"creates/s": [r["ok_per_sec"] for r in runs],
            "p50 ms": [r["latency_us"]["p50"] / 1000 for r in runs],
            "p99 ms": [r["latency_us"]["p99"] / 1000 for r in runs]}
    print(f"{mode:>8} (min / median / max of {rounds}): " + "; ".join(
        f"{k} {min(v):.1f} / {statistics.median(v):.1f} / {max(v):.1f}" for k, v in cols.items()))
PY
echo "done: $(date -u +%FT%TZ)"
