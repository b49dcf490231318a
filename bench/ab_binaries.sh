#!/usr/bin/env bash
# bench/ab_binaries.sh OLD_PENSTOCK NEW_PENSTOCK [ROUNDS=3] [SECS=10] — two builds of penstock
# (e.g. before and after a refactor) measured alike, in alternating rounds: each round starts a
# fresh 3-target cluster with one binary (files under $DIR, default /var/tmp/penstock-ab2), makes
# a container with --redundancy none, waits for the targets' zeroing, then runs `penstock bench`
# write 4M (concurrency 16, 384 objects kept), seq 4M and rand 4K (concurrency 64) for SECS
# each, and stops it. Prints each run and the median of each figure per binary and NEW/OLD.
# Both binaries must know `up --capacity`, `container create --redundancy` and `bench --json`.
set -euo pipefail
OLD=${1:?usage: bench/ab_binaries.sh OLD_PENSTOCK NEW_PENSTOCK [ROUNDS] [SECS]}
NEW=${2:?usage: bench/ab_binaries.sh OLD_PENSTOCK NEW_PENSTOCK [ROUNDS] [SECS]}
ROUNDS=${3:-3}
SECS=${4:-10}
DIR=${DIR:-/var/tmp/penstock-ab2}
export UCX_TLS=${UCX_TLS:-tcp}
for b in "$OLD" "$NEW"; do [ -x "$b" ] || { echo "ab_binaries.sh: $b is not an executable" >&2; exit 1; }; done
results=$(mktemp)
trap 'rm -f "$results"' EXIT

run_one() {  # label binary round
  local label=$1 bin=$2 round=$3 mgmt
  rm -rf "$DIR"
  mgmt=$("$bin" up --targets 3 --data-dir "$DIR" --base-port 0 --capacity 4G --log-level warn 2>/dev/null | head -1)
  "$bin" container create ab --redundancy none --mgmt "$mgmt" >/dev/null
  sleep 8  # the targets' background zeroing of their data files
  for spec in "write 4M 16 --objects 384 --no-cleanup" "seq 4M 16" "rand 4K 64"; do
    set -- $spec
    local mode=$1 size=$2 conc=$3
    shift 3
    "$bin" bench "$mode" --mgmt "$mgmt" --container ab --size "$size" --concurrency "$conc" --seconds "$SECS" \
      "$@" --json | /usr/bin/python3 -c '
import json, sys
d = json.load(sys.stdin)
print(sys.argv[1], sys.argv[2], sys.argv[3], d["mb_per_s"], d["iops"])' "$label" "$round" "$mode$size" \
      | tee -a "$results"
  done
  "$bin" down --data-dir "$DIR" >/dev/null
}

for round in $(seq 1 "$ROUNDS"); do
  if (( round % 2 )); then run_one old "$OLD" "$round"; run_one new "$NEW" "$round"
  else run_one new "$NEW" "$round"; run_one old "$OLD" "$round"; fi
done
/usr/bin/python3 - "$results" <<'PY'
import statistics, sys
runs = {}
for line in open(sys.argv[1]):
    label, _, test, mbps, iops = line.split()
    runs.setdefault((test, label), []).append((float(mbps), float(iops)))
print(f"{'test':<10} {'old MB/s':>10} {'new MB/s':>10} {'old IOPS':>10} {'new IOPS':>10} {'new/old':>8}")
for test in sorted({t for t, _ in runs}):
    o = [statistics.median(x) for x in zip(*runs[(test, "old")])]
    n = [statistics.median(x) for x in zip(*runs[(test, "new")])]
    print(f"{test:<10} {o[0]:>10.1f} {n[0]:>10.1f} {o[1]:>10.0f} {n[1]:>10.0f} {n[0] / o[0]:>8.2f}")
PY
