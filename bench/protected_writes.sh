#!/usr/bin/env bash
# Random 4 KiB writes into protected and unprotected containers, side by side, on a fresh
# `penstock up` (3 targets on files in one directory) per run: for each redundancy, 64 objects
# of 4 MiB are written, then `penstock bench mixed --write-percent 100` runs at concurrency 1
# and 64. Prints one line per redundancy and concurrency (IOPS, p50/p99 in µs), then the
# medians over the runs. UCX_TLS is left as it is (unset: UCX's choice, shared memory on one
# host); set it to compare transports. Any UCX_* variable set here reaches the daemons too,
# which is how an A/B of a transport setting is run (e.g. UCX_TLS=tcp against unset).
# Usage: bench/protected_writes.sh [RUNS] [SECONDS] [REDUNDANCY...]   (default 3 6 none rep:2 ec:2+1)
set -euo pipefail
cd "$(dirname "$0")/.."
PENSTOCK=${PENSTOCK_BIN:-${BUILD:-build}/src/cli/penstock}
RUNS=${1:-3}
SECS=${2:-6}
shift $(( $# > 2 ? 2 : $# ))
REDS=("$@")
[ ${#REDS[@]} -gt 0 ] || REDS=(none rep:2 ec:2+1)
results=$(mktemp)
trap 'rm -f "$results"' EXIT
for run in $(seq "$RUNS"); do
  dir=$(mktemp -d -p "${BENCH_DIR:-/var/tmp}" penstock-protected.XXXXXX)
  mgmt=$("$PENSTOCK" up --targets 3 --data-dir "$dir/cluster" --base-port 0 --capacity 4G --log-level warn 2>/dev/null)
  # Background zeroing of the new data files runs unpaced while idle: let it finish first.
  sleep 8
  for red in "${REDS[@]}"; do
    name="pw-${red//[:+]/_}"
    "$PENSTOCK" container create "$name" --redundancy "$red" --mgmt "$mgmt" >/dev/null
    common=(--container "$name" --mgmt "$mgmt" --json)
    "$PENSTOCK" bench write --size 4M --concurrency 16 --objects 64 --no-cleanup --seconds 3 "${common[@]}" >/dev/null
    for qd in 1 64; do
      "$PENSTOCK" bench mixed --size 4K --concurrency "$qd" --write-percent 100 --seconds "$SECS" "${common[@]}" |
        /usr/bin/python3 -c 'import json, sys; d = json.load(sys.stdin); print(sys.argv[1], sys.argv[2], sys.argv[3], int(d["iops"]), d["p50_us"], d["p99_us"])' "$run" "$red" "$qd" |
        tee -a "$results" | awk '{printf "run %s %-8s concurrency %-3s %7d IOPS  p50 %8.0f us  p99 %8.0f us\n", $1, $2, $3, $4, $5, $6}'
    done
  done
  "$PENSTOCK" down --data-dir "$dir/cluster" >/dev/null 2>&1 || true
  rm -rf "$dir"
done
/usr/bin/python3 - "$results" <<'EOF'
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    _, red, qd, iops, p50, p99 = line.split()
    rows.setdefault((red, int(qd)), []).append((int(iops), float(p50), float(p99)))
print("medians:")
for (red, qd), v in rows.items():
    print(f"  {red:<8} concurrency {qd:<3} {statistics.median(x[0] for x in v):8.0f} IOPS  "
          f"p50 {statistics.median(x[1] for x in v):8.0f} us  p99 {statistics.median(x[2] for x in v):8.0f} us")
EOF
