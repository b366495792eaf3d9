"""Scans, masks and selection: a causal mask with tril, a running sum with cumsum, and top-k
routing as in a mixture-of-experts gate (the k best experts per token, their softmax weights and
a one-hot dispatch mask), and PyPTO's two-step sort: sort32 orders blocks of 32 into (value,
index) pairs and mrgsort merges them. Each result is checked against torch."""

import torch

import pypto

TOKENS, EXPERTS, K = 50, 16, 2


@pypto.frontend.jit
def gate(logits: pypto.Tensor((pypto.DYNAMIC, EXPERTS), pypto.DT_FP32)):
    pypto.set_vec_tile_shapes(16, EXPERTS)
    values, experts = pypto.topk(logits, K)                # the K largest logits of each token, sorted
    weights = pypto.softmax(values, -1)                    # renormalised over the chosen experts
    pypto.set_vec_tile_shapes(16, K, EXPERTS)              # the tile of the 3-D ops that follow
    dispatch = pypto.one_hot(experts, EXPERTS)             # [tokens, K, experts], DT_INT64
    load = pypto.sum(pypto.cast(dispatch, pypto.DT_FP32), 1)  # tokens routed to each expert, per token
    pypto.set_vec_tile_shapes(16, EXPERTS)
    return weights, experts, pypto.cumsum(load, 0)         # the running count down the tokens


@pypto.frontend.jit
def causal(scores: pypto.Tensor((8, 8), pypto.DT_FP32)):
    pypto.set_vec_tile_shapes(8, 8)
    masked = pypto.tril(scores) + pypto.triu(pypto.full([8, 8], float("-inf"), pypto.DT_FP32), 1)
    return pypto.softmax(masked, -1), pypto.argmax(scores, -1)


@pypto.frontend.jit
def two_step_sort(x: pypto.Tensor((4, 96), pypto.DT_FP32)):
    pypto.set_vec_tile_shapes(4, 96)
    return pypto.mrgsort(pypto.sort32(x), 32)              # value, index, value, index, ... largest first


def main():
    torch.manual_seed(0)
    logits = torch.randn(TOKENS, EXPERTS)
    weights, experts, running = gate(logits)
    ref_values, ref_experts = torch.topk(logits, K)
    assert torch.equal(experts.long(), ref_experts)
    torch.testing.assert_close(weights, torch.softmax(ref_values, -1))
    load = torch.nn.functional.one_hot(ref_experts, EXPERTS).sum(1).float()
    torch.testing.assert_close(running, torch.cumsum(load, 0))

    scores = torch.randn(8, 8)
    probs, best = causal(scores)
    mask = torch.full((8, 8), float("-inf")).triu(1)
    torch.testing.assert_close(probs, torch.softmax(scores.tril() + mask, -1))
    assert torch.equal(best.long(), torch.argmax(scores, -1))
    x = torch.randn(4, 96)
    pairs = two_step_sort(x)
    ref_sorted, ref_order = torch.sort(x, dim=-1, descending=True, stable=True)
    assert torch.equal(pairs[:, 0::2], ref_sorted) and torch.equal(pairs[:, 1::2].long(), ref_order)
    print(f"top-{K} gate of {TOKENS} tokens over {EXPERTS} experts, a causal softmax and sort32 + mrgsort match "
          f"torch")


if __name__ == "__main__":
    main()
