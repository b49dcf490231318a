#!/usr/bin/env bash
# 4 KiB random reads from ONE client thread through the asynchronous object API: IOPS with 1
# and with 64 operations in flight, on a fresh 3-target local cluster (UCX_TLS=tcp by default).
# Repeats 3 times; the last line is `async qd64/qd1 iops_ratio=R copies_per_byte=C` (medians; C:
# bytes the client copied per byte its reads delivered, Client::read_path_stats).
# Usage: bench/object_io_iops.sh [SECONDS_PER_RUN]
set -euo pipefail
BUILD=${BUILD:-build}
PENSTOCK=${PENSTOCK_BIN:-$BUILD/src/cli/penstock}
BENCH=${OBJECT_IO_BENCH:-$BUILD/src/client/object_io_bench}
SECS=${1:-5}
export UCX_TLS=${UCX_TLS:-tcp}
dir=$(mktemp -d -t penstock-iops.XXXXXX)
trap '"$PENSTOCK" down --data-dir "$dir" >/dev/null 2>&1 || true; rm -rf "$dir"' EXIT
mgmt=$("$PENSTOCK" up --targets 3 --data-dir "$dir" --base-port 0 --capacity 1G --log-level warn 2>/dev/null)
out=$(for run in 1 2 3; do "$BENCH" "$mgmt" "$SECS" 1 64; done)
echo "$out"
/usr/bin/python3 - "$out" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in sys.argv[1].splitlines() if l.startswith("{")]
med = {qd: statistics.median(r["iops"] for r in rows if r["qd"] == qd) for qd in (1, 64)}
p = {qd: statistics.median(r["p50_us"] for r in rows if r["qd"] == qd) for qd in (1, 64)}
print(f"medians: qd1 {med[1]:.0f} IOPS (p50 {p[1]:.0f} us), qd64 {med[64]:.0f} IOPS (p50 {p[64]:.0f} us)")
copies = statistics.median(r["copies_per_byte"] for r in rows)
print(f"async qd64/qd1 iops_ratio={med[64] / med[1]:.2f} copies_per_byte={copies:.3f}")
PY
