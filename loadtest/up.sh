# Sourced by the load scripts: `up_stack BIN PORT DIR [crdplane up flags...]` starts
# `crdplane up` on 127.0.0.1:PORT with its data in DIR/data (log: DIR/launcher.log), sets LP
# to the launcher's pid, stops it and removes DIR on exit, and returns once /readyz answers
# (the launcher's log goes to stderr, and the script exits, if it dies first).
up_stack() {
  local bin=$1 port=$2 dir=$3
  shift 3
  "$bin/crdplane" up "$@" --data-dir "$dir/data" --listen "127.0.0.1:$port" >"$dir/launcher.log" 2>&1 &
  LP=$!
  # shellcheck disable=SC2064 # expand now: the trap must name this launcher and directory
  trap "kill -TERM $LP 2>/dev/null; wait $LP 2>/dev/null; rm -rf '$dir'" EXIT
  for _ in $(seq 1 300); do
    curl -sf "http://127.0.0.1:$port/readyz" >/dev/null 2>&1 && return 0
    kill -0 "$LP" 2>/dev/null || { cat "$dir/launcher.log" >&2; exit 1; }
    sleep 0.1
  done
}
