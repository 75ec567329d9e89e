"""`madengine-rocprof` command line: a thin dispatcher.

Each subcommand lives in its own module under this package and exposes
`register(subparsers)`, which adds its parser and sets `func(args) -> int`.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import importlib
import os
import signal
import sqlite3
import sys
import threading
from pathlib import Path

from madengine_rocprof import __version__
from madengine_rocprof.errors import EXIT_INVALID, UserError, from_os_error, too_deep

# Module names under madengine_rocprof.cli, in the order `--help` lists them.
SUBCOMMANDS: tuple[str, ...] = (
    "validate",
    "tools",
    "counters",
    "schema",
    "export_tools",
    "report",
    "compare",
    "kernels",
    "run",
    "escalate",
    "wrap",
    "doctor",
    "install",
    "paths",
)


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """All subcommands, or only `command`'s when it names one (so `report` starts without importing pydantic)."""
    parser = argparse.ArgumentParser(
        prog="madengine-rocprof",
        description="One-command GPU profiling of AI workloads, in madengine's formats.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    chosen = (command or "").replace("-", "_")
    for name in (chosen,) if chosen in SUBCOMMANDS else SUBCOMMANDS:
        importlib.import_module(f"{__name__}.{name}").register(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    """The exit code of one command line (argparse's own exits, a bad option value or --help, returned too)."""
    argv = sys.argv[1:] if argv is None else argv
    parser = build_parser(argv[0] if argv else None)
    try:
        args, extra = parser.parse_known_args(argv)
        if extra and getattr(args, "func", None) and not getattr(args, "accepts_extra", False):
            parser.error(f"unrecognized arguments: {' '.join(extra)}")
    except SystemExit as stop:  # usage errors (a bad number included) are exit 2 before anything runs
        return stop.code if isinstance(stop.code, int) else EXIT_INVALID
    if not getattr(args, "func", None):
        parser.print_help(sys.stderr)
        return 2
    if getattr(args, "accepts_extra", False):
        args.extra = extra
    return dispatch(args)


# Exit codes, the same for every command (docs/architecture.md, "Exit codes")
EXIT_OK = 0
EXIT_VERDICT = 1  # the command ran and its answer is "no": a regression, a failed run
# EXIT_INVALID = 2 (errors.py): bad input, with the file, the place and the fix; also an internal error (below)

# Marks the message of an unexpected exception. Tests assert that no input ever reaches it: every failure the
# project knows about is a UserError with a fix.
BUG_MARK = "internal error (a bug in madengine-rocprof)"


def _internal_error(err: BaseException) -> int:
    import traceback

    frame = traceback.extract_tb(err.__traceback__)[-1] if err.__traceback__ else None
    place = f" at {Path(frame.filename).name}:{frame.lineno}" if frame else ""
    print(f"error: {BUG_MARK}: {type(err).__name__}: {str(err)[:300]}{place}\n"
          "  fix: please report it with the command line and the input files (set MADENGINE_ROCPROF_TRACEBACK=1 "
          "for the full traceback); the command stopped where it was: check the files it was writing",
          file=sys.stderr)
    if os.environ.get("MADENGINE_ROCPROF_TRACEBACK"):
        traceback.print_exception(err, file=sys.stderr)
    return EXIT_INVALID


@contextlib.contextmanager
def _stopping_signals_raise():
    """SIGTERM and SIGHUP raise, as SIGINT does (KeyboardInterrupt), instead of ending the process where it stands:
    the clean-up of every `with` runs, so a write in progress leaves no temporary file. `run` installs its own."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    from madengine_rocprof.runner.stopping import Interrupted

    def _raise(signum, _frame):
        raise Interrupted(signum)

    previous = {sig: signal.signal(sig, _raise) for sig in (signal.SIGTERM, signal.SIGHUP)
                if signal.getsignal(sig) is not signal.SIG_IGN}  # nohup: an ignored SIGHUP stays ignored
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def dispatch(args: argparse.Namespace) -> int:
    """Every command's one exit path: bad input and file-system refusals give the standard message, never a
    traceback; a stopping signal gives the shell's 128 + signal number; anything unexpected is exit 2 with
    BUG_MARK and a bug-report hint (so CI never mistakes a crash for a verdict, exit 1)."""
    try:
        try:
            with _stopping_signals_raise():
                return int(args.func(args) or 0)
        except OSError as err:
            raise from_os_error(err) from None
        except RecursionError:
            raise too_deep() from None
        except (UnicodeError, csv.Error, sqlite3.DatabaseError) as err:
            raise UserError(f"unreadable input: {err}", fix="check that the right file was given") from None
    except UserError as err:
        print(f"error: {err}", file=sys.stderr)
        return err.exit_code
    except KeyboardInterrupt as err:
        code = getattr(err, "exit_code", 130)
        print(f"interrupted ({err})" if str(err) else "interrupted", file=sys.stderr)
        return int(code)
    except Exception as err:  # noqa: BLE001 - the one place that turns a bug into a message and exit 2
        return _internal_error(err)
