"""Which embedded-tracer backend a process uses: CUPTI (cupti-python) on CUDA when it imports, else torch.profiler.

MADENGINE_ROCPROF_TRACER_BACKEND=auto|cupti|torch overrides; `cupti` where it cannot work falls back to
torch.profiler with a warning (the trace is still written, and the manifest names the backend used).
"""
from __future__ import annotations

ENV_BACKEND = "MADENGINE_ROCPROF_TRACER_BACKEND"
CHOICES = ("auto", "cupti", "torch")


def choose(setting: str | None, *, cuda: bool, cupti_error: str | None) -> tuple[str, str, str | None]:
    """(backend, why, warning). `cuda`: torch sees a CUDA GPU; `cupti_error`: why cupti cannot import (None if it
    does)."""
    wanted = (setting or "auto").strip().lower() or "auto"
    warning = None
    if wanted not in CHOICES:
        warning = f"{ENV_BACKEND}={setting!r} is not one of {', '.join(CHOICES)}: using auto"
        wanted = "auto"
    if wanted == "torch":
        return "torch", f"{ENV_BACKEND}=torch", warning
    if not cuda:
        why = "no CUDA GPU in this process: torch.profiler (CPU operators, or ROCm kernels through roctracer)"
        if wanted == "cupti":
            warning = f"{ENV_BACKEND}=cupti needs a CUDA GPU; using torch.profiler"
        return "torch", why, warning
    if cupti_error is not None:
        if wanted == "cupti":
            warning = f"{ENV_BACKEND}=cupti but cupti-python does not import ({cupti_error}); using torch.profiler"
        return "torch", f"cupti-python not importable ({cupti_error}): torch.profiler", warning
    return "cupti", ("chosen by " + f"{ENV_BACKEND}=cupti" if wanted == "cupti" else
                     "CUDA GPU and cupti-python importable"), warning


def _installed_version(module: str, distribution: str) -> str | None:
    """`distribution`'s version when `module` is importable in this Python (found, not imported), else None."""
    import importlib.metadata
    import importlib.util

    try:
        if importlib.util.find_spec(module) is None:
            return None
        return importlib.metadata.version(distribution)
    except (ImportError, ValueError, importlib.metadata.PackageNotFoundError):
        return None


def cupti_python_version() -> str | None:
    """Installed cupti-python's version in this Python (without importing it), or None."""
    return _installed_version("cupti", "cupti-python")


def torch_version() -> str | None:
    """torch's version in this Python (without importing it), or None when torch is not installed."""
    return _installed_version("torch", "torch")


NO_TORCH = ("torch is not installed in this Python ({python}): the embedded tracer runs inside the traced Python "
            "app and needs torch there, so a local run with this Python stops with ModuleNotFoundError (fix: pip "
            "install 'madengine-rocprof[torch]' or torch; Docker runs bring their own torch)")


def describe(env, nvidia: bool) -> str:
    """One line for `doctor`: the backend a traced CUDA process of this Python would use, and why; that there is
    none when this Python has no torch (a wheel install without the [torch] extra)."""
    import sys

    if torch_version() is None:
        return "tracer backend: none: " + NO_TORCH.format(python=sys.executable)
    version = cupti_python_version()
    name, why, warning = choose(env.get(ENV_BACKEND), cuda=nvidia,
                                cupti_error=None if version else "cupti-python is not installed")
    text = f"tracer backend: {name} ({why}; cupti-python {version or 'not installed'})"
    return text + (f"; warning: {warning}" if warning else "")
