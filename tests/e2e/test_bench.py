"""`penstock bench`: each mode runs against a live cluster and reports its figures."""
import json

MASK = (1 << 64) - 1


def bench(cluster, *args):
    return cluster.cli("bench", *args, "--json", check=False, timeout=120)


def _splitmix64(state):
    state = (state + 0x9E3779B97F4A7C15) & MASK
    z = state
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
    return state, z ^ (z >> 31)


def bench_pattern(name, size):
    """The bytes `penstock bench write` writes into object `name` from offset 0, written here
    from the format src/cli/bench_pattern.h describes: each 4 KiB block is the object's key
    (FNV-1a of the name, mixed by SplitMix64) and the block's offset, little-endian, then a
    fixed body of SplitMix64 words from the seed "penstock"."""
    h = 0xCBF29CE484222325
    for c in name.encode():
        h = ((h ^ c) * 0x100000001B3) & MASK
    key = _splitmix64(h)[1]
    state, body = 0x70656E73746F636B, bytearray()
    for _ in range(512):
        state, word = _splitmix64(state)
        body += word.to_bytes(8, "little")
    out = bytearray()
    for block in range(0, size, 4096):
        out += key.to_bytes(8, "little") + block.to_bytes(8, "little") + body[16:]
    return bytes(out[:size])


def test_bench_modes(cluster_factory):
    c = cluster_factory(targets=3)
    c.cli("container", "create", "b", "--redundancy", "none")
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


def test_bench_verify_checks_every_byte_read(cluster_factory, tmp_path):
    c = cluster_factory(targets=3)
    c.cli("container", "create", "v", "--redundancy", "none")
    w = bench(c, "write", "--container", "v", "--size", "256K", "--concurrency", "4", "--seconds", "1",
              "--objects", "6", "--no-cleanup")
    assert w.returncode == 0, w.stdout + w.stderr
    # What the writes left is the documented pattern, byte for byte.
    c.cli("get", "bench-4", str(tmp_path / "b4"), "--container", "v")
    assert (tmp_path / "b4").read_bytes() == bench_pattern("bench-4", 256 * 1024)
    # Reads check every byte they return: whole blocks, and ranges that cut blocks (1000 bytes).
    for mode, size in (("seq", "64K"), ("rand", "4K"), ("rand", "1000"), ("mixed", "16K"), ("seq", "256K")):
        r = bench(c, mode, "--container", "v", "--size", size, "--concurrency", "8", "--seconds", "1", "--verify")
        assert r.returncode == 0, (mode, size, r.stdout, r.stderr)
        r = json.loads(r.stdout)
        assert r["verify"] and r["mismatches"] == 0 and r["errors"] == 0, r
        assert r["verified_bytes"] > 0 and r["verify_seconds"] >= 0, r
        if mode != "mixed":
            assert r["verified_bytes"] == r["bytes"], r
        else:  # 30% writes, which carry the pattern: the seq run after still checks
            assert 0 < r["verified_bytes"] <= r["bytes"], r
    # Without --verify nothing is checked.
    r = json.loads(bench(c, "seq", "--container", "v", "--size", "64K", "--seconds", "0.5").stdout)
    assert not r["verify"] and r["verified_bytes"] == 0 and r["mismatches"] == 0, r


def test_bench_verify_fails_on_other_bytes(cluster_factory, tmp_path):
    c = cluster_factory(targets=3)
    c.cli("container", "create", "v", "--redundancy", "none")
    # bench-0: the pattern but for one byte; bench-1: bytes `put` from elsewhere.
    size = 256 * 1024
    one_off = bytearray(bench_pattern("bench-0", size))
    one_off[70000] ^= 0x40
    (tmp_path / "b0").write_bytes(one_off)
    (tmp_path / "b1").write_bytes(b"\x5a" * size)
    c.cli("put", str(tmp_path / "b0"), "bench-0", "--container", "v")
    # The first four reads (the whole object) are in flight at once: the bad block is read.
    r = bench(c, "seq", "--container", "v", "--size", "64K", "--concurrency", "4", "--seconds", "0.5",
              "--verify")
    assert r.returncode == 1, r.stdout + r.stderr
    j = json.loads(r.stdout)
    # One 64 KiB read in four (the second of each pass over the object) holds it.
    reads = j["verified_bytes"] // 65536
    assert j["mismatches"] >= 1 and j["mismatches"] == (reads + 2) // 4, j
    assert j["first_mismatch"] == {"object": "bench-0", "offset": 70000}, j
    assert j["error"]["code"] == "data_loss", j
    assert "'bench-0'" in j["error"]["message"] and "offset 70000" in j["error"]["message"], j
    c.cli("put", str(tmp_path / "b1"), "bench-1", "--container", "v")
    # People get the figures on stdout and the error, with its fix, on stderr. (Before mixed,
    # whose writes put the pattern back.)
    r = c.cli("bench", "seq", "--container", "v", "--size", "256K", "--seconds", "0.5", "--verify", check=False)
    assert r.returncode == 1 and "MB/s" in r.stdout and "blocks differed" in r.stdout, r.stdout
    assert "differs from the bench pattern at offset" in r.stderr and "bench write" in r.stderr, r.stderr
    for mode in ("rand", "mixed"):
        r = bench(c, mode, "--container", "v", "--size", "4K", "--seconds", "0.5", "--verify")
        assert r.returncode == 1, (mode, r.stdout, r.stderr)
        j = json.loads(r.stdout)
        assert j["mismatches"] > 0 and j["first_mismatch"]["object"] in ("bench-0", "bench-1"), j
    # Written again by the bench, the objects check out.
    w = bench(c, "write", "--container", "v", "--size", "256K", "--objects", "2", "--seconds", "0.5", "--no-cleanup")
    assert w.returncode == 0, w.stdout
    r = bench(c, "seq", "--container", "v", "--size", "64K", "--seconds", "0.5", "--verify")
    assert r.returncode == 0 and json.loads(r.stdout)["mismatches"] == 0, r.stdout


def test_bench_bad_input(cluster_factory):
    c = cluster_factory(targets=1)
    c.cli("container", "create", "e", "--redundancy", "none")
    r = bench(c, "frob", "--container", "e")
    assert r.returncode == 1 and json.loads(r.stdout)["error"]["code"] == "invalid_argument"
    r = bench(c, "seq", "--container", "e", "--seconds", "0.5")
    assert r.returncode == 1 and "bench write" in json.loads(r.stdout)["error"]["message"]
    r = bench(c, "rand", "--container", "e", "--sequential")
    assert r.returncode == 1 and "--sequential" in json.loads(r.stdout)["error"]["message"]
    r = bench(c, "write", "--container", "e", "--verify")
    assert r.returncode == 1 and "--verify" in json.loads(r.stdout)["error"]["message"]
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
    c.cli("container", "create", "n", "--redundancy", "none")
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
