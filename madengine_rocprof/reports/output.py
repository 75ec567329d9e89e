"""Write output files atomically: build in a temporary file beside the target, then rename."""
from __future__ import annotations

import os
import tempfile
from contextlib import contextmanager
from pathlib import Path

from madengine_rocprof.errors import UserError


@contextmanager
def atomic_writer(path: Path):
    """A text file handle; the target appears only if the block finishes without an exception."""
    path = Path(path)
    if path.is_dir():
        raise UserError(f"is a directory, expected a file name: {path}")
    parent = path.parent if str(path.parent) else Path(".")
    try:
        parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=parent)
    except OSError as err:
        raise UserError(f"cannot write {path}: {err.strerror}") from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as fh:
            yield fh
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def write_text(path: Path, text: str) -> None:
    with atomic_writer(path) as fh:
        fh.write(text)
