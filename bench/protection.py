#!/usr/bin/python3
"""Data protection figures in one run (issue 6): 4 MiB object write and read throughput for
none, rep:2, ec:2+1 and ec:4+2 side by side on a fresh `penstock up` (6 targets on files in one
directory), ISA-L's raw encode speed as the bound (erasure_bench), degraded-read throughput with
one target killed, and rebuild MB/s after that target is declared lost.

Repeats RUNS times (fresh cluster each) and prints medians; the last line is
  protection write_mbs none=W rep2=W ec21=W ec42=W read_mbs none=R ... degraded_read_mbs rep2=D
  ec21=D ec42=D rebuild_mbs=B isal_encode_mbs ec21=E ec42=E
Usage: bench/protection.py [RUNS] [SECONDS_PER_TEST]
"""
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = os.environ.get("BUILD", os.path.join(REPO, "build"))
PENSTOCK = os.environ.get("PENSTOCK_BIN", os.path.join(BUILD, "src/cli/penstock"))
EC_BENCH = os.environ.get("ERASURE_BENCH", os.path.join(BUILD, "src/codec/erasure_bench"))
SCHEMES = [("none", "none"), ("rep2", "rep:2"), ("ec21", "ec:2+1"), ("ec42", "ec:4+2")]


def run(*args, check=True):
    p = subprocess.run([PENSTOCK, *args], capture_output=True, text=True, env=ENV, timeout=600)
    if check and p.returncode != 0:
        sys.exit(f"penstock {' '.join(args)} failed: {p.stderr.strip()}")
    return p


def bench(mgmt, mode, container, secs):
    p = run("bench", mode, "--container", container, "--size", "4M", "--concurrency", "16", "--seconds",
            str(secs), "--objects", "64", "--no-cleanup", "--mgmt", mgmt, "--json", check=False)
    r = json.loads(p.stdout)
    if r.get("errors"):
        print(f"  warning: {mode} on {container}: {r['errors']} errors ({r.get('first_error')})", file=sys.stderr)
    return r["mb_per_s"]


def one_run(secs):
    d = tempfile.mkdtemp(prefix="penstock-protection.", dir=os.environ.get("BENCH_DIR", "/var/tmp"))
    out = {}
    try:
        mgmt = run("up", "--targets", "6", "--data-dir", f"{d}/c", "--base-port", "0", "--capacity", "3G",
                   "--heartbeat-timeout-ms", "2000", "--repair-interval-ms", "1000", "--log-level", "warn").stdout.strip()
        for key, scheme in SCHEMES:
            run("container", "create", key, "--redundancy", scheme, "--mgmt", mgmt)
            out[f"write_{key}"] = bench(mgmt, "write", key, secs)
            out[f"read_{key}"] = bench(mgmt, "seq", key, secs)
        # One target killed: reads of the protected containers degrade.
        rec = json.load(open(f"{d}/c/cluster.json"))
        victim = next(x for x in rec["daemons"] if x["name"] == "target-3")
        os.kill(victim["pid"], signal.SIGKILL)
        time.sleep(0.5)
        for key, _ in SCHEMES[1:]:
            out[f"degraded_read_{key}"] = bench(mgmt, "seq", key, secs)
        # Declared lost: repair rebuilds its shards on the other five.
        st = json.loads(run("status", "--mgmt", mgmt, "--json").stdout)
        tid = next(t["id"] for t in st["targets"] if t["address"] == victim["address"])
        epoch = json.loads(run("out", str(tid), "--mgmt", mgmt, "--json").stdout)["epoch"]
        deadline = time.time() + 600
        while time.time() < deadline:
            r = json.loads(run("status", "--mgmt", mgmt, "--json").stdout)["repair"]
            if r["last_active_epoch"] >= epoch:
                out["rebuild"] = r["last_active_bytes_per_second"] / 1e6
                out["rebuild_bytes"] = r["last_active_bytes"]
                break
            time.sleep(0.5)
    finally:
        subprocess.run([PENSTOCK, "down", "--data-dir", f"{d}/c"], capture_output=True, env=ENV)
        shutil.rmtree(d, ignore_errors=True)
    return out


def main():
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    secs = float(sys.argv[2]) if len(sys.argv) > 2 else 5
    results = []
    for i in range(runs):
        print(f"run {i + 1}/{runs}", file=sys.stderr)
        results.append(one_run(secs))
    raw = [json.loads(l) for l in subprocess.run([EC_BENCH, "1"], capture_output=True, text=True,
                                                  check=True).stdout.splitlines()]
    isal = {f"ec{r['k']}{r['m']}": r["encode_mb_per_s"] for r in raw}

    def med(k):
        vals = [r[k] for r in results if k in r]
        return statistics.median(vals) if vals else float("nan")

    print(f"{'scheme':8} {'write MB/s':>11} {'read MB/s':>10} {'degraded read':>14}")
    for key, scheme in SCHEMES:
        deg = f"{med('degraded_read_' + key):14.0f}" if key != "none" else f"{'-':>14}"
        print(f"{scheme:8} {med('write_' + key):11.0f} {med('read_' + key):10.0f} {deg}")
    print(f"rebuild after a lost target: {med('rebuild'):.0f} MB/s ({med('rebuild_bytes') / 1e6:.0f} MB rewritten)")
    print("ISA-L raw encode, one thread: " + ", ".join(f"{r['k']}+{r['m']} {r['encode_mb_per_s']:.0f} MB/s"
                                                         for r in raw))
    print("protection write_mbs " + " ".join(f"{k}={med('write_' + k):.0f}" for k, _ in SCHEMES) +
          " read_mbs " + " ".join(f"{k}={med('read_' + k):.0f}" for k, _ in SCHEMES) +
          " degraded_read_mbs " + " ".join(f"{k}={med('degraded_read_' + k):.0f}" for k, _ in SCHEMES[1:]) +
          f" rebuild_mbs={med('rebuild'):.0f} isal_encode_mbs ec21={isal.get('ec21', 0):.0f} ec42={isal.get('ec42', 0):.0f}")


ENV = dict(os.environ)
ENV.setdefault("UCX_TLS", "tcp")
ENV.pop("PENSTOCK_MGMT", None)

if __name__ == "__main__":
    main()
