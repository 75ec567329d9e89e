"""SIGINT, SIGTERM and SIGHUP during `run` all mean "stop and keep the results": schedulers (SLURM time-outs) send
SIGTERM, a closed terminal sends SIGHUP, and each gets the clean-up Ctrl-C gets.

The first signal raises `Interrupted` in the main thread (a KeyboardInterrupt, so every Ctrl-C path handles it).
A later signal never raises: it only sets `hurry`, which shortens the grace periods of the clean-up. A raise in the
middle of the clean-up would lose what is already known (steps, performance, the profiler's manifest).
"""
from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from types import FrameType

SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class Interrupted(KeyboardInterrupt):
    """The run was stopped by a signal; `exit_code` is the shell's 128 + signal number."""

    def __init__(self, signum: int = signal.SIGINT) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum

    @property
    def exit_code(self) -> int:
        return 128 + self.signum


class _State:
    def __init__(self) -> None:
        self.received: int | None = None   # the first signal
        self.hurry = threading.Event()     # set by a second signal
        self.shielded = 0                  # >0: the first signal is only recorded, not raised


STATE = _State()


def hurry() -> bool:
    """True once a second signal asked the clean-up to hurry (grace periods end now)."""
    return STATE.hurry.is_set()


def received() -> int | None:
    return STATE.received


def name() -> str:
    """The first signal's name for messages: Ctrl-C (SIGINT, or no signal: a KeyboardInterrupt), SIGTERM, SIGHUP."""
    sig = STATE.received
    return signal.Signals(sig).name if sig not in (None, signal.SIGINT) else "Ctrl-C"


def _on_signal(signum: int, _frame: FrameType | None) -> None:
    if STATE.received is not None:
        STATE.hurry.set()
        return
    STATE.received = signum
    if not STATE.shielded:
        raise Interrupted(signum)


@contextlib.contextmanager
def handled() -> Iterator[None]:
    """Install the handlers for the duration of a run (main thread only; elsewhere Python delivers no signals)."""
    STATE.__init__()  # type: ignore[misc]  # a fresh state per run
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {sig: signal.signal(sig, _on_signal) for sig in SIGNALS}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


@contextlib.contextmanager
def shielded() -> Iterator[None]:
    """Writing the results: a first signal arriving now is only recorded (`received()`); the caller acts on it after."""
    STATE.shielded += 1
    try:
        yield
    finally:
        STATE.shielded -= 1
