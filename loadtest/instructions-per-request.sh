#!/usr/bin/env bash
# Instructions the gateway executes per request, counted by valgrind's callgrind: the
# measure to compare two builds on a machine whose speed drifts. Unlike CPU time
# (`cpu-per-request.sh`), an instruction count does not depend on how fast the core is or on
# what else runs on the box, so two builds can be compared without alternating runs. It
# counts user-space instructions only (not the kernel's work for the process, not cache
# misses); `cpu-per-request.sh` remains the end-to-end figure.
#
# Usage: loadtest/instructions-per-request.sh [BIN_DIR] [SCENARIO] [REQUESTS] [CONCURRENCY]
#   BIN_DIR      directory with crdplane, crdplane-gateway and crdplane-load (default
#                target/release); SCENARIO get (default) | create | update | list | apply;
#   REQUESTS     measured requests (default 2000); CONCURRENCY load-tool workers (default 1).
# Environment: PORT (17643; the profiled gateway listens on PORT+1), KEEP=DIR keeps the
# callgrind output (annotate it with callgrind_annotate). CACHE_SIM=1 also simulates the
# caches and branch predictors (valgrind's model of this machine's L1 and last-level caches)
# and prints the misses per request and an estimated cycle count (kcachegrind's: Ir + 10 per
# L1 miss or mispredicted branch + 100 per last-level miss). Instructions alone understate
# a build whose request path touches more code or memory: each instruction-cache miss costs
# about ten cycles that no instruction count shows.
#
# It starts `crdplane up` on a temporary data dir, then a second crdplane-gateway under
# callgrind with the same flags on another port, warms it up with 200 requests, zeroes the
# counters, runs REQUESTS requests of the scenario through it, dumps, and prints the
# gateway's instructions per request. With CONCURRENCY 1 no request shares a gRPC call with
# another (no coalescing); with 64, the slow profiled gateway coalesces nearly every call,
# so the two bracket what a real run sees.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BIN=${1:-$ROOT/target/release}
SC=${2:-get}
N=${3:-2000}
C=${4:-1}
PORT=${PORT:-17643}
P2=$((PORT + 1))
command -v valgrind >/dev/null || { echo "valgrind is needed (apt-get install valgrind)" >&2; exit 1; }
W=$(mktemp -d /tmp/crdplane-instr.XXXXXX)
OUT=${KEEP:-$W/cg}
mkdir -p "$OUT"
# Builds from before TLS (e.g. `7f689ce`, the last one before the machinery) serve plain
# HTTP without the flag and do not know it.
PLAIN=()
"$BIN/crdplane" up --help 2>&1 | grep -q -- --insecure-http && PLAIN=(--insecure-http)
start_stack() { exec "$BIN/crdplane" up "${PLAIN[@]}" --data-dir "$W/data" --listen "127.0.0.1:$PORT"; }
start_stack >"$W/launcher.log" 2>&1 &
LP=$!
VG=
cleanup() {
  if [ -n "$VG" ]; then kill -TERM "$VG" 2>/dev/null || true; wait "$VG" 2>/dev/null || true; fi
  kill -TERM "$LP" 2>/dev/null || true
  wait "$LP" 2>/dev/null || true
  rm -rf "$W"
}
trap cleanup EXIT
ready() {
  for _ in $(seq 1 600); do
    curl -sf "http://127.0.0.1:$1/readyz" >/dev/null 2>&1 && return 0
    sleep 0.2
  done
  echo "no /readyz on port $1" >&2
  return 1
}
ready "$PORT"
GW=$(pgrep -P "$LP" -f crdplane-gateway)
# The profiled gateway gets the launcher's flags for its gateway, with its own port.
mapfile -d '' ARGS <"/proc/$GW/cmdline"
ARGS=("${ARGS[@]:1}")
INSECURE=
for i in "${!ARGS[@]}"; do
  [ "${ARGS[$i]}" = "--listen" ] && ARGS[$((i + 1))]="127.0.0.1:$P2"
  [ "${ARGS[$i]}" = "--insecure-http" ] && INSECURE=1
done
# Plain HTTP as the launcher's gateway (the load tool speaks plain HTTP; the gateway refuses
# to start without TLS files or --insecure-http).
[ -n "$INSECURE" ] || [ ${#PLAIN[@]} -eq 0 ] || ARGS+=(--insecure-http)
load() {
  "$BIN/crdplane-load" "$SC" --target http --server "http://127.0.0.1:$1" --objects 50 \
    --quiet "${@:2}" >/dev/null 2>>"$W/load.err" || { cat "$W/load.err" >&2; return 1; }
}
load "$PORT" --concurrency 1 --requests 5 # creates the CRD, namespace and working set
SIM=()
[ "${CACHE_SIM:-0}" = 1 ] && SIM=(--cache-sim=yes --branch-sim=yes)
valgrind --tool=callgrind "${SIM[@]}" --callgrind-out-file="$OUT/callgrind.%p" \
  "$BIN/crdplane-gateway" "${ARGS[@]}" >"$W/valgrind.log" 2>&1 &
VG=$!
ready "$P2"
load "$P2" --concurrency 1 --requests 200
callgrind_control -z "$VG" >/dev/null 2>&1
load "$P2" --concurrency "$C" --requests "$N" --json-out "$W/load.json"
callgrind_control -d "$VG" >/dev/null 2>&1
python3 - "$W/load.json" "$SC" "$C" "$(ls -t "$OUT"/callgrind.*.1 | head -1)" <<'PY'
import json, re, subprocess, sys
d = json.load(open(sys.argv[1]))
n, errors = d["requests"], d.get("errors") or {}
out = subprocess.run(["callgrind_annotate", sys.argv[4]], capture_output=True, text=True).stdout
events = re.search(r"^Events recorded:\s+(.*)$", out, re.M).group(1).split()
line = next(l for l in out.splitlines() if l.rstrip().endswith("PROGRAM TOTALS"))
totals = dict(zip(events, (int(v.replace(",", "")) for v in re.findall(r"([\d,]+) \(", line))))
print(f"{sys.argv[2]} at concurrency {sys.argv[3]}: {n} requests ({sum(errors.values()) if isinstance(errors, dict) else errors} errors), "
      f"gateway {totals['Ir'] / n:,.0f} instructions per request")
if "I1mr" in totals:
    t = {k: v / n for k, v in totals.items()}
    l1 = t["I1mr"] + t["D1mr"] + t["D1mw"]
    ll = t["ILmr"] + t["DLmr"] + t["DLmw"]
    br = t["Bcm"] + t["Bim"]
    print(f"  per request: I1 misses {t['I1mr']:,.0f}, D1 misses {t['D1mr'] + t['D1mw']:,.0f}, "
          f"LL misses {ll:,.1f}, mispredicted branches {br:,.0f}; "
          f"estimated cycles {t['Ir'] + 10 * (l1 + br) + 100 * ll:,.0f}")
PY
