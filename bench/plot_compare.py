#!/usr/bin/env python3
"""Chart of a bench/compare.sh run: Penstock as a fraction of its baseline per test (medians),
with the issue's goals marked. Usage: bench/plot_compare.py RESULTS.json OUT.png (RESULTS may be
several runs' files joined with cat: the medians are over all their repetitions)"""
import json
import statistics
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

GOALS = {"write4m": 0.8, "read4m": 0.9, "randread4k": 0.5, "randwrite4k": 0.4}


def main():
    rows = [json.loads(line) for line in open(sys.argv[1])]

    def med(test, f):
        return statistics.median(f(r["data"]) for r in rows if r["test"] == test)

    fio_bw = lambda d: (d["jobs"][0]["write"]["bw_bytes"] or d["jobs"][0]["read"]["bw_bytes"]) / 1e6
    fio_iops = lambda d: d["jobs"][0]["write"]["iops"] or d["jobs"][0]["read"]["iops"]
    ratios = {
        "write4m": med("write4m", lambda d: d["mb_per_s"]) / med("fio_write4m", fio_bw),
        "read4m": med("read4m", lambda d: d["mb_per_s"]) / med("fio_read4m", fio_bw),
        "randread4k": med("randread4k", lambda d: d["iops"]) / med("fio_randread4k", fio_iops),
        "randwrite4k": med("randwrite4k", lambda d: d["iops"]) / med("fio_randwrite4k", fio_iops),
    }
    names = list(ratios)
    fig, ax = plt.subplots(figsize=(7, 4))
    bars = ax.bar(names, [ratios[n] for n in names], color="#3b7dd8")
    for i, n in enumerate(names):
        ax.hlines(GOALS[n], i - 0.4, i + 0.4, colors="#d83b3b", linestyles="dashed",
                  label="goal" if i == 0 else None)
    for b, n in zip(bars, names):
        ax.annotate(f"{ratios[n]:.2f}", (b.get_x() + b.get_width() / 2, b.get_height()),
                    ha="center", va="bottom")
    runs = sum(r["test"] == "write4m" for r in rows)  # repetitions (several RESULTS files may be joined)
    ax.set_ylabel("penstock / fio (same disk, same run)")
    ax.set_title(f"penstock bench vs fio, 3 targets, medians of {runs} runs")
    ax.legend()
    fig.tight_layout()
    fig.savefig(sys.argv[2], dpi=100)


if __name__ == "__main__":
    main()
