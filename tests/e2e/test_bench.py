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
    # Sizes: none, beyond 64 bits, or more than one operation may hold.
    for size in ("0", "99999999999999999999999", "2G"):
        r = c.cli("bench", "write", "--container", "e", "--size", size, check=False)
        assert r.returncode == 1 and "--size" in r.stderr and "internal error" not in r.stderr, (size, r.stderr)
    r = c.cli("bench", "write", "--container", "e", "--objects", "-1", check=False)
    assert r.returncode == 2 and "--objects" in r.stderr, r.stderr
    r = c.cli("bench", "write", "--container", "e", "--seconds", "abc", check=False)
    assert r.returncode == 2 and "--seconds" in r.stderr and "abc" in r.stderr and "range" not in r.stderr, r.stderr
    r = c.cli("bench", "write", check=False)
    assert r.returncode == 1 and "--container" in r.stderr and "--redundancy" in r.stderr, r.stderr
    # Nothing above left a throw-away container behind.
    names = {x["name"] for x in json.loads(c.cli("container", "ls", "--json").stdout)}
    assert names == {"e"}


def test_bench_human_output_and_progress(cluster_factory):
    c = cluster_factory(targets=1)
    r = c.cli("bench", "write", "--redundancy", "none", "--size", "64K", "--concurrency", "4", "--seconds", "2.5",
              "--objects", "4", "--no-cleanup", "--progress", timeout=120)
    # Progress on stderr about once a second; the figures on stdout.
    progress = [p for p in r.stderr.replace("\r", "\n").splitlines() if p.strip().endswith("MB/s")]
    assert len(progress) >= 2 and all(" ops " in p for p in progress), r.stderr
    out = r.stdout
    for want in ("MB/s", "IOPS", "p50", "p99 ", "p99.9", "max", "client CPU", "s per GB"):
        assert want in out, (want, out)
    # A throw-away container kept with --no-cleanup is named, so seq and rand can read it.
    kept = next(line.split()[1] for line in out.splitlines() if line.startswith("container "))
    r = c.cli("bench", "seq", "--container", kept, "--size", "64K", "--seconds", "0.5", "--json")
    assert json.loads(r.stdout)["ops"] > 0


def test_null_device_targets_for_data_plane_benchmarks(cluster_factory, tmp_path):
    c = cluster_factory(targets=1, extra_args=("--target-device-kind", "null"))
    assert not list(tmp_path.glob("cluster0/target-1/data.img")), "a null target made a data file"
    c.cli("container", "create", "n")
    src = tmp_path / "src"
    src.write_bytes(b"\x5a" * (3 * 1024 * 1024 + 11))
    c.cli("put", str(src), "o", "--container", "n")
    # No media: the object's 1 MiB stripes read back as zeros; its head and its last stripe
    # (11 bytes, one block) are small records, kept in memory (src/engine/null_device.h).
    out = tmp_path / "out"
    c.cli("get", "o", str(out), "--container", "n")
    assert out.read_bytes() == b"\0" * (3 * 1024 * 1024) + b"\x5a" * 11
    w = bench(c, "write", "--container", "n", "--size", "1M", "--concurrency", "8", "--objects", "16", "--seconds", "1")
    assert w.returncode == 0 and json.loads(w.stdout)["errors"] == 0, w.stdout + w.stderr
