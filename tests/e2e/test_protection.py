"""Data protection end to end: rep:N and ec:K+M containers under real faults (kill -9, SIGSTOP,
a target declared lost, bytes flipped on disk). Every case checks every acknowledged byte."""
import hashlib
import json
import os
import signal
import subprocess
import time
import urllib.request

import pytest

from conftest import PENSTOCK
from test_faults import find_in_file
from test_objects import write_random

MiB = 1024 * 1024
# Fast repair for tests: mgmt's repair service runs a pass every second (and on every map
# change); targets are marked down after the fixture's 3 s of silence.
FAST = ("--repair-interval-ms", "1000")


def sha(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def targets(c):
    return [d["name"] for d in c.record["daemons"] if d["name"] != "mgmt"]


def status(c):
    return json.loads(c.cli("status", "--json").stdout)


def target_id(c, name):
    addr = c.daemon(name)["address"]
    return next(t["id"] for t in status(c)["targets"] if t["address"] == addr)


def get_ok(c, container, name, expect_sha, out, timeout=120):
    c.cli("get", name, str(out), "--container", container, timeout=timeout)
    assert sha(out) == expect_sha, f"{container}/{name} differs"
    out.unlink()


def wait_for(pred, what, timeout=60):
    deadline = time.time() + timeout
    while time.time() < deadline:
        v = pred()
        if v:
            return v
        time.sleep(0.3)
    raise AssertionError(f"timed out waiting for {what}")


def kill9_midway(c, name, proc, field, at_least):
    """Kills target `name` once `proc` (a put or get) has moved `at_least` bytes by its
    /proc/PID/io `field` (rchar: read from its source file; wchar: written out), and checks that
    it was still running then, so the kill lands during the transfer."""
    def moved():
        try:
            with open(f"/proc/{proc.pid}/io") as f:
                return int(next(l for l in f if l.startswith(field + ":")).split()[1])
        except (OSError, StopIteration):
            return 0
    deadline = time.time() + 120
    while proc.poll() is None and moved() < at_least and time.time() < deadline:
        time.sleep(0.01)
    assert proc.poll() is None, f"{proc.args[1]} finished before target {name} was killed"
    assert moved() >= at_least, f"{proc.args[1]} moved {moved()} bytes in 120 s"
    c.kill9(name)


def repair_settled(c):
    """Every target up and checked by a clean repair pass (none recovering)."""
    def done():
        st = status(c)
        return st["targets_down"] == 0 and not any(t["recovering"] for t in st["targets"]) and st
    return wait_for(done, "repair to check every target", timeout=120)


def scrape(addr):
    with urllib.request.urlopen(f"http://{addr}/metrics", timeout=5) as r:
        return r.read().decode()


def bytes_read(c):
    """Shard bytes all targets have served."""
    total = 0
    for name in targets(c):
        try:
            text = scrape(c.daemon(name)["metrics"])
        except OSError:
            continue
        for line in text.splitlines():
            if line.startswith("penstock_target_bytes_read_total"):
                total += int(float(line.split()[-1]))
    return total


def test_bad_redundancy_is_refused_with_the_forms(cluster_factory):
    c = cluster_factory(targets=3)
    r = c.cli("container", "create", "x", "--redundancy", "ec:4+2", check=False)
    assert r.returncode != 0 and "puts each stripe on 6 targets, but the cluster has 3" in r.stderr
    r = c.cli("container", "create", "x", "--redundancy", "raid5", check=False)
    assert r.returncode != 0 and "rep:N" in r.stderr and "ec:K+M" in r.stderr
    r = c.cli("container", "create", "x", "--redundancy", "ec:2+1", "--json")
    assert json.loads(r.stdout)["redundancy"] == "ec:2+1"


@pytest.mark.parametrize("scheme,n", [("ec:2+1", 4), ("rep:2", 3)])
def test_kill9_during_write_and_read(cluster_factory, tmp_path, scheme, n):
    """(a) A target killed during a 1 GiB write and another during a read: the write completes
    degraded (the container's write quorum is K, --min-durable, so one missing shard is above it), every byte reads back, and once the target returns repair restores full
    redundancy, so losing yet another target still loses nothing."""
    c = cluster_factory(targets=n, capacity="1G" if n == 4 else "1500M", extra_args=FAST)
    c.cli("container", "create", "p", "--redundancy", scheme, "--min-durable", scheme[3] if scheme[0] == "e" else "1")
    src = write_random(tmp_path / "big", 1024 * MiB)
    digest = sha(src)
    names = targets(c)
    put = subprocess.Popen([PENSTOCK, "put", str(src), "big", "--container", "p", "--mgmt", c.mgmt],
                           env=c.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    kill9_midway(c, names[0], put, "rchar", 128 * MiB)
    out, err = put.communicate(timeout=300)
    assert put.returncode == 0, err
    src.unlink()
    get_ok(c, "p", "big", digest, tmp_path / "out")  # degraded: one target still down

    # The target returns; repair brings its shards back (what it missed of the write).
    c.restart(names[0])
    c.wait_targets_up(n)
    repair_settled(c)

    # Kill another during a read: the read completes from the rest.
    get = subprocess.Popen([PENSTOCK, "get", "big", str(tmp_path / "out"), "--container", "p", "--mgmt", c.mgmt],
                           env=c.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    kill9_midway(c, names[1], get, "wchar", 128 * MiB)
    out, err = get.communicate(timeout=300)
    assert get.returncode == 0, err
    assert sha(tmp_path / "out") == digest
    (tmp_path / "out").unlink()


def test_ec_4_2_with_two_targets_killed(cluster_factory, tmp_path):
    """(b) ec:4+2 loses two targets: every object, every size, reads back exactly."""
    c = cluster_factory(targets=6, capacity="256M", extra_args=FAST)
    # Write quorum K (the default, K+1 = 5, would refuse the write with two targets down).
    c.cli("container", "create", "p", "--redundancy", "ec:4+2", "--min-durable", "4")
    objs = {}
    for i, size in enumerate([0, 1, 4095, 700 * 1024, 3 * MiB + 5, 17 * MiB]):
        src = write_random(tmp_path / f"s{i}", size)
        c.cli("put", str(src), f"o{i}", "--container", "p")
        objs[f"o{i}"] = sha(src)
    names = targets(c)
    c.kill9(names[1])
    c.kill9(names[4])
    for name, digest in objs.items():
        get_ok(c, "p", name, digest, tmp_path / "out")
    # Writes go on too, degraded, and read back.
    src = write_random(tmp_path / "late", 5 * MiB + 3)
    c.cli("put", str(src), "late", "--container", "p")
    get_ok(c, "p", "late", sha(src), tmp_path / "out")
    listed = c.cli("ls", "--container", "p", "--json").stdout
    assert len(json.loads(listed)) == len(objs) + 1


def flip(img, off):
    with open(img, "r+b") as f:
        f.seek(off)
        b = f.read(1)
        f.seek(off)
        f.write(bytes([b[0] ^ 0xFF]))
        f.flush()
        os.fsync(f.fileno())


def find_cell(c, needle):
    hits = []
    for name in targets(c):
        img = c.data_dir / name / "data.img"
        off = find_in_file(img, needle)
        if off >= 0:
            hits.append((img, off))
    assert len(hits) == 1, hits
    return hits[0]


def test_flipped_bytes_are_decoded_and_repaired(cluster_factory, tmp_path):
    """(c) A corrupt data cell: the read is still correct and rewrites it; a corrupt cell nobody
    reads is found by scrub and rewritten by repair; afterwards reads touch no parity."""
    c = cluster_factory(targets=3, capacity="256M", extra_args=FAST)
    c.cli("container", "create", "p", "--redundancy", "ec:2+1")
    a = write_random(tmp_path / "a", MiB)  # one stripe: cells [0, 512K) and [512K, 1M) + parity
    b = write_random(tmp_path / "b", MiB)
    c.cli("put", str(a), "a", "--container", "p")
    c.cli("put", str(b), "b", "--container", "p")

    # Read path: decoded around the bad cell, and the cell is written back at once.
    img, off = find_cell(c, a.read_bytes()[4096:4096 + 64])
    flip(img, off + 10)
    get_ok(c, "p", "a", sha(a), tmp_path / "out")
    # Targets' read counters also count mgmt's repair service: let it see the corrupt report
    # cleared and finish a whole pass after that, so it reads nothing during the measured get.
    wait_for(lambda: all(t["corrupt_shard_count"] == 0 for t in status(c)["targets"]), "corrupt reports to clear")
    passes = status(c)["repair"]["passes"]
    wait_for(lambda: status(c)["repair"]["passes"] > passes + 1, "a repair pass after the read repair")
    before = bytes_read(c)
    get_ok(c, "p", "a", sha(a), tmp_path / "out")
    # The two data cells (and two copies of the small head): no parity, no decode.
    assert MiB <= bytes_read(c) - before < MiB + 8192

    # Scrub path: nobody reads b; scrub finds the bad cell, mgmt's repair rewrites it.
    img, off = find_cell(c, b.read_bytes()[600 * 1024:600 * 1024 + 64])
    flip(img, off + 10)

    def repaired():
        st = status(c)
        return st["repair"]["passes"] > 0 and all(t["corrupt_shard_count"] == 0 for t in st["targets"]) and \
            st["repair"]["state"] == "idle" and found[0] and st
    found = [False]

    def reported():
        found[0] = any(t["corrupt_shard_count"] > 0 for t in status(c)["targets"])
        return found[0]
    wait_for(reported, "scrub to report the corrupt cell", timeout=60)
    wait_for(repaired, "repair to rewrite the corrupt cell", timeout=60)
    before = bytes_read(c)
    get_ok(c, "p", "b", sha(b), tmp_path / "out")
    assert MiB <= bytes_read(c) - before < MiB + 8192


def test_a_corrupt_head_copy_is_left_out_of_listings_and_repaired(cluster_factory, tmp_path, monkeypatch):
    """A head copy that fails its checksum: its target lists the rest (before, its whole listing
    failed and the repair pass rewrote every slot the target holds), `ls` lists the object from
    its good copy, and repair rewrites the bad copy, that one shard."""
    monkeypatch.setenv("PENSTOCK_SCRUB_RATE", "0")  # repair alone finds it, as on a big drive
    c = cluster_factory(targets=3, capacity="256M", extra_args=FAST)
    c.cli("container", "create", "p", "--redundancy", "ec:2+1")
    name = "a-head-whose-name-is-easy-to-find-0123456789"
    src = write_random(tmp_path / "s", 4096)
    c.cli("put", str(src), name, "--container", "p")
    for i in range(8):
        c.cli("put", str(src), f"other-{i}", "--container", "p")
    repair_settled(c)
    before = status(c)["repair"]["total_shards_repaired"]
    copies = [(c.data_dir / t / "data.img", find_in_file(c.data_dir / t / "data.img", name.encode()))
              for t in targets(c)]
    copies = [(img, off) for img, off in copies if off >= 0]
    assert len(copies) == 2, copies  # ec:2+1 heads: m + 1 copies
    flip(copies[0][0], copies[0][1] + 5)
    listing = json.loads(c.cli("ls", "--container", "p", "--json").stdout)
    assert len(listing) == 9 and name in [o["name"] for o in listing]
    get_ok(c, "p", name, sha(src), tmp_path / "out")

    def after_passes(n):
        start = status(c)["repair"]["passes"]
        wait_for(lambda: status(c)["repair"]["passes"] >= start + n, f"{n} repair passes")
        return status(c)["repair"]["total_shards_repaired"]
    first = after_passes(2)
    assert first - before == 1, f"repair rewrote {first - before} shards for one bad head copy"
    assert after_passes(2) == first, "repair rewrites shards on every pass"
    assert json.loads(c.cli("ls", "--container", "p", "--json").stdout) == listing


def test_lost_target_is_rebuilt_then_another_can_go(cluster_factory, tmp_path):
    """(d) A target lost for good: repair rebuilds its shards on the others (progress in status
    and /metrics); then another target fails and, with M=1, everything still reads."""
    c = cluster_factory(targets=4, capacity="256M", extra_args=FAST)
    c.cli("container", "create", "p", "--redundancy", "ec:2+1")
    c.cli("container", "create", "r", "--redundancy", "rep:2")
    objs = {}
    for i, size in enumerate([1, 300 * 1024, 9 * MiB + 7, 24 * MiB]):
        src = write_random(tmp_path / f"s{i}", size)
        for cont in ("p", "r"):
            c.cli("put", str(src), f"o{i}", "--container", cont)
        objs[f"o{i}"] = sha(src)
    names = targets(c)
    c.kill9(names[2])
    lost = target_id(c, names[2])
    out = json.loads(c.cli("out", str(lost), "--json").stdout)
    assert out["state"] == "lost"

    # A pass that began just before the loss may do the rebuild itself: the targets' stale-map
    # refusals bring its map to the new epoch part way (its status keeps the epoch it began
    # with). Done once a pass that began with the new map has ended, having rebuilt something.
    def rebuilt():
        st = status(c)["repair"]
        return (st["epoch"] >= out["epoch"] and st["state"] == "idle" and st["total_shards_repaired"] > 0
                and st)
    st = wait_for(rebuilt, "the rebuild", timeout=120)
    assert st["stripes_unrecoverable"] == 0 and st["total_bytes_repaired"] > 0, st
    # The human form's "rewritten in all" counts a pass that ended once (its counts are in the
    # totals then) and a running one on top of them.
    for _ in range(20):
        before, text, after = status(c)["repair"], c.cli("status").stdout, status(c)["repair"]
        if before == after:
            break
    assert before == after, "repair status kept changing"
    want = before["total_shards_repaired"] + (0 if before["state"] == "idle" else before["shards_repaired"])
    assert want > 0 and f" {want} shards (" in text.split("passes,")[1], (before, text)
    metrics = scrape(c.daemon("mgmt")["metrics"])
    assert "penstock_repair_shards_total" in metrics
    repair_settled(c)
    text = c.cli("status").stdout
    assert "lost" in text and "repair" in text
    for name, digest in objs.items():
        for cont in ("p", "r"):
            get_ok(c, cont, name, digest, tmp_path / "out")
    c.kill9(names[0])
    for name, digest in objs.items():
        for cont in ("p", "r"):
            get_ok(c, cont, name, digest, tmp_path / "out")
    # The lost target may not come back under its old identity.
    c.restart(names[2])
    time.sleep(2)
    assert c._procs[-1].poll() is not None or "declared lost" in open(c.daemon(names[2])["log"]).read()


def test_sigstopped_target_is_a_gray_failure_not_a_hang(cluster_factory, tmp_path):
    """(e) A target that stops answering (SIGSTOP) makes clients time out to degraded mode
    within the straggler delay: reads and writes complete, nothing hangs."""
    c = cluster_factory(targets=4, capacity="256M", heartbeat_timeout_ms=60000)
    # Write quorum K: a write missing the stopped target's shard is above it.
    c.cli("container", "create", "p", "--redundancy", "ec:2+1", "--min-durable", "2")
    c.cli("container", "create", "q", "--redundancy", "ec:2+1", "--min-durable", "2")
    ids = {x["name"]: x["id"] for x in json.loads(c.cli("container", "ls", "--json").stdout)}
    src = write_random(tmp_path / "s", 40 * MiB + 1)
    c.cli("put", str(src), "o", "--container", "p")
    # On a loaded host a target can answer this put later than the straggler delay and miss a
    # write (recovering for "p"); with the victim stopped too, "o" would then lack a cell. That
    # is the system working: wait for repair to catch it up first (no wait when none missed).
    repair_settled(c)
    victim = targets(c)[1]
    pid = c.current_pid(victim)
    os.kill(pid, signal.SIGSTOP)
    try:
        t0 = time.time()
        get_ok(c, "p", "o", sha(src), tmp_path / "out", timeout=60)
        src2 = write_random(tmp_path / "s2", 20 * MiB)
        c.cli("put", str(src2), "o2", "--container", "p", timeout=60)
        get_ok(c, "p", "o2", sha(src2), tmp_path / "out", timeout=60)
        assert time.time() - t0 < 45
        # The writes that went without it make it recovering for "p" only: "q" is not its business.
        t = next(t for t in status(c)["targets"] if t["recovering"])
        assert not t["recovering_all"] and t["recovering_containers"] == [ids["p"]], t
        assert f"missed writes to container id {ids['p']}" in c.cli("status").stdout
    finally:
        os.kill(pid, signal.SIGCONT)
    get_ok(c, "p", "o2", sha(src2), tmp_path / "out")
    repair_settled(c)  # a clean pass clears it


def test_rep3_with_two_targets_down(cluster_factory, tmp_path):
    """(g) rep:3 keeps reading with two of its three targets down; below its write quorum (2
    copies) it takes no write and no delete (either would rest on one copy) until one returns."""
    c = cluster_factory(targets=3, capacity="256M", extra_args=FAST)
    c.cli("container", "create", "r", "--redundancy", "rep:3")
    objs = {}
    for i, size in enumerate([0, 5, 1 * MiB, 6 * MiB + 1]):
        src = write_random(tmp_path / f"s{i}", size)
        c.cli("put", str(src), f"o{i}", "--container", "r")
        objs[f"o{i}"] = sha(src)
    names = targets(c)
    c.kill9(names[0])
    c.kill9(names[2])
    for name, digest in objs.items():
        get_ok(c, "r", name, digest, tmp_path / "out")
    for args in (("rm", "o1"), ("put", str(src), "new")):
        r = c.cli(*args, "--container", "r", "--timeout-ms", "2000", check=False)
        assert r.returncode != 0 and "write quorum" in r.stderr, (args, r.stderr)
    c.restart(names[0])
    c.wait_targets_up(2)
    # The refused delete may have left its tombstone on the one target that was up (a write
    # that failed may have landed): the object is then gone already.
    r = c.cli("rm", "o1", "--container", "r", timeout=120, check=False)
    assert r.returncode == 0 or "does not exist" in r.stderr, r.stderr
    assert "o1" not in c.cli("ls", "--container", "r").stdout
    # The deleted object stays deleted when the target that missed the delete comes back.
    c.restart(names[2])
    c.wait_targets_up(3)

    def gone():
        assert "o1" not in c.cli("ls", "--container", "r").stdout
        r = c.cli("get", "o1", str(tmp_path / "out"), "--container", "r", check=False)
        assert r.returncode != 0 and "does not exist" in r.stderr
    gone()
    # And after repair has looked at every stripe (it must not bring o1 back from the stale
    # copies on the targets that missed the delete).
    repair_settled(c)
    gone()
    for name in ("o0", "o2", "o3"):
        get_ok(c, "r", name, objs[name], tmp_path / "out")


def test_orphaned_stripes_are_collected_and_live_objects_kept(cluster_factory, tmp_path):
    """Stripes that no object head names are deleted by repair once they sat unchanged for
    the grace period (--orphan-grace-ms): a put whose client was killed before it wrote its head
    (protected and unprotected containers), and an object deleted while a target holding
    its head and stripes was down. Objects that heads name are kept."""
    c = cluster_factory(targets=3, capacity="512M", extra_args=(*FAST, "--orphan-grace-ms", "3000"))
    for name, red in (("e", "ec:2+1"), ("n", "none"), ("r", "rep:3")):
        c.cli("container", "create", name, "--redundancy", red)
    live = {}
    for cont in ("e", "n", "r"):
        src = write_random(tmp_path / f"live-{cont}", 3 * MiB + 7)
        c.cli("put", str(src), "live", "--container", cont)
        live[cont] = sha(src)

    def live_bytes():
        return sum(t["live_bytes"] for t in status(c)["targets"])
    time.sleep(2.5)  # a heartbeat or two: the targets' figures include the objects
    base = live_bytes()

    # Clients killed half way through a put: their stripes are there, their heads never come.
    big = write_random(tmp_path / "big", 512 * MiB)
    for cont in ("e", "n"):
        proc = subprocess.Popen([PENSTOCK, "put", str(big), "dead", "--container", cont, "--mgmt", c.mgmt],
                                env=c.env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            def moved():
                try:
                    with open(f"/proc/{proc.pid}/io") as f:
                        return int(next(l for l in f if l.startswith("rchar:")).split()[1])
                except (OSError, StopIteration):
                    return 0
            deadline = time.time() + 60
            while proc.poll() is None and moved() < 32 * MiB and time.time() < deadline:
                time.sleep(0.002)
            proc.kill()
        finally:
            proc.wait()
        assert proc.returncode == -signal.SIGKILL, "the put finished before it was killed"
        assert "dead" not in c.cli("ls", "--container", cont).stdout
    time.sleep(2.5)
    assert live_bytes() > base + 40 * MiB  # what the dead puts left

    # An object deleted while one of its three copies' targets was down: that target comes back
    # with its old head copy and stripes; repair brings the head copy to the tombstone, then the
    # stripes no head names any more go too.
    gone = write_random(tmp_path / "gone", 5 * MiB)
    c.cli("put", str(gone), "gone", "--container", "r")
    victim = targets(c)[0]
    c.kill9(victim)
    c.cli("rm", "gone", "--container", "r")
    c.restart(victim)
    c.wait_targets_up(3)

    def collected():
        rs = status(c)["repair"]
        return (rs["total_orphans_collected"] >= 3 and rs["orphans_pending"] == 0
                and live_bytes() < base + 2 * MiB and rs)
    rs = wait_for(collected, "repair to delete the orphaned stripes", timeout=120)
    assert rs["total_orphan_shards_deleted"] > 0
    assert "orphans (stripes no object names)" in c.cli("status").stdout
    for cont, digest in live.items():
        get_ok(c, cont, "live", digest, tmp_path / "out")
    r = c.cli("get", "gone", str(tmp_path / "out"), "--container", "r", check=False)
    assert r.returncode != 0 and "does not exist" in r.stderr
    # New puts after the collection are whole.
    c.cli("put", str(gone), "again", "--container", "e")
    get_ok(c, "e", "again", sha(gone), tmp_path / "out")


def test_what_a_deleted_container_left_on_a_down_target_is_collected(cluster_factory, tmp_path):
    """A container deleted while a target holding its shards was down: the target comes back
    with them, and repair (with --auth: its admin tokens for a container mgmt no longer knows)
    deletes them once the container was found deleted for the grace period. Other containers'
    objects are kept."""
    c = cluster_factory(targets=3, capacity="512M", extra_args=(*FAST, "--orphan-grace-ms", "3000", "--auth"))
    c.env["PENSTOCK_API_KEY"] = (c.data_dir / "admin.key").read_text().strip()
    c.cli("container", "create", "kept", "--redundancy", "ec:2+1")
    c.cli("container", "create", "doomed", "--redundancy", "rep:3")
    src = write_random(tmp_path / "kept", 3 * MiB + 5)
    c.cli("put", str(src), "o", "--container", "kept")
    victim = targets(c)[0]
    vid = target_id(c, victim)

    def victim_live():
        return next(t["live_bytes"] for t in status(c)["targets"] if t["id"] == vid)
    time.sleep(2.5)  # a heartbeat or two
    base = victim_live()
    doomed = write_random(tmp_path / "doomed", 6 * MiB)
    for i in range(3):
        c.cli("put", str(doomed), f"d{i}", "--container", "doomed")
    wait_for(lambda: victim_live() >= base + 18 * MiB, "the victim to report the doomed objects")
    c.kill9(victim)
    c.cli("container", "rm", "doomed", "--force")
    assert "doomed" not in c.cli("container", "ls").stdout
    c.restart(victim)
    c.wait_targets_up(3)
    assert victim_live() >= base + 18 * MiB  # still there: the container was deleted without it

    def emptied():
        rs = status(c)["repair"]
        return (rs["total_deleted_containers_emptied"] >= 1 and rs["deleted_containers_pending"] == 0
                and victim_live() < base + MiB and rs)
    rs = wait_for(emptied, "repair to delete what the deleted container left", timeout=120)
    assert rs["total_deleted_container_shards"] >= 4  # three heads and a stripe of each, at least
    assert "deleted containers:" in c.cli("status").stdout
    get_ok(c, "kept", "o", sha(src), tmp_path / "out")
    # A container made afterwards is a new one, with a new id: nothing of the old one shows.
    c.cli("container", "create", "doomed", "--redundancy", "rep:3")
    assert c.cli("ls", "--container", "doomed", "--json").stdout.strip() == "[]"


def test_a_request_that_waited_out_its_deadline_is_refused(cluster_factory, tmp_path):
    """Requests carry their client's deadline (its timeout plus 30 s for clock skew). A target
    stopped (SIGSTOP) while a long-running client's writes sat in its socket refuses, when it
    runs again, those the client gave up on long before: nothing lands that late."""
    c = cluster_factory(targets=1, capacity="256M", heartbeat_timeout_ms=120000)
    c.cli("container", "create", "n", "--redundancy", "none")
    name = targets(c)[0]
    metrics = c.daemon(name)["metrics"]

    def refused():
        for line in scrape(metrics).splitlines():
            if line.startswith("penstock_target_late_requests_total"):
                return int(float(line.split()[-1]))
        return 0
    # A client that goes on through errors: the bench counts them and keeps writing.
    bench = subprocess.Popen([PENSTOCK, "bench", "write", "--container", "n", "--size", "4K", "--concurrency", "1", "--objects", "1",
                              "--seconds", "50", "--timeout-ms", "1000", "--json", "--mgmt", c.mgmt],
                             env=c.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    pid = c.current_pid(name)
    try:
        time.sleep(3)  # connected, writing
        assert bench.poll() is None, bench.communicate()
        os.kill(pid, signal.SIGSTOP)
        try:
            time.sleep(1 + 30 + 4)  # past the deadline of the writes sent first
            assert bench.poll() is None, "the bench stopped while the target was"
        finally:
            os.kill(pid, signal.SIGCONT)
        wait_for(lambda: refused() >= 1, "the target to refuse the writes that waited out their deadline")
        out, err = bench.communicate(timeout=60)
    finally:
        if bench.poll() is None:
            bench.kill()
            bench.wait()
    result = json.loads(out)
    assert result["errors"] >= 1 and result["ops"] > result["errors"], result
    # On-time requests are served as before.
    src = write_random(tmp_path / "s", 256 * 1024)
    c.cli("put", str(src), "on-time", "--container", "n")
    get_ok(c, "n", "on-time", sha(src), tmp_path / "out")


def test_tombstones_of_deleted_objects_are_removed_and_the_names_stay_deleted(cluster_factory, tmp_path):
    """Deleting a protected object leaves a tombstone on its head copies (so a copy on a target
    that was down cannot bring it back). Once every copy is that tombstone for the grace
    period, repair removes them: also for an object deleted while one of its targets was down,
    whose old head copy is first brought to the tombstone. The names stay deleted and can be
    put again; live objects are kept."""
    c = cluster_factory(targets=3, capacity="256M", extra_args=(*FAST, "--orphan-grace-ms", "3000"))
    # ec:2+1 with write quorum K: its delete with a target down is above it (K+1 would be every
    # head copy).
    for name, red in (("r", "rep:3"), ("e", "ec:2+1")):
        c.cli("container", "create", name, "--redundancy", red, "--min-durable", "2")
    src = write_random(tmp_path / "s", MiB + 3)
    for cont in ("r", "e"):
        for i in range(3):
            c.cli("put", str(src), f"o{i}", "--container", cont)
        c.cli("put", str(src), "live", "--container", cont)
    for cont in ("r", "e"):
        for i in range(2):
            c.cli("rm", f"o{i}", "--container", cont)
    victim = targets(c)[0]
    c.kill9(victim)
    for cont in ("r", "e"):
        c.cli("rm", "o2", "--container", cont)
    c.restart(victim)
    c.wait_targets_up(3)

    def collected():
        rs = status(c)["repair"]
        return rs["total_tombstones_collected"] >= 6 and rs["tombstones_pending"] == 0 and rs
    wait_for(collected, "repair to remove the tombstones", timeout=120)
    assert "tombstones (deleted objects)" in c.cli("status").stdout
    for cont in ("r", "e"):
        assert [o["name"] for o in json.loads(c.cli("ls", "--container", cont, "--json").stdout)] == ["live"]
        r = c.cli("get", "o2", str(tmp_path / "out"), "--container", cont, check=False)
        assert r.returncode != 0 and "does not exist" in r.stderr
        get_ok(c, cont, "live", sha(src), tmp_path / "out")
        c.cli("put", str(src), "o1", "--container", cont)
        get_ok(c, cont, "o1", sha(src), tmp_path / "out")
    # A few passes later nothing else was removed: the new and live heads are not tombstones.
    before = status(c)["repair"]
    start = before["passes"]
    wait_for(lambda: status(c)["repair"]["passes"] >= start + 3, "three repair passes")
    assert status(c)["repair"]["total_tombstones_collected"] == before["total_tombstones_collected"]
    for cont in ("r", "e"):
        get_ok(c, cont, "o1", sha(src), tmp_path / "out")


def test_a_joining_target_leaves_every_object_readable_and_no_copies_behind(cluster_factory, tmp_path):
    """A target joining moves shards and heads to new slots, and can permute the slots of a
    stripe so that no slot holds its own index any more: repair copies each shard from where
    it is to its slot (a decode could not: too few shards where the slots are), then deletes
    the copies readers no longer ask for; unprotected stripes and heads are moved too. Every
    object reads back, during the moves and after; once a pass finds everything in place, mgmt
    records the join as settled; once deleted, every tombstone (moved heads' too) is collected."""
    c = cluster_factory(targets=3, capacity="256M", extra_args=(*FAST, "--orphan-grace-ms", "3000"))
    c.cli("container", "create", "n", "--redundancy", "none")
    c.cli("container", "create", "r", "--redundancy", "rep:2")
    c.cli("container", "create", "e", "--redundancy", "ec:2+1")
    src = write_random(tmp_path / "s", 3 * MiB + 11)
    names = [f"o{i}" for i in range(8)]
    for cont in ("n", "r", "e"):
        for n in names:
            c.cli("put", str(src), n, "--container", cont)
    wait_for(lambda: status(c)["settled_placement_epoch"] == status(c)["placement_epoch"],
             "repair to settle the first placement")
    # A fourth target, as the others were started.
    argv = list(c.daemon(targets(c)[0])["argv"])
    for flag, value in (("--data-dir", str(c.data_dir / "target-4")), ("--port", "0"), ("--metrics-port", "0")):
        argv[argv.index(flag) + 1] = value
    log = open(c.data_dir / "logs" / "target-4.log", "ab")
    c._procs.append(subprocess.Popen(argv, env=c.env, stdout=log, stderr=log, stdin=subprocess.DEVNULL,
                                     start_new_session=True))
    epoch = c.wait_targets_up(4)["epoch"]
    # Readable at once, while repair moves the data (where it is not yet, readers ask where the
    # old placement put it).
    for cont in ("n", "r", "e"):
        for n in names[:3]:
            get_ok(c, cont, n, sha(src), tmp_path / "out")
    # Wait for passes with the new map to have moved the data.
    wait_for(lambda: status(c)["repair"]["epoch"] >= epoch and status(c)["repair"]["state"] == "idle"
             and status(c)["repair"]["total_shards_repaired"] > 0, "repair to move data to the new target")
    # Then a later pass finds everything on the new slots: readers stop asking the old ones.
    placement = status(c)["placement_epoch"]
    wait_for(lambda: status(c)["settled_placement_epoch"] == placement, "repair to settle the join")
    assert "data moves" not in c.cli("status").stdout
    assert status(c)["repair"]["stripes_unrecoverable"] == 0
    for cont in ("n", "r", "e"):
        for n in names:
            get_ok(c, cont, n, sha(src), tmp_path / "out")
            c.cli("rm", n, "--container", cont)

    def collected():
        rs = status(c)["repair"]
        return rs["total_tombstones_collected"] >= 2 * len(names) and rs["tombstones_pending"] == 0 and rs
    wait_for(collected, "repair to remove every tombstone, moved heads' too", timeout=120)
    for cont in ("n", "r", "e"):
        assert json.loads(c.cli("ls", "--container", cont, "--json").stdout) == []
        r = c.cli("get", "o0", str(tmp_path / "out"), "--container", cont, check=False)
        assert r.returncode != 0 and "does not exist" in r.stderr
