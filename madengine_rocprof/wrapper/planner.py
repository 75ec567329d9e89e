"""Turn `[rocprofv3 options] -- app` into the final command for the chosen profiler (nothing is run here)."""
from __future__ import annotations

import json
import os
import re
import socket
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field

from madengine_rocprof import inputs
from madengine_rocprof.errors import UserError
from madengine_rocprof.wrapper import detect, nvidia
from madengine_rocprof.wrapper import options as opts

ENV_PROFILE = "MADENGINE_ROCPROF_PROFILE"
ENV_DROP = "MADENGINE_ROCPROF_DROP_UNSUPPORTED"
DEFAULT_OUTPUT_DIR = "rocprof_output"

# Profile name (set by the tool definitions) -> what it needs from a profiler.
PROFILE_KINDS = {
    "lightweight": "trace",
    "multi_gpu": "trace",
    "communication": "trace",
    "trace": "trace",
    "compute_bound": "counters",
    "memory_bound": "counters",
    "pc_sampling": "pc_sampling",
}
# Upstream madengine tool names (the registry sets the tool name when a tool has no core profile).
PROFILE_ALIASES = {
    "rocprof": "lightweight", "rocprofv3": "lightweight", "rocprof_sys": "lightweight",
    "rocprofv3_lightweight": "lightweight", "rocprofv3_perfetto": "lightweight",
    "rocprofv3_compute": "compute_bound", "rocprofv3_memory": "memory_bound",
    "rocprofv3_communication": "multi_gpu", "rocprofv3_pc_sampling": "pc_sampling",
}
# Profiles that only make sense on AMD, with the reason shown to the user.
AMD_ONLY_PROFILES = {
    "rocprof_hip_only": "it traces the HIP API only (no kernels); HIP has no NVIDIA counterpart",
    "rocprofv3_api_overhead": "it measures HIP/HSA API overhead; those runtimes do not exist on NVIDIA",
    "rocprofv3_full": "its full_profile counters are AMD hardware counters (use compute_bound or memory_bound)",
}
# AMD runtime API domains with no NVIDIA counterpart: dropped (with a message) on NVIDIA, since the kernel trace
# still answers the profile's question.
AMD_ONLY_TRACES = {
    "--hsa-trace", "--hsa-core-trace", "--hsa-amd-trace", "--hsa-image-trace", "--hsa-finalizer-trace",
    "--scratch-memory-trace", "--kokkos-trace", "--rocdecode-trace", "--rocjpeg-trace", "--hip-compiler-trace",
    "--memory-allocation-trace",
}
MEMORY_COUNTER = re.compile(r"FETCH_SIZE|WRITE_SIZE|TCC_|TCP_|TA_|TD_|GL2C|MemUnit|L2Cache|LDSBankConflict|EA0?_")
TEMPLATE_KEYS = ("%pid%", "%rank%")
EXIT_FILE_ENV = "MADENGINE_ROCPROF_EXIT_FILE"  # where a launcher leaves the app's exit status (legacy rocprof)


@dataclass
class Plan:
    profiler: detect.Profiler
    argv: list[str]                 # the full command: profiler, its options, the app
    app_argv: list[str]
    output_dir: str                 # absolute OUT
    env_added: dict = field(default_factory=dict)
    profile: str | None = None
    messages: list[str] = field(default_factory=list)
    post: str | None = None         # conversion after the run: "ncu" | "nsys" | None
    settings: dict = field(default_factory=dict)  # wrapper flags: dry_run, fail_on_no_output, no_filter

    @property
    def exe(self) -> str:
        """The profiler's executable (every backend but the embedded tracer has one: detect found it on PATH)."""
        if self.profiler.path is None:
            raise AssertionError(f"profiler {self.profiler.name} has no executable")
        return self.profiler.path

    @property
    def core_profile(self) -> str:
        """The core profile an NVIDIA backend collects (build() sets it before calling the backend)."""
        if self.profile is None:
            raise AssertionError("no core profile chosen")
        return self.profile

    def to_json(self) -> dict:
        return {"profiler": self.profiler.to_json(), "argv": self.argv, "app_argv": self.app_argv,
                "output_dir": self.output_dir, "env_added": self.env_added, "profile": self.profile,
                "messages": self.messages, "post": self.post}


def _truthy(value) -> bool:
    return str(value or "").strip().lower() in opts.TRUE_WORDS


def _read_input_file(full: str) -> str:
    """An -i file through the input layer: a regular UTF-8 file within the config limit (a FIFO or /dev/zero given
    as -i hung the wrapper before the app started)."""
    from madengine_rocprof import inputs

    try:
        return inputs.read_text(full, kind="profiler input file (-i)")
    except UserError as err:
        err.where = err.where or "--input"
        raise


def counters_requested(parsed: opts.Parsed, cwd: str) -> list[str]:
    """Counter names from --pmc and from an -i file (any format; names are upper-case words)."""
    names = list(parsed.values("--pmc"))
    for path in parsed.values("--input"):
        full = os.path.join(cwd, path)
        text = _read_input_file(full)
        if path.endswith(".txt"):
            text = "\n".join(line.split("#", 1)[0].split("pmc:", 1)[1] for line in text.splitlines()
                             if "pmc:" in line.split("#", 1)[0])
        names += [w for w in re.findall(r"\b[A-Z][A-Za-z0-9_]*[A-Z0-9_]\b", text) if w not in ("PMC",)]
    return names


def known_profile(name: str) -> bool:
    """A core profile, an upstream tool name that maps to one, or an AMD-only profile (refused clearly on NVIDIA)."""
    return name in PROFILE_KINDS or name in PROFILE_ALIASES or name in AMD_ONLY_PROFILES


def infer_profile(parsed: opts.Parsed, cwd: str) -> str:
    if parsed.on("--pc-sampling-beta-enabled") or parsed.get("--pc-sampling-method"):
        return "pc_sampling"
    counters = counters_requested(parsed, cwd)
    if counters:
        return "memory_bound" if any(MEMORY_COUNTER.search(c) for c in counters) else "compute_bound"
    return "lightweight"


def resolve_output_dir(parsed: opts.Parsed, output_dir: str | None, cwd: str) -> str:
    given = output_dir or (parsed.values("--output-directory") or [DEFAULT_OUTPUT_DIR])[-1]
    if "%" in given:
        raise UserError(f"output directory `{given}` contains a template key: the wrapper needs one real directory",
                        where="--output-directory", fix="give a plain directory; per-process names are added for you")
    return os.path.normpath(os.path.join(cwd, os.path.expanduser(given)))


def output_dir_of(profiler_args: list[str], app_argv: list[str], output_dir: str | None = None,
                  cwd: str | None = None) -> str:
    """OUT for a run stopped before its plan existed (no profiler), so its manifest lands where the plan's would."""
    cwd = os.path.abspath(cwd or os.getcwd())
    try:
        return resolve_output_dir(opts.parse(list(profiler_args) + ["--"] + list(app_argv)), output_dir, cwd)
    except UserError:
        return os.path.join(cwd, DEFAULT_OUTPUT_DIR)


def build(profiler_args: list[str], app_argv: list[str], *, output_dir: str | None = None,
          profiler: str | None = None, profile: str | None = None, env=None, cwd: str | None = None,
          drop_unsupported: bool | None = None, prog: str = "madengine-rocprof wrap") -> Plan:
    """The planner's entry: the final command for `profiler_args -- app_argv` (wrapper.plan() calls it).

    Args:
        profiler_args: options before `--` (rocprofv3 vocabulary plus the wrapper's own).
        app_argv: the application after `--`.
        output_dir: OUT; default from -d/--output-directory, else ./rocprof_output (relative to `cwd`).
        profiler: profiler override (auto|rocprofv3|rocprof|ncu|nsys|embedded); default --profiler or the env.
        profile: core profile or upstream tool name; default --profile, $MADENGINE_ROCPROF_PROFILE, else inferred.
        env: environment to plan for (default os.environ).
        cwd: base directory of relative paths (default the current one).
        drop_unsupported: drop options the profiler cannot honour; default --drop-unsupported or the env switch.
        prog: the command name shown in corrected-command hints.

    Returns:
        The Plan (profiler, argv, env_added, output_dir, profile, messages, post-run conversion, settings).

    Raises:
        UserError: bad input, with where it is and how to fix it; exit code 127 when no profiler fits.
    """
    env = dict(os.environ if env is None else env)
    cwd = os.path.abspath(cwd or os.getcwd())
    parsed = opts.parse(list(profiler_args) + ["--"] + list(app_argv), prog=prog)
    flags = parsed.wrapper
    early: list[str] = []
    env_profile = env.get(ENV_PROFILE) or None
    if env_profile and not known_profile(env_profile):
        # Only a user override sets it, but an environment is shared by everything in it (madengine merges every
        # tool's env_vars): a stray value such as a sampler's name must not stop the run. The --profile flag is
        # the tool's own word and stays strict.
        if not (profile or flags.get("profile")):
            early.append(f"{ENV_PROFILE}={env_profile} is not a profile (known: {', '.join(PROFILE_KINDS)}): ignored")
        env_profile = None
    profile = profile or flags.get("profile") or env_profile
    drop = (
        drop_unsupported
        if drop_unsupported is not None
        else bool(flags.get("drop_unsupported")) or _truthy(env.get(ENV_DROP))
    )
    inferred = infer_profile(parsed, cwd)
    core = PROFILE_ALIASES.get(profile, profile) if profile else None
    # mistakes in the options themselves are refused (exit 2) whichever profiler is found, or none: before the
    # choice, so "no profiler" (127) never hides them and no backend runs the app despite them
    _check_rocprofv3(parsed)
    _check_input_output_keys(parsed, cwd)
    prof = detect.choose(profiler or flags.get("profiler"), PROFILE_KINDS.get(core or "", PROFILE_KINDS[inferred]), env)
    out = resolve_output_dir(parsed, output_dir, cwd)
    plan = Plan(prof, [], list(parsed.app), out, profile=profile or None, messages=early,
                settings={k: flags.get(k, False) for k in ("dry_run", "fail_on_no_output", "no_filter")})
    if prof.name in ("ncu", "nsys", "embedded"):
        where = ENV_PROFILE if profile == env_profile and not flags.get("profile") else "--profile"
        if profile in AMD_ONLY_PROFILES:
            raise UserError(f"profile `{profile}` has no meaning on {_vendor(prof)}: {AMD_ONLY_PROFILES[profile]}",
                            where=where, fix=f"use one of {', '.join(PROFILE_KINDS)}, or run it on an AMD GPU")
        if profile and core not in PROFILE_KINDS:
            raise UserError(
                f"unknown profile `{profile}`: no mapping for {_vendor(prof)} ({prof.name})",
                where=where,
                fix=f'use --profile with one of {", ".join(PROFILE_KINDS)} (a tool sets it with "core_profile")',
            )
        plan.profile = core or inferred
        if not profile:
            plan.messages.append(f"profile inferred from the options: {inferred}")
        elif core != profile:
            plan.messages.append(f"profile {profile} -> {core}")
    # each backend gets only what it uses
    if prof.name == "rocprofv3":
        _rocprofv3(plan, parsed, cwd, drop)
    elif prof.name == "rocprof":
        _legacy(plan, parsed, cwd, drop)
    elif prof.name == "ncu":
        _ncu(plan, parsed, cwd, drop, env)
    elif prof.name == "nsys":
        _nsys(plan, parsed, drop)
    elif prof.name == "embedded":
        _embedded(plan, parsed, drop, env)
    else:
        raise AssertionError(f"no plan for profiler {prof.name}")  # detect.NAMES lists the five above
    if prof.name != "embedded" and env.get(SHAPES_SETTING, "").strip():
        plan.messages.append(f"{SHAPES_SETTING} applies to the embedded tracer only (--profiler embedded): {prof.name}"
                             " records no PyTorch operator shapes")
    return plan


SHAPES_SETTING = "MADENGINE_ROCPROF_TRACER_SHAPES"


def _vendor(prof: detect.Profiler) -> str:
    return "NVIDIA" if prof.name in ("ncu", "nsys") else "the embedded tracer"


def _unsupported(plan: Plan, bad: list[opts.Opt], drop: bool, target: str) -> None:
    if not bad:
        return
    names = ", ".join(dict.fromkeys(o.token.split("=")[0] or o.name for o in bad))
    if not drop:
        raise UserError(
            f"{target} has no equivalent for: {names}",
            where="profiler options",
            fix="remove them, or pass --drop-unsupported (or MADENGINE_ROCPROF_DROP_UNSUPPORTED=1) to drop them",
        )
    plan.messages.append(f"dropped (no equivalent in {target}): {names}")


# ---------------------------------------------------------------- rocprofv3

def _rocprofv3(plan: Plan, parsed: opts.Parsed, cwd: str, drop: bool) -> None:
    release = plan.profiler.release or (7, 0)
    keep: list[opts.Opt] = []
    too_new: list[opts.Opt] = []
    formats: list[str] = []
    output_file: str | None = None
    for o in parsed.options:
        if o.name == "--output-directory":
            continue
        if o.name == "--output-format":
            formats += [f for v in o.items for f in v.split(",") if f]
            continue
        if o.name == "--output-file":
            output_file = o.text
            continue
        if o.name == "--list-avail" and release < (6, 4):
            keep.append(opts.Opt("--list-metrics", None, o.token))
            continue
        if o.name == "--list-metrics" and release >= (6, 4):
            keep.append(opts.Opt("--list-avail", None, o.token))
            continue
        if o.name == "--input":
            o = opts.Opt(o.name, os.path.join(cwd, o.text), o.token)  # absolute: run.sh may change directory
        if o.spec.since > release:
            too_new.append(o)
            continue
        keep.append(o)
    _unsupported(plan, too_new, drop, f"rocprofv3 of ROCm {'.'.join(map(str, release))}")
    final_formats = _formats(plan, formats, release, parsed)
    template = "%hostname%/%pid%"
    if output_file:
        if any(k in output_file for k in TEMPLATE_KEYS):
            template = output_file
        else:
            template = f"%hostname%/%pid%_{output_file.replace('/', '_')}"
            plan.messages.append(f"-o {output_file} would be shared by every process: using -o {template}")
    argv = [plan.exe, "--output-directory", plan.output_dir, "--output-file", template,
            "--output-format", *final_formats] + opts.render(keep)
    plan.argv = argv + ["--"] + plan.app_argv


def _formats(plan: Plan, requested: list[str], release: tuple, parsed: opts.Parsed) -> list[str]:
    valid = {"csv", "json", "pftrace", "otf2", "rocpd"}
    bad = [f for f in requested if f not in valid]
    if bad:
        raise UserError(f"unknown output format(s): {', '.join(bad)}", where="--output-format",
                        fix=f"use some of: {', '.join(sorted(valid))}")
    final = list(dict.fromkeys(["csv"] + requested))  # csv always: every reader understands it
    if "rocpd" in final and release < (7, 0):
        final.remove("rocpd")
        plan.messages.append("rocpd output needs ROCm 7.0+: dropped")
    if "rocpd" in final and (parsed.on("--pc-sampling-beta-enabled")):
        final.remove("rocpd")
        plan.messages.append("PC-sampling output cannot be rocpd: dropped rocpd")
    return final


def _check_rocprofv3(parsed: opts.Parsed) -> None:
    """Mistakes rocprofv3 only reports after starting (or not at all): fail before running anything."""
    # rocprofv3 also counts --pmc, PC sampling and --att as tracing here; an -i file's jobs may enable any of them.
    tracing = [o for o in parsed.options if (o.spec.group == "trace" or o.name in ("--pmc", "--input", "--att",
                                             "--pc-sampling-beta-enabled")) and o.enabled]
    if (parsed.on("--stats") or parsed.on("--summary")) and not tracing:
        raise UserError("--stats/--summary need a tracing option (rocprofv3: \"No tracing options were enabled\")",
                        where="--stats", fix="add --kernel-trace")
    method = parsed.last("--pc-sampling-method")
    if method:
        unit = parsed.last("--pc-sampling-unit")
        interval = parsed.last("--pc-sampling-interval")
        if not (unit and interval):
            raise UserError(
                "PC sampling needs --pc-sampling-method, --pc-sampling-unit and --pc-sampling-interval together",
                where="--pc-sampling-method",
            )
        if method == "stochastic" and unit != "cycles":
            raise UserError(f"--pc-sampling-method stochastic needs --pc-sampling-unit cycles, not {unit}",
                            where="--pc-sampling-unit", fix="use host_trap with time, or stochastic with cycles")
        if method == "host_trap" and unit != "time":
            raise UserError(f"--pc-sampling-method host_trap needs --pc-sampling-unit time, not {unit}",
                            where="--pc-sampling-unit", fix="use --pc-sampling-unit time")
        try:  # the project's one number rule: decimal, whole, in range (int() took "1_024" and non-ASCII digits)
            value = int(inputs.number(interval, low=1, high=2**32, integer=True))
        except ValueError:
            value = 0
        if value <= 0 or (method == "stochastic" and (value < 256 or value & (value - 1))):
            need = "a power of 2 >= 256" if method == "stochastic" else "a positive integer (microseconds)"
            raise UserError(f"--pc-sampling-interval {inputs.bounded(interval, 60)} is invalid: {method} needs {need}",
                            where="--pc-sampling-interval", fix=f"give {need}, e.g. "
                            + ("1048576" if method == "stochastic" else "1000"))


# Keys the wrapper always sets on the command line: rocprofv3 stops with "conflicting value for KEY" when a
# -i .json/.yaml job sets one of them to something else.
WRAPPER_SET_KEYS = ("output_directory", "output_file", "output_format")


def _check_input_output_keys(parsed: opts.Parsed, cwd: str) -> None:
    for path in parsed.values("--input"):
        if not path.endswith((".json", ".yaml", ".yml")):
            continue
        full = os.path.join(cwd, path)
        if not os.path.lexists(full):
            continue  # rocprofv3 reports a missing input file itself
        text = _read_input_file(full)
        keys = [k for k in WRAPPER_SET_KEYS if re.search(rf"(?<!\w){k}[\"']?\s*:", text)]
        if keys:
            raise UserError(f"the input file sets {', '.join(keys)}, which the wrapper sets on the command line"
                            " (rocprofv3 would stop with \"conflicting value\")", file=full, where="--input",
                            fix="remove those keys from the file; give -d/-o/--output-format to the wrapper instead")


# ---------------------------------------------------------------- legacy rocprof

LEGACY_SAME: dict[str, list[tuple[str, ...]]] = {
    "--hip-trace": [("--hip-trace",)], "--hsa-trace": [("--hsa-trace",)], "--sys-trace": [("--sys-trace",)],
    "--kernel-trace": [("--timestamp", "on")], "--marker-trace": [("--roctx-trace",)],
    "--runtime-trace": [("--hip-trace",), ("--roctx-trace",)], "--stats": [("--stats",)],
    "--truncate-kernels": [("--basenames", "on")],
}


# rpl_run.sh exits 0 whatever the app returns (`exit $RET`), so a small launcher runs the app and appends its status
# to $MADENGINE_ROCPROF_EXIT_FILE. It survives rpl_run.sh's unquoted word splitting and `eval`: one line without
# blanks that matter and without $ ` " \ * ? [ characters.
LEGACY_EXIT_SHIM = (
    "import os,signal,sys;a=sys.argv;a.pop(0);p=os.fork() or os.execvp(next(iter(a)),a);"
    "signal.signal(signal.SIGINT,signal.SIG_IGN);signal.signal(signal.SIGTERM,lambda n,f:os.kill(p,n));"
    "_,s=os.waitpid(p,0);c=128+os.WTERMSIG(s) if os.WIFSIGNALED(s) else os.WEXITSTATUS(s);"
    "f=os.environ.get('" + EXIT_FILE_ENV + "');f and open(f,'a').write(str(c)+chr(10));sys.exit(c)")


def _legacy(plan: Plan, parsed: opts.Parsed, cwd: str, drop: bool) -> None:
    if plan.app_argv[0].startswith("-"):
        raise UserError(f"legacy rocprof has no `--`: the application cannot start with `{plan.app_argv[0]}`",
                        where="application")
    units: list[tuple[str, ...]] = []  # ("--timestamp", "on"): one legacy option with its value
    bad: list[opts.Opt] = []
    traced = parsed.on("--hip-trace") or parsed.on("--sys-trace") or parsed.on("--runtime-trace")
    for o in parsed.options:
        if o.spec.kind == opts.BOOL and not o.enabled:
            continue  # `--x=no` asks for nothing
        if o.name in ("--output-directory", "--output-file"):
            continue
        if o.name in LEGACY_SAME:
            units += [u for u in LEGACY_SAME[o.name] if u not in units]
        elif o.name == "--memory-copy-trace" and traced:
            plan.messages.append("--memory-copy-trace: legacy --hip-trace/--sys-trace already include copies")
        elif o.name == "--output-format":
            formats = [f for v in o.items for f in v.split(",")]
            bad += [opts.Opt(o.name, f, f"--output-format {f}") for f in formats if f not in ("csv", "json")]
        elif o.name == "--input" and o.text.endswith(".txt"):
            units.append(("-i", os.path.join(cwd, o.text)))
        elif o.name in ("--list-avail", "--list-metrics"):
            units.append(("--list-basic",))
        else:
            bad.append(o)
    _unsupported(plan, bad, drop, "legacy rocprof")
    host_dir = os.path.join(plan.output_dir, socket.gethostname())
    pid = os.getpid()  # legacy rocprof writes one results.csv per run: name it after the wrapper process
    plan.env_added = {EXIT_FILE_ENV: os.path.join(plan.output_dir, f".tmp_app_exit_{pid}")}
    plan.argv = [
        plan.exe,
        *(t for u in units for t in u),
        "-d",
        os.path.join(host_dir, f"{pid}_rocprof_data"),
        "-o",
        os.path.join(host_dir, f"{pid}_results.csv"),
        sys.executable or "python3",
        "-c",
        LEGACY_EXIT_SHIM,
        *plan.app_argv,
    ]


# ---------------------------------------------------------------- NVIDIA: embedded tracer, ncu, nsys

MEANINGFUL_ON_NVIDIA_TRACE = {"--kernel-trace", "--hip-trace", "--runtime-trace", "--sys-trace", "--marker-trace",
                              "--memory-copy-trace", "--rccl-trace", "--hip-runtime-trace", "--stats", "--summary",
                              "--output-format", "--output-file", "--output-directory", "--truncate-kernels",
                              "--collection-period", "--collection-period-unit", "--log-level",
                              "--kernel-include-regex", "--kernel-exclude-regex", "--mangled-kernels"}


def _split_nvidia(plan: Plan, parsed: opts.Parsed, meaningful: set, drop: bool, target: str) -> None:
    amd_only = [o for o in parsed.options if o.name in AMD_ONLY_TRACES and o.enabled]
    if amd_only:
        plan.messages.append("AMD-only API traces ignored on this backend: "
                             + ", ".join(dict.fromkeys(o.name for o in amd_only)))
    bad = [o for o in parsed.options if o.name not in meaningful and o.name not in AMD_ONLY_TRACES
           and not (o.spec.kind == opts.BOOL and not o.enabled)]
    _unsupported(plan, bad, drop, target)


def _embedded(plan: Plan, parsed: opts.Parsed, drop: bool, env: Mapping[str, str]) -> None:
    from madengine_rocprof.wrapper import bundle
    from madengine_rocprof.wrapper import tracer_settings as settings

    needs = PROFILE_KINDS[plan.core_profile]
    if needs != "trace":
        raise UserError(f"profile `{plan.profile}` needs {needs.replace('_', ' ')}: the embedded"
                        " tracer records kernel traces only", where=ENV_PROFILE,
                        fix="install ncu (NVIDIA) or rocprofv3 (AMD), or use the lightweight profile")
    _split_nvidia(plan, parsed, MEANINGFUL_ON_NVIDIA_TRACE, drop, "the embedded tracer")
    settings.check(env)  # the user's own MADENGINE_ROCPROF_TRACER_* values: refused here, before the app starts
    inject = bundle.inject_dir()
    added = {
        "PYTHONPATH": inject + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else ""),
        "MADENGINE_ROCPROF_TRACER_HOME": bundle.package_root(),
        "MADENGINE_ROCPROF_TRACER_OUT": plan.output_dir,
    }
    if parsed.on("--truncate-kernels"):
        added["MADENGINE_ROCPROF_TRACER_TRUNCATE"] = "1"
    if parsed.on("--mangled-kernels"):
        added["MADENGINE_ROCPROF_TRACER_MANGLED"] = "1"
    # rocprofv3's API trace options -> CUDA runtime calls; --runtime-trace/--sys-trace also trace memory copies
    if any(parsed.on(o) for o in ("--hip-trace", "--hip-runtime-trace", "--runtime-trace", "--sys-trace")):
        added["MADENGINE_ROCPROF_TRACER_API"] = "1"
    if any(parsed.on(o) for o in ("--memory-copy-trace", "--runtime-trace", "--sys-trace")):
        added["MADENGINE_ROCPROF_TRACER_MEMCPY"] = "1"
    if parsed.on("--stats"):
        added["MADENGINE_ROCPROF_TRACER_STATS"] = "1"
    period = parsed.values("--collection-period")
    if period:
        added.update(_period_env(period[0], (parsed.values("--collection-period-unit") or ["sec"])[-1]))
        if len(period) > 1:
            plan.messages.append("only the first --collection-period window is used by the embedded tracer")
    if parsed.get("--kernel-include-regex") or parsed.get("--kernel-exclude-regex"):
        plan.messages.append("kernel include/exclude filters apply to counters only (as in rocprofv3): ignored")
    formats = [f for v in parsed.values("--output-format") for f in v.split(",")]
    if any(f in ("pftrace", "json", "otf2", "rocpd") for f in formats):
        plan.messages.append("the embedded tracer writes csv plus a Perfetto-viewable JSON trace"
                             f" (<pid>_perfetto_trace.json) instead of {', '.join(f for f in formats if f != 'csv')}")
    plan.env_added = added
    plan.argv = list(plan.app_argv)


def _period_env(spec: str, unit: str) -> dict:
    scale = {"hour": 3600.0, "min": 60.0, "sec": 1.0, "msec": 1e-3, "usec": 1e-6, "nsec": 1e-9}.get(unit)
    parts = spec.split(":")
    try:
        delay, duration = float(parts[0]), float(parts[1]) if len(parts) > 1 else 0.0
    except ValueError:
        raise UserError(
            f"--collection-period `{spec}` is not delay:duration[:repeat]", where="--collection-period"
        ) from None
    if scale is None:
        raise UserError(f"unknown --collection-period-unit `{unit}`", where="--collection-period-unit",
                        fix="use hour, min, sec, msec, usec or nsec")
    return {"MADENGINE_ROCPROF_TRACER_DELAY_S": repr(delay * scale),
            "MADENGINE_ROCPROF_TRACER_MAX_SECONDS": repr(duration * scale)}


def _ncu(plan: Plan, parsed: opts.Parsed, cwd: str, drop: bool, env: Mapping[str, str]) -> None:
    kind = PROFILE_KINDS[plan.core_profile]
    if kind == "trace":
        raise UserError(f"profile `{plan.profile}` is a trace: ncu replays kernels and distorts timing",
                        where=ENV_PROFILE, fix="use --profiler embedded (or nsys) for traces")
    meaningful = MEANINGFUL_ON_NVIDIA_TRACE | {"--pmc", "--input", "--kernel-iteration-range",
                                             "--pc-sampling-beta-enabled", "--pc-sampling-unit",
                                             "--pc-sampling-method", "--pc-sampling-interval"}
    _split_nvidia(plan, parsed, meaningful, drop, "Nsight Compute")
    amd = counters_requested(parsed, cwd)
    if amd:
        plan.messages.append(f"AMD counters ({', '.join(dict.fromkeys(amd))}) have no meaning on NVIDIA: "
                             f"collecting the ncu {plan.profile} metric set instead")
    plan.argv = nvidia.ncu_argv(plan.exe, plan.core_profile, plan.output_dir, parsed, env) + plan.app_argv
    plan.post = "ncu"


def _nsys(plan: Plan, parsed: opts.Parsed, drop: bool) -> None:
    if PROFILE_KINDS[plan.core_profile] != "trace":
        raise UserError(f"profile `{plan.profile}` needs counters: nsys only traces", where=ENV_PROFILE,
                        fix="use --profiler ncu")
    _split_nvidia(plan, parsed, MEANINGFUL_ON_NVIDIA_TRACE, drop, "Nsight Systems")
    plan.argv = nvidia.nsys_argv(plan.exe, plan.output_dir) + plan.app_argv
    plan.post = "nsys"


def dumps(plan: Plan) -> str:
    return json.dumps(plan.to_json(), indent=2, allow_nan=False)
