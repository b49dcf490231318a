"""A state dict as tensors plus a skeleton, and the tensors' bytes as pieces (objects) of a
checkpoint: pure functions over values, no I/O (penstock/_torch_checkpoint.py does the I/O).

A tensor of at least chunk/4 bytes is cut into pieces of `chunk` bytes of its own memory (no
copy); smaller ones are packed together into pack pieces of up to `chunk` bytes (copied once).
Each tensor's entry says which piece ranges hold its bytes."""
import pickle

import torch

from .buffers import byte_view


class TensorRef:
    """Stands for tensor `index` of the checkpoint in the pickled skeleton."""

    def __init__(self, index):
        self.index = index


def flatten(tree, tensors):
    """The skeleton of `tree` (dicts, lists, tuples, other picklable leaves) with each tensor
    replaced by a TensorRef into `tensors`, which it appends to."""
    if isinstance(tree, torch.Tensor):
        tensors.append(tree)
        return TensorRef(len(tensors) - 1)
    if isinstance(tree, dict):
        return type(tree)((k, flatten(v, tensors)) for k, v in tree.items()) if type(tree) is not dict \
            else {k: flatten(v, tensors) for k, v in tree.items()}
    if isinstance(tree, (list, tuple)) and type(tree) in (list, tuple):
        return type(tree)(flatten(v, tensors) for v in tree)
    return tree


def unflatten(skeleton, tensors):
    if isinstance(skeleton, TensorRef):
        return tensors[skeleton.index]
    if isinstance(skeleton, dict):
        out = {k: unflatten(v, tensors) for k, v in skeleton.items()}
        return out if type(skeleton) is dict else type(skeleton)(out.items())
    if isinstance(skeleton, (list, tuple)) and type(skeleton) in (list, tuple):
        return type(skeleton)(unflatten(v, tensors) for v in skeleton)
    return skeleton


def host_bytes(t):
    """The bytes of tensor `t` (on the host, contiguous), as a flat uint8 buffer."""
    t = t.detach()
    if t.device.type != "cpu" or not t.is_contiguous():
        t = t.to("cpu").contiguous()
    return memoryview(byte_view(t)).cast("B") if t.numel() else memoryview(b"")


def plan_pieces(tensors, chunk):
    """(pieces, entries): pieces are buffers to store as objects 0..n-1; entries[i] describes
    tensor i: dtype, shape and [(piece, offset in piece, length), ...] in order."""
    pieces, entries = [], []
    pack, pack_index = None, None
    for t in tensors:
        data = host_bytes(t)
        entry = {"dtype": str(t.dtype).removeprefix("torch."), "shape": list(t.shape), "ranges": []}
        if len(data) >= chunk // 4:
            for at in range(0, len(data), chunk):
                part = data[at:at + chunk]
                entry["ranges"].append((len(pieces), 0, len(part)))
                pieces.append(part)
        elif len(data):
            if pack is None or len(pack) + len(data) > chunk:
                pack, pack_index = bytearray(), len(pieces)
                pieces.append(pack)
            entry["ranges"].append((pack_index, len(pack), len(data)))
            pack += data
        entries.append(entry)
    return pieces, entries


def manifest_bytes(skeleton, entries, piece_sizes, rank, world_size):
    return pickle.dumps({"version": 1, "skeleton": skeleton, "tensors": entries, "pieces": piece_sizes,
                         "rank": rank, "world_size": world_size}, protocol=4)


def empty_tensor(entry):
    return torch.empty(entry["shape"], dtype=getattr(torch, entry["dtype"]))
