"""Exceptions of the penstock package: one class per status code of the client library
(include/penstock/status.h), each also a subclass of the built-in exception a Python caller
would catch for it (NotFound is a FileNotFoundError, InvalidArgument a ValueError, ...).

Every exception carries ``.code`` (the numeric status code, equal to gRPC's) and
``.code_name`` ("not_found"); the message names the thing that failed and, where there is
one, the fix. Errors of fs containers also carry the POSIX ``.errno`` their message starts with.
"""
import errno as _errno
import re as _re


class Error(Exception):
    """Base of every penstock error."""

    code = 2
    code_name = "unknown"

    def __init__(self, message, code=None):
        super().__init__(message)
        if code is not None:
            self.code = code
        self.message = message


class Cancelled(Error):
    code, code_name = 1, "cancelled"


class InvalidArgument(Error, ValueError):
    code, code_name = 3, "invalid_argument"


class TimedOut(Error, TimeoutError):
    code, code_name = 4, "deadline_exceeded"


class NotFound(Error, FileNotFoundError):
    code, code_name = 5, "not_found"


class AlreadyExists(Error, FileExistsError):
    code, code_name = 6, "already_exists"


class PermissionDenied(Error, PermissionError):
    code, code_name = 7, "permission_denied"


class ResourceExhausted(Error):
    code, code_name = 8, "resource_exhausted"


class FailedPrecondition(Error):
    code, code_name = 9, "failed_precondition"


class Aborted(Error):
    code, code_name = 10, "aborted"


class OutOfRange(Error, ValueError):
    code, code_name = 11, "out_of_range"


class Unimplemented(Error, NotImplementedError):
    code, code_name = 12, "unimplemented"


class Internal(Error):
    code, code_name = 13, "internal"


class Unavailable(Error, ConnectionError):
    code, code_name = 14, "unavailable"


class DataLoss(Error):
    code, code_name = 15, "data_loss"


class Unauthenticated(Error, PermissionError):
    code, code_name = 16, "unauthenticated"


class ClientClosed(FailedPrecondition):
    """A call on a closed Client (or a file of one)."""


_BY_CODE = {cls.code: cls for cls in (Cancelled, InvalidArgument, TimedOut, NotFound, AlreadyExists,
                                      PermissionDenied, ResourceExhausted, FailedPrecondition, Aborted,
                                      OutOfRange, Unimplemented, Internal, Unavailable, DataLoss,
                                      Unauthenticated)}
_ERRNO_PREFIX = _re.compile(r"^(E[A-Z0-9]+): ")


def from_status(code, message):
    """The exception for status `code` with `message` (what the native layer raises)."""
    cls = _BY_CODE.get(code, Error)
    if cls is FailedPrecondition and "is closed" in message:
        cls = ClientClosed
    exc = cls(message, code)
    m = _ERRNO_PREFIX.match(message)
    if m and isinstance(exc, OSError) and hasattr(_errno, m.group(1)):
        exc.errno = getattr(_errno, m.group(1))
        exc.strerror = message
    return exc
