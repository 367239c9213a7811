"""A plan as a Chrome trace-event JSON file, to browse in the Perfetto UI (ui.perfetto.dev) or
chrome://tracing: a view users of JAX's profiler already know.

Time is the schedule step, written as microseconds. Each region of the plan is one process (a track
group); its buffers are complete events ("X": a slice over the buffer's lifetime, with its offset,
size and what defines it in the args) on as few threads (lanes) as keep slices of one thread from
overlapping, which the format requires. A counter ("C") track gives the bytes live at each step.
"""

from __future__ import annotations

import heapq
import json
from collections.abc import Sequence

import numpy as np


def trace_events(
    *,
    names: Sequence[str],
    sizes,
    offsets,
    starts,
    ends,
    regions: Sequence[str] | None = None,
    labels: Sequence[str] | None = None,
    title: str = "plan",
) -> dict:
    """The trace-event JSON object of a plan's rows (half-open lifetimes ``[start, end)``)."""
    sizes, offsets = np.asarray(sizes, np.int64), np.asarray(offsets, np.int64)
    starts, ends = np.asarray(starts, np.int64), np.asarray(ends, np.int64)
    regions = list(regions) if regions is not None else [title] * len(sizes)
    events = [_meta("process_name", 0, 0, f"{title}: live bytes")]
    pids = {region: i + 1 for i, region in enumerate(dict.fromkeys(regions))}
    for region, pid in pids.items():
        events += [_meta("process_name", pid, 0, region), _meta("process_sort_index", pid, 0, pid, key="sort_index")]
    lanes: dict[str, list[tuple[int, int]]] = {region: [] for region in pids}  # (free from step, lane) heaps
    for i in np.lexsort((-sizes, starts)):
        region = regions[i]
        lane = _lane(lanes[region], int(starts[i]), int(ends[i]))
        args = {"offset": int(offsets[i]), "size": int(sizes[i]), "end offset": int(offsets[i] + sizes[i])}
        if labels is not None and labels[i]:
            args["defined by"] = labels[i]
        events.append(
            {"name": str(names[i]), "cat": "buffer", "ph": "X", "pid": pids[region], "tid": lane,
             "ts": int(starts[i]), "dur": int(ends[i] - starts[i]), "args": args}
        )
    for region, pid in pids.items():
        events += [_meta("thread_name", pid, lane, f"lane {lane}") for lane in range(len(lanes[region]))]
    events += _live_counter(sizes, starts, ends)
    return {"traceEvents": events, "displayTimeUnit": "ns", "otherData": {"time": "schedule steps, shown as µs"}}


def write_trace_events(path, **rows) -> None:
    """Writes `trace_events(**rows)` to ``path`` as JSON."""
    with open(path, "w") as out:
        json.dump(trace_events(**rows), out)


def _meta(name: str, pid: int, tid: int, value, key: str = "name") -> dict:
    return {"name": name, "ph": "M", "pid": pid, "tid": tid, "args": {key: value}}


def _lane(heap: list[tuple[int, int]], start: int, end: int) -> int:
    """The lane of a slice ``[start, end)``: one whose last slice has ended, else a new one."""
    if heap and heap[0][0] <= start:
        _, lane = heapq.heapreplace(heap, (end, heap[0][1]))
        return lane
    lane = len(heap)
    heapq.heappush(heap, (end, lane))
    return lane


def _live_counter(sizes, starts, ends) -> list[dict]:
    """A counter event at every step where the live bytes change."""
    steps = np.union1d(starts, ends)
    change = np.zeros(len(steps), np.int64)
    np.add.at(change, np.searchsorted(steps, starts), sizes)
    np.subtract.at(change, np.searchsorted(steps, ends), sizes)
    return [
        {"name": "live bytes", "ph": "C", "pid": 0, "tid": 0, "ts": int(t), "args": {"bytes": int(v)}}
        for t, v in zip(steps, np.cumsum(change))
    ]
