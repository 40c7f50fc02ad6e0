"""Callers hold a `Backend` and nothing else: outside `kubetrain/backends/`, no code compares backend names
and none asks which backend class it holds. What differs between backends is declared by the backend
(its options, the protocol, what it returns), so a new backend needs no branch in the CLI, the web view,
the Python API or the status line. (lint-imports holds the imports: `cli` and `ui` reach a backend only
through `backends.base`; this holds the code that imports nothing.)"""

from __future__ import annotations

import ast
from pathlib import Path

import kubetrain
from kubetrain.backends.base import BACKENDS
from kubetrain.contract.choices import BACKEND_ALIASES

PACKAGE = Path(kubetrain.__file__).parent
BACKEND_NAMES = {*BACKENDS, *BACKEND_ALIASES}


def _classes(paths: list[Path]) -> set[str]:
    return {n.name for path in paths for n in ast.walk(ast.parse(path.read_text())) if isinstance(n, ast.ClassDef)}


def backend_classes(package: Path) -> set[str]:
    """Every class the backends define (the backends themselves, their descriptions, their change feeds), but
    for a name the rest of the package defines for itself too (`foreign.walker.Located` is no backend's)."""
    inside = [p for folder in ("local", "kubernetes") for p in (package / "backends" / folder).rglob("*.py")]
    outside = [p for p in package.rglob("*.py") if p.relative_to(package).parts[0] != "backends"]
    return _classes(inside) - _classes(outside)


def _literals(node: ast.expr) -> list[str]:
    """The strings a comparison operand is made of (`"local"`, or each of `("local", "k8s")`)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        return [s for element in node.elts for s in _literals(element)]
    return []


def _names_a_backend(node: ast.expr) -> bool:
    """An expression that is a backend's name: `x.backend`, `backend_of(args)`, `backend_name(...)`."""
    if isinstance(node, ast.Attribute):
        return node.attr == "backend"
    if isinstance(node, ast.Call):
        func = node.func
        called = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
        return called in ("backend_of", "backend_name")
    return False


def _is_resolver_source(node: ast.expr) -> bool:
    """`args.source`: `kubetrain resolve --source kubernetes` names where a replica reads its cluster from (the
    API server or the env contract), not a backend."""
    return isinstance(node, ast.Attribute) and node.attr == "source"


def violations(package: Path) -> list[str]:
    """Each comparison of backend names and each isinstance on a backend's class outside `backends/`."""
    classes = backend_classes(package)
    found = []
    for path in sorted(package.rglob("*.py")):
        relative = path.relative_to(package.parent)
        if relative.parts[:2] == ("kubetrain", "backends"):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            where = f"{relative}:{getattr(node, 'lineno', 0)}"
            if isinstance(node, ast.Compare):
                operands = [node.left, *node.comparators]
                if any(_is_resolver_source(o) for o in operands):
                    continue
                if any(isinstance(o, ast.Constant) and o.value is None for o in operands):
                    continue  # `args.backend is None`: whether one was named, not which
                if any(name in BACKEND_NAMES for o in operands for name in _literals(o)):
                    found.append(f"{where}: compares with a backend's name: {ast.unparse(node)}")
                elif any(_names_a_backend(o) for o in operands):
                    found.append(f"{where}: compares a backend's name: {ast.unparse(node)}")
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "isinstance":
                kinds = node.args[1:2]
                named = [k for kind in kinds for k in (kind.elts if isinstance(kind, ast.Tuple) else [kind])]
                for kind in named:
                    name = kind.attr if isinstance(kind, ast.Attribute) else getattr(kind, "id", "")
                    if name in classes:
                        found.append(f"{where}: asks which backend class it holds: {ast.unparse(node)}")
    return found


def test_no_caller_compares_backend_names_or_types() -> None:
    assert violations(PACKAGE) == []


def test_the_check_sees_what_it_forbids(tmp_path: Path) -> None:
    """The rule finds each shape the callers used before they saw only the Backend."""
    package = tmp_path / "kubetrain"
    for folder in ("backends/local", "backends/kubernetes", "cli"):
        (package / folder).mkdir(parents=True)
    (package / "backends/local/backend.py").write_text("class LocalBackend:\n    name = 'local'\n")
    (package / "backends/kubernetes/changes.py").write_text("class ClusterChanges:\n    pass\n")
    (package / "cli/caller.py").write_text(
        "def f(args, result, status, backend, feed, name):\n"
        "    a = backend_of(args) != 'local'\n"
        "    b = result.backend == 'kubernetes'\n"
        "    c = name in ('k8s', 'other')\n"
        "    d = status.backend == name\n"
        "    e = isinstance(backend, LocalBackend)\n"
        "    g = isinstance(feed, (int, changes.ClusterChanges))\n"
        "    h = args.source == 'kubernetes'  # the resolver's source, not a backend\n"
        "    i = backend.name  # reading a name to show it is fine\n"
        "    j = args.backend is None  # whether one was named, not which\n"
        "    k = isinstance(x, Located)  # a class of the same name outside the backends\n"
    )
    (package / "cli/located.py").write_text("class Located:\n    pass\n")
    (package / "backends/kubernetes/lookup.py").write_text("class Located:\n    pass\n")
    found = violations(package)
    assert [line.split(":")[1] for line in found] == ["2", "3", "4", "5", "6", "7"], found
