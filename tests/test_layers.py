"""No import runs back up a layer: each part of `jaxalloc` imports only the parts below it.

The pipeline reads bottom up: the dialects, then the frontend that writes jx, the analyses every
stage reads, the executors, the checkers (the sanitizer runs inside the interpreter), XLA's
figures, planning, the passes (thin `ModulePass`es over planning), and the user API on top. Imports
inside functions count too: a cycle hidden in a function is still a climb.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "jaxalloc"

LAYERS = (
    ("errors",),
    ("dialects", "allocators", "reports"),
    ("frontend",),
    ("analysis",),
    ("execution",),
    ("checks",),
    ("xla",),
    ("planning",),
    ("passes",),
    ("universe", "planned_call", "traces", "targets"),
    ("api",),
    ("__init__", "cli"),
    ("testing",),
)
LEVEL = {part: level for level, parts in enumerate(LAYERS) for part in parts}


def _part(module: str) -> str:
    """The part of `jaxalloc` a dotted module name lies in: a subpackage or a top-level module."""
    names = module.split(".")
    return names[1] if len(names) > 1 else "__init__"


def _imports(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module and node.module.split(".")[0] == "jaxalloc":
            found |= {f"jaxalloc.{a.name}" for a in node.names} if node.module == "jaxalloc" else {node.module}
        elif isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.split(".")[0] == "jaxalloc"}
    return found


def _parts_of_package() -> set[str]:
    return {p.stem if p.is_file() else p.name for p in PACKAGE.iterdir()
            if (p.is_dir() and (p / "__init__.py").exists()) or p.suffix == ".py"}


def test_every_part_of_the_package_has_a_layer():
    assert _parts_of_package() == set(LEVEL)


def test_no_import_climbs_a_layer():
    climbs = []
    for path in sorted(PACKAGE.rglob("*.py")):
        module = ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        part = _part(module)
        for imported in sorted(_imports(path)):
            other = _part(imported) if imported != "jaxalloc" else "__init__"
            if other != part and LEVEL.get(other, -1) >= LEVEL[part]:
                climbs.append(f"{path.relative_to(PACKAGE.parent)} imports {imported} ({other} is not below {part})")
    assert not climbs, "\n".join(climbs)
