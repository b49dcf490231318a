#!/usr/bin/env bash
# engine_vs_fio.sh — engine-level throughput (no network) against fio on the same filesystem.
#
# Usage: bench/engine_vs_fio.sh [DIR] [REPS]
#   DIR   scratch directory on the disk under test (default: a new ./.engine_vs_fio.XXXXXX in the repository);
#         fio's file and the engine's data file and index both live there, and are removed.
#   REPS  repetitions; the median of each figure is reported (default 3).
# Env: ENGINE_BENCH (default build-engine/src/engine/engine_bench, else build/...),
#      SEQ_SIZE (bytes, default 1 GiB), RAND_SIZE (default 256 MiB), SECONDS_RAND (default 5),
#      ENGINE_ARGS (more engine_bench options, e.g. "--zero-rate 0" to turn background zeroing off).
#
# Workloads, both sides io_uring + O_DIRECT:
#   seq_write   1 MiB writes, 16 in flight      seq_read    1 MiB reads, 16 in flight
#   randwrite4k 4 KiB writes, 64 in flight      randread4k  4 KiB reads, 64 in flight
# The engine runs N threads of synchronous Engine calls (its API blocks, so threads = queue
# depth). The random workloads also run through the asynchronous API from one thread keeping
# 64 calls in flight (WriteRangeAsync / TryReadRangeAsync, as a target's transport threads call
# them), printed on a line of their own. Engine writes are durable when acknowledged (group
# commit: data and journal record, one fdatasync); fio's are plain O_DIRECT writes with no
# flush, so the write ratios price durability.
# A line before the last prices it apart: fio's random writes again, with an fdatasync every N
# writes, N the engine's mean group commit (writes per flush) in the same rep. fio still keeps
# writing while its flushes run (~1.7 at a time), where each engine write waits for its own.
# Last line: engine/fio seq_write=R seq_read=R randread4k=R randwrite4k=R
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
DIR=${1:-$(mktemp -d "$ROOT/.engine_vs_fio.XXXXXX")}
REPS=${2:-3}
BENCH=${ENGINE_BENCH:-}
if [[ -z $BENCH ]]; then
  for b in "$ROOT/build-engine/src/engine/engine_bench" "$ROOT/build/src/engine/engine_bench"; do
    [[ -x $b ]] && BENCH=$b && break
  done
fi
[[ -x ${BENCH:-} ]] || { echo "engine_bench not built; set ENGINE_BENCH" >&2; exit 1; }
command -v fio >/dev/null || { echo "fio not installed" >&2; exit 1; }
SEQ_SIZE=${SEQ_SIZE:-$((1 << 30))}
RAND_SIZE=${RAND_SIZE:-$((256 << 20))}
SECONDS_RAND=${SECONDS_RAND:-5}
mkdir -p "$DIR"
trap 'rm -rf "$DIR"' EXIT
RESULTS=$DIR/results.txt
: > "$RESULTS"

engine() {  # name mode bs qd size subdir
  local out
  mkdir -p "$DIR/$6"
  out=$("$BENCH" --dir "$DIR/$6" --mode "$2" --bs "$3" --qd "$4" --size "$5" \
        --seconds "$SECONDS_RAND" ${ENGINE_ARGS:-} 2>/dev/null | tail -1)
  echo "  engine $1: $out" >&2
  python3 -c 'import json,sys; d=json.loads(sys.argv[1]); print(sys.argv[2], d["mb_s"] if sys.argv[3]=="bw" else d["iops"])' \
    "$out" "engine_$1" "$7" >> "$RESULTS"
  # Writes per group commit (one device flush each), for the like-for-like fio run below.
  python3 -c 'import json,sys; d=json.loads(sys.argv[1]); print(sys.argv[2], d["ops"] / max(1, d["commit_batches"]))' \
    "$out" "batch_$1" >> "$RESULTS"
}

fio_run() {  # name rw bs qd size metric [extra fio option] [file, default fio.dat]
  local out
  out=$(fio --name="$1" --filename="$DIR/${8:-fio.dat}" --size="$5" --ioengine=io_uring --direct=1 \
        --rw="$2" --bs="$3" --iodepth="$4" --numjobs=1 --group_reporting ${7:-} \
        $([[ $2 == rand* ]] && echo "--time_based --runtime=$SECONDS_RAND") \
        --output-format=json 2>/dev/null)
  python3 -c '
import json,sys
j=json.loads(sys.argv[1])["jobs"][0]; side="write" if "write" in sys.argv[3] else "read"
v=j[side]["bw_bytes"]/1e6 if sys.argv[4]=="bw" else j[side]["iops"]
print("  fio "+sys.argv[2]+": %.1f" % v, file=sys.stderr); print("fio_"+sys.argv[2], v)' \
    "$out" "$1" "$2" "$6" >> "$RESULTS"
}

for rep in $(seq 1 "$REPS"); do
  echo "rep $rep" >&2
  rm -rf "$DIR/seq" "$DIR/rand" "$DIR/fio.dat"
  engine seq_write seqwrite $((1 << 20)) 16 "$SEQ_SIZE" seq bw
  engine seq_read seqread $((1 << 20)) 16 "$SEQ_SIZE" seq bw
  engine randread4k randread 4096 64 "$RAND_SIZE" rand iops
  engine randwrite4k randwrite 4096 64 "$RAND_SIZE" rand iops
  engine randread4k_async randread-async 4096 64 "$RAND_SIZE" rand iops
  engine randwrite4k_async randwrite-async 4096 64 "$RAND_SIZE" rand iops
  rm -rf "$DIR/seq" "$DIR/rand"
  fio_run seq_write write 1M 16 "$SEQ_SIZE" bw
  fio_run seq_read read 1M 16 "$SEQ_SIZE" bw
  fio_run randread4k randread 4k 64 "$RAND_SIZE" iops
  fio_run randwrite4k randwrite 4k 64 "$RAND_SIZE" iops
  # Like for like: fio's writes flushed as often as the engine's (fdatasync every N writes, N
  # the engine's mean writes per group commit in this rep), into a new file that fio
  # fallocates as the engine's data file is (the first write to a block then also converts an
  # unwritten extent, and the flush commits that). Printed, not in the last line.
  batch=$(awk '$1 == "batch_randwrite4k" { n = $2 } END { printf "%d", (n < 1 ? 1 : n) + 0.5 }' "$RESULTS")
  rm -f "$DIR/fio_flushed.dat"
  fio_run randwrite4k_flushed randwrite 4k 64 "$RAND_SIZE" iops "--fdatasync=$batch" fio_flushed.dat
  rm -f "$DIR/fio_flushed.dat"
done

python3 - "$RESULTS" <<'PY'
import statistics, sys
vals = {}
for line in open(sys.argv[1]):
    k, v = line.split()
    vals.setdefault(k, []).append(float(v))
med = {k: statistics.median(v) for k, v in vals.items()}
names = ["seq_write", "seq_read", "randread4k", "randwrite4k"]
unit = {"seq_write": "MB/s", "seq_read": "MB/s", "randread4k": "IOPS", "randwrite4k": "IOPS"}
for n in names:
    print(f"{n:12s} engine {med['engine_'+n]:10.1f} {unit[n]:5s} fio {med['fio_'+n]:10.1f} {unit[n]}")
if "engine_randwrite4k_async" in med:
    print(f"asynchronous API, one thread, 64 in flight: randread4k {med['engine_randread4k_async']:.1f} IOPS "
          f"(/fio {med['engine_randread4k_async']/med['fio_randread4k']:.2f}), randwrite4k "
          f"{med['engine_randwrite4k_async']:.1f} IOPS (/fio {med['engine_randwrite4k_async']/med['fio_randwrite4k']:.2f})")
if "fio_randwrite4k_flushed" in med:
    print(f"like for like: fio flushing every {med['batch_randwrite4k']:.0f} writes (the engine's group "
          f"commit) {med['fio_randwrite4k_flushed']:.1f} IOPS; engine/fio_flushed "
          f"randwrite4k={med['engine_randwrite4k']/med['fio_randwrite4k_flushed']:.2f}")
print("engine/fio " + " ".join(f"{n}={med['engine_'+n]/med['fio_'+n]:.2f}" for n in names))
PY
