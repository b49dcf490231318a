"""Everyday polish of the local cluster and the CLI, with real daemons: `up` right after `down` on
the same ports, the `export PENSTOCK_MGMT=...` line, metrics addresses in `status`, one id per
target (data dir, log, cluster.json, status), `up` after `penstock out`, `down` with nothing
running, unknown commands and flags named with the nearest known one, and `up`'s default
capacity against the README's own `bench write`."""
import json
import os
import random
import socket
import subprocess
import urllib.request
from pathlib import Path

from conftest import PENSTOCK, Cluster, run


def env():
    e = dict(os.environ)
    for var in ("PENSTOCK_MGMT", "PENSTOCK_TLS_CA", "PENSTOCK_TLS_CERT", "PENSTOCK_TLS_KEY", "UCX_TLS",
                "UCX_MM_ERROR_HANDLING"):
        e.pop(var, None)
    e["UCX_TLS"] = "tcp"
    return e


def ports_free(base, targets):
    """Whether every port `up --base-port base` uses can be listened on now."""
    ports = [base, base + 1] + [base + 10 + 2 * i + k for i in range(targets) for k in (0, 1)]
    for p in ports:
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", p))
        except OSError:
            return False
        finally:
            s.close()
    return True


def free_base_port(targets):
    for _ in range(100):
        base = random.randrange(20000, 30000, 100)
        if ports_free(base, targets):
            return base
    raise AssertionError("no free range of ports")


def time_wait_ports():
    """Local ports of this host's TCP sockets in TIME_WAIT (state 06 in /proc/net/tcp)."""
    ports = set()
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        if fields[3] == "06":
            ports.add(int(fields[1].split(":")[1], 16))
    return ports


def up(data_dir, *args, check=True):
    return run(["up", "--data-dir", str(data_dir), "--heartbeat-timeout-ms", "3000", *args], env=env(),
               check=check, timeout=120)


def down(data_dir, *args, check=True):
    return run(["down", "--data-dir", str(data_dir), *args], env=env(), check=check, timeout=60)


def cli(mgmt, *args, check=True):
    return run([*args, "--mgmt", mgmt], env=env(), check=check)


def status(mgmt):
    return json.loads(cli(mgmt, "status", "--json").stdout)


def kill_recorded(data_dir):
    """Stops whatever a test left running in `data_dir`, by recorded PID."""
    down(data_dir, check=False)


def test_up_right_after_down_on_the_same_ports(tmp_path):
    d = tmp_path / "c"
    base = free_base_port(3)
    try:
        mgmt = up(d, "--base-port", str(base), "--capacity", "512M").stdout.strip()
        assert mgmt == f"127.0.0.1:{base}"
        cli(mgmt, "container", "create", "c", "--redundancy", "none")
        f = tmp_path / "f"
        f.write_bytes(os.urandom(3 << 20))
        cli(mgmt, "put", str(f), "obj", "--container", "c")
        cli(mgmt, "get", "obj", str(tmp_path / "g1"), "--container", "c")
        down(d)
        ours = {base, base + 1} | {base + 10 + k for k in range(6)}
        lingering = ours & time_wait_ports()
        # At once, on the same ports, with connections of the first cluster still in TIME_WAIT.
        r = up(d, "--base-port", str(base), "--capacity", "512M", check=False)
        assert r.returncode == 0, (r.stderr, sorted(lingering))
        assert status(mgmt)["targets_up"] == 3
        cli(mgmt, "get", "obj", str(tmp_path / "g2"), "--container", "c")
        assert (tmp_path / "g2").read_bytes() == f.read_bytes()
        # A port a live process listens on is still refused, by name.
        down(d)
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("127.0.0.1", base + 12))
        s.listen()
        try:
            r = up(d, "--base-port", str(base), check=False)
            assert r.returncode == 1 and f"127.0.0.1:{base + 12} is in use" in r.stderr, r.stderr
        finally:
            s.close()
    finally:
        kill_recorded(d)


def test_up_prints_an_export_line_a_shell_can_eval(tmp_path):
    d = tmp_path / "c"
    try:
        r = up(d, "--base-port", "0", "--targets", "1", "--capacity", "256M")
        mgmt = r.stdout.strip()  # stdout stays the bare address, for `mgmt=$(penstock up ...)`
        export = r.stderr.strip().splitlines()[-1]
        assert export == f"export PENSTOCK_MGMT={mgmt}", r.stderr
        # The line as a shell evaluates it: client commands then find mgmt without --mgmt.
        script = f'{export}\n"$1" status --json'
        out = subprocess.run(["bash", "-c", script, "sh", PENSTOCK], env=env(), capture_output=True,
                             text=True, timeout=60, check=True).stdout
        assert json.loads(out)["mgmt"] == mgmt
        down(d)
        j = json.loads(up(d, "--base-port", "0", "--targets", "1", "--json").stdout)
        assert j["export"] == f"export PENSTOCK_MGMT={j['mgmt']}"
        assert j["mgmt_metrics"] == j["daemons"][0]["metrics"]
    finally:
        kill_recorded(d)


def scrape(hostport):
    with urllib.request.urlopen(f"http://{hostport}/metrics", timeout=10) as r:
        return r.status, r.read().decode()


def test_status_shows_every_daemons_metrics_address(cluster_factory):
    c = cluster_factory(targets=2)
    st = json.loads(c.cli("status", "--json").stdout)
    assert st["mgmt_metrics"] == c.daemon("mgmt")["metrics"]
    table = c.cli("status").stdout
    assert f"metrics {st['mgmt_metrics']}" in table.splitlines()[0], table
    assert "METRICS" in table
    for t in st["targets"]:
        assert t["metrics"] == c.daemon(f"target-{t['id']}")["metrics"]
        assert t["metrics"] in table
    for addr in [st["mgmt_metrics"]] + [t["metrics"] for t in st["targets"]]:
        code, text = scrape(addr)
        assert code == 200 and "penstock_" in text, addr


def check_one_id_per_target(data_dir, st):
    record = json.loads((data_dir / "cluster.json").read_text())
    names = {d["name"] for d in record["daemons"] if d["name"] != "mgmt"}
    up_ids = {t["id"] for t in st["targets"] if t["state"] == "up"}
    assert names == {f"target-{i}" for i in up_ids}, (names, st["targets"])
    for t in st["targets"]:
        tdir = data_dir / f"target-{t['id']}"
        assert (tdir / "target.uuid").read_text().strip() == t["uuid"], t
        assert (data_dir / "logs" / f"target-{t['id']}.log").exists()
    for d in record["daemons"]:
        if d["name"] != "mgmt":
            assert d["argv"][d["argv"].index("--data-dir") + 1] == str(data_dir / d["name"])
            assert d["log"] == str(data_dir / "logs" / f"{d['name']}.log")


def test_one_id_per_target_everywhere(tmp_path):
    d = tmp_path / "c"
    try:
        mgmt = up(d, "--base-port", "0", "--targets", "3", "--capacity", "256M").stdout.strip()
        st = status(mgmt)
        assert sorted(t["id"] for t in st["targets"]) == [1, 2, 3]
        check_one_id_per_target(d, st)
        uuids = {t["id"]: t["uuid"] for t in st["targets"]}
        down(d)
        # A data dir laid out before ids were names: target-1 and target-2 hold each other's
        # targets. `up` names them after their ids again (and their logs with them).
        for name in ("target-1", "target-2"):
            os.rename(d / name, d / f"{name}.x")
            os.rename(d / "logs" / f"{name}.log", d / "logs" / f"{name}.log.x")
        os.rename(d / "target-1.x", d / "target-2")
        os.rename(d / "target-2.x", d / "target-1")
        os.rename(d / "logs" / "target-1.log.x", d / "logs" / "target-2.log")
        os.rename(d / "logs" / "target-2.log.x", d / "logs" / "target-1.log")
        # One more target: it joins as id 4, named so.
        mgmt = up(d, "--base-port", "0", "--targets", "4", "--capacity", "256M").stdout.strip()
        st = status(mgmt)
        assert {t["id"]: t["uuid"] for t in st["targets"] if t["id"] != 4} == uuids
        assert st["targets_up"] == 4
        check_one_id_per_target(d, st)
    finally:
        kill_recorded(d)


def test_up_after_out_starts_the_others_and_says_so(tmp_path):
    d = tmp_path / "c"
    try:
        mgmt = up(d, "--base-port", "0", "--targets", "3", "--capacity", "256M").stdout.strip()
        cli(mgmt, "container", "create", "c", "--redundancy", "rep:3")
        f = tmp_path / "f"
        f.write_bytes(os.urandom(2 << 20))
        cli(mgmt, "put", str(f), "obj", "--container", "c")
        cli(mgmt, "out", "2")
        down(d)
        r = up(d, "--base-port", "0", "--targets", "3", check=False)
        assert r.returncode == 0, r.stderr
        mgmt = r.stdout.strip()
        assert "target 2 declared lost (`penstock out`): not started" in r.stderr, r.stderr
        assert "targets 1, 3 " in r.stderr, r.stderr
        st = status(mgmt)
        assert {t["id"]: t["state"] for t in st["targets"]} == {1: "up", 2: "lost", 3: "up"}
        check_one_id_per_target(d, st)
        cli(mgmt, "get", "obj", str(tmp_path / "g"), "--container", "c")
        assert (tmp_path / "g").read_bytes() == f.read_bytes()
        down(d)
        j = json.loads(up(d, "--base-port", "0", "--targets", "3", "--json").stdout)
        assert j["not_started"] == [{"id": 2, "name": "target-2", "reason": "declared lost"}]
        assert sorted(x["name"] for x in j["daemons"]) == ["mgmt", "target-1", "target-3"]
    finally:
        kill_recorded(d)


def test_down_with_nothing_running_exits_0_saying_so(tmp_path):
    d = tmp_path / "c"
    up(d, "--base-port", "0", "--targets", "1", "--capacity", "256M")
    r = down(d)
    assert "stopped 2 processes" in r.stderr
    r = down(d)
    assert r.returncode == 0 and "no cluster is running in" in r.stderr and "nothing to stop" in r.stderr
    assert json.loads(down(d, "--json").stdout) == {"stopped": 0, "killed": 0}
    # A directory that never held a cluster.
    r = down(tmp_path / "never")
    assert r.returncode == 0 and "nothing to stop" in r.stderr


def one_line(proc):
    assert proc.returncode == 2, proc
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    return lines[0]


def test_unknown_commands_and_flags_name_themselves_and_the_nearest():
    cases = [
        (["stauts"], "unknown command 'stauts'; did you mean 'status'?"),
        (["ls", "--contianer", "x"], "unknown flag '--contianer'; did you mean '--container'?"),
        (["container", "crate", "x"], "unknown command 'container crate'; did you mean 'container create'?"),
        (["up", "--data-dir", "/tmp/x", "--targts", "3"], "unknown flag '--targts'; did you mean '--targets'?"),
        (["get", "a", "b", "--mgmt=h:1", "--contaner=c"], "unknown flag '--contaner'; did you mean '--container'?"),
    ]
    for args, message in cases:
        line = one_line(run(args, check=False))
        assert line.startswith(f"penstock: error: {message}"), (args, line)
    # Nothing near: named, without a guess, and where to look.
    line = one_line(run(["frobnicate"], check=False))
    assert "unknown command 'frobnicate'" in line and "did you mean" not in line and "penstock --help" in line
    line = one_line(run(["ls", "--xyzzy", "--container", "c"], check=False))
    assert "unknown flag '--xyzzy'" in line and "penstock ls --help" in line
    # Known words that fail for another reason keep CLI11's message.
    line = one_line(run(["ls"], check=False))
    assert "--container" in line and "unknown" not in line


def auto_capacity_gib(path, targets):
    st = os.statvfs(path)
    return min(max(st.f_bavail * st.f_frsize // (8 * targets) >> 30, 1), 16)


def test_default_capacity_fits_the_readmes_bench_write(tmp_path):
    d = tmp_path / "c"
    d.mkdir()
    expected = auto_capacity_gib(d, 3)
    try:
        r = up(d, "--base-port", "0", "--targets", "3", "--json")
        j = json.loads(r.stdout)
        # Free space moves while other tests run: within a GiB of what this test computed.
        assert abs(int(j["capacity"].rstrip("G")) - expected) <= 1, (j["capacity"], expected)
        mgmt = j["mgmt"]
        for t in status(mgmt)["targets"]:
            assert t["capacity_bytes"] >= (int(j["capacity"].rstrip("G")) << 30) * 0.9
        # The README's commands, with rep:3 (3 copies of every byte).
        cli(mgmt, "container", "create", "photos", "--redundancy", "rep:3")
        r = cli(mgmt, "bench", "write", "--container", "photos", "--size", "4M", "--objects", "128",
                "--no-cleanup", check=False)
        assert r.returncode == 0, (r.stdout, r.stderr)
        assert "no space" not in r.stdout + r.stderr
        assert all(t["free_bytes"] > 0 for t in status(mgmt)["targets"])
    finally:
        kill_recorded(d)
