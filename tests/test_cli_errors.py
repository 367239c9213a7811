"""Bad command lines get one line naming the problem and what to do, never a traceback."""

from __future__ import annotations

import textwrap

import pytest

from jaxalloc.cli import main

MODEL = textwrap.dedent(
    """
    import jax.numpy as jnp

    def f(x):
        return jnp.sin(x) * 2

    def broken():
        raise RuntimeError("no data here\\nsecond line")
    """
)


@pytest.fixture
def paths(tmp_path):
    (tmp_path / "m.py").write_text(MODEL)
    (tmp_path / "t.csv").write_text("id,lower,upper,size\na,0,2,8\nb,1,3,8\n")
    return tmp_path


@pytest.mark.parametrize(
    "argv, message",
    [
        (["trace", "{d}/t.csv", "--out", "{d}/missing/plan.csv"], "--out {d}/missing/plan.csv: no directory {d}/missing; create it first"),
        (["trace", "{d}/t.csv", "--out", "{d}"], "--out {d} is a directory; give a file name"),
        (["trace", "{d}/t.csv", "--plot", "{d}/chart.foo"], "--plot {d}/chart.foo: end the name with an image format matplotlib writes: "),
        (["trace", "{d}/t.csv", "--plot", "{d}/chart"], "--plot {d}/chart: end the name with an image format"),
        (["plan", "{d}/m.py:f", "f32[4]", "--plot", "{d}/missing/c.png"], "--plot {d}/missing/c.png: no directory"),
        (["plan", "{d}/m.py:f", "--args-from", "broken"], "--args-from broken() raised RuntimeError: no data here"),
    ],
)
def test_errors_are_one_line(paths, capsys, argv, message):
    assert main([a.format(d=paths) for a in argv]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and "Traceback" not in err
    assert message.format(d=paths) in err


def test_no_arguments_print_the_help(capsys):
    assert main([]) == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: jaxalloc") and "{ir,trace,plan,compare}" in out
