"""penstock.torch: PyTorch datasets over a Penstock container, and checkpoints into one.

    from penstock.torch import Dataset, IterableDataset, Checkpoint

- Dataset: map-style, one sample per object under a prefix (or per file under an fs
  directory); a DataLoader batch is fetched in one parallel call (__getitems__).
- IterableDataset: streams shard objects, split by rank and DataLoader worker, with a shuffle
  buffer.
- Checkpoint: sharded, parallel, optionally asynchronous saves that become visible only when
  complete; parallel loads; retention; one shard per rank.

Importing this module imports torch; `import penstock` alone does not.
"""
from ._torch_data import Dataset, IterableDataset
from ._torch_checkpoint import Checkpoint

__all__ = ["Dataset", "IterableDataset", "Checkpoint"]
