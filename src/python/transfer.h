// transfer.h — a blocking read or write of one byte range through a Handle, as Python calls
// it. The GIL is released while the data moves. The range goes as chunks of kTransferChunk
// bytes, up to kTransferWindow of them in flight (each chunk's stripes move in parallel too);
// after each completion, at least every 100 ms, the GIL is taken back to run signal handlers.
// A Ctrl-C (KeyboardInterrupt, or any handler that raises) stops submitting, cancels what the
// handle can cancel, waits until no transfer touches the buffer any more, then raises: the
// caller's buffer is never written after Transfer returns or throws.
#pragma once

#include <cstddef>
#include <cstdint>

#include "python/handle.h"

namespace penstock::python {

inline constexpr size_t kTransferChunk = 8 << 20;
inline constexpr size_t kTransferWindow = 8;

// Call with the GIL held. Returns the bytes moved (a read past the end is short). Throws
// pybind11::error_already_set: the status's exception, or the signal handler's.
uint64_t Transfer(Handle& handle, IoKind kind, uint64_t offset, std::byte* data, size_t len);

}  // namespace penstock::python
