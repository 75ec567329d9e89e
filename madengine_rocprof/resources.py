"""Where the shipped resources come from: the one place that decides.

Resources are the shipped profiling configs (+ schema), counter files, the wrapper script and the TinyTransformer
model repository (models.json, docker/, scripts/tinytransformer/). In a source checkout (editable install) they are
read from the checkout; an installed wheel carries a copy under madengine_rocprof/_resources/ (setup.py puts it
there) with the same layout. Standard library only: the wrapper bundle uses it too.
"""

from __future__ import annotations

from pathlib import Path

# Paths relative to the resource root; setup.py copies exactly these into the wheel.
RESOURCES = (
    "models.json",
    "profiling-configs",
    "counters",
    "docker",
    "scripts/rocprof_wrapper.sh",
    "scripts/tinytransformer",
)

PACKAGE_DIR = Path(__file__).resolve().parent
_CHECKOUT = PACKAGE_DIR.parent
_INSTALLED = PACKAGE_DIR / "_resources"


def _holds_resources(root: Path) -> bool:
    return (root / "models.json").is_file() and (root / "profiling-configs").is_dir()


ROOT = _CHECKOUT if _holds_resources(_CHECKOUT) else _INSTALLED
SOURCE = "checkout" if ROOT == _CHECKOUT else "installed package"
CONFIGS_DIR = ROOT / "profiling-configs"
COUNTERS_DIR = ROOT / "counters"
SCHEMA = CONFIGS_DIR / "schema.json"
WRAPPER_SCRIPT = ROOT / "scripts" / "rocprof_wrapper.sh"


def shipped_configs() -> list[Path]:
    return sorted(p for p in CONFIGS_DIR.glob("*.json") if p.name != "schema.json")


def path_or_shipped(arg: str) -> str:
    """`arg` when it exists as given, else the shipped file of that name, else `arg` (the caller reports it); a name
    that is neither but looks like a shipped one is refused with "did you mean" (a UserError)."""
    if Path(arg).exists():
        return arg
    found = shipped_file(arg)
    if found:
        return str(found)
    guess = closest_shipped(arg)
    if guess:
        from madengine_rocprof.errors import UserError  # lazily: setup.py loads this module alone

        raise UserError(f"no file and no shipped config or counter file named {arg!r}", file=arg,
                        fix=f"did you mean '{guess}'? (`madengine-rocprof paths` shows where the shipped ones are)")
    return arg


def closest_shipped(arg: str) -> str | None:
    """The shipped config or counter file name most like `arg` (a bare name, with or without its suffix), or None."""
    import difflib

    if "/" in arg:
        return None
    names = [p.stem for p in shipped_configs()] + [p.stem for p in sorted(COUNTERS_DIR.glob("*.txt"))]
    stem = arg[: -len(".json")] if arg.endswith(".json") else arg[: -len(".txt")] if arg.endswith(".txt") else arg
    match = difflib.get_close_matches(stem, names, n=1, cutoff=0.75)
    return match[0] if match else None


def shipped_file(arg: str) -> Path | None:
    """A shipped config or counter file named without its folder ('rocprofv3_lightweight', 'compute_bound.txt')."""
    if "/" in arg:
        return None
    for folder, suffix in ((CONFIGS_DIR, ".json"), (COUNTERS_DIR, ".txt")):
        for name in (arg, arg + suffix):
            if (folder / name).is_file():
                return folder / name
    return None
