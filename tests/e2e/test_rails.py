"""Multi-rail data plane: a target on two networks (--rails, one listener and one UCX context per
network) and a client whose two data-plane workers are pinned to one network each
(--data-workers 2 --net-devices 'a;b'). The test makes the two networks: a network namespace
joined to the host by two veth pairs, each pair its own subnet. The target runs in the namespace,
mgmt and the client on the host. Objects written and read back byte for byte must have crossed
both networks in both directions (the veths' byte counters), and the target's registered address
lists both rails. All traffic stays on the veth pairs and loopback."""
import hashlib
import json
import os
import subprocess
import time
import uuid

import pytest

from conftest import PENSTOCK, TRANSPORTS
from test_objects import write_random
from test_partition import Daemons, free_port, sh, veth_pair

MiB = 1024 * 1024


@pytest.fixture
def two_networks():
    if os.geteuid() != 0:
        pytest.skip("network namespaces need root")
    tag = uuid.uuid4().hex[:6]
    ns = f"pstr-{tag}"
    base = 200 + int(tag[:2], 16) % 50
    nets = []
    sh("ip", "netns", "add", ns)
    try:
        sh("ip", "netns", "exec", ns, "ip", "link", "set", "lo", "up")
        for i in range(2):
            host_if, ns_if = f"prh{i}{tag}", f"prn{i}{tag}"
            subnet = f"10.{base}.{(int(tag[2:4], 16) + 64 * i) % 256}"
            veth_pair(ns, host_if, f"{subnet}.1", ns_if, f"{subnet}.2")
            nets.append({"host_if": host_if, "ns_if": ns_if, "host_ip": f"{subnet}.1", "ns_ip": f"{subnet}.2"})
        yield {"ns": ns, "nets": nets}
    finally:
        for n in nets:
            subprocess.run(["ip", "link", "del", n["host_if"]], capture_output=True)
        subprocess.run(["ip", "netns", "del", ns], capture_output=True)


def link_bytes(ifname):
    stats = f"/sys/class/net/{ifname}/statistics"
    with open(f"{stats}/tx_bytes") as tx, open(f"{stats}/rx_bytes") as rx:
        return int(tx.read()), int(rx.read())


def sha(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_target_on_two_rails_serves_a_client_pinned_to_both(two_networks, tmp_path):
    env = dict(os.environ)
    env.update(TRANSPORTS["tcp"])
    env.pop("PENSTOCK_MGMT", None)
    nets, ns = two_networks["nets"], two_networks["ns"]
    d = Daemons(tmp_path, env)
    try:
        port = free_port("127.0.0.1")
        mgmt = f"127.0.0.1:{port}"
        d.start("mgmt", ["mgmt", "--listen", f"0.0.0.0:{port}", "--metrics-listen",
                         f"127.0.0.1:{free_port('127.0.0.1')}", "--data-dir", str(tmp_path / "mgmt")])
        rails = ";".join(f"{n['ns_ip']}@{n['ns_if']}" for n in nets)
        d.start("target", ["target", "--data-dir", str(tmp_path / "t0"), "--listen-host", nets[0]["ns_ip"],
                           "--rails", rails, "--data-workers", "2", "--mgmt", f"{nets[0]['host_ip']}:{port}",
                           "--port", "0", "--metrics-port", "0", "--capacity", "512M"], netns=ns)
        pinned = ["--data-workers", "2", "--net-devices", ";".join(n["host_if"] for n in nets)]

        def cli(*args):
            p = subprocess.run([PENSTOCK, *args, "--mgmt", mgmt], env=env, capture_output=True, text=True,
                               timeout=120)
            assert p.returncode == 0, f"penstock {' '.join(args)}: {p.stderr}"
            return p

        deadline = time.time() + 30
        while True:
            p = subprocess.run([PENSTOCK, "status", "--json", "--mgmt", mgmt], env=env, capture_output=True,
                               text=True, timeout=60)
            st = json.loads(p.stdout) if p.returncode == 0 else {}
            if st.get("targets_up") == 1:
                break
            assert time.time() < deadline, f"target did not come up: {p.stdout} {p.stderr}"
            time.sleep(0.3)
        # The map lists both rails, each on its own network.
        pieces = st["targets"][0]["address"].split(",")
        assert [p.rsplit(":", 1)[0] for p in pieces] == [n["ns_ip"] for n in nets], st["targets"][0]

        cli("container", "create", "r", "--redundancy", "none")
        before = [link_bytes(n["host_if"]) for n in nets]
        objs = {}
        for i, size in enumerate([24 * MiB + 5, 3 * MiB, 4096]):
            src = write_random(tmp_path / f"s{i}", size)
            cli("put", str(src), f"o{i}", "--container", "r", *pinned)
            objs[f"o{i}"] = sha(src)
        written = [link_bytes(n["host_if"]) for n in nets]
        for name, digest in objs.items():
            cli("get", name, str(tmp_path / "out"), "--container", "r", *pinned)
            assert sha(tmp_path / "out") == digest, name
        after = [link_bytes(n["host_if"]) for n in nets]
        # Each network carried a fair share of the writes (host tx) and of the reads (host rx):
        # the client's two workers each went to the rail on their own network.
        for i, n in enumerate(nets):
            sent, received = written[i][0] - before[i][0], after[i][1] - written[i][1]
            assert sent > 6 * MiB, f"{n['host_if']} carried {sent} bytes of the ~27 MiB written"
            assert received > 6 * MiB, f"{n['host_if']} carried {received} bytes of the ~27 MiB read"
    finally:
        d.stop()


def test_bad_rails_are_refused_by_name(tmp_path):
    p = subprocess.run([PENSTOCK, "target", "--data-dir", str(tmp_path / "t"), "--mgmt", "127.0.0.1:1",
                        "--rails", "127.0.0.1@lo;@eth1"], capture_output=True, text=True, timeout=60)
    assert p.returncode != 0
    assert "@eth1" in p.stderr and "HOST[@DEVICES]" in p.stderr, p.stderr
