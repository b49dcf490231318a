"""Checkpoint: sharded checkpoints of state dicts in a Penstock container (penstock/torch.py).

Layout under `prefix` (objects of `container`), for checkpoint NAME:
    PREFIX/NAME/rRRRRR-PPPPP      the pieces of rank R's tensors (_torch_state.plan_pieces)
    PREFIX/NAME/rRRRRR.manifest   rank R's skeleton and tensor table, written after its pieces
    PREFIX/NAME/COMMIT            written by rank 0 once every rank's manifest exists: the
                                  checkpoint is complete and visible only from then on
A save that dies before its COMMIT leaves the earlier checkpoints as they were (list() and
load() skip it); its leftovers are removed by the next save of the same name. Names must be
fresh per save on every rank (e.g. "step-000100"). Retention (keep_last) removes the oldest
complete checkpoints, COMMIT first, after each commit by rank 0.
"""
import concurrent.futures
import pickle
import time


from . import _torch_state as state
from .buffers import byte_view
from .errors import NotFound, TimedOut


class Checkpoint:
    def __init__(self, client, container, prefix, keep_last=None, rank=0, world_size=1, chunk_size=64 << 20,
                 commit_timeout=600.0):
        self.client, self.container, self.prefix = client, container, prefix.rstrip("/")
        self.keep_last, self.rank, self.world_size = keep_last, rank, world_size
        self.chunk_size, self.commit_timeout = chunk_size, commit_timeout
        self._flusher = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="penstock-ckpt")
        self._last_async = None
        self._staging = []  # host copies of the last async save's tensors, reused by the next

    # --- names ---
    def _dir(self, name):
        return f"{self.prefix}/{name}"

    def _piece(self, name, rank, i):
        return f"{self._dir(name)}/r{rank:06d}-{i:05d}"

    def _manifest(self, name, rank):
        return f"{self._dir(name)}/r{rank:06d}.manifest"

    # --- saving ---
    def save(self, state_dict, name):
        """Writes this rank's shard of `state_dict` as checkpoint `name` (its pieces in
        parallel); rank 0 then waits for every rank's shard and commits. Blocks until done."""
        self.wait()
        tensors = []
        skeleton = state.flatten(state_dict, tensors)
        self._write(pickle.dumps(skeleton, protocol=4), tensors, name)

    def async_save(self, state_dict, name):
        """Copies the tensors to host memory now and returns a concurrent.futures.Future at
        once; the checkpoint is written (and, by rank 0, committed) in the background. A second
        async_save waits for the first, then copies into the same host buffers when the
        tensors' shapes and dtypes are unchanged (no new memory to fault in)."""
        self.wait()
        tensors = []
        skeleton = pickle.dumps(state.flatten(state_dict, tensors), protocol=4)
        snapshot = self._snapshot(tensors)
        self._last_async = self._flusher.submit(self._write, skeleton, snapshot, name)
        return self._last_async

    def _snapshot(self, tensors):
        import torch
        same = len(self._staging) == len(tensors) and all(
            s.shape == t.shape and s.dtype == t.dtype for s, t in zip(self._staging, tensors))
        if not same:
            self._staging = [torch.empty(t.shape, dtype=t.dtype) for t in tensors]
        with torch.no_grad():
            for s, t in zip(self._staging, tensors):
                s.copy_(t)
        return self._staging

    def wait(self):
        """Waits for the async save in flight (raising its error)."""
        if self._last_async is not None:
            f, self._last_async = self._last_async, None
            f.result()

    def _write(self, skeleton_bytes, tensors, name):
        if self.rank == 0:
            self._delete_quietly(f"{self._dir(name)}/COMMIT")
        pieces, entries = state.plan_pieces(tensors, self.chunk_size)
        names = [self._piece(name, self.rank, i) for i in range(len(pieces))]
        _wait_all(self.client.put_many(self.container, zip(names, pieces)))
        skeleton = pickle.loads(skeleton_bytes)
        manifest = state.manifest_bytes(skeleton, entries, [len(p) for p in pieces], self.rank, self.world_size)
        self.client.put(self.container, self._manifest(name, self.rank), manifest)
        if self.rank == 0:
            self._commit(name)
            self._retain()

    def _commit(self, name):
        deadline = time.monotonic() + self.commit_timeout
        for r in range(self.world_size):
            while not self.client.exists(self.container, self._manifest(name, r)):
                if time.monotonic() > deadline:
                    raise TimedOut(f"checkpoint {name!r}: rank {r}'s shard did not arrive within "
                                   f"{self.commit_timeout:.0f}s; did every rank call save() with this name?")
                time.sleep(0.05)
        commit = pickle.dumps({"name": name, "time": time.time(), "world_size": self.world_size})
        self.client.put(self.container, f"{self._dir(name)}/COMMIT", commit)

    def _retain(self):
        if not self.keep_last:
            return
        for old in self.list()[:-self.keep_last]:
            self.delete(old)

    def delete(self, name):
        """Removes checkpoint `name` (its COMMIT first, so it is never seen half gone)."""
        self._delete_quietly(f"{self._dir(name)}/COMMIT")
        for o in self.client.list(self.container, self._dir(name) + "/"):
            self._delete_quietly(o.name)

    def _delete_quietly(self, obj):
        try:
            self.client.delete(self.container, obj)
        except NotFound:
            pass

    # --- listing and loading ---
    def list(self):
        """Names of the complete checkpoints, oldest commit first."""
        commits = [o.name for o in self.client.list(self.container, self.prefix + "/") if o.name.endswith("/COMMIT")]
        records = [pickle.loads(f.result()) for f in self.client.get_many(self.container, commits)]
        return [r["name"] for r in sorted(records, key=lambda r: r["time"])]

    def latest(self):
        names = self.list()
        if not names:
            raise NotFound(f"no complete checkpoint under {self.container}:{self.prefix}/")
        return names[-1]

    def load(self, name=None, into=None):
        """This rank's state dict of checkpoint `name` (None: the latest complete one), its
        pieces read in parallel. `into`: a state dict of the same structure whose tensors are
        filled in place (CPU contiguous tensors of the saved dtype and shape are read into
        directly); returned too."""
        name = name or self.latest()
        if not self.client.exists(self.container, f"{self._dir(name)}/COMMIT"):
            raise NotFound(f"checkpoint {name!r} under {self.container}:{self.prefix}/ is not complete (no COMMIT)")
        m = pickle.loads(self.client.get(self.container, self._manifest(name, self.rank)))
        targets = []
        if into is not None:
            state.flatten(into, targets)
        tensors = [self._destination(e, targets[i] if i < len(targets) else None) for i, e in enumerate(m["tensors"])]
        self._fill(name, m, tensors)
        for i, t in enumerate(tensors):
            if i < len(targets) and targets[i] is not t:
                with __import__("torch").no_grad():
                    targets[i].copy_(t)
                tensors[i] = targets[i]
        return state.unflatten(m["skeleton"], tensors)

    @staticmethod
    def _destination(entry, target):
        t = target
        direct = (t is not None and t.device.type == "cpu" and t.is_contiguous() and list(t.shape) == entry["shape"]
                  and str(t.dtype).removeprefix("torch.") == entry["dtype"])
        return t if direct else state.empty_tensor(entry)

    def _fill(self, name, manifest, tensors):
        """Reads every piece: whole-tensor pieces straight into the tensors, packs then copied."""
        direct, packs = [], {}
        for t, entry in zip(tensors, manifest["tensors"]):
            view = memoryview(byte_view(t)).cast("B") if t.numel() else None
            at = 0
            for piece, offset, length in entry["ranges"]:
                if offset == 0 and length == manifest["pieces"][piece]:
                    direct.append(self.client.read_async(self.container, self._piece(name, self.rank, piece),
                                                         out=view[at:at + length]))
                else:
                    packs.setdefault(piece, []).append((view[at:at + length], offset))
                at += length
        pack_ids = sorted(packs)
        pack_futures = self.client.get_many(self.container, [self._piece(name, self.rank, p) for p in pack_ids])
        for p, f in zip(pack_ids, pack_futures):
            data = f.result()
            for dst, offset in packs[p]:
                dst[:] = data[offset:offset + len(dst)]
        _wait_all(direct)


def _wait_all(futures):
    first = None
    for f in futures:
        exc = f.exception()
        first = first or exc
    if first is not None:
        raise first
