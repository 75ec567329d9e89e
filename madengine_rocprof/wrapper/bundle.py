"""A self-contained copy of the wrapper for containers: one zipapp holding the wrapper and the tracer.

madengine copies `scripts/common/tools/` into the container; `rocprof_wrapper.sh` runs the zipapp placed next to it
(`madengine_rocprof_wrapper.pyz`). Only python3 is needed there: both packages use the standard library (and
torch, which the workload brings, for the tracer).
"""
from __future__ import annotations

import os
import shutil
import zipfile

from madengine_rocprof.atomic import FileSet, atomic_file

PYZ_NAME = "madengine_rocprof_wrapper.pyz"
SCRIPT_NAME = "rocprof_wrapper.sh"
_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # .../madengine_rocprof (maybe in a zip)
_MAIN = "from madengine_rocprof.wrapper.cli import main\n\nraise SystemExit(main())\n"
_FIXED_TIME = (2020, 1, 1, 0, 0, 0)  # reproducible archives


def package_root() -> str:
    """The directory (or zip) that holds the `madengine_rocprof` package."""
    return os.path.dirname(_PACKAGE_DIR)


def inject_dir() -> str:
    """The directory (possibly inside the zipapp) whose sitecustomize.py starts the embedded tracer."""
    return os.path.join(_PACKAGE_DIR, "tracer", "inject")


def _sources() -> list[tuple[str, str]]:
    """(path in archive, path on disk) for every module the bundle needs."""
    if not os.path.isdir(_PACKAGE_DIR):
        raise FileNotFoundError(f"{_PACKAGE_DIR} is not a directory: build the bundle from a source checkout")
    files = [("madengine_rocprof/__init__.py", os.path.join(_PACKAGE_DIR, "__init__.py")),
             ("madengine_rocprof/errors.py", os.path.join(_PACKAGE_DIR, "errors.py")),
             ("madengine_rocprof/atomic.py", os.path.join(_PACKAGE_DIR, "atomic.py")),
             # the input layer: the wrapper and the tracer check their settings with its rules
             ("madengine_rocprof/inputs.py", os.path.join(_PACKAGE_DIR, "inputs.py"))]
    for sub in ("wrapper", "tracer", os.path.join("tracer", "inject")):
        folder = os.path.join(_PACKAGE_DIR, sub)
        for name in sorted(os.listdir(folder)):
            if name.endswith(".py"):
                files.append((f"madengine_rocprof/{sub.replace(os.sep, '/')}/{name}", os.path.join(folder, name)))
    native = os.path.join(_PACKAGE_DIR, "tracer", "native")  # C sources the tracer compiles on first use
    for name in sorted(os.listdir(native)):
        if name.endswith(".c"):
            files.append((f"madengine_rocprof/tracer/native/{name}", os.path.join(native, name)))
    return files


def build_pyz(dest: str, files: FileSet | None = None) -> str:
    """Write the zipapp to `dest` (atomically; staged in `files` when given) and return its path."""
    with files.open(dest, "wb", executable=True) if files is not None else atomic_file(dest, "wb") as raw:
        raw.write(b"#!/usr/bin/env python3\n")
        with zipfile.ZipFile(raw, "w", zipfile.ZIP_DEFLATED) as zf:
            zf.writestr(zipfile.ZipInfo("__main__.py", _FIXED_TIME), _MAIN)
            for arcname, path in _sources():
                with open(path, "rb") as fh:
                    info = zipfile.ZipInfo(arcname, _FIXED_TIME)
                    info.compress_type = zipfile.ZIP_DEFLATED
                    zf.writestr(info, fh.read())
    if files is None:
        os.chmod(dest, 0o755)
    return dest


def script_source() -> str:
    """scripts/rocprof_wrapper.sh from the checkout or the installed package's resources."""
    from madengine_rocprof import resources  # not in the zipapp: only the host side installs the script

    if not resources.WRAPPER_SCRIPT.is_file():
        raise FileNotFoundError(f"{resources.WRAPPER_SCRIPT} not found: reinstall madengine-rocprof")
    return str(resources.WRAPPER_SCRIPT)


def install_into(tools_dir: str, files: FileSet | None = None) -> list[str]:
    """Place rocprof_wrapper.sh and the zipapp in madengine's scripts/common/tools/ (or any folder); staged in
    `files` (a command's output set) when given, else each written atomically now."""
    if files is None:
        with FileSet() as staged:
            return install_into(tools_dir, staged)
    script = os.path.join(tools_dir, SCRIPT_NAME)
    with open(script_source(), "rb") as source, files.open(script, "wb", executable=True) as out:
        shutil.copyfileobj(source, out)
    return [script, build_pyz(os.path.join(tools_dir, PYZ_NAME), files)]
