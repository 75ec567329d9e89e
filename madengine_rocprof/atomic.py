"""Write a file so that readers see either the old file or the whole new one: a temporary file beside the target,
then a rename. On any error the target is untouched and the temporary file is removed.

A target that is a device or a pipe (`--json /dev/null`, `/dev/stdout`, a FIFO, or a link to one) is written
straight through: there is no file to replace, and renaming over it would replace the device node itself (as root,
/dev/null became a regular file). A FIFO without a reader is an error rather than a wait.

Standard library only: the wrapper bundle (zipapp) carries this module into containers.
"""
from __future__ import annotations

import contextlib
import json
import os
import stat
import tempfile
from typing import Any


def _final_mode(path: str) -> int:
    """A replaced file keeps its mode; a new one gets 0666 less the umask, as open() would give (mkstemp gives 0600)."""
    try:
        return stat.S_IMODE(os.stat(path).st_mode)
    except FileNotFoundError:
        umask = os.umask(0o022)  # the only way to read the umask is to set it; set straight back
        os.umask(umask)
        return 0o666 & ~umask


def _stream_kind(path: str) -> int | None:
    """The st_mode of `path` (followed through links) when it is a character device, a FIFO or a socket (written,
    not replaced); None for anything else, or nothing there."""
    try:
        kind = os.stat(path).st_mode
    except OSError:
        return None
    return kind if stat.S_ISCHR(kind) or stat.S_ISFIFO(kind) or stat.S_ISSOCK(kind) else None


def _open_stream(path: str, kind: int, mode: str, kwargs: dict[str, Any]):
    flags = os.O_WRONLY | getattr(os, "O_CLOEXEC", 0)
    if stat.S_ISFIFO(kind):
        try:  # no reader: ENXIO now, instead of blocking until one comes
            fd = os.open(path, flags | os.O_NONBLOCK)
        except OSError as err:
            raise OSError(err.errno, f"{path} is a pipe with no reader (start the reader first, or write to a file)",
                          path) from None
        os.set_blocking(fd, True)
    else:
        fd = os.open(path, flags)
    return os.fdopen(fd, mode, **kwargs)


@contextlib.contextmanager
def atomic_file(path, mode: str = "w"):
    """`with atomic_file(p) as fh: ...`; text mode writes UTF-8 with newlines as given."""
    path = os.fspath(path)
    kwargs: dict[str, Any] = {} if "b" in mode else {"encoding": "utf-8", "newline": ""}
    kind = _stream_kind(path)
    if kind is not None:
        with _open_stream(path, kind, mode, kwargs) as stream:
            yield stream
        return
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    final_mode = _final_mode(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.", suffix=".tmp", dir=folder)
    try:
        with os.fdopen(fd, mode, **kwargs) as fh:
            os.fchmod(fh.fileno(), final_mode)
            yield fh
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def atomic_write(path, text: str) -> None:
    with atomic_file(path) as fh:
        fh.write(text)


def write_json(path, data, indent: int | None = 2) -> None:
    """The one JSON writer (manifest, run.json, reports): atomic, so a reader never sees half a file."""
    with atomic_file(path) as fh:
        json.dump(data, fh, indent=indent, default=str, allow_nan=False)
        fh.write("\n")
