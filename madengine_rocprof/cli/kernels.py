"""`madengine-rocprof kernels`: the kernel taxonomy (category, role, library) and the user's rules file.

kernels classify NAME... | --run RUN...   which category, role and library each kernel gets, and by which rule
kernels check FILE                        validate a rules file
kernels register FILE                     validate it and make it the default ($MADENGINE_ROCPROF_HOME)
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from madengine_rocprof import inputs
from madengine_rocprof.errors import UserError
from madengine_rocprof.reports import categories


def add_rules_option(parser: argparse.ArgumentParser) -> None:
    """`--kernel-rules FILE` for every command that classifies kernels."""
    parser.add_argument(
        "--kernel-rules",
        type=Path,
        metavar="FILE",
        help=f"kernel rules JSON tried before the built-in taxonomy (default: ${categories.RULES_ENV}, "
        f"else the registered one)",
    )


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "kernels",
        help="kernel taxonomy: classify kernel names, check or register a rules file",
        description="One taxonomy across AMD and NVIDIA: category, role and library per kernel.",
    )
    sub = parser.add_subparsers(dest="kernels_command", metavar="ACTION", required=True)
    classify = sub.add_parser("classify", help="category, role, library and matching rule of kernel names")
    classify.add_argument("names", nargs="*", metavar="NAME", help="kernel names")
    classify.add_argument(
        "--run", nargs="+", type=Path, default=[], metavar="RUN", help="classify every kernel of these runs"
    )
    classify.add_argument("--json", action="store_true", help="print JSON instead of a Markdown table")
    add_rules_option(classify)
    classify.set_defaults(func=_classify)
    check = sub.add_parser("check", help="validate a kernel rules file")
    check.add_argument("file", type=Path)
    check.set_defaults(func=_check)
    reg = sub.add_parser("register", help="validate a kernel rules file and make it the default")
    reg.add_argument("file", type=Path)
    reg.set_defaults(func=_register)


def _classify(args: argparse.Namespace) -> int:
    categories.configure(args.kernel_rules)
    names = list(args.names)
    if args.run:
        from madengine_rocprof.reports import load_runs
        from madengine_rocprof.reports.analysis import merge_kernels

        for run in load_runs(args.run):
            # the run's kernels by total time, longest first (ties by name): the same order every time
            merged = merge_kernels(run)
            ranked = sorted(merged, key=lambda n: (-merged[n].total_ns, n))
            seen = set(names)  # a set, not the list: a run may have 1M distinct kernel names
            names += [n for n in ranked if n not in seen]
    if not names:
        raise UserError("nothing to classify", where="kernels classify", fix="give kernel names or --run RUN")
    rows = [
        {
            "name": n,
            **{k: getattr(kind, k) for k in ("category", "role", "library", "rule")},
            "matched_on": categories.match_key(n),  # what the built-in rules saw: no return type, no parameters
        }
        for n, kind in zip(names, categories.classify_many(names), strict=True)
    ]
    if args.json:
        sys.stdout.write(json.dumps(rows, indent=1, allow_nan=False) + "\n")
        return 0
    from madengine_rocprof.reports.formatting import display_name
    from madengine_rocprof.reports.markdown import escape, table

    lines = table(
        ["kernel", "category", "role", "library", "rule"],
        [[display_name(r["name"]), r["category"], r["role"], r["library"], r["rule"] or "–"] for r in rows],
    )
    unknown = sum(r["category"] == categories.UNKNOWN for r in rows)
    lines.append(
        f"{len(rows)} kernels, {unknown} unknown"
        + (" (add rules: docs/reports.md, 'Kernel taxonomy')" if unknown else "")
    )
    sys.stdout.write(escape("\n".join(lines) + "\n"))
    return 0


def _check(args: argparse.Namespace) -> int:
    rules = categories.load_rules(args.file)
    print(f"{args.file}: {len(rules)} rule(s), valid")
    return 0


def _register(args: argparse.Namespace) -> int:
    from madengine_rocprof.atomic import atomic_write
    from madengine_rocprof.registry.store import user_home

    rules = categories.load_rules(args.file)
    target = user_home() / categories.RULES_FILE_NAME
    atomic_write(target, inputs.read_text(args.file, "kernel rules file"))
    print(f"registered {len(rules)} kernel rule(s): {target}")
    return 0
