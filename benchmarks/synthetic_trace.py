"""A deterministic, realistic lifetime trace of 20,000 buffers: one training step with micro-batches.

The step accumulates gradients over micro-batches of a 50-layer conv net with ResNet-like stages
(the spatial size halves while the channels double; float32 bytes). Per micro-batch:

- forward, per layer (2 steps): the pre-activation (consumed by the normalisation), the output
  activation and two per-channel statistics (all three saved for the backward pass), a workspace;
- the loss and its gradient (the last micro-batch also logs small metric scalars, as many as it takes
  to reach exactly the requested number of buffers);
- backward, per layer in reverse (2 steps): the gradient of its input (alive until the layer below has
  used it), a workspace, weight- and bias-gradient temporaries added into per-layer accumulators; the
  saved activation and statistics die here.

The accumulators live from the first micro-batch's backward to the optimizer, which updates layer by
layer with two temporaries each. Workspace sizes are drawn once per layer (as a conv algorithm would
pick them) from a seeded generator, so the trace is the same on every run.

Run as a script to write it in the MiniMalloc CSV format: ``python benchmarks/synthetic_trace.py OUT.csv``.
"""

from __future__ import annotations

import sys

import numpy as np

LAYERS = 50
STAGES = ((64, 56), (128, 28), (256, 14), (512, 7))
PER_LAYER_AND_BATCH = 9
LOSS_SCALARS = 2
PER_LAYER_ONCE = 4


def training_step_trace(n_buffers: int = 20_000, seed: int = 0, batch: int = 8) -> dict[str, np.ndarray]:
    """The trace as arrays ``id, lower, upper, size`` with half-open lifetimes, ``n_buffers`` rows."""
    rng = np.random.default_rng(seed)
    shapes = [STAGES[layer * len(STAGES) // LAYERS] for layer in range(LAYERS)]
    act = [batch * c * s * s * 4 for c, s in shapes]
    stats = [c * 4 for c, _ in shapes]
    weights = [c * c * 9 * 4 for c, _ in shapes]
    fwd_work = [int(a * f) for a, f in zip(act, rng.choice([0.25, 0.5, 1.0, 2.0], LAYERS))]
    bwd_work = [int(a * f) for a, f in zip(act, rng.choice([0.5, 1.0, 2.0, 4.0], LAYERS))]
    per_batch = PER_LAYER_AND_BATCH * LAYERS + LOSS_SCALARS
    micro_batches = max(1, (n_buffers - PER_LAYER_ONCE * LAYERS) // per_batch)
    metrics = max(0, n_buffers - PER_LAYER_ONCE * LAYERS - per_batch * micro_batches)
    rows: list[tuple[int, int, int]] = []
    accumulators: list[tuple[int, int]] = []
    t = 0
    for batch_index in range(micro_batches):
        saved = []
        for layer in range(LAYERS):
            rows.append((t, t + 2, act[layer]))  # pre-activation
            rows.append((t, t + 1, fwd_work[layer]))  # workspace
            saved.append((t + 1, layer))  # output activation and statistics, closed in backward
            t += 2
        rows.append((t, t + 2, 4))  # loss
        rows.append((t + 1, t + 3, 4))  # its gradient, the seed of the backward pass
        extra = metrics if batch_index == micro_batches - 1 else 0
        for k in range(extra):
            rows.append((t + k, t + k + 2, 4 * int(rng.integers(1, 17))))  # metrics
        t += extra + 2
        for born, layer in reversed(saved):
            rows.append((born, t + 1, act[layer]))  # saved activation
            rows.append((born, t + 1, stats[layer]))  # saved mean
            rows.append((born, t + 1, stats[layer]))  # saved variance
            rows.append((t, t + 3, act[layer - 1] if layer else act[0]))  # gradient of the input
            rows.append((t, t + 1, bwd_work[layer]))  # workspace
            rows.append((t + 1, t + 2, weights[layer]))  # weight-gradient temporary
            rows.append((t + 1, t + 2, stats[layer]))  # bias-gradient temporary
            if batch_index == 0:
                accumulators.append((t + 1, layer))
            t += 2
    for born, layer in accumulators:
        rows.append((born, t + 2, weights[layer]))  # weight-gradient accumulator
        rows.append((born, t + 2, stats[layer]))  # bias-gradient accumulator
        rows.append((t, t + 1, weights[layer]))  # optimizer temporaries
        rows.append((t + 1, t + 2, weights[layer]))
        t += 1
    rows.sort()
    lower = np.array([r[0] for r in rows], np.int64)
    upper = np.array([r[1] for r in rows], np.int64)
    size = np.array([r[2] for r in rows], np.int64)
    return {"id": np.arange(len(rows)), "lower": lower, "upper": upper, "size": size}


def write_csv(path: str, trace: dict[str, np.ndarray]) -> None:
    """Writes a trace in the MiniMalloc CSV format ``id,lower,upper,size``."""
    with open(path, "w") as out:
        out.write("id,lower,upper,size\n")
        for row in zip(trace["id"], trace["lower"], trace["upper"], trace["size"]):
            out.write(",".join(str(int(v)) for v in row) + "\n")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python benchmarks/synthetic_trace.py OUT.csv")
    write_csv(sys.argv[1], training_step_trace())
