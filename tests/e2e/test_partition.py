"""(f) A target cut off by a network partition and healed: the target runs in a network
namespace this test creates, joined to the host by a veth pair; the test takes the link down
and up again. Clients keep reading and writing (degraded) during the partition, and after it
heals mgmt's repair service gives the target what it missed, so another target can then fail
without loss. All traffic stays on the veth pair and loopback."""
import hashlib
import json
import os
import signal
import subprocess
import time
import urllib.request
import uuid

import pytest

from conftest import PENSTOCK, TRANSPORTS, pid_alive
from test_objects import write_random

MiB = 1024 * 1024


def sh(*args):
    subprocess.run(args, check=True, capture_output=True, text=True)


def veth_pair(ns, host_if, host_ip, ns_if, ns_ip):
    """A veth pair joining the host (host_if, host_ip) to namespace `ns` (ns_if, ns_ip), a /30
    of its own, both ends up. Deleting host_if deletes both."""
    sh("ip", "link", "add", host_if, "type", "veth", "peer", "name", ns_if)
    sh("ip", "link", "set", ns_if, "netns", ns)
    sh("ip", "addr", "add", f"{host_ip}/30", "dev", host_if)
    sh("ip", "link", "set", host_if, "up")
    sh("ip", "netns", "exec", ns, "ip", "addr", "add", f"{ns_ip}/30", "dev", ns_if)
    sh("ip", "netns", "exec", ns, "ip", "link", "set", ns_if, "up")


def sha(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture
def netns():
    if os.geteuid() != 0:
        pytest.skip("network namespaces need root")
    tag = uuid.uuid4().hex[:6]
    ns, host_if, ns_if = f"pstk-{tag}", f"pvh{tag}", f"pvn{tag}"
    sub = 200 + int(tag[:2], 16) % 50
    host_ip, ns_ip = f"10.{sub}.{int(tag[2:4], 16)}.1", f"10.{sub}.{int(tag[2:4], 16)}.2"
    sh("ip", "netns", "add", ns)
    try:
        veth_pair(ns, host_if, host_ip, ns_if, ns_ip)
        sh("ip", "netns", "exec", ns, "ip", "link", "set", "lo", "up")
        yield {"ns": ns, "host_if": host_if, "host_ip": host_ip, "ns_ip": ns_ip}
    finally:
        subprocess.run(["ip", "link", "del", host_if], capture_output=True)
        subprocess.run(["ip", "netns", "del", ns], capture_output=True)


def free_port(host):
    import socket
    s = socket.socket()
    s.bind((host, 0))
    port = s.getsockname()[1]
    s.close()
    return port


class Daemons:
    def __init__(self, tmp_path, env):
        self.tmp, self.env, self.procs = tmp_path, env, {}

    def start(self, name, args, netns=None):
        log = open(self.tmp / f"{name}.log", "ab")
        cmd = [PENSTOCK, *args]
        if netns:
            cmd = ["ip", "netns", "exec", netns, *cmd]
        self.procs[name] = subprocess.Popen(cmd, env=self.env, stdout=log, stderr=log, stdin=subprocess.DEVNULL,
                                            start_new_session=True)

    def stop(self):
        for p in self.procs.values():
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in self.procs.values():
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


def test_partitioned_target_heals_and_is_repaired(netns, tmp_path):
    env = dict(os.environ)
    env.update(TRANSPORTS["tcp"])
    env.pop("PENSTOCK_MGMT", None)
    d = Daemons(tmp_path, env)
    try:
        # mgmt listens on loopback and on the veth (the namespace reaches it there); the other
        # targets and the clients stay on loopback.
        port, metrics = free_port("127.0.0.1"), f"127.0.0.1:{free_port('127.0.0.1')}"
        mgmt = f"127.0.0.1:{port}"
        d.start("mgmt", ["mgmt", "--listen", f"0.0.0.0:{port}", "--metrics-listen", metrics, "--data-dir",
                         str(tmp_path / "mgmt"), "--heartbeat-timeout-ms", "2000", "--repair-interval-ms", "1000"])
        common = ["--port", "0", "--metrics-port", "0", "--capacity", "256M", "--heartbeat-ms", "300"]
        for i in range(3):
            d.start(f"t{i}", ["target", "--data-dir", str(tmp_path / f"t{i}"), "--listen-host", "127.0.0.1",
                              "--mgmt", mgmt, *common])
        d.start("cut", ["target", "--data-dir", str(tmp_path / "cut"), "--listen-host", netns["ns_ip"],
                        "--mgmt", f"{netns['host_ip']}:{port}", *common], netns=netns["ns"])

        def cli(*args, check=True):
            p = subprocess.run([PENSTOCK, *args, "--mgmt", mgmt], env=env, capture_output=True, text=True,
                               timeout=120)
            if check:
                assert p.returncode == 0, p.stderr
            return p

        def st():
            return json.loads(cli("status", "--json").stdout)

        def wait(pred, what, timeout=60):
            deadline = time.time() + timeout
            while time.time() < deadline:
                try:
                    if pred():
                        return
                except (AssertionError, json.JSONDecodeError):
                    pass
                time.sleep(0.3)
            raise AssertionError(f"timed out waiting for {what}; status: {cli('status', check=False).stdout}")

        wait(lambda: st()["targets_up"] == 4, "4 targets up")
        # Write quorum K: writes during the partition miss one shard and are above it.
        cli("container", "create", "p", "--redundancy", "ec:2+1", "--min-durable", "2")
        objs = {}
        for i, size in enumerate([7, 2 * MiB + 3, 12 * MiB]):
            src = write_random(tmp_path / f"s{i}", size)
            cli("put", str(src), f"before{i}", "--container", "p")
            objs[f"before{i}"] = sha(src)

        # Partition: the namespace's link goes down.
        sh("ip", "link", "set", netns["host_if"], "down")
        for i, size in enumerate([5, 3 * MiB, 9 * MiB + 1]):  # written degraded
            src = write_random(tmp_path / f"d{i}", size)
            cli("put", str(src), f"during{i}", "--container", "p")
            objs[f"during{i}"] = sha(src)
        for name, digest in objs.items():
            cli("get", name, str(tmp_path / "out"), "--container", "p")
            assert sha(tmp_path / "out") == digest, name
        cut_addr = f"{netns['ns_ip']}:"
        wait(lambda: any(t["address"].startswith(cut_addr) and t["state"] == "down" for t in st()["targets"]),
             "the cut-off target marked down")

        def repaired_shards():
            with urllib.request.urlopen(f"http://{metrics}/metrics", timeout=5) as r:
                for line in r.read().decode().splitlines():
                    if line.startswith("penstock_repair_shards_total"):
                        return int(float(line.split()[-1]))
            return 0

        # Heal: the target comes back up and repair gives it what it missed.
        before = repaired_shards()
        sh("ip", "link", "set", netns["host_if"], "up")
        wait(lambda: st()["targets_up"] == 4, "the healed target up again")
        # Back from DOWN it is recovering (no protected reads from it) until a clean repair pass.
        wait(lambda: not any(t["recovering"] for t in st()["targets"]), "repair to check the healed target")
        assert repaired_shards() > before  # the cells the degraded writes left out
        assert pid_alive(d.procs["cut"].pid)

        # With the missed shards repaired, another target may fail (M=1) without loss.
        d.procs["t1"].kill()
        d.procs["t1"].wait()
        for name, digest in objs.items():
            cli("get", name, str(tmp_path / "out"), "--container", "p")
            assert sha(tmp_path / "out") == digest, name
    finally:
        d.stop()
