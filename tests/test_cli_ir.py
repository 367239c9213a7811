"""`jaxalloc ir`: shape specs, --args-from, clear errors, output that xdsl-opt parses."""

import subprocess
import sys
import textwrap
from pathlib import Path

import jax
import jax.numpy as jnp
import pytest

from jaxalloc.cli import main
from jaxalloc.targets import load_function_and_args, parse_shape_spec

MODEL = textwrap.dedent(
    """
    import jax.numpy as jnp

    def mlp(x, w):
        return jnp.tanh(x @ w).sum()

    def example():
        return jnp.ones((4, 8)), jnp.ones((8, 2))
    """
)


@pytest.fixture
def model_file(tmp_path: Path) -> Path:
    path = tmp_path / "model.py"
    path.write_text(MODEL)
    return path


@pytest.mark.parametrize(
    "spec, shape, dtype",
    [("f32[64,512]", (64, 512), jnp.float32), ("i32[]", (), jnp.int32), ("bool[3]", (3,), jnp.bool_), ("bf16[2, 2]", (2, 2), jnp.bfloat16)],
)
def test_shape_specs(spec, shape, dtype):
    parsed = parse_shape_spec(spec)
    assert parsed.shape == shape and parsed.dtype == dtype


def test_ir_from_shape_specs(model_file, capsys):
    assert main(["ir", f"{model_file}:mlp", "f32[4,8]", "f32[8,2]"]) == 0
    text = capsys.readouterr().out
    assert "jx.func @mlp(%a: tensor<4x8xf32>, %b: tensor<8x2xf32>) -> tensor<f32>" in text
    assert 'jx.prim "dot_general"' in text


def test_ir_from_args_function_parses_in_xdsl_opt(model_file, capsys):
    assert main(["ir", f"{model_file}:mlp", "--args-from", "example"]) == 0
    text = capsys.readouterr().out
    xdsl_opt = Path(sys.executable).parent / "xdsl-opt"
    run = subprocess.run([str(xdsl_opt)], input=text, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == text.strip()


@pytest.mark.parametrize(
    "argv, message",
    [
        (["{model}:mlp", "f33[4]"], "bad argument spec 'f33[4]'"),
        (["{model}:mlp", "f32[2,,3]"], "bad argument spec 'f32[2,,3]'"),
        (["{model}:mlp"], "give example arguments"),
        (["{model}:nothing", "f32[1]"], "has no function 'nothing'"),
        (["no_such_module_here:mlp", "f32[1]"], "cannot import module 'no_such_module_here'"),
        (["{model}", "f32[1]"], "expected MODULE:FUNCTION"),
        (["{model}:mlp", "f32[4,8]", "f32[9,2]"], "tracing mlp with these arguments failed: TypeError: dot_general"),
    ],
)
def test_ir_errors_are_one_line(model_file, capsys, argv, message):
    assert main(["ir", *(a.format(model=model_file) for a in argv)]) == 2
    err = capsys.readouterr().err
    assert message in err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("module", ["benchmarks.models", "benchmarks/models.py"])
def test_repository_modules_load_by_name_or_path(module, monkeypatch):
    """xdsl installs a top-level `benchmarks` package; the repository's own benchmarks.models wins."""
    monkeypatch.chdir(Path(__file__).resolve().parents[1])
    fn, args = load_function_and_args(f"{module}:transformer_layer", ["f32[32,64]"], None)
    assert fn.__name__ == "transformer_layer" and fn.__code__.co_filename.endswith("benchmarks/models.py")


def test_64_bit_specs_need_x64(model_file, capsys):
    for command in ("ir", "plan"):
        assert main([command, f"{model_file}:mlp", "f64[4,8]", "f64[8,2]"]) == 2
        err = capsys.readouterr().err
        assert "f64[4,8] is a 64-bit type" in err and "pass --x64 (or set JAX_ENABLE_X64=1)" in err
    assert main(["ir", f"{model_file}:mlp", "f64[4,8]", "f64[8,2]", "--x64"]) == 0
    assert "tensor<4x8xf64>" in capsys.readouterr().out
    assert not jax.config.jax_enable_x64  # on for the command only
