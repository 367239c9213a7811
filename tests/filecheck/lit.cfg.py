# lit configuration: FileCheck tests of the IR that jaxalloc prints.
import os
import sys

import lit.formats

config.name = "jaxalloc"
config.test_format = lit.formats.ShTest()
config.suffixes = [".py", ".mlir"]
config.excludes = ["lit.cfg.py"]
config.test_source_root = os.path.dirname(__file__)
config.substitutions.append(("%python", sys.executable))
bin_dir = os.path.dirname(sys.executable)
config.environment["PATH"] = bin_dir + os.pathsep + os.environ.get("PATH", "")
config.environment["JAX_PLATFORMS"] = "cpu"
