"""Dataset and IterableDataset (see penstock/torch.py). Both hold a penstock.Client, which
pickles as its settings: DataLoader workers started with multiprocessing_context="forkserver"
(or "spawn") connect their own, so they work with num_workers > 0, persistent_workers=True and
DistributedSampler. (Forked workers cannot: see penstock/client.py.)"""
import os
import random

import torch.utils.data as tud

from .client import Client


def as_client(client_or_uri):
    """A Client, or a new one for "penstock://host:port" / "host:port"."""
    if isinstance(client_or_uri, Client):
        return client_or_uri
    if isinstance(client_or_uri, str):
        return Client(mgmt=client_or_uri.removeprefix("penstock://"))
    raise TypeError(f"expected a penstock.Client or 'penstock://host:port', got {type(client_or_uri).__name__}")


class Dataset(tud.Dataset):
    """Sample i is the bytes of the i-th object whose name starts with `prefix` (sorted by name),
    or with `dir`, of the i-th regular file under that directory of fs container `container`;
    `transform(bytes)` is applied when given. The names are listed once, at construction."""

    def __init__(self, client_or_uri, container, prefix="", dir=None, transform=None):
        self.client = as_client(client_or_uri)
        self.container, self.dir, self.transform = container, dir, transform
        if dir is not None:
            self.names = self.client.fs(container).walk_files(dir)
        else:
            self.names = [o.name for o in self.client.list(container, prefix)]

    def __len__(self):
        return len(self.names)

    def _apply(self, data):
        return self.transform(data) if self.transform is not None else data

    def __getitem__(self, index):
        return self.__getitems__([index])[0]

    def __getitems__(self, indices):
        """The samples of a whole batch, fetched in parallel (one future per sample)."""
        names = [self.names[i] for i in indices]
        if self.dir is not None:
            futures = self.client.fs(self.container).read_many(names)
        else:
            futures = self.client.get_many(self.container, names)
        return [self._apply(f.result()) for f in futures]


def _rank_world(rank, world_size):
    if rank is not None and world_size is not None:
        return rank, world_size
    import torch.distributed as dist
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return int(os.environ.get("RANK", 0)), int(os.environ.get("WORLD_SIZE", 1))


class IterableDataset(tud.IterableDataset):
    """Streams the objects under `prefix` ("shards"): each is read whole (`prefetch` of them in
    flight) and split into samples by `split(bytes) -> iterable` (default: the shard is one
    sample). Shards go round-robin to (rank, DataLoader worker) pairs, so ranks and workers see
    disjoint sets that together cover every shard once per epoch. With `shuffle_buffer` > 0 the
    shard order and the samples are shuffled (a buffer of that many samples), seeded by `seed`
    and the epoch: set_epoch(e) in the main process, or each pass over the dataset counts one.
    rank/world_size default to torch.distributed's, else $RANK/$WORLD_SIZE, else 0/1."""

    def __init__(self, client_or_uri, container, prefix="", split=None, transform=None, shuffle_buffer=0,
                 seed=0, rank=None, world_size=None, prefetch=8):
        self.client = as_client(client_or_uri)
        self.container, self.split, self.transform = container, split, transform
        self.shuffle_buffer, self.seed, self.prefetch = shuffle_buffer, seed, max(1, prefetch)
        self.rank, self.world_size = rank, world_size
        self.shards = [o.name for o in self.client.list(container, prefix)]
        self.epoch, self._passes = 0, 0

    def set_epoch(self, epoch):
        self.epoch, self._passes = epoch, 0

    def my_shards(self, epoch):
        """The shards this rank and worker read in `epoch`."""
        rank, world = _rank_world(self.rank, self.world_size)
        info = tud.get_worker_info()
        worker, workers = (info.id, info.num_workers) if info is not None else (0, 1)
        shards = list(self.shards)
        if self.shuffle_buffer > 0:
            random.Random(self.seed * 1000003 + epoch).shuffle(shards)
        return shards[rank * workers + worker::world * workers], rank * workers + worker

    def _shard_bytes(self, shards):
        pending = []
        for name in shards:
            pending.append(self.client.read_async(self.container, name))
            if len(pending) >= self.prefetch:
                yield pending.pop(0).result()
        for f in pending:
            yield f.result()

    def __iter__(self):
        epoch = self.epoch + self._passes
        self._passes += 1
        shards, reader = self.my_shards(epoch)
        rng = random.Random((self.seed * 1000003 + epoch) * 4099 + reader)
        buffer = []
        for data in self._shard_bytes(shards):
            for sample in (self.split(data) if self.split is not None else (data,)):
                if self.shuffle_buffer <= 0:
                    yield self._apply(sample)
                    continue
                buffer.append(sample)
                if len(buffer) >= self.shuffle_buffer:
                    yield self._apply(buffer.pop(rng.randrange(len(buffer))))
        rng.shuffle(buffer)
        for sample in buffer:
            yield self._apply(sample)

    def _apply(self, sample):
        return self.transform(sample) if self.transform is not None else sample
