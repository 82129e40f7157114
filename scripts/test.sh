#!/usr/bin/env bash
# Runs the whole test suite. Installs what the tests need when it is
# missing: the real redis-server/redis-cli/redis-benchmark (differential and
# interop tests), redis-sentinel (tests/sentinel.rs), libfabric (RDMA
# transport tests, tcp provider), iproute2 (network namespaces), redis-py,
# promtool (Debian's prometheus: checks the /metrics text).
set -euo pipefail
cd "$(dirname "$0")/.."

need_apt=()
command -v redis-server >/dev/null || need_apt+=(redis-server)
command -v redis-cli >/dev/null || need_apt+=(redis-tools)
command -v redis-benchmark >/dev/null || need_apt+=(redis-tools)
command -v redis-sentinel >/dev/null || need_apt+=(redis-sentinel)
ldconfig -p 2>/dev/null | grep -q 'libfabric.so.1 ' || need_apt+=(libfabric1 libfabric-dev)
command -v python3 >/dev/null || need_apt+=(python3 python3-pip)
# ip (network namespaces: tests/cluster_partition.rs)
command -v ip >/dev/null || need_apt+=(iproute2)
if [ ${#need_apt[@]} -gt 0 ]; then
    if [ "$(id -u)" = 0 ]; then SUDO=""; else SUDO="sudo"; fi
    $SUDO apt-get update
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y "${need_apt[@]}"
fi
# promtool only: the package's daemon and recommended exporters are not needed.
if ! command -v promtool >/dev/null; then
    if [ "$(id -u)" = 0 ]; then SUDO=""; else SUDO="sudo"; fi
    $SUDO apt-get update
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y --no-install-recommends prometheus
fi
python3 -c 'import redis' 2>/dev/null || python3 -m pip install --quiet redis

# Every pass runs with --no-fail-fast, so that one failing suite does not
# hide the others; `pass` records each pass's failed tests, and the run
# ends by naming all of them (and exits non-zero when there are any).
failures=$(mktemp)
trap 'rm -f "$failures"' EXIT
pass() {
    local name=$1
    shift
    local log
    log=$(mktemp)
    set +e
    "$@" --no-fail-fast 2>&1 | tee "$log"
    local rc=${PIPESTATUS[0]}
    set -e
    if [ "$rc" != 0 ]; then
        # "test some::name ... FAILED" lines; a suite that failed without
        # one (a build error, a crash) is named by its pass.
        if grep -q '^test .* \.\.\. FAILED$' "$log"; then
            grep '^test .* \.\.\. FAILED$' "$log" | sed "s/^test \(.*\) \.\.\. FAILED$/$name: \1/" >>"$failures"
        else
            echo "$name: failed (exit $rc, no failed test named: see its output)" >>"$failures"
        fi
    fi
    rm -f "$log"
}

pass workspace cargo test --workspace
# The command suites again, over the Unix socket and over RDMA connections
# (libfabric's tcp provider) instead of TCP: the connection layer's other
# transports, through the same tests.
for transport in unix rdma; do
    pass "transport=$transport" env FERROKV_TESTS_TRANSPORT=$transport cargo test -p ferrokv-server \
        --test protocol --test commands --test transactions --test pubsub --test blocking \
        --test scripting --test slowlog
done
# The suites that drive the network layer again with I/O threads
# (io-threads 4, reads threaded, every batch handed to the threads:
# docs/io-threads.md): sockets and buffers moving between the execution
# thread and the threads under pipelines, TLS, replication, blocking,
# scripts, client limits and hostile input.
pass io-threads=4 env FERROKV_TESTS_IO_THREADS=4 cargo test -p ferrokv-server --test protocol --test commands \
    --test transactions --test pubsub --test blocking --test scripting --test scripting_busy \
    --test slowlog --test clients --test limits --test replication --test hostile --test tls \
    --test tracking --test monitor --test client_memory --test client_pause
# The suites that drive the network layer again on the io_uring backend
# (io-backend uring; the default is epoll: docs/io-uring.md), where the
# kernel allows io_uring: receives, sends, the busy-script and loading
# pumps, replicas' sockets lent to their sender threads, hostile input.
# (io_uring_setup(2) is syscall 425 on x86_64 and aarch64 alike.)
if ! python3 -c 'import ctypes, sys
b = ctypes.create_string_buffer(120)
sys.exit(0 if ctypes.CDLL(None).syscall(425, 4, b) >= 0 else 1)'; then
    echo "io_uring is not available here: the io_uring pass is skipped"
else
    pass io-backend=uring env FERROKV_TESTS_IO_BACKEND=uring cargo test -p ferrokv-server --test io_backend --test protocol \
        --test commands --test transactions --test pubsub --test blocking --test scripting \
        --test scripting_busy --test slowlog --test clients --test limits --test replication \
        --test hostile --test loading --test rdma_clients
fi
if [ -s "$failures" ]; then
    echo
    echo "FAILED: $(wc -l <"$failures") test(s)"
    cat "$failures"
    exit 1
fi
echo
echo "All passes succeeded."
