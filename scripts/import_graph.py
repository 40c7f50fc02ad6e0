"""The file-level import graph of a package, every import counted: top-level, inside functions, under
TYPE_CHECKING (grimp, which lint-imports uses, reads them all).

    python scripts/import_graph.py                                  # kubetrain.backends.kubernetes
    python scripts/import_graph.py --package kubetrain.backends.kubernetes --edges
    PYTHONPATH=/path/to/other/checkout python scripts/import_graph.py   # another tree, the same layers

Prints: the largest circle of files (a strongly connected component), the imports that run back up the layers
of the package's import-linter contract in pyproject.toml (the one whose `containers` is the package; a module
not named in it counts as no layer), and how many imports sit inside functions. The layers are read from this
checkout's pyproject.toml, so an older tree is measured against the same picture.
"""

from __future__ import annotations

import argparse
import ast
import json
import sys
import tomllib
from collections.abc import Iterable, Mapping
from pathlib import Path

import grimp

ROOT = Path(__file__).resolve().parent.parent


def layers_of(package: str, pyproject: Path) -> list[list[str]]:
    """The layers (top first) of the layers contract whose container is `package`; each a list of siblings."""
    config = tomllib.loads(pyproject.read_text())
    for contract in config["tool"]["importlinter"]["contracts"]:
        if contract.get("type") == "layers" and package in (contract.get("containers") or []):
            return [[f"{package}.{name.strip()}" for name in layer.replace(":", "|").split("|")]
                    for layer in contract["layers"]]
    return []


def layer_index(module: str, layers: list[list[str]]) -> int | None:
    for i, siblings in enumerate(layers):
        if any(module == s or module.startswith(s + ".") for s in siblings):
            return i
    return None


def sccs(nodes: Iterable[str], edges: Mapping[str, set[str]]) -> list[list[str]]:
    """Tarjan's strongly connected components, iteratively (no recursion limit)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    out: list[list[str]] = []
    counter = 0
    for start in nodes:
        if start in index:
            continue
        work = [(start, iter(sorted(edges.get(start, ()))))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            advanced = False
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges.get(child, ())))))
                    advanced = True
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                out.append(sorted(component))
    return out


def inner_imports(path: Path) -> int:
    """Import statements inside functions, in one file."""
    tree = ast.parse(path.read_text())
    count = 0

    def walk(node: ast.AST, in_function: bool) -> None:
        nonlocal count
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.Import | ast.ImportFrom) and in_function:
                count += 1
            walk(child, in_function or isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef))

    walk(tree, False)
    return count


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--package", default="kubetrain.backends.kubernetes")
    parser.add_argument("--pyproject", type=Path, default=ROOT / "pyproject.toml")
    parser.add_argument("--edges", action="store_true", help="list the upward imports and the circle")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()

    top = args.package.split(".")[0]
    # This checkout, unless PYTHONPATH names another tree first (the package as an editable install is found by
    # an import hook grimp does not use).
    sys.path.append(str(ROOT))
    graph = grimp.build_graph(top, cache_dir=None)
    modules = sorted(m for m in graph.modules if m == args.package or m.startswith(args.package + "."))
    inside = set(modules)
    edges = {m: {i for i in graph.find_modules_directly_imported_by(m) if i in inside} for m in modules}
    # A package's __init__ importing its own submodules is how a package exposes them, not a circle of files.
    components = [c for c in sccs(modules, edges) if len(c) > 1]
    largest = max(components, key=len, default=[])

    layers = layers_of(args.package, args.pyproject)
    upward = []
    for importer in modules:
        low = layer_index(importer, layers)
        for imported in sorted(edges[importer]):
            high = layer_index(imported, layers)
            if low is not None and high is not None and high < low:
                for detail in graph.get_import_details(importer=importer, imported=imported) or [{}]:
                    upward.append((importer, imported, detail.get("line_number"), detail.get("line_contents")))
    __import__(top)
    package_dir = Path(sys.modules[top].__file__ or "").parent
    sub = Path(*args.package.split(".")[1:])
    files = sorted((package_dir / sub).rglob("*.py"))
    in_functions = sum(inner_imports(f) for f in files)

    result = {
        "package": args.package,
        "tree": str(package_dir),
        "files": len(files),
        "imports_between_its_files": sum(len(v) for v in edges.values()),
        "circles": len(components),
        "largest_circle": len(largest),
        "upward_imports": len(upward),
        "imports_inside_functions": in_functions,
        "layers": len(layers),
    }
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        for key, value in result.items():
            print(f"{key}: {value}")
    if args.edges:
        if largest:
            print("largest circle:", ", ".join(m.removeprefix(args.package + ".") for m in largest))
        for importer, imported, line, text in upward:
            print(f"up: {importer.removeprefix(args.package + '.')}:{line} -> "
                  f"{imported.removeprefix(args.package + '.')}   {text}")


if __name__ == "__main__":
    main()
