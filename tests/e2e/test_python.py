"""`import penstock` end to end against a real cluster: containers and objects, errors as
exceptions, readinto without copies, files for torch and numpy, futures and asyncio, fs
containers, fork and Ctrl-C."""
import asyncio
import io
import multiprocessing
import os
import signal
import subprocess
import sys
import time
import tracemalloc

import numpy as np
import pytest

from conftest import Cluster
from pyclient import env_for, client, penstock

MIB = 1 << 20


@pytest.fixture(scope="module")
def pc(tmp_path_factory):
    c = Cluster(tmp_path_factory.mktemp("py"), targets=3)
    cl = client(c)
    cl.create_container("py", redundancy="none")
    yield c, cl
    cl.close()
    c.stop()


def test_containers_and_objects(pc):
    _, c = pc
    info = c.create_container("rep", redundancy="rep:2", stripe_unit=256 * 1024)
    assert (info.redundancy, info.stripe_unit) == ("rep:2", 256 * 1024)
    assert {"py", "rep"} <= {i.name for i in c.containers()}
    assert c.container_info("rep").id == info.id
    c.put("rep", "a/1", b"one")
    c.put("rep", "a/2", np.arange(10, dtype=np.int64))
    c.put("rep", "b", bytearray(300 * 1024))
    assert c.get("rep", "a/1") == b"one"
    assert np.array_equal(np.frombuffer(c.get("rep", "a/2"), np.int64), np.arange(10))
    st = c.stat("rep", "b")
    assert st.size == 300 * 1024 and st.mtime > time.time() - 60
    assert [o.name for o in c.list("rep", prefix="a/")] == ["a/1", "a/2"]
    c.delete("rep", "a/1")
    assert not c.exists("rep", "a/1") and c.exists("rep", "a/2")
    with pytest.raises(penstock.FailedPrecondition):
        c.delete_container("rep")
    c.delete_container("rep", force=True)
    assert "rep" not in {i.name for i in c.containers()}


def test_errors_are_typed(pc):
    cluster, c = pc
    with pytest.raises(FileNotFoundError) as e:
        c.get("py", "missing")
    assert isinstance(e.value, penstock.NotFound) and e.value.code == 5 and "missing" in str(e.value)
    with pytest.raises(penstock.NotFound):
        c.stat("no-such-container", "x")
    with pytest.raises(FileExistsError):
        c.create_container("py")
    with pytest.raises(ValueError) as e:
        c.create_container("bad", redundancy="rep:x")
    assert isinstance(e.value, penstock.InvalidArgument) and "rep:x" in str(e.value)
    c.put("py", "small", b"abc")
    with c.open("py", "small") as f:
        with pytest.raises(BufferError):
            f.readinto(b"read-only")
        with pytest.raises(TypeError):
            f.readinto(12)
    os.environ["PENSTOCK_TIMEOUT_MS"] = "5"
    try:
        with pytest.raises(penstock.InvalidArgument, match="PENSTOCK_TIMEOUT_MS"):
            penstock.Client(mgmt=cluster.mgmt)
    finally:
        del os.environ["PENSTOCK_TIMEOUT_MS"]
    other = client(cluster)
    f = other.open("py", "small")
    other.close()
    with pytest.raises(penstock.ClientClosed, match="closed"):
        other.get("py", "small")
    with pytest.raises(penstock.ClientClosed):
        f.read()


def test_wrong_api_key(cluster_factory):
    secure = cluster_factory(targets=1, extra_args=("--auth",))
    admin = (secure.data_dir / "admin.key").read_text().strip()
    c = client(secure, api_key=admin)
    c.create_container("s", redundancy="none")
    c.put("s", "o", b"x")
    with pytest.raises(PermissionError) as e:
        client(secure, api_key="psk_wrong").get("s", "o")
    assert e.value.code in (7, 16)
    c.close()


def test_readinto_64mib_without_copies(pc):
    _, c = pc
    data = np.random.default_rng(7).integers(0, 256, 64 * MIB, dtype=np.uint8)
    c.put("py", "big", data)
    import torch
    for out in (np.empty(64 * MIB, np.uint8), torch.empty(16 * MIB, dtype=torch.float32)):
        before = c.read_path_stats()
        tracemalloc.start()
        with c.open("py", "big") as f:
            assert f.readinto(out) == 64 * MIB
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        after = c.read_path_stats()
        assert peak < MIB, f"a Python allocation of {peak} bytes during readinto"
        assert after["bytes"] - before["bytes"] == 64 * MIB
        assert after["copied"] - before["copied"] < MIB  # the client copied nothing to speak of
        view = out if isinstance(out, np.ndarray) else out.numpy().view(np.uint8)
        assert np.array_equal(view, data)


def test_torch_and_numpy_through_open(pc):
    _, c = pc
    import torch
    model = torch.nn.Sequential(torch.nn.Linear(64, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
    with c.open("py", "model.pt", "wb") as f:
        torch.save(model.state_dict(), f)
    with c.open("py", "model.pt") as f:
        loaded = torch.load(io.BufferedReader(f))
    assert all(torch.equal(loaded[k], v) for k, v in model.state_dict().items())
    arr = np.random.default_rng(1).standard_normal((100, 7))
    with c.open("py", "a.npy", "wb") as f:
        np.save(f, arr)
    with c.open("py", "a.npy") as f:
        assert np.array_equal(np.load(f), arr)
    with c.open("py", "a.npy", "r+b") as f:  # in place, then seek and read back
        f.seek(200)
        f.write(b"XYZ")
        f.seek(199)
        assert f.read(5)[1:4] == b"XYZ" and f.tell() == 204


def test_futures_and_asyncio(pc):
    _, c = pc
    items = {f"f/{i:03d}": os.urandom(1000 + i * 997) for i in range(50)}
    assert all(f.result() is None for f in c.put_many("py", items))
    futures = c.get_many("py", list(items) + ["f/missing"])
    assert [f.result() for f in futures[:-1]] == list(items.values())
    assert isinstance(futures[-1].exception(), penstock.NotFound)
    out = bytearray(500)
    assert c.read_async("py", "f/010", out=out, offset=100).result() == 500
    assert bytes(out) == items["f/010"][100:600]
    c.write_async("py", "f/010", b"#" * 10, offset=5).result()
    items["f/010"] = items["f/010"][:5] + b"#" * 10 + items["f/010"][15:]
    assert c.get("py", "f/010") == items["f/010"]

    async def main():
        return await asyncio.gather(*(asyncio.wrap_future(c.read_async("py", n)) for n in list(items)[:20]))
    assert asyncio.run(main()) == list(items.values())[:20]
    with c.open("py", "f/020") as f:
        buf = np.empty(100, np.uint8)
        assert f.read_async(0, buf).result() == 100 and bytes(buf) == items["f/020"][:100]


def test_fs_container_files(pc):
    _, c = pc
    c.create_container("files", redundancy="none")
    fs = c.fs("files", format=True)
    fs.mkdir("/d/e", parents=True)
    with fs.open("/d/e/x.bin", "wb") as f:
        f.write(b"hello " * 1000)
    with fs.open("/d/e/x.bin", "ab") as f:
        f.write(b"end")
    assert fs.listdir("/d/e") == ["x.bin"] and fs.stat("/d").is_dir
    assert fs.stat("/d/e/x.bin").size == 6003
    with fs.open("/d/e/x.bin") as f:
        f.seek(6000)
        assert f.read() == b"end"
    assert [fut.result()[:5] for fut in fs.read_many(["/d/e/x.bin"])] == [b"hello"]
    with pytest.raises(FileNotFoundError) as e:
        fs.stat("/d/nope")
    assert e.value.errno == 2
    with pytest.raises(FileExistsError):
        fs.mkdir("/d")
    fs.rename("/d/e/x.bin", "/d/y.bin")
    fs.remove("/d/y.bin")
    assert fs.walk_files("/") == []


def _child_uses_parent_client(c, q):
    try:
        c.get("py", "small")
        q.put("connected")
    except penstock.ForkUnsupported as e:
        q.put(f"refused: {e}")


def _child_reads(c, q):
    q.put(c.get("py", "small"))


def test_fork_and_forkserver(pc):
    """A forked child is told at once (no hang) to use forkserver/spawn; a forkserver child
    given the parent's Client (pickled as its settings) connects its own and reads."""
    _, c = pc
    c.put("py", "small", b"abc")
    for ctx, target, want in (("fork", _child_uses_parent_client, "refused: "),
                              ("forkserver", _child_reads, b"abc")):
        mp = multiprocessing.get_context(ctx)
        q = mp.Queue()
        p = mp.Process(target=target, args=(c, q))
        p.start()
        got = q.get(timeout=60)
        p.join(30)
        assert (got.startswith(want) and "forkserver" in got) if ctx == "fork" else got == want, got
    assert c.get("py", "small") == b"abc"  # the parent's client is untouched


CTRL_C = """
import sys, time, numpy as np, penstock
c = penstock.Client()
out = np.empty(64 << 20, np.uint8)
print("reading", flush=True)
t = time.time()
try:
    with c.open("py", "big") as f:
        while True:
            f.seek(0)
            f.readinto(out)
except KeyboardInterrupt:
    c.close()
    print("interrupted", flush=True)
"""


def test_ctrl_c_stops_a_long_read(pc):
    cluster, c = pc
    if not c.exists("py", "big"):
        c.put("py", "big", bytearray(64 * MIB))
    p = subprocess.Popen([sys.executable, "-c", CTRL_C], env=env_for(cluster), stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "reading"
    time.sleep(1.0)
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=20)
    assert p.returncode == 0 and "interrupted" in out, err
