#!/usr/bin/env bash
# Penstock end to end against this machine's limits, in one run: a fresh `penstock up`
# (3 targets on files in one directory), fio (io_uring, O_DIRECT) on a file in the same
# directory, `penstock bench`, and memcpy's CPU cost. Repeats RUNS times (default 3) and prints
# a table of medians; the last line is
#   penstock/fio write4m=R read4m=R randread4k=R randwrite4k=R cpu_per_gb_vs_memcpy=R
# (4 MiB: fio sequential 1 MiB QD16 vs bench 4 MiB concurrency 16; 4 KiB: fio random QD64 vs
# bench concurrency 64; the last: client CPU seconds per GB read / memcpy CPU seconds per GB).
# Raw JSON of every run goes to $OUT (default bench/results/compare-<date>.json) for
# bench/plot_compare.py.
# Usage: bench/compare.sh [RUNS] [SECONDS_PER_TEST]
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
PENSTOCK=${PENSTOCK_BIN:-$BUILD/src/cli/penstock}
MEMCPY=${MEMCPY_BENCH:-$BUILD/src/cli/memcpy_bench}
RUNS=${1:-3}
SECS=${2:-10}
export UCX_TLS=${UCX_TLS:-tcp}
OUT=${OUT:-bench/results/compare-$(date +%Y%m%d-%H%M%S).json}
mkdir -p "$(dirname "$OUT")"
dir=$(mktemp -d -p "${BENCH_DIR:-/var/tmp}" penstock-compare.XXXXXX)
trap '"$PENSTOCK" down --data-dir "$dir/cluster" >/dev/null 2>&1 || true; rm -rf "$dir"' EXIT
mgmt=$("$PENSTOCK" up --targets 3 --data-dir "$dir/cluster" --base-port 0 --capacity 4G --log-level warn 2>/dev/null)
"$PENSTOCK" container create cmp --mgmt "$mgmt" >/dev/null
# New targets write zeros over their fallocated data files in the background (unpaced while
# idle, seconds): wait for that, so it does not share the disk with fio's baselines.
"$PENSTOCK" status --mgmt "$mgmt" --json | /usr/bin/python3 -c '
import json, sys, time, urllib.request
addrs = [t["metrics"] for t in json.load(sys.stdin)["targets"]]
def pending(a):
    for line in urllib.request.urlopen(f"http://{a}/metrics", timeout=5).read().decode().splitlines():
        if line.startswith("penstock_engine_zero_pending_segments "):
            return float(line.split()[1])
    return 0
deadline = time.time() + 120
while sum(pending(a) for a in addrs) > 0 and time.time() < deadline:
    time.sleep(0.5)
left = sum(pending(a) for a in addrs)
if left:
    print(f"warning: background zeroing still has {left:.0f} segments to write", file=sys.stderr)
'

fio_json() {  # rw bs iodepth size -> one line of JSON
  fio --name=cmp --filename="$dir/fio.dat" --size="$4" --rw="$1" --bs="$2" --iodepth="$3" \
      --ioengine=io_uring --direct=1 --runtime="$SECS" --output-format=json --output="$dir/fio.json" >/dev/null
  /usr/bin/python3 -c 'import json, sys; print(json.dumps(json.load(open(sys.argv[1]))))' "$dir/fio.json"
}
bench_json() { "$PENSTOCK" bench "$@" --container cmp --seconds "$SECS" --mgmt "$mgmt" --json; }

: > "$OUT.tmp"
for run in $(seq "$RUNS"); do
  echo "run $run/$RUNS" >&2
  {
    echo "{\"run\": $run, \"test\": \"fio_write4m\", \"data\": $(fio_json write 1M 16 2G)}"
    echo "{\"run\": $run, \"test\": \"fio_read4m\", \"data\": $(fio_json read 1M 16 2G)}"
    echo "{\"run\": $run, \"test\": \"fio_randread4k\", \"data\": $(fio_json randread 4k 64 2G)}"
    echo "{\"run\": $run, \"test\": \"fio_randwrite4k\", \"data\": $(fio_json randwrite 4k 64 2G)}"
    rm -f "$dir/fio.dat"
    echo "{\"run\": $run, \"test\": \"write4m\", \"data\": $(bench_json write --size 4M --concurrency 16 --objects 256 --no-cleanup)}"
    echo "{\"run\": $run, \"test\": \"read4m\", \"data\": $(bench_json seq --size 4M --concurrency 16)}"
    echo "{\"run\": $run, \"test\": \"randread4k\", \"data\": $(bench_json rand --size 4K --concurrency 64)}"
    echo "{\"run\": $run, \"test\": \"randwrite4k\", \"data\": $(bench_json mixed --size 4K --concurrency 64 --write-percent 100)}"
    echo "{\"run\": $run, \"test\": \"memcpy\", \"data\": $("$MEMCPY" 4)}"
  } >> "$OUT.tmp"
done
mv "$OUT.tmp" "$OUT"
/usr/bin/python3 - "$OUT" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
def vals(test, f):
    return [f(r["data"]) for r in rows if r["test"] == test]
def med(test, f):
    return statistics.median(vals(test, f))
def spread(test, f, fmt):  # every run's figure, in run order: the machine's noise at a glance
    return " / ".join(fmt.format(v) for v in vals(test, f))
fio_bw = lambda d: (d["jobs"][0]["write"]["bw_bytes"] or d["jobs"][0]["read"]["bw_bytes"]) / 1e6
fio_iops = lambda d: d["jobs"][0]["write"]["iops"] or d["jobs"][0]["read"]["iops"]
bench_bw, bench_iops = (lambda d: d["mb_per_s"]), (lambda d: d["iops"])
tests = {"write4m": (bench_bw, fio_bw, "MB/s"), "read4m": (bench_bw, fio_bw, "MB/s"),
         "randread4k": (bench_iops, fio_iops, "IOPS"), "randwrite4k": (bench_iops, fio_iops, "IOPS")}
p = {k: (med(k, ours), med("fio_" + k, theirs), unit) for k, (ours, theirs, unit) in tests.items()}
cpu = med("read4m", lambda d: d["cpu_seconds_per_gb"])
mem = med("memcpy", lambda d: d["cpu_seconds_per_gb"])
print(f"{'test':<14}{'penstock':>12}{'baseline':>12}{'ratio':>8}")
for k, (a, b, unit) in p.items():
    print(f"{k:<14}{a:>12.0f}{b:>12.0f}{a / b:>8.2f}  {unit} (fio)")
print(f"{'cpu/GB read':<14}{cpu:>12.3f}{mem:>12.3f}{cpu / mem:>8.2f}  s/GB (memcpy)")
print("per run (penstock | baseline):")
for k, (ours, theirs, _) in tests.items():
    print(f"  {k:<12}{spread(k, ours, '{:.0f}')} | {spread('fio_' + k, theirs, '{:.0f}')}")
print(f"  {'cpu/GB read':<12}{spread('read4m', lambda d: d['cpu_seconds_per_gb'], '{:.3f}')} | "
      f"{spread('memcpy', lambda d: d['cpu_seconds_per_gb'], '{:.3f}')}")
for t in ("read4m", "randread4k"):  # Client::read_path_stats: bytes the client copied per byte read
    copies = med(t, lambda d: d.get("read_bytes_copied", 0) / max(1, d.get("read_bytes", 0)))
    print(f"{t + ' copies':<14}{copies:>12.3f}  client copies per byte delivered")
print("penstock/fio " + " ".join(f"{k}={a / b:.2f}" for k, (a, b, _) in p.items()) +
      f" cpu_per_gb_vs_memcpy={cpu / mem:.2f}")
PY
