#!/usr/bin/env python3
"""Penstock put/get of 1 GiB against fio on the same disk, in one run.

Starts a local cluster (3 targets, files in one directory), measures in the same directory
  fio: O_DIRECT sequential write and read, 1 MiB blocks, QD16, io_uring
  penstock: put and get of a 1 GiB file
repeats each --runs times and prints medians and ratios; the last line is
  penstock/fio put=R get=R
Usage: bench/put_get_vs_fio.py [--dir DIR] [--size-mib 1024] [--runs 3] [--transport tcp]
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PENSTOCK = os.environ.get("PENSTOCK_BIN", str(REPO / "build" / "src" / "cli" / "penstock"))


def fio(path, rw, size_mib):
    out = subprocess.run(
        ["fio", "--name=bench", f"--filename={path}", f"--size={size_mib}M", f"--rw={rw}",
         "--bs=1M", "--iodepth=16", "--ioengine=io_uring", "--direct=1", "--numjobs=1",
         "--output-format=json"], check=True, capture_output=True, text=True).stdout
    job = json.loads(out)["jobs"][0]
    side = job["write" if rw == "write" else "read"]
    return side["bw_bytes"] / 1e6  # MB/s


def penstock(args, env):
    out = subprocess.run([PENSTOCK, *args], check=True, capture_output=True, text=True, env=env).stdout
    return json.loads(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dir", help="directory on the disk to measure (default: a temp dir under /var/tmp)")
    ap.add_argument("--size-mib", type=int, default=1024)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--transport", default="tcp", help="UCX_TLS for the cluster and client")
    a = ap.parse_args()
    if not shutil.which("fio"):
        sys.exit("bench: fio is not installed; run scripts/bootstrap.sh")
    base = Path(a.dir or tempfile.mkdtemp(prefix="penstock-bench-", dir="/var/tmp"))
    base.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, UCX_TLS=a.transport)
    cluster = base / "cluster"
    cap = f"{max(2 * a.size_mib + 512, 1024)}M"
    mgmt = json.loads(subprocess.run(
        [PENSTOCK, "up", "--targets", "3", "--data-dir", str(cluster), "--base-port", "0",
         "--capacity", cap, "--json", "--log-level", "warn"],
        check=True, capture_output=True, text=True, env=env).stdout)["mgmt"]
    results = {"fio_write": [], "fio_read": [], "put": [], "get": []}
    try:
        penstock(["container", "create", "bench", "--mgmt", mgmt, "--json"], env)
        src = base / "src.bin"
        with open(src, "wb") as f:
            for _ in range(a.size_mib):
                f.write(os.urandom(1 << 20))
        for run in range(a.runs):
            fio_file = base / "fio.dat"
            results["fio_write"].append(fio(fio_file, "write", a.size_mib))
            results["fio_read"].append(fio(fio_file, "read", a.size_mib))
            fio_file.unlink()
            put = penstock(["put", str(src), "big", "--container", "bench", "--mgmt", mgmt, "--json"], env)
            get = penstock(["get", "big", str(base / "dst.bin"), "--container", "bench", "--mgmt", mgmt,
                            "--json"], env)
            (base / "dst.bin").unlink()
            results["put"].append(put["mb_per_s"])
            results["get"].append(get["mb_per_s"])
            print(f"run {run + 1}: fio write {results['fio_write'][-1]:.0f} MB/s, read "
                  f"{results['fio_read'][-1]:.0f} MB/s; penstock put {put['mb_per_s']:.0f} MB/s, "
                  f"get {get['mb_per_s']:.0f} MB/s", flush=True)
    finally:
        subprocess.run([PENSTOCK, "down", "--data-dir", str(cluster)], capture_output=True, env=env)
        if not a.dir:
            shutil.rmtree(base, ignore_errors=True)
    med = {k: statistics.median(v) for k, v in results.items()}
    print(f"medians of {a.runs} ({a.size_mib} MiB, UCX_TLS={a.transport}): fio write {med['fio_write']:.0f} MB/s, "
          f"fio read {med['fio_read']:.0f} MB/s, put {med['put']:.0f} MB/s, get {med['get']:.0f} MB/s")
    print(f"penstock/fio put={med['put'] / med['fio_write']:.2f} get={med['get'] / med['fio_read']:.2f}")


if __name__ == "__main__":
    main()
