"""Runs the lit FileCheck tests of the printed IR (tests/filecheck) from pytest."""

import subprocess
import sys
from pathlib import Path


def test_lit_filecheck_suite():
    suite = Path(__file__).parent / "filecheck"
    command = [sys.executable, "-c", "import sys; from lit.main import main; sys.exit(main())", "-v", str(suite)]
    run = subprocess.run(command, capture_output=True, text=True)
    assert run.returncode == 0, run.stdout[-6000:] + run.stderr[-2000:]
