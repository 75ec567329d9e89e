"""Write report files atomically (madengine_rocprof.atomic), turning file-system errors into UserErrors."""
from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path

from madengine_rocprof import atomic
from madengine_rocprof.errors import UserError
from madengine_rocprof.wrapper.contracts import Report


@contextmanager
def _as_user_error(path: Path):
    if path.is_dir():
        raise UserError(f"is a directory, expected a file name: {path}")
    try:
        yield
    except OSError as err:
        raise UserError(f"cannot write {path}: {err.strerror}") from None


@contextmanager
def atomic_writer(path: Path):
    """A text file handle; the target appears only if the block finishes without an exception."""
    path = Path(path)
    with _as_user_error(path), atomic.atomic_file(path) as fh:
        yield fh


def write_text(path: Path, text: str) -> None:
    with atomic_writer(path) as fh:
        fh.write(text)


def write_json(path: Path, data: Report) -> None:
    """The report JSON (indent 1 keeps big reports small)."""
    path = Path(path)
    with _as_user_error(path):
        atomic.write_json(path, data, indent=1)
