"""Runs the tile-level LLaMA layer (models/llama/layer.py) with real
generated kernels at 1K and 2K tokens (hidden size 64) against torch, and
prints the task counts of the orchestration for 1K-16K tokens with and
without adaptive 64-row tiles (the PTO seed's table)."""

import os
import sys
import time

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import layer as L  # noqa: E402

HIDDEN, FFN = 64, 128

model = L.LlamaLayer(HIDDEN, FFN)
for seq in (1024, 2048):
    x = np.random.default_rng(seq).standard_normal((seq, HIDDEN)).astype(np.float32)
    t0 = time.perf_counter()
    out = model(x)
    dt = time.perf_counter() - t0
    cos, sin = L.rope_tables(seq, HIDDEN)
    ref = L.reference(x, model.w, cos, sin)
    torch.testing.assert_close(torch.from_numpy(out), ref, atol=2e-3, rtol=2e-3)
    print(f"seq {seq}: {model.program.stats()['tasks']} tasks in {dt * 1e3:.1f} ms, matches torch")


def shapes_only(seq: int, layer: L.LlamaLayer) -> dict:
    """Arrays with the right shapes and no memory behind them (stride 0)."""
    shapes = {name: np.shape(v) for name, v in layer.w.items()}
    shapes.update(x=(seq, HIDDEN), cos=(seq, HIDDEN), sin=(seq, HIDDEN), out=(seq, HIDDEN))
    shapes.update(L.scratch_shapes(seq, HIDDEN, FFN))
    return {k: np.broadcast_to(np.zeros((1,) * len(s), np.float32), s) for k, s in shapes.items()}


plain = L.LlamaLayer(HIDDEN, FFN, adaptive=False)
print(f"{'seq':>6} {'tiles':>6} {'tasks (adaptive)':>17} {'tasks (32-row)':>15}")
for seq in (1024, 2048, 4096, 8192, 16384):
    n = seq // 32
    adaptive = model.program.count_tasks(**shapes_only(seq, model), num_tiles=n)
    fixed = plain.program.count_tasks(**shapes_only(seq, plain), num_tiles=n)
    assert adaptive == L.expected_tasks(seq) and fixed == L.expected_tasks(seq, adaptive=False)
    print(f"{seq:>6} {n:>6} {adaptive:>17,} {fixed:>15,}")
