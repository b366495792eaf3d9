"""Multi-head attention written from primitives, compiled to flash attention:

    o = softmax(q @ k^T / sqrt(d)) @ v

The compiler's fuse_attention pass recognises the matmul -> softmax -> matmul
chain and tiles it as an online softmax over key blocks: each task takes a
block of query rows and streams the key and value blocks past a running row
max, row sum and output accumulator, so the S x S scores never reach memory.
The sequence length is dynamic: one compiled kernel serves every length.
Checked against F.scaled_dot_product_attention."""

import math
import re

import torch

import pypto

H, D = 4, 64                       # heads, head size
S = pypto.frontend.dynamic("S")    # sequence length, bound at call time


@pypto.frontend.jit
def attention(q: pypto.Tensor((H, S, D), pypto.DT_FP32), k: pypto.Tensor((H, S, D), pypto.DT_FP32),
              v: pypto.Tensor((H, S, D), pypto.DT_FP32)) -> pypto.Tensor((H, S, D), pypto.DT_FP32):
    pypto.set_vec_tile_shapes(1, 8, 64)
    pypto.set_cube_tile_shapes([32, 64], [64, 64], [64, 128])   # 64 query rows, 128 keys per block
    scores = pypto.matmul(q, k, b_trans=True) / math.sqrt(D)
    return pypto.matmul(pypto.softmax(scores, -1), v)


def main():
    torch.manual_seed(0)
    for seq in (200, 517):
        q, k, v = (torch.randn(H, seq, D) for _ in range(3))
        out = attention(q, k, v)
        ref = torch.nn.functional.scaled_dot_product_attention(q, k, v)
        torch.testing.assert_close(out, ref, atol=2e-5, rtol=1e-4)
        print(f"attention H={H} S={seq} D={D}: max |pypto - torch| = {(out - ref).abs().max().item():.1e}")

    compiled = pypto.compile(attention, q, k, v)
    passes = compiled.dump("passes")
    fused = re.search(r"= attention\([^)]*\)", passes).group(0)
    print(f"  fuse_attention: {fused}")
    # Besides q, k, v and the output, the only memory is the transposed key; no buffer holds scores.
    for line in compiled.dump("execution").splitlines():
        if re.match(r"\s+%\w+ : !pto.memref", line) and not re.search(r"// (input|output|view)", line):
            print(f"  buffer:{line.split('//')[0].rstrip()[1:]}  ({line.split('// ')[1]})")
    blocks = H * -(-q.shape[1] // 64)
    print(f"  tasks: {compiled.stats()['tasks']} ({blocks} copying the key, {blocks} of attention: one per head "
          f"and block of 64 query rows)")


if __name__ == "__main__":
    main()
