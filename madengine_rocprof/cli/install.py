"""`madengine-rocprof install --madengine [DIR]`: register our tools, counter files and the wrapper in madengine.

DIR is madengine's source tree or installed package (the folder holding scripts/common/tools.json). Without it,
madengine is found the way users have it: the Python given by --madengine-python, this Python, or the Python behind
the `madengine` command on PATH (madengine usually lives in its own venv). madengine copies that package's
scripts/common into every run, so what is installed there is what its runs use. tools.json is backed up before it is
changed, and every file is written atomically, so a failure leaves madengine as it was.
"""
from __future__ import annotations

import datetime as dt
import json
import shutil
import subprocess
import sys
from pathlib import Path

from madengine_rocprof.errors import UserError


def register(subparsers) -> None:
    p = subparsers.add_parser("install", help="register our tools, counters and wrapper into an installed madengine")
    p.add_argument("--madengine", nargs="?", const="", metavar="DIR", required=True,
                   help="madengine's directory (default: the installed madengine package)")
    p.add_argument("--madengine-python", metavar="PYTHON",
                   help="the Python of madengine's venv "
                        "(default: this Python, then the one behind `madengine` on PATH)")
    p.add_argument("--dry-run", action="store_true", help="say what would change, change nothing")
    p.set_defaults(func=run)


_LOCATE = "import os, madengine; print(os.path.dirname(os.path.abspath(madengine.__file__)))"


def _package_of(python: str) -> Path | None:
    """madengine's package folder as `python` imports it (None when it cannot)."""
    try:
        out = subprocess.run([python, "-c", _LOCATE], capture_output=True, text=True, timeout=120, cwd="/")
    except (OSError, subprocess.TimeoutExpired):
        return None
    return Path(out.stdout.strip()) if out.returncode == 0 and out.stdout.strip() else None


def _python_behind_command(name: str = "madengine") -> str | None:
    """The interpreter on the `#!` line of the `madengine` console script on PATH."""
    script = shutil.which(name)
    if not script:
        return None
    try:
        with open(script, "rb") as fh:
            first = fh.readline().decode("utf-8", "replace").strip()
    except OSError:
        return None
    if not first.startswith("#!"):
        return None
    words = first[2:].split()
    if words and words[0].endswith("/env") and len(words) > 1:
        return shutil.which(words[1])
    return words[0] if words else None


def find_madengine(given: str, python: str | None = None) -> Path:
    candidates = []
    if given:
        root = Path(given).expanduser().resolve()
        candidates = [root, root / "src" / "madengine", root / "madengine"]
    else:
        tried = [python] if python else [p for p in (sys.executable, _python_behind_command()) if p]
        found = next((p for p in map(_package_of, tried) if p), None)
        if found is None:
            where = "--madengine-python" if python else "--madengine"
            no_command = "" if python or len(tried) > 1 else " (no `madengine` command on PATH)"
            raise UserError(f"madengine is not importable by {' nor '.join(tried)}{no_command}", where=where,
                            fix="activate madengine's venv, or pass --madengine-python "
                                "/path/to/madengine-venv/bin/python, or --madengine /path/to/madengine "
                                "(its source tree or package folder)")
        candidates = [found]
    for c in candidates:
        if (c / "scripts" / "common" / "tools.json").is_file():
            return c
    raise UserError("no scripts/common/tools.json found", file=str(candidates[0]), where="--madengine",
                    fix="point --madengine at madengine's package folder (the one with scripts/common/tools.json)")


def run(args) -> int:
    from madengine_rocprof.atomic import atomic_write
    from madengine_rocprof.cli.export_tools import build_tools_json
    from madengine_rocprof.models._common import load_json, read_text_file
    from madengine_rocprof.models.tool import DEFAULT_COUNTERS_DIR, DEFAULT_WRAPPER
    from madengine_rocprof.registry import counter_profile_path, list_counter_profiles
    from madengine_rocprof.wrapper import bundle

    root = find_madengine(args.madengine, args.madengine_python)
    tools_json = root / "scripts" / "common" / "tools.json"
    tools_dir = root / "scripts" / "common" / "tools"
    current = load_json(read_text_file(tools_json, "madengine tools.json"), str(tools_json))
    if not isinstance(current, dict) or not isinstance(current.get("tools"), dict):
        raise UserError("expected {\"tools\": {...}}", file=str(tools_json), where="tools")
    ours = build_tools_json(None, DEFAULT_WRAPPER, DEFAULT_COUNTERS_DIR)["tools"]
    replaced = sorted(set(ours) & set(current["tools"]))
    counters = [counter_profile_path(p.name) for p in list_counter_profiles()]
    print(f"madengine: {root}")
    print(f"tools.json: {len(ours)} tools ({len(replaced)} replace upstream entries: {', '.join(replaced) or 'none'})")
    print(f"wrapper: {tools_dir / bundle.SCRIPT_NAME} + {bundle.PYZ_NAME}; counters: {len(counters)} files")
    if args.dry_run:
        return 0
    stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    backup = tools_json.with_name(f"tools.json.bak-{stamp}")
    n = 1
    while backup.exists():  # a second install in the same second must not overwrite the first backup
        n += 1
        backup = tools_json.with_name(f"tools.json.bak-{stamp}-{n}")
    shutil.copy2(tools_json, backup)
    try:
        bundle.install_into(str(tools_dir))
        counter_dir = tools_dir / "counters"
        counter_dir.mkdir(parents=True, exist_ok=True)
        for path in counters:
            atomic_write(counter_dir / Path(path).name, Path(path).read_text(encoding="utf-8"))
        merged = {**current, "tools": {**current["tools"], **ours}}
        atomic_write(tools_json, json.dumps(merged, indent=2, allow_nan=False) + "\n")
    except BaseException:
        backup.unlink(missing_ok=True)  # tools.json was not replaced: its backup is no backup of anything
        raise
    print(f"installed; backup of the previous tools.json: {backup}")
    print(f"undo: cp {backup} {tools_json}")
    return 0
