#!/usr/bin/env python3
"""Chart of a bench/compare.sh run: Penstock as a fraction of fio's fastest shape per test
(medians, as the script's last line), with the issue's goals marked. Usage:
bench/plot_compare.py RESULTS.json OUT.png (RESULTS may be several runs' files joined with cat:
the medians are over all their repetitions)"""
import os
import sys

import matplotlib

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from compare_report import load, ratios, runs  # noqa: E402

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

GOALS = {"write4m": 0.8, "read4m": 0.9, "randread4k": 0.5, "randwrite4k": 0.4}


def main():
    rows = load(sys.argv[1])
    r = ratios(rows)
    names = list(r)
    fig, ax = plt.subplots(figsize=(7, 4))
    bars = ax.bar(names, [r[n] for n in names], color="#3b7dd8")
    for i, n in enumerate(names):
        ax.hlines(GOALS[n], i - 0.4, i + 0.4, colors="#d83b3b", linestyles="dashed",
                  label="goal" if i == 0 else None)
    for b, n in zip(bars, names):
        ax.annotate(f"{r[n]:.2f}", (b.get_x() + b.get_width() / 2, b.get_height()), ha="center", va="bottom")
    ax.set_ylabel("penstock / fio's fastest shape (same disk, same run)")
    ax.set_title(f"penstock bench vs fio, 3 targets, medians of {len(runs(rows))} runs")
    ax.legend()
    fig.tight_layout()
    fig.savefig(sys.argv[2], dpi=100)


if __name__ == "__main__":
    main()
