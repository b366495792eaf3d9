"""Indexing ops: an embedding lookup (index_select) and its gradient (index_add, repeated tokens
accumulate), a paged KV cache written slot by slot (scatter_update, in place) and read back by a
block table (index_select), and index_put_ with two index tensors. Checked against torch."""

import torch

import pypto

VOCAB, DIM, SEQ = 1000, 64, 48
BLOCKS, BLOCK_SIZE, HEAD_DIM = 8, 16, 32


@pypto.frontend.jit
def embed(table: pypto.Tensor((VOCAB, DIM), pypto.DT_FP32), tokens: pypto.Tensor((pypto.DYNAMIC,), pypto.DT_INT32),
          grad: pypto.Tensor((pypto.DYNAMIC, DIM), pypto.DT_FP32)):
    pypto.set_vec_tile_shapes(16, DIM)
    rows = pypto.index_select(table, 0, tokens)              # [seq, dim]
    zeros = pypto.zeros(VOCAB, DIM, dtype=pypto.DT_FP32)
    table_grad = pypto.index_add(zeros, 0, tokens, grad)     # repeated tokens add up, in order
    return rows, table_grad


@pypto.frontend.jit
def write_and_read_cache(cache: pypto.Tensor((BLOCKS, BLOCK_SIZE, 1, HEAD_DIM), pypto.DT_FP16),
                         slots: pypto.Tensor((1, 4), pypto.DT_INT64),
                         new_kv: pypto.Tensor((1, 4, 1, HEAD_DIM), pypto.DT_FP16),
                         block_table: pypto.Tensor((3,), pypto.DT_INT32)):
    pypto.set_vec_tile_shapes(1, 4, 1, HEAD_DIM)
    pypto.scatter_update(cache, -2, slots, new_kv)           # written into the caller's cache
    return pypto.index_select(cache, 0, block_table) * 1.0   # this sequence's blocks, in its order


@pypto.frontend.jit
def put(x: pypto.Tensor((6, 7), pypto.DT_FP32), r: pypto.Tensor((5,), pypto.DT_INT64),
        c: pypto.Tensor((5,), pypto.DT_INT64), v: pypto.Tensor((5,), pypto.DT_FP32)):
    pypto.set_vec_tile_shapes(8, 8)
    pypto.index_put_(x, (r, c), v, True)


def main():
    torch.manual_seed(0)
    table, tokens, grad = torch.randn(VOCAB, DIM), torch.randint(0, 50, (SEQ,), dtype=torch.int32), torch.randn(SEQ, DIM)
    rows, table_grad = embed(table, tokens, grad)
    assert torch.equal(rows, table[tokens.long()])
    torch.testing.assert_close(table_grad, torch.zeros(VOCAB, DIM).index_add_(0, tokens.long(), grad))

    cache = torch.zeros(BLOCKS, BLOCK_SIZE, 1, HEAD_DIM, dtype=torch.float16)
    slots = torch.tensor([[5, 17, 18, 127]])                 # block 0 slot 5, block 1 slots 1-2, block 7 slot 15
    new_kv = torch.randn(1, 4, 1, HEAD_DIM).half()
    block_table = torch.tensor([7, 1, 0], dtype=torch.int32)
    seen = write_and_read_cache(cache, slots, new_kv, block_table)
    ref = torch.zeros(BLOCKS * BLOCK_SIZE, 1, HEAD_DIM, dtype=torch.float16)
    ref[slots.flatten()] = new_kv[0]
    ref = ref.reshape(BLOCKS, BLOCK_SIZE, 1, HEAD_DIM)
    assert torch.equal(cache, ref)
    assert torch.equal(seen, ref[block_table.long()])

    x = torch.zeros(6, 7)
    r, c, v = torch.tensor([0, 5, 5, -1, 2]), torch.tensor([1, 6, 6, 0, -7]), torch.arange(1.0, 6.0)
    put(x, r, c, v)
    assert torch.equal(x, torch.zeros(6, 7).index_put_((r, c), v, accumulate=True))
    print("embedding lookup and gradient, paged KV cache and index_put_ match torch")


if __name__ == "__main__":
    main()
