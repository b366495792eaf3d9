"""The float matmul with its b operand in column panels (pass plan_matmul_panels, asked for with
pass option matmul_panels=True, so on any CPU) against the same kernels with the pass disabled
(b by rows), and torch, side by side in one process: each round
calls every implementation once, in turn, and the medians of the rounds are printed.

    python benchmarks/matmul_panels.py [--rounds 15] [--cases square,half,linear,attention]

Cases: square fp32 products (512^3, 1024^3, 2048^3: torch.matmul), fp16 / bf16 inputs with an
fp32 result (1024^3: torch casts, then multiplies), a linear layer of LLaMA-3-8B's MLP at 512
tokens (x [512, 4096] @ w^T, w [14336, 4096] in nn.Linear's layout, 256-cubed cube tiles and the
model kernels' 1 MiB budget: F.linear), and single-head attention (S 1024 to 4096, head 64 and
128: scaled_dot_product_attention). Every result is checked against torch first.
"""

import argparse
import math
import os
import statistics
import sys
import time

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # as run.py: idle torch threads sleep

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import pypto  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from run import machine_info  # noqa: E402

OFF = {"disable_passes": ["plan_matmul_panels"]}
ON = {"matmul_panels": True}  # panels wherever the shapes allow, whatever this CPU's cache


def product(m, k, n, dtype, b_trans=False, tiles=None, budget=None, panels=True):
    opts = dict(ON) if panels else dict(OFF)
    if budget:
        opts["sram_budget_kb"] = budget
    w_shape = (n, k) if b_trans else (k, n)

    @pypto.frontend.jit(pass_options=opts)
    def mm(a: pypto.Tensor((m, k), dtype), w: pypto.Tensor(w_shape, dtype)):
        if tiles:
            pypto.set_cube_tile_shapes(*tiles)
        return pypto.matmul(a, w, pypto.DT_FP32, b_trans=b_trans)

    return mm


def attention(s, d, panels=True):
    @pypto.frontend.jit(pass_options=dict(ON) if panels else dict(OFF))
    def att(q: pypto.Tensor((s, d), pypto.DT_FP32), k: pypto.Tensor((s, d), pypto.DT_FP32),
            v: pypto.Tensor((s, d), pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(8, 512)
        sc = pypto.matmul(q, k, b_trans=True) / math.sqrt(d)
        e = pypto.exp(sc - pypto.amax(sc, -1, True))
        return pypto.matmul(e / pypto.sum(e, -1, True), v)

    return att


def cases(which):
    g = torch.Generator().manual_seed(0)
    if "square" in which:
        for n in (512, 1024, 2048):
            a, b = torch.randn(n, n, generator=g), torch.randn(n, n, generator=g) / n ** 0.5
            yield (f"matmul fp32 {n}^3", 2 * n ** 3, (a, b), product(n, n, n, pypto.DT_FP32),
                   product(n, n, n, pypto.DT_FP32, panels=False), ("torch.matmul", torch.matmul), a @ b)
    if "half" in which:
        n = 1024
        for tdt, pdt, name in ((torch.float16, pypto.DT_FP16, "fp16"), (torch.bfloat16, pypto.DT_BF16, "bf16")):
            a = torch.randn(n, n, generator=g).to(tdt)
            b = (torch.randn(n, n, generator=g) / n ** 0.5).to(tdt)
            yield (f"matmul {name} in, fp32 out {n}^3", 2 * n ** 3, (a, b), product(n, n, n, pdt),
                   product(n, n, n, pdt, panels=False), ("cast, then matmul", lambda a, b: a.float() @ b.float()),
                   a.float() @ b.float())
    if "linear" in which:
        s, k, n = 512, 4096, 14336
        x, w = torch.randn(s, k, generator=g), torch.randn(n, k, generator=g) / k ** 0.5
        tiles = ([256, 256], [256, 256], [256, 256])
        yield (f"linear {s}x{k} @ [{n}, {k}]^T", 2 * s * k * n, (x, w),
               product(s, k, n, pypto.DT_FP32, True, tiles, 1024),
               product(s, k, n, pypto.DT_FP32, True, tiles, 1024, panels=False), ("F.linear", F.linear),
               F.linear(x, w))
    if "attention" in which:
        for s, d in ((1024, 64), (2048, 128), (4096, 64), (4096, 128)):
            q, k, v = (torch.randn(s, d, generator=g) for _ in range(3))
            sdpa = lambda q, k, v: F.scaled_dot_product_attention(q[None], k[None], v[None])[0]  # noqa: E731
            yield (f"attention S={s} d={d}", 4 * s * s * d, (q, k, v), attention(s, d), attention(s, d, False),
                   ("sdpa", sdpa), sdpa(q, k, v))


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--cases", default="square,half,linear,attention")
    args = parser.parse_args()
    print(machine_info() if callable(machine_info) else "")
    l1d = pypto._C.cpu_target_info(pypto.get_cpu_target())["l1d_bytes"] >> 10
    print(f"L1d {l1d} KiB: left to itself, plan_matmul_panels lays b out in panels "
          f"{'(L1d <= 32 KiB)' if l1d <= 32 else 'nowhere on this CPU (L1d > 32 KiB)'}")
    print(f"medians of {args.rounds} rounds, GFLOP/s; ratios: the other's time over pypto with panels'")
    print("| case | panels | rows | torch | panels / rows | vs torch | panels in the program |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | --- |")
    for name, flops, operands, fast, rows, (tname, tfn), want in cases(args.cases.split(",")):
        for f in (fast, rows):
            torch.testing.assert_close(f(*operands).double(), want.double(), rtol=2e-3, atol=2e-3)
        laid_out = "panels=" in pypto.compile(fast, *operands).pto()
        fns = {"panels": fast, "rows": rows, "torch": tfn}
        times = {key: [] for key in fns}
        for _ in range(args.rounds):
            for key, f in fns.items():
                t = time.perf_counter()
                f(*operands)
                times[key].append(time.perf_counter() - t)
        med = {key: statistics.median(v) for key, v in times.items()}
        gf = {key: flops / v / 1e9 for key, v in med.items()}
        print(f"| {name} | {gf['panels']:.1f} | {gf['rows']:.1f} | {gf['torch']:.1f} ({tname}) | "
              f"{med['rows'] / med['panels']:.2f}x | {med['torch'] / med['panels']:.2f}x | {'yes' if laid_out else 'no'} |")


if __name__ == "__main__":
    main()
