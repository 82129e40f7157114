#!/usr/bin/env bash
# Runs the README test command (scripts/test.sh) beside a CPU hog on every
# core, several times in a row, and prints each run's wall time and the
# tests it failed: a test whose verdict depends on the machine being idle
# shows up here.
#
#   bash scripts/test_under_load.sh [runs (default 3)] [hog workers (default: one a core)]
#
# The hog is Debian's stress-ng (installed when missing). Each run's whole
# output is kept in $TMPDIR/ferrokv-under-load.N.log.
set -uo pipefail
cd "$(dirname "$0")/.."
runs=${1:-3}
workers=${2:-$(nproc)}
if ! command -v stress-ng >/dev/null; then
    if [ "$(id -u)" = 0 ]; then SUDO=""; else SUDO="sudo"; fi
    $SUDO apt-get update
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y stress-ng
fi
# Built first, idle, so that every run measures the tests, not the build.
cargo test --workspace --no-run >/dev/null 2>&1 || cargo test --workspace --no-run
summary=()
for i in $(seq 1 "$runs"); do
    log="${TMPDIR:-/tmp}/ferrokv-under-load.$i.log"
    stress-ng --cpu "$workers" --timeout 0 --quiet &
    hog=$!
    start=$(date +%s)
    bash scripts/test.sh >"$log" 2>&1
    rc=$?
    end=$(date +%s)
    kill "$hog" 2>/dev/null
    wait "$hog" 2>/dev/null
    failed=$(sed -n '/^FAILED: /,$p' "$log")
    line="run $i: $((end - start)) s, exit $rc"
    if [ -n "$failed" ]; then
        line="$line, $(echo "$failed" | head -1)"
    else
        line="$line, $(tail -1 "$log")"
    fi
    summary+=("$line")
    echo "$line"
    [ -n "$failed" ] && echo "$failed" | tail -n +2 | sed 's/^/    /'
done
echo
printf '%s\n' "${summary[@]}"
