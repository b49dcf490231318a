"""Highly-available mgmt: a real etcd, three `penstock mgmt --meta etcd://...` processes and three
targets given all three mgmt addresses. The leader is killed with SIGKILL while a client
writes and reads objects through `--mgmt a,b,c`: the workload carries on without an error, no
object is lost, another mgmt leads with the same state and no target is marked down."""
import json
import os
import signal
import socket
import subprocess
import threading
import time
import urllib.request

import pytest

from conftest import PENSTOCK, TRANSPORTS, pid_alive, run

ETCD = os.environ.get("PENSTOCK_ETCD", "/usr/bin/etcd")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def is_leader(metrics_port):
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=1) as r:
            text = r.read().decode()
    except OSError:
        return False
    return any(line.strip() == "penstock_mgmt_is_leader 1" for line in text.splitlines())


class HaCluster:
    def __init__(self, tmp_path):
        self.tmp = tmp_path
        self.env = dict(os.environ)
        self.env.update(TRANSPORTS["tcp"])
        self.env.pop("PENSTOCK_MGMT", None)
        self.procs = {}
        self.mgmt = []  # (name, grpc address, metrics port)

    def spawn(self, name, argv):
        log = open(self.tmp / f"{name}.log", "ab")
        self.procs[name] = subprocess.Popen(argv, env=self.env, stdout=log, stderr=log,
                                            stdin=subprocess.DEVNULL, start_new_session=True)

    def start_etcd(self):
        if not os.access(ETCD, os.X_OK):
            pytest.fail(f"{ETCD} is missing; install etcd (apt-get install -y etcd-server "
                        "etcd-client, see scripts/bootstrap.sh) to run the HA mgmt test")
        cport, pport = free_port(), free_port()
        c, p = f"http://127.0.0.1:{cport}", f"http://127.0.0.1:{pport}"
        self.spawn("etcd", [ETCD, "--data-dir", str(self.tmp / "etcd"), "--name", "default",
                            "--listen-client-urls", c, "--advertise-client-urls", c,
                            "--listen-peer-urls", p, "--initial-advertise-peer-urls", p,
                            "--initial-cluster", f"default={p}"])
        self.etcd = f"etcd://127.0.0.1:{cport}"
        deadline = time.time() + 20
        while time.time() < deadline:
            try:
                req = urllib.request.Request(f"{c}/v3/kv/range", data=b'{"key":"AA=="}',
                                             method="POST")
                urllib.request.urlopen(req, timeout=1).read()
                return
            except OSError:
                time.sleep(0.1)
        raise AssertionError("etcd did not start; see etcd.log")

    def start_mgmt(self, n=3):
        for i in range(n):
            port, mport = free_port(), free_port()
            name = f"mgmt-{i}"
            # etcd holds all of mgmt's state: no --data-dir (one of them gets one all the same).
            data_dir = ["--data-dir", str(self.tmp / name)] if i == 0 else []
            self.spawn(name, [PENSTOCK, "mgmt", "--listen", f"127.0.0.1:{port}",
                              "--metrics-listen", f"127.0.0.1:{mport}", *data_dir, "--meta", self.etcd,
                              "--heartbeat-timeout-ms", "3000"])
            self.mgmt.append((name, f"127.0.0.1:{port}", mport))
        self.addresses = ",".join(a for _, a, _ in self.mgmt)

    def start_targets(self, n=3):
        for i in range(n):
            self.spawn(f"target-{i}", [PENSTOCK, "target", "--data-dir", str(self.tmp / f"t{i}"),
                                       "--mgmt", self.addresses, "--port", "0",
                                       "--metrics-port", "0", "--capacity", "256M"])

    def cli(self, *args, check=True):
        return run([*args, "--mgmt", self.addresses], env=self.env, check=check, timeout=60)

    def status(self):
        return json.loads(self.cli("status", "--json").stdout)

    def leaders(self):
        return [m for m in self.mgmt if self.procs[m[0]].poll() is None and is_leader(m[2])]

    def wait_one_leader(self, timeout=15):
        deadline = time.time() + timeout
        while time.time() < deadline:
            ls = self.leaders()
            if len(ls) == 1:
                return ls[0]
            time.sleep(0.1)
        raise AssertionError(f"no single mgmt leader after {timeout}s: {self.leaders()}")

    def wait_targets_up(self, count, timeout=30):
        deadline = time.time() + timeout
        st = None
        while time.time() < deadline:
            st = json.loads(self.cli("status", "--json", check=False).stdout or "{}")
            if st.get("targets_up", 0) >= count:
                return st
            time.sleep(0.2)
        raise AssertionError(f"fewer than {count} targets up after {timeout}s: {st}")

    def stop(self):
        for name, p in self.procs.items():
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for name, p in self.procs.items():
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


@pytest.fixture
def ha(tmp_path):
    c = HaCluster(tmp_path)
    try:
        c.start_etcd()
        c.start_mgmt(3)
        c.wait_one_leader()
        c.start_targets(3)
        yield c
    finally:
        c.stop()


def test_kill9_leader_under_workload(ha, tmp_path):
    ha.wait_targets_up(3)
    ha.cli("container", "create", "data", "--redundancy", "none")
    before = ha.status()
    old = ha.wait_one_leader()

    objs = {}
    errors = []
    killed = threading.Event()

    def killer():
        time.sleep(1.5)  # a few objects in, then the leader dies
        pid = ha.procs[old[0]].pid
        os.kill(pid, signal.SIGKILL)
        deadline = time.time() + 10
        while pid_alive(pid) and time.time() < deadline:
            time.sleep(0.05)
        if not pid_alive(pid):
            killed.set()

    t = threading.Thread(target=killer)
    t.start()
    i = 0
    after_kill = 0
    deadline = time.time() + 40
    # Keep going until well after the kill, so calls span the failover.
    while time.time() < deadline and after_kill < 10:
        if killed.is_set():
            after_kill += 1
        src = tmp_path / f"in{i}"
        data = os.urandom(1000 + 997 * i)
        src.write_bytes(data)
        p = ha.cli("put", str(src), f"o{i}", "--container", "data", check=False)
        if p.returncode != 0:
            errors.append(f"put o{i}: {p.stderr}")
        else:
            objs[f"o{i}"] = data
        out = tmp_path / f"out{i}"
        g = ha.cli("get", f"o{i}", str(out), "--container", "data", check=False)
        if g.returncode != 0 or out.read_bytes() != data:
            errors.append(f"get o{i}: {g.stderr}")
        i += 1
    t.join()
    assert killed.is_set(), "the leader did not die"
    assert after_kill >= 3, f"only {after_kill} put/get pairs ran after the leader died"
    assert not errors, "\n".join(errors)

    new = ha.wait_one_leader()
    assert new[0] != old[0]
    after = ha.wait_targets_up(3)
    assert after["targets_down"] == 0
    assert after["epoch"] >= before["epoch"]
    # Nothing lost: every object written, before or after the failover, reads back intact.
    for name, data in objs.items():
        out = tmp_path / f"check-{name}"
        ha.cli("get", name, str(out), "--container", "data")
        assert out.read_bytes() == data, name
    assert len(objs) == i
