"""ObjectFile: an object or an fs file as a Python file (io.RawIOBase), usable by
io.BufferedReader/Writer, torch.save/load and numpy.save/load.

readinto() reads straight into the caller's buffer (bytearray, memoryview, numpy array, CPU
tensor) from the C++ read: no intermediate bytes object. A file opened "wb" or "ab" writes
behind: sequential writes gather into chunks of WRITE_CHUNK bytes sent in parallel, up to
WRITE_WINDOW at once; their errors show at the next flush(), seek(), read or close(). Opened in
a process that then forked, the file is the parent's: the child must open it again.
"""
import collections
import io
import os

from .buffers import byte_view
from .errors import ClientClosed

WRITE_CHUNK = 4 << 20
WRITE_WINDOW = 8
_MODES = {"rb": "r", "r": "r", "wb": "w", "w": "w", "r+b": "r+", "rb+": "r+", "ab": "a", "a": "a"}


def parse_mode(mode):
    """"r", "w", "r+" or "a" for a binary mode; ValueError naming the accepted ones otherwise."""
    try:
        return _MODES[mode]
    except KeyError:
        raise ValueError(f"mode {mode!r}: penstock files are binary; use 'rb', 'wb', 'r+b' or 'ab'") from None


class ObjectFile(io.RawIOBase):
    def __init__(self, client, handle, name, mode):
        super().__init__()
        self._client, self._h, self.name, self.mode = client, handle, name, mode
        self._kind = parse_mode(mode)
        self._pid = os.getpid()
        self._pos = 0
        self._behind = self._kind in ("w", "a")
        self._gather, self._gather_at = bytearray(), 0
        self._pending = collections.deque()
        self._wrote = False  # ever (a "wb" file never written is made empty at close)
        self._dirty = False  # since the last flush

    # --- io.RawIOBase ---
    def readable(self):
        return self._kind in ("r", "r+")

    def writable(self):
        return self._kind != "r"

    def seekable(self):
        return True

    def readinto(self, b):
        h = self._handle()
        if not self.readable():
            raise io.UnsupportedOperation(f"{self.name} is open for writing only (mode {self.mode!r})")
        self._drain()
        n = h.read_into(self._pos, byte_view(b))
        self._pos += n
        return n

    def readall(self):
        size = self.size
        buf = bytearray(max(0, size - self._pos))
        n = self.readinto(buf) if buf else 0
        del buf[n:]
        return bytes(buf)

    def write(self, b):
        h = self._handle()
        if not self.writable():
            raise io.UnsupportedOperation(f"{self.name} is open for reading only (mode {self.mode!r})")
        data = memoryview(byte_view(b)).cast("B")
        n = len(data)
        self._wrote = self._dirty = True
        if self._behind:
            if self._gather and self._gather_at + len(self._gather) != self._pos:
                self._send_gathered()
            if not self._gather:
                self._gather_at = self._pos
            self._gather += data
            if len(self._gather) >= WRITE_CHUNK:
                self._send_gathered()
        else:
            h.write_from(self._pos, data)
        self._pos += n
        return n

    def seek(self, offset, whence=io.SEEK_SET):
        self._handle()
        if whence == io.SEEK_SET:
            pos = offset
        elif whence == io.SEEK_CUR:
            pos = self._pos + offset
        elif whence == io.SEEK_END:
            self._drain()
            pos = self._h.size() + offset
        else:
            raise ValueError(f"whence {whence}: use io.SEEK_SET, SEEK_CUR or SEEK_END")
        if pos < 0:
            raise ValueError(f"negative seek position {pos}")
        self._pos = pos
        return pos

    def tell(self):
        self._handle()
        return self._pos

    def truncate(self, size=None):
        h = self._handle()
        self._drain()
        size = self._pos if size is None else size
        h.truncate(size)
        self._wrote = self._dirty = True
        return size

    def flush(self):
        if self.closed or self._pid != os.getpid():
            return
        self._drain()
        if self._dirty:
            self._dirty = False
            self._h.flush()

    def close(self):
        if self.closed:
            return
        alive = self._pid == os.getpid() and not self._client.closed
        try:
            if alive:
                if self._kind == "w" and not self._wrote:
                    self._h.truncate(0)  # an empty object still replaces the old one
                self.flush()
        finally:
            super().close()
            if alive:
                self._h.close()

    # --- beyond io ---
    @property
    def size(self):
        """The size as this file knows it (its own writes included)."""
        self._drain()
        return self._handle().size()

    def read_async(self, offset, out):
        """A Future of the count of bytes read into `out` from `offset`."""
        return self._client._native.handle_read_async(self._handle(), offset, byte_view(out))

    def write_async(self, offset, data):
        """A Future of the count of bytes of `data` written at `offset`."""
        return self._client._native.handle_write_async(self._handle(), offset, byte_view(data))

    # --- internals ---
    def _handle(self):
        if self.closed:
            raise ValueError(f"I/O operation on closed file {self.name}")
        if self._pid != os.getpid():
            raise ClientClosed(f"{self.name} was opened in process {self._pid}, before a fork: "
                               "open it again in this process")
        return self._h

    def _send_gathered(self):
        chunk, at = self._gather, self._gather_at
        self._gather = bytearray()
        self._gather_at = at + len(chunk)
        self._pending.append(self._client._native.handle_write_async(self._h, at, chunk))
        while len(self._pending) > WRITE_WINDOW:
            self._pending.popleft().result()

    def _drain(self):
        """Sends what is gathered and waits for every write behind; raises the first error."""
        if self._gather:
            self._send_gathered()
        first = None
        while self._pending:
            exc = self._pending.popleft().exception()
            first = first or exc
        if first is not None:
            raise first
