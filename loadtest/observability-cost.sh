#!/usr/bin/env bash
# What traces and metrics cost: CPU per request of each process with both on against the
# same build with both off, pairs alternating in the same minutes (the VM drifts).
#
# Usage: loadtest/observability-cost.sh [BIN_DIR] [SCENARIO] [PAIRS]
#   BIN_DIR  release binaries (default target/release); SCENARIO get (default) | create;
#   PAIRS    how many off/on pairs (default 3; the order flips every pair).
# Environment: DURATION (8s), passed to loadtest/cpu-per-request.sh with PORT.
#
# "on":  the defaults (every metric recorded) and trace export to `crdplane-load otlp-sink`
#        (OTEL_EXPORTER_OTLP_ENDPOINT), default sampling (parentbased_traceidratio 0.01).
# "off": no OTEL_* variable, the gateway's five per-request metrics disabled
#        (--disabled-metrics, through CRDPLANE_GATEWAY_DISABLED_METRICS) and the services'
#        per-call ones too (gRPC handling, Redis round trips, batch sizes: their
#        --disabled-metrics, through CRDPLANE_DISABLED_METRICS).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BIN=${1:-$ROOT/target/release}
SC=${2:-get}
PAIRS=${3:-3}
export DURATION=${DURATION:-8s}
W=$(mktemp -d /tmp/crdplane-obs.XXXXXX)
"$BIN/crdplane-load" otlp-sink --listen 127.0.0.1:0 >"$W/sink.log" 2>&1 &
SP=$!
trap 'kill $SP 2>/dev/null; wait $SP 2>/dev/null; rm -rf "$W"' EXIT
for _ in $(seq 1 100); do
  grep -q "listening on" "$W/sink.log" && break
  sleep 0.05
done
SINK=$(sed -n 's/^listening on //p' "$W/sink.log")
OFF_METRICS=apiserver_request_total,apiserver_request_duration_seconds,apiserver_current_inflight_requests,crdplane_tenant_requests_total,crdplane_tenant_request_duration_seconds_total
OFF_SERVICE_METRICS=grpc_server_handled_total,grpc_server_handling_seconds,crdplane_redis_command_duration_seconds,crdplane_redis_errors_total,crdplane_storage_batch_size
run() { # $1 = on|off, $2 = output file
  if [ "$1" = on ]; then
    env OTEL_EXPORTER_OTLP_ENDPOINT="$SINK" \
      "$ROOT/loadtest/cpu-per-request.sh" "$BIN" "$SC" >"$2"
  else
    env CRDPLANE_GATEWAY_DISABLED_METRICS="$OFF_METRICS" \
      CRDPLANE_DISABLED_METRICS="$OFF_SERVICE_METRICS" \
      "$ROOT/loadtest/cpu-per-request.sh" "$BIN" "$SC" >"$2"
  fi
}
for i in $(seq 1 "$PAIRS"); do
  if [ $((i % 2)) = 1 ]; then
    run off "$W/off-$i"; run on "$W/on-$i"
  else
    run on "$W/on-$i"; run off "$W/off-$i"
  fi
done
python3 - "$W" "$PAIRS" "$SC" <<'PY'
import re, sys
w, pairs, sc = sys.argv[1], int(sys.argv[2]), sys.argv[3]
def read(path):
    text = open(path).read()
    ok = float(re.search(r"([\d.]+) ok/s", text).group(1))
    cpu = {m.group(1): float(m.group(2))
           for m in re.finditer(r"^\s+(\S+)\s+([\d.]+) µs CPU per request", text, re.M)}
    return ok, cpu
procs = ["crdplane-gatewa", "crdplane-storag", "crdplane-valida", "crdplane-regist"]
print(f"{sc}: {pairs} pairs, gateway µs CPU/request off → on (on/off); stack = the four services")
for i in range(1, pairs + 1):
    ok0, c0 = read(f"{w}/off-{i}")
    ok1, c1 = read(f"{w}/on-{i}")
    g0, g1 = c0.get(procs[0], 0), c1.get(procs[0], 0)
    s0 = sum(c0.get(p, 0) for p in procs)
    s1 = sum(c1.get(p, 0) for p in procs)
    print(f"  pair {i}: gateway {g0:.1f} → {g1:.1f} ({g1 / g0:.3f}), "
          f"stack {s0:.1f} → {s1:.1f} ({s1 / s0:.3f}), ok/s {ok1 / ok0:.3f}")
PY
echo "sink: $(tail -1 "$W/sink.log")"
