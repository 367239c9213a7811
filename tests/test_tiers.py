"""The fast tier's rule (tests/conftest.py) names only tests that exist: a renamed test must not
leave the fast tier unnoticed."""

import ast
from pathlib import Path

import conftest

TESTS = Path(__file__).resolve().parent


def _functions(module: str) -> set[str]:
    tree = ast.parse((TESTS / f"{module}.py").read_text())
    return {node.name for node in tree.body if isinstance(node, ast.FunctionDef)}


def test_the_slow_modules_exist():
    assert [m for m in conftest.SLOW_MODULES if not (TESTS / f"{m}.py").exists()] == []


def test_the_tests_the_tiers_name_exist():
    named = [key for key in conftest.SLOW_TESTS]
    for key, tests in conftest.FAST_ONLY.items():
        module = key.split("::")[0]
        named += [key] if "::" in key else []
        named += [f"{module}::{test.split('[')[0]}" for test in tests]
    missing = [n for n in named if n.split("::")[1] not in _functions(n.split("::")[0])]
    assert missing == []
