"""Objects end to end over each UCX transport: put/get byte-exact, ls, rm, overwrite,
errors for unknown names."""
import json
import os

import pytest

SIZES = [0, 1, 4095, 1024 * 1024 + 1, 64 * 1024 * 1024]


def write_random(path, size):
    with open(path, "wb") as f:
        remaining = size
        while remaining:
            n = min(remaining, 8 << 20)
            f.write(os.urandom(n))
            remaining -= n
    return path


@pytest.mark.parametrize("size", SIZES)
def test_put_get_exact(cluster, tmp_path, size):
    src = write_random(tmp_path / "in.bin", size)
    name = f"obj-{size}"
    cluster.cli("put", str(src), name, "--container", "data")
    dst = tmp_path / "out.bin"
    cluster.cli("get", name, str(dst), "--container", "data")
    assert dst.stat().st_size == size
    assert dst.read_bytes() == src.read_bytes()
    st = json.loads(cluster.cli("stat", name, "--container", "data", "--json").stdout)
    assert st["size"] == size


def test_put_reports_throughput_json(cluster, tmp_path):
    src = write_random(tmp_path / "in.bin", 3 << 20)
    out = json.loads(cluster.cli("put", str(src), "tp", "--container", "data", "--json").stdout)
    assert out["bytes"] == 3 << 20 and out["seconds"] > 0 and out["mb_per_s"] > 0


def test_several_data_plane_workers(cluster, tmp_path):
    """One client process spreading its requests over three UCX workers (two pinned to the
    loopback device) moves the same bytes; bad worker settings are refused by name."""
    src = write_random(tmp_path / "in.bin", 9 << 20)
    flags = ("--data-workers", "3", "--net-devices", "lo;;lo")
    cluster.cli("put", str(src), "multi", "--container", "data", *flags)
    dst = tmp_path / "out.bin"
    cluster.cli("get", "multi", str(dst), "--container", "data", *flags)
    assert dst.read_bytes() == src.read_bytes()
    out = json.loads(cluster.cli("bench", "write", "--container", "data", "--size", "1M", "--seconds", "1",
                                 "--concurrency", "8", "--data-workers", "2", "--json").stdout)
    assert out["errors"] == 0 and out["ops"] > 0, out
    p = cluster.cli("get", "multi", str(dst), "--container", "data", "--data-workers", "0", check=False)
    assert p.returncode != 0 and "data-workers" in p.stderr, p.stderr


def test_targets_with_several_data_plane_workers(cluster_factory, tmp_path):
    """Targets whose listener hands connections to three workers serve a client with four."""
    c = cluster_factory(targets=2, extra_args=("--target-data-workers", "3"))
    c.cli("container", "create", "w", "--redundancy", "none")
    src = write_random(tmp_path / "in.bin", 6 << 20)
    c.cli("put", str(src), "o", "--container", "w", "--data-workers", "4")
    dst = tmp_path / "out.bin"
    c.cli("get", "o", str(dst), "--container", "w", "--data-workers", "4")
    assert dst.read_bytes() == src.read_bytes()
    for d in c.record["daemons"]:
        if d["name"] != "mgmt":
            i = d["argv"].index("--data-workers")
            assert d["argv"][i + 1] == "3", d["argv"]


def test_ls_and_rm(cluster, tmp_path):
    cluster.cli("container", "create", "lsrm", "--redundancy", "none")
    names = ["a", "b/c", "z.bin"]
    for i, n in enumerate(names):
        cluster.cli("put", str(write_random(tmp_path / f"f{i}", 1000 * i + 1)), n, "--container", "lsrm")
    listing = json.loads(cluster.cli("ls", "--container", "lsrm", "--json").stdout)
    assert [o["name"] for o in listing] == names
    assert [o["size"] for o in listing] == [1, 1001, 2001]
    cluster.cli("rm", "b/c", "--container", "lsrm")
    listing = json.loads(cluster.cli("ls", "--container", "lsrm", "--json").stdout)
    assert [o["name"] for o in listing] == ["a", "z.bin"]
    r = cluster.cli("get", "b/c", str(tmp_path / "gone"), "--container", "lsrm", check=False)
    assert r.returncode == 1
    assert "b/c" in r.stderr and "does not exist" in r.stderr
    assert not (tmp_path / "gone").exists()


def test_names_that_are_not_utf8(cluster, tmp_path):
    """Object names are bytes: one that is not UTF-8 is stored, listed and read back, and
    --json prints it with U+FFFD in place of the bad byte instead of failing."""
    cluster.cli("container", "create", "bytes", "--redundancy", "none")
    name = os.fsdecode(b"caf\xe9-\xff")  # Latin-1, not UTF-8 (passed to argv as those bytes)
    src = write_random(tmp_path / "src", 5000)
    put = cluster.cli("put", str(src), name, "--container", "bytes", "--json")
    assert json.loads(put.stdout)["name"] == "caf\ufffd-\ufffd"
    listing = json.loads(cluster.cli("ls", "--container", "bytes", "--json").stdout)
    assert [o["name"] for o in listing] == ["caf\ufffd-\ufffd"]
    assert json.loads(cluster.cli("stat", name, "--container", "bytes", "--json").stdout)["size"] == 5000
    got = cluster.cli("get", name, str(tmp_path / "out"), "--container", "bytes", "--json")
    assert json.loads(got.stdout)["bytes"] == 5000
    assert (tmp_path / "out").read_bytes() == src.read_bytes()
    r = cluster.cli("get", os.fsdecode(b"nothing-\xfe"), str(tmp_path / "x"), "--container", "bytes", "--json",
                    check=False)
    assert r.returncode == 1 and json.loads(r.stdout)["error"]["code"] == "not_found", r.stdout + r.stderr
    cluster.cli("rm", name, "--container", "bytes", "--json")


def test_overwrite_replaces_whole_object(cluster, tmp_path):
    big = write_random(tmp_path / "big", 5 * 1024 * 1024 + 7)
    small = write_random(tmp_path / "small", 10)
    cluster.cli("put", str(big), "ow", "--container", "data")
    cluster.cli("put", str(small), "ow", "--container", "data")
    cluster.cli("get", "ow", str(tmp_path / "out"), "--container", "data")
    assert (tmp_path / "out").read_bytes() == small.read_bytes()


def test_container_lifecycle(cluster, tmp_path):
    cluster.cli("container", "create", "tmp1", "--redundancy", "none", "--stripe-unit", "64K")
    cs = json.loads(cluster.cli("container", "ls", "--json").stdout)
    assert {"tmp1", "data"} <= {c["name"] for c in cs}
    assert next(c for c in cs if c["name"] == "tmp1")["stripe_unit"] == 65536
    # Small stripe unit: a 300 KiB object spans 5 stripes over the targets.
    src = write_random(tmp_path / "x", 300 * 1024)
    cluster.cli("put", str(src), "x", "--container", "tmp1")
    cluster.cli("get", "x", str(tmp_path / "y"), "--container", "tmp1")
    assert (tmp_path / "y").read_bytes() == src.read_bytes()
    r = cluster.cli("container", "rm", "tmp1", check=False)
    assert r.returncode == 1 and "--force" in r.stderr
    cluster.cli("container", "rm", "tmp1", "--force")
    cs = json.loads(cluster.cli("container", "ls", "--json").stdout)
    assert "tmp1" not in {c["name"] for c in cs}
    r = cluster.cli("container", "create", "data", check=False)
    assert r.returncode == 1 and "already exists" in r.stderr


def test_unknown_container_and_object(cluster, tmp_path):
    src = write_random(tmp_path / "f", 10)
    r = cluster.cli("put", str(src), "x", "--container", "nope", check=False)
    assert r.returncode == 1
    assert "container 'nope'" in r.stderr and "penstock container create" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    r = cluster.cli("get", "missing", str(tmp_path / "o"), "--container", "data", check=False)
    assert r.returncode == 1 and "'missing'" in r.stderr
    r = cluster.cli("get", "missing", str(tmp_path / "o"), "--container", "data", "--json", check=False)
    assert json.loads(r.stdout)["error"]["code"] == "not_found"
    r = cluster.cli("put", str(tmp_path / "no-such-file"), "x", "--container", "data", check=False)
    assert r.returncode == 1 and "no-such-file" in r.stderr
    listing = json.loads(cluster.cli("ls", "--container", "data", "--json").stdout)
    assert "x" not in {o["name"] for o in listing}


def test_status_lists_targets(cluster):
    st = json.loads(cluster.cli("status", "--json").stdout)
    assert st["targets_up"] == 3 and st["targets_down"] == 0
    assert len(st["targets"]) == 3
    assert all(t["capacity_bytes"] > 0 for t in st["targets"])
    for t in st["targets"]:
        assert t["free_bytes"] + t["used_bytes"] == t["capacity_bytes"]
        assert t["dead_bytes"] + t["live_bytes"] <= t["used_bytes"] or t["dead_bytes"] == 0
    # Which UCX transport the client's connection to each target uses.
    expect = "tcp" if cluster.transport == "tcp" else "posix"
    assert all(expect in t["transport"] for t in st["targets"]), st["targets"]
    if cluster.transport == "shm":
        assert all("tcp" not in t["transport"] for t in st["targets"]), st["targets"]
    # Three targets registered one after the other: placement last changed with the third.
    assert 3 <= st["placement_epoch"] <= st["epoch"]
    human = cluster.cli("status").stdout
    assert "epoch" in human and human.count(" up ") >= 3 and "FREE" in human and "DEAD" in human
    assert f"(placement {st['placement_epoch']})" in human
