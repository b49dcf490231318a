#!/usr/bin/python3
"""Randomized fault soak for data protection (run by hand; not part of `make test`).

A local cluster (mgmt and 5 targets; as root, one of them in a network namespace the soak
creates, joined by a veth pair) with rep:2, ec:2+1 and ec:3+2 containers takes a stream of puts,
gets and deletes while targets are killed (-9) and restarted, stopped (SIGSTOP) and continued,
or the namespaced one is cut off (veth down) and healed: one fault at a time, each lasting a
few seconds. Every acknowledged
put is remembered by its SHA-256; every get is checked against it. A get that fails while a
fault is active is retried once the fault is over (a second fault can hit data written
degraded during the first before repair got to it: unavailable for a while, not lost). At
the end every target is up, repair has settled, and every acknowledged object must read back
exactly. Any wrong byte, or an object that cannot be read at the end, fails the run.

Usage: tests/soak/fault_soak.py [MINUTES] [SEED]     (default 30 minutes)
Prints progress every minute and, last, one summary line.
"""
import hashlib
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PENSTOCK = os.environ.get("PENSTOCK_BIN", os.path.join(REPO, "build/src/cli/penstock"))
ENV = dict(os.environ, UCX_TLS=os.environ.get("UCX_TLS", "tcp"))
ENV.pop("PENSTOCK_MGMT", None)
CONTAINERS = {"r2": "rep:2", "e21": "ec:2+1", "e32": "ec:3+2"}


SLOW = []  # operations that took long: (seconds, command, error)


def pen(*args, timeout=120):
    t0 = time.time()
    r = subprocess.run([PENSTOCK, *args], capture_output=True, text=True, env=ENV, timeout=timeout)
    took = time.time() - t0
    if took > 10:
        SLOW.append((round(took, 1), args[0], r.stderr.strip()[:200]))
        print(f"  slow: {args[0]} took {took:.1f} s: {r.stderr.strip()[:200]}", file=sys.stderr, flush=True)
    return r


def spawn(argv, log):
    f = open(log, "ab")
    return subprocess.Popen(argv, env=ENV, stdout=f, stderr=f, stdin=subprocess.DEVNULL, start_new_session=True)


def free_port():
    import socket
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def make_netns():
    """A namespace joined by a veth pair, for one target that partitions cut off (root only)."""
    if os.geteuid() != 0:
        return None
    tag = f"{os.getpid() % 10000:04d}"
    net = {"ns": f"pstk-soak{tag}", "host_if": f"psh{tag}", "ns_if": f"psn{tag}",
           "host_ip": f"10.251.{int(tag) % 250}.1", "ns_ip": f"10.251.{int(tag) % 250}.2"}
    cmds = [["ip", "netns", "add", net["ns"]],
            ["ip", "link", "add", net["host_if"], "type", "veth", "peer", "name", net["ns_if"]],
            ["ip", "link", "set", net["ns_if"], "netns", net["ns"]],
            ["ip", "addr", "add", f"{net['host_ip']}/30", "dev", net["host_if"]],
            ["ip", "link", "set", net["host_if"], "up"],
            ["ip", "netns", "exec", net["ns"], "ip", "addr", "add", f"{net['ns_ip']}/30", "dev", net["ns_if"]],
            ["ip", "netns", "exec", net["ns"], "ip", "link", "set", net["ns_if"], "up"],
            ["ip", "netns", "exec", net["ns"], "ip", "link", "set", "lo", "up"]]
    for c in cmds:
        subprocess.run(c, check=True, capture_output=True)
    return net


def main():
    minutes = float(sys.argv[1]) if len(sys.argv) > 1 else 30
    seed = int(sys.argv[2]) if len(sys.argv) > 2 else int(time.time())
    rng = random.Random(seed)
    work = tempfile.mkdtemp(prefix="penstock-soak.", dir="/var/tmp")
    net = make_netns()  # None without root: no partitions then
    port = free_port()
    mgmt = f"127.0.0.1:{port}"
    mgmt_proc = spawn([PENSTOCK, "mgmt", "--listen", f"{'0.0.0.0' if net else '127.0.0.1'}:{port}",
                       "--metrics-listen", "127.0.0.1:0", "--data-dir", f"{work}/mgmt",
                       "--heartbeat-timeout-ms", "2000", "--repair-interval-ms", "2000", "--log-level", "warn"],
                      f"{work}/mgmt.log")
    targets = {}
    for i in range(5):
        name = f"t{i}"
        in_ns = net is not None and i == 4
        argv = [PENSTOCK, "target", "--data-dir", f"{work}/{name}", "--port", "0", "--metrics-port", "0",
                "--capacity", "1G", "--heartbeat-ms", "500", "--log-level", "warn",
                "--listen-host", net["ns_ip"] if in_ns else "127.0.0.1",
                "--mgmt", f"{net['host_ip']}:{port}" if in_ns else mgmt]
        if in_ns:
            argv = ["ip", "netns", "exec", net["ns"], *argv]
        targets[name] = {"argv": argv, "log": f"{work}/{name}.log", "netns": in_ns}
    pids = {}
    procs = [mgmt_proc]
    for name, t in targets.items():
        p = spawn(t["argv"], t["log"])
        procs.append(p)
        pids[name] = p.pid
    deadline = time.time() + 60
    while time.time() < deadline:
        r = pen("status", "--mgmt", mgmt, "--json")
        if r.returncode == 0 and json.loads(r.stdout)["targets_up"] == 5:
            break
        time.sleep(0.5)
    else:
        sys.exit("the soak cluster did not come up; see " + work)
    for name, scheme in CONTAINERS.items():
        r = pen("container", "create", name, "--redundancy", scheme, "--mgmt", mgmt)
        assert r.returncode == 0, r.stderr
    acked = {}     # (container, name) -> sha256 of the last acknowledged put
    deleted = set()
    stats = dict(puts=0, put_failures=0, gets=0, deferred=0, deletes=0, kills=0, stops=0, partitions=0, wrong=0)
    fault = None   # (kind, name, until)
    deferred = []
    end = time.time() + minutes * 60
    next_report = time.time() + 60
    src = f"{work}/src"
    out = f"{work}/out"

    def restart(name):
        p = spawn(targets[name]["argv"], targets[name]["log"])
        procs.append(p)
        pids[name] = p.pid

    def heal():
        nonlocal fault
        if fault is None:
            return
        kind, name, _ = fault
        if kind == "kill":
            restart(name)
        elif kind == "partition":
            subprocess.run(["ip", "link", "set", net["host_if"], "up"], check=True)
        else:
            os.kill(pids[name], signal.SIGCONT)
        fault = None

    def check(key, digest):
        r = pen("get", key[1], out, "--container", key[0], "--mgmt", mgmt)
        stats["gets"] += 1
        if r.returncode != 0:
            return False
        with open(out, "rb") as f:
            got = hashlib.sha256(f.read()).hexdigest()
        if got != digest:
            stats["wrong"] += 1
            print(f"WRONG BYTES: {key}", file=sys.stderr)
        return True

    try:
        while time.time() < end:
            now = time.time()
            if fault and now >= fault[2]:
                heal()
                for key in deferred:  # reads that failed during the fault
                    if key in acked and not check(key, acked[key]):
                        pass  # may still be catching up; verified at the end
                deferred.clear()
            elif fault is None and rng.random() < 0.05:
                name = rng.choice(sorted(targets))
                dice = rng.random()
                if net and dice < 0.25:
                    subprocess.run(["ip", "link", "set", net["host_if"], "down"], check=True)
                    stats["partitions"] += 1
                    fault = ("partition", "t4", now + rng.uniform(2, 10))
                elif dice < 0.7:
                    os.kill(pids[name], signal.SIGKILL)
                    stats["kills"] += 1
                    fault = ("kill", name, now + rng.uniform(2, 10))
                else:
                    os.kill(pids[name], signal.SIGSTOP)
                    stats["stops"] += 1
                    fault = ("stop", name, now + rng.uniform(2, 8))
            op = rng.random()
            cont = rng.choice(sorted(CONTAINERS))
            if op < 0.45:
                name = f"o{rng.randrange(60)}"
                size = rng.choice([0, 1, 4095, 65536, 1 << 20, 3 << 20, rng.randrange(1, 9 << 20)])
                blob = rng.randbytes(size)
                with open(src, "wb") as f:
                    f.write(blob)
                r = pen("put", src, name, "--container", cont, "--mgmt", mgmt)
                stats["puts"] += 1
                if r.returncode == 0:
                    acked[(cont, name)] = hashlib.sha256(blob).hexdigest()
                    deleted.discard((cont, name))
                else:
                    stats["put_failures"] += 1  # not acknowledged: either version may be there
                    acked.pop((cont, name), None)
            elif op < 0.9 and acked:
                key = rng.choice(sorted(acked))
                if not check(key, acked[key]):
                    stats["deferred"] += 1
                    deferred.append(key)
            elif acked:
                key = rng.choice(sorted(acked))
                r = pen("rm", key[1], "--container", key[0], "--mgmt", mgmt)
                acked.pop(key)  # a failed delete may or may not have happened: not checked
                if r.returncode == 0:
                    stats["deletes"] += 1
                    deleted.add(key)
            if time.time() >= next_report:
                next_report += 60
                print(f"[{time.strftime('%H:%M:%S')}] {json.dumps(stats)} objects={len(acked)}", flush=True)
        heal()
        # Everything up, repair settled, then every acknowledged object must read back exactly.
        if net:
            subprocess.run(["ip", "link", "set", net["host_if"], "up"], check=True)
        deadline = time.time() + 180
        while time.time() < deadline:
            st = json.loads(pen("status", "--mgmt", mgmt, "--json").stdout)
            if st["targets_up"] == 5 and not any(t["recovering"] for t in st["targets"]):
                break
            time.sleep(0.5)
        else:
            print("targets still down or recovering after 180 s:\n" + pen("status", "--mgmt", mgmt).stdout,
                  file=sys.stderr)
            os.system(f"tail -n 20 {work}/mgmt.log >&2")
        lost = []
        for key, digest in sorted(acked.items()):
            if not check(key, digest):
                lost.append(key)
        for key in sorted(deleted):
            r = pen("stat", key[1], "--container", key[0], "--mgmt", mgmt)
            if r.returncode == 0:
                lost.append(("resurrected",) + key)
        ok = not lost and stats["wrong"] == 0
        repair = json.loads(pen("status", "--mgmt", mgmt, "--json").stdout)["repair"]
        print(f"soak {'PASSED' if ok else 'FAILED'}: {minutes:g} min, seed {seed}, {stats['puts']} puts "
              f"({stats['put_failures']} not acknowledged), {stats['gets']} gets ({stats['deferred']} deferred during "
              f"faults), {stats['deletes']} deletes, {stats['kills']} kill -9, {stats['stops']} SIGSTOP, "
              f"{stats['partitions']} partitions{'' if net else ' (no netns: not root)'}, "
              f"{len(acked)} objects verified at the end, {stats['wrong']} wrong reads, {len(lost)} lost; "
              f"repair rewrote {repair['total_shards_repaired']} shards")
        if lost:
            print(f"lost: {lost}", file=sys.stderr)
        sys.exit(0 if ok else 1)
    finally:
        for name in targets:
            try:
                os.kill(pids[name], signal.SIGCONT)
            except ProcessLookupError:
                pass
        for p in procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        if net:
            subprocess.run(["ip", "link", "del", net["host_if"]], capture_output=True)
            subprocess.run(["ip", "netns", "del", net["ns"]], capture_output=True)
        subprocess.run(["rm", "-rf", work])

if __name__ == "__main__":
    main()
