"""`madengine-rocprof counters list | check FILE --arch gfxNNN | register FILE`."""
from __future__ import annotations

from pathlib import Path

from madengine_rocprof.errors import UserError, UserErrors
from madengine_rocprof.registry import (
    check_counters,
    counter_profile_path,
    list_counter_profiles,
    load_catalog,
    load_counter_file,
    pack_counters,
    register_counter_profile,
)


def register(subparsers) -> None:
    p = subparsers.add_parser("counters", help="list, check and register counter files (rocprofv3 pmc: format)")
    sub = p.add_subparsers(dest="counters_command", metavar="ACTION", required=True)
    lst = sub.add_parser("list", help="built-in and user counter profiles with their pass counts")
    lst.set_defaults(func=run_list)
    chk = sub.add_parser(
        "check", help="check a counter file (or profile name) for an architecture; prints the re-run cost"
    )
    chk.add_argument("file", help="a .txt counter file, or the name of a registered profile")
    _arch_options(chk)
    chk.add_argument("--pack", action="store_true", help="print the fewest-pass packing of the file's counters")
    chk.set_defaults(func=run_check)
    reg = sub.add_parser("register", help="check a counter file and add it to your registry ($MADENGINE_ROCPROF_HOME)")
    reg.add_argument("file")
    _arch_options(reg)
    reg.set_defaults(func=run_register)


def _arch_options(p) -> None:
    p.add_argument("--arch", action="append", metavar="gfxNNN",
                   help="target architecture (repeatable; default: the file's '# architectures:' line)")
    p.add_argument(
        "--counter-defs",
        metavar="YAML",
        help="counter_defs.yaml to check against (default: $ROCPROFILER_METRICS_PATH, then the installed ROCm)",
    )


def run_list(args) -> int:
    profiles = list_counter_profiles()
    width = max((len(p.name) for p in profiles), default=4)
    print(f"{'NAME':<{width}}  PASSES  ARCHITECTURES            DESCRIPTION")
    for p in profiles:
        print(f"{p.name:<{width}}  {len(p.passes):<6}  {' '.join(p.architectures):<24} {p.description}")
    return 0


def _resolve_file(arg: str) -> Path:
    path = Path(arg)
    if path.exists() or "/" in arg or arg.endswith(".txt"):
        return path
    return counter_profile_path(arg)


def check_file(path: Path, archs: list[str] | None, counter_defs: str | None, pack: bool = False) -> list[str]:
    """Check a counter file for each arch; returns report lines, raises UserError(s) on problems."""
    profile, lines_of = load_counter_file(path)
    targets = archs or profile.architectures
    if not targets:
        raise UserError("no architecture to check against", file=str(path),
                        fix="pass --arch gfxNNN or add a line '# architectures: gfx90a gfx942' to the file")
    catalog = load_catalog(counter_defs)
    lines, errors = [], []
    for arch in targets:
        try:
            result = check_counters(profile, arch, catalog, lines_of, str(path))
        except UserErrors as err:
            errors += err.errors
            continue
        except UserError as err:
            err.file = err.file or str(path)
            errors.append(err)
            continue
        lines.append(result.summary())
    if errors:
        raise UserErrors(errors)
    packed = pack_counters(catalog, profile.counters, targets)
    if pack or len(packed) < len(profile.passes):
        lines.append(
            f"fewest passes valid on {' '.join(targets)}: {len(packed)}"
            + (
                f" (this file uses {len(profile.passes)}; these lines save re-runs)"
                if len(packed) < len(profile.passes)
                else ""
            )
        )
        lines += ["pmc: " + " ".join(g) for g in packed]
    return lines


def run_check(args) -> int:
    for line in check_file(_resolve_file(args.file), args.arch, args.counter_defs, args.pack):
        print(line)
    return 0


def run_register(args) -> int:
    catalog = load_catalog(args.counter_defs)
    profile, _ = load_counter_file(args.file)
    if not (args.arch or profile.architectures):
        raise UserError("no architecture to check against", file=args.file,
                        fix="pass --arch gfxNNN or add a line '# architectures: gfx90a gfx942' to the file")
    target = register_counter_profile(args.file, args.arch, catalog)
    print(f"registered counter profile '{profile.name}' ({len(profile.passes)} passes) as {target}")
    return 0
