"""The modules of symad import each other without a circle.

Before the rule tables moved out of ``primitives.py``, ``graph -> primitives
-> numpy -> tracer -> graph`` was one import circle. This reads every
``import`` statement of the package with :mod:`ast` (those inside functions
too, since a deferred import is still a dependency) and asserts that the
module dependency graph is acyclic. Importing ``symad.a.b`` runs ``symad.a``
as well, so that counts as a dependency on both; a module's own parent
packages are not counted (Python runs them first anyway).
"""

from __future__ import annotations

import ast
from pathlib import Path

import symad

PACKAGE_DIR = Path(symad.__file__).resolve().parent


def _modules() -> dict[str, Path]:
    modules = {}
    for path in PACKAGE_DIR.rglob("*.py"):
        parts = ("symad", *path.relative_to(PACKAGE_DIR).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        modules[".".join(parts)] = path
    return modules


def _imported(node: ast.AST, module: str, is_package: bool, modules: dict) -> list[str]:
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if node.level:  # a relative import
        base = module.split(".") if is_package else module.split(".")[:-1]
        base = base[:len(base) - (node.level - 1)]
        source = ".".join(base + ([node.module] if node.module else []))
    else:
        source = node.module or ""
    # "from symad import numpy" imports the module symad.numpy; "from symad.graph import X" symad.graph.
    return [f"{source}.{alias.name}" if f"{source}.{alias.name}" in modules else source
            for alias in node.names]


def dependency_graph() -> dict[str, set[str]]:
    modules = _modules()
    edges = {name: set() for name in modules}
    for name, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in ast.walk(tree):
            if not isinstance(node, (ast.Import, ast.ImportFrom)):
                continue
            for target in _imported(node, name, path.name == "__init__.py", modules):
                parts = target.split(".")
                for end in range(1, len(parts) + 1):
                    dependency = ".".join(parts[:end])
                    if (dependency in modules and dependency != name
                            and not name.startswith(dependency + ".")):
                        edges[name].add(dependency)
    return edges


def find_cycle(edges: dict[str, set[str]]) -> list[str] | None:
    """One import circle as a list of modules (first == last), or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: finished
    path: list[str] = []

    def visit(module: str) -> list[str] | None:
        state[module] = 1
        path.append(module)
        for dependency in sorted(edges[module]):
            if state.get(dependency) == 1:
                return path[path.index(dependency):] + [dependency]
            if dependency not in state:
                cycle = visit(dependency)
                if cycle:
                    return cycle
        path.pop()
        state[module] = 2
        return None

    for module in sorted(edges):
        if module not in state:
            cycle = visit(module)
            if cycle:
                return cycle
    return None


def test_the_dependency_graph_is_read():
    edges = dependency_graph()
    # The layering the rule tables rely on: rules -> numpy -> tracer -> graph -> ir.primitive,
    # and the catalogue -> ir.primitive.
    assert "symad.ir.primitive" in edges["symad.graph"]
    assert "symad.numpy" in edges["symad.rules.partials"]
    assert "symad.primitives" in edges["symad.rules.taylor"]
    assert "symad.graph" in edges["symad.tracer"]
    assert "symad.ir.primitive" in edges["symad.primitives"]
    assert not any(module.startswith("symad.") and module not in ("symad.atoms", "symad.ir",
                                                                 "symad.ir.primitive", "symad.lazy_scipy")
                   for module in edges["symad.primitives"])


def _reaches(edges: dict[str, set[str]], module: str) -> set[str]:
    """Every module ``module`` imports, directly or through others."""
    reached, pending = set(), [module]
    while pending:
        for dependency in edges[pending.pop()]:
            if dependency not in reached:
                reached.add(dependency)
                pending.append(dependency)
    return reached


CATALOGUE = ("symad.primitives", "symad.array_primitives", "symad.linalg_primitives", "symad.special")


def test_the_graph_imports_no_catalogue():
    # The graph sits below the catalogue: it finds the few primitives it records on its own
    # account (coercions, broadcasting) by role, in symad.ir.primitive.BUILDER_ROLES.
    edges = dependency_graph()
    assert not set(CATALOGUE) & _reaches(edges, "symad.graph")


def test_the_primitive_machinery_imports_no_catalogue():
    # The Primitive type, the registry and the rule tables' type import no other symad module.
    edges = dependency_graph()
    assert not edges["symad.ir.primitive"]


def test_find_cycle_finds_a_circle():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_symad_has_no_import_circle():
    cycle = find_cycle(dependency_graph())
    assert cycle is None, "import circle: " + " -> ".join(cycle)


# ---------------------------------------------------------------------------
# Layers: every import runs downwards
# ---------------------------------------------------------------------------

#: The package's layers, bottom first (docs/how-it-works.md, "Where each step lives"). A
#: module belongs to the layer of the longest prefix that names it; a module may import
#: its own layer and the ones below, never one above.
LAYERS = (
    ("symad.errors", "symad.config", "symad.outside", "symad.pytree", "symad.atoms",
     "symad.gc_pause", "symad.array_runtime", "symad.inlining", "symad.tracing_errors",
     "symad.lazy_scipy"),
    ("symad.ir",),
    ("symad.graph",),
    ("symad.primitives", "symad.array_primitives", "symad.linalg_primitives", "symad.atom_arrays"),
    ("symad.array_protocol",),
    ("symad.tracer", "symad.leaves", "symad.custom"),
    ("symad.numpy", "symad.special"),
    ("symad.rules",),
    ("symad.transforms",),
    ("symad.export", "symad.loopnest"),
    ("symad.compile",),
    ("symad.function",),
    ("symad.derivatives", "symad.series_calls", "symad.sympy_import"),
    ("symad.api", "symad.testing", "symad.cli", "symad.__main__", "symad"),
)

#: Inside the compiler, bottom first: shared infrastructure, the lowerings, the table of
#: backends, the pipeline, the package face.
COMPILE_LAYERS = (
    ("symad.compile.threads", "symad.compile.memory", "symad.compile.batch",
     "symad.compile.registry", "symad.compile.progress"),
    ("symad.compile.evaluator", "symad.compile.modules"),
    ("symad.compile.disk_cache", "symad.compile.scalar", "symad.compile.precise",
     "symad.compile.arrays.evaluator"),
    ("symad.compile.arrays",),
    # tiers decides with the disk cache and the numba backend's limits (early trials).
    ("symad.compile.backends", "symad.compile.tiers"),
    ("symad.compile.pipeline", "symad.compile.dask_support"),
    ("symad.compile",),
)


def layer_of(module: str, layers=LAYERS) -> int:
    """The index of the layer whose longest prefix names ``module``."""
    best, found = -1, None
    for index, prefixes in enumerate(layers):
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and len(prefix) > best:
                best, found = len(prefix), index
    assert found is not None, f"{module} is in no layer: add it to tests/test_imports.py"
    return found


def upward_imports(edges: dict[str, set[str]], layers, scope: str = "symad") -> list[str]:
    """The imports, among modules under ``scope``, from a lower layer to a higher one."""
    inside = [m for m in edges if m == scope or m.startswith(scope + ".")]
    return [f"{module} ({layer_of(module, layers)}) -> {dependency} ({layer_of(dependency, layers)})"
            for module in inside for dependency in edges[module]
            if (dependency == scope or dependency.startswith(scope + "."))
            and layer_of(dependency, layers) > layer_of(module, layers)]


def test_every_import_runs_down_the_layers():
    assert upward_imports(dependency_graph(), LAYERS) == []


def test_every_import_inside_the_compiler_runs_down_its_layers():
    assert upward_imports(dependency_graph(), COMPILE_LAYERS, "symad.compile") == []


def test_no_module_imports_its_own_package_face():
    # A sub-module importing the package it belongs to (symad.compile.scalar.levels
    # importing symad.compile) runs back up: the face re-exports from below it.
    modules = _modules()
    back_up = []
    for name, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                for target in _imported(node, name, path.name == "__init__.py", modules):
                    if name.startswith(target + ".") and target != "symad" and target in modules:
                        back_up.append(f"{name} -> {target}")
    assert back_up == []


def test_an_upward_import_is_caught():
    edges = {"symad.graph": {"symad.api"}, "symad.api": set()}
    assert upward_imports(edges, LAYERS) == ["symad.graph (2) -> symad.api (13)"]


def test_importing_symad_imports_neither_scipy_nor_numba():
    # SciPy (0.8 s, 30 MB) and numba (0.4 s, 50 MB) come only with what needs them: the
    # special functions' first call, a SciPy ufunc on a traced value, the numba backend.
    import subprocess
    import sys

    script = ("import sys, numpy as np, symad as sd\n"
              "G = sd.grad(lambda x: np.sin(x) * x)\n"
              "assert abs(G(0.5) - (np.cos(0.5) * 0.5 + np.sin(0.5))) < 1e-15\n"
              "print(sorted({m.split('.')[0] for m in sys.modules} & {'scipy', 'numba'}))\n")
    assert subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          check=True).stdout.strip() == "[]"
