"""penstock.torch end to end: DataLoader workers over a map-style Dataset (every sample once
per epoch, ranks disjoint), the IterableDataset's split, checkpoints (sharded, async, ranks,
retention), a trainer killed with -9 during an async save and resumed, and a target killed
during an epoch of a replicated container."""
import os
import signal
import subprocess
import sys
import threading

import pytest
import torch
from torch.utils.data import DataLoader, DistributedSampler

from conftest import Cluster
from pyclient import env_for, client, penstock
from penstock.torch import Checkpoint, Dataset, IterableDataset

HERE = os.path.dirname(os.path.abspath(__file__))
N = 400


def sample_id(data):
    """The id a sample carries in its first 4 bytes (a module-level function: it pickles)."""
    return int.from_bytes(data[:4], "little")


def put_samples(c, container, prefix, n, size=4096):
    futures = c.put_many(container, {f"{prefix}{i:05d}": i.to_bytes(4, "little") * (size // 4) for i in range(n)})
    assert all(f.result() is None for f in futures)


@pytest.fixture(scope="module")
def tc(tmp_path_factory):
    c = Cluster(tmp_path_factory.mktemp("torch"), targets=3)
    cl = client(c)
    cl.create_container("ds", redundancy="none")
    put_samples(cl, "ds", "s/", N)
    yield c, cl
    cl.close()
    c.stop()


def test_dataloader_four_workers_every_sample_once_per_epoch(tc):
    _, c = tc
    ds = Dataset(c, "ds", prefix="s/", transform=sample_id)
    assert len(ds) == N and ds[7] == 7 and ds.__getitems__([3, 1]) == [3, 1]
    dl = DataLoader(ds, batch_size=32, shuffle=True, num_workers=4, persistent_workers=True,
                    multiprocessing_context="forkserver")
    for _ in range(2):
        seen = [int(i) for batch in dl for i in batch]
        assert sorted(seen) == list(range(N))
    ranks = []
    for rank in range(2):
        sampler = DistributedSampler(ds, num_replicas=2, rank=rank, shuffle=True, seed=3)
        ranks.append({int(i) for batch in DataLoader(ds, batch_size=50, sampler=sampler) for i in batch})
    assert not ranks[0] & ranks[1] and ranks[0] | ranks[1] == set(range(N))


def test_iterable_dataset_splits_by_rank_and_worker(tc):
    _, c = tc
    put_samples(c, "ds", "shard/", 24, size=64 * 4)  # 24 shards of 64 samples of 4 bytes
    split = lambda b: [b[i:i + 4] for i in range(0, len(b), 4)]  # noqa: E731
    seen = []
    for rank in range(2):
        it = IterableDataset(c, "ds", prefix="shard/", split=split, transform=sample_id, shuffle_buffer=50,
                             seed=1, rank=rank, world_size=2)
        seen.append([x for x in it])
    assert len(seen[0]) == len(seen[1]) == 12 * 64
    assert set(seen[0]).isdisjoint(seen[1]) and set(seen[0]) | set(seen[1]) == set(range(24))
    assert seen[0] != sorted(seen[0])  # shuffled


def test_checkpoint_sharded_async_ranks_and_retention(tc):
    _, c = tc
    state = {"w": torch.randn(3 << 20), "b": torch.arange(10), "half": torch.randn(7, 5).half(), "step": 4,
             "nested": [torch.tensor(1.5), {"flag": torch.tensor([True, False])}]}
    ck = Checkpoint(c, "ds", "ck", keep_last=2, chunk_size=4 << 20)
    ck.save(state, "a")
    f = ck.async_save(state, "b")
    state["w"].zero_()  # the snapshot was taken: the save must not see this
    f.result()
    ck.save({"step": 9}, "c")
    assert ck.list() == ["b", "c"]  # keep_last=2 removed "a", COMMIT first
    assert c.list("ds", "ck/a/") == []
    got = ck.load("b")
    assert got["step"] == 4 and not torch.equal(got["w"], state["w"]) and got["w"].abs().sum() > 0
    assert torch.equal(got["half"], state["half"]) and torch.equal(got["nested"][1]["flag"], torch.tensor([True, False]))
    into = {k: (torch.zeros_like(v) if isinstance(v, torch.Tensor) else v) for k, v in got.items()}
    into["nested"] = [torch.tensor(0.0), {"flag": torch.tensor([False, False])}]
    out = ck.load("b", into=into)
    assert out["w"] is into["w"] and torch.equal(into["w"], got["w"])
    # Two ranks: rank 0 commits only once rank 1's shard is there.
    shards = [{"r": torch.full((1000,), float(r))} for r in range(2)]
    cks = [Checkpoint(c, "ds", "ranked", rank=r, world_size=2) for r in range(2)]
    t = threading.Thread(target=cks[0].save, args=(shards[0], "s1"))
    t.start()
    t.join(1.0)
    assert t.is_alive() and cks[0].list() == []  # waiting for rank 1
    cks[1].save(shards[1], "s1")
    t.join(30)
    assert cks[0].list() == ["s1"]
    assert [float(ck_.load()["r"][0]) for ck_ in cks] == [0.0, 1.0]


def run_trainer(cluster, tmp_path, prefix, *extra):
    args = [sys.executable, os.path.join(HERE, "torch_trainer.py"), "--container", "ds", "--prefix", prefix,
            "--out", str(tmp_path / f"{prefix}.pt"), *extra]
    return subprocess.Popen(args, env=env_for(cluster), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def losses(lines):
    return {int(l.split()[1]): l.split()[2] for l in lines if l.startswith("loss ")}


def test_trainer_killed_during_async_save_resumes_exactly(tc, tmp_path):
    cluster, c = tc
    whole = run_trainer(cluster, tmp_path, "whole")
    out, err = whole.communicate(timeout=120)
    assert whole.returncode == 0, err
    reference = losses(out.splitlines())
    killed = run_trainer(cluster, tmp_path, "killed", "--pad-at", "20", "--pad-mib", "256")
    lines = []
    for line in killed.stdout:
        lines.append(line.strip())
        if line.strip() == "saving 20":
            os.kill(killed.pid, signal.SIGKILL)
            break
    killed.wait(30)
    ck = Checkpoint(c, "ds", "killed")
    assert ck.list() == ["step-000005", "step-000010", "step-000015"], "the save killed in flight must not show"
    resumed = run_trainer(cluster, tmp_path, "killed", "--resume")
    out, err = resumed.communicate(timeout=120)
    assert resumed.returncode == 0, err
    assert "resumed 15" in out
    trajectory = {**losses(lines), **losses(out.splitlines())}
    assert trajectory == reference
    a, b = torch.load(tmp_path / "whole.pt"), torch.load(tmp_path / "killed.pt")
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_target_killed_during_epoch_of_replicated_dataset(cluster_factory):
    cluster = cluster_factory(targets=3)
    c = client(cluster, timeout_ms=2000)
    c.create_container("rep", redundancy="rep:2")
    put_samples(c, "rep", "s/", 300, size=16384)
    ds = Dataset(c, "rep", prefix="s/", transform=sample_id)
    dl = DataLoader(ds, batch_size=20, shuffle=True, num_workers=2, multiprocessing_context="forkserver")
    seen = []
    for i, batch in enumerate(dl):
        seen.extend(int(x) for x in batch)
        if i == 2:
            cluster.kill9("target-2")
    assert sorted(seen) == list(range(300))
    c.close()
