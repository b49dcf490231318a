"""Objects larger than the client's memory budget stream through a bounded window: the peak
RSS of `penstock put` and `penstock get` stays far below the object size."""
import os
import subprocess
import time

from conftest import PENSTOCK

SIZE = 384 * 1024 * 1024


def run_measured(args, env):
    """Runs penstock, returns (returncode, stderr, peak RSS in bytes).

    The peak is the process's VmHWM, polled until it exits (it is monotonic, so the last read
    is the peak). Not ru_maxrss: that also counts the moments between fork and exec, when the
    child is still a copy of this (large) pytest process."""
    proc = subprocess.Popen([PENSTOCK, *args], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)
    hwm = 0
    while proc.poll() is None:
        try:
            with open(f"/proc/{proc.pid}/status") as f:
                for line in f:
                    if line.startswith("VmHWM:"):
                        hwm = max(hwm, int(line.split()[1]) * 1024)
        except (FileNotFoundError, ProcessLookupError):
            pass
        time.sleep(0.01)
    return proc.returncode, proc.stderr.read().decode(), hwm


def test_large_object_streams_with_bounded_rss(cluster_factory, tmp_path):
    c = cluster_factory(targets=3, capacity="512M")
    c.cli("container", "create", "big", "--redundancy", "none")
    src = tmp_path / "big.bin"
    block = os.urandom(1 << 20)
    with open(src, "wb") as f:
        for i in range(SIZE >> 20):
            f.write(block[i:] + block[:i])  # every MiB different, cheap to make
    rc, err, put_rss = run_measured(["put", str(src), "big.bin", "--container", "big",
                                     "--mgmt", c.mgmt], c.env)
    assert rc == 0, err
    assert put_rss > 0
    dst = tmp_path / "out.bin"
    rc, err, get_rss = run_measured(["get", "big.bin", str(dst), "--container", "big",
                                     "--mgmt", c.mgmt], c.env)
    assert rc == 0, err
    print(f"peak RSS: put {put_rss >> 20} MiB, get {get_rss >> 20} MiB for a {SIZE >> 20} MiB object")
    # 16 stripes of 1 MiB in flight plus the libraries: well under a quarter of the object.
    assert put_rss < SIZE // 4, put_rss
    assert get_rss < SIZE // 4, get_rss
    with open(src, "rb") as a, open(dst, "rb") as b:
        while True:
            x, y = a.read(8 << 20), b.read(8 << 20)
            assert x == y
            if not x:
                break
