"""Faults on a live cluster: a target killed with SIGKILL and restarted loses nothing; a byte
flipped on a target's data file is caught by checksums, never returned as data."""
import json
import mmap
import os
import time

from test_objects import write_random


def put_many(cluster, tmp_path, sizes):
    objs = {}
    for i, size in enumerate(sizes):
        src = write_random(tmp_path / f"src{i}", size)
        cluster.cli("put", str(src), f"o{i}", "--container", "c")
        objs[f"o{i}"] = src.read_bytes()
    return objs


def check_all(cluster, tmp_path, objs):
    for name, data in objs.items():
        out = tmp_path / f"out-{name}"
        cluster.cli("get", name, str(out), "--container", "c")
        assert out.read_bytes() == data, name


def test_kill9_target_and_restart(cluster_factory, tmp_path):
    c = cluster_factory(targets=3)
    c.cli("container", "create", "c", "--redundancy", "none")
    objs = put_many(c, tmp_path, [0, 1, 4095, 3 * 1024 * 1024 + 5, 9 * 1024 * 1024])
    c.kill9("target-2")
    # (Reads while it is down: the next test.) Back under its old identity, it serves all.
    c.restart("target-2")
    c.wait_targets_up(3)
    check_all(c, tmp_path, objs)
    # The restarted target keeps its identity: still 3 targets in the map, not 4.
    st = json.loads(c.cli("status", "--json").stdout)
    assert len(st["targets"]) == 3
    # And it takes new writes.
    objs.update(put_many(c, tmp_path, [2 * 1024 * 1024]))
    check_all(c, tmp_path, objs)


def test_target_down_is_detected_and_reads_fail_cleanly(cluster_factory, tmp_path):
    c = cluster_factory(targets=3)
    # 64 KiB stripes: the 8 MiB object has 128 stripes, so some surely live on the dead target
    # (with 1 MiB stripes, (2/3)^9 of the time none would).
    c.cli("container", "create", "c", "--redundancy", "none", "--stripe-unit", "64K")
    objs = put_many(c, tmp_path, [8 * 1024 * 1024])
    epoch0 = json.loads(c.cli("status", "--json").stdout)["epoch"]
    c.kill9("target-1")
    deadline = time.time() + 20
    while time.time() < deadline:
        st = json.loads(c.cli("status", "--json").stdout)
        if st["targets_down"] == 1:
            break
        time.sleep(0.2)
    assert st["targets_down"] == 1 and st["epoch"] > epoch0
    # Some stripes live on the dead target. The get fails with a clear error
    # (after the client's retry budget), leaves no partial file.
    r = c.cli("get", "o0", str(tmp_path / "partial"), "--container", "c", check=False)
    assert r.returncode == 1
    assert "unavailable" in r.stderr or "unreachable" in r.stderr or "down" in r.stderr
    assert not (tmp_path / "partial").exists()
    c.restart("target-1")
    c.wait_targets_up(3)
    check_all(c, tmp_path, objs)


def find_in_file(path, needle):
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
        return m.find(needle)


def test_flipped_byte_is_a_checksum_error(cluster_factory, tmp_path):
    c = cluster_factory(targets=3, capacity="256M")
    c.cli("container", "create", "c", "--redundancy", "none")
    src = write_random(tmp_path / "src", 1024 * 1024)  # one stripe: on exactly one target
    data = src.read_bytes()
    c.cli("put", str(src), "victim", "--container", "c")
    needle = data[4096:4096 + 64]
    hits = []
    for d in c.record["daemons"]:
        if d["name"] == "mgmt":
            continue
        img = c.data_dir / d["name"] / "data.img"
        off = find_in_file(img, needle)
        if off >= 0:
            hits.append((img, off))
    assert len(hits) == 1, hits
    img, off = hits[0]
    with open(img, "r+b") as f:
        f.seek(off + 10)
        b = f.read(1)
        f.seek(off + 10)
        f.write(bytes([b[0] ^ 0xFF]))
        f.flush()
        os.fsync(f.fileno())
    # The background scrub finds it without any read, and the target reports it to mgmt.
    target_name = img.parent.name
    target_id = next(t["id"] for t in json.loads(c.cli("status", "--json").stdout)["targets"]
                     if t["address"] == c.daemon(target_name)["address"])
    deadline = time.time() + 30
    while time.time() < deadline:
        st = json.loads(c.cli("status", "--json").stdout)
        t = next(t for t in st["targets"] if t["id"] == target_id)
        if t["corrupt_shard_count"] >= 1:
            break
        time.sleep(0.3)
    assert t["corrupt_shard_count"] == 1 and len(t["corrupt_shards"]) == 1, t
    assert "corrupt shard" in c.cli("status").stdout
    r = c.cli("get", "victim", str(tmp_path / "out"), "--container", "c", check=False)
    assert r.returncode == 1
    assert "crc32c check" in r.stderr and "victim" in r.stderr, r.stderr
    assert not (tmp_path / "out").exists()
    r = c.cli("get", "victim", str(tmp_path / "out"), "--container", "c", "--json", check=False)
    assert json.loads(r.stdout)["error"]["code"] == "data_loss"
