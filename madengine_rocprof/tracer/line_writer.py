"""A text file written in whole lines at its final name, so a reader (or a kill) never meets half a row.

The tracer writes its trace files while a SIGTERM's grace period runs, and a second signal or a full disk may end
the write at any moment. A temporary file renamed at the end would lose every row on such an end; this writer
keeps them: the file is created at its final name, and each `write` appends whole lines with unbuffered
os.write calls. A failed write (ENOSPC, EFBIG) cuts the file back to the end of its last whole line before the
error is raised, so every row the disk took stays and no partial line or temporary file is left.

Limit, by construction of the kernel: SIGKILL in the middle of one os.write of a large block can cut that block
at a page; Python-level signals (SIGTERM, SIGINT) run their handlers between writes and never do.
Standard library only (runs inside the workload's Python).
"""
from __future__ import annotations

import os


class LineWriter:
    """`with LineWriter(path) as out: out.write("a,b\\n")`; every `write` must end with a newline."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.fd: int | None = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_CLOEXEC", 0),
                                      0o666)
        self.size = 0  # bytes of whole lines on disk

    def write(self, text: str) -> None:
        if not text:
            return
        if not text.endswith("\n"):
            raise ValueError("LineWriter.write takes whole lines (text ending in a newline)")
        if self.fd is None:
            raise ValueError(f"{self.path}: written after close")
        data = memoryview(text.encode("utf-8"))
        done = 0
        try:
            while done < len(data):
                done += os.write(self.fd, data[done:])
        except BaseException:
            self.size += data[:done].tobytes().rfind(b"\n") + 1  # the whole lines the disk took stay
            self._cut_back()
            raise
        self.size += done

    def _cut_back(self) -> None:
        """Drops a partly written line: the file ends after its last whole line again."""
        if self.fd is None:
            return
        try:
            if self.size == 0:  # not even the header: no file rather than an empty one
                os.unlink(self.path)
            else:
                os.ftruncate(self.fd, self.size)
        except OSError:
            pass

    def close(self) -> None:
        if self.fd is not None:
            fd, self.fd = self.fd, None
            os.close(fd)

    def __enter__(self) -> LineWriter:
        return self

    def __exit__(self, *_exc) -> None:
        self.close()
