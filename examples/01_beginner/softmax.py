"""Softmax in pypto: traced, tiled, fused into one InCore function, compiled
to C++ and run on the caller's torch tensor. Checks against torch.softmax and
prints a short summary of what the compiler did."""

import re

import torch

import pypto

M, N = 64, 1024


@pypto.frontend.jit
def softmax(x: pypto.Tensor((M, N), pypto.DT_FP32)) -> pypto.Tensor((M, N), pypto.DT_FP32):
    pypto.set_vec_tile_shapes(32, 32)
    m = pypto.amax(x, -1, True)
    e = pypto.exp(pypto.sub(x, m))
    return pypto.div(e, pypto.sum(e, -1, True))


def main():
    x = torch.randn(M, N)
    y = softmax(x)
    err = (y - torch.softmax(x, -1)).abs().max().item()
    assert err < 1e-5, f"softmax differs from torch.softmax by {err}"

    compiled = pypto.compile(softmax, x)
    stats = compiled.stats()
    print(f"softmax {M}x{N}: max |pypto - torch.softmax| = {err:.2e}")
    print(f"  InCore functions: {stats['incore_functions']}, tasks: {stats['tasks']}, "
          f"buffer bytes: {stats['buffer_bytes']}")
    print(f"  compile: {stats['compile_seconds']:.3f} s (cache: {stats['cache']})")
    pto = compiled.pto()
    # An instruction line is `%dst = tOP ...` or, for stores, `tOP ...`.
    ops = {m.group(1) for m in (re.match(r"\s*(?:%\w+ = )?(t[a-z0-9_]+) ", ln) for ln in pto.splitlines()) if m}
    print("  .pto instructions used:", ", ".join(sorted(ops)))
    print("  stages in compiled.dump():", ", ".join(line[3:] for line in compiled.dump().splitlines()
                                                    if line.startswith("== ")))


if __name__ == "__main__":
    main()
