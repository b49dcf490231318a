#!/usr/bin/env python3
"""Fails when a lower layer includes a higher one (docs/architecture.md, "The map").

Each folder under src/ is a part on a level; a part may include its own headers, the public
API (include/penstock, and the generated penstock/mgmt*.pb.h) and parts on lower levels only,
never a part on its own level or above. Tests and test helpers (*_test.cc, test_*.h, fake_*.h,
*_peer.cc, *_bench.cc) may reach anywhere: they assemble whole clusters. Public headers
(include/penstock) include only each other and the standard library.
Run by `make test` (and `make check-layers`); prints each violation as file:line and exits 1.
"""
import os
import re
import sys

LEVELS = [
    ["common"],
    ["codec", "protocol", "transport", "engine"],
    ["mgmt_client"],
    ["client", "target"],
    ["repair"],
    ["mgmt"],
    ["fs", "fuse", "s3", "gpu", "python"],
    ["cli"],
]
LEVEL = {part: i for i, parts in enumerate(LEVELS) for part in parts}
INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"')
EXEMPT = re.compile(r'(_test\.cc|_test_.*\.cc|/test_[^/]*\.h|/fake_[^/]*\.h|_peer\.cc|_bench\.cc|_fuzz\.cc)$')


def includes(path):
    with open(path, encoding="utf-8", errors="replace") as f:
        for n, line in enumerate(f, 1):
            m = INCLUDE.match(line)
            if m:
                yield n, m.group(1)


def check_part(root, part, errors):
    level = LEVEL[part]
    for dirpath, _, files in os.walk(os.path.join(root, "src", part)):
        for name in sorted(files):
            path = os.path.join(dirpath, name)
            if not name.endswith((".h", ".cc")) or EXEMPT.search(path):
                continue
            for n, inc in includes(path):
                top = inc.split("/", 1)[0]
                if top == "penstock" or top == part or "/" not in inc:
                    continue
                if top not in LEVEL:
                    errors.append(f"{os.path.relpath(path, root)}:{n}: includes \"{inc}\": part '{top}' "
                                  "is not on the map (add it to LEVELS in scripts/check_layers.py "
                                  "and to docs/architecture.md)")
                elif LEVEL[top] >= level:
                    where = "its own level" if LEVEL[top] == level else "a higher level"
                    errors.append(f"{os.path.relpath(path, root)}:{n}: '{part}' (level {level}) includes "
                                  f"\"{inc}\" of '{top}' on {where} ({LEVEL[top]}): layers only point down; "
                                  "move the piece it needs down a layer")


def check_public(root, errors):
    inc_dir = os.path.join(root, "include", "penstock")
    for name in sorted(os.listdir(inc_dir)):
        path = os.path.join(inc_dir, name)
        for n, inc in includes(path):
            if not inc.startswith("penstock/"):
                errors.append(f"include/penstock/{name}:{n}: the public API includes \"{inc}\": "
                              "public headers include only penstock/*.h")


def main():
    root = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), ".."))
    errors = []
    for part in sorted(os.listdir(os.path.join(root, "src"))):
        if not os.path.isdir(os.path.join(root, "src", part)):
            continue
        if part not in LEVEL:
            errors.append(f"src/{part}: not on the map (add it to LEVELS in scripts/check_layers.py "
                          "and to docs/architecture.md)")
            continue
        check_part(root, part, errors)
    check_public(root, errors)
    for e in errors:
        print(e)
    if errors:
        print(f"check_layers: {len(errors)} include(s) against the layering", file=sys.stderr)
        return 1
    print("check_layers: every include points down")
    return 0


if __name__ == "__main__":
    sys.exit(main())
