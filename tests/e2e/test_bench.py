"""`penstock bench`: each mode runs against a live cluster and reports its figures."""
import json


def bench(cluster, *args):
    return cluster.cli("bench", *args, "--json", check=False, timeout=120)


def test_bench_modes(cluster_factory):
    c = cluster_factory(targets=3)
    c.cli("container", "create", "b")
    w = bench(c, "write", "--container", "b", "--size", "256K", "--concurrency", "8",
              "--seconds", "1", "--objects", "6", "--no-cleanup")
    assert w.returncode == 0, w.stderr
    w = json.loads(w.stdout)
    assert w["mode"] == "write" and w["ops"] > 0 and w["errors"] == 0 and w["objects"] == 6
    for key in ("mb_per_s", "iops", "p50_us", "p99_us", "p999_us", "max_us", "cpu_seconds_per_gb"):
        assert w[key] >= 0, key
    assert w["p50_us"] <= w["p99_us"] <= w["max_us"]
    for mode, size, qd in (("seq", "256K", "4"), ("rand", "4K", "32"), ("mixed", "4K", "16")):
        r = bench(c, mode, "--container", "b", "--size", size, "--concurrency", qd, "--seconds", "1")
        assert r.returncode == 0, r.stderr
        r = json.loads(r.stdout)
        assert r["mode"] == mode and r["ops"] > 0 and r["errors"] == 0 and r["bytes"] > 0
        if mode in ("seq", "rand"):
            # Reads land straight in the bench's (registered) buffers: no copy in the client.
            assert r["read_bytes"] == r["bytes"] and r["read_bytes_copied"] == 0, r
    # Sequential small writes into protected stripes: queued writes of a stripe merge and hand
    # its write lease on (renewals on real targets); every write succeeds.
    c.cli("container", "create", "p", "--redundancy", "rep:2")
    w = bench(c, "write", "--container", "p", "--size", "1M", "--concurrency", "4", "--seconds", "0.5",
              "--objects", "2", "--no-cleanup")
    assert w.returncode == 0, w.stderr
    r = bench(c, "mixed", "--container", "p", "--size", "16K", "--concurrency", "16", "--seconds", "1",
              "--write-percent", "100", "--sequential")
    assert r.returncode == 0, r.stderr
    r = json.loads(r.stdout)
    assert r["sequential"] and r["ops"] > 0 and r["errors"] == 0, r
    # A throw-away container is created and removed.
    t = bench(c, "write", "--redundancy", "none", "--size", "4K", "--seconds", "0.5")
    assert t.returncode == 0, t.stderr
    names = {x["name"] for x in json.loads(c.cli("container", "ls", "--json").stdout)}
    assert names == {"b", "p"}


def test_bench_bad_input(cluster_factory):
    c = cluster_factory(targets=1)
    c.cli("container", "create", "e")
    r = bench(c, "frob", "--container", "e")
    assert r.returncode == 1 and json.loads(r.stdout)["error"]["code"] == "invalid_argument"
    r = bench(c, "seq", "--container", "e", "--seconds", "0.5")
    assert r.returncode == 1 and "bench write" in json.loads(r.stdout)["error"]["message"]
    r = bench(c, "rand", "--container", "e", "--sequential")
    assert r.returncode == 1 and "--sequential" in json.loads(r.stdout)["error"]["message"]
    r = c.cli("bench", "write", "--container", "e", "--size", "lots", check=False)
    assert r.returncode == 1 and "--size" in r.stderr
    r = c.cli("bench", "write", "--container", "e", "--concurrency", "0", check=False)
    assert r.returncode == 2 and "--concurrency" in r.stderr
    r = c.cli("bench", "write", "--container", "e", "--redundancy", "rep:2", check=False)
    assert r.returncode == 1 and "--redundancy" in r.stderr and "'e'" in r.stderr, r.stderr
