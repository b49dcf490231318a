#!/usr/bin/env python3
"""The figures of a bench/protected_vs_none.sh run (issue 36's goals, each beside its ratio).

  protected_vs_none_report.py report RESULTS.json   the table, each round's figures, and last
                                                    the perf2 line
  protected_vs_none_report.py brief ROW_JSON        one short summary of a row (progress lines)

RESULTS holds one JSON object a line: {"pass", "round", "test", "redundancy", "data"} where data
is what `penstock bench --json` printed. Tests: create4k (`bench write --size 4K`, a new object
per op), write4k (`bench mixed --size 4K --write-percent 100` into the objects create4k left in
the same container), write4m, read4m (`bench seq`), randread4k (`bench rand --size 4K`).
Pass 1 runs on 3 targets, pass 2 on a fresh cluster of 6 (none and ec:4+2).

Ratios are of medians over the rounds (protected's median over none's median of the same pass).
Goals are printed, never enforced: a miss says "miss" and the script still succeeds.
"""
import json
import math
import statistics
import sys

NAN = float("nan")


def load(path):
    return [json.loads(line) for line in open(path) if line.strip()]


def values(rows, pass_, test, red, key):
    return [r["data"][key] for r in rows if r["pass"] == pass_ and r["test"] == test and r["redundancy"] == red]


def med(rows, pass_, test, red, key):
    v = values(rows, pass_, test, red, key)
    return statistics.median(v) if v else NAN


def ratio(a, b):
    return a / b if b and not math.isnan(a) and not math.isnan(b) else NAN


def verdict(r, goal):
    """goal: (">=", x) or ("<=", x); "pass", "miss" or "-" when there is no figure."""
    if goal is None:
        return ""
    if math.isnan(r):
        return "-"
    op, x = goal
    return "pass" if (r >= x if op == ">=" else r <= x) else "miss"


def fmt(x, digits=0):
    return "-" if math.isnan(x) else f"{x:.{digits}f}"


def ms(us):
    return "-" if math.isnan(us) else f"{us / 1000:.1f}"


def perf2(rows):
    """The seven figures of the last line."""
    m = lambda p, t, red, k: med(rows, p, t, red, k)  # noqa: E731
    return {
        "creates_vs_writes": ratio(m(1, "create4k", "none", "iops"), m(1, "write4k", "none", "iops")),
        "creates_rep3_vs_writes": ratio(m(1, "create4k", "rep:3", "iops"), m(1, "write4k", "rep:3", "iops")),
        "ec21_read_vs_none": ratio(m(1, "read4m", "ec:2+1", "mb_per_s"), m(1, "read4m", "none", "mb_per_s")),
        "ec42_read_vs_none": ratio(m(2, "read4m", "ec:4+2", "mb_per_s"), m(2, "read4m", "none", "mb_per_s")),
        "ec21_write_vs_none": ratio(m(1, "write4m", "ec:2+1", "mb_per_s"), m(1, "write4m", "none", "mb_per_s")),
        "rep3_write_vs_none": ratio(m(1, "write4m", "rep:3", "mb_per_s"), m(1, "write4m", "none", "mb_per_s")),
        "ec_cpu_s_per_gb": m(1, "write4m", "ec:2+1", "cpu_seconds_per_gb"),
    }


def report(path):
    rows = load(path)
    rounds = max((r["round"] for r in rows), default=0)
    passes = sorted({r["pass"] for r in rows})
    secs = statistics.median(r["data"]["seconds"] for r in rows) if rows else NAN
    print(f"medians of {rounds} round(s), about {fmt(secs, 1)} s a test; pass 1: 3 targets"
          + (", pass 2: a fresh cluster of 6 targets" if 2 in passes else " (pass 2 skipped)"))
    m = lambda p, t, red, k: med(rows, p, t, red, k)  # noqa: E731
    out = []  # (label, figure, against, ratio name, ratio, goal)

    def add(label, figure, against="", name="", r=NAN, goal=None):
        out.append((label, figure, against, name, r, goal))

    def mbs(p, t, red):
        return f"{fmt(m(p, t, red, 'mb_per_s'))} MB/s"

    def lat(p, t, red):
        return f"p50 {ms(m(p, t, red, 'p50_us'))} ms, p99 {ms(m(p, t, red, 'p99_us'))} ms"

    def iops(p, t, red):
        return f"{fmt(m(p, t, red, 'iops'))} IOPS, p50 {ms(m(p, t, red, 'p50_us'))} ms"

    # Pass 1: 3 targets.
    add("none: 4 MiB write", f"{mbs(1, 'write4m', 'none')}, {fmt(m(1, 'write4m', 'none', 'cpu_seconds_per_gb'), 2)} "
        "s CPU/GB")
    add("none: 4 MiB seq read", f"{mbs(1, 'read4m', 'none')}, {lat(1, 'read4m', 'none')}")
    add("none: 4 KiB random read", iops(1, "randread4k", "none"))
    for red, name in (("none", "creates_vs_writes"), ("rep:3", "creates_rep3_vs_writes")):
        add(f"{red}: 4 KiB creates / writes", iops(1, "create4k", red), iops(1, "write4k", red), name,
            ratio(m(1, "create4k", red, "iops"), m(1, "write4k", red, "iops")), (">=", 0.5))
    add("rep:3: 4 MiB write / none", mbs(1, "write4m", "rep:3"), mbs(1, "write4m", "none"), "rep3_write_vs_none",
        ratio(m(1, "write4m", "rep:3", "mb_per_s"), m(1, "write4m", "none", "mb_per_s")), (">=", 0.3))
    add("ec:2+1: 4 MiB write / none", mbs(1, "write4m", "ec:2+1"), mbs(1, "write4m", "none"), "ec21_write_vs_none",
        ratio(m(1, "write4m", "ec:2+1", "mb_per_s"), m(1, "write4m", "none", "mb_per_s")), (">=", 0.6))
    add("ec:2+1: client CPU per GB written", f"{fmt(m(1, 'write4m', 'ec:2+1', 'cpu_seconds_per_gb'), 2)} s",
        f"none {fmt(m(1, 'write4m', 'none', 'cpu_seconds_per_gb'), 2)} s", "ec_cpu_s_per_gb",
        m(1, "write4m", "ec:2+1", "cpu_seconds_per_gb"), ("<=", 0.3))
    reads = [(1, "ec:2+1", "ec21_read_vs_none")]
    if 2 in passes:
        reads.append((2, "ec:4+2", "ec42_read_vs_none"))
    for p, red, name in reads:
        tag = " (6 targets)" if p == 2 else ""
        add(f"{red}: 4 MiB seq read / none{tag}", f"{mbs(p, 'read4m', red)}, p50 {ms(m(p, 'read4m', red, 'p50_us'))} ms",
            f"{mbs(p, 'read4m', 'none')}, p50 {ms(m(p, 'read4m', 'none', 'p50_us'))} ms", name,
            ratio(m(p, "read4m", red, "mb_per_s"), m(p, "read4m", "none", "mb_per_s")), (">=", 0.8))
        add(f"{red}: 4 MiB seq read p99 / none's{tag}", f"{ms(m(p, 'read4m', red, 'p99_us'))} ms",
            f"{ms(m(p, 'read4m', 'none', 'p99_us'))} ms", "p99 ratio",
            ratio(m(p, "read4m", red, "p99_us"), m(p, "read4m", "none", "p99_us")), ("<=", 2.0))
    if 2 in passes:
        add("ec:4+2: 4 MiB write / none (6 targets)", mbs(2, "write4m", "ec:4+2"), mbs(2, "write4m", "none"),
            "ec42_write_vs_none", ratio(m(2, "write4m", "ec:4+2", "mb_per_s"), m(2, "write4m", "none", "mb_per_s")))

    w = [max(len(x[i]) for x in out) for i in range(4)]
    print(f"{'figure':<{w[0]}}  {'measured':<{w[1]}}  {'against':<{w[2]}}  {'ratio':>{w[3] + 7}}  goal")
    for label, figure, against, name, r, goal in out:
        g = f"{goal[0]} {goal[1]:g}  {verdict(r, goal)}" if goal else ""
        rt = f"{name} {fmt(r, 2):>6}" if name else ""
        print(f"{label:<{w[0]}}  {figure:<{w[1]}}  {against:<{w[2]}}  {rt:>{w[3] + 7}}  {g}".rstrip())

    print("per round (MB/s for 4 MiB, IOPS for 4 KiB; client CPU s/GB for writes):")
    seen = []
    for r in rows:
        k = (r["pass"], r["test"], r["redundancy"])
        if k not in seen:
            seen.append(k)
    for p, t, red in seen:
        key = "mb_per_s" if t.endswith("4m") else "iops"
        v = " / ".join(fmt(x) for x in values(rows, p, t, red, key))
        cpu = ""
        if t == "write4m":
            cpu = "  cpu " + " / ".join(fmt(x, 2) for x in values(rows, p, t, red, "cpu_seconds_per_gb"))
        objects = ""
        if t == "create4k":
            objects = "  objects " + " / ".join(str(x) for x in values(rows, p, t, red, "objects"))
        print(f"  pass {p} {t:<11}{red:<7} {v}{cpu}{objects}")
    print("perf2 " + " ".join(f"{k}={v:.3f}" for k, v in perf2(rows).items()))  # nan: not measured


def brief(row_json):
    r = json.loads(row_json)
    d = r["data"]
    fig = f"{d['mb_per_s']:.0f} MB/s" if r["test"].endswith("4m") else f"{d['iops']:.0f} IOPS"
    print(f"{fig}, p50 {d['p50_us'] / 1000:.1f} ms, p99 {d['p99_us'] / 1000:.1f} ms")


if __name__ == "__main__":
    {"report": report, "brief": brief}[sys.argv[1]](*sys.argv[2:])
