"""`madengine-rocprof install --madengine [DIR]`: register our tools, counter files and the wrapper in madengine.

DIR is madengine's source tree or installed package (the folder holding scripts/common/tools.json); without it the
installed `madengine` Python package is used. tools.json is backed up before it is changed, and every file is
written atomically, so a failure leaves madengine as it was.
"""
from __future__ import annotations

import datetime as dt
import json
import shutil
from pathlib import Path

from madengine_rocprof.errors import UserError


def register(subparsers) -> None:
    p = subparsers.add_parser("install", help="register our tools, counters and wrapper into an installed madengine")
    p.add_argument("--madengine", nargs="?", const="", metavar="DIR", required=True,
                   help="madengine's directory (default: the installed madengine package)")
    p.add_argument("--dry-run", action="store_true", help="say what would change, change nothing")
    p.set_defaults(func=run)


def find_madengine(given: str) -> Path:
    candidates = []
    if given:
        root = Path(given).expanduser().resolve()
        candidates = [root, root / "src" / "madengine", root / "madengine"]
    else:
        try:
            import madengine  # noqa: F401  (only to find where it lives)
        except ImportError:
            raise UserError(
                "madengine is not installed in this Python environment",
                where="--madengine",
                fix="pass its directory: madengine-rocprof install --madengine /path/to/madengine",
            ) from None
        candidates = [Path(madengine.__file__).resolve().parent]
    for c in candidates:
        if (c / "scripts" / "common" / "tools.json").is_file():
            return c
    raise UserError("no scripts/common/tools.json found", file=str(candidates[0]), where="--madengine",
                    fix="point --madengine at madengine's package folder (the one with scripts/common/tools.json)")


def run(args) -> int:
    from madengine_rocprof.atomic import atomic_write
    from madengine_rocprof.cli.export_tools import build_tools_json
    from madengine_rocprof.models.tool import DEFAULT_COUNTERS_DIR, DEFAULT_WRAPPER
    from madengine_rocprof.registry import counter_profile_path, list_counter_profiles
    from madengine_rocprof.wrapper import bundle

    root = find_madengine(args.madengine)
    tools_json = root / "scripts" / "common" / "tools.json"
    tools_dir = root / "scripts" / "common" / "tools"
    try:
        current = json.loads(tools_json.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise UserError(f"not valid JSON: {exc.msg}", file=str(tools_json), line=exc.lineno, column=exc.colno) from None
    if not isinstance(current.get("tools"), dict):
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
    bundle.install_into(str(tools_dir))
    counter_dir = tools_dir / "counters"
    counter_dir.mkdir(parents=True, exist_ok=True)
    for path in counters:
        atomic_write(counter_dir / Path(path).name, Path(path).read_text(encoding="utf-8"))
    merged = {**current, "tools": {**current["tools"], **ours}}
    atomic_write(tools_json, json.dumps(merged, indent=2) + "\n")
    print(f"installed; backup of the previous tools.json: {backup}")
    print(f"undo: cp {backup} {tools_json}")
    return 0
