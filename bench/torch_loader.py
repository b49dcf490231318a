#!/usr/bin/env python3
"""The Python package against its baselines, measured in one run on one local cluster
(3 targets, `penstock up`, UCX tcp):

  loader_vs_ext4         DataLoader samples/s (4 workers, forkserver, batch 64) over samples of
                         4-64 KiB in Penstock (penstock.torch.Dataset) / the same samples as files
                         in a local directory (a plain file Dataset); the second epoch of each
                         (workers started), the files evicted from the page cache before it, as
                         the targets read from the disk (O_DIRECT); the page-cache figure is printed too
  ckpt_block_vs_torch_save  seconds torch.save of a 1 GiB state dict to a local file takes /
                         seconds Checkpoint.async_save blocks the caller (its second save: the
                         host copy goes into the buffers of the first, as in a training loop)
  ckpt_load_vs_torch_load   seconds torch.load of that file / seconds Checkpoint.load
  python_vs_cpp          MB/s of Client.read_async of 8 MiB ranges of a 64 MiB object, 8 always in
                         flight (into a page-aligned numpy array) / MB/s of `penstock bench seq --size 8M
                         --concurrency 8` over the same object (the same shape); readinto of the
                         whole object at a time (a barrier per 64 MiB) is printed too

Each R is Penstock's (or Python's) speed over the baseline's: above 1 is faster. Environment:
PENSTOCK_BENCH_SAMPLES (default 100000), PENSTOCK_BENCH_CKPT_MIB (1024), PENSTOCK_BENCH_SECONDS
(3, per read measurement), PENSTOCK_BIN, and --dir for the local directory (default /var/tmp).
The last line is: torch loader_vs_ext4=R ckpt_block_vs_torch_save=R ckpt_load_vs_torch_load=R python_vs_cpp=R
"""
import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PENSTOCK = os.environ.get("PENSTOCK_BIN", str(REPO / "build" / "src" / "cli" / "penstock"))
sys.path.insert(0, str(Path(PENSTOCK).resolve().parents[2] / "python"))

import numpy as np  # noqa: E402
import torch  # noqa: E402
from torch.utils.data import DataLoader  # noqa: E402

import penstock  # noqa: E402
from penstock.torch import Checkpoint, Dataset  # noqa: E402

MIB = 1 << 20


class LocalFiles(torch.utils.data.Dataset):
    """The baseline: sample i is the bytes of the i-th file of a local directory."""

    def __init__(self, paths):
        self.paths = paths

    def __len__(self):
        return len(self.paths)

    def __getitem__(self, i):
        with open(self.paths[i], "rb") as f:
            return f.read()


def nbytes(batch):
    return len(batch)


def drop_cached(paths):
    """Evicts the files from the page cache, so that they are read from the disk, as the targets'
    O_DIRECT reads are (no root needed: POSIX_FADV_DONTNEED per file)."""
    for p in paths:
        fd = os.open(p, os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def samples_per_s(ds, before_epoch=lambda: None):
    dl = DataLoader(ds, batch_size=64, shuffle=True, num_workers=4, persistent_workers=True,
                    multiprocessing_context="forkserver", collate_fn=nbytes)
    n = sum(dl)  # first epoch: starts the workers
    before_epoch()
    start = time.perf_counter()
    assert sum(dl) == n == len(ds)
    return n / (time.perf_counter() - start)


def loader(client, local, count):
    rng = random.Random(1)
    sizes = [rng.randrange(4 << 10, (64 << 10) + 1) for _ in range(count)]
    paths = []
    for start in range(0, count, 1000):
        batch = {f"s/{i:07d}": os.urandom(sizes[i]) for i in range(start, min(count, start + 1000))}
        for f in client.put_many("bench", batch):
            f.result()
        for name, data in batch.items():
            paths.append(local / name.replace("/", "-"))
            paths[-1].write_bytes(data)
    ours = samples_per_s(Dataset(client, "bench", prefix="s/"))
    files = [str(p) for p in paths]
    theirs = samples_per_s(LocalFiles(files), before_epoch=lambda: drop_cached(files))
    warm = samples_per_s(LocalFiles(files))
    print(f"loader: penstock {ours:.0f} samples/s, local files {theirs:.0f} samples/s from the disk "
          f"({warm:.0f} from the page cache; {count} samples)")
    return ours / theirs


def checkpoint(client, local, mib):
    state = {f"layer{i}": torch.randn(mib * MIB // 4 // 16) for i in range(16)}
    start = time.perf_counter()
    torch.save(state, local / "ckpt.pt")
    t_save = time.perf_counter() - start
    ck = Checkpoint(client, "bench", "ckpt")
    ck.async_save(state, "warm").result()  # a training loop saves again and again: its host buffers are warm
    start = time.perf_counter()
    future = ck.async_save(state, "one")
    t_block = time.perf_counter() - start
    future.result()
    t_flush = time.perf_counter() - start
    start = time.perf_counter()
    torch.load(local / "ckpt.pt")
    t_tload = time.perf_counter() - start
    start = time.perf_counter()
    loaded = ck.load("one")
    t_load = time.perf_counter() - start
    assert all(torch.equal(loaded[k], v) for k, v in state.items())
    print(f"checkpoint {mib} MiB: torch.save {t_save:.2f}s, async_save blocks {t_block:.2f}s "
          f"(written in {t_flush:.2f}s); torch.load {t_tload:.2f}s, Checkpoint.load {t_load:.2f}s")
    return t_save / t_block, t_tload / t_load


def cli(args, mgmt, env):
    return json.loads(subprocess.run([PENSTOCK, *args, "--mgmt", mgmt, "--json"], check=True, capture_output=True,
                                     text=True, env=env).stdout)


def page_aligned(nbytes):
    """A numpy byte array starting on a page, as the C++ bench's buffers do (numpy's own start
    16 bytes past one; the kernel's copy into an unaligned destination runs ~20% slower here)."""
    raw = np.empty(nbytes + 4096, np.uint8)
    at = -raw.ctypes.data % 4096
    return raw[at:at + nbytes]


def python_async_mb_s(client, name, seconds, size=8 * MIB, depth=8, total=64 * MIB):
    """bench seq's shape from Python: `depth` reads of `size` bytes always in flight (read_async
    into slots of one numpy array), walking the object in order."""
    slots = page_aligned(depth * size).reshape(depth, size)
    inflight, done, at = {}, 0, 0
    start = time.perf_counter()
    while time.perf_counter() - start < seconds or inflight:
        while len(inflight) < depth and time.perf_counter() - start < seconds:
            slot = next(i for i in range(depth) if i not in inflight)
            inflight[slot] = client.read_async("cpp", name, out=slots[slot], offset=at)
            at = (at + size) % total
        slot = next(iter(inflight))
        done += inflight.pop(slot).result()
    return done / (time.perf_counter() - start) / 1e6


def python_vs_cpp(client, mgmt, env, seconds):
    """Both read the one 64 MiB object `penstock bench write` wrote (bench seq reads only those)."""
    client.create_container("cpp", redundancy="none")
    cli(["bench", "write", "--container", "cpp", "--size", "64M", "--objects", "1", "--seconds", "0.1",
         "--no-cleanup"], mgmt, env)
    name = client.list("cpp")[0].name
    out = page_aligned(64 * MIB)
    done, start = 0, time.perf_counter()
    with client.open("cpp", name) as f:
        while time.perf_counter() - start < seconds:
            f.seek(0)
            done += f.readinto(out)
    whole = done / (time.perf_counter() - start) / 1e6
    ours = python_async_mb_s(client, name, seconds)
    cpp = cli(["bench", "seq", "--container", "cpp", "--size", "8M", "--concurrency", "8", "--seconds", str(seconds)],
              mgmt, env)
    print(f"read 64 MiB object: python read_async 8 MiB x 8 in flight {ours:.0f} MB/s, penstock bench seq "
          f"(the same) {cpp['mb_per_s']:.0f} MB/s; python readinto of the whole object {whole:.0f} MB/s")
    return ours / cpp["mb_per_s"]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dir", help="local directory for the baselines (default: a temp dir under /var/tmp)")
    a = ap.parse_args()
    count = int(os.environ.get("PENSTOCK_BENCH_SAMPLES", 100000))
    mib = int(os.environ.get("PENSTOCK_BENCH_CKPT_MIB", 1024))
    seconds = float(os.environ.get("PENSTOCK_BENCH_SECONDS", 3))
    base = Path(tempfile.mkdtemp(prefix="penstock-torch-bench-", dir=a.dir or "/var/tmp"))
    env = dict(os.environ, UCX_TLS="tcp")
    os.environ["UCX_TLS"] = "tcp"
    cap = f"{max(1024, (count * 40 // 1024 + 2 * mib + 256) // 2)}M"
    mgmt = json.loads(subprocess.run(
        [PENSTOCK, "up", "--targets", "3", "--data-dir", str(base / "cluster"), "--base-port", "0",
         "--capacity", cap, "--json", "--log-level", "warn"], check=True, capture_output=True, text=True,
        env=env).stdout)["mgmt"]
    try:
        client = penstock.Client(mgmt=mgmt)
        client.create_container("bench", redundancy="none")
        local = base / "local"
        local.mkdir()
        r_loader = loader(client, local, count)
        r_block, r_load = checkpoint(client, local, mib)
        r_py = python_vs_cpp(client, mgmt, env, seconds)
        client.close()
    finally:
        subprocess.run([PENSTOCK, "down", "--data-dir", str(base / "cluster")], capture_output=True, env=env)
        shutil.rmtree(base, ignore_errors=True)
    print(f"torch loader_vs_ext4={r_loader:.2f} ckpt_block_vs_torch_save={r_block:.2f} "
          f"ckpt_load_vs_torch_load={r_load:.2f} python_vs_cpp={r_py:.2f}")


if __name__ == "__main__":
    main()
