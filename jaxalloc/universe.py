"""What `xdsl-opt` learns about jaxalloc through the `xdsl.universe` entry point."""

from xdsl.universe import Universe


def _jx():
    from jaxalloc.dialects.jx import JX

    return JX


JAXALLOC_UNIVERSE = Universe(all_dialects={"jx": _jx}, all_passes={})
