#!/usr/bin/env bash
# compare.sh — Penstock end to end against the best fio gets from the same disk, like for like:
# a fresh `penstock up` (3 targets on files in one directory, a container made with
# --redundancy none so each byte is written once, as fio writes it), `penstock bench`, fio
# (io_uring, O_DIRECT) on 3 files in the same directory, and memcpy's CPU cost.
#
# Like for like:
# - Time-based on both sides: each test runs SECONDS_PER_TEST (fio: --time_based --runtime);
#   no ramp time on either side.
# - The same working set: the bench's reads and random writes go to the OBJECTS x 4 MiB that
#   its write test left (write --objects OBJECTS --no-cleanup; 384: 1.5 GiB over the 3
#   targets); fio's 3 files hold the same total (512 MiB each).
# - Files prepared alike: a target's data file is fallocated and then written over with zeros
#   in the background (src/engine/engine_zero.cc), and the script waits until that is done;
#   fio's files are fallocated and then written over with zeros (O_DIRECT) before the first
#   test. A fallocated, never written file would read without touching the disk, and its first
#   writes would pay the extent conversion.
# - The same bytes in flight: the bench keeps concurrency x size in flight over 3 targets
#   (16 x 4 MiB = 64 MiB; 64 x 4 KiB), so fio's "matched" shape is 3 jobs, one per file, each
#   with queue depth 21 (21 x 1 MiB, the stripe unit the targets write, or 21 x 4 KiB).
# - Against the device's best: fio also runs a sweep of shapes, FIO_JOBS (1: one job over the
#   3 files; 3: one job a file) x FIO_QDS (queue depth per job), and each run's fastest shape
#   is the baseline. Run 1 runs the whole sweep; later runs the matched shape and run 1's
#   fastest. The table shows both ratios; the last line the one against the fastest.
# Durability: a Penstock write is acknowledged once durable (its target's group commit: data,
#   journal record, one fdatasync). fio's writes are plain O_DIRECT writes, never flushed (the
#   device's volatile cache may still hold them), so the write ratios include the price of
#   durability. A line before the last prices it apart: fio's randwrite4k at its fastest shape
#   with an fdatasync every N writes, N the targets' mean group commit (writes per flush) in
#   the same run's randwrite4k.
# Reads: the bench's read runs use --verify (every byte read is checked against the pattern
#   its writes left; a mismatch stops the script); that check's CPU is not in the client's.
#
# Prints a table of medians, each run's figures, run 1's fio sweep, and last the line
#   penstock/fio write4m=R read4m=R randread4k=R randwrite4k=R cpu_per_gb_vs_memcpy=R
# (penstock's median over fio's: each run's fastest shape; the last: client CPU seconds per GB
# read over memcpy's). Raw JSON of every run goes to $OUT (default
# bench/results/compare-<date>.json): `bench/compare_report.py report FILE` prints the figures
# again, bench/plot_compare.py charts them.
# Usage: bench/compare.sh [RUNS] [SECONDS_PER_TEST]   (default 3 10: about 10 minutes)
# Env: OBJECTS (384, a multiple of 3), FIO_JOBS ("1 3"), FIO_QDS ("16 64"), BENCH_DIR
# (/var/tmp), UCX_TLS (tcp), PENSTOCK_BIN, MEMCPY_BENCH.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
PENSTOCK=${PENSTOCK_BIN:-$BUILD/src/cli/penstock}
MEMCPY=${MEMCPY_BENCH:-$BUILD/src/cli/memcpy_bench}
RUNS=${1:-3}
SECS=${2:-10}
OBJECTS=${OBJECTS:-384}
FIO_JOBS=${FIO_JOBS:-1 3}
FIO_QDS=${FIO_QDS:-16 64}
MATCHED="3 21"  # jobs, queue depth: 64 MiB / 3 / 1 MiB and 64 x 4 KiB / 3 / 4 KiB
REPORT=bench/compare_report.py
export UCX_TLS=${UCX_TLS:-tcp}
fail() { echo "compare.sh: $*" >&2; exit 1; }
command -v fio >/dev/null || fail "fio is not installed (apt-get install fio)"
for x in "$PENSTOCK" "$MEMCPY"; do [[ -x $x ]] || fail "$x is not built: ninja -C $BUILD penstock memcpy_bench"; done
for j in $FIO_JOBS; do
  [[ $j == 1 || $j == 3 ]] || fail "FIO_JOBS takes 1 (one job over the 3 files) and 3 (one a file), not $j"
done
((OBJECTS % 3 == 0)) || fail "OBJECTS ($OBJECTS) must be a multiple of 3 (fio's 3 files hold as much as the objects)"
WS_MIB=$((OBJECTS * 4))
FILE_MIB=$((WS_MIB / 3))
sweep=()
for j in $FIO_JOBS; do for q in $FIO_QDS; do sweep+=("$j $q"); done; done
matched_in_sweep=false
for s in "${sweep[@]}"; do [[ $s == "$MATCHED" ]] && matched_in_sweep=true; done
$matched_in_sweep || sweep+=("$MATCHED")
# Tests: run 1 runs the sweep and 5 more (the bench's 4, fio flushing); later runs at most 13;
# each starts in ~1.5 s, and the cluster and fio's files take ~30 s to prepare.
est=$((((4 * ${#sweep[@]} + 5) + (RUNS - 1) * 13) * (2 * SECS + 3) / 2 + 30))
echo "compare.sh: $RUNS runs of $SECS s per test, fio sweep of ${#sweep[@]} shapes: about $((est / 60 + 1)) minutes" >&2
OUT=${OUT:-bench/results/compare-$(date +%Y%m%d-%H%M%S).json}
mkdir -p "$(dirname "$OUT")"
dir=$(mktemp -d -p "${BENCH_DIR:-/var/tmp}" penstock-compare.XXXXXX)
trap '"$PENSTOCK" down --data-dir "$dir/cluster" >/dev/null 2>&1 || true; rm -rf "$dir"' EXIT

mgmt=$("$PENSTOCK" up --targets 3 --data-dir "$dir/cluster" --base-port 0 --capacity 4G --log-level warn --json |
       /usr/bin/python3 -c 'import json, sys; print(json.load(sys.stdin)["mgmt"])')
"$PENSTOCK" container create cmp --redundancy none --mgmt "$mgmt" >/dev/null
for i in 0 1 2; do  # fio's files, prepared as the targets' data files are
  fallocate -l "${FILE_MIB}MiB" "$dir/fio.$i"
  dd if=/dev/zero of="$dir/fio.$i" bs=1M count="$FILE_MIB" oflag=direct conv=notrunc,fsync status=none
done
/usr/bin/python3 "$REPORT" wait-zeroing "$mgmt" "$PENSTOCK"

fio_row() {  # test rw bs jobs iodepth [more fio options]: appends one row
  local test=$1 rw=$2 bs=$3 jobs=$4 qd=$5 matched=false files
  shift 5
  files=(--filename="$dir/fio.0:$dir/fio.1:$dir/fio.2" --size="${WS_MIB}MiB")
  # shellcheck disable=SC2016 # $jobnum is fio's
  ((jobs == 3)) && files=(--directory="$dir" --filename_format='fio.$jobnum' --numjobs=3 --size="${FILE_MIB}MiB")
  [[ "$jobs $qd" == "$MATCHED" ]] && matched=true
  fio --name=cmp "${files[@]}" --rw="$rw" --bs="$bs" --iodepth="$qd" --ioengine=io_uring --direct=1 \
      --fallocate=none --time_based --runtime="$SECS" --group_reporting "$@" \
      --output-format=json --output="$dir/fio.json" >/dev/null
  echo "{\"run\": $run, \"test\": \"fio_$test\", \"jobs\": $jobs, \"iodepth\": $qd, \"matched\": $matched, \"data\":" \
       "$(/usr/bin/python3 -c 'import json, sys; print(json.dumps(json.load(open(sys.argv[1]))))' "$dir/fio.json")}" \
       >> "$OUT.tmp"
}
bench_row() {  # test bench-arguments...: appends one row
  local test=$1 j
  shift
  j=$("$PENSTOCK" bench "$@" --container cmp --seconds "$SECS" --mgmt "$mgmt" --json) ||
    fail "penstock bench $* failed: $j"
  echo "{\"run\": $run, \"test\": \"$test\", \"data\": $j}" >> "$OUT.tmp"
}
declare -A RW=([write4m]="write 1M" [read4m]="read 1M" [randread4k]="randread 4k" [randwrite4k]="randwrite 4k")
declare -A BEST

: > "$OUT.tmp"
for run in $(seq "$RUNS"); do
  echo "run $run/$RUNS" >&2
  for test in write4m read4m randread4k randwrite4k; do
    shapes=("${sweep[@]}")
    ((run > 1)) && shapes=("$MATCHED" "${BEST[$test]}")
    [[ ${shapes[1]:-} == "${shapes[0]}" ]] && shapes=("${shapes[0]}")
    for s in "${shapes[@]}"; do
      # shellcheck disable=SC2086
      fio_row "$test" ${RW[$test]} $s
    done
  done
  if ((run == 1)); then
    while read -r test jobs qd; do BEST[$test]="$jobs $qd"; done < <(/usr/bin/python3 "$REPORT" best-shapes "$OUT.tmp")
  fi
  bench_row write4m write --size 4M --concurrency 16 --objects "$OBJECTS" --no-cleanup
  bench_row read4m seq --size 4M --concurrency 16 --verify
  bench_row randread4k rand --size 4K --concurrency 64 --verify
  read -r ops0 batches0 < <(/usr/bin/python3 "$REPORT" commits "$mgmt" "$PENSTOCK")
  bench_row randwrite4k mixed --size 4K --concurrency 64 --write-percent 100
  read -r ops1 batches1 < <(/usr/bin/python3 "$REPORT" commits "$mgmt" "$PENSTOCK")
  per_flush=$(((ops1 - ops0 + (batches1 - batches0) / 2) / (batches1 - batches0 > 0 ? batches1 - batches0 : 1)))
  ((per_flush >= 1)) || per_flush=1
  # shellcheck disable=SC2086
  fio_row randwrite4k_fdatasync randwrite 4k ${BEST[randwrite4k]} --fdatasync="$per_flush"
  echo "{\"run\": $run, \"test\": \"memcpy\", \"data\": $("$MEMCPY" 4)}" >> "$OUT.tmp"
done
mv "$OUT.tmp" "$OUT"
/usr/bin/python3 "$REPORT" report "$OUT"
