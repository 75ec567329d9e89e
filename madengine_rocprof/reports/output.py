"""The one writer of a command's output files: every output path is checked against the command's inputs before
anything is read, and all outputs are written together or not at all (madengine_rocprof.atomic.FileSet).

An output must never replace an input: `report RUN --json RUN/prof/1_kernel_trace.csv` replaced the profile. So a
path that resolves (through links) to an input, or into an input folder, or to the same file as an input file (a hard
link), is refused with exit 2; so are two outputs naming one file, and a link that loops.
"""
from __future__ import annotations

import errno
import os
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

from madengine_rocprof import atomic
from madengine_rocprof.errors import UserError, from_os_error
from madengine_rocprof.reports import json_indented
from madengine_rocprof.wrapper.contracts import Report

_LOOP_FIX = "a symbolic link on this path points (directly or through others) back at itself: remove it, or give a " \
            "real path"


def resolved(path: Path, what: str = "output") -> Path:
    """`path` with every link followed; a link loop is a UserError that says so."""
    try:
        return Path(path).resolve()
    except RuntimeError:  # Python 3.11 reports a loop so
        raise UserError(f"{what} path is a symbolic link loop", file=str(path), fix=_LOOP_FIX) from None
    except OSError as err:
        if err.errno == errno.ELOOP:
            raise UserError(f"{what} path is a symbolic link loop", file=str(path), fix=_LOOP_FIX) from None
        raise from_os_error(err) from None


def _is_stream(path: Path) -> bool:
    return atomic._stream_kind(os.fspath(path)) is not None


def _inside(child: Path, folder: Path) -> bool:
    return child == folder or folder in child.parents


class OutputSet:
    """`outputs = OutputSet(inputs)`; `outputs.claim(option, path)` for each output (refused at once when it collides
    with an input or another output); then `with outputs.files() as files: files.write_text(...)`."""

    def __init__(self, inputs: Iterable[Path | None]) -> None:
        self._inputs: list[tuple[Path, Path]] = []  # (as given, resolved)
        for given in inputs:
            if given is None:
                continue
            self._inputs.append((Path(given), resolved(Path(given), "input")))
        self._claimed: dict[Path, str] = {}

    def claim(self, option: str, path: Path | None, *, folder: bool = False) -> None:
        """Check an output (a file; with folder=True a folder the command writes files into) before any input is
        read."""
        if path is None:
            return
        path = Path(path)
        if not folder and _is_stream(path):
            return  # /dev/null, /dev/stdout, a pipe: written through, nothing replaced
        real = resolved(path)
        if not folder and real.is_dir():
            raise UserError("is a directory, expected a file name", file=str(path), where=option,
                            fix="give the name of a file to write, not a folder")
        if folder and real.exists() and not real.is_dir():
            raise UserError("is a file, expected a folder", file=str(path), where=option,
                            fix="give a folder (it is created when missing)")
        for given, input_real in self._inputs:
            self._refuse_input(option, path, real, given, input_real, folder)
        other = self._claimed.get(real)
        if other is not None:
            raise UserError(f"names the same file as {other}", file=str(path), where=option,
                            fix="give each output its own file")
        self._claimed[real] = option

    @staticmethod
    def _refuse_input(option: str, path: Path, real: Path, given: Path, input_real: Path, folder: bool) -> None:
        same = real == input_real
        if not same and real.exists() and input_real.is_file():
            try:
                same = os.path.samefile(real, input_real)  # a hard link to the input
            except OSError:
                same = False
        if same:
            raise UserError(f"is the input {given}: writing it would replace the input", file=str(path),
                            where=option, fix="write the output somewhere else (outputs never replace inputs)")
        if input_real.is_dir() and _inside(real, input_real):
            what = "a file of" if real.exists() else "inside"
            raise UserError(f"is {what} the input folder {given}: writing there could replace or add to its "
                            "profiler files", file=str(path), where=option,
                            fix="write the output outside the input folders, e.g. in the current folder")

    @contextmanager
    def files(self) -> Iterator[atomic.FileSet]:
        """The staging set: every file written through it appears on a clean exit, none on an exception or a
        stopping signal. File-system refusals become UserErrors with a fix."""
        fileset = atomic.FileSet()
        try:
            with fileset:
                yield fileset
        except OSError as err:
            raise from_os_error(err, "cannot write the output") from None


def write_json_to(files: atomic.FileSet, path: Path, data: Report | dict) -> None:
    """The report JSON (indent 1 keeps big reports small; no NaN)."""
    with files.open(path) as fh:
        json_indented.dump(data, fh)  # json.dump(indent=1, default=str, allow_nan=False), byte for byte, faster
        fh.write("\n")


@contextmanager
def _as_user_error(path: Path):
    if path.is_dir():
        raise UserError("is a directory, expected a file name", file=str(path),
                        fix="give the name of a file to write, not a folder")
    try:
        yield
    except OSError as err:
        raise from_os_error(err, "cannot write") from None


@contextmanager
def atomic_writer(path: Path):
    """A text file handle; the target appears only if the block finishes without an exception."""
    path = Path(path)
    with _as_user_error(path), atomic.atomic_file(path) as fh:
        yield fh


def write_text(path: Path, text: str) -> None:
    with atomic_writer(path) as fh:
        fh.write(text)
