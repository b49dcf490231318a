"""/metrics of every daemon scraped over HTTP and parsed as Prometheus text."""
import json
import re
import subprocess
import time
import urllib.request

import pytest

LINE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})? (-?[0-9.eE+-]+|[+-]Inf|NaN)$')


def scrape(hostport):
    with urllib.request.urlopen(f"http://{hostport}/metrics", timeout=10) as r:
        assert r.status == 200
        assert r.headers["Content-Type"].startswith("text/plain")
        text = r.read().decode()
    samples = {}
    types = {}
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split(" ", 3)
            types[name] = kind
            continue
        if not line or line.startswith("#"):
            continue
        m = LINE.match(line)
        assert m, f"not a Prometheus sample line: {line!r}"
        samples.setdefault(m.group(1), []).append((m.group(2) or "", float(m.group(3))))
    return types, samples


def test_every_daemon_serves_metrics(cluster, tmp_path):
    f = tmp_path / "m"
    f.write_bytes(b"x" * 100000)
    cluster.cli("put", str(f), "metrics-obj", "--container", "data")
    cluster.cli("get", "metrics-obj", str(tmp_path / "o"), "--container", "data")
    for d in cluster.record["daemons"]:
        types, samples = scrape(d["metrics"])
        assert samples, d["name"]
        if d["name"] == "mgmt":
            assert samples["penstock_mgmt_targets_up"][0][1] == 3
            assert samples["penstock_mgmt_map_epoch"][0][1] >= 3
        else:
            assert types["penstock_target_ops_total"] == "counter"
            assert samples["penstock_target_capacity_bytes"][0][1] > 0
            assert "penstock_target_op_seconds_bucket" in samples
            for name in ("penstock_engine_gc_segments_cleaned", "penstock_engine_write_amplification",
                         "penstock_engine_scrub_bytes_verified", "penstock_engine_commit_batches"):
                assert name in samples, name
    total_writes = owner_entries = registered_ios = 0
    for d in cluster.record["daemons"]:
        if d["name"] != "mgmt":
            _, s = scrape(d["metrics"])
            total_writes += sum(v for lbl, v in s.get("penstock_target_ops_total", []) if 'op="write"' in lbl)
            owner_entries += s["penstock_engine_segment_owner_entries"][0][1]
            registered_ios += s["penstock_engine_registered_buffer_ios"][0][1]
    assert total_writes >= 2  # at least one stripe and one head
    assert owner_entries >= 1  # the stored shards' runs, as GC finds them by segment
    # The targets' request and reply buffers come from the arena their rings register: the
    # device I/O of the put and the get went from registered buffers.
    assert registered_ios >= 2


def test_targets_zero_their_new_data_files_in_the_background(cluster_factory):
    """A new target's fallocated data file is written with zeros while idle (engine_zero.cc):
    its pending segments drain (all are free: nothing was written yet) and the bytes show."""
    import time
    c = cluster_factory(targets=2, capacity="256M")
    targets = [d for d in c.record["daemons"] if d["name"] != "mgmt"]
    deadline = time.time() + 60
    while True:
        samples = [scrape(d["metrics"])[1] for d in targets]
        pending = [s["penstock_engine_zero_pending_segments"][0][1] for s in samples]
        if not any(pending) or time.time() > deadline:
            break
        time.sleep(0.2)
    assert pending == [0] * len(targets), pending
    # A filesystem without unwritten extents (tmpfs) has nothing to zero; any other, the whole
    # data area.
    fs = subprocess.run(["stat", "-f", "-c", "%T", str(c.data_dir)], capture_output=True, text=True,
                        check=True).stdout.strip()
    if fs == "tmpfs":
        pytest.skip(f"{c.data_dir} is on tmpfs: no unwritten extents to zero")
    for s in samples:
        zeroed = s["penstock_engine_zeroed_bytes"][0][1]
        capacity = s["penstock_target_capacity_bytes"][0][1]
        assert zeroed == capacity, (zeroed, capacity, fs)


def test_status_reports_the_engines_dead_bytes(cluster_factory, tmp_path):
    # Overwritten data is dead until GC reclaims it: `penstock status` shows the engine's own
    # count (its /metrics gauge), not used - live (which also counts the open segments' tails).
    c = cluster_factory(targets=1)
    c.cli("container", "create", "d", "--redundancy", "none")
    f = tmp_path / "f"
    f.write_bytes(b"y" * (4 * 1024 * 1024))
    c.cli("put", str(f), "o", "--container", "d")
    c.cli("put", str(f), "o", "--container", "d")  # replaces it: the first copy's 4 MiB die
    metrics = c.daemon("target-1")["metrics"]
    deadline = time.time() + 10
    while True:
        t = json.loads(c.cli("status", "--json").stdout)["targets"][0]
        engine_dead = scrape(metrics)[1]["penstock_target_dead_bytes"][0][1]
        if t["dead_bytes"] == engine_dead and engine_dead >= 4 * 1024 * 1024:
            break
        assert time.time() < deadline, (t, engine_dead)
        time.sleep(0.3)
    assert t["dead_bytes"] + t["live_bytes"] <= t["used_bytes"]
    assert t["free_bytes"] + t["used_bytes"] == t["capacity_bytes"]
