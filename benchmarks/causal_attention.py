"""Causal flash attention with and without the key blocks past each row block: the mask built
in the jitted function (models/common.causal_mask, which fuse_attention recognises as causal, so
each task stops its key loop at its last row's bound) against the same mask passed as a tensor
(every key block visited). Both run in one process, alternated call by call; medians.

    python benchmarks/causal_attention.py [--heads 32] [--seq 1024] [--head-dim 128] [--calls 7]
"""

import argparse
import math
import os
import statistics
import sys
import time

import torch

import pypto

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from models import common  # noqa: E402


def kernels(h: int, s: int, d: int):
    """(attention building its causal mask, attention taking the mask as a parameter)."""
    opts = {"sram_budget_kb": common.BUDGET_KB}

    def attend(q, k, v, mask):
        pypto.set_vec_tile_shapes(1, 8, 256)
        pypto.set_cube_tile_shapes([64, 64], [d, d], [256, 256])
        scores = pypto.matmul(q, k, pypto.DT_FP32, b_trans=True) * (1 / math.sqrt(d)) + mask
        return pypto.matmul(pypto.softmax(scores, -1), v, pypto.DT_FP32)

    t = pypto.Tensor((h, s, d), pypto.DT_FP32)

    @pypto.frontend.jit(pass_options=opts)
    def built(q: t, k: t, v: t):
        pypto.set_vec_tile_shapes(8, 512)
        return attend(q, k, v, common.causal_mask(s, s))

    @pypto.frontend.jit(pass_options=opts)
    def given(q: t, k: t, v: t, mask: pypto.Tensor((s, s), pypto.DT_FP32)):
        return attend(q, k, v, mask)

    return built, given


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--heads", type=int, default=32)
    p.add_argument("--seq", type=int, default=1024)
    p.add_argument("--head-dim", type=int, default=128)
    p.add_argument("--calls", type=int, default=7)
    a = p.parse_args()
    q, k, v = (torch.randn(a.heads, a.seq, a.head_dim) for _ in range(3))
    mask = torch.full((a.seq, a.seq), -math.inf).triu(1)
    built, given = kernels(a.heads, a.seq, a.head_dim)
    same = torch.equal(built(q, k, v), given(q, k, v, mask))
    causal = "causal=" in pypto.compile(built, q, k, v).dump("passes")
    tb, tg = [], []
    for _ in range(a.calls):
        t0 = time.perf_counter()
        built(q, k, v)
        tb.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        given(q, k, v, mask)
        tg.append(time.perf_counter() - t0)
    mb, mg = statistics.median(tb), statistics.median(tg)
    print(f"heads {a.heads}, S = T = {a.seq}, d = {a.head_dim}: causal bound found: {causal}, same outputs: {same}")
    print(f"  blocks past each row block skipped: {mb * 1e3:.1f} ms")
    print(f"  every key block visited:            {mg * 1e3:.1f} ms   ({mg / mb:.2f}x the time)")


if __name__ == "__main__":
    main()
