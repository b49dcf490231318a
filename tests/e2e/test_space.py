"""A target whose device is full: a clear "no space" error, nothing lost, and room again once
objects are deleted and GC has reclaimed it."""
import json
import os
import time


def test_full_target_says_no_space_and_loses_nothing(cluster_factory, tmp_path):
    # One small target: 96 MiB in 8 MiB segments (one kept for GC).
    c = cluster_factory(targets=1, capacity="96M", extra_args=("--segment-size", "8M"))
    c.cli("container", "create", "c", "--redundancy", "none", "--stripe-unit", "1M")
    stored = {}
    failure = None
    for i in range(40):
        src = tmp_path / f"src{i}"
        src.write_bytes(os.urandom(6 * 1024 * 1024 + i))
        r = c.cli("put", str(src), f"o{i}", "--container", "c", "--json", check=False)
        if r.returncode != 0:
            failure = json.loads(r.stdout)["error"]
            break
        stored[f"o{i}"] = src.read_bytes()
    assert failure is not None, "96 MiB took 240 MiB of objects"
    assert failure["code"] == "resource_exhausted", failure
    assert "no space" in failure["message"], failure
    assert len(stored) >= 8, len(stored)
    # The failed put left nothing behind under its name; everything stored reads back.
    listing = {o["name"] for o in json.loads(c.cli("ls", "--container", "c", "--json").stdout)}
    assert listing == set(stored)
    for name, data in stored.items():
        out = tmp_path / f"out-{name}"
        c.cli("get", name, str(out), "--container", "c")
        assert out.read_bytes() == data, name
    # Deleting half frees room (GC reclaims the partly dead segments); puts go in again.
    names = sorted(stored)
    for name in names[::2]:
        c.cli("rm", name, "--container", "c")
        del stored[name]
    src = tmp_path / "again"
    src.write_bytes(os.urandom(6 * 1024 * 1024))
    deadline = time.time() + 60
    while True:
        r = c.cli("put", str(src), "again", "--container", "c", "--json", check=False)
        if r.returncode == 0:
            break
        assert json.loads(r.stdout)["error"]["code"] == "resource_exhausted", r.stdout
        assert time.time() < deadline, "no room came back after deleting half"
        time.sleep(1)
    stored["again"] = src.read_bytes()
    for name, data in stored.items():
        out = tmp_path / f"out2-{name}"
        c.cli("get", name, str(out), "--container", "c")
        assert out.read_bytes() == data, name
