#!/usr/bin/env bash
# What traces and metrics add to a GET in instructions, counted by callgrind: repeatable on a
# VM whose speed drifts (CPU-time pairs, loadtest/observability-cost.sh, scatter by ±15 %
# here). The gateway runs under `valgrind --tool=callgrind` in a `crdplane up` stack; after
# a warm-up the counters are zeroed, GETs run for DURATION, and the counts are dumped. Once
# with traces and metrics off, once on (the same settings as observability-cost.sh).
#
# Usage: loadtest/gateway-instructions.sh [BIN_DIR] [DURATION]   (release binaries, 20s)
# Prints, per answered GET: the instructions of the gateway's connection tasks (parsing,
# the edge stack, the handler, the response: everything a request runs through, without
# the process's timers and idle work, which depend on throughput) and of the edge stack
# alone (`server::answer`), off and on, with their ratio. Needs valgrind.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
REL=$(cd "${1:-$ROOT/target/release}" && pwd)
DURATION=${2:-20s}
W=$(mktemp -d /tmp/crdplane-instr.XXXXXX)
trap 'rm -rf "$W"' EXIT
OFF_METRICS=apiserver_request_total,apiserver_request_duration_seconds,apiserver_current_inflight_requests,crdplane_tenant_requests_total,crdplane_tenant_request_duration_seconds_total
OFF_SERVICE_METRICS=grpc_server_handled_total,grpc_server_handling_seconds,crdplane_redis_command_duration_seconds,crdplane_redis_errors_total,crdplane_storage_batch_size
run() { # $1 = on|off
  local mode=$1 b="$W/bin-$1" port=17556
  mkdir -p "$b"
  # The launcher starts the binaries beside it: a copy of it, the services as they are,
  # and a gateway that is valgrind running the real one.
  cp "$REL/crdplane" "$b/"
  for x in crdplane-storage crdplane-validation crdplane-registry; do ln -s "$REL/$x" "$b/$x"; done
  printf '#!/bin/sh\nexec valgrind --tool=callgrind --callgrind-out-file=%s/cg.%s.%%p %s/crdplane-gateway "$@"\n' \
    "$W" "$mode" "$REL" >"$b/crdplane-gateway"
  chmod +x "$b/crdplane-gateway"
  local sink=""
  if [ "$mode" = on ]; then
    "$REL/crdplane-load" otlp-sink --listen 127.0.0.1:0 >"$W/sink.log" 2>&1 &
    sink=$!
    for _ in $(seq 1 100); do grep -q "listening on" "$W/sink.log" && break; sleep 0.05; done
    export OTEL_EXPORTER_OTLP_ENDPOINT
    OTEL_EXPORTER_OTLP_ENDPOINT=$(sed -n 's/^listening on //p' "$W/sink.log")
    unset CRDPLANE_GATEWAY_DISABLED_METRICS CRDPLANE_DISABLED_METRICS
  else
    unset OTEL_EXPORTER_OTLP_ENDPOINT
    export CRDPLANE_GATEWAY_DISABLED_METRICS=$OFF_METRICS CRDPLANE_DISABLED_METRICS=$OFF_SERVICE_METRICS
  fi
  "$b/crdplane" up --insecure-http --data-dir "$W/data-$mode" --listen "127.0.0.1:$port" >"$W/up-$mode.log" 2>&1 &
  local lp=$!
  for _ in $(seq 1 600); do curl -sf "http://127.0.0.1:$port/readyz" >/dev/null 2>&1 && break; sleep 0.1; done
  local load=("$REL/crdplane-load" get --target http --server "http://127.0.0.1:$port" --concurrency 16 --quiet)
  "${load[@]}" --duration 5s >/dev/null
  local gw
  gw=$(pgrep -f "valgrind.*$REL/crdplane-gateway" | head -1)
  callgrind_control -z "$gw" >/dev/null
  "${load[@]}" --duration "$DURATION" --json-out "$W/out-$mode.json" >/dev/null
  callgrind_control -d "$gw" >/dev/null
  kill -TERM $lp; wait $lp 2>/dev/null || true
  [ -n "$sink" ] && kill "$sink"
  callgrind_annotate --inclusive=yes --threshold=100 "$W"/cg."$mode".*.1 >"$W/ann-$mode.txt" 2>/dev/null
}
run off
run on
python3 - "$W" <<'PY'
import json, re, sys
w = sys.argv[1]
def figures(mode):
    n = json.load(open(f"{w}/out-{mode}.json"))["requests"]
    conn = edge = 0
    for line in open(f"{w}/ann-{mode}.txt"):
        m = re.match(r"\s*([\d,]+) \(", line)
        if not m or "=>" in line:
            continue
        v = int(m.group(1).replace(",", ""))
        if "future.rs:crdplane_gateway::server::serve_socket::{{closure}}" in line:
            conn = max(conn, v)
        if "crdplane_gateway::server::answer::{{closure}}" in line and "panic.rs" in line:
            edge = max(edge, v)
    return n, conn / n, edge / n
(n0, c0, e0), (n1, c1, e1) = figures("off"), figures("on")
print(f"GETs answered: off {n0}, on {n1}")
print(f"instructions per GET, connection tasks: off {c0:,.0f}, on {c1:,.0f} ({c1 / c0:.3f})")
print(f"instructions per GET, edge stack:       off {e0:,.0f}, on {e1:,.0f} ({e1 / e0:.3f})")
PY
