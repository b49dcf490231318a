"""bench/protected_vs_none.sh (issue 36): a tiny run ends with the perf2 line, every figure there.

No timing thresholds: the script prints its goals as pass/miss and never fails on them; this
checks only that it runs end to end (both passes: 3 targets, then 6) and reports."""
import json
import math
import os
import subprocess

from conftest import PENSTOCK, REPO, run

KEYS = ("creates_vs_writes", "creates_rep3_vs_writes", "ec21_read_vs_none", "ec42_read_vs_none",
        "ec21_write_vs_none", "rep3_write_vs_none", "ec_cpu_s_per_gb")


def test_protected_vs_none_prints_perf2(tmp_path):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("UCX_", "PENSTOCK_", "ROUNDS", "PASSES", "OBJECTS", "CAPACITY", "BASE_PORT"))}
    out = tmp_path / "results.json"
    env.update(PENSTOCK_BIN=PENSTOCK, ROUNDS="1", OBJECTS="8", CAPACITY="512M", CAPACITY6="512M",
               BENCH_DIR=str(tmp_path), OUT=str(out))
    try:
        p = subprocess.run([str(REPO / "bench" / "protected_vs_none.sh"), "0.5"], env=env, capture_output=True,
                           text=True, timeout=240)
    finally:
        # A script killed by the timeout leaves its clusters: stop them by their records.
        for record in tmp_path.glob("penstock-pvn.*/pass*/cluster.json"):
            run(["down", "--data-dir", str(record.parent)], check=False, timeout=60)
    assert p.returncode == 0, p.stdout + p.stderr
    last = p.stdout.strip().splitlines()[-1]
    words = last.split()
    assert words[0] == "perf2", last
    figures = dict(w.split("=", 1) for w in words[1:])
    assert tuple(figures) == KEYS, last
    for k, v in figures.items():
        assert math.isfinite(float(v)) and float(v) >= 0, (k, last)
    # Every test of both passes ran once and succeeded; nothing is left behind.
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(rows) == 14 and all(r["data"]["errors"] == 0 for r in rows), rows
    assert {(r["pass"], r["test"], r["redundancy"]) for r in rows if r["pass"] == 2} == {
        (2, t, red) for t in ("write4m", "read4m") for red in ("none", "ec:4+2")}
    assert not list(tmp_path.glob("penstock-pvn.*")), "the script's data directory is left"
    assert "goal" in p.stdout and "pass 2 round 1/1" in p.stderr
