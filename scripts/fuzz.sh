#!/usr/bin/env bash
# Fuzzes every hand-written parser with cargo-fuzz (libFuzzer) on the stable toolchain.
#
#   scripts/fuzz.sh --smoke [target...]   each target 20 s (11 targets: ~4 min of fuzzing)
#   scripts/fuzz.sh --full  [target...]   each target 10,000,000 executions
#
# Targets, seeds and results: fuzz/README.md. Limits make an unbounded allocation a failure
# (-rss_limit_mb, -malloc_limit_mb) and a hang one (-timeout). A crashing input is copied to
# fuzz/regressions/<target>/, where `cargo test -p crdplane-fuzz` replays it on every test run.
# Runs under `nice -n 19`: the fuzzers are CPU-bound.
set -euo pipefail
cd "$(dirname "$0")/.."

mode=${1:-}
case "$mode" in
--smoke) args=(-max_total_time="${FUZZ_SECONDS:-20}") ;;
--full) args=(-runs="${FUZZ_RUNS:-10000000}") ;;
*)
    echo "usage: $0 --smoke|--full [target...]" >&2
    exit 2
    ;;
esac
shift

if ! command -v cargo-fuzz >/dev/null; then
    cargo install cargo-fuzz --locked
fi

# No nightly toolchain needed: with `--sanitizer none` cargo-fuzz passes only stable flags
# (-Cpasses=sancov-module, -Cllvm-args=-sanitizer-coverage-*), so libFuzzer still gets its
# coverage feedback. Without a sanitizer the Rust code (unsafe_code = "forbid") loses nothing
# but ASan's malloc hooks: -malloc_limit_mb then acts only through -rss_limit_mb.
fuzz=(cargo fuzz)
build=(--fuzz-dir fuzz/libfuzzer --sanitizer none --release)

targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
    mapfile -t targets < <(ls fuzz/libfuzzer/fuzz_targets | sed 's/\.rs$//')
fi

python3 fuzz/seeds.py
nice -n 19 "${fuzz[@]}" build "${build[@]}"

max_len() {
    case "$1" in
    schema_compile) echo 16384 ;;
    *) echo 4096 ;;
    esac
}

results=fuzz/results
mkdir -p "$results"
failed=()
printf '%-20s %12s %10s %10s %s\n' target executions exec/s peak-MB result
for t in "${targets[@]}"; do
    corpus=fuzz/corpus/$t
    mkdir -p "$corpus"
    log=$results/$t.log
    status=ok
    if ! nice -n 19 "${fuzz[@]}" run "${build[@]}" "$t" "$corpus" -- \
        "${args[@]}" -max_len="$(max_len "$t")" -timeout=10 \
        -rss_limit_mb=2048 -malloc_limit_mb=512 -print_final_stats=1 >"$log" 2>&1; then
        status=FAILED
        failed+=("$t")
        mkdir -p "fuzz/regressions/$t"
        for a in fuzz/libfuzzer/artifacts/"$t"/*; do
            [ -f "$a" ] && cp "$a" "fuzz/regressions/$t/"
        done
    fi
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
    speed=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
    rss=$(sed -n 's/^stat::peak_rss_mb: *//p' "$log" | tail -1)
    printf '%-20s %12s %10s %10s %s\n' "$t" "${execs:-?}" "${speed:-?}" "${rss:-?}" "$status"
done

if [ ${#failed[@]} -gt 0 ]; then
    echo "failing targets: ${failed[*]} (logs in $results/, inputs in fuzz/regressions/)" >&2
    exit 1
fi
