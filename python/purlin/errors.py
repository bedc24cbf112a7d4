"""Purlin's exceptions: one class per purlinResult_t code, all under PurlinError.

Every failure, whether the library returned it or the Python side caught a
bad argument before calling C, is a PurlinError whose ``code`` is the
result code the C API uses for it. Failures that came from the library also
carry its own words (purlinGetLastError) in ``library_message``, and in the
text of the exception.
"""

from __future__ import annotations

from typing import Dict, Optional, Type

# Result codes; the numeric values are NCCL's ncclResult_t (include/purlin.h).
SUCCESS = 0
UNHANDLED_CUDA_ERROR = 1
SYSTEM_ERROR = 2
INTERNAL_ERROR = 3
INVALID_ARGUMENT = 4
INVALID_USAGE = 5
REMOTE_ERROR = 6
IN_PROGRESS = 7
TIMEOUT = 8

# The library reports a timed-out or aborted wait with the RemoteError code
# (errs.ErrTimeout, errs.ErrAborted); these phrases of its messages let Python
# raise the more precise Timeout and Aborted subclasses of RemoteError.
_TIMEOUT_PHRASE = "timed out"
_ABORTED_PHRASE = "aborted"


class PurlinError(Exception):
    """A failed Purlin call.

    Attributes:
        code: the purlinResult_t code (an int; 0 is never raised).
        library_message: the library's purlinGetLastError text, or "" when
            the error was found by the Python side before calling C.
    """

    def __init__(self, message: str, code: int = INTERNAL_ERROR, library_message: str = "") -> None:
        text = message if not library_message else f"{message}: {library_message}"
        super().__init__(text)
        self.code = code
        self.library_message = library_message


class UnhandledCudaError(PurlinError):
    """A CUDA driver call failed inside the library (code 1)."""


class SystemCallError(PurlinError):
    """A system call failed inside the library: socket, memfd, mmap (code 2)."""


class InternalError(PurlinError):
    """A broken invariant inside Purlin (code 3)."""


class InvalidArgument(PurlinError, ValueError):
    """A bad argument: pointer, count, dtype, op, root, peer, shape (code 4)."""


class InvalidUsage(PurlinError):
    """A call in the wrong state, or ranks that disagree on a call (code 5)."""


class RemoteError(PurlinError):
    """A peer failed, went away, or could not be waited for (code 6)."""


class Aborted(RemoteError):
    """A wait was interrupted by Communicator.abort (code 6)."""


class InProgress(PurlinError):
    """A non-blocking operation has not finished yet (code 7)."""


class Timeout(RemoteError, TimeoutError):
    """A wait for a peer passed PURLIN_TIMEOUT (code 8, or 6 from the library's own waits)."""


class LibraryNotFound(PurlinError, ImportError):
    """libpurlin.so could not be loaded from any of the places searched."""

    def __init__(self, message: str) -> None:
        PurlinError.__init__(self, message, SYSTEM_ERROR)
        ImportError.__init__(self, message)


_BY_CODE: Dict[int, Type[PurlinError]] = {
    UNHANDLED_CUDA_ERROR: UnhandledCudaError,
    SYSTEM_ERROR: SystemCallError,
    INTERNAL_ERROR: InternalError,
    INVALID_ARGUMENT: InvalidArgument,
    INVALID_USAGE: InvalidUsage,
    REMOTE_ERROR: RemoteError,
    IN_PROGRESS: InProgress,
    TIMEOUT: Timeout,
}


def error_class(code: int, library_message: str = "") -> Type[PurlinError]:
    """The exception class for a result code (and, for RemoteError, its message)."""
    cls = _BY_CODE.get(code, PurlinError)
    if cls is RemoteError:
        lowered = library_message.lower()
        if _TIMEOUT_PHRASE in lowered:
            return Timeout
        if _ABORTED_PHRASE in lowered:
            return Aborted
    return cls


def make_error(code: int, message: str, library_message: Optional[str] = None) -> PurlinError:
    """Builds the exception for a failed call: message says which call, on what."""
    detail = library_message or ""
    return error_class(code, detail)(message, code, detail)


def invalid_argument(message: str) -> InvalidArgument:
    """An argument error found by the Python side, before any C call."""
    return InvalidArgument(message, INVALID_ARGUMENT)
