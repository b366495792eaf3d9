"""Matrix multiplication in pypto: 2-D, batched with broadcast batch dims,
transposed operands (a_trans/b_trans read in place through strides), the
cube tile shape set with pypto.set_cube_tile_shapes, and fp16 inputs with an
fp32 result (out_dtype). Checked against torch."""

import torch

import pypto

M, K, N = 96, 160, 72


@pypto.frontend.jit
def mm(a: pypto.Tensor((M, K), pypto.DT_FP32), b: pypto.Tensor((K, N), pypto.DT_FP32)):
    # Each of m, k, n is [L0, L1]: L1 walks global memory, L0 sizes the register micro-kernel.
    pypto.set_cube_tile_shapes([16, 32], [32, 64], [16, 32])
    return pypto.matmul(a, b)


@pypto.frontend.jit
def batched(a: pypto.Tensor((2, 1, M, K), pypto.DT_FP32), b: pypto.Tensor((3, K, N), pypto.DT_FP32)):
    return a @ b                                   # batch dims broadcast: (2, 3, M, N)


@pypto.frontend.jit
def transposed(at: pypto.Tensor((K, M), pypto.DT_FP32), bt: pypto.Tensor((N, K), pypto.DT_FP32)):
    return pypto.matmul(at, bt, a_trans=True, b_trans=True)   # at.T @ bt.T


@pypto.frontend.jit
def half_in_fp32_out(a: pypto.Tensor((M, K), pypto.DT_FP16), b: pypto.Tensor((K, N), pypto.DT_FP16)):
    pypto.set_cube_tile_shapes([16, 32], [32, 64], [16, 32])
    return pypto.matmul(a, b, out_dtype=pypto.DT_FP32), pypto.matmul(a, b)


def main():
    torch.manual_seed(0)
    a, b = torch.randn(M, K), torch.randn(K, N)
    torch.testing.assert_close(mm(a, b), a @ b, atol=1e-4, rtol=1e-4)

    a4, b3 = torch.randn(2, 1, M, K), torch.randn(3, K, N)
    c = batched(a4, b3)
    assert c.shape == (2, 3, M, N)
    torch.testing.assert_close(c, a4 @ b3, atol=1e-4, rtol=1e-4)

    at, bt = torch.randn(K, M), torch.randn(N, K)
    torch.testing.assert_close(transposed(at, bt), at.t() @ bt.t(), atol=1e-4, rtol=1e-4)

    ah, bh = a.half(), b.half()
    c32, c16 = half_in_fp32_out(ah, bh)
    assert c32.dtype == torch.float32 and c16.dtype == torch.float16
    ref = ah.double() @ bh.double()
    torch.testing.assert_close(c32.double(), ref, atol=1e-4, rtol=1e-5)
    torch.testing.assert_close(c16.double(), ref, atol=0.1, rtol=2e-2)  # rounded to fp16 at the end

    stats = pypto.compile(mm, a, b).stats()
    print(f"matmul ({M}x{K}) @ ({K}x{N}) with cube tiles m=[16,32] k=[32,64] n=[16,32]: "
          f"{stats['tasks']} tasks; batched, transposed and fp16->fp32 also match torch")
    print("  cube tile default (outside any kernel):", pypto.get_cube_tile_shapes())


if __name__ == "__main__":
    main()
