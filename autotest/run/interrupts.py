"""Interrupts: SIGTERM and SIGHUP take Ctrl-C's path, and a stop request reaches every launch.

CI cancels a job with SIGTERM (and a closed terminal sends SIGHUP); Python's default for both is
to die on the spot, skipping the launcher's cleanup and the verdict. :func:`signals_as_interrupt`
turns them into :class:`Interrupted` (a ``KeyboardInterrupt``), so one path handles all three.

A signal reaches only the main thread; calibration's runs wait in pool threads. The main thread
calls :func:`request_stop` and every launcher, which checks :func:`stop_requested` while it
waits, stops its run as if interrupted.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

CAUGHT = (signal.SIGTERM, signal.SIGHUP)


class Interrupted(KeyboardInterrupt):
    """A run or the harness was interrupted; ``reason`` says by what (``SIGTERM``, ``SIGINT``)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def describe(exc: BaseException) -> str:
    """How an interrupt is named in verdicts: ``SIGTERM``; a bare Ctrl-C is ``KeyboardInterrupt``."""
    if isinstance(exc, Interrupted):
        return exc.reason
    return f"{type(exc).__name__}: {exc}".rstrip(": ")


def _raise(signum: int, _frame: FrameType | None) -> None:
    raise Interrupted(signal.Signals(signum).name)


@contextmanager
def signals_as_interrupt() -> Iterator[None]:
    """Within the block, SIGTERM and SIGHUP raise :class:`Interrupted` (main thread only)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {sig: signal.signal(sig, _raise) for sig in CAUGHT}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


_stop = threading.Event()
_stop_reason: list[str] = []


def request_stop(reason: str) -> None:
    """Ask every launch in this process to stop its run (it raises :class:`Interrupted`)."""
    _stop_reason[:] = [reason]
    _stop.set()


def stop_requested() -> str | None:
    """The reason given to :func:`request_stop`, or None."""
    return (_stop_reason or ["stop requested"])[0] if _stop.is_set() else None


def clear_stop() -> None:
    """Forget a stop request (the interrupted batch has ended)."""
    _stop.clear()
    _stop_reason.clear()
