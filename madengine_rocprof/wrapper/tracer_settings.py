"""The embedded tracer's settings: one table of its MADENGINE_ROCPROF_TRACER_* environment variables, read with the
input layer's rules (`inputs.env_number`, `env_flag`, `env_choice`: decimal numbers in range, on/off, a known word).

Two readers, one table: the wrapper checks them before the app starts (`check`: a bad value is exit 2 naming the
variable), and the tracer reads them inside the workload (`read`: a bad value is a warning and the default, so the
user's app never fails because of the tracer). It lives beside the wrapper because the wrapper imports nothing from
the tracer; stdlib only, as both run inside workloads.
"""
from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import Any

from madengine_rocprof import inputs
from madengine_rocprof.errors import UserError, UserErrors

PREFIX = "MADENGINE_ROCPROF_TRACER_"
RECORDERS = ("interpose", "activity")  # api_recorder.CHOICES (imported there from here)
BACKENDS = ("auto", "cupti", "torch")  # select.CHOICES
API_DOMAINS = ("runtime", "driver")
_STEPS = 1e12  # no run takes a trillion optimizer steps
_SECONDS = 1e9  # ~30 years
_KERNEL_ROWS = 1e12
_BUFFER_MB = 4096  # one CUPTI activity buffer; the default is 32 MiB


def _number(default: float, high: float, integer: bool = False) -> Callable[[Mapping[str, str], str], Any]:
    return lambda env, name: inputs.env_number(env, name, default, high=high, integer=integer)


def _flag(default: bool = False) -> Callable[[Mapping[str, str], str], Any]:
    return lambda env, name: inputs.env_flag(env, name, default)


def _choice(choices: tuple[str, ...], default: str) -> Callable[[Mapping[str, str], str], Any]:
    return lambda env, name: inputs.env_choice(env, name, choices, default)


# attribute -> (variable suffix, reader, default). The defaults are what an unset variable gives.
TABLE: dict[str, tuple[str, Callable[[Mapping[str, str], str], Any], Any]] = {
    "skip_steps": ("SKIP_STEPS", _number(0, _STEPS, integer=True), 0),
    "steps": ("STEPS", _number(0, _STEPS, integer=True), 0),
    "delay_s": ("DELAY_S", _number(0.0, _SECONDS), 0.0),
    "max_seconds": ("MAX_SECONDS", _number(0.0, _SECONDS), 0.0),
    "max_kernels": ("MAX_KERNELS", _number(2_000_000, _KERNEL_ROWS, integer=True), 2_000_000),
    "buffer_mb": ("BUFFER_MB", _number(0.0, _BUFFER_MB), 0.0),  # 0: the backend's default size
    "want_cpu": ("CPU", _flag(), False),
    "shapes": ("SHAPES", _flag(), False),  # torch.profiler backend: record_shapes=True, CPU operators kept
    "truncate": ("TRUNCATE", _flag(), False),
    "correlation": ("CORRELATION", _flag(), False),
    "api": ("API", _flag(), False),
    "memcpy": ("MEMCPY", _flag(), False),
    "stats": ("STATS", _flag(), False),
    "mangled": ("MANGLED", _flag(), False),
    "native_rows": ("NATIVE_ROWS", _flag(True), True),  # read by tracer/native_rows.enabled; checked here
    "backend": ("BACKEND", _choice(BACKENDS, "auto"), "auto"),
    "api_domain": ("API_DOMAIN", _choice(API_DOMAINS, "runtime"), "runtime"),
    # "" (unset): the tracer picks (interpose, or activity records for the driver domain)
    "api_recorder": ("API_RECORDER", _choice(RECORDERS, ""), ""),
}


def read(env: Mapping[str, str] | None = None, warn: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Every setting by attribute name. A bad value raises the input layer's error, or, with `warn`, is reported
    through it and replaced by the default (the tracer inside a workload)."""
    env = os.environ if env is None else env
    values: dict[str, Any] = {}
    for attr, (suffix, reader, default) in TABLE.items():
        try:
            values[attr] = reader(env, PREFIX + suffix)
        except UserError as err:
            if warn is None:
                raise
            values[attr] = default
            shown = f" ({default!r})" if default != "" else ""
            warn(f"{err.where}={err.what}: using the default{shown}; fix: {err.fix}")
    return values


def _conflicts(values: dict[str, Any]) -> list[UserError]:
    """Settings that are each valid but cannot hold together."""
    if values["shapes"] and values["backend"] == "cupti":
        return [UserError(f"{PREFIX}SHAPES=1 with {PREFIX}BACKEND=cupti: the CUPTI backend records GPU activity "
                          "and API calls, never PyTorch operators or their shapes", where=PREFIX + "SHAPES",
                          fix=f"unset {PREFIX}BACKEND (or set it to torch) to record shapes with torch.profiler, "
                              f"or unset {PREFIX}SHAPES")]
    return []


def check(env: Mapping[str, str] | None = None) -> None:
    """Every bad setting at once, as one error (exit 2) naming each variable; for the wrapper before the app runs."""
    problems: list[UserError] = []
    env = os.environ if env is None else env
    for suffix, reader, _default in TABLE.values():
        try:
            reader(env, PREFIX + suffix)
        except UserError as err:
            problems.append(err)
    if not problems:
        problems += _conflicts(read(env))
    if len(problems) == 1:
        raise problems[0]
    if problems:
        raise UserErrors(problems)
