"""`plan.to_perfetto` / `jaxalloc plan --perfetto`: a valid Chrome trace-event file of the plan."""

from __future__ import annotations

import json
from collections import defaultdict

import jax
import jax.numpy as jnp

import jaxalloc
from jaxalloc.cli import main

PHASES = {"X": ("name", "pid", "tid", "ts", "dur"), "M": ("name", "pid", "args"), "C": ("name", "pid", "ts", "args")}


def check_trace_events(trace: dict) -> list[dict]:
    """The events, checked against the trace-event format: known phases with their fields, integer
    times, and slices of one thread that do not overlap (the format needs them nested)."""
    assert set(trace) >= {"traceEvents"}
    events = trace["traceEvents"]
    threads = defaultdict(list)
    for event in events:
        assert all(key in event for key in PHASES[event["ph"]]), event
        if event["ph"] == "X":
            assert isinstance(event["ts"], int) and event["dur"] > 0
            threads[event["pid"], event["tid"]].append((event["ts"], event["ts"] + event["dur"]))
    for spans in threads.values():
        spans.sort()
        assert all(end <= next_start for (_, end), (next_start, _) in zip(spans, spans[1:]))
    return events


def looped(x, w):
    def body(c, wi):
        return jnp.tanh(c @ wi), c.sum()

    return jax.lax.scan(body, jnp.cos(jnp.sin(x)), w)


def test_perfetto_has_a_slice_per_buffer_a_track_per_region_and_live_bytes(tmp_path):
    plan = jaxalloc.planned(looped).plan(jnp.ones((8, 32)), jnp.ones((4, 32, 32)))
    plan.to_perfetto(tmp_path / "plan.json")
    events = check_trace_events(json.loads((tmp_path / "plan.json").read_text()))
    slices = [e for e in events if e["ph"] == "X"]
    assert sorted(e["name"] for e in slices) == sorted(r.name for r in plan.buffers)
    by_name = {e["name"]: e for e in slices}
    for r in plan.buffers:
        assert by_name[r.name]["args"]["offset"] == r.offset and by_name[r.name]["ts"] == r.start
    processes = {e["args"]["name"] for e in events if e["name"] == "process_name"}
    assert {r.region for r in plan.buffers} <= processes
    counter = [e["args"]["bytes"] for e in events if e["ph"] == "C"]
    assert max(counter) == max(plan.live_bytes()) and counter[-1] == 0


def test_plan_command_writes_perfetto(tmp_path, capsys):
    model = tmp_path / "m.py"
    model.write_text("import jax.numpy as jnp\n\ndef f(x):\n    return jnp.sin(jnp.cos(x)).sum()\n")
    out = tmp_path / "plan.json"
    assert main(["plan", f"{model}:f", "f32[16]", "--perfetto", str(out)]) == 0
    assert f"wrote {out}" in capsys.readouterr().out
    check_trace_events(json.loads(out.read_text()))
