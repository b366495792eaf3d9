"""The MoE layer of DeepSeek-V3 as pypto kernels, at its real hidden and expert sizes by default.

    s        = sigmoid(x @ gate^T)                          expert affinities [T, E] (fp32)
    c        = s + bias                                     the choice scores (e_score_correction_bias)
    groups   = top-`topk_group` of the n_group groups by the sum of each group's two best c
    ids      = top-K experts by c among the chosen groups' experts
    w        = s[ids] / (sum + 1e-20) * routed_scaling_factor
    out[t]   = sum_k w[t, k] * FFN_ids[t,k](x[t]) + shared(x[t])     FFN, shared: SwiGLU

Two kernels make the layer: `route` (the router, the group-limited top-k, the shared expert's
FFN, and the grouping of the (token, expert) pairs by expert of models/qwen3_moe) and `experts`
(models/qwen3_moe's experts kernel, which also adds the shared expert's output). The routed
experts read their runs from memory, so an expert no token chose costs nothing.
"""

import dataclasses

import pypto
from models import common
from models.qwen3_moe import block as qwen3_moe

T = qwen3_moe.T


@dataclasses.dataclass(frozen=True)
class DeepseekMoeDims:
    hidden: int = 7168
    expert_ffn: int = 2048
    experts: int = 256
    top_k: int = 8
    n_group: int = 8
    topk_group: int = 4
    shared_experts: int = 1
    routed_scaling_factor: float = 2.5
    norm_topk_prob: bool = True


DEEPSEEK_V3 = DeepseekMoeDims()


def _fp32(x):
    return x if x.dtype == pypto.DT_FP32 else pypto.cast(x, pypto.DT_FP32)


def make_kernels(dims: DeepseekMoeDims = DEEPSEEK_V3, dtype=pypto.DT_FP32, rows: int = 32):
    """The layer's kernels for these dims and dtype (DT_FP32 or DT_BF16 weights and activations;
    the router is fp32, as transformers'): a namespace with `route` and `experts`."""
    H, I, E, K = dims.hidden, dims.expert_ffn, dims.experts, dims.top_k
    G, TG, IS = dims.n_group, dims.topk_group, dims.expert_ffn * dims.shared_experts
    if E % G:
        raise ValueError(f"DeepseekMoeDims: {E} experts do not split into {G} groups")
    if K > TG * (E // G):
        raise ValueError(f"DeepseekMoeDims: top_k {K} exceeds the {TG * (E // G)} experts of {TG} groups")
    dt = dtype

    @pypto.frontend.jit(pass_options={"sram_budget_kb": qwen3_moe.BUDGET_KB})
    def deepseek_moe_route(x: pypto.Tensor((T, H), dt), gate: pypto.Tensor((E, H), pypto.DT_FP32),
                           bias: pypto.Tensor((E,), pypto.DT_FP32), shared_gate: pypto.Tensor((IS, H), dt),
                           shared_up: pypto.Tensor((IS, H), dt), shared_down: pypto.Tensor((H, IS), dt)) \
            -> tuple[qwen3_moe.routing_types(E, K).__args__ + (pypto.Tensor((T, H), pypto.DT_FP32),)]:
        n = x.shape[0]
        pypto.set_vec_tile_shapes(8, E)
        pypto.set_cube_tile_shapes([32, 32], [256, 256], [E, E])
        scores = pypto.sigmoid(pypto.matmul(_fp32(x), gate, pypto.DT_FP32, b_trans=True))     # [T, E]
        choice = scores + pypto.reshape(bias, [1, E])
        # Each group's score: the sum of its two best choice scores; keep the best TG groups.
        pypto.set_vec_tile_shapes(8, G, E // G)
        grouped = pypto.reshape(choice, [n, G, E // G])
        best2, _ = pypto.topk(grouped, 2, -1)
        group_scores = pypto.sum(best2, -1)                                                    # [T, G]
        pypto.set_vec_tile_shapes(8, G)
        _, chosen = pypto.topk(group_scores, TG, -1)                                          # [T, TG]
        keep = pypto.scatter(pypto.zeros([n, G], pypto.DT_FP32), 1, chosen, 1.0)
        pypto.set_vec_tile_shapes(8, G, E // G)
        masked = pypto.where(pypto.reshape(keep, [n, G, 1]) > 0, grouped, float("-inf"))
        pypto.set_vec_tile_shapes(8, E)
        _, ids = pypto.topk(pypto.reshape(masked, [n, E]), K, -1)
        w = pypto.gather(scores, 1, ids)
        if dims.norm_topk_prob:
            w = w / (pypto.sum(w, -1, True) + 1e-20)
        w = w * dims.routed_scaling_factor
        routed = qwen3_moe.group_by_expert(w, ids, n, K, E)
        # The shared expert: a dense SwiGLU FFN of every token (few tokens: the experts kernel's
        # dot-product tiles).
        pypto.set_vec_tile_shapes(8, 512)
        few = rows <= 8
        fit = qwen3_moe._whole_rows
        pypto.set_cube_tile_shapes(*([[rows, rows], [H, H], [fit(H), fit(H)]] if few else
                                     [[64, 64], [256, 256], [256, 256]]))
        g = pypto.matmul(x, shared_gate, pypto.DT_FP32, b_trans=True)
        u = pypto.matmul(x, shared_up, pypto.DT_FP32, b_trans=True)
        a = qwen3_moe._act(pypto.silu(g) * u, dt)
        if few:
            pypto.set_cube_tile_shapes([rows, rows], [IS, IS], [fit(IS), fit(IS)])
        shared = pypto.matmul(a, shared_down, pypto.DT_FP32, b_trans=True)
        return routed + (shared,)

    class Kernels:
        route = deepseek_moe_route
        experts = qwen3_moe.make_experts_kernel(H, I, E, K, dtype, rows, name="deepseek_moe_experts",
                                                with_shared=True)

    return Kernels


def dims_of(config) -> DeepseekMoeDims:
    """The MoE dims of a transformers DeepseekV3Config."""
    return DeepseekMoeDims(config.hidden_size, config.moe_intermediate_size, config.n_routed_experts,
                           config.num_experts_per_tok, config.n_group, config.topk_group, config.n_shared_experts,
                           float(config.routed_scaling_factor), bool(config.norm_topk_prob))


class DeepseekMoe:
    """The MoE layer on its weights (torch tensors in transformers' layouts), called on hidden
    states [T, H]."""

    FEW_TOKENS = 8
    @staticmethod
    def many_rows(dtype) -> int:
        """The experts kernel's block of token rows past FEW_TOKENS. bf16: 128, as a routed expert
        here sees 4x the tokens of a Qwen3-MoE expert (8 of 32 experts against 8 of 128) and each
        block packs the expert's weights for the bf16 dot products once (Zen 5, 512 tokens: experts
        kernel 622 ms with 128 rows, 1072 ms with 32). fp32: 32 (its weight tiles are copies)."""
        return 128 if dtype == pypto.DT_BF16 else 32

    def __init__(self, weights: dict, dims: DeepseekMoeDims = DEEPSEEK_V3, dtype=pypto.DT_FP32, kernels=None):
        E, H, I, IS = dims.experts, dims.hidden, dims.expert_ffn, dims.expert_ffn * dims.shared_experts
        want = {"gate": (E, H), "bias": (E,), "gate_up": (E, 2 * I, H), "down": (E, H, I),
                "shared_gate": (IS, H), "shared_up": (IS, H), "shared_down": (H, IS)}
        for name, shape in want.items():
            if name not in weights:
                raise ValueError(f"DeepseekMoe: weight '{name}' is missing")
            if tuple(weights[name].shape) != shape:
                raise ValueError(f"DeepseekMoe: weight '{name}' has shape {tuple(weights[name].shape)}, "
                                 f"expected {shape}")
        self.dims, self.dtype, self.w = dims, dtype, weights
        # kernels: (the few-token kernels, the many-token ones), e.g. their torch custom ops.
        self._few, self._many = kernels or (make_kernels(dims, dtype, rows=8),
                                            make_kernels(dims, dtype, rows=self.many_rows(dtype)))

    @classmethod
    def from_hf(cls, module, dims: DeepseekMoeDims | None = None, torch_ops: bool = False):
        """The layer of a transformers DeepseekV3MoE (its weights used in place, the router's fp32);
        with `torch_ops`, its kernels are called as torch custom ops (models.common.torch_ops)."""
        dims = dims or dims_of(module.config)
        e, s = module.experts, module.shared_experts
        dtype = pypto.DT_BF16 if str(e.gate_up_proj.dtype) == "torch.bfloat16" else pypto.DT_FP32
        w = {"gate": module.gate.weight.detach().float(), "bias": module.gate.e_score_correction_bias.detach().float(),
             "gate_up": e.gate_up_proj.detach(), "down": e.down_proj.detach(), "shared_gate": s.gate_proj.weight.detach(),
             "shared_up": s.up_proj.weight.detach(), "shared_down": s.down_proj.weight.detach()}
        kernels = None
        if torch_ops:
            kernels = tuple(common.torch_ops(f"deepseek_v3_moe_{rows}", (dims, dtype),
                                             lambda rows=rows: make_kernels(dims, dtype, rows=rows))
                            for rows in (8, cls.many_rows(dtype)))
        return cls(w, dims, dtype, kernels)

    def __call__(self, x):
        if len(x.shape) != 2 or x.shape[1] != self.dims.hidden:
            raise ValueError(f"DeepseekMoe: x has shape {tuple(x.shape)}, expected [tokens, {self.dims.hidden}]")
        k = self._few if x.shape[0] <= self.FEW_TOKENS else self._many
        w = self.w
        *routed, shared = k.route(x, w["gate"], w["bias"], w["shared_gate"], w["shared_up"], w["shared_down"])
        return k.experts(x, *routed, w["gate_up"], w["down"], shared)
