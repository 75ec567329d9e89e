"""Command line of the stdlib wrapper, shared by `madengine-rocprof wrap` and scripts/rocprof_wrapper.sh."""
from __future__ import annotations

import json
import os
import shlex
import sys

from madengine_rocprof.errors import EXIT_INVALID, UserError, from_os_error, too_deep
from madengine_rocprof.wrapper import planner as planning
from madengine_rocprof.wrapper.detect import EXIT_NO_PROFILER
from madengine_rocprof.wrapper.execute import execute, no_profiler_manifest

USAGE = """usage: {prog} [wrapper options] [rocprofv3 options] -- APP [ARGS...]

Runs APP under the detected profiler (rocprofv3, legacy rocprof, ncu, nsys, or the embedded torch.profiler
tracer) with rocprofv3's option vocabulary, per-process output files and OUT/manifest.json.

wrapper options:
  --profiler NAME       auto|rocprofv3|rocprof|ncu|nsys|embedded (env MADENGINE_ROCPROF_PROFILER)
  --profile NAME        lightweight|compute_bound|memory_bound|pc_sampling|multi_gpu (env MADENGINE_ROCPROF_PROFILE)
  --drop-unsupported    drop options the chosen profiler cannot honour (env MADENGINE_ROCPROF_DROP_UNSUPPORTED=1)
  --dry-run             print the plan as JSON and run nothing
  --fail-on-no-output   exit 3 when the app succeeded but nothing was captured
  --no-filter           do not filter profiler noise lines
rocprofv3 options: -d/--output-directory OUT (default ./rocprof_output), --kernel-trace, --stats, --pmc ...,
  -i FILE, ...
embedded tracer settings (environment; all in docs/wrapper.md): MADENGINE_ROCPROF_TRACER_STEPS, _SKIP_STEPS,
  _MAX_SECONDS, _BACKEND=auto|cupti|torch, _CPU=1, and _SHAPES=1: record PyTorch operator shapes (torch.profiler
  backend) so that `report` gives the per-operator efficiency table
"""


def main(argv: list[str] | None = None, prog: str | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    prog = prog or os.environ.get("MADENGINE_ROCPROF_WRAPPER_PROG") or "rocprof_wrapper.sh"
    if not argv or argv[0] in ("-h", "--help"):
        print(USAGE.format(prog=prog), file=sys.stdout if argv else sys.stderr)
        return 0 if argv else 2
    try:
        from madengine_rocprof.wrapper.options import split_dashdash

        before, app = split_dashdash(argv, prog=prog)
        try:
            p = planning.build(before, app, prog=prog)
        except OSError as exc:
            raise from_os_error(exc, "cannot read the profiler input") from None
        except RecursionError:
            raise too_deep("cannot read the profiler input") from None
    except UserError as err:
        if err.exit_code == EXIT_NO_PROFILER:
            print(f"{prog}: error: {err}", file=sys.stderr)
            if "--dry-run" in before:
                return err.exit_code
            out = planning.output_dir_of(before, app)
            no_profiler_manifest(out, app, str(err))
            print(
                f"{prog}: the application was NOT run; manifest: {os.path.join(out, 'manifest.json')}", file=sys.stderr
            )
            return err.exit_code
        print(f"{prog}: error: {err}", file=sys.stderr)
        return err.exit_code
    for message in p.messages:
        print(f"{prog}: {message}", file=sys.stderr)
    if p.settings.get("dry_run"):
        print(json.dumps(p.to_json(), indent=2, allow_nan=False))
        return 0
    print(f"{prog}: {p.profiler.name} ({p.profiler.why}): {shlex.join(p.argv)}", file=sys.stderr)
    try:
        result = execute(p)
    except OSError as exc:  # the output folder cannot be made (read-only, a file in the way): the app did not run
        print(f"{prog}: error: {from_os_error(exc, 'cannot prepare the output folder')}", file=sys.stderr)
        print(f"{prog}: the application was NOT run", file=sys.stderr)
        return EXIT_INVALID
    m = result.manifest
    print(f"{prog}: outcome {m['outcome']}, exit {m['exit_code']}, {len(m['outputs'])} file(s),"
          f" {m['dispatch_count'] if m['dispatch_count'] is not None else 'no'} dispatches in {p.output_dir}",
          file=sys.stderr)
    for message in m["messages"][len(p.messages):]:
        print(f"{prog}: {message}", file=sys.stderr)
    return result.exit_code

