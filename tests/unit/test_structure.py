"""The shape of the package, counted over the AST of every module (no imports run).

Three numbers the issue "One house" asks to keep at zero:

* **import cycles**: strongly connected groups of ``cronlock`` modules in the import
  graph. Every ``import`` counts wherever it is: at module level, inside a function,
  and under ``if TYPE_CHECKING:`` (a cycle hidden from the interpreter is still two
  modules that must be read together). ``from cronlock.x import y`` is an edge to
  ``cronlock.x.y`` when that is a module, else to ``cronlock.x``; importing a module
  does not count as importing its parent package.
* **private reaches**: a name starting with one ``_`` (dunders excepted) used from
  another module: ``obj._name`` where ``obj`` is not ``self``/``cls`` and the module
  does not itself define ``_name`` (as an attribute, function, class or variable);
  ``getattr``/``setattr``/``hasattr`` with such a literal name, under the same rule;
  and ``from m import _name`` where ``_name`` is not a module (private *modules* are
  the package's own and may be imported anywhere inside it).
* **long modules**: modules over :data:`MAX_LINES` lines.

``python tests/unit/test_structure.py [PACKAGE_DIR]`` prints the three counts and
what makes them up, for any checkout.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Callable

PACKAGE = Path(__file__).resolve().parents[2] / "cronlock"
MAX_LINES = 400

#: What is left to remove, counted on the way to zero (each step of the restructuring
#: lowers these; a count above its budget fails).
BUDGET = {"cycles": 0, "private reaches": 0, "long modules": 0}

#: Private names of other libraries that cronlock uses on purpose, each with its reason.
#: They are not another *cronlock* module's members, so they are not counted.
FOREIGN_PRIVATE: dict[str, str] = {
    "_SubParsersAction": "argparse's type of add_subparsers(); it has no public name",
    "_get_current_object": "werkzeug's documented way from a LocalProxy to its object",
    "_lock": "redis-py's ConnectionPool lock, held across fork() (see cronlock._forksafe)",
    "_getframe": "CPython's documented sys._getframe (cronlock.django: who is calling)",
    "_register_atexit": "threading's exit hook that runs before ThreadPoolExecutor threads are "
    "joined (cronlock._autostart; it falls back to atexit where it is missing)",
}

#: Modules allowed over MAX_LINES, each with its reason. Aim: empty.
LONG_MODULES: dict[str, str] = {}


def modules(package: Path) -> dict[str, Path]:
    """Dotted name -> file of every module of the package."""
    out = {}
    for path in sorted(package.rglob("*.py")):
        parts = list(path.relative_to(package.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def _resolve(name: str, found: dict[str, Path]) -> str | None:
    """The module ``name`` names, or its closest enclosing module inside the package."""
    while name and name not in found:
        name = name.rpartition(".")[0]
    return name or None


def _absolute(node: ast.ImportFrom, module: str, is_package: bool) -> str:
    if not node.level:
        return node.module or ""
    base = module.split(".")
    base = base if is_package else base[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join([*base, *([node.module] if node.module else [])])


def import_graph(package: Path) -> dict[str, set[str]]:
    """Module -> the package modules it imports (anywhere in its body)."""
    found = modules(package)
    graph: dict[str, set[str]] = {name: set() for name in found}
    root = package.name
    for name, path in found.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = _absolute(node, name, path.name == "__init__.py")
                targets = [f"{base}.{a.name}" for a in node.names]
            for target in targets:
                if target.split(".")[0] != root:
                    continue
                resolved = _resolve(target, found)
                if resolved is not None and resolved != name:
                    graph[name].add(resolved)
    return graph


def import_cycles(package: Path = PACKAGE) -> list[list[str]]:
    """Every group of modules that import each other (Tarjan's strongly connected sets)."""
    graph = import_graph(package)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph[node]):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(groups)


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__") and name not in FOREIGN_PRIVATE


def _own_names(tree: ast.AST) -> set[str]:
    """Private names the module itself defines (so using them on any object is its own)."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            names.add(node.attr)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
        if (
            isinstance(node, ast.Assign)
            and any(isinstance(t, ast.Name) and t.id == "__slots__" for t in node.targets)
            and isinstance(node.value, (ast.Tuple, ast.List))
        ):
            names.update(e.value for e in node.value.elts if isinstance(e, ast.Constant))
    return {n for n in names if _private(n)}


def private_reaches(package: Path = PACKAGE) -> Iterator[str]:
    """``module:line name`` for every use of another module's private member."""
    found = modules(package)
    for module, path in found.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        own = _own_names(tree)
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and _private(node.attr):
                value = node.value
                if isinstance(value, ast.Name) and value.id in {"self", "cls"}:
                    continue
                if node.attr not in own:
                    yield f"{module}:{node.lineno} .{node.attr}"
            elif (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id in {"getattr", "setattr", "hasattr"}
                and len(node.args) >= 2
                and isinstance(node.args[1], ast.Constant)
                and isinstance(node.args[1].value, str)
                and _private(node.args[1].value)
                and node.args[1].value not in own
            ):
                yield f"{module}:{node.lineno} {node.func.id}({node.args[1].value!r})"
            elif isinstance(node, ast.ImportFrom):
                base = _absolute(node, module, path.name == "__init__.py")
                for alias in node.names:
                    if _private(alias.name) and f"{base}.{alias.name}" not in found:
                        yield f"{module}:{node.lineno} from {base} import {alias.name}"


def long_modules(package: Path = PACKAGE) -> dict[str, int]:
    """Module -> line count, for modules over :data:`MAX_LINES`."""
    out = {}
    for module, path in modules(package).items():
        lines = len(path.read_text(encoding="utf-8").splitlines())
        if lines > MAX_LINES:
            out[module] = lines
    return out


def test_no_import_cycles() -> None:
    """No two cronlock modules import each other, even under TYPE_CHECKING."""
    cycles = import_cycles()
    assert len(cycles) <= BUDGET["cycles"], cycles


def test_no_module_reaches_into_another_modules_private_members() -> None:
    """Parts talk through public seams: nothing uses another module's `_private` names."""
    reaches = list(private_reaches())
    assert len(reaches) <= BUDGET["private reaches"], reaches


def test_no_module_is_over_the_line_limit() -> None:
    """Every module is readable in one sitting (or listed with its reason)."""
    over = {m: n for m, n in long_modules().items() if m not in LONG_MODULES}
    assert len(over) <= BUDGET["long modules"], over


def test_the_long_module_allowlist_has_no_stale_entries() -> None:
    """An allowlisted module that is short again leaves the list."""
    assert set(LONG_MODULES) <= set(long_modules())


def _in(module: str, *packages: str) -> bool:
    return any(module == p or module.startswith(p + ".") for p in packages)


def _runner_part(module: str) -> bool:
    return _in(module, "cronlock.runner") and module not in {
        "cronlock.runner",
        "cronlock.runner.facade",
    }


#: The arrows of the code map in docs/how-it-works.md: (who, what it must not import).
FORBIDDEN: list[tuple[str, Callable[[str], bool], Callable[[str], bool]]] = [
    (
        "stores import neither the runner nor the operator side",
        lambda m: _in(m, "cronlock.stores"),
        lambda t: _in(t, "cronlock.runner", "cronlock.ops", "cronlock.admin", "cronlock.health"),
    ),
    (
        "the operator side needs no runner",
        lambda m: _in(m, "cronlock.ops"),
        lambda t: _in(t, "cronlock.runner"),
    ),
    (
        "runner parts never import the facade, and of ops only ScheduleSpec",
        _runner_part,
        lambda t: (
            t in {"cronlock.runner", "cronlock.runner.facade"}
            or (_in(t, "cronlock.ops") and t != "cronlock.ops.schedules")
        ),
    ),
    (
        "the base knows neither stores, ops nor the runner",
        lambda m: (
            m.split(".")[-1]
            in {
                "errors",
                "clock",
                "context",
                "options",
                "outcomes",
                "registrar",
                "job",
                "observers",
                "schedules",
                "_cron",
                "_every",
            }
            and m.count(".") == 1
        ),
        lambda t: _in(t, "cronlock.stores", "cronlock.ops", "cronlock.runner"),
    ),
]


def test_the_code_map_holds() -> None:
    """Every import follows the arrows of the code map (docs/how-it-works.md)."""
    graph = import_graph(PACKAGE)
    wrong = [
        f"{why}: {module} imports {target}"
        for why, who, bad in FORBIDDEN
        for module, targets in graph.items()
        if who(module)
        for target in sorted(targets)
        if bad(target)
    ]
    assert wrong == []


def _imports_redis(path: Path) -> bool:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
        if isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names = [node.module]
        if any(n.split(".")[0] == "redis" for n in names):
            return True
    return False


def test_the_runner_and_the_operator_side_reach_redis_only_through_a_store() -> None:
    """Only stores/ (and the lock wing, client validation) talk to redis-py."""
    found = modules(PACKAGE)
    wrong = [
        m
        for m, path in found.items()
        if _in(m, "cronlock.runner", "cronlock.ops") and _imports_redis(path)
    ]
    assert wrong == []


def main(argv: list[str]) -> None:
    package = Path(argv[1]) if len(argv) > 1 else PACKAGE
    cycles = import_cycles(package)
    reaches = list(private_reaches(package))
    long = long_modules(package)
    print(f"import cycles: {len(cycles)}")
    for group in cycles:
        print("   ", " <-> ".join(group))
    print(f"private reaches: {len(reaches)}")
    for reach in reaches:
        print("   ", reach)
    print(f"modules over {MAX_LINES} lines: {len(long)}")
    for module, lines in sorted(long.items()):
        print(f"    {module}: {lines}")


if __name__ == "__main__":
    main(sys.argv)
