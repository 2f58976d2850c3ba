#!/usr/bin/env bash
# Reproducible end-to-end benchmark of crdplane (the figures the README cites).
#
# What it does, in order:
#   1. builds the release binaries (launcher, gateway, services, load tool);
#   2. starts the whole stack with the launcher (`crdplane up`) on a fresh temporary data dir;
#   3. runs crdplane-load over HTTP against the gateway: `create`, then `get` (working set of
#      $OBJECTS objects), $CONCURRENCY workers for $DURATION each;
#   4. (GRPC=1, default) starts a storage and a validation service on their own (storage on a
#      private Redis) and runs the same scenarios over gRPC: storage create/get, validation
#      create (Admit);
#   5. runs `redis-benchmark -t set,get -c 50 -n 200000 -q` against a private redis-server
#      (port $REDIS_PORT, no persistence) for comparison;
#   6. (LISTS=1, default) LIST of 10,000 CronTabs of 1 KiB on the same stack, in a tenant of
#      its own: whole collection in one call, and every page of 500;
#   7. (WATCHES=1, default) each on a fresh stack of its own (memory per watcher is an RSS
#      delta): watch-selective (10,000 watchers, one namespace each, 1,000 writes/s) and
#      watch-fanout (1,000 watchers of one namespace, 200 writes/s) over HTTP/1.1, and
#      watch-selective over HTTP/2 (1,000 watch streams per connection);
#   8. prints every figure and a summary table, and stops everything it started.
#
# Environment knobs: DURABILITY (fsync: the launcher's default; everysec to compare),
# DURATION (10s), CONCURRENCY (64), OBJECTS (1000), LISTEN (127.0.0.1:6443),
# LISTS (1), WATCHES (1), WATCH_LISTEN (127.0.0.1:6444),
# REDIS_PORT (6390), STORAGE_PORT (17001), VALIDATION_PORT (17002), GRPC (1), SKIP_BUILD (0),
# KEEP_WORK (0: the temp dir with logs and JSON reports is removed at exit unless a step failed).
#
# Note: on a small machine the load generator competes with the stack for CPU; the figures
# are for the whole box, client included. Everything listens on loopback only.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
DURATION=${DURATION:-10s}
CONCURRENCY=${CONCURRENCY:-64}
OBJECTS=${OBJECTS:-1000}
LISTEN=${LISTEN:-127.0.0.1:6443}
REDIS_PORT=${REDIS_PORT:-6390}
STORAGE_PORT=${STORAGE_PORT:-17001}
VALIDATION_PORT=${VALIDATION_PORT:-17002}
GRPC=${GRPC:-1}
LISTS=${LISTS:-1}
WATCHES=${WATCHES:-1}
WATCH_LISTEN=${WATCH_LISTEN:-127.0.0.1:6444}
SKIP_BUILD=${SKIP_BUILD:-0}
KEEP_WORK=${KEEP_WORK:-0}
DURABILITY=${DURABILITY:-fsync}
TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/target}
BIN=$TARGET_DIR/release

WORK=$(mktemp -d /tmp/crdplane-bench.XXXXXX)
SUMMARY=$WORK/summary.jsonl
: >"$SUMMARY"
PIDS=()
FAILED=0

log() { printf '\n==> %s\n' "$*" >&2; }

cleanup() {
  local rc=$?
  # Stop in reverse start order; SIGTERM first (the launcher stops its children on it).
  for ((i = ${#PIDS[@]} - 1; i >= 0; i--)); do
    local pid=${PIDS[i]}
    if kill -0 "$pid" 2>/dev/null; then
      kill -TERM "$pid" 2>/dev/null || true
      for _ in $(seq 1 100); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
      done
      kill -KILL "$pid" 2>/dev/null || true
    fi
    wait "$pid" 2>/dev/null || true
  done
  if [[ $KEEP_WORK == 1 || $rc != 0 || $FAILED != 0 ]]; then
    echo "logs and reports kept in $WORK" >&2
  else
    rm -rf "$WORK"
  fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

port_free() { ! (exec 3<>"/dev/tcp/${1%:*}/${1##*:}") 2>/dev/null; }

wait_http_200() { # url timeout_s
  local url=$1 t=$2
  for _ in $(seq 1 $((t * 10))); do
    if [[ $(curl -s -o /dev/null -w '%{http_code}' "$url" || true) == 200 ]]; then return 0; fi
    sleep 0.1
  done
  return 1
}

wait_tcp() { # host:port timeout_s
  for _ in $(seq 1 $(($2 * 10))); do
    if ! port_free "$1"; then return 0; fi
    sleep 0.1
  done
  return 1
}

# run_load <label> <crdplane-load args...>: prints the table, keeps the JSON summary line.
run_load() {
  local label=$1
  shift
  log "crdplane-load $* ($label)"
  local out=$WORK/$label.out
  if "$BIN/crdplane-load" --json-out "$WORK/$label.json" "$@" >"$out"; then
    :
  else
    echo "!! $label failed (exit $?)" >&2
    FAILED=1
  fi
  cat "$out"
  local line
  line=$(tail -n 1 "$out")
  if [[ $line == \{* ]]; then
    printf '%s\t%s\n' "$label" "$line" >>"$SUMMARY"
  fi
}

for p in "$LISTEN" "127.0.0.1:$REDIS_PORT"; do
  port_free "$p" || { echo "port $p is in use; set LISTEN/REDIS_PORT" >&2; exit 1; }
done
if [[ $GRPC == 1 ]]; then
  for p in "127.0.0.1:$STORAGE_PORT" "127.0.0.1:$VALIDATION_PORT"; do
    port_free "$p" || { echo "port $p is in use; set STORAGE_PORT/VALIDATION_PORT or GRPC=0" >&2; exit 1; }
  done
fi

echo "machine: $(nproc) CPUs, $(uname -sr); $(redis-server --version | cut -d' ' -f1-3)" >&2
echo "work dir: $WORK" >&2

if [[ $SKIP_BUILD != 1 ]]; then
  log "building release binaries"
  (cd "$ROOT" && cargo build --release -p crdplane -p crdplane-gateway -p crdplane-storage \
    -p crdplane-validation -p crdplane-registry -p crdplane-load)
fi

# --- 1. the whole stack over HTTP -------------------------------------------------------------
log "starting the stack: crdplane up --insecure-http --data-dir $WORK/data --listen $LISTEN --durability $DURABILITY"
"$BIN/crdplane" up --insecure-http --data-dir "$WORK/data" --listen "$LISTEN" --durability "$DURABILITY" >"$WORK/launcher.log" 2>&1 &
PIDS+=($!)
if ! wait_http_200 "http://$LISTEN/readyz" 90; then
  echo "the stack did not become ready; launcher log:" >&2
  cat "$WORK/launcher.log" >&2
  exit 1
fi

COMMON=(--concurrency "$CONCURRENCY" --duration "$DURATION" --quiet)
run_load http-create create --target http --server "http://$LISTEN" "${COMMON[@]}"
run_load http-get get --target http --server "http://$LISTEN" --objects "$OBJECTS" "${COMMON[@]}"

if [[ $LISTS == 1 ]]; then
  LIST=(list --target http --server "http://$LISTEN" --tenant listbench --objects 10000
    --object-size 1024 --concurrency 1 --quiet)
  run_load list-10k-one-call "${LIST[@]}" --list-limit 0 --requests 30
  run_load list-10k-pages-of-500 "${LIST[@]}" --list-limit 500 --list-all-pages --requests 20
fi

# run_watch <label> <listen> <crdplane-load watch args...>: a fresh stack per call, because
# memory per idle watcher is an RSS delta (allocators keep freed pages for the next run).
run_watch() {
  local label=$1 listen=$2
  shift 2
  port_free "$listen" || { echo "port $listen is in use; set WATCH_LISTEN" >&2; exit 1; }
  log "fresh stack for $label: crdplane up --insecure-http --listen $listen"
  "$BIN/crdplane" up --insecure-http --data-dir "$WORK/$label-data" --listen "$listen" >"$WORK/$label-launcher.log" 2>&1 &
  local wpid=$!
  PIDS+=($wpid)
  wait_http_200 "http://$listen/readyz" 90 || { cat "$WORK/$label-launcher.log" >&2; exit 1; }
  local wpids
  wpids=$(pgrep -P "$wpid" -f 'crdplane-(gateway|storage)' | paste -sd, -)
  log "crdplane-load $* (pids $wpids)"
  if "$BIN/crdplane-load" "$@" --server "http://$listen" --pids "$wpids" >"$WORK/$label.out"; then
    :
  else
    echo "!! $label failed" >&2
    FAILED=1
  fi
  cat "$WORK/$label.out"
  local line
  line=$(tail -n 1 "$WORK/$label.out")
  [[ $line == \{* ]] && printf '%s\t%s\n' "$label" "$line" >>"$WORK/watch-summary.jsonl"
  kill -TERM "$wpid" 2>/dev/null || true
  wait "$wpid" 2>/dev/null || true
}

if [[ $WATCHES == 1 ]]; then
  # HTTP/1.1: one connection per watcher (kubectl, the Python client, kube-rs over http://).
  run_watch watch-selective "$WATCH_LISTEN" watch-selective
  run_watch watch-fanout "$WATCH_LISTEN" watch-fanout
  # HTTP/2: watches multiplexed, 1,000 streams per connection (client-go's transport).
  run_watch watch-selective-http2 "$WATCH_LISTEN" watch-selective --http2-streams 1000
fi

# --- 2. services directly over gRPC -----------------------------------------------------------
if [[ $GRPC == 1 ]]; then
  log "starting storage (private Redis) and validation services"
  mkdir -p "$WORK/redis-storage"
  redis-server --port 0 --unixsocket "$WORK/redis-storage/redis.sock" --unixsocketperm 700 \
    --dir "$WORK/redis-storage" --save '' --appendonly no --daemonize no \
    >"$WORK/redis-storage.log" 2>&1 &
  PIDS+=($!)
  for _ in $(seq 1 100); do [[ -S $WORK/redis-storage/redis.sock ]] && break; sleep 0.1; done
  "$BIN/crdplane-storage" --listen "127.0.0.1:$STORAGE_PORT" \
    --redis-url "redis+unix://$WORK/redis-storage/redis.sock" --durability memory >"$WORK/storage.log" 2>&1 &
  PIDS+=($!)
  "$BIN/crdplane-validation" --listen "127.0.0.1:$VALIDATION_PORT" >"$WORK/validation.log" 2>&1 &
  PIDS+=($!)
  if wait_tcp "127.0.0.1:$STORAGE_PORT" 30 && wait_tcp "127.0.0.1:$VALIDATION_PORT" 30; then
    run_load grpc-storage-create create --target storage --grpc "http://127.0.0.1:$STORAGE_PORT" "${COMMON[@]}"
    run_load grpc-storage-get get --target storage --grpc "http://127.0.0.1:$STORAGE_PORT" --objects "$OBJECTS" "${COMMON[@]}"
    run_load grpc-validation-create create --target validation --grpc "http://127.0.0.1:$VALIDATION_PORT" "${COMMON[@]}"
  else
    echo "!! storage/validation did not start; see $WORK/storage.log, $WORK/validation.log" >&2
    FAILED=1
  fi
fi

# --- 3. Redis baseline ------------------------------------------------------------------------
log "redis-benchmark -t set,get -c 50 -n 200000 -q (private redis-server on port $REDIS_PORT)"
redis-server --port "$REDIS_PORT" --bind 127.0.0.1 --save '' --appendonly no --daemonize no \
  >"$WORK/redis-bench.log" 2>&1 &
PIDS+=($!)
for _ in $(seq 1 100); do redis-cli -p "$REDIS_PORT" ping >/dev/null 2>&1 && break; sleep 0.1; done
redis-benchmark -p "$REDIS_PORT" -t set,get -c 50 -n 200000 -q 2>&1 | tr '\r' '\n' \
  | grep -E '^(SET|GET): [0-9.]+ requests per second' | tee "$WORK/redis-benchmark.raw" \
  | sed -E 's/.*(SET|GET): *([0-9.]+) requests per second, p50=([0-9.]+) msec.*/\1 \2 \3/' \
  | tee "$WORK/redis-benchmark.txt" | while read -r op rps p50; do
      printf 'redis-benchmark %s: %s requests/s, p50 %s ms\n' "$op" "$rps" "$p50"
    done

# --- 4. summary -------------------------------------------------------------------------------
log "summary (concurrency $CONCURRENCY, $DURATION per scenario; latency of successful requests)"
if command -v jq >/dev/null; then
  printf '%-24s %10s %10s %9s %9s %9s %9s %8s\n' scenario requests ok/s p50_ms p90_ms p99_ms max_ms errors
  while IFS=$'\t' read -r label json; do
    jq -r --arg l "$label" '[$l, .requests, .ok_per_sec, (.latency_us.p50/1000), (.latency_us.p90/1000),
      (.latency_us.p99/1000), (.latency_us.max/1000), .errors] | @tsv' <<<"$json" |
      awk -F'\t' '{printf "%-24s %10d %10.1f %9.3f %9.3f %9.3f %9.3f %8d\n", $1,$2,$3,$4,$5,$6,$7,$8}'
  done <"$SUMMARY"
else
  cat "$SUMMARY"
fi
while read -r op rps p50; do
  printf '%-24s %10s %10s %9s\n' "redis-benchmark-$op" - "$rps" "$p50"
done <"$WORK/redis-benchmark.txt"
if [[ -s $WORK/watch-summary.jsonl ]]; then
  echo
  echo "watch scenarios (JSON summaries):"
  cat "$WORK/watch-summary.jsonl"
fi
[[ $FAILED == 0 ]]
