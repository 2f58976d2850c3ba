#!/usr/bin/env bash
# CPU time per delivered watch event, for the capacity model: the gateway's and storage's
# CPU during `crdplane-load watch-fanout` (N watchers of one resource, W writes/s, every
# watcher gets every write), measured as a difference so that setting the watchers up does
# not count: one run writes for DURATION, another for 2 × DURATION; the extra CPU of the
# longer run divided by its extra deliveries (DURATION × W × N) is the cost of one event
# delivered to one watcher (the write itself included, shared by its N deliveries). What the
# processes spend idle over DURATION (background work: slot and lease refreshes, queues) is
# measured first and taken off.
#
# Usage: loadtest/watch-cost.sh [BIN_DIR]
#   BIN_DIR   directory with crdplane, crdplane-gateway, … and crdplane-load (default
#             target/release).
# Environment: PORT (17453), WATCHERS (1000), RATE (200), DURATION (10s), ROUNDS (2),
# H2 (0: one HTTP/1.1 connection per watcher; N: N watches per HTTP/2 connection).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BIN=${1:-$ROOT/target/release}
PORT=${PORT:-17453}
WATCHERS=${WATCHERS:-1000}
RATE=${RATE:-200}
DURATION=${DURATION:-10s}
ROUNDS=${ROUNDS:-2}
H2=${H2:-0}
W=$(mktemp -d /tmp/crdplane-watchcost.XXXXXX)
# shellcheck source=loadtest/up.sh
. "$ROOT/loadtest/up.sh"
up_stack "$BIN" "$PORT" "$W" --insecure-http
ticks() {
  for p in $(pgrep -P $LP); do
    echo "$(cat /proc/"$p"/comm) $(awk '{print $14+$15}' /proc/"$p"/stat)"
  done | sort
}
# One run writing for $1; prints "<gateway ticks> <storage ticks> <deliveries>".
run() {
  ticks >"$W/t0"
  "$BIN/crdplane-load" watch-fanout --server "http://127.0.0.1:$PORT" \
    --watchers "$WATCHERS" --rate "$RATE" --duration "$1" --http2-streams "$H2" \
    >"$W/out.txt" 2>"$W/run.log"
  ticks >"$W/t1"
  python3 - "$W" <<'PY'
import re, sys
w = sys.argv[1]
t0 = dict(l.split() for l in open(f"{w}/t0"))
t1 = dict(l.split() for l in open(f"{w}/t1"))
out = open(f"{w}/out.txt").read()
m = re.search(r"deliveries (\d+) \(.*missed (\d+)", out)
if not m:
    sys.exit(f"crdplane-load said: {out}")
dt = lambda n: int(t1[n]) - int(t0[n])
print(dt("crdplane-gatewa"), dt("crdplane-storag"), m.group(1), m.group(2))
PY
}
SECS=${DURATION%s}
HZ=$(getconf CLK_TCK)
# Idle CPU over DURATION (after a first run has created the CRD and the namespace).
run "${SECS}s" >/dev/null
ticks >"$W/i0"
sleep "$SECS"
ticks >"$W/i1"
read -r IG IS < <(python3 - "$W" <<'PY'
import sys
w = sys.argv[1]
i0 = dict(l.split() for l in open(f"{w}/i0"))
i1 = dict(l.split() for l in open(f"{w}/i1"))
print(*(int(i1[n]) - int(i0[n]) for n in ("crdplane-gatewa", "crdplane-storag")))
PY
)
echo "watch-fanout: $WATCHERS watchers, $RATE writes/s, runs of ${SECS}s and $((2 * SECS))s (H2=$H2)"
for r in $(seq 1 "$ROUNDS"); do
  read -r g1 s1 n1 m1 < <(run "${SECS}s")
  read -r g2 s2 n2 m2 < <(run "$((2 * SECS))s")
  python3 - "$g1" "$s1" "$n1" "$m1" "$g2" "$s2" "$n2" "$m2" "$HZ" "$r" "$IG" "$IS" <<'PY'
import sys
g1, s1, n1, m1, g2, s2, n2, m2, hz, r, ig, is_ = map(int, sys.argv[1:])
dn = n2 - n1
if dn <= 0:
    sys.exit(f"round {r}: no extra deliveries ({n1} → {n2})")
us = lambda t: t * 1e6 / hz / dn
print(f"round {r}: {dn} extra deliveries (missed {m1}, {m2}): "
      f"gateway {us(g2 - g1 - ig):.2f} µs, storage {us(s2 - s1 - is_):.3f} µs CPU per delivered event "
      f"(idle over the extra time taken off: gateway {ig * 1e3 / hz:.0f} ms, storage {is_ * 1e3 / hz:.0f} ms)")
PY
done
