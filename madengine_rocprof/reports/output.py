"""Write report files atomically (madengine_rocprof.atomic), turning file-system errors into UserErrors."""
from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path

from madengine_rocprof.atomic import atomic_file
from madengine_rocprof.errors import UserError


@contextmanager
def atomic_writer(path: Path):
    """A text file handle; the target appears only if the block finishes without an exception."""
    path = Path(path)
    if path.is_dir():
        raise UserError(f"is a directory, expected a file name: {path}")
    try:
        with atomic_file(path) as fh:
            yield fh
    except OSError as err:
        raise UserError(f"cannot write {path}: {err.strerror}") from None


def write_text(path: Path, text: str) -> None:
    with atomic_writer(path) as fh:
        fh.write(text)
