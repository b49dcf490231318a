"""Penstock from Python: objects and fs containers of a Penstock cluster, as files and futures.

    import penstock
    with penstock.Client() as c:                 # PENSTOCK_MGMT etc., as the CLI reads them
        c.create_container("data", redundancy="rep:2")
        c.put("data", "hello", b"hi")
        with c.open("data", "hello") as f:       # an io.RawIOBase: readinto, seek, ...
            print(f.read())

`penstock.torch` (imported on its own, it imports torch) has the Dataset, IterableDataset and
Checkpoint classes. The package is a thin layer over the C++ client library (libpenstock): every
byte moves through it.
"""
from .errors import (Error, Cancelled, InvalidArgument, TimedOut, NotFound, AlreadyExists,
                     PermissionDenied, ResourceExhausted, FailedPrecondition, Aborted, OutOfRange,
                     Unimplemented, Internal, Unavailable, DataLoss, Unauthenticated, ClientClosed)
from .client import Client, ForkUnsupported
from .files import ObjectFile
from .fs import FileSystem

__all__ = ["Client", "ForkUnsupported", "ObjectFile", "FileSystem", "Error", "Cancelled", "InvalidArgument", "TimedOut",
           "NotFound", "AlreadyExists", "PermissionDenied", "ResourceExhausted", "FailedPrecondition",
           "Aborted", "OutOfRange", "Unimplemented", "Internal", "Unavailable", "DataLoss",
           "Unauthenticated", "ClientClosed"]
