"""Helpers for the Python-package tests: where the built package is, and a Client for a
test cluster."""
import os
import sys
from pathlib import Path

import conftest

PYTHON_DIR = str(Path(conftest.PENSTOCK).resolve().parents[2] / "python")  # <build>/python
if PYTHON_DIR not in sys.path:
    sys.path.insert(0, PYTHON_DIR)

import penstock  # noqa: E402


def env_for(cluster):
    """The environment of a subprocess that imports penstock and talks to `cluster`."""
    env = dict(cluster.env)
    env["PYTHONPATH"] = PYTHON_DIR + os.pathsep + env.get("PYTHONPATH", "")
    env["PENSTOCK_MGMT"] = cluster.mgmt
    return env


def client(cluster, **kw):
    os.environ.update({k: v for k, v in cluster.env.items() if k.startswith("UCX_")})
    return penstock.Client(mgmt=cluster.mgmt, **kw)
