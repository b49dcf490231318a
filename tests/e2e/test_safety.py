"""Safe by default, end to end: containers are protected unless told otherwise, a write is
acknowledged only on its quorum of durable copies, and declaring a target lost never loses
data silently (it refuses, or with --force-data-loss reports what it lost everywhere)."""
import json
import os
import signal
import subprocess

from conftest import PENSTOCK
from test_objects import write_random
from test_protection import FAST, sha, status, target_id, targets, wait_for

MiB = 1024 * 1024


def put_all(c, tmp_path, container, sizes, prefix="o"):
    """Puts one object per size; returns {name: sha256}."""
    objs = {}
    for i, size in enumerate(sizes):
        src = write_random(tmp_path / f"{container}-{i}", size)
        c.cli("put", str(src), f"{prefix}{i}", "--container", container)
        objs[f"{prefix}{i}"] = sha(src)
        src.unlink()
    return objs


def reads_back(c, container, name, digest, out):
    r = c.cli("get", name, str(out), "--container", container, check=False)
    ok = r.returncode == 0 and sha(out) == digest
    if out.exists():
        out.unlink()
    return ok, r


def test_containers_are_protected_by_default(cluster_factory):
    c = cluster_factory(targets=3, capacity="128M")
    r = json.loads(c.cli("container", "create", "d", "--json").stdout)
    assert r["redundancy"] == "rep:3" and r["min_durable"] == 2 and r["default_redundancy"], r
    text = c.cli("container", "create", "d2").stdout
    assert "redundancy rep:3" in text and "--redundancy none" in text, text
    r = json.loads(c.cli("container", "create", "n", "--redundancy", "none", "--json").stdout)
    assert r["redundancy"] == "none" and not r["default_redundancy"]
    r = json.loads(c.cli("container", "create", "q", "--redundancy", "ec:2+1", "--min-durable", "2",
                         "--json").stdout)
    assert r["redundancy"] == "ec:2+1" and r["min_durable"] == 2
    bad = c.cli("container", "create", "b", "--redundancy", "ec:2+1", "--min-durable", "1", check=False)
    assert bad.returncode != 0 and "--min-durable must be between 2 (K) and 3" in bad.stderr, bad.stderr
    two = cluster_factory(targets=2, capacity="128M")
    assert json.loads(two.cli("container", "create", "d", "--json").stdout)["redundancy"] == "rep:2"
    one = cluster_factory(targets=1, capacity="128M")
    text = one.cli("container", "create", "d").stdout
    assert "redundancy none" in text and "unprotected" in text, text


def test_a_write_below_its_quorum_fails_and_acknowledged_writes_survive_one_more_loss(cluster_factory, tmp_path):
    """rep:3 (quorum 2): with one target killed writes go on; with a second one stopped a write
    waits out its deadline and fails UNAVAILABLE, never acknowledged on one copy; every write
    that was acknowledged still reads after yet another target dies."""
    # Failure detection off (60 s): the stopped target stays in the map and is waited for.
    c = cluster_factory(targets=3, capacity="128M", heartbeat_timeout_ms=60000)
    c.cli("container", "create", "p", "--redundancy", "rep:3")
    c.cli("container", "create", "q", "--redundancy", "rep:3")
    a, b, cc = targets(c)
    c.kill9(a)
    acked = put_all(c, tmp_path, "p", [1, 300 * 1024, 3 * MiB + 5])
    pid = c.current_pid(b)
    os.kill(pid, signal.SIGSTOP)
    try:
        src = write_random(tmp_path / "below", 2 * MiB)
        r = c.cli("put", str(src), "x", "--container", "q", "--timeout-ms", "3000", "--json", check=False,
                  timeout=120)
        assert r.returncode != 0, "a rep:3 write was acknowledged on one copy"
        err = json.loads(r.stdout)["error"]
        assert err["code"] == "unavailable" and "2 shards are durable" in err["message"], err
    finally:
        os.kill(pid, signal.SIGCONT)
    acked.update(put_all(c, tmp_path, "p", [7, 2 * MiB], prefix="later"))
    # The last copy besides b goes too: b alone holds every acknowledged write to p.
    c.kill9(cc)
    for name, digest in acked.items():
        ok, r = reads_back(c, "p", name, digest, tmp_path / "out")
        assert ok, (name, r.stderr)


def _mixed_cluster(cluster_factory, tmp_path):
    c = cluster_factory(targets=3, capacity="128M", extra_args=FAST)
    c.cli("container", "create", "scratch", "--redundancy", "none", "--stripe-unit", "64K")
    c.cli("container", "create", "safe")  # rep:3
    sizes = [1, 4096, 100 * 1024, 300 * 1024, 1 * MiB + 3, 2 * MiB] * 2
    return c, put_all(c, tmp_path, "scratch", sizes), put_all(c, tmp_path, "safe", sizes)


def test_out_refuses_to_lose_data_and_forced_reports_the_loss(cluster_factory, tmp_path):
    c, scratch, safe = _mixed_cluster(cluster_factory, tmp_path)
    victim = targets(c)[1]
    tid = target_id(c, victim)
    r = c.cli("out", str(tid), check=False)
    assert r.returncode != 0, "out lost data without --force-data-loss"
    assert "container 'scratch' (none)" in r.stdout and "'safe'" not in r.stdout, r.stdout
    assert "--force-data-loss" in r.stderr, r.stderr
    r = c.cli("out", str(tid), "--json", check=False)
    refused = json.loads(r.stdout)
    assert r.returncode != 0 and refused["state"] == "refused"
    [loss] = refused["loss"]["containers"]
    assert loss["container"] == "scratch" and loss["objects"] == len(loss["names"]) > 0, loss
    assert next(t for t in status(c)["targets"] if t["id"] == tid)["state"] == "up"  # nothing changed

    out = json.loads(c.cli("out", str(tid), "--force-data-loss", "--json").stdout)
    assert out["state"] == "lost"
    # Gone for good (until it learns it is lost, a running target still answers for what it held).
    c.kill9(victim)
    lost = set(out["loss"]["containers"][0]["names"])
    assert lost == set(loss["names"])
    st = status(c)
    assert st["lost_objects"] == len(lost), st
    text = c.cli("status").stdout
    assert f"{len(lost)} objects lost" in text and sorted(lost)[0] in text, text
    listed = {o["name"]: o for o in json.loads(c.cli("ls", "--container", "scratch", "--json").stdout)}
    for name in scratch:
        assert bool(listed[name].get("lost")) == (name in lost), (name, listed[name])
    for name, digest in scratch.items():
        ok, r = reads_back(c, "scratch", name, digest, tmp_path / "out")
        if name in lost:
            assert not ok and f"is lost: target {tid}" in r.stderr, r.stderr
            j = c.cli("get", name, str(tmp_path / "out"), "--container", "scratch", "--json", check=False)
            assert json.loads(j.stdout)["error"]["code"] == "data_loss", j.stdout
        else:
            assert ok, (name, r.stderr)
    for name, digest in safe.items():  # rep:3 lost nothing
        assert reads_back(c, "safe", name, digest, tmp_path / "out")[0], name
    # A lost name put again is whole: it reads, and a repair pass forgets its record.
    again = sorted(lost)[0]
    src = write_random(tmp_path / "again", 5000)
    c.cli("put", str(src), again, "--container", "scratch")
    assert reads_back(c, "scratch", again, sha(src), tmp_path / "out")[0]
    wait_for(lambda: status(c)["lost_objects"] == len(lost) - 1, "the record of the name put again to go")
    listed = {o["name"]: o for o in json.loads(c.cli("ls", "--container", "scratch", "--json").stdout)}
    assert not listed[again].get("lost"), listed[again]


def test_out_of_a_down_target_says_what_it_cannot_name(cluster_factory, tmp_path):
    """A down target cannot be listed: the heads of a none container that only it held cannot be
    named, so out refuses and says so; forced, a read of such a name says it may have been lost.
    (Protected containers alone lose nothing: test_protection's lost-target test declares one out
    without forcing.)"""
    c, scratch, safe = _mixed_cluster(cluster_factory, tmp_path)
    victim = targets(c)[2]
    tid = target_id(c, victim)
    c.kill9(victim)
    wait_for(lambda: status(c)["targets_down"] == 1, "the target to be marked down")
    r = c.cli("out", str(tid), check=False)
    assert r.returncode != 0 and "cannot be named" in r.stdout and "'safe'" not in r.stdout, (r.stdout, r.stderr)
    out = json.loads(c.cli("out", str(tid), "--force-data-loss", "--json").stdout)
    assert out["state"] == "lost" and out["loss"]["containers"][0]["unlisted"], out
    named = set(out["loss"]["containers"][0]["names"])
    gone = [n for n in scratch if n not in named and
            c.cli("stat", n, "--container", "scratch", check=False).returncode != 0]
    assert gone, "no scratch object had its head on the lost target"
    r = c.cli("get", gone[0], str(tmp_path / "out"), "--container", "scratch", check=False)
    assert r.returncode != 0 and "may have been lost" in r.stderr and f"target {tid}" in r.stderr, r.stderr
    for name, digest in safe.items():
        assert reads_back(c, "safe", name, digest, tmp_path / "out")[0], name
