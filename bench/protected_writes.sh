#!/usr/bin/env bash
# Writes into protected and unprotected containers, side by side, on a fresh `penstock up`
# (3 targets on files in one directory) per run and binary: for each redundancy, 64 objects of
# 4 MiB are written, then `penstock bench mixed --write-percent 100` runs random 4 KiB writes at
# concurrency 1 and 64 (rand4k) and sequential 16 KiB and 64 KiB writes at concurrency 16
# (`--sequential`: each object's stripes in order, so the writes in flight share a stripe).
# Prints one line per binary, redundancy and test (IOPS, p50/p99 in µs), then the medians over
# the runs. UCX_TLS is left as it is (unset: UCX's choice, shared memory on one host); any
# UCX_* variable set here reaches the daemons too (e.g. UCX_TLS=tcp against unset).
# A/B: AB="old=/tmp/penstock-old new=build/src/cli/penstock" runs each binary in turn in every
# run (fresh clusters, alternating), for the client and the daemons alike.
# Usage: bench/protected_writes.sh [RUNS] [SECONDS] [REDUNDANCY...]   (default 3 6 none rep:2 ec:2+1)
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${1:-3}
SECS=${2:-6}
shift $(( $# > 2 ? 2 : $# ))
REDS=("$@")
[ ${#REDS[@]} -gt 0 ] || REDS=(none rep:2 ec:2+1)
read -r -a BINS <<< "${AB:-this=${PENSTOCK_BIN:-${BUILD:-build}/src/cli/penstock}}"
TESTS=("rand4k 4K 1" "rand4k 4K 64" "seq16k 16K 16 --sequential" "seq64k 64K 16 --sequential")
results=$(mktemp)
trap 'rm -f "$results"' EXIT
for run in $(seq "$RUNS"); do
  for entry in "${BINS[@]}"; do
    bin=${entry%%=*}
    PENSTOCK=${entry#*=}
    dir=$(mktemp -d -p "${BENCH_DIR:-/var/tmp}" penstock-protected.XXXXXX)
    mgmt=$("$PENSTOCK" up --targets 3 --data-dir "$dir/cluster" --base-port 0 --capacity 4G --log-level warn 2>/dev/null)
    # Background zeroing of the new data files runs unpaced while idle: let it finish first.
    sleep 8
    for red in "${REDS[@]}"; do
      name="pw-${red//[:+]/_}"
      "$PENSTOCK" container create "$name" --redundancy "$red" --mgmt "$mgmt" >/dev/null
      common=(--container "$name" --mgmt "$mgmt" --json)
      "$PENSTOCK" bench write --size 4M --concurrency 16 --objects 64 --no-cleanup --seconds 3 "${common[@]}" >/dev/null
      for t in "${TESTS[@]}"; do
        read -r -a f <<< "$t"
        "$PENSTOCK" bench mixed --size "${f[1]}" --concurrency "${f[2]}" --write-percent 100 --seconds "$SECS" \
          "${f[@]:3}" "${common[@]}" |
          /usr/bin/python3 -c 'import json, sys; d = json.load(sys.stdin); print(*sys.argv[1:], int(d["iops"]), d["p50_us"], d["p99_us"], d["errors"])' \
            "$run" "$bin" "$red" "${f[0]}" "${f[2]}" |
          tee -a "$results" |
          awk '{printf "run %s %-6s %-8s %-7s concurrency %-3s %7d IOPS  p50 %8.0f us  p99 %8.0f us  errors %s\n", $1, $2, $3, $4, $5, $6, $7, $8, $9}'
      done
    done
    "$PENSTOCK" down --data-dir "$dir/cluster" >/dev/null 2>&1 || true
    rm -rf "$dir"
  done
done
/usr/bin/python3 - "$results" <<'PY'
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    _, binary, red, test, qd, iops, p50, p99, _errors = line.split()
    rows.setdefault((red, test, int(qd), binary), []).append((int(iops), float(p50), float(p99)))
print("medians:")
for (red, test, qd, binary), v in sorted(rows.items()):
    print(f"  {binary:<6} {red:<8} {test:<7} concurrency {qd:<3} {statistics.median(x[0] for x in v):8.0f} IOPS  "
          f"p50 {statistics.median(x[1] for x in v):8.0f} us  p99 {statistics.median(x[2] for x in v):8.0f} us")
PY
