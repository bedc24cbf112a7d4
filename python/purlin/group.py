"""purlin.group(): NCCL's GroupStart/GroupEnd as a context manager.

Calls made inside the block (on any communicator, from this thread) are
launched together when the outermost block ends; groups nest. Work that must
wait for the launch (synchronizing a host communicator for a blocking NumPy
call, destroying a PreMulSum op) is deferred to that moment.
"""

from __future__ import annotations

import contextlib
import threading
from typing import Callable, Iterator, List

from . import _library


class _GroupState(threading.local):
    def __init__(self) -> None:
        self.depth = 0
        self.after_end: List[Callable[[], None]] = []


_state = _GroupState()


def in_group() -> bool:
    """Whether the calling thread is inside purlin.group()."""
    return _state.depth > 0


def after_group(action: Callable[[], None]) -> None:
    """Runs action once the calling thread's outermost group has been launched."""
    _state.after_end.append(action)


@contextlib.contextmanager
def group() -> Iterator[None]:
    """Launches the collectives issued inside the block together (purlinGroupStart/End).

    A block left by an exception (a call Purlin refused, or the caller's own)
    cancels the group (purlinGroupCancel): as in NCCL, where a refused call
    fails its group, none of the group's calls is launched, rather than the
    part issued before the exception while the peers launch theirs whole.
    """
    lib = _library.load()
    _library.check(lib.purlinGroupStart(), "purlinGroupStart")
    _state.depth += 1
    completed = False
    try:
        yield
        completed = True
    finally:
        _state.depth -= 1
        outermost = _state.depth == 0
        actions = _state.after_end if outermost else []
        if outermost:
            _state.after_end = []
        try:
            if completed:
                _library.check(lib.purlinGroupEnd(), "purlinGroupEnd")
            else:
                lib.purlinGroupCancel()  # the exception in flight says what went wrong
        finally:
            _run_all(actions)


def _run_all(actions: List[Callable[[], None]]) -> None:
    """Runs every action even if one fails; re-raises the first failure."""
    first = None
    for action in actions:
        try:
            action()
        except BaseException as exc:  # keep going: later actions release resources
            if first is None:
                first = exc
    if first is not None:
        raise first
