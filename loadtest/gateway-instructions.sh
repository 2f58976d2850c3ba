#!/usr/bin/env bash
# What traces and metrics add to a GET in instructions, counted by callgrind: repeatable on a
# VM whose speed drifts (CPU-time pairs, loadtest/observability-cost.sh, scatter by ±15 %
# here). The gateway runs under `valgrind --tool=callgrind` in a `crdplane up` stack; after
# a warm-up the counters are zeroed, GETs run for DURATION, and the counts are dumped. Once
# with traces and metrics off, once on (the same settings as observability-cost.sh).
#
# Usage: loadtest/gateway-instructions.sh [BIN_DIR] [DURATION]   (release binaries, 20s)
# Environment: KEEP=DIR keeps the callgrind output and its inclusive annotation;
# CONCURRENCY load-tool workers (16; with 1 no request shares a gRPC call, so off and on
# coalesce alike).
# Prints, per answered GET: the instructions of the gateway's connection tasks (parsing,
# the edge stack, the handler, the response: everything a request runs through, without
# the process's timers and idle work, which depend on throughput) and of the edge layers'
# calls (`server::answer`), off and on, with their ratio. Needs valgrind. CACHE_SIM=1 also
# simulates the caches and branch predictors and prints the whole gateway's estimated cycles
# per GET, off and on (see instructions-per-request.sh: instruction counts alone miss what
# more code or memory costs in cache misses).
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
  local sim=""
  [ "${CACHE_SIM:-0}" = 1 ] && sim="--cache-sim=yes --branch-sim=yes"
  printf '#!/bin/sh\nexec valgrind --tool=callgrind %s --callgrind-out-file=%s/cg.%s.%%p %s/crdplane-gateway "$@"\n' \
    "$sim" "$W" "$mode" "$REL" >"$b/crdplane-gateway"
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
  local load=("$REL/crdplane-load" get --target http --server "http://127.0.0.1:$port" --concurrency "${CONCURRENCY:-16}" --quiet)
  "${load[@]}" --duration 5s >/dev/null
  local gw
  gw=$(pgrep -f "valgrind.*$REL/crdplane-gateway" | head -1)
  callgrind_control -z "$gw" >/dev/null
  "${load[@]}" --duration "$DURATION" --json-out "$W/out-$mode.json" >/dev/null
  callgrind_control -d "$gw" >/dev/null
  kill -TERM $lp; wait $lp 2>/dev/null || true
  [ -n "$sink" ] && kill "$sink"
  callgrind_annotate --inclusive=yes --threshold=100 "$W"/cg."$mode".*.1 >"$W/ann-$mode.txt" 2>/dev/null
  [ -z "${KEEP:-}" ] || cp "$W"/cg."$mode".*.1 "$W/ann-$mode.txt" "$KEEP/"
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
        # The edge: the outermost layers' `call` (in `answer` since each connection calls
        # its edge in place) and their future (in its closure), as inlined from panic.rs.
        if re.search(r"filters/panic\.rs:crdplane_gateway::server::answer(::\{\{closure\}\})?$", line.split(" [")[0].rstrip()):
            edge += v
    return n, conn / n, edge / n
(n0, c0, e0), (n1, c1, e1) = figures("off"), figures("on")
print(f"GETs answered: off {n0}, on {n1}")
print(f"instructions per GET, connection tasks: off {c0:,.0f}, on {c1:,.0f} ({c1 / c0:.3f})")
print(f"instructions per GET, edge layers' calls: off {e0:,.0f}, on {e1:,.0f} ({e1 / e0:.3f})")
def cycles(mode, n):
    text = open(f"{w}/ann-{mode}.txt").read()
    events = re.search(r"^Events recorded:\s+(.*)$", text, re.M).group(1).split()
    if "I1mr" not in events:
        return None
    line = next(l for l in text.splitlines() if l.rstrip().endswith("PROGRAM TOTALS"))
    t = dict(zip(events, (int(v.replace(",", "")) for v in re.findall(r"([\d,]+) \(", line))))
    l1 = t["I1mr"] + t["D1mr"] + t["D1mw"]
    ll = t["ILmr"] + t["DLmr"] + t["DLmw"]
    return (t["Ir"] + 10 * (l1 + t["Bcm"] + t["Bim"]) + 100 * ll) / n
k0, k1 = cycles("off", n0), cycles("on", n1)
if k0 is not None:
    print(f"estimated cycles per GET, whole gateway: off {k0:,.0f}, on {k1:,.0f} ({k1 / k0:.3f})")
PY
