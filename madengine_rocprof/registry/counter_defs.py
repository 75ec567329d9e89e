"""Which counters exist on which GPU architecture, what hardware events they need, and how many fit in one pass.

Source, in order: an explicit path, $ROCPROFILER_METRICS_PATH (file or directory), the installed ROCm's
<rocm>/share/rocprofiler-sdk/counter_defs.yaml ($ROCM_PATH, default /opt/rocm), else a small built-in table covering
the counters our shipped profiles use (written from rocprofv3.md facts; see `fallback_table`). Every result says
which source it used.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from madengine_rocprof.errors import UserError

# Per-pass hardware counter limits per block. gfx90a/gfx942: rocprofiler's documented limits.
# gfx11 (gfx1100..1102): no published table; we assume the same SQ/GRBM/TA limits as gfx9 and 4 for GL2C
# (the L2 cache block, like TCC on gfx9). Unknown blocks get UNKNOWN_BLOCK_LIMIT, the smallest limit above.
_GFX9_LIMITS = {
    "SQ": 8,
    "TA": 2,
    "TD": 2,
    "TCP": 4,
    "TCC": 4,
    "CPC": 2,
    "CPF": 2,
    "SPI": 6,
    "GRBM": 2,
    "GDS": 4,
    "TCA": 4,
}
_GFX11_LIMITS = {"SQ": 8, "TA": 2, "TD": 2, "GRBM": 2, "GL2C": 4, "GL1C": 4, "GCR": 2, "CPC": 2, "CPF": 2, "SPI": 6}
UNKNOWN_BLOCK_LIMIT = 2
_NOT_COUNTERS = {"reduce", "accumulate", "sum", "max", "min", "avr", "HIGH_RES", "LOW_RES", "NONE", "select", "concat"}
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def block_limits(arch: str) -> dict[str, int]:
    return dict(_GFX11_LIMITS if arch.startswith(("gfx10", "gfx11", "gfx12")) else _GFX9_LIMITS)


@dataclass(frozen=True)
class CounterDef:
    name: str
    block: str | None = None       # hardware counter: block and event
    expression: str | None = None  # derived counter: formula over other counters
    description: str = ""


@dataclass
class CounterCatalog:
    source: str  # where the definitions came from, for messages
    by_arch: dict[str, dict[str, CounterDef]] = field(default_factory=dict)
    complete: bool = True  # False for the built-in fallback table (it knows only some counters)

    def architectures(self) -> list[str]:
        return sorted(self.by_arch)

    def counters(self, arch: str) -> dict[str, CounterDef]:
        if arch not in self.by_arch:
            from madengine_rocprof.models._common import closest
            guess = closest(arch, self.by_arch)
            raise UserError(f"architecture {arch} is not in {self.source}",
                            fix=f"did you mean {guess}?" if guess else "known: " + " ".join(self.architectures()))
        return self.by_arch[arch]

    def hardware_events(self, name: str, arch: str) -> set[tuple[str, str]]:
        """(block, hardware counter) pairs a counter needs on `arch`; derived counters are expanded recursively."""
        defs = self.counters(arch)
        out: set[tuple[str, str]] = set()
        stack, seen = [name], set()
        while stack:
            current = stack.pop()
            if current in seen:
                continue
            seen.add(current)
            d = defs[current]
            if d.block:
                out.add((d.block, d.name))
            elif d.expression:
                stack += [t for t in _IDENT.findall(d.expression) if t in defs and t not in _NOT_COUNTERS]
        return out


FIX = "point ROCPROFILER_METRICS_PATH (or --counter-defs) at the counter_defs.yaml shipped with ROCm, unedited"
_TEXT = (str, None)
# What this module reads of rocprofiler-sdk's counter_defs.yaml (inputs.check_shape; other fields are not looked at)
SHAPE = {"rocprofiler-sdk": {"counters": [{
    "name": str, "description?": _TEXT,
    "definitions?": ([{"architectures?": ([str], None), "block?": _TEXT, "expression?": _TEXT}], None),
}]}}


def _load_yaml(text: str, source: str):
    """yaml.safe_load without anchors and aliases: rocprofiler-sdk's file has none, and a few aliases can stand for
    billions of entries (a walk over them never ends). Deep nesting is refused, not a RecursionError."""
    import yaml  # only needed when a real counter_defs.yaml is read

    class NoAliases(yaml.SafeLoader):
        def compose_node(self, parent, index):  # noqa: ANN001, ANN202 (PyYAML's signature)
            if self.check_event(yaml.AliasEvent):
                mark = self.peek_event().start_mark
                raise UserError("YAML aliases (*name) are not allowed in counter definitions", file=source,
                                line=mark.line + 1, column=mark.column + 1, fix=FIX)
            return super().compose_node(parent, index)

    try:
        return yaml.load(text, Loader=NoAliases)  # noqa: S506 (a SafeLoader)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        raise UserError(f"not valid YAML: {getattr(err, 'problem', None) or err}", file=source,
                        line=mark.line + 1 if mark else None, column=mark.column + 1 if mark else None,
                        fix=FIX) from None
    except RecursionError:
        raise UserError("YAML nested too deeply to read", file=source, fix=FIX) from None
    except ValueError as err:  # a number beyond Python's int/str conversion limit, and similar
        raise UserError(f"not valid YAML: {err}", file=source, fix=FIX) from None


def parse_counter_defs(text: str, source: str) -> CounterCatalog:
    from madengine_rocprof import inputs

    data = _load_yaml(text, source)
    inputs.check_shape(data, SHAPE, source, fix=FIX)
    catalog = CounterCatalog(source=source)
    for i, entry in enumerate(data["rocprofiler-sdk"]["counters"]):
        name = entry["name"]
        where = f"rocprofiler-sdk.counters[{i}]"
        if not _IDENT.fullmatch(name):
            raise UserError(f"counter name {name[:60]!r} is not an identifier", file=source, where=f"{where}.name",
                            fix=FIX)
        for j, d in enumerate(entry.get("definitions") or []):
            cdef = CounterDef(name, d.get("block"), d.get("expression"), entry.get("description") or "")
            for arch in d.get("architectures") or []:
                defs = catalog.by_arch.setdefault(arch, {})
                if name in defs and defs[name] != cdef:  # which one would rocprofv3 use?
                    raise UserError(f"counter {name} is defined twice for {arch}", file=source,
                                    where=f"{where}.definitions[{j}]", fix=FIX)
                defs[name] = cdef
    return catalog


def _fallback_catalog() -> CounterCatalog:
    catalog = CounterCatalog(source="built-in table (no ROCm counter_defs.yaml found)",
                             complete=False)
    for arch, table in fallback_table().items():
        defs: dict[str, CounterDef] = {}
        for name, events in table.items():
            if len(events) == 1 and events[0][1] == name:
                defs[name] = CounterDef(name, block=events[0][0])
            else:
                defs[name] = CounterDef(name, expression="+".join(e for _, e in events))
                for block, event in events:
                    defs.setdefault(event, CounterDef(event, block=block))
        catalog.by_arch[arch] = defs
    return catalog


def find_counter_defs() -> Path | None:
    """The counter_defs.yaml rocprofv3 would use here, or None."""
    env = os.environ.get("ROCPROFILER_METRICS_PATH")
    if env:
        p = Path(env)
        return p / "counter_defs.yaml" if p.is_dir() else p
    rocm = Path(os.environ.get("ROCM_PATH") or "/opt/rocm")
    candidate = rocm / "share" / "rocprofiler-sdk" / "counter_defs.yaml"
    return candidate if candidate.is_file() else None


_cache: dict[str, CounterCatalog] = {}


def load_catalog(path: str | os.PathLike[str] | None = None) -> CounterCatalog:
    """Counter definitions from `path`, else from the environment / installed ROCm, else the built-in table."""
    chosen = Path(path) if path is not None else find_counter_defs()
    if chosen is None:
        return _fallback_catalog()
    from madengine_rocprof import inputs

    inputs.check_regular(chosen, "counter_defs.yaml")  # before resolve(): a symlink loop is exit 2, not RuntimeError
    key = str(chosen.resolve())
    if key not in _cache:
        from madengine_rocprof.models._common import read_text_file
        _cache[key] = parse_counter_defs(read_text_file(chosen, "counter_defs.yaml"), str(chosen))
    return _cache[key]


def fallback_table() -> dict[str, dict[str, tuple[tuple[str, str], ...]]]:
    """arch -> counter -> hardware events (block, event name), for the counters the shipped profiles use."""
    return _FALLBACK


# Hardware counters present on gfx90a, gfx942 and gfx1100 under the same name (block, event name = counter name).
_COMMON_HW = {
    "GRBM": ("GRBM_COUNT", "GRBM_GUI_ACTIVE"),
    "SQ": ("SQ_WAVES", "SQ_WAVE_CYCLES", "SQ_BUSY_CYCLES", "SQ_INSTS_VALU", "SQ_INSTS_SALU", "SQ_INSTS_SMEM",
           "SQ_INSTS_LDS", "SQ_INSTS_FLAT", "SQ_INSTS_GDS", "SQ_INST_LEVEL_LDS", "SQ_WAIT_ANY", "SQ_WAIT_INST_ANY",
           "SQ_WAIT_INST_LDS"),
}
# Derived counters and the hardware events they expand to, per architecture.
Events = tuple[tuple[str, str], ...]  # (block, hardware event) pairs a counter expands to
_SHARED_DERIVED: dict[str, Events] = {
    "GPU_UTIL": (("GRBM", "GRBM_COUNT"), ("GRBM", "GRBM_GUI_ACTIVE")),
    "OccupancyPercent": (("GRBM", "GRBM_GUI_ACTIVE"), ("SQ", "SQ_WAVE_CYCLES")),
    "LdsLatency": (("SQ", "SQ_INSTS_LDS"), ("SQ", "SQ_INST_LEVEL_LDS")),
    "TA_BUSY_avr": (("TA", "TA_TA_BUSY"),),
}
_GFX9_DERIVED: dict[str, Events] = {
    "LDSBankConflict": (("GRBM", "GRBM_GUI_ACTIVE"), ("SQ", "SQ_LDS_BANK_CONFLICT")),
    "MeanOccupancyPerActiveCU": (("SQ", "SQ_BUSY_CU_CYCLES"), ("SQ", "SQ_LEVEL_WAVES")),
}
_DERIVED: dict[str, dict[str, Events]] = {
    "gfx90a": {**_GFX9_DERIVED,
               "FETCH_SIZE": (("TCC", "TCC_EA_RDREQ"), ("TCC", "TCC_EA_RDREQ_32B")),
               "WRITE_SIZE": (("TCC", "TCC_EA_WRREQ"), ("TCC", "TCC_EA_WRREQ_64B"))},
    "gfx942": {**_GFX9_DERIVED,
               "FETCH_SIZE": (("TCC", "TCC_BUBBLE"), ("TCC", "TCC_EA0_RDREQ"), ("TCC", "TCC_EA0_RDREQ_32B")),
               "WRITE_SIZE": (("TCC", "TCC_EA0_WRREQ"), ("TCC", "TCC_EA0_WRREQ_64B"))},
    "gfx1100": {"LDSBankConflict": (("SQ", "SQC_LDS_BANK_CONFLICT"), ("SQ", "SQC_LDS_IDX_ACTIVE")),
                "MeanOccupancyPerActiveCU": (("SQ", "SQ_BUSY_CYCLES"), ("SQ", "SQ_WAVE_CYCLES")),
                "FETCH_SIZE": tuple(("GL2C", f"GL2C_EA_RDREQ_{n}B") for n in (32, 64, 96, 128)),
                "WRITE_SIZE": (("GL2C", "GL2C_EA_WRREQ_64B"), ("GL2C", "GL2C_MC_WRREQ"))},
}
_FALLBACK: dict[str, dict[str, Events]] = {
    arch: {**{name: ((block, name),) for block, names in _COMMON_HW.items() for name in names},
           **_SHARED_DERIVED, **derived}
    for arch, derived in _DERIVED.items()
}
