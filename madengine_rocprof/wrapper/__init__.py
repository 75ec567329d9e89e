"""The profiler wrapper (standard library only: it runs in containers where this package is not installed).

    from madengine_rocprof import wrapper
    p = wrapper.plan(["--kernel-trace", "--stats"], ["python3", "train.py"], "/abs/out")   # nothing runs
    r = wrapper.run(["--kernel-trace", "--stats"], ["python3", "train.py"], "/abs/out")    # runs, writes manifest
    r.exit_code, r.manifest["outcome"], r.manifest["outputs"]
"""
from __future__ import annotations

from madengine_rocprof.errors import UserError
from madengine_rocprof.wrapper.detect import EXIT_NO_PROFILER
from madengine_rocprof.wrapper.execute import Result, execute, no_profiler_manifest
from madengine_rocprof.wrapper.planner import Plan, build, output_dir_of

__all__ = ["plan", "run", "Plan", "Result", "UserError"]


def plan(profiler_args: list[str], app_argv: list[str], output_dir: str | None = None, profiler: str | None = None,
         env=None, *, profile: str | None = None, cwd: str | None = None, drop_unsupported: bool | None = None) -> Plan:
    """The final command, environment and output directory, without running anything (UserError on bad input)."""
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
    """Run the app under the profiler. Bad input raises UserError (nothing written); a missing profiler gives
    outcome `no_profiler` (exit 127) with a manifest; otherwise the exit code is the app's."""
    try:
        p = plan(profiler_args, app_argv, output_dir, profiler, env, profile=profile, cwd=cwd,
                 drop_unsupported=drop_unsupported)
    except UserError as err:
        if err.exit_code != EXIT_NO_PROFILER:
            raise
        return no_profiler_manifest(output_dir_of(profiler_args, app_argv, output_dir, cwd), list(app_argv), str(err))
    return execute(p, env)
