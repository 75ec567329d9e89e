"""Build hook: copy the shipped resources (madengine_rocprof/resources.py: RESOURCES) into the wheel.

Metadata lives in setup.cfg. An editable install reads the resources from the checkout instead.
"""

import importlib.util
import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent


def _resource_list():
    # resources.py is standard library only; load it by path so the build needs none of our dependencies.
    spec = importlib.util.spec_from_file_location("_mr_resources", HERE / "madengine_rocprof" / "resources.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.RESOURCES


class BuildPyWithResources(build_py):
    def run(self):
        super().run()
        if getattr(self, "editable_mode", False):
            return
        dest = Path(self.build_lib) / "madengine_rocprof" / "_resources"
        for rel in _resource_list():
            src, out = HERE / rel, dest / rel
            if not src.exists():
                raise SystemExit(f"setup.py: shipped resource {rel} is missing from {HERE}")
            out.parent.mkdir(parents=True, exist_ok=True)
            if src.is_dir():
                shutil.copytree(src, out, dirs_exist_ok=True, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
            else:
                shutil.copy2(src, out)


setup(cmdclass={"build_py": BuildPyWithResources})
