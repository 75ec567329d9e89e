"""What `madengine-rocprof run` will do, decided before anything runs: the options, the selected models with their
tool chains, timeouts and hook scripts, and the run directory names. Every runner backend (lifecycle.py for Docker
and local runs, slurm.py for SLURM jobs) starts from plan_runs; this module imports none of them."""
from __future__ import annotations

import contextlib
import os
import shlex
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from madengine_rocprof.errors import UserError
from madengine_rocprof.inputs import bounded
from madengine_rocprof.models import AdditionalContext, ScriptRef, load_context
from madengine_rocprof.registry.store import PACKAGE_ROOT
from madengine_rocprof.runner import host
from madengine_rocprof.runner.chain import Chain, build_chain, check_rank_count, distributed_env, model_command
from madengine_rocprof.runner.selection import ModelCard, load_models, select_models

DEFAULT_TIMEOUT_S = 7200.0     # madengine's default model timeout
DEFAULT_HOOK_TIMEOUT_S = 600.0  # madengine's fixed pre/post script timeout
SCRIPTS_DIR = "model_scripts"   # the card's script folder, copied into the workspace (madengine copies it too)
PACKAGE_DIR = Path(__file__).resolve().parents[1]


@dataclass
class RunOptions:
    tags: list[str]
    context_file: str | None = None
    context_json: str | None = None
    runner: str = "auto"                  # auto | docker | local
    output_dir: Path = Path("runs")
    timeout: float | None = None
    hook_timeout: float = DEFAULT_HOOK_TIMEOUT_S
    models_file: Path = Path("models.json")
    first_outermost: bool = False
    echo: bool = True
    repo: Path = field(default_factory=lambda: PACKAGE_ROOT)  # the plugin: wrapper script, counters
    # local runner: refuse, before anything runs, a tool whose profiler this machine lacks (the `run` command);
    # escalation passes run anyway and record the wrapper's no_profiler outcome in their report
    require_profilers: bool = False

    @property
    def model_root(self) -> Path:
        """Card paths (scripts, dockerfile, pre/post scripts) are relative to models.json's folder, as in MAD."""
        return self.models_file.resolve().parent


@dataclass
class Planned:
    card: ModelCard
    chain: Chain
    timeout: float
    hooks: list[tuple[str, ScriptRef, Path]]   # (phase, ref, host file)


# Longer argument strings are no real model's: Linux refuses a single argument over 128 KiB, and shlex.split takes
# time quadratic in the length (26 s for 1.28 MB).
MAX_ARGS_CHARS = 64 * 1024


def _words(text: str, where: str, file: str | None = None) -> list[str]:
    """Arguments split as a shell would (they are quoted again when the command is built)."""
    if len(text) > MAX_ARGS_CHARS:
        raise UserError(f"the arguments are {len(text):,} characters long, more than the {MAX_ARGS_CHARS:,} allowed",
                        file=file, where=where, fix="pass large inputs in a file and give its path as the argument")
    try:
        return shlex.split(text)
    except ValueError as err:
        raise UserError(f"cannot split arguments {bounded(text)!r}: {err}", file=file, where=where,
                        fix="close the quote, or quote the argument that contains it") from None


def _only_copyable(folder: Path, where: str) -> None:
    """The script folder is copied into every run directory: a FIFO, device or socket in it would stop the copy
    (reading a FIFO blocks), so it is refused here, before anything is written. Links are copied as links."""
    import stat

    for dirpath, dirnames, filenames in os.walk(folder):
        for name in dirnames + filenames:
            path = os.path.join(dirpath, name)
            mode = os.lstat(path).st_mode
            if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode) or stat.S_ISLNK(mode)):
                raise UserError("is a FIFO, device or socket in the model's script folder, which is copied into "
                                "each run directory", file=path, where=where,
                                fix="remove it, or move it out of the script's folder")


def check_context(ctx: AdditionalContext, source: str | None = None) -> None:
    """What the context model cannot check alone and every runner needs; `validate` calls it too, so a context it
    passes is not refused by `run` later."""
    host.parse_gpu_list(ctx.docker_gpus or "", file=source)
    if ctx.docker_cpus:  # docker's cpuset syntax: "0-3,6"
        if ctx.docker_cpus.strip().lower() == "all":
            raise UserError("'all' is not a CPU set", file=source, where="docker_cpus", fix='write "0-3,6", or drop it')
        host.parse_gpu_list(ctx.docker_cpus, where="docker_cpus", file=source)
    for inside in ctx.docker_mounts:
        if not inside.startswith("/"):
            raise UserError(f"container path '{inside}' is not absolute", file=source, where="docker_mounts",
                            fix='write {"/container/path": "/host/path"}: the key is the path inside the container')
    for name in ctx.docker_build_arg:
        if not name or not (name[0].isalpha() or name[0] == "_") or not all(c.isalnum() or c == "_" for c in name):
            raise UserError(f"'{name}' is not a build argument name", file=source, where="docker_build_arg",
                            fix="use letters, digits and _, not starting with a digit")
    _words(ctx.model_args or "", "model_args", source)
    check_rank_count(ctx, source)


def confined(root: Path, relative: str, where: str, file: str | None = None) -> Path:
    """`root/relative`, refused unless it stays inside root once `..` and symbolic links are resolved: a card or a
    context must not reach /etc or another user's files."""
    path = root / relative
    if Path(relative).is_absolute() or not path.resolve().is_relative_to(root.resolve()):
        raise UserError(f"'{relative}' leads outside {root}", file=file, where=where,
                        fix="give a path inside the folder of models.json (no absolute path, no '..' out of it)")
    return path


def _script_file(repo: Path, ref: ScriptRef, where: str) -> Path:
    _words(ref.args, f"{where}.args")
    path = confined(repo, ref.path, where)
    if not path.is_file():
        raise UserError("script not found", file=str(path), where=where,
                        fix="paths are relative to the folder of models.json")
    return path


def plan_runs(opts: RunOptions) -> tuple[AdditionalContext, list[str], list[Planned]]:
    """Everything that can be wrong with the input is found here, before anything is built, run or written."""
    ctx, warnings = load_context(opts.context_file, opts.context_json)
    source = (
        " + ".join(s for s in (opts.context_file, "--additional-context" if opts.context_json else None) if s) or None
    )
    cards = select_models(load_models(opts.models_file), opts.tags, str(opts.models_file))
    if opts.runner != "slurm":  # the SLURM runner validates several nodes itself (runner/slurm_jobs.py)
        distributed_env(ctx)  # validates the distributed block
    check_context(ctx, source)
    planned = []
    for card in cards:
        script = confined(opts.model_root, card.scripts, f"{card.name}.scripts", str(opts.models_file))
        if not script.is_file():
            problem = "is not a regular file" if script.exists() else "does not exist"
            raise UserError(f"the model's script {problem}", file=str(script), where=f"{card.name}.scripts")
        _only_copyable(script.parent, f"{card.name}.scripts")
        if script.resolve().parent == opts.model_root.resolve():
            raise UserError("the model's script is in the folder of models.json itself: that whole folder would be "
                            f"copied as {SCRIPTS_DIR}", file=str(opts.models_file), where=f"{card.name}.scripts",
                            fix="put the script in a folder of its own, e.g. scripts/<model>/run.sh")
        confined(opts.model_root, card.dockerfile, f"{card.name}.dockerfile", str(opts.models_file))
        _words(card.args, f"{card.name}.args", str(opts.models_file))
        args = f"{card.args} {ctx.model_args}".strip() if ctx.model_args else card.args
        command = model_command(SCRIPTS_DIR, script.name, args, ctx.encapsulate_script)
        chain = build_chain(ctx, command, workspace="{workspace}", plugin_home="{plugin}",
                            first_outermost=opts.first_outermost, source=source)
        hooks = [
            ("pre", r, _script_file(opts.model_root, r, f"pre_scripts[{i}]")) for i, r in enumerate(chain.pre_scripts)
        ]
        hooks += [
            ("post", r, _script_file(opts.model_root, r, f"post_scripts[{i}]"))
            for i, r in enumerate(chain.post_scripts)
        ]
        timeout = opts.timeout or ctx.timeout or card.timeout or DEFAULT_TIMEOUT_S
        planned.append(Planned(card, chain, float(timeout), hooks))
    if chain_needs_wrapper(planned) and not (opts.repo / "scripts" / "rocprof_wrapper.sh").is_file():
        raise UserError("scripts/rocprof_wrapper.sh not found beside the package", file=str(opts.repo),
                        fix="run from a checkout of madengine-rocprof (pip install -e .)")
    return ctx, warnings, planned


def chain_needs_wrapper(planned: list[Planned]) -> bool:
    return any(p.chain.profiler_tools for p in planned)


def run_dir_name(item: Planned) -> str:
    return f"{item.card.name}__{item.chain.label}"


def check_run_dir(out_dir: Path, name: str) -> None:
    """The run directory is a plain folder inside --output-dir (it is replaced by a rerun): anything else is refused
    before anything is written."""
    ws = out_dir / name
    if ws.is_symlink() or (ws.exists() and not ws.is_dir()):
        kind = "a symbolic link" if ws.is_symlink() else "a file"
        raise UserError(f"{ws} is {kind}, not a run directory: a rerun replaces run directories, so it is left alone",
                        fix="move it away, or choose another --output-dir")
    if ws.resolve().parent != out_dir or ws.name != name:
        raise UserError(f"run directory '{name}' would lie outside {out_dir}", where="models.json name")


PREVIOUS_DIR = ".previous"  # hidden: report discovery skips it, so a kept run is never counted twice


def previous_of(ws: Path) -> Path:
    return ws.parent / PREVIOUS_DIR / ws.name


def _succeeded(ws: Path) -> bool:
    from madengine_rocprof import inputs
    from madengine_rocprof.errors import UserError

    try:
        return inputs.load_json_object(ws / "run.json", kind="run.json").get("status") == "SUCCESS"
    except (UserError, OSError):
        return False


def set_aside(ws: Path) -> Path | None:
    """Before a rerun: the previous run directory is moved to <out>/.previous/<name> (a rename: no space needed), so a
    rerun that fails loses no profile already recorded. One is kept per run name: the newest, except that a failed
    rerun never pushes out a successful run kept there. Returns where it went (None: nothing to keep)."""
    if not ws.exists():
        return None
    kept = previous_of(ws)
    if kept.is_symlink() or (kept.exists() and not kept.is_dir()):
        raise UserError(f"{kept} is not a folder: the previous run is kept there", fix="move it away")
    if kept.exists() and not _succeeded(ws):
        shutil.rmtree(ws)  # a failed rerun; the run kept before it stays
        return None
    if kept.exists():
        shutil.rmtree(kept)
    kept.parent.mkdir(exist_ok=True)
    ws.rename(kept)
    return kept


def put_back(ws: Path, kept: Path | None) -> None:
    """Undo set_aside when the new run directory could not even be made (a full disk, a read-only tree)."""
    if kept is not None and kept.exists() and not ws.exists():
        kept.rename(ws)


def settle_previous(ws: Path, status: str) -> str | None:
    """After the rerun: a successful one supersedes the run kept before it; after a failed one, a message saying
    where that run is."""
    kept = previous_of(ws)
    if not kept.is_dir():
        return None
    if status == "SUCCESS":
        shutil.rmtree(kept, ignore_errors=True)
        with contextlib.suppress(OSError):
            kept.parent.rmdir()  # only when no other run is kept there
        return None
    return f"[run] the previous run of {ws.name} is kept in {kept}"


def unrunnable_here(tool_names: list[str], env: dict[str, str]) -> list[UserError]:
    """Tools whose profile needs a profiler this machine lacks (counters or PC sampling without rocprofv3 or ncu):
    the wrapper would refuse them inside the run (no_profiler). One error per tool, with the reason."""
    from madengine_rocprof.registry import get_tool
    from madengine_rocprof.wrapper import detect, planner

    problems = []
    for name in tool_names:
        tool = get_tool(name)
        if tool.profiler != "rocprofv3":
            continue
        core = planner.PROFILE_ALIASES.get(tool.core_profile or "", tool.core_profile)
        kind = planner.PROFILE_KINDS.get(core or "") or (
            "counters" if tool.counters else "pc_sampling" if tool.pc_sampling else "trace")
        try:
            detect.choose(None, kind, env)
        except UserError as err:
            problems.append(UserError(f"tool '{name}' cannot run on this machine: {err.what}", where="tools",
                                      fix="run it where rocprofv3 or ncu is installed (--runner docker uses the "
                                          "container's, --runner slurm the nodes'), or choose a trace tool such as "
                                          "rocprofv3_lightweight"))
    return problems
