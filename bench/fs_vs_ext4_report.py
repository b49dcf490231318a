#!/usr/bin/env python3
"""Prints bench/fs_vs_ext4.sh's table and last line from its JSON lines (one run per line:
{"side": fuse|passthrough|native|ext4, "data": fs_bench's object})."""
import json
import sys


def key(d):
    return (d.get("threads", 1), d.get("layout", "shared"), d.get("size", 0))


def ratio(a, b):
    return a / b if a and b and a > 0 and b > 0 else float("nan")


def main(path):
    rows = {}
    for line in open(path, encoding="utf-8"):
        if line.strip():
            r = json.loads(line)
            rows.setdefault(key(r["data"]), {})[r["side"]] = r["data"]
    print("| threads | layout | file size | op | FUSE | passthrough | FUSE/passthrough | native | ext4 | native/ext4 |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for k in sorted(rows):
        sides = rows[k]
        ops = sorted({op for s in sides.values() for op in s if op in
                      ("create", "stat", "readdir", "read", "unlink", "seqwrite", "seqread")})
        for op in ops:
            v = {s: sides.get(s, {}).get(op) for s in ("fuse", "passthrough", "native", "ext4")}
            unit = " MB/s" if op.startswith("seq") else "/s"
            cell = lambda x: f"{x:,.0f}{unit}" if x is not None else "-"
            print(f"| {k[0]} | {k[1]} | {k[2]} | {op} | {cell(v['fuse'])} | {cell(v['passthrough'])} | "
                  f"{ratio(v['fuse'], v['passthrough']):.2f} | {cell(v['native'])} | {cell(v['ext4'])} | "
                  f"{ratio(v['native'], v['ext4']):.2f} |")

    def pick(op, size, threads=8, layout="shared"):
        for k, sides in rows.items():
            if k[2] == size and k[0] == threads and k[1] == layout and op in sides.get("fuse", {}):
                return ratio(sides["fuse"][op], sides.get("passthrough", {}).get(op))
        return float("nan")
    seq = next((s for k, s in rows.items() if "seqwrite" in s.get("fuse", {})), {})
    line = {
        "create": pick("create", 0), "stat": pick("stat", 0), "readdir": pick("readdir", 0),
        "unlink": pick("unlink", 0), "read4k": pick("read", 4096),
        "seqwrite": ratio(seq.get("fuse", {}).get("seqwrite"), seq.get("passthrough", {}).get("seqwrite")),
        "seqread": ratio(seq.get("fuse", {}).get("seqread"), seq.get("passthrough", {}).get("seqread")),
    }
    print("fs/ext4 " + " ".join(f"{k}={v:.2f}" for k, v in line.items()))


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: fs_vs_ext4_report.py RESULTS.json")
    main(sys.argv[1])
