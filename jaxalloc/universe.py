"""What `xdsl-opt` learns about jaxalloc through the `xdsl.universe` entry point."""

from xdsl.universe import Universe


def _jx():
    from jaxalloc.dialects.jx import JX

    return JX


def _mem():
    from jaxalloc.dialects.mem import MEM

    return MEM


def _liveness():
    from jaxalloc.passes.assign import LivenessPass

    return LivenessPass


def _assign_buffers():
    from jaxalloc.passes.assign import AssignBuffersPass

    return AssignBuffersPass


def _dce():
    from jaxalloc.passes.dead_code import DeadCodePass

    return DeadCodePass


def _canonicalize():
    from jaxalloc.passes.canonicalize import CanonicalizePass

    return CanonicalizePass


def _schedule():
    from jaxalloc.passes.schedule import SchedulePass

    return SchedulePass


def _fuse():
    from jaxalloc.passes.fusion import FusePass

    return FusePass


def _verify_plan():
    from jaxalloc.passes.assign import VerifyPlanPass

    return VerifyPlanPass


JAXALLOC_UNIVERSE = Universe(
    all_dialects={"jx": _jx, "mem": _mem},
    all_passes={
        "jx-liveness": _liveness,
        "jx-dce": _dce,
        "jx-canonicalize": _canonicalize,
        "jx-fuse": _fuse,
        "jx-schedule": _schedule,
        "jx-assign-buffers": _assign_buffers,
        "jx-verify-plan": _verify_plan,
    },
)
