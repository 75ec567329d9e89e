"""Runs one step so that its whole process tree ends with it (standard library only: it runs inside containers
as `python3 .../reaper.py`, where this package may not be importable).

    python3 reaper.py [--grace S] [--timeout S] -- COMMAND ARGS...

A process group is not enough: a `setsid` child leaves it, and a child that ignores SIGTERM outlives a group signal.
So this process becomes a child-subreaper (Linux prctl): every orphan of the tree is re-parented here, and the
tree is found by walking /proc's parent links from here. Rules:
- COMMAND ends: what it left running gets SIGTERM, then SIGKILL after 5 s; the exit status is COMMAND's.
- SIGTERM/SIGINT/SIGHUP here: SIGTERM to the whole tree, `--grace` seconds for profilers to write their files,
  then SIGKILL; a second signal sends SIGKILL at once. The exit status is COMMAND's (143 after SIGTERM).
- `--timeout` expires: as a signal, then exit 124 (137 when SIGKILL was needed), as coreutils `timeout` does.
"""
from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import sys
import time

PR_SET_CHILD_SUBREAPER = 36
LEFTOVER_GRACE_S = 5.0
POLL_S = 0.05


def become_subreaper() -> bool:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False  # not Linux: the process group still reaches ordinary children


def descendants(root: int) -> list[int]:
    """Every live process below `root`, by /proc parent links (children of re-parented orphans included)."""
    children: dict[int, list[int]] = {}
    try:
        entries = os.listdir("/proc")
    except OSError:
        return []
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as fh:
                stat = fh.read()
        except OSError:
            continue  # ended meanwhile
        fields = stat[stat.rfind(b")") + 2:].split()
        if fields and fields[0] != b"Z":
            children.setdefault(int(fields[1]), []).append(int(entry))
    found, todo = [], [root]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def _kill(pids: list[int], sig: int) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):  # ended meanwhile, or not ours
            os.kill(pid, sig)


class Reaper:
    def __init__(self, argv: list[str], grace: float, timeout: float | None) -> None:
        self.argv, self.grace, self.timeout = argv, grace, timeout
        self.code: int | None = None
        self.stop_at: float | None = None   # when the tree got SIGTERM
        self.killed = False
        self.timed_out = False

    def _reap(self, child_pid: int) -> None:
        """Collect every ended child (the step's, and orphans re-parented here), recording the step's status."""
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            if pid == child_pid:
                self.code = os.waitstatus_to_exitcode(status)

    def terminate(self) -> None:
        if self.stop_at is None:
            self.stop_at = time.monotonic()
            _kill(descendants(os.getpid()), signal.SIGTERM)
        else:  # a second request: no more grace
            self.kill()

    def kill(self) -> None:
        self.killed = True
        _kill(descendants(os.getpid()), signal.SIGKILL)

    def run(self) -> int:
        become_subreaper()
        try:
            child = subprocess.Popen(self.argv, start_new_session=True)
        except OSError as err:
            print(f"cannot start {self.argv[0]}: {err}", file=sys.stderr)
            return 127
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(sig, lambda _s, _f: self.terminate())
        deadline = time.monotonic() + self.timeout if self.timeout else None
        while self.code is None:
            self._reap(child.pid)
            now = time.monotonic()
            if deadline is not None and now >= deadline and self.stop_at is None:
                self.timed_out = True
                self.terminate()
            if self.stop_at is not None and not self.killed and now - self.stop_at >= self.grace:
                self.kill()
            time.sleep(POLL_S)
        self._end_leftovers()
        code = self.code
        if code < 0:
            code = 128 - code  # ended by a signal: report it as a shell does
        if self.timed_out:
            return 137 if self.killed else 124
        return code

    def _end_leftovers(self) -> None:
        left = descendants(os.getpid())
        if not left:
            return
        _kill(left, signal.SIGTERM)
        end = time.monotonic() + (0 if self.killed else LEFTOVER_GRACE_S)
        while time.monotonic() < end:
            self._reap(-1)
            if not descendants(os.getpid()):
                return
            time.sleep(POLL_S)
        _kill(descendants(os.getpid()), signal.SIGKILL)
        end = time.monotonic() + 5
        while descendants(os.getpid()) and time.monotonic() < end:
            self._reap(-1)
            time.sleep(POLL_S)
        self._reap(-1)


def main(argv: list[str]) -> int:
    grace, timeout = 15.0, None
    while argv and argv[0] != "--":
        flag, value, argv = argv[0], float(argv[1]), argv[2:]
        if flag == "--grace":
            grace = value
        elif flag == "--timeout":
            timeout = value
        else:
            print(f"reaper: unknown option {flag}", file=sys.stderr)
            return 2
    if len(argv) < 2:
        print("usage: reaper.py [--grace S] [--timeout S] -- COMMAND ARGS...", file=sys.stderr)
        return 2
    return Reaper(argv[1:], grace, timeout).run()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
