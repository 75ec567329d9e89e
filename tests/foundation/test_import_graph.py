"""The package's import graph, built from the source with ast: no cycles anywhere (lazy imports inside functions
and TYPE_CHECKING imports count too: they are cycles all the same), and the wrapper, which runs inside containers
from a zipapp, imports only the standard library, itself and the three modules the zipapp carries with it
(errors, atomic, inputs)."""
from __future__ import annotations

import ast
import sys
from pathlib import Path

PACKAGE = "madengine_rocprof"
ROOT = Path(__file__).resolve().parents[2] / PACKAGE
# bundle.py puts these beside the wrapper in the zipapp (madengine_rocprof_wrapper.pyz)
WRAPPER_CARRIES = {f"{PACKAGE}", f"{PACKAGE}.errors", f"{PACKAGE}.atomic", f"{PACKAGE}.inputs"}
# bundle.script_source runs on the host only (installing the script), never in the zipapp: its one import is allowed
HOST_ONLY = {(f"{PACKAGE}.wrapper.bundle", f"{PACKAGE}.resources")}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports_of(path: Path, name: str | None = None) -> set[str]:
    """Every module `path` (module `name`) imports, as absolute names, wherever the import statement sits."""
    name = name or module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            # `from pkg import module` imports pkg.module; `from module import name` imports module
            found.update(f"{base}.{alias.name}" if is_module(f"{base}.{alias.name}") else base for alias in node.names)
    return found


def is_module(name: str) -> bool:
    if not name.startswith(PACKAGE):
        return False
    path = ROOT.parent.joinpath(*name.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def graph() -> dict[str, set[str]]:
    modules = {module_name(p): p for p in ROOT.rglob("*.py")}
    edges: dict[str, set[str]] = {}
    for name, path in modules.items():
        edges[name] = {m for m in imports_of(path) if m in modules and m != name}
    return edges


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(edges[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def package_ancestors(name: str) -> set[str]:
    """A package's __init__ runs before its modules: importing a.b.c imports a and a.b."""
    parts = name.split(".")
    return {".".join(parts[:i]) for i in range(1, len(parts))}


def test_cycle_finder_finds_a_cycle():
    edges = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(edges) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_imports_resolve_to_the_modules_they_load(tmp_path):
    # `from pkg import module` is an edge to the module, `from module import name` to the module
    cli = imports_of(ROOT / "wrapper" / "cli.py")
    assert {f"{PACKAGE}.wrapper.planner", f"{PACKAGE}.wrapper.execute", f"{PACKAGE}.errors"} <= cli
    assert f"{PACKAGE}.errors.UserError" not in cli and f"{PACKAGE}.wrapper" not in cli
    # relative imports, inside a function too, resolve against the module's package
    src = tmp_path / "mod.py"
    src.write_text("from . import planner\nfrom ..errors import UserError\ndef f():\n    from .detect import x\n")
    assert imports_of(src, f"{PACKAGE}.wrapper.mod") == {f"{PACKAGE}.wrapper.planner", f"{PACKAGE}.errors",
                                                          f"{PACKAGE}.wrapper.detect"}


def test_the_package_has_no_import_cycles():
    assert cycles(graph()) == []


def test_the_wrapper_imports_only_the_standard_library_and_what_the_zipapp_carries():
    stdlib = set(sys.stdlib_module_names) | {"__future__"}
    modules = set(graph())
    bad = []
    for path in sorted((ROOT / "wrapper").rglob("*.py")):
        name = module_name(path)
        for imported in sorted(imports_of(path)):
            while imported not in modules and imported.count(".") and imported.startswith(PACKAGE):
                imported = imported.rpartition(".")[0]  # `from pkg.mod import name`: the module is pkg.mod
            top = imported.split(".")[0]
            if top in stdlib or (name, imported) in HOST_ONLY:
                continue
            if imported.startswith(f"{PACKAGE}.wrapper") or imported in WRAPPER_CARRIES:
                continue
            bad.append(f"{name} imports {imported}")
    assert bad == []
