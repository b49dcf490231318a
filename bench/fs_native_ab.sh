#!/bin/bash
# fs_native_ab.sh OLD_BUILD NEW_BUILD [ROUNDS]: the file system's native API (fs_bench native)
# with two builds of Penstock, alternating old and new, each round on a fresh cluster of 3
# targets per build: 1 thread creating, stat-ing and unlinking empty files in its own
# directory, then 8 threads creating, reading and unlinking 4 KiB files in one directory.
# OLD_BUILD/NEW_BUILD: build directories holding src/cli/penstock and src/fs/fs_bench (build
# the old one in a git worktree: `git worktree add ../old REV`, then cmake + ninja there).
# Prints a line per build and round, then the medians and new/old ratios.
# Env: FILES1 (600), FILES8 (2000), CAPACITY (1G), BENCH_DIR (/var/tmp).
set -euo pipefail
cd "$(dirname "$0")/.."

[ $# -ge 2 ] || { echo "usage: $0 OLD_BUILD NEW_BUILD [ROUNDS]" >&2; exit 2; }
OLD=$1 NEW=$2 ROUNDS=${3:-3}
FILES1=${FILES1:-600} FILES8=${FILES8:-2000} CAPACITY=${CAPACITY:-1G}
for b in "$OLD" "$NEW"; do
  for f in src/cli/penstock src/fs/fs_bench; do
    [ -x "$b/$f" ] || { echo "fs_native_ab.sh: no $b/$f: build it first" >&2; exit 2; }
  done
done
dir=$(mktemp -d "${BENCH_DIR:-/var/tmp}/penstock-fsab.XXXXXX")
out="$dir/results.jsonl"
cleanup() {
  for d in "$dir"/cluster-*; do
    [ -d "$d" ] && "$NEW/src/cli/penstock" down --data-dir "$d" >/dev/null 2>&1 || true
  done
  rm -rf "$dir"
}
trap cleanup EXIT

one() {  # label build round
  local label=$1 build=$2 round=$3 d="$dir/cluster-$1-$3" up mgmt
  up=$("$build/src/cli/penstock" up --targets 3 --data-dir "$d" --base-port 0 --capacity "$CAPACITY" \
       --log-level warn --json 2>&1) || { echo "fs_native_ab.sh: penstock up failed: $up" >&2; exit 1; }
  mgmt=$(/usr/bin/python3 -c 'import json, sys; print(json.loads(sys.argv[1])["mgmt"])' "$up")
  /usr/bin/python3 bench/compare_report.py wait-zeroing "$mgmt" "$build/src/cli/penstock"
  for c in one eight; do
    "$build/src/cli/penstock" container create "$c" --type fs --redundancy none --mgmt "$mgmt" >/dev/null
  done
  local r1 r8
  r1=$("$build/src/fs/fs_bench" native "$mgmt" one --threads 1 --files "$FILES1" --layout private \
       --phases create,stat,unlink)
  r8=$("$build/src/fs/fs_bench" native "$mgmt" eight --threads 8 --files "$FILES8" --size 4096 --layout shared \
       --phases create,read,unlink)
  echo "{\"build\": \"$label\", \"round\": $round, \"t1\": $r1, \"t8\": $r8}" | tee -a "$out"
  "$build/src/cli/penstock" down --data-dir "$d" >/dev/null 2>&1
  rm -rf "$d"
}

for r in $(seq 1 "$ROUNDS"); do
  one old "$OLD" "$r"
  one new "$NEW" "$r"
done
/usr/bin/python3 - "$out" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
def med(build, run, op):
    return statistics.median(r[run][op] for r in rows if r["build"] == build)
print(f"{'ops/s (medians)':36} {'old':>9} {'new':>9} {'new/old':>8}")
for run, ops in (("t1", ("create", "stat", "unlink")), ("t8", ("create", "read", "unlink"))):
    for op in ops:
        o, n = med("old", run, op), med("new", run, op)
        label = ("1 thread, empty, private " if run == "t1" else "8 threads, 4 KiB, shared ") + op
        print(f"{label:36} {o:9.0f} {n:9.0f} {n / o:8.2f}")
PY
