"""penstock.Client: a connection to a Penstock cluster (containers, objects, fs containers).

Settings come from the arguments, else the environment variables the `penstock` command reads
(PENSTOCK_MGMT, PENSTOCK_API_KEY, PENSTOCK_TLS_CA/CERT/KEY, PENSTOCK_TIMEOUT_MS,
PENSTOCK_DATA_WORKERS, PENSTOCK_LOCAL_DIRECT, PENSTOCK_NET_DEVICES).

Threads: a Client may be used from many threads at once; blocking calls release the GIL.
Fork: in a child process the parent's native client is left alone (its threads do not exist
there; it is leaked, never destroyed). A new one would have to connect there, but neither the
C++ client's control plane (gRPC) nor its data plane (UCX) can start again in the child of a
process that already used them (the child would hang; docs/architecture.md, "Python", says
why), so the first call in such a child raises ForkUnsupported at once,
naming the fix: start workers with 'forkserver' or 'spawn' (DataLoader(...,
multiprocessing_context="forkserver")). A Client pickles as its settings, so workers started
that way connect their own. close() (or the with block) waits for pending
futures and ends the connection; later calls raise penstock.ClientClosed.
"""
import atexit
import os
import weakref

from . import _penstock, options
from .buffers import byte_view
from .errors import ClientClosed, FailedPrecondition, NotFound

_live = weakref.WeakSet()
_connected_here = False    # this process connected a native client
_forked_after_connect = False  # this process is a fork of one that had


class ForkUnsupported(FailedPrecondition):
    """A Client used in a forked child of a process that had connected one."""


def _connect(settings):
    global _connected_here
    if _forked_after_connect:
        raise ForkUnsupported(
            f"penstock.Client cannot connect in process {os.getpid()}: it was forked from a process that had "
            "connected one, and the client's control plane (gRPC) and data plane (UCX) do not survive fork. "
            "Start workers with "
            "'forkserver' or 'spawn' instead (DataLoader(..., multiprocessing_context='forkserver'), "
            "multiprocessing.get_context('forkserver')); a penstock.Client pickles as its settings")
    native = _penstock.Client(**settings)
    _connected_here = True
    return native
DEFAULT_OPEN_THREADS = 16


class Client:
    def __init__(self, mgmt=None, api_key=None, tls_ca=None, tls_cert=None, tls_key=None, timeout_ms=None,
                 data_workers=None, local_direct=None, net_devices=None, max_inflight_stripes=0,
                 open_threads=DEFAULT_OPEN_THREADS):
        self._settings = options.resolve(mgmt, api_key, tls_ca, tls_cert, tls_key, timeout_ms, data_workers,
                                         local_direct, net_devices)
        self._settings.update(max_inflight_stripes=max_inflight_stripes, open_threads=open_threads)
        self._closed = False
        self._fs = {}
        self._n = _connect(self._settings)
        self._pid = os.getpid()
        _live.add(self)

    # --- connection ---
    @property
    def mgmt(self):
        return self._settings["mgmt"]

    @property
    def _native(self):
        if self._closed:
            raise ClientClosed(f"this penstock.Client (mgmt {self.mgmt}) is closed: create a new one")
        if self._n is None or self._pid != os.getpid():
            self._n = _connect(self._settings)  # an unpickled Client's own
            self._pid = os.getpid()
            self._fs = {}
        return self._n

    def _forget_after_fork(self):
        if self._n is not None:
            self._n.abandon()
        self._n, self._fs = None, {}

    def close(self):
        """Waits for pending futures, then disconnects. Idempotent."""
        if self._closed:
            return
        self._closed = True
        if self._n is not None and self._pid == os.getpid():
            self._n.close()
        self._n, self._fs = None, {}

    @property
    def closed(self):
        return self._closed

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __getstate__(self):
        if self._closed:
            raise ClientClosed("a closed penstock.Client cannot be pickled")
        return {"settings": self._settings}

    def __setstate__(self, state):
        self._settings, self._closed, self._fs, self._n, self._pid = state["settings"], False, {}, None, None
        _live.add(self)

    def __repr__(self):
        return f"penstock.Client(mgmt={self.mgmt!r}{', closed' if self._closed else ''})"

    # --- containers ---
    def create_container(self, name, redundancy=None, stripe_unit=1 << 20, min_durable=0):
        """Creates a container; redundancy "none", "rep:N" or "ec:K+M" (None: the strongest the
        cluster holds now). Returns its ContainerInfo. AlreadyExists when the name is taken."""
        return self._native.create_container(name, redundancy, stripe_unit, min_durable)

    def container_info(self, name):
        return self._native.container_info(name)

    def containers(self):
        return self._native.containers()

    def delete_container(self, name, force=False):
        """Without force, refuses (FailedPrecondition) while the container holds objects."""
        self._native.delete_container(name, force)

    # --- whole objects ---
    def put(self, container, name, data):
        """Stores `data` (any buffer, or a CPU tensor) as object `name`, replacing it atomically."""
        self._native.put(container, name, byte_view(data))

    def get(self, container, name):
        """The object's bytes (read straight into the returned bytes object)."""
        return self._native.get(container, name)

    def stat(self, container, name):
        return self._native.stat(container, name)

    def list(self, container, prefix=""):
        """ObjectInfo of every object whose name starts with `prefix`, sorted by name."""
        return self._native.list(container, prefix)

    def delete(self, container, name):
        self._native.delete(container, name)

    def exists(self, container, name):
        try:
            self.stat(container, name)
            return True
        except NotFound:
            return False

    # --- files ---
    def open(self, container, name, mode="rb"):
        """The object as a file (an io.RawIOBase): "rb" reads, "wb" replaces it (atomically, once
        the first bytes are durable; writes go behind, in parallel, and errors show at flush or
        close), "r+b" reads and writes in place, "ab" appends."""
        from .files import ObjectFile, parse_mode
        kind = parse_mode(mode)
        handle = self._native.open(container, name, create=kind != "r", replace=kind == "w")
        f = ObjectFile(self, handle, f"{container}/{name}", mode)
        if kind == "a":
            f.seek(0, 2)
        return f

    def fs(self, container, format=False):
        """The file system of fs container `container` (format=True writes an empty one first
        when it has none)."""
        from .fs import FileSystem
        return FileSystem(self, container, format)

    def _fs_native(self, container, format=False):
        native = self._native
        fs = self._fs.get(container)
        if fs is None:
            fs = self._fs[container] = native.fs(container, format)
        return fs

    # --- futures ---
    def read_async(self, container, name, out=None, offset=0):
        """A Future of the object's bytes from `offset` (or, with `out`, of the count read into it)."""
        return self._native.read_async(container, name, offset, None if out is None else byte_view(out))

    def write_async(self, container, name, data, offset=None):
        """A Future: without `offset` a whole-object put, else a write at `offset` (creating the object)."""
        return self._native.write_async(container, name, byte_view(data), offset)

    def get_many(self, container, names):
        """One Future per name, of each object's bytes, all in flight at once."""
        return self._native.get_many(container, list(names))

    def put_many(self, container, items):
        """Puts every (name, data) of `items` (a dict or pairs) at once; a Future per put."""
        pairs = list(items.items()) if isinstance(items, dict) else list(items)
        return self._native.put_many(container, [n for n, _ in pairs], [byte_view(d) for _, d in pairs])

    def read_path_stats(self):
        """{"bytes", "placed", "copied"}: what reads delivered into caller buffers, and how many
        of those bytes the client copied (see include/penstock/object_io.h, ReadPathStats)."""
        return self._native.read_path_stats()


def _after_fork_in_child():
    global _forked_after_connect, _connected_here
    _forked_after_connect = _forked_after_connect or _connected_here
    _connected_here = False
    for c in list(_live):
        c._forget_after_fork()


def _close_all_at_exit():
    for c in list(_live):
        if c._pid == os.getpid():
            c.close()


os.register_at_fork(after_in_child=_after_fork_in_child)
atexit.register(_close_all_at_exit)
