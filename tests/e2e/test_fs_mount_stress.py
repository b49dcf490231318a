"""The FUSE mount under stress: an fsx-style random workload checked against a model through the
mount (and through a second mount after each close), and a storage target killed by PID while
`tar x` writes a source tree into a rep:3 file system. Real daemons on loopback."""
import os
import random
import signal
import subprocess
import time

import pytest

from conftest import REPO, Cluster
from test_fs_mount import Mounts, mounted, sh

pytestmark = pytest.mark.skipif(not os.path.exists("/dev/fuse"),
                                reason="/dev/fuse is missing: FUSE mounts need it (load the fuse module, or run "
                                       "the container with --device /dev/fuse)")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """3 targets; "fsx": unprotected with 64 KiB stripes (ranges cross stripe and inline edges);
    "safe": rep:3, so a file system survives a target lost mid-write."""
    c = Cluster(tmp_path_factory.mktemp("fs-stress-cluster"), targets=3, capacity="1G")
    try:
        c.cli("container", "create", "fsx", "--type", "fs", "--redundancy", "none", "--stripe-unit", "64K")
        c.cli("container", "create", "safe", "--type", "fs", "--redundancy", "rep:3")
        yield c
    finally:
        c.stop()


@pytest.fixture
def mounts(cluster, tmp_path):
    with Mounts(cluster, tmp_path) as m:
        yield m


def random_op(rng, fd, model, limit):
    """One fsx step on `fd` and the same on `model` (a bytearray); returns its name."""
    kind = rng.choice(["write", "write", "read", "read", "truncate", "fsync"])
    if kind == "write":
        off = rng.randrange(limit)
        data = rng.randbytes(rng.choice([1, 7, 512, 4096, 5000, 20000, 70000]))
        assert os.pwrite(fd, data, off) == len(data)
        if len(model) < off:
            model.extend(bytes(off - len(model)))
        model[off:off + len(data)] = data
    elif kind == "read":
        off, n = rng.randrange(limit), rng.choice([1, 100, 4096, 16384, 70000, 200000])
        assert os.pread(fd, n, off) == bytes(model[off:off + n]), f"read {n} at {off}"
    elif kind == "truncate":
        size = rng.randrange(limit)
        os.ftruncate(fd, size)
        del model[size:]
        model.extend(bytes(size - len(model)))
    else:
        os.fsync(fd)
    assert os.fstat(fd).st_size == len(model), f"size after {kind}"
    return kind


def test_fsx_random_ops_match_a_model_through_the_mount(mounts):
    a, _ = mounts.mount("a", "fsx")
    b, _ = mounts.mount("b", "fsx")
    rng = random.Random(37)
    model = bytearray()
    limit = 600 * 1024  # ranges over ~10 stripes, across the 16 KiB inline edge and sparse gaps
    path = a / "fsx.bin"
    done = {}
    for session in range(12):
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            for _ in range(120):
                kind = random_op(rng, fd, model, limit)
                done[kind] = done.get(kind, 0) + 1
        finally:
            os.close(fd)
        # Close-to-open: another mount opening it now reads every byte.
        with open(b / "fsx.bin", "rb") as f:
            assert f.read() == bytes(model), f"second mount after session {session}"
    assert min(done.values()) > 50, done


def test_a_target_killed_during_tar_x_loses_nothing(cluster, mounts, tmp_path):
    mp, _ = mounts.mount("m", "safe")
    tar = subprocess.Popen(["sh", "-c", f"tar -C {REPO} -cf - src | tar -C {mp} -xf -"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        time.sleep(1.5)
        assert tar.poll() is None, "tar finished before the target could be killed: the test proves nothing"
        cluster.kill9("target-2")
        out, err = tar.communicate(timeout=600)
        assert tar.returncode == 0, f"tar x failed with a target down:\n{out}\n{err}"
    finally:
        if tar.poll() is None:
            tar.send_signal(signal.SIGKILL)
            tar.wait()
    sh("diff", "-r", str(REPO / "src"), str(mp / "src"), timeout=600)
    # A fresh mount (no kernel or client cache) reads the same bytes from the two survivors.
    mounts.unmount(mp)
    assert not mounted(mp)
    again, _ = mounts.mount("again", "safe")
    sh("diff", "-r", str(REPO / "src"), str(again / "src"), timeout=600)
    cluster.restart("target-2")
    cluster.wait_targets_up(3, timeout=60)
