"""xDSL dialects of jaxalloc, installed as `jaxalloc.dialects`."""

if __name__ != "jaxalloc.dialects":
    raise ImportError(
        "import the dialects as `jaxalloc.dialects`, not as a top-level `dialects` "
        "package: a second copy of the op classes would not match the first"
    )
