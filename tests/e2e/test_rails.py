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


@pytest.fixture
def tcp_env():
    env = dict(os.environ)
    env.update(TRANSPORTS["tcp"])
    env.pop("PENSTOCK_MGMT", None)
    return env


def start_two_rail_target(d, nets, ns, tmp_path):
    """mgmt on the host, a target in the namespace on both rails; returns mgmt's address and the
    status once the target is up."""
    port = free_port("127.0.0.1")
    mgmt = f"127.0.0.1:{port}"
    d.start("mgmt", ["mgmt", "--listen", f"0.0.0.0:{port}", "--metrics-listen",
                     f"127.0.0.1:{free_port('127.0.0.1')}", "--data-dir", str(tmp_path / "mgmt")])
    rails = ";".join(f"{n['ns_ip']}@{n['ns_if']}" for n in nets)
    d.start("target", ["target", "--data-dir", str(tmp_path / "t0"), "--listen-host", nets[0]["ns_ip"],
                       "--rails", rails, "--data-workers", "2", "--mgmt", f"{nets[0]['host_ip']}:{port}",
                       "--port", "0", "--metrics-port", "0", "--capacity", "512M"], netns=ns)
    deadline = time.time() + 30
    while True:
        p = subprocess.run([PENSTOCK, "status", "--json", "--mgmt", mgmt], env=d.env, capture_output=True,
                           text=True, timeout=60)
        st = json.loads(p.stdout) if p.returncode == 0 else {}
        if st.get("targets_up") == 1:
            return mgmt, st
        assert time.time() < deadline, f"target did not come up: {p.stdout} {p.stderr}"
        time.sleep(0.3)


def cli(env, mgmt, *args):
    p = subprocess.run([PENSTOCK, *args, "--mgmt", mgmt], env=env, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, f"penstock {' '.join(args)}: {p.stderr}"
    return p


def test_target_on_two_rails_serves_a_client_pinned_to_both(two_networks, tcp_env, tmp_path):
    env = tcp_env
    nets, ns = two_networks["nets"], two_networks["ns"]
    d = Daemons(tmp_path, env)
    try:
        mgmt, st = start_two_rail_target(d, nets, ns, tmp_path)
        pinned = ["--data-workers", "2", "--net-devices", ";".join(n["host_if"] for n in nets)]
        # The map lists both rails, each on its own network.
        pieces = st["targets"][0]["address"].split(",")
        assert [p.rsplit(":", 1)[0] for p in pieces] == [n["ns_ip"] for n in nets], st["targets"][0]

        cli(env, mgmt, "container", "create", "r", "--redundancy", "none")
        before = [link_bytes(n["host_if"]) for n in nets]
        objs = {}
        for i, size in enumerate([24 * MiB + 5, 3 * MiB, 4096]):
            src = write_random(tmp_path / f"s{i}", size)
            cli(env, mgmt, "put", str(src), f"o{i}", "--container", "r", *pinned)
            objs[f"o{i}"] = sha(src)
        written = [link_bytes(n["host_if"]) for n in nets]
        for name, digest in objs.items():
            cli(env, mgmt, "get", name, str(tmp_path / "out"), "--container", "r", *pinned)
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


def test_client_starts_without_a_rail_whose_link_is_down(two_networks, tcp_env, tmp_path):
    """The client's second network is down when it starts: it warns, naming the device, and
    moves everything over the first one. A device that does not exist is still an error."""
    env = tcp_env
    nets, ns = two_networks["nets"], two_networks["ns"]
    d = Daemons(tmp_path, env)
    try:
        mgmt, _ = start_two_rail_target(d, nets, ns, tmp_path)
        pinned = ["--data-workers", "2", "--net-devices", ";".join(n["host_if"] for n in nets),
                  "--log-level", "warn"]
        cli(env, mgmt, "container", "create", "r", "--redundancy", "none")
        sh("ip", "link", "set", nets[1]["host_if"], "down")
        src = write_random(tmp_path / "s", 8 * MiB + 3)
        before = link_bytes(nets[0]["host_if"])
        p = cli(env, mgmt, "put", str(src), "o", "--container", "r", *pinned)
        assert f"network devices '{nets[1]['host_if']}'" in p.stderr and "starting without it" in p.stderr, p.stderr
        p = cli(env, mgmt, "get", "o", str(tmp_path / "out"), "--container", "r", *pinned)
        assert sha(tmp_path / "out") == sha(src)
        sent, received = (a - b for a, b in zip(link_bytes(nets[0]["host_if"]), before))
        assert sent > 8 * MiB and received > 8 * MiB, (sent, received)

        p = subprocess.run([PENSTOCK, "get", "o", str(tmp_path / "out2"), "--container", "r", "--mgmt", mgmt,
                            "--data-workers", "2", "--net-devices", f"{nets[0]['host_if']};nosuch9"],
                           env=env, capture_output=True, text=True, timeout=120)
        assert p.returncode != 0 and "'nosuch9'" in p.stderr and "no such network device" in p.stderr, p.stderr
    finally:
        d.stop()


def test_bad_rails_are_refused_by_name(tmp_path):
    p = subprocess.run([PENSTOCK, "target", "--data-dir", str(tmp_path / "t"), "--mgmt", "127.0.0.1:1",
                        "--rails", "127.0.0.1@lo;@eth1"], capture_output=True, text=True, timeout=60)
    assert p.returncode != 0
    assert "@eth1" in p.stderr and "HOST[@DEVICES]" in p.stderr, p.stderr
