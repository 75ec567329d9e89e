"""The profiler wrapper (standard library only: it runs in containers where this package is not installed).

    from madengine_rocprof import wrapper
    p = wrapper.plan(["--kernel-trace", "--stats"], ["python3", "train.py"], "/abs/out")   # nothing runs
    r = wrapper.run(["--kernel-trace", "--stats"], ["python3", "train.py"], "/abs/out")    # runs, writes manifest
    r.exit_code, r.manifest["outcome"], r.manifest["outputs"]
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from madengine_rocprof.errors import UserError

if TYPE_CHECKING:
    from madengine_rocprof.wrapper.execute import Result
    from madengine_rocprof.wrapper.planner import Plan

__all__ = ["plan", "run", "Plan", "Result", "UserError"]


def __getattr__(name: str):
    """Plan and Result on first use: `report` and `compare` import wrapper.contracts, and the planner and executor
    (pydantic models, option tables) cost every such process about 0.1 s of CPU for nothing (issue 33)."""
    if name == "Plan":
        from madengine_rocprof.wrapper.planner import Plan

        return Plan
    if name == "Result":
        from madengine_rocprof.wrapper.execute import Result

        return Result
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def plan(profiler_args: list[str], app_argv: list[str], output_dir: str | None = None, profiler: str | None = None,
         env=None, *, profile: str | None = None, cwd: str | None = None, drop_unsupported: bool | None = None) -> Plan:
    """The final command, environment and output directory for `profiler_args -- app_argv`; nothing runs.

    Args:
        profiler_args: rocprofv3-style options (and the wrapper's own, such as --profile), everything before `--`.
        app_argv: the application and its arguments, everything after `--`.
        output_dir: OUT, where the profiler writes and manifest.json goes; default -d/--output-directory or
            ./rocprof_output, relative to `cwd`.
        profiler: auto|rocprofv3|rocprof|ncu|nsys|embedded; default --profiler or $MADENGINE_ROCPROF_PROFILER, else
            auto-detection.
        env: the environment the app will get (default os.environ); also read for the profiler/profile overrides.
        profile: core profile (lightweight, compute_bound, ...) or an upstream tool name; default --profile,
            $MADENGINE_ROCPROF_PROFILE, else inferred from the options.
        cwd: directory relative paths are resolved against (default the current one).
        drop_unsupported: drop options the chosen profiler cannot honour instead of refusing them.

    Returns:
        The Plan: profiler, full argv, environment additions, absolute OUT, profile, messages.

    Raises:
        UserError: bad input (missing `--`, unknown option or profile); exit code 127 when no profiler fits.
    """
    from madengine_rocprof.wrapper.planner import build

    return build(profiler_args, app_argv, output_dir=output_dir, profiler=profiler, profile=profile, env=env, cwd=cwd,
                 drop_unsupported=drop_unsupported)


def run(
    profiler_args: list[str],
    app_argv: list[str],
    output_dir: str | None = None,
    profiler: str | None = None,
    env=None,
    *,
    profile: str | None = None,
    cwd: str | None = None,
    drop_unsupported: bool | None = None,
) -> Result:
    """Run the app under the profiler chosen by plan() and write OUT/manifest.json.

    Args:
        profiler_args, app_argv, output_dir, profiler, env, profile, cwd, drop_unsupported: as for plan().

    Returns:
        The Result: exit_code (the app's; 127 with outcome `no_profiler` when no profiler fits, with a manifest
        written all the same), the manifest dict (outcome, outputs, dispatch count, messages) and the plan.

    Raises:
        UserError: bad input, found before anything is run or written.
    """
    from madengine_rocprof.wrapper.detect import EXIT_NO_PROFILER
    from madengine_rocprof.wrapper.execute import execute, no_profiler_manifest
    from madengine_rocprof.wrapper.planner import output_dir_of

    try:
        p = plan(profiler_args, app_argv, output_dir, profiler, env, profile=profile, cwd=cwd,
                 drop_unsupported=drop_unsupported)
    except UserError as err:
        if err.exit_code != EXIT_NO_PROFILER:
            raise
        return no_profiler_manifest(output_dir_of(profiler_args, app_argv, output_dir, cwd), list(app_argv), str(err))
    return execute(p, env)
