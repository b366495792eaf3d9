"""The sparse MoE block of Qwen3-30B-A3B as pypto kernels, at its real dimensions by default.

    p        = softmax(x @ gate^T)                        router probabilities [T, E] (fp32)
    w, ids   = topk(p, K);  w /= sum(w)                   the K experts of each token (norm_topk_prob)
    out[t]   = sum_k w[t, k] * FFN_ids[t, k](x[t])        FFN_e(x) = down_e(silu(gate_e x) * up_e x)

Two kernels make the block:

- `route`: the router, top-k and the grouping of the T*K (token, expert) pairs by expert: how
  many pairs each expert has (`counts`), where its run starts in expert order (`starts`), the
  token of each slot of that order (`tokens`), its weight (`weights`) and, per pair, its slot
  (`slots`). The slot of pair (t, k) is starts[e] plus the number of earlier pairs of expert e (a
  running sum of the one-hot pairs).
- `experts`: for each expert e, reads starts[e] and counts[e] from memory (PyPTO's scalar
  access `tensor[i]`) and multiplies that run of gathered token rows, in blocks of R rows, by
  the expert's gate/up and down weights (the weights stay in transformers' layout [E, 2I, H] and
  [E, H, I], read transposed); the weighted rows land in expert order, and each token sums its K
  rows back (a gather, no atomics).

An expert no token chose costs nothing: its loop runs zero blocks. Every computation runs in
kernels pypto generated; the Python here binds weights and calls the kernels.
"""

import dataclasses

import pypto
from models import common

T = pypto.frontend.dynamic("T")   # tokens
P = pypto.frontend.dynamic("P")   # (token, expert) pairs, T * K


@dataclasses.dataclass(frozen=True)
class MoeDims:
    hidden: int = 2048
    expert_ffn: int = 768
    experts: int = 128
    top_k: int = 8
    norm_topk_prob: bool = True


QWEN3_30B_A3B = MoeDims()

# The experts kernel's buffer budget (a core's L2 of 1 MiB).
BUDGET_KB = common.BUDGET_KB


def _whole_rows(k: int) -> int:
    return common.whole_rows(k, 8)


def _weight_rows(k: int, rows: int) -> int | None:
    """How many whole fp32 weight rows of length k (a power of two from 8 to 128) fit the budget
    beside a block's transposed token rows [k, rows] and the [., rows] product, or None."""
    free = common.BUDGET_KB * 1024 - k * rows * 4
    m = 128
    while m >= 8 and m * (k * 4 + rows * 4) > free:
        m //= 2
    return m if m >= 8 else None


def _bf16_weight_rows(n: int) -> int:
    """The weight rows of a bf16 x @ W^T tile for a weight of n rows: the most, up to 512, in
    multiples of 32 (the dot-product kernel's pairs of panels) that divide n, else 256. The kernel
    packs one pair of panels at a time and prefetches the next pair while this one multiplies, so a
    tile's first pair, streamed with nothing to overlap, is a smaller share of a larger tile."""
    return next((m for m in range(512, 31, -32) if n % m == 0), 256)


def _act(a, dt):
    """The activations in the weights' dtype (the next product's operand)."""
    return a if dt == pypto.DT_FP32 else pypto.cast(a, dt)


def group_by_expert(w, ids, n, K: int, E: int):
    """The (token, expert) pairs of a routing grouped by expert, traced into the calling kernel:
    w [n, K] (fp32) and ids [n, K] the weights and experts of each token's K pairs. Returns
    counts [E] and starts [E] (int32: each expert's run in expert order), tokens [n*K] (the token of
    each slot of that order), weights [n*K, 1] (its weight) and slots [n, K] (each pair's slot)."""
    pairs = n * K
    ids = pypto.reshape(pypto.cast(ids, pypto.DT_INT32), [pairs])
    # seen[p, e]: pairs of expert e among pairs 0..p; its last row counts each expert.
    pypto.set_vec_tile_shapes(64, E)
    seen = pypto.cumsum(pypto.cast(pypto.one_hot(ids, E), pypto.DT_INT32), 0)
    counts = pypto.cast(pypto.reshape(pypto.view(seen, [1, E], [pairs - 1, 0]), [E]), pypto.DT_INT32)
    pypto.set_vec_tile_shapes(E)
    starts = pypto.cumsum(counts, 0) - counts
    pypto.set_vec_tile_shapes(64, E)
    before = pypto.gather(seen, 1, pypto.reshape(ids, [pairs, 1]))          # [P, 1], this one included
    pypto.set_vec_tile_shapes(256)
    slots = pypto.cast(pypto.index_select(starts, 0, ids), pypto.DT_INT32) \
        + pypto.cast(pypto.reshape(before, [pairs]), pypto.DT_INT32) - 1
    token = pypto.cast(pypto.arange(pairs, dtype=pypto.DT_INT32) // K, pypto.DT_INT32)
    tokens = pypto.scatter(pypto.zeros([pairs], pypto.DT_INT32), 0, slots, token)
    weights = pypto.scatter(pypto.zeros([pairs], pypto.DT_FP32), 0, slots, pypto.reshape(w, [pairs]))
    return (pypto.cast(counts, pypto.DT_INT32), pypto.cast(starts, pypto.DT_INT32), tokens,
            pypto.reshape(weights, [pairs, 1]), pypto.reshape(slots, [n, K]))


def routing_types(E: int, K: int):
    """The return annotation of a route kernel: what group_by_expert returns."""
    return tuple[pypto.Tensor((E,), pypto.DT_INT32), pypto.Tensor((E,), pypto.DT_INT32),
                 pypto.Tensor((pypto.DYNAMIC,), pypto.DT_INT32), pypto.Tensor((pypto.DYNAMIC, 1), pypto.DT_FP32),
                 pypto.Tensor((T, K), pypto.DT_INT32)]


def make_experts_kernel(hidden: int, expert_ffn: int, experts: int, top_k: int, dtype=pypto.DT_FP32,
                        rows: int = 32, name: str = "moe_experts", with_shared: bool = False):
    """The experts kernel: the routed experts' SwiGLU FFNs over the runs group_by_expert made, and
    each token's weighted sum (plus `shared` [T, H], fp32, when `with_shared`)."""
    H, I, E, K = hidden, expert_ffn, experts, top_k
    dt, R = dtype, rows

    # Whole-row weight tiles of the transposed products (fp32 weights of more than 8 rows; bf16
    # weights take the x @ W^T form).
    gate_rows = _weight_rows(H, R) if dt == pypto.DT_FP32 else None
    down_rows = _weight_rows(I, R) if dt == pypto.DT_FP32 else None

    def experts_body(x, counts, starts, tokens, weights, slots, gate_up, down, shared=None):
        pairs = tokens.shape[0]
        pypto.set_vec_tile_shapes(32, 1024)   # 128 KiB tiles: few tasks for the copies and the fill
        xs = pypto.index_select(x, 0, tokens)                    # [P, H], the pairs in expert order
        ys = pypto.zeros([pairs, H], pypto.DT_FP32)
        for e in pypto.loop(E, idx_name="e"):
            start, count = starts[e], counts[e]
            for b in pypto.loop(0, pypto.ceildiv(count, R), idx_name="blk"):
                r0 = start + b * R
                valid = pypto.min(R, count - b * R)
                xb = pypto.view(xs, [valid, H], [r0, 0])
                if R <= 8 or dt == pypto.DT_BF16:
                    # Few rows: each output is a dot product of a token row and a weight row, read
                    # where it lies (tmatmul b_trans). One task per block. bf16 weights, more
                    # rows: x @ W^T too, by weight tiles of up to [512, 1024] read in place and
                    # packed for the bf16 dot products as they multiply (W @ x^T would pack the
                    # block's rows instead, but multiply every row of its tile however few tokens
                    # the expert has); the block's valid rows bound the product.
                    few = R <= 8
                    gate_n, down_n = ((_whole_rows(H), _whole_rows(I)) if few else
                                      (_bf16_weight_rows(I), _bf16_weight_rows(H)))
                    pypto.set_cube_tile_shapes([R, R], [H, H] if few else [1024, 1024], [gate_n, gate_n])
                    g = pypto.matmul(xb, gate_up[e, :I], pypto.DT_FP32, b_trans=True)     # [rows, I]
                    u = pypto.matmul(xb, gate_up[e, I:], pypto.DT_FP32, b_trans=True)
                    pypto.set_vec_tile_shapes(R, I)
                    a = _act(pypto.silu(g) * u, dt)
                    pypto.set_cube_tile_shapes([R, R], [I, I], [down_n, down_n])
                    y = pypto.matmul(a, down[e], pypto.DT_FP32, b_trans=True)            # [rows, H]
                else:
                    # More rows: the transposed products W @ x^T keep the weights as the left
                    # operand in their own layout. Where tiles of whole weight rows fit, they are
                    # dense (read in place, no copy) and the block's rows are transposed once into
                    # x^T [H, rows]; else 256 x 256 weight tiles (copies), each product reading
                    # the block's rows transposed.
                    if gate_rows is not None and down_rows is not None:
                        pypto.set_vec_tile_shapes(512, R)
                        xk, xk_trans = pypto.transpose(xb, 0, 1), False
                        gate_tiles, down_tiles = ([gate_rows] * 2, [H, H], [R, R]), ([down_rows] * 2, [I, I], [R, R])
                    else:
                        xk, xk_trans = xb, True
                        gate_tiles = down_tiles = ([256, 256], [256, 256], [R, R])
                    pypto.set_cube_tile_shapes(*gate_tiles)
                    gt = pypto.matmul(gate_up[e, :I], xk, pypto.DT_FP32, b_trans=xk_trans)   # [I, rows]
                    ut = pypto.matmul(gate_up[e, I:], xk, pypto.DT_FP32, b_trans=xk_trans)
                    pypto.set_vec_tile_shapes(256, R)
                    at = _act(pypto.silu(gt) * ut, dt)
                    pypto.set_cube_tile_shapes(*down_tiles)
                    yt = pypto.matmul(down[e], at, pypto.DT_FP32)                         # [H, rows]
                    pypto.set_vec_tile_shapes(256, R)
                    y = pypto.transpose(yt, 0, 1)
                pypto.set_vec_tile_shapes(R, 512)
                wb = pypto.view(weights, [valid, 1], [r0, 0])
                pypto.assemble(y * wb, [r0, 0], ys)
        pypto.set_vec_tile_shapes(4, K, 1024)
        picked = pypto.index_select(ys, 0, slots)                 # [T, K, H]
        out = pypto.sum(picked, 1)
        if shared is not None:
            pypto.set_vec_tile_shapes(8, 512)
            out = out + shared
        return pypto.cast(out, dt)

    ann = dict(x=pypto.Tensor((T, H), dt), counts=pypto.Tensor((E,), pypto.DT_INT32),
               starts=pypto.Tensor((E,), pypto.DT_INT32), tokens=pypto.Tensor((P,), pypto.DT_INT32),
               weights=pypto.Tensor((P, 1), pypto.DT_FP32), slots=pypto.Tensor((T, K), pypto.DT_INT32),
               gate_up=pypto.Tensor((E, 2 * I, H), dt), down=pypto.Tensor((E, H, I), dt))
    if with_shared:
        def kernel(x, counts, starts, tokens, weights, slots, gate_up, down, shared):
            return experts_body(x, counts, starts, tokens, weights, slots, gate_up, down, shared)
        ann["shared"] = pypto.Tensor((T, H), pypto.DT_FP32)
    else:
        def kernel(x, counts, starts, tokens, weights, slots, gate_up, down):
            return experts_body(x, counts, starts, tokens, weights, slots, gate_up, down)
    ann["return"] = pypto.Tensor((T, H), dt)
    kernel.__annotations__ = ann
    kernel.__name__ = kernel.__qualname__ = name
    return pypto.frontend.jit(kernel, pass_options={"sram_budget_kb": BUDGET_KB})


def make_kernels(dims: MoeDims = QWEN3_30B_A3B, dtype=pypto.DT_FP32, rows: int = 32):
    """The block's kernels for these dims and dtype (DT_FP32 or DT_BF16): a namespace with `route`
    and `experts`; `rows` is the experts kernel's block of token rows (R)."""
    H, E, K = dims.hidden, dims.experts, dims.top_k
    dt = dtype

    @pypto.frontend.jit
    def moe_route(x: pypto.Tensor((T, H), dt), gate: pypto.Tensor((E, H), dt)) -> routing_types(E, K):
        pypto.set_vec_tile_shapes(8, E)
        pypto.set_cube_tile_shapes([32, 32], [256, 256], [E, E])
        probs = pypto.softmax(pypto.matmul(x, gate, pypto.DT_FP32, b_trans=True), -1)
        w, ids = pypto.topk(probs, K, -1)
        if dims.norm_topk_prob:
            w = w / pypto.sum(w, -1, True)
        return group_by_expert(w, ids, x.shape[0], K, E)

    class Kernels:
        route = moe_route
        experts = make_experts_kernel(H, dims.expert_ffn, E, K, dtype, rows)

    return Kernels


def dims_of(config) -> MoeDims:
    """The block dims of a transformers Qwen3MoeConfig."""
    return MoeDims(config.hidden_size, config.moe_intermediate_size, config.num_experts, config.num_experts_per_tok,
                   bool(config.norm_topk_prob))


class MoeBlock:
    """The MoE block on its weights (torch tensors in transformers' layouts: the router [E, H], the
    experts' gate/up [E, 2I, H] and down [E, H, I]), called on hidden states [T, H]."""

    # Up to this many tokens an expert sees a few rows: the dot-product form (8-row blocks).
    FEW_TOKENS = 8

    @staticmethod
    def many_rows(dtype) -> int:
        """The experts kernel's block of token rows past FEW_TOKENS. fp32: 48 (a multiple of the
        vector width), so that at 512 tokens (about 32 per expert) nearly every expert's tokens make
        one block and its weights stream from memory once (Zen 5, 512 tokens, the experts kernel
        side by side: 48 rows 223-259 ms, 32 rows 254-292 ms). bf16: 32 (48 rows: 141 ms against
        122)."""
        return 32 if dtype == pypto.DT_BF16 else 48

    def __init__(self, gate, gate_up, down, dims: MoeDims = QWEN3_30B_A3B, dtype=pypto.DT_FP32, kernels=None):
        want = {"gate": (dims.experts, dims.hidden), "gate_up": (dims.experts, 2 * dims.expert_ffn, dims.hidden),
                "down": (dims.experts, dims.hidden, dims.expert_ffn)}
        for name, t in (("gate", gate), ("gate_up", gate_up), ("down", down)):
            if tuple(t.shape) != want[name]:
                raise ValueError(f"MoeBlock: weight '{name}' has shape {tuple(t.shape)}, expected {want[name]}")
        self.dims, self.dtype = dims, dtype
        self.gate, self.gate_up, self.down = gate, gate_up, down
        # kernels: (the few-token kernels, the many-token ones), e.g. their torch custom ops.
        self._few, self._many = kernels or (make_kernels(dims, dtype, rows=8),
                                            make_kernels(dims, dtype, rows=self.many_rows(dtype)))

    @classmethod
    def from_hf(cls, module, dtype=None, torch_ops=False):
        """The block of a transformers Qwen3MoeSparseMoeBlock (its weights used in place); with
        `torch_ops`, its kernels are called as torch custom ops (models.common.torch_ops)."""
        e = module.experts
        dims = MoeDims(e.hidden_dim, e.intermediate_dim, e.num_experts, module.gate.top_k, bool(module.gate.norm_topk_prob))
        if dtype is None:
            dtype = pypto.DT_BF16 if str(e.gate_up_proj.dtype) == "torch.bfloat16" else pypto.DT_FP32
        kernels = None
        if torch_ops:
            kernels = tuple(common.torch_ops(f"qwen3_moe_{rows}", (dims, dtype),
                                             lambda rows=rows: make_kernels(dims, dtype, rows=rows))
                            for rows in (8, cls.many_rows(dtype)))
        return cls(module.gate.weight.detach(), e.gate_up_proj.detach(), e.down_proj.detach(), dims, dtype, kernels)

    def __call__(self, x):
        if len(x.shape) != 2 or x.shape[1] != self.dims.hidden:
            raise ValueError(f"MoeBlock: x has shape {tuple(x.shape)}, expected [tokens, {self.dims.hidden}]")
        k = self._few if x.shape[0] <= self.FEW_TOKENS else self._many
        counts, starts, tokens, weights, slots = k.route(x, self.gate)
        return k.experts(x, counts, starts, tokens, weights, slots, self.gate_up, self.down)
