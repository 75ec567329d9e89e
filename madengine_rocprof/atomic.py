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
import shutil
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
    fd, tmp, final_mode = _stage(path)
    try:
        with os.fdopen(fd, mode, **kwargs) as fh:
            os.fchmod(fh.fileno(), final_mode)
            yield fh
        _rename(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _stage(path: str) -> tuple[int, str, int]:
    """A temporary file beside `path`: (fd, its name, the mode the target gets). An error names the target, never
    the temporary file the user did not ask for."""
    folder = os.path.dirname(os.path.abspath(path))
    try:
        os.makedirs(folder, exist_ok=True)
        final_mode = _final_mode(path)
        fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.", suffix=".tmp", dir=folder)
    except OSError as err:
        raise OSError(err.errno, err.strerror, path) from None
    return fd, tmp, final_mode


def _rename(tmp: str, path: str) -> None:
    try:
        os.replace(tmp, path)
    except OSError as err:
        raise OSError(err.errno, err.strerror, path) from None


def atomic_write(path, text: str) -> None:
    with atomic_file(path) as fh:
        fh.write(text)


def write_json(path, data, indent: int | None = 2) -> None:
    """The one JSON writer (manifest, run.json, reports): atomic, so a reader never sees half a file."""
    with atomic_file(path) as fh:
        json.dump(data, fh, indent=indent, default=str, allow_nan=False)
        fh.write("\n")


class FileSet:
    """Several outputs of one command that appear together or not at all.

    `open(path)` stages each one in a temporary file beside its target (a device or a pipe: in an anonymous
    temporary file); `commit()` renames them all into place and copies the staged streams, undoing the renames
    already done if one fails; `discard()` (or leaving `with FileSet() as files:` by an exception, a stopping signal
    included) removes every temporary file and leaves every target as it was.
    """

    def __init__(self) -> None:
        self._files: list[tuple[str, str]] = []        # (temporary file, target)
        self._streams: list[tuple[Any, str, int, str]] = []  # (anonymous staging file, target, st_mode, mode)
        self._folders: list[str] = []  # created for the targets: removed (when still empty) by discard()

    def __enter__(self) -> FileSet:
        return self

    def __exit__(self, kind, _value, _tb) -> None:
        if kind is None:
            self.commit()
        else:
            self.discard()

    @contextlib.contextmanager
    def open(self, path, mode: str = "w", executable: bool = False):
        path = os.fspath(path)
        kwargs: dict[str, Any] = {} if "b" in mode else {"encoding": "utf-8", "newline": ""}
        kind = _stream_kind(path)
        if kind is not None:
            staged = tempfile.TemporaryFile("w+b" if "b" in mode else "w+", **kwargs)  # noqa: SIM115 - closed by discard()
            self._streams.append((staged, path, kind, mode))
            yield staged
            return
        folder = os.path.dirname(os.path.abspath(path))
        while not os.path.lexists(folder):  # folders this set creates go again if it is discarded
            self._folders.append(folder)
            folder = os.path.dirname(folder)
        fd, tmp, final_mode = _stage(path)
        self._files.append((tmp, path))
        if executable:  # x wherever r is given
            final_mode |= (final_mode & 0o444) >> 2
        with os.fdopen(fd, mode, **kwargs) as fh:
            os.fchmod(fh.fileno(), final_mode)
            yield fh

    def write_text(self, path, text: str) -> None:
        with self.open(path) as fh:
            fh.write(text)

    def commit(self) -> None:
        done: list[tuple[str, bool, str | None]] = []  # (target, was there, a copy of what it replaced)
        try:
            for tmp, target in self._files:
                done.append((target, os.path.lexists(target), _keep_old(target)))
                _rename(tmp, target)
            for staged, target, kind, mode in self._streams:
                staged.seek(0)
                binary = "b" in mode
                with _open_stream(target, kind, mode, {} if binary else {"encoding": "utf-8", "newline": ""}) as out:
                    shutil.copyfileobj(staged, out, 1 << 20)
        except BaseException:
            for target, existed, old in reversed(done):
                with contextlib.suppress(OSError):
                    if old is not None:
                        os.replace(old, target)
                    elif not existed:
                        os.unlink(target)
                    # else: replaced, and no copy could be kept (a file system without hard links)
            done = []
            raise
        else:
            self._folders = []  # committed: the folders hold the outputs now
        finally:
            for _target, _existed, old in done:
                if old is not None:
                    with contextlib.suppress(OSError):
                        os.unlink(old)
            self.discard()

    def discard(self) -> None:
        for tmp, _target in self._files:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
        for staged, *_ in self._streams:
            staged.close()
        for folder in sorted(set(self._folders), key=len, reverse=True):  # deepest first; only empty ones
            with contextlib.suppress(OSError):
                os.rmdir(folder)
        self._files, self._streams, self._folders = [], [], []


def _keep_old(target: str) -> str | None:
    """A second name for what `target` names now (a hard link to a file, a copy of a symbolic link), so a failed
    commit can put it back; None when there is nothing, or no second name can be made."""
    is_link = os.path.islink(target)
    if not is_link and not os.path.isfile(target):
        return None
    folder, base = os.path.split(os.path.abspath(target))
    for _ in range(5):
        old = os.path.join(folder, f".{base}.{os.urandom(4).hex()}.old.tmp")
        try:
            if is_link:
                os.symlink(os.readlink(target), old)
            else:
                os.link(target, old)
            return old
        except FileExistsError:
            continue
        except OSError:
            return None
    return None
