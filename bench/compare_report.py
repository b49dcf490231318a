#!/usr/bin/env python3
"""The figures of a bench/compare.sh run, and the small steps the script asks of Python.

  compare_report.py report RESULTS.json      the table, each run's figures, and the last line
  compare_report.py best-shapes RESULTS.json the fastest fio shape of each test in run 1, one
                                             line each: TEST JOBS IODEPTH
  compare_report.py wait-zeroing MGMT PENSTOCK  waits (up to 120 s) until the targets' background
                                             zeroing is done
  compare_report.py commits MGMT PENSTOCK    the targets' group commits so far: "OPS BATCHES"

RESULTS holds one JSON object a line: {"run", "test", "data"} where data is the JSON that
`penstock bench --json`, fio (--output-format=json, --group_reporting) or memcpy_bench printed;
fio's rows also carry "jobs", "iodepth" and "matched" (the shape with the bench's bytes in
flight); fio_randwrite4k_fdatasync's writes per flush are in fio's own "job options".
bench/plot_compare.py reads the same file through ratios().
"""
import json
import statistics
import subprocess
import sys
import time
import urllib.request

# test -> (unit, how to read a bench result); fio's rows are "fio_" + test.
TESTS = {
    "write4m": ("MB/s", lambda d: d["mb_per_s"]),
    "read4m": ("MB/s", lambda d: d["mb_per_s"]),
    "randread4k": ("IOPS", lambda d: d["iops"]),
    "randwrite4k": ("IOPS", lambda d: d["iops"]),
}


def fio_value(row):
    """MB/s for the sequential tests, IOPS for the random ones (fio groups its jobs' figures)."""
    job = row["data"]["jobs"][0]
    side = job["write"] if "write" in row["test"] else job["read"]
    return side["iops"] if "4k" in row["test"] else side["bw_bytes"] / 1e6


def shape(row):
    return f"{row['jobs']}x{row['iodepth']}"


def load(path):
    """The rows of RESULTS, their runs numbered 1, 2, ... across files joined with cat (each run
    starts with its fio_write4m rows)."""
    rows, run, prev = [], 0, None
    for line in open(path):
        if not line.strip():
            continue
        r = json.loads(line)
        if r["test"] == "fio_write4m" and prev != "fio_write4m":
            run += 1
        prev, r["run"] = r["test"], run
        rows.append(r)
    return rows


def runs(rows):
    return sorted({r["run"] for r in rows})


def fio_rows(rows, test, run=None):
    return [r for r in rows if r["test"] == "fio_" + test and (run is None or r["run"] == run)]


def best(rows, test, run):
    """The fastest fio row of `test` in `run`."""
    return max(fio_rows(rows, test, run), key=fio_value)


def figures(rows):
    """test -> dict of per-run lists: penstock, fio_best, fio_best_shape, fio_matched."""
    out = {}
    for test, (_, ours) in TESTS.items():
        f = {"penstock": [], "fio_best": [], "fio_best_shape": [], "fio_matched": [], "matched_shape": ""}
        for run in runs(rows):
            f["penstock"] += [ours(r["data"]) for r in rows if r["test"] == test and r["run"] == run]
            b = best(rows, test, run)
            f["fio_best"].append(fio_value(b))
            f["fio_best_shape"].append(shape(b))
            matched = [r for r in fio_rows(rows, test, run) if r.get("matched")]
            f["fio_matched"] += [fio_value(r) for r in matched]
            if matched:
                f["matched_shape"] = shape(matched[0])
        out[test] = f
    return out


def ratios(rows):
    """test -> median penstock / median of each run's best fio shape (the last line's ratios)."""
    return {t: statistics.median(f["penstock"]) / statistics.median(f["fio_best"]) for t, f in figures(rows).items()}


def cpu_vs_memcpy(rows):
    cpu = statistics.median(r["data"]["cpu_seconds_per_gb"] for r in rows if r["test"] == "read4m")
    mem = statistics.median(r["data"]["cpu_seconds_per_gb"] for r in rows if r["test"] == "memcpy")
    return cpu, mem


def report(path):
    rows = load(path)
    fig = figures(rows)
    med = statistics.median
    print(f"{'test':<13}{'penstock':>10}{'fio best':>10}{'shape':>7}{'ratio':>7}{'fio matched':>13}{'shape':>7}"
          f"{'ratio':>7}")
    for test, f in fig.items():
        unit = TESTS[test][0]
        p, b, m = med(f["penstock"]), med(f["fio_best"]), med(f["fio_matched"])
        best_shape = max(set(f["fio_best_shape"]), key=f["fio_best_shape"].count)
        print(f"{test:<13}{p:>10.0f}{b:>10.0f}{best_shape:>7}{p / b:>7.2f}{m:>13.0f}{f['matched_shape']:>7}"
              f"{p / m:>7.2f}  {unit}")
    cpu, mem = cpu_vs_memcpy(rows)
    print(f"{'cpu/GB read':<13}{cpu:>10.3f}{mem:>10.3f} memcpy{cpu / mem:>8.2f}  s/GB")
    print("per run (penstock | fio best, shape | fio matched):")
    for test, f in fig.items():
        bests = " / ".join(f"{v:.0f} {s}" for v, s in zip(f["fio_best"], f["fio_best_shape"]))
        print(f"  {test:<12}{' / '.join(f'{v:.0f}' for v in f['penstock'])} | {bests} | "
              f"{' / '.join(f'{v:.0f}' for v in f['fio_matched'])}")
    first = runs(rows)[0]
    print(f"fio sweep, run {first} (jobs x queue depth per job: figure):")
    for test in TESTS:
        print(f"  {test:<12}" + "  ".join(f"{shape(r)}: {fio_value(r):.0f}" for r in fio_rows(rows, test, first)))
    priced = [r for r in rows if r["test"] == "fio_randwrite4k_fdatasync"]
    if priced:
        v = med(fio_value(r) for r in priced)
        p = med(fig["randwrite4k"]["penstock"])
        every = med(int(r["data"]["jobs"][0]["job options"]["fdatasync"]) for r in priced)
        print(f"durability priced: fio randwrite4k at {shape(priced[0])} with an fdatasync every {every:.0f} "
              f"writes (the targets' mean group commit) {v:.0f} IOPS; penstock/fio_fdatasync "
              f"randwrite4k={p / v:.2f}")
    for t in ("read4m", "randread4k"):  # Client::read_path_stats: bytes the client copied per byte read
        copies = med(r["data"].get("read_bytes_copied", 0) / max(1, r["data"].get("read_bytes", 0))
                     for r in rows if r["test"] == t)
        verified = sum(r["data"].get("verified_bytes", 0) for r in rows if r["test"] == t)
        mismatches = sum(r["data"].get("mismatches", 0) for r in rows if r["test"] == t)
        print(f"{t + ':':<13}{copies:.3f} client copies per byte delivered; --verify checked "
              f"{verified / 1e9:.1f} GB, {mismatches} blocks differed")
    print("penstock/fio " + " ".join(f"{t}={r:.2f}" for t, r in ratios(rows).items()) +
          f" cpu_per_gb_vs_memcpy={cpu / mem:.2f}")


def best_shapes(path):
    rows = load(path)
    first = runs(rows)[0]
    for test in TESTS:
        b = best(rows, test, first)
        print(test, b["jobs"], b["iodepth"])


def metrics(mgmt, penstock):
    """Each target's /metrics, as {name: value} (gauges and counters without labels)."""
    status = json.loads(subprocess.run([penstock, "status", "--mgmt", mgmt, "--json"], check=True,
                                       capture_output=True, text=True).stdout)
    out = []
    for t in status["targets"]:
        text = urllib.request.urlopen(f"http://{t['metrics']}/metrics", timeout=5).read().decode()
        out.append({p[0]: float(p[1]) for p in (line.split() for line in text.splitlines())
                    if len(p) == 2 and not p[0].startswith("#")})
    return out


def wait_zeroing(mgmt, penstock):
    deadline = time.time() + 120
    pending = lambda: sum(m.get("penstock_engine_zero_pending_segments", 0) for m in metrics(mgmt, penstock))
    while pending() > 0 and time.time() < deadline:
        time.sleep(0.5)
    left = pending()
    if left:
        print(f"warning: background zeroing still has {left:.0f} segments to write", file=sys.stderr)


def commits(mgmt, penstock):
    m = metrics(mgmt, penstock)
    print(int(sum(t.get("penstock_engine_commit_ops", 0) for t in m)),
          int(sum(t.get("penstock_engine_commit_batches", 0) for t in m)))


if __name__ == "__main__":
    {"report": report, "best-shapes": best_shapes, "wait-zeroing": wait_zeroing,
     "commits": commits}[sys.argv[1]](*sys.argv[2:])
