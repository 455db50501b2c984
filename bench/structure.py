"""The house's shape in figures: product lines per app, imports between apps, back-arrows
against the floors, imports between apps made inside functions, and circles of modules that
import each other.

    .venv/bin/python bench/structure.py [--root DIR] [--list]

The floors (README, "Architecture") are the order of FLOORS, from the ground up; a back-arrow
is an import from a lower floor into a higher one, at module level or inside a function
(``if TYPE_CHECKING`` imports are counted apart). import-linter enforces the same rule
(pyproject.toml); this script counts, so a before and after can be compared on any checkout,
the ones without the rule included. Migrations are not product code and are left out.
"""

from __future__ import annotations

import argparse
import ast
import sys
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path

FLOORS = ["prbench", "orgs", "providers", "evaluation", "datasets", "experiments", "leaderboards"]
# The project package's URL and API registration, settings and server entry points put the apps
# together: they may import every app.
ENTRY_POINTS = ("prbench.urls", "prbench.api", "prbench.settings", "prbench.settings_test", "prbench.wsgi")


def is_entry_point(module: str) -> bool:
    return any(module == entry or module.startswith(entry + ".") for entry in ENTRY_POINTS)


@dataclass(frozen=True)
class Import:
    source: str
    target: str
    in_function: bool
    type_only: bool


def modules_of(root: Path) -> dict[str, Path]:
    found = {}
    for app in FLOORS:
        for path in sorted((root / app).rglob("*.py")):
            if "migrations" in path.parts or "demo_tasks" in path.parts:
                continue
            name = ".".join(path.relative_to(root).with_suffix("").parts)
            found[name.removesuffix(".__init__")] = path
    return found


def imports_of(name: str, tree: ast.AST, known: dict[str, Path]) -> list[Import]:
    found: list[Import] = []

    def visit(node: ast.AST, in_function: bool, type_only: bool) -> None:
        for child in ast.iter_child_nodes(node):
            inside = in_function or isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef)
            typing = type_only or (isinstance(child, ast.If) and "TYPE_CHECKING" in ast.dump(child.test))
            if isinstance(child, ast.Import):
                found.extend(Import(name, alias.name, inside, typing) for alias in child.names)
            elif isinstance(child, ast.ImportFrom) and child.module and child.level == 0:
                for alias in child.names:
                    full = f"{child.module}.{alias.name}"
                    found.append(Import(name, full if full in known else child.module, inside, typing))
            visit(child, inside, typing)

    visit(tree, False, False)
    return found


def app_of(module: str) -> str:
    return module.split(".")[0]


def owning_module(target: str, known: dict[str, Path]) -> str | None:
    while target not in known and "." in target:
        target = target.rsplit(".", 1)[0]
    return target if target in known else None


def circles(imports: list[Import], known: dict[str, Path]) -> list[list[str]]:
    """Strongly connected groups of modules, through every import but the type-only ones."""
    graph: dict[str, set[str]] = defaultdict(set)
    for found in imports:
        target = owning_module(found.target, known)
        if target and target != found.source and not found.type_only:
            graph[found.source].add(target)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []

    def connect(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in graph[node]:
            if nxt not in index:
                connect(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                group.append(top)
                if top == node:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    sys.setrecursionlimit(10_000)
    for module in known:
        if module not in index:
            connect(module)
    return groups


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", type=Path, default=Path(__file__).resolve().parents[1])
    parser.add_argument("--list", action="store_true", help="list each back-arrow and circle")
    args = parser.parse_args()
    known = modules_of(args.root)
    lines: Counter[str] = Counter()
    imports: list[Import] = []
    for name, path in known.items():
        text = path.read_text()
        lines[app_of(name)] += text.count("\n")
        imports.extend(imports_of(name, ast.parse(text), known))
    floor = {app: level for level, app in enumerate(FLOORS)}
    between = [i for i in imports if app_of(i.target) in floor and app_of(i.target) != app_of(i.source)]
    back = [i for i in between if floor[app_of(i.target)] > floor[app_of(i.source)] and not is_entry_point(i.source)]
    total = sum(lines.values())
    print("product lines per app:")
    for app in FLOORS:
        if lines[app]:
            print(f"  {app:<13} {lines[app]:>6}  {100 * lines[app] / total:5.1f}%")
    print(f"  {'total':<13} {total:>6}")
    print(f"imports between apps: {sum(not i.type_only for i in between)}")
    print(f"  made inside functions: {sum(i.in_function and not i.type_only for i in between)}")
    print(f"back-arrows against the floors: {sum(not i.type_only for i in back)}")
    print(f"  of them inside functions: {sum(i.in_function and not i.type_only for i in back)}")
    print(f"  type-checking only: {sum(i.type_only for i in back)}")
    arrows = sorted({(app_of(i.source), app_of(i.target)) for i in back if not i.type_only})
    print(f"  app pairs: {', '.join(f'{a}->{b}' for a, b in arrows) or 'none'}")
    found_circles = circles(imports, known)
    print(f"circles of modules importing each other: {len(found_circles)}")
    if args.list:
        for i in sorted(back, key=lambda i: (i.source, i.target)):
            where = "type-checking" if i.type_only else "in a function" if i.in_function else "module level"
            print(f"  back-arrow {i.source} -> {i.target} ({where})")
        for group in found_circles:
            print(f"  circle {' <-> '.join(group)}")


if __name__ == "__main__":
    main()
