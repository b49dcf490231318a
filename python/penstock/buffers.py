"""Caller memory as a buffer the native layer reads into or writes from, without a copy:
anything with the buffer protocol (bytes, bytearray, memoryview, numpy arrays, mmap) as it is,
and CPU torch tensors through a numpy view of their memory (torch does not export the buffer
protocol itself). torch is never imported here: a tensor's own module is used."""


def byte_view(obj):
    """`obj`, or for a torch tensor a uint8 numpy array over its memory. Raises TypeError for a
    tensor on a GPU (read into a CPU tensor, then .to(device)) and BufferError for a
    non-contiguous one (use .contiguous())."""
    if not type(obj).__module__.startswith("torch") or not hasattr(obj, "is_contiguous"):
        return obj
    if obj.device.type != "cpu":
        raise TypeError(f"a tensor on {obj.device} has no host memory to read into or write from: "
                        "use a CPU tensor (pinned, then .to(device, non_blocking=True))")
    if not obj.is_contiguous():
        raise BufferError("the tensor is not contiguous: pass tensor.contiguous()")
    import sys
    torch = sys.modules["torch"]
    t = obj.detach()
    if t.numel() == 0:
        return bytearray()
    return t.reshape(-1).view(torch.uint8).numpy()
