#!/usr/bin/env bash
# protected_vs_none.sh — issue 36's figures: protected containers (rep:3, ec:2+1, ec:4+2) and
# small-object creates, each against `none` in the same run on the same cluster.
#
# Pass 1: a fresh `penstock up` with 3 targets (files in one directory); the script waits for
# the targets' background zeroing before the first write (a segment written into before it is
# zeroed stays pending until filled). Each round, in this order, none first, then protected:
#   create4k  `bench write --size 4K --concurrency 32` (a new object per op, --no-cleanup) into a
#             fresh container, none then rep:3
#   write4k   `bench mixed --size 4K --concurrency 32 --write-percent 100` into 256 existing
#             4 KiB objects of a container of the same redundancy, none then rep:3. They are
#             made once per pass, untimed, by `bench write --size 4K --objects 256` for 3 s, which
#             writes each of them several times: a 4 KiB object is created inline (in its head)
#             and moved to its stripes by its first write in place, and that one-off move must
#             not count as a write. (create4k's containers are removed at the round's end.)
#   write4m   `bench write --size 4M --concurrency 16 --objects OBJECTS --no-cleanup`: none, rep:3,
#             ec:2+1 (one container each for the whole pass; later rounds overwrite)
#   read4m    `bench seq --size 4M --concurrency 16` over those objects: none, ec:2+1
#   randread4k `bench rand --size 4K --concurrency 32` over none's 4 MiB objects
# Pass 2: a fresh cluster of 6 targets: write4m and read4m for none and ec:4+2, interleaved the
# same way.
# Each figure is the median over the rounds; ratios are protected's median over none's. The
# goals are printed beside each ratio (pass/miss), never enforced. The last line:
#   perf2 creates_vs_writes=R creates_rep3_vs_writes=R ec21_read_vs_none=R ec42_read_vs_none=R
#         ec21_write_vs_none=R rep3_write_vs_none=R ec_cpu_s_per_gb=X
# (creates: create4k IOPS over write4k IOPS; ec_cpu_s_per_gb: the client's CPU seconds per GB
# of ec:2+1 4 MiB writes; nan where not measured, e.g. ec42_read_vs_none with PASSES=1).
# Raw JSON of every run goes to $OUT (default bench/results/protected_vs_none-<date>.json);
# `bench/protected_vs_none_report.py report FILE` prints the figures again.
#
# Usage: bench/protected_vs_none.sh [SECONDS]    (default 10 a test: about 8 minutes)
#        bench/protected_vs_none.sh --quick      (1 s a test, 1 round, 512M targets: a smoke run)
# Env: ROUNDS (3), PASSES (2; 1 skips the 6-target pass), OBJECTS (96 objects of 4 MiB a
# container), CAPACITY (2G a target, pass 1), CAPACITY6 (1G a target, pass 2), BASE_PORT (0:
# free ports; else mgmt's port, targets from BASE_PORT+10), BENCH_DIR (/var/tmp), UCX_TLS (tcp),
# PENSTOCK_BIN, OUT.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
PENSTOCK=${PENSTOCK_BIN:-$BUILD/src/cli/penstock}
REPORT=bench/protected_vs_none_report.py
SECS=${1:-10}
if [[ $SECS == --quick ]]; then
  SECS=1 ROUNDS=${ROUNDS:-1} CAPACITY=${CAPACITY:-512M} CAPACITY6=${CAPACITY6:-512M} OBJECTS=${OBJECTS:-16}
fi
ROUNDS=${ROUNDS:-3}
PASSES=${PASSES:-2}
OBJECTS=${OBJECTS:-96}
CAPACITY=${CAPACITY:-2G}
CAPACITY6=${CAPACITY6:-1G}
BASE_PORT=${BASE_PORT:-0}
export UCX_TLS=${UCX_TLS:-tcp}
fail() { echo "protected_vs_none.sh: $*" >&2; exit 1; }
say() { echo "protected_vs_none.sh: $*" >&2; }
[[ -x $PENSTOCK ]] || fail "$PENSTOCK is not built: ninja -C $BUILD penstock"
[[ $SECS =~ ^[0-9]*\.?[0-9]+$ ]] || fail "SECONDS must be a number (seconds a test), not '$SECS'"
[[ $ROUNDS =~ ^[1-9][0-9]*$ ]] || fail "ROUNDS must be a positive integer, not '$ROUNDS'"
[[ $PASSES == 1 || $PASSES == 2 ]] || fail "PASSES takes 1 (3 targets only) or 2, not '$PASSES'"
[[ $OBJECTS =~ ^[1-9][0-9]*$ ]] || fail "OBJECTS must be a positive integer, not '$OBJECTS'"
tests=$((ROUNDS * (10 + (PASSES == 2 ? 4 : 0))))
est=$(/usr/bin/python3 -c "print(int($tests * ($SECS + 2) + 40 * $PASSES))")
say "$ROUNDS rounds of $SECS s a test, $tests tests, $PASSES pass(es): about $((est / 60 + 1)) minutes"
OUT=${OUT:-bench/results/protected_vs_none-$(date +%Y%m%d-%H%M%S).json}
mkdir -p "$(dirname "$OUT")"
dir=$(mktemp -d -p "${BENCH_DIR:-/var/tmp}" penstock-pvn.XXXXXX)
cleanup() {
  local c
  for c in "$dir"/pass*; do
    if [[ -d $c ]]; then "$PENSTOCK" down --data-dir "$c" >/dev/null 2>&1 || true; fi
  done
  rm -rf "$dir"
}
trap cleanup EXIT

start_cluster() {  # pass targets capacity: sets mgmt
  local c="$dir/pass$1"
  say "pass $1: a fresh cluster of $2 targets (--capacity $3) in $c"
  local up
  up=$("$PENSTOCK" up --targets "$2" --data-dir "$c" --base-port "$BASE_PORT" --capacity "$3" --log-level warn \
         --json 2>&1) || fail "penstock up failed (logs in $c/logs): $up"
  mgmt=$(/usr/bin/python3 -c 'import json, sys; print(json.loads(sys.argv[1])["mgmt"])' "$up")
  say "pass $1: waiting for the targets' background zeroing"
  /usr/bin/python3 bench/compare_report.py wait-zeroing "$mgmt" "$PENSTOCK"
}
stop_cluster() {  # pass
  "$PENSTOCK" down --data-dir "$dir/pass$1" >/dev/null 2>&1 || true
  rm -rf "$dir/pass$1"
}
container() {  # name redundancy
  "$PENSTOCK" container create "$1" --redundancy "$2" --mgmt "$mgmt" >/dev/null ||
    fail "container create $1 --redundancy $2 failed"
}
bench_row() {  # test redundancy container bench-arguments...: appends one row
  local test=$1 red=$2 c=$3 j row
  shift 3
  j=$("$PENSTOCK" bench "$@" --container "$c" --seconds "$SECS" --mgmt "$mgmt" --json 2>"$dir/bench.err") ||
    fail "penstock bench $* --container $c ($red) failed: $j $(cat "$dir/bench.err")"
  row="{\"pass\": $pass, \"round\": $round, \"test\": \"$test\", \"redundancy\": \"$red\", \"data\": $j}"
  echo "$row" >> "$OUT.tmp"
  say "pass $pass round $round/$ROUNDS: $test $red: $(/usr/bin/python3 "$REPORT" brief "$row")"
}
warm_up() {  # the first writes into a fresh cluster run slow (creates: seconds a p50): not timed
  local red
  say "pass $pass: warming up (throw-away containers, 1 s each)"
  for red in none "$@"; do
    "$PENSTOCK" bench write --redundancy "$red" --size 4K --concurrency 32 --seconds 1 --mgmt "$mgmt" --json \
      >/dev/null 2>&1 || say "warning: warm-up write ($red) failed"
  done
}
name() { echo "${1//[:+]/_}"; }  # a container name from a redundancy

: > "$OUT.tmp"
# Pass 1: 3 targets.
pass=1
start_cluster 1 3 "$CAPACITY"
for red in none rep:3 ec:2+1; do container "w-$(name "$red")" "$red"; done
warm_up rep:3 ec:2+1
for red in none rep:3; do  # write4k's objects, already in their stripes (see above)
  container "e-$(name "$red")" "$red"
  "$PENSTOCK" bench write --container "e-$(name "$red")" --size 4K --concurrency 32 --objects 256 --seconds 3 \
    --no-cleanup --mgmt "$mgmt" --json >/dev/null 2>&1 || say "warning: preparing e-$(name "$red") failed"
done
for round in $(seq "$ROUNDS"); do
  for red in none rep:3; do
    container "c$round-$(name "$red")" "$red"
    bench_row create4k "$red" "c$round-$(name "$red")" write --size 4K --concurrency 32 --no-cleanup
  done
  for red in none rep:3; do
    bench_row write4k "$red" "e-$(name "$red")" mixed --size 4K --concurrency 32 --write-percent 100
  done
  for red in none rep:3 ec:2+1; do
    bench_row write4m "$red" "w-$(name "$red")" write --size 4M --concurrency 16 --objects "$OBJECTS" --no-cleanup
  done
  for red in none ec:2+1; do
    bench_row read4m "$red" "w-$(name "$red")" seq --size 4M --concurrency 16
  done
  bench_row randread4k none w-none rand --size 4K --concurrency 32
  for red in none rep:3; do  # the creates' objects: space for the next round's
    "$PENSTOCK" container rm "c$round-$(name "$red")" --force --mgmt "$mgmt" >/dev/null ||
      say "warning: container rm c$round-$(name "$red") --force failed"
  done
done
stop_cluster 1

# Pass 2: 6 targets, none against ec:4+2.
if ((PASSES == 2)); then
  pass=2
  start_cluster 2 6 "$CAPACITY6"
  for red in none ec:4+2; do container "w-$(name "$red")" "$red"; done
  warm_up ec:4+2
  for round in $(seq "$ROUNDS"); do
    for red in none ec:4+2; do
      bench_row write4m "$red" "w-$(name "$red")" write --size 4M --concurrency 16 --objects "$OBJECTS" --no-cleanup
    done
    for red in none ec:4+2; do
      bench_row read4m "$red" "w-$(name "$red")" seq --size 4M --concurrency 16
    done
  done
  stop_cluster 2
fi
mv "$OUT.tmp" "$OUT"
say "raw results: $OUT"
/usr/bin/python3 "$REPORT" report "$OUT"
