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


plain = L.LlamaLayer(HIDDEN, FFN, adaptive=False)
print(f"{'seq':>6} {'tiles':>6} {'tasks (adaptive)':>17} {'tasks (32-row)':>15}")
for seq in (1024, 2048, 4096, 8192, 16384):
    n = seq // 32
    adaptive = model.program.count_tasks(**model.shapes_only(seq))
    fixed = plain.program.count_tasks(**plain.shapes_only(seq))
    assert adaptive == L.expected_tasks(seq) and fixed == L.expected_tasks(seq, adaptive=False)
    print(f"{seq:>6} {n:>6} {adaptive:>17,} {fixed:>15,}")
