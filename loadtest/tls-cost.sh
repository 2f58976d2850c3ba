#!/usr/bin/env bash
# What TLS and authentication cost: creates/s and gets/s of one build served two ways at the
# same time, measured in alternating runs (A B A B …, the machine's speed drifts):
#   A  `crdplane up --insecure-http`: plain HTTP/1.1, no authentication;
#   B  `crdplane up` (HTTPS: TLS 1.3, HTTP/1.1 by ALPN) with a bearer token from the
#      gateway's --token-auth-file (passed as CRDPLANE_GATEWAY_TOKEN_AUTH_FILE).
# Each load connection is kept alive (one TLS handshake per worker), as clients do.
#
# Usage: loadtest/tls-cost.sh [BIN_DIR] [SCENARIO...]
#   BIN_DIR   directory with crdplane, crdplane-gateway, … and crdplane-load (default
#             target/release); SCENARIO get | create | … (default: get create).
# Environment: ROUNDS (3), DURATION (10s), CONCURRENCY (64).
# Prints ok/s of every run and, per scenario, the median of B/A over the rounds.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BIN=${1:-$ROOT/target/release}
shift $(($# > 0 ? 1 : 0))
SCENARIOS=("$@")
[ ${#SCENARIOS[@]} -eq 0 ] && SCENARIOS=(get create)
ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-10s}
CONCURRENCY=${CONCURRENCY:-64}
W=$(mktemp -d /tmp/crdplane-tls.XXXXXX)
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$W"
}
trap cleanup EXIT
TOKEN=load-$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')
printf '%s,load,1000,"load"\n' "$TOKEN" >"$W/tokens.csv"

# Starts `crdplane up` with the given flags; prints the gateway URL it announced.
up() {
  local name=$1
  shift
  "$BIN/crdplane" up --data-dir "$W/$name" --durability memory --listen 127.0.0.1:0 "$@" \
    >"$W/$name.log" 2>&1 &
  PIDS+=($!)
  for _ in $(seq 1 600); do
    local g
    g=$(sed -n 's/^  gateway: *//p' "$W/$name.log")
    [ -n "$g" ] && { echo "$g"; return; }
    kill -0 "${PIDS[-1]}" 2>/dev/null || { cat "$W/$name.log" >&2; exit 1; }
    sleep 0.1
  done
  echo "crdplane up ($name) did not start" >&2
  exit 1
}
A=$(up plain --insecure-http)
B=$(CRDPLANE_GATEWAY_TOKEN_AUTH_FILE="$W/tokens.csv" up tls)
LOAD_A=("$BIN/crdplane-load" --target http --server "$A")
LOAD_B=("$BIN/crdplane-load" --target http --server "$B"
  --certificate-authority "$W/tls/pki/ca.crt" --token "$TOKEN")
echo "A: $A (plain HTTP, no authentication)   B: $B (TLS + token)"
for sc in "${SCENARIOS[@]}"; do
  # Setup (CRD, namespace, working set) once, untimed.
  "${LOAD_A[@]}" "$sc" --concurrency 4 --duration 1s --quiet >/dev/null
  "${LOAD_B[@]}" "$sc" --concurrency 4 --duration 1s --quiet >/dev/null
  for r in $(seq 1 "$ROUNDS"); do
    for side in A B; do
      if [ $side = A ]; then L=("${LOAD_A[@]}"); else L=("${LOAD_B[@]}"); fi
      "${L[@]}" "$sc" --no-setup --concurrency "$CONCURRENCY" --duration "$DURATION" \
        --quiet --json-out "$W/$sc-$side-$r.json" >/dev/null
    done
  done
  python3 - "$W" "$sc" "$ROUNDS" <<'PY'
import json, statistics, sys
w, sc, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3])
ratios = []
for r in range(1, rounds + 1):
    a = json.load(open(f"{w}/{sc}-A-{r}.json"))
    b = json.load(open(f"{w}/{sc}-B-{r}.json"))
    for side, d in (("A", a), ("B", b)):
        if d["requests"] != d["ok"]:
            sys.exit(f"{sc} {side} round {r}: {d['requests'] - d['ok']} requests failed")
    ratios.append(b["ok_per_sec"] / a["ok_per_sec"])
    print(f"{sc} round {r}: A {a['ok_per_sec']:.0f} ok/s (p99 {a['latency_us']['p99']/1000:.2f} ms)"
          f"  B {b['ok_per_sec']:.0f} ok/s (p99 {b['latency_us']['p99']/1000:.2f} ms)"
          f"  B/A {ratios[-1]:.3f}")
print(f"{sc}: median B/A {statistics.median(ratios):.3f} over {rounds} rounds")
PY
done
