#!/usr/bin/env bash
# CPU time per request of each process of the stack (and of the load tool) for one HTTP
# scenario: the measure to compare builds on a machine whose speed drifts. It depends less on
# how much CPU the other tenants of the box leave us than throughput does, but not at all is
# too much: a slower core also takes more CPU time per request (seen here: the same binaries
# +50 % within 40 minutes). Compare builds side by side, alternating runs in the same minutes.
#
# Usage: loadtest/cpu-per-request.sh [BIN_DIR] [SCENARIO] [crdplane-load args...]
#   BIN_DIR   directory with crdplane, crdplane-gateway, … and crdplane-load (default
#             target/release); SCENARIO get (default) | create | update | list | apply | mixed.
# Environment: PORT (17443), DURATION (10s), CONCURRENCY (64), UP_ARGS (more `crdplane up`
# flags, e.g. "--redis-cluster 3": processes of one name, like the cluster's redis-servers,
# are summed and counted).
# It starts `crdplane up` on a temporary data dir, warms up for 2 s, samples utime+stime of
# every child of the launcher from /proc/<pid>/stat before and after the timed run, and prints
# ok/s, p50/p99 and µs of CPU per request for each process.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BIN=${1:-$ROOT/target/release}
SC=${2:-get}
shift $(($# > 2 ? 2 : $#))
PORT=${PORT:-17443}
DURATION=${DURATION:-10s}
CONCURRENCY=${CONCURRENCY:-64}
W=$(mktemp -d /tmp/crdplane-cpu.XXXXXX)
# Builds from before TLS (e.g. `7f689ce`, the last one before the machinery) serve plain
# HTTP without the flag and do not know it.
PLAIN=()
"$BIN/crdplane" up --help 2>&1 | grep -q -- --insecure-http && PLAIN=(--insecure-http)
# shellcheck source=loadtest/up.sh
. "$ROOT/loadtest/up.sh"
# shellcheck disable=SC2086 # UP_ARGS is a list of flags
up_stack "$BIN" "$PORT" "$W" "${PLAIN[@]}" ${UP_ARGS:-}
LOAD=("$BIN/crdplane-load" "$SC" --target http --server "http://127.0.0.1:$PORT"
  --concurrency "$CONCURRENCY" --quiet "$@")
"${LOAD[@]}" --duration 2s >/dev/null
ticks() {
  for p in $(pgrep -P $LP); do
    echo "$(cat /proc/"$p"/comm) $p $(awk '{print $14+$15}' /proc/"$p"/stat)"
  done | sort
}
ticks >"$W/t0"
/usr/bin/time -f "%U %S" -o "$W/loadcpu" "${LOAD[@]}" --duration "$DURATION" --json-out "$W/out.json" >/dev/null
ticks >"$W/t1"
HZ=$(getconf CLK_TCK)
python3 - "$W" "$HZ" <<'PY'
import json, sys
w, hz = sys.argv[1], int(sys.argv[2])
d = json.load(open(f"{w}/out.json"))
n = d["requests"]
print(f"{d['scenario']}: {n} requests, {d['ok_per_sec']} ok/s, "
      f"p50 {d['latency_us']['p50']/1000:.2f} ms, p99 {d['latency_us']['p99']/1000:.2f} ms")
t0 = {pid: int(t) for _, pid, t in (l.split() for l in open(f"{w}/t0"))}
by_name = {}
for line in open(f"{w}/t1"):
    name, pid, t = line.split()
    if pid in t0:
        total, count = by_name.get(name, (0, 0))
        by_name[name] = (total + int(t) - t0[pid], count + 1)
for name, (ticks, count) in sorted(by_name.items()):
    each = f" ({count} processes)" if count > 1 else ""
    print(f"  {name:<16} {ticks * 1e6 / hz / n:8.1f} µs CPU per request{each}")
    if count > 1:
        # Each process of the group, busiest first (a cluster's masters, then replicas).
        per = sorted(((int(t) - t0[pid]) for nm, pid, t in (l.split() for l in open(f"{w}/t1"))
                      if nm == name and pid in t0), reverse=True)
        print(" " * 19 + " / ".join(f"{t * 1e6 / hz / n:.1f}" for t in per) + " µs each")
u, s = open(f"{w}/loadcpu").read().split()[-2:]
print(f"  {'crdplane-load':<16} {(float(u) + float(s)) * 1e6 / n:8.1f} µs CPU per request")
PY
