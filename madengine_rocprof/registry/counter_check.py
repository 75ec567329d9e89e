"""Check a counter profile against an architecture and pack counters into the fewest passes.

A pass fits when, for every hardware block, the distinct hardware events its counters need (derived counters
expanded) stay within the block's per-pass limit. Each pass costs one run of the workload.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from madengine_rocprof.errors import UserError, UserErrors
from madengine_rocprof.models._common import closest
from madengine_rocprof.models.counters import CounterProfile
from madengine_rocprof.registry.counter_defs import UNKNOWN_BLOCK_LIMIT, CounterCatalog, block_limits


@dataclass
class CounterCheck:
    profile: CounterProfile
    arch: str
    source: str
    usage: list[dict[str, int]]  # per pass: block -> distinct hardware events
    minimal: list[list[str]]  # the fewest passes this file's counters fit in on this arch

    @property
    def passes(self) -> int:
        return len(self.profile.passes)

    def summary(self) -> str:
        plural = self.passes != 1
        runs = (f"{self.passes} pass{'es' if plural else ''}: costs {self.passes} re-run{'s' if plural else ''} "
                "of the workload")
        text = (f"{self.profile.name} on {self.arch}: OK, {len(self.profile.counters)} counters in {runs} "
                f"(counters from {self.source})")
        return text


def _events(catalog: CounterCatalog, counters: list[str], arch: str) -> set[tuple[str, str]]:
    out: set[tuple[str, str]] = set()
    for c in counters:
        out |= catalog.hardware_events(c, arch)
    return out


def _over_limit(events: set[tuple[str, str]], arch: str) -> dict[str, tuple[int, int]]:
    limits = block_limits(arch)
    per_block = Counter(block for block, _ in events)
    return {
        b: (n, limits.get(b, UNKNOWN_BLOCK_LIMIT))
        for b, n in per_block.items()
        if n > limits.get(b, UNKNOWN_BLOCK_LIMIT)
    }


def fits(catalog: CounterCatalog, counters: list[str], archs: list[str]) -> bool:
    return all(not _over_limit(_events(catalog, counters, a), a) for a in archs)


def pack_counters(catalog: CounterCatalog, counters: list[str], archs: list[str]) -> list[list[str]]:
    """Greedy first-fit, biggest counters first: passes valid on every arch in `archs`."""
    size = {c: max(len(catalog.hardware_events(c, a)) for a in archs) for c in counters}
    passes: list[list[str]] = []
    for c in sorted(counters, key=lambda c: -size[c]):
        for group in passes:
            if fits(catalog, group + [c], archs):
                group.append(c)
                break
        else:
            passes.append([c])
    # Keep the caller's order inside each pass, so files read naturally.
    order = {c: i for i, c in enumerate(counters)}
    return [sorted(g, key=order.__getitem__) for g in passes]


def check_known_somewhere(profile: CounterProfile, catalog: CounterCatalog, lines_of: dict[str, int] | None = None,
                          file: str | None = None) -> list[str]:
    """With no target architecture: every counter must exist on at least one architecture of the catalog.

    Returns the architectures on which all of them exist; raises UserErrors naming every unknown counter."""
    known = {name for defs in catalog.by_arch.values() for name in defs}
    lines_of = lines_of or {}
    errors = []
    for c in profile.counters:
        if c not in known:
            guess = closest(c, known)
            if not catalog.complete:
                fix = "install ROCm or set ROCPROFILER_METRICS_PATH to a counter_defs.yaml so all counters are known"
            else:
                fix = f"did you mean {guess}?" if guess else "list them with: rocprofv3 --list-avail"
            errors.append(UserError(f"counter {c} is unknown on every architecture in {catalog.source} "
                                    "(rocprofv3 would only warn and silently drop it)",
                                    file=file, line=lines_of.get(c), fix=fix))
    if errors:
        raise UserErrors(errors)
    return [a for a in catalog.architectures() if set(profile.counters) <= catalog.by_arch[a].keys()]


def check_counters(profile: CounterProfile, arch: str, catalog: CounterCatalog,
                   lines_of: dict[str, int] | None = None, file: str | None = None) -> CounterCheck:
    """Every counter exists on `arch` and every pass fits; raises UserErrors listing all problems."""
    known = catalog.counters(arch)
    lines_of = lines_of or {}
    errors: list[UserError] = []
    for c in profile.counters:
        if c not in known:
            guess = closest(c, known)
            where_from = "rocprofv3 would only warn and silently drop it"
            hint = f"did you mean {guess}? " if guess else ""
            if not catalog.complete:
                fix = hint + ("or install ROCm or set ROCPROFILER_METRICS_PATH to a counter_defs.yaml so all "
                              "counters are known" if hint else "install ROCm or set ROCPROFILER_METRICS_PATH to a "
                              "counter_defs.yaml so all counters are known")
            else:
                fix = hint + "list them with: rocprofv3 --list-avail"
            errors.append(UserError(f"counter {c} does not exist on {arch} in {catalog.source} ({where_from})",
                                    file=file, line=lines_of.get(c), fix=fix))
    if errors:
        raise UserErrors(errors)
    usage = []
    for i, group in enumerate(profile.passes, start=1):
        events = _events(catalog, group, arch)
        for block, (n, limit) in sorted(_over_limit(events, arch).items()):
            names = sorted(e for b, e in events if b == block)
            errors.append(
                UserError(
                    f"pass {i} needs {n} {block} hardware counters on {arch} ({', '.join(names)}) but one pass allows "
                    f"{limit}: "
                    f"rocprofv3 fails with 'Request exceeds the capabilities of the hardware'",
                    file=file,
                    line=lines_of.get(group[0]),
                    fix="split the line; `madengine-rocprof counters check FILE --arch ARCH --pack` prints a valid "
                        "packing",
                )
            )
        usage.append(dict(Counter(b for b, _ in events)))
    if errors:
        raise UserErrors(errors)
    return CounterCheck(profile, arch, catalog.source, usage, pack_counters(catalog, profile.counters, [arch]))
