"""A profiling tool as data: what to trace, which counters, which formats; renders to madengine's tools.json entry.

The rendered command uses rocprofv3's option vocabulary. Our wrapper (scripts/rocprof_wrapper.sh) translates it for
legacy rocprof, NVIDIA ncu/nsys or the embedded tracer, and fills in -d/-o/--output-format when they are missing.
The profile (which NVIDIA metric set matches the tool) goes on the wrapper's own command line as `--profile NAME`,
never into env_vars: madengine merges every tool's env_vars into one environment, so a chained tool or a sampler
would overwrite it.
"""
from __future__ import annotations

import difflib
import re
import shlex
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, StrictStr, field_validator, model_validator

from madengine_rocprof.inputs import bounded
from madengine_rocprof.wrapper.planner import AMD_ONLY_PROFILES, ENV_PROFILE, PROFILE_KINDS, known_profile

PROFILE_ENV = ENV_PROFILE  # the wrapper reads it as a user override; tools never set it

DEFAULT_WRAPPER = "bash ../scripts/common/tools/rocprof_wrapper.sh"
DEFAULT_COUNTERS_DIR = "../scripts/common/tools/counters"
# madengine's stock post-script for its profiler tools: copies ./rocprof_output from the run directory (which
# madengine deletes after the run) to the workspace root. Every rendered profiler entry keeps it.
MADENGINE_TRACE_POST_SCRIPT = {"path": "scripts/common/post_scripts/trace.sh", "args": "rocprof"}

# rocprofv3 trace domains; each renders as --<name with '-'>-trace.
TraceDomain = Literal[
    "runtime",
    "sys",
    "hip",
    "hip_runtime",
    "hip_compiler",
    "marker",
    "kernel",
    "memory_copy",
    "memory_allocation",
    "scratch_memory",
    "hsa",
    "hsa_core",
    "hsa_amd",
    "hsa_image",
    "hsa_finalizer",
    "rccl",
    "kokkos",
    "rocdecode",
    "rocjpeg",
]
OutputFormat = Literal["csv", "json", "pftrace", "otf2", "rocpd"]
Vendor = Literal["AMD", "NVIDIA"]
NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]*$"
ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def _csv_only() -> list[OutputFormat]:
    return ["csv"]


def _both_vendors() -> list[Vendor]:
    return ["AMD", "NVIDIA"]


def check_env_names(env: dict[str, str]) -> dict[str, str]:
    for key in env:
        if not ENV_NAME.match(key):
            raise ValueError(
                f"'{key}' is not a valid environment variable name (fix: use letters, digits and _, not starting with "
                "a digit)"
            )
    return env


class ScriptRef(BaseModel):
    """A madengine pre/post script: run as `bash <basename of path> <args>` in the model directory."""

    model_config = ConfigDict(extra="forbid")
    path: StrictStr = Field(min_length=1)
    args: StrictStr = ""


class PcSampling(BaseModel):
    """rocprofv3 PC sampling. Only the pairs the hardware supports: host_trap+time (gfx90a+, interval in us)
    and stochastic+cycles (gfx942+, interval a power of two >= 256)."""

    model_config = ConfigDict(extra="forbid")
    method: Literal["host_trap", "stochastic"] = "host_trap"
    unit: Literal["time", "cycles", "instructions"] = "time"
    interval: int = Field(default=1000, gt=0, strict=True)

    @model_validator(mode="after")
    def _valid_pair(self) -> PcSampling:
        if self.method == "host_trap" and self.unit != "time":
            raise ValueError(
                f"pc_sampling method host_trap needs unit 'time', got '{self.unit}' (fix: set \"unit\": \"time\" "
                "(interval in microseconds))"
            )
        if self.method == "stochastic":
            if self.unit != "cycles":
                raise ValueError(
                    f"pc_sampling method stochastic needs unit 'cycles', got '{self.unit}' (fix: set \"unit\": "
                    "\"cycles\" and a power-of-two interval such as 1048576)"
                )
            if self.interval < 256 or self.interval & (self.interval - 1):
                raise ValueError(
                    f"stochastic pc_sampling interval must be a power of two >= 256, got {self.interval} (fix: use "
                    "e.g. 65536 or 1048576)"
                )
        return self

    def args(self) -> list[str]:
        return ["--pc-sampling-beta-enabled", "--pc-sampling-unit", self.unit,
                "--pc-sampling-method", self.method, "--pc-sampling-interval", str(self.interval)]


class ToolDefinition(BaseModel):
    """One profiling tool. `profiler` says who does the work: the rocprofv3-vocabulary wrapper, or a background
    sampler (power/VRAM) that adds no command and is driven by env vars and pre/post scripts."""

    model_config = ConfigDict(extra="forbid")

    name: StrictStr = Field(pattern=NAME_PATTERN, description="tool name used in a context's tools[].name")
    description: StrictStr = ""
    profiler: Literal["rocprofv3", "sampler"] = "rocprofv3"
    core_profile: StrictStr | None = Field(
        default=None,
        description="core profile the wrapper maps to NVIDIA metric sets and the embedded tracer; defaults to the "
        "tool name when that is a known profile, else to what the tool collects (trace only: lightweight; "
        "required for a counter tool that targets NVIDIA)",
    )
    trace: list[TraceDomain] = Field(
        default_factory=list, description="rocprofv3 trace domains, e.g. kernel, hip, memory_copy"
    )
    counters: StrictStr | None = Field(
        default=None, pattern=NAME_PATTERN, description="counter profile name (a counters/<name>.txt file)"
    )
    output_formats: list[OutputFormat] = Field(default_factory=_csv_only, description="csv is always included")
    output_directory: StrictStr = "./rocprof_output"
    output_file: StrictStr | None = Field(
        default="%hostname%/%pid%",
        description="rocprofv3 -o template; must contain %pid% or %rank% so processes never overwrite each other",
    )
    stats: bool = False
    summary: bool = False
    truncate_kernels: bool = False
    kernel_include_regex: StrictStr | None = None
    kernel_exclude_regex: StrictStr | None = None
    pc_sampling: PcSampling | None = None
    extra_args: list[StrictStr] = Field(default_factory=list, description="further rocprofv3 options, passed as given")
    env_vars: dict[str, StrictStr] = Field(default_factory=dict)
    pre_scripts: list[ScriptRef] = Field(default_factory=list)
    post_scripts: list[ScriptRef] = Field(default_factory=list)
    overhead: Literal["none", "low", "medium", "high"] = "low"
    vendors: list[Vendor] = Field(default_factory=_both_vendors, min_length=1)

    _check_env = field_validator("env_vars")(check_env_names)

    @field_validator("output_formats")
    @classmethod
    def _csv_first(cls, formats: list[str]) -> list[str]:
        # csv always: every reader and the --stats files need it; keep order, drop duplicates.
        out = ["csv"]
        for f in formats:
            if f not in out:
                out.append(f)
        return out

    @field_validator("extra_args")
    @classmethod
    def _no_separator(cls, args: list[str]) -> list[str]:
        for a in args:
            if a == "--":
                raise ValueError(
                    "extra_args must not contain '--' (fix: remove it; the entry adds the trailing '--' itself)"
                )
            if a == "--profile" or a.startswith("--profile="):
                # The entry renders --profile itself; a second one would disagree with core_profile.
                raise ValueError("extra_args must not contain --profile (fix: set \"core_profile\" instead)")
        return args

    @field_validator("kernel_include_regex", "kernel_exclude_regex")
    @classmethod
    def _compiles(cls, value: str | None) -> str | None:
        """The profiler compiles the filter when the workload starts (rocprofv3: C++ std::regex, ECMAScript; ncu:
        `regex:`); a pattern no regex engine accepts is refused here, by `validate` and `tools register`, instead of
        failing the run. Python's `re` accepts the syntax those engines share (lookahead included)."""
        if value is None:
            return value
        try:
            re.compile(value)
        except (re.error, RecursionError, OverflowError) as err:
            raise ValueError(f"{bounded(value, 80)!r} is not a regular expression: {getattr(err, 'msg', err)} "
                             "(fix: escape ( ) [ ] { } . * + ? | \\ ^ $ with a backslash to match them literally)") \
                from None
        return value

    @field_validator("output_file")
    @classmethod
    def _per_process(cls, value: str | None) -> str | None:
        if value is not None and "%pid%" not in value and "%rank%" not in value:
            raise ValueError(
                f"output_file '{value}' is one fixed name: every process would overwrite it (fix: include %pid% or "
                "%rank%, e.g. \"%hostname%/%pid%\")"
            )
        return value

    @model_validator(mode="after")
    def _consistent(self) -> ToolDefinition:
        if self.profiler == "sampler":
            used = [
                k for k in ("trace", "counters", "pc_sampling", "extra_args", "stats", "summary") if getattr(self, k)
            ]
            if used:
                raise ValueError(f"a sampler tool adds no profiler command, so {', '.join(used)} cannot be used "
                                 "(fix: set \"profiler\": \"rocprofv3\" or remove them)")
        else:
            if not (self.trace or self.counters or self.pc_sampling):
                raise ValueError(
                    'a rocprofv3 tool needs something to collect (fix: add "trace": ["kernel"], a "counters" profile '
                    'or "pc_sampling")'
                )
            if self.stats and not self.trace:
                raise ValueError(
                    'stats needs at least one trace domain: rocprofv3 refuses --stats without tracing (fix: add '
                    '"trace": ["kernel"])'
                )
        if self.pc_sampling and "rocpd" in self.output_formats:
            raise ValueError("PC-sampling output cannot be written as rocpd (fix: use csv and/or json)")
        return self

    def profile_problem(self) -> tuple[str, str] | None:
        """What `run` will need, checked before it runs: the wrapper maps the profile to NVIDIA's metric sets and to
        the embedded tracer, and refuses one it does not know. (what is wrong, the fix), or None. `validate` and
        `tools register` refuse the tool with it (stored tools still load: the check is not part of the model)."""
        if self.profiler != "rocprofv3":
            return None
        if self.core_profile is not None and not known_profile(self.core_profile):
            known = [*PROFILE_KINDS, *AMD_ONLY_PROFILES]
            close = difflib.get_close_matches(self.core_profile, known, n=1, cutoff=0.6)
            hint = f"did you mean '{close[0]}'? " if close else ""
            return (f"unknown core_profile '{self.core_profile}': the wrapper would refuse it at run time",
                    f"{hint}use one of {', '.join(PROFILE_KINDS)}")
        if self.core_profile is None and not known_profile(self.name) and self._inferred_profile() is None:
            return (f"tool '{self.name}' collects counters but has no core_profile: on NVIDIA GPUs (ncu) and with the "
                    "embedded tracer the wrapper must know which metric set answers it, and `run` would stop there",
                    'set "core_profile": "compute_bound" or "memory_bound", or "vendors": ["AMD"] for rocprofv3 only')
        return None

    def _inferred_profile(self) -> str | None:
        """The profile when none is given and the name is not one: the one the tool's content implies; None for a
        counter tool that also targets NVIDIA (compute or memory metric set: only its author knows)."""
        if self.pc_sampling:
            return "pc_sampling"
        if self.counters:
            if self.counters in ("compute_bound", "memory_bound"):
                return self.counters
            return self.name if self.vendors == ["AMD"] else None  # rocprofv3 reads the counter file itself
        return "lightweight"

    @property
    def profile(self) -> str:
        """The profile the wrapper is told with `--profile`: the core profile, else the tool name when the wrapper
        knows it (madengine's upstream names), else what the tool collects implies (trace only: lightweight)."""
        if self.core_profile:
            return self.core_profile
        if known_profile(self.name):
            return self.name
        return self._inferred_profile() or self.name

    def rocprofv3_args(self, counters_dir: str = DEFAULT_COUNTERS_DIR) -> list[str]:
        """rocprofv3 options for this tool (no trailing '--'); -i points at <counters_dir>/<counters>.txt."""
        if self.profiler != "rocprofv3":
            return []
        args = [f"--{d.replace('_', '-')}-trace" for d in self.trace]
        if self.stats:
            args.append("--stats")
        if self.summary:
            args.append("--summary")
        if self.truncate_kernels:
            args.append("--truncate-kernels")
        if self.counters:
            args += ["-i", f"{counters_dir.rstrip('/')}/{self.counters}.txt"]
        if self.kernel_include_regex:
            args += ["--kernel-include-regex", self.kernel_include_regex]
        if self.kernel_exclude_regex:
            args += ["--kernel-exclude-regex", self.kernel_exclude_regex]
        if self.pc_sampling:
            args += self.pc_sampling.args()
        args += ["--output-format", *self.output_formats, "-d", self.output_directory]
        if self.output_file:
            args += ["-o", self.output_file]
        return args + list(self.extra_args)

    def madengine_entry(self, wrapper: str = DEFAULT_WRAPPER, counters_dir: str = DEFAULT_COUNTERS_DIR) -> dict:
        """The exact entry for madengine's scripts/common/tools.json: pre_scripts, cmd
        ("<wrapper> --profile P <rocprofv3 options> --"; "" for samplers), env_vars, post_scripts (profilers also
        get madengine's trace.sh, so their ./rocprof_output survives madengine's clean-up of the run directory)."""
        cmd = ""
        post_scripts = [s.model_dump(exclude_defaults=True) for s in self.post_scripts]
        if self.profiler == "rocprofv3":
            args = ["--profile", self.profile, *self.rocprofv3_args(counters_dir)]
            cmd = " ".join([wrapper, *(shlex.quote(a) for a in args), "--"])
            if MADENGINE_TRACE_POST_SCRIPT not in post_scripts:
                post_scripts.append(dict(MADENGINE_TRACE_POST_SCRIPT))
        return {
            "pre_scripts": [s.model_dump(exclude_defaults=True) for s in self.pre_scripts],
            "cmd": cmd,
            "env_vars": dict(self.env_vars),
            "post_scripts": post_scripts,
        }
