#!/usr/bin/env bash
# bench/local_direct_ab.sh [ROUNDS=3] [SECS=5] — same-host direct copies on and off, on one fresh
# cluster (3 targets on files under $DIR, default /var/tmp/penstock-ab): `penstock bench write`
# and `bench seq` of 4 MiB objects, concurrency 16, with --local-direct true and false in turn.
# For each run prints MB/s, the client's CPU seconds per GB (from bench --json), the targets' and
# mgmt's CPU seconds per GB (utime + stime from /proc/PID/stat around the run) and their sum.
# Needs a built penstock (PENSTOCK_BIN=path) and bc.
set -euo pipefail
ROUNDS=${1:-3}
SECS=${2:-5}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PENSTOCK=${PENSTOCK_BIN:-$ROOT/build/src/cli/penstock}
DIR=${DIR:-/var/tmp/penstock-ab}
export UCX_TLS=${UCX_TLS:-tcp}
[ -x "$PENSTOCK" ] || { echo "no penstock at $PENSTOCK (build first or set PENSTOCK_BIN)"; exit 1; }
command -v bc >/dev/null || { echo "bc not found (apt-get install bc)"; exit 1; }

rm -rf "$DIR"
mkdir -p "$DIR"
mgmt=$("$PENSTOCK" up --targets 3 --data-dir "$DIR" --base-port 0 --capacity 4G --log-level warn 2>/dev/null)
trap '"$PENSTOCK" down --data-dir "$DIR" >/dev/null 2>&1 || true' EXIT
"$PENSTOCK" container create ab --redundancy none --mgmt "$mgmt" >/dev/null
sleep 8  # the targets' background zeroing of new segments
pids=$(pgrep -f "penstock (target|mgmt) .*--data-dir $DIR/" | tr '\n' ' ')
ticks=$(getconf CLK_TCK)
daemons_cpu() { for p in $pids; do awk '{print $14 + $15}' "/proc/$p/stat"; done | paste -sd+ | bc; }

for round in $(seq 1 "$ROUNDS"); do
  for direct in true false; do
    for mode in write seq; do
      extra=()
      [ "$mode" = write ] && extra=(--objects 256 --no-cleanup)
      before=$(daemons_cpu)
      out=$("$PENSTOCK" bench "$mode" --mgmt "$mgmt" --local-direct "$direct" --container ab --size 4M \
              --concurrency 16 --seconds "$SECS" "${extra[@]}" --json)
      after=$(daemons_cpu)
      echo "$out" | /usr/bin/python3 -c '
import json, sys
d = json.load(sys.stdin)
gb = d["bytes"] / 1e9
daemons = (float(sys.argv[1]) - float(sys.argv[2])) / float(sys.argv[3]) / gb
client = d["cpu_seconds_per_gb"]
mbs = d["mb_per_s"]
print(f"round {sys.argv[4]} {sys.argv[5]:<5} local_direct={sys.argv[6]:<5} {mbs:7.0f} MB/s"
      f"  client {client:.3f} s/GB  daemons {daemons:.3f} s/GB  all {client + daemons:.3f} s/GB")
' "$after" "$before" "$ticks" "$round" "$mode" "$direct"
    done
  done
done
