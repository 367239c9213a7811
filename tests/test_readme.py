"""The README's set-up works from the repository alone: its commands read only files a clone has."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

from jaxalloc.cli import main

REPO = Path(__file__).resolve().parents[1]
README = (REPO / "README.md").read_text()


def setup_commands() -> list[list[str]]:
    """The `jaxalloc ...` commands of the README's set-up block, as argument lists."""
    block = re.search(r"## Set-up.*?```sh\n(.*?)```", README, re.S).group(1)
    commands = [shlex.split(part) for part in block.replace("\n", " ").split("&&")]
    return [argv[1:] for argv in commands if argv and argv[0] == "jaxalloc"]


def test_setup_commands_run_in_a_bare_clone(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(REPO)
    commands = setup_commands()
    assert [argv[0] for argv in commands] == ["trace", "ir"]
    for argv in commands:
        argv = [str(tmp_path / Path(a).name) if a.endswith(".png") else a for a in argv]
        assert main(argv) == 0, capsys.readouterr().err
    out = capsys.readouterr().out
    assert "buffers       1,042" in out and "jx.func" in out


def test_nothing_reads_outside_the_repository():
    for path in [*REPO.glob("tests/*.py"), *REPO.glob("benchmarks/*.py"), REPO / "README.md"]:
        if path.name == Path(__file__).name:
            continue
        assert "../shared" not in path.read_text() and '"shared"' not in path.read_text(), path


def test_shipped_traces_keep_their_licences():
    traces = REPO / "benchmarks" / "traces"
    assert (traces / "README.md").is_file()
    for folder in ("minimalloc", "somas"):
        assert (traces / folder / "LICENSE").is_file()
        assert any((traces / folder).glob("*.csv"))


def test_readme_states_the_tolerance_the_tests_use():
    from jaxalloc.testing.differential import FLOAT_TOLERANCE, LOW_PRECISION_ULPS

    assert "same pytree and values as" not in README  # op-by-op rounding: equal within tolerance only
    assert "within float tolerance" in README and "jax.disable_jit()" in README
    rtol, atol = (f"{FLOAT_TOLERANCE[k]:g}".replace("e-0", "e-") for k in ("rtol", "atol"))
    assert f"`rtol={rtol}, atol={atol}` for float32 programs" in README
    assert f"{LOW_PRECISION_ULPS} eps of the narrowest float type" in README


def test_the_readme_speaks_of_what_is_true_now():
    """No commit hashes: a user's README says what the code does, and the measured tables with the
    commits they were measured at live in docs/benchmarks.md."""
    hashes = [w for w in re.findall(r"\b[0-9a-f]{7,40}\b", README) if re.search(r"[a-f]", w) and re.search(r"\d", w)]
    assert not hashes, hashes
    for name in ("ir", "passes", "assignment", "compiled", "checking"):
        assert (REPO / "docs" / "design" / f"{name}.md").is_file() and f"docs/design/{name}.md" in README
