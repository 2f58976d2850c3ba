#!/usr/bin/env bash
# What TLS, authentication and authorization cost: creates/s and gets/s of one build served
# two ways at the same time, measured in alternating runs (A B A B …, the machine's speed
# drifts):
#   A  `crdplane up --insecure-http`: plain HTTP/1.1, no authentication, AlwaysAllow;
#   B  `crdplane up` (HTTPS: TLS 1.3, HTTP/1.1 by ALPN; RBAC) with a bearer token from the
#      gateway's --token-auth-file (passed as CRDPLANE_GATEWAY_TOKEN_AUTH_FILE) whose user
#      `load` is no system:masters member: a ClusterRoleBinding to cluster-admin lets it
#      work, so every request of B is decided by RBAC over the tenant's bindings.
# Each load connection is kept alive (one TLS handshake per worker), as clients do.
#
# Usage: loadtest/tls-cost.sh [BIN_DIR] [SCENARIO...]
#   BIN_DIR   directory with crdplane, crdplane-gateway, … and crdplane-load (default
#             target/release); SCENARIO get | create | … (default: get create).
# Environment: ROUNDS (3), DURATION (10s), CONCURRENCY (64).
# Prints ok/s and the gateway's CPU time per request of every run and, per scenario, the
# medians of B/A over the rounds.
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

# Starts `crdplane up` NAME with the given flags (in this shell, so its pid is kept).
up() {
  local name=$1
  shift
  "$BIN/crdplane" up --data-dir "$W/$name" --durability memory --listen 127.0.0.1:0 "$@" \
    >"$W/$name.log" 2>&1 &
  PIDS+=($!)
}
# The gateway URL `crdplane up` NAME announced, once it is up.
gateway_of() {
  for _ in $(seq 1 600); do
    local g
    g=$(sed -n 's/^  gateway: *//p' "$W/$1.log")
    [ -n "$g" ] && { echo "$g"; return; }
    sleep 0.1
  done
  cat "$W/$1.log" >&2
  echo "crdplane up ($1) did not start" >&2
  exit 1
}
up plain --insecure-http
CRDPLANE_GATEWAY_TOKEN_AUTH_FILE="$W/tokens.csv" up tls
A=$(gateway_of plain)
B=$(gateway_of tls)
# The gateway process of each side, for its CPU time per request (this box runs the load
# tool on the same cores, and its own TLS work weighs on B's throughput).
GW_A=$(pgrep -P "${PIDS[0]}" -f crdplane-gateway)
GW_B=$(pgrep -P "${PIDS[1]}" -f crdplane-gateway)
ticks() { awk '{print $14+$15}' "/proc/$1/stat"; }
LOAD_A=("$BIN/crdplane-load" --target http --server "$A")
LOAD_B=("$BIN/crdplane-load" --target http --server "$B"
  --certificate-authority "$W/tls/pki/ca.crt" --token "$TOKEN")
# B's load user: bound to cluster-admin by the admin (client certificate of the PKI).
python3 - "$B" "$W/tls/pki" <<'PY'
import json, ssl, sys, urllib.request
server, pki = sys.argv[1], sys.argv[2]
ctx = ssl.create_default_context(cafile=f"{pki}/ca.crt")
ctx.load_cert_chain(f"{pki}/admin.crt", f"{pki}/admin.key")
body = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
        "metadata": {"name": "load-cluster-admin"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "load"}]}
req = urllib.request.Request(f"{server}/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
                             data=json.dumps(body).encode(), method="POST",
                             headers={"Content-Type": "application/json"})
urllib.request.urlopen(req, context=ctx).read()
PY
echo "A: $A (plain HTTP, no authentication)   B: $B (TLS + token + RBAC)"
for sc in "${SCENARIOS[@]}"; do
  # Setup (CRD, namespace, working set) once, untimed.
  "${LOAD_A[@]}" "$sc" --concurrency 4 --duration 1s --quiet >/dev/null 2>&1
  "${LOAD_B[@]}" "$sc" --concurrency 4 --duration 1s --quiet >/dev/null 2>&1
  for r in $(seq 1 "$ROUNDS"); do
    for side in A B; do
      if [ $side = A ]; then L=("${LOAD_A[@]}"); GW=$GW_A; else L=("${LOAD_B[@]}"); GW=$GW_B; fi
      t0=$(ticks "$GW")
      "${L[@]}" "$sc" --no-setup --concurrency "$CONCURRENCY" --duration "$DURATION" \
        --quiet --json-out "$W/$sc-$side-$r.json" >/dev/null 2>&1
      echo $(($(ticks "$GW") - t0)) >"$W/$sc-$side-$r.ticks"
    done
  done
  python3 - "$W" "$sc" "$ROUNDS" "$(getconf CLK_TCK)" <<'PY'
import json, statistics, sys
w, sc, rounds, hz = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
ratios, cpu_ratios = [], []
def cpu_us(side, r, d):
    return int(open(f"{w}/{sc}-{side}-{r}.ticks").read()) * 1e6 / hz / d["requests"]
for r in range(1, rounds + 1):
    a = json.load(open(f"{w}/{sc}-A-{r}.json"))
    b = json.load(open(f"{w}/{sc}-B-{r}.json"))
    for side, d in (("A", a), ("B", b)):
        if d["requests"] != d["ok"]:
            sys.exit(f"{sc} {side} round {r}: {d['requests'] - d['ok']} requests failed")
    ratios.append(b["ok_per_sec"] / a["ok_per_sec"])
    ca, cb = cpu_us("A", r, a), cpu_us("B", r, b)
    cpu_ratios.append(cb / ca)
    print(f"{sc} round {r}: A {a['ok_per_sec']:.0f} ok/s (p99 {a['latency_us']['p99']/1000:.2f} ms,"
          f" gateway {ca:.1f} µs CPU/req)  B {b['ok_per_sec']:.0f} ok/s"
          f" (p99 {b['latency_us']['p99']/1000:.2f} ms, gateway {cb:.1f} µs CPU/req)"
          f"  B/A {ratios[-1]:.3f}")
print(f"{sc}: median B/A {statistics.median(ratios):.3f} ok/s,"
      f" {statistics.median(cpu_ratios):.3f} gateway CPU per request, over {rounds} rounds")
PY
done
