"""The runtime's task-graph benchmark, shaped like a LLaMA layer at toy dimensions (hidden size 64,
one head, RoPE as a dense H x H matmul): InCore kernels built at the tile level with
PTOFunctionBuilder and one orchestration in three phases. It measures how the task graph scales
with the sequence length (the PTO seed's table); it is not a model block. The LLaMA-3 decoder
layer at its real dimensions, checked against transformers, is models/llama3.

- pre-attention, per row tile: RMSNorm, Q/K/V projections, RoPE on Q and K;
- flash attention, per query tile: an init, then for every key/value tile a
  score block, an online-softmax update and an output update, then a
  normalisation (N x N blocks, no score matrix in global memory);
- post-attention, per row tile: output projection, residual, RMSNorm, the
  SwiGLU FFN (gate, up, silu * up, down) and the second residual.

Row tiles have `base_rows` rows (32). With `adaptive=True` every loop is
binary-expanded (max_range=4096 tiles, min_range=16) and its power-of-two
blocks use the 64-row variants of the kernels (`<name>_64`), which halves the
iterations of each loop: tasks = 16 N + 3 N^2 for N tiles, 16 (N/2) + 3 (N/2)^2
with adaptive tiles (the PTO seed's table).

The hidden size is a parameter so that the layer runs with real kernels on a
small machine; the task graph depends only on the sequence length.
"""

from __future__ import annotations

import math

import numpy as np

import pypto.pto as pto
from pypto.pto import ElementType, MemorySpace, PTOFunctionBuilder, PTOModule

F32 = ElementType.F32
GM = MemorySpace.GLOBAL
EPS = 1e-6
MAX_TILES, MIN_TILES = 4096, 16

# Every tensor the orchestration touches, in parameter order: inputs and
# weights, then the output, then the intermediates (row-blocked scratch).
INPUTS = ["x", "w_norm1", "wq", "wk", "wv", "rot", "cos", "sin", "wo", "w_norm2", "wg", "wu", "wd"]
SCRATCH = ["xn", "q", "k", "v", "qr", "kr", "m", "l", "acc", "s", "p", "attn", "a", "h", "hn", "g", "u", "sw", "d"]


def _kernels(module: PTOModule, rows: int, hidden: int, ffn: int, suffix: str) -> None:
    R, H, F = rows, hidden, ffn

    def fn(name):
        return PTOFunctionBuilder(name + suffix, module=module).in_core()

    def matmul(name, k, n):
        (fn(name).memref("a", GM, F32).memref("w", GM, F32).memref("c", GM, F32)
            .tile("ta", R, k, F32).tile("tw", k, n, F32).tile("tc", R, n, F32)
            .load("ta", "a").load("tw", "w").matmul("tc", "ta", "tw").store("tc", "c").build())

    def rmsnorm(name):
        (fn(name).memref("x", GM, F32).memref("w", GM, F32).memref("y", GM, F32)
            .tile("tx", R, H, F32).tile("tw", 1, H, F32).tile("sq", R, H, F32).tile("ss", R, 1, F32)
            .tile("ms", R, 1, F32).tile("me", R, 1, F32).tile("r", R, 1, F32).tile("ty", R, H, F32)
            .tile("tz", R, H, F32)
            .load("tx", "x").load("tw", "w").mul("sq", "tx", "tx").rowsum("ss", "sq").muls("ms", "ss", 1.0 / H)
            .adds("me", "ms", EPS).rsqrt("r", "me").rowexpandmul("ty", "tx", "r").colexpandmul("tz", "ty", "tw")
            .store("tz", "y").build())

    def binary(name, op):
        b = (fn(name).memref("a", GM, F32).memref("b", GM, F32).memref("c", GM, F32)
             .tile("ta", R, H, F32).tile("tb", R, H, F32).tile("tc", R, H, F32).load("ta", "a").load("tb", "b"))
        getattr(b, op)("tc", "ta", "tb").store("tc", "c").build()

    rmsnorm("rmsnorm")
    for proj in ("q_proj", "k_proj", "v_proj"):
        matmul(proj, H, H)
    for rope in ("rope_q", "rope_k"):
        (fn(rope).memref("x", GM, F32).memref("cos", GM, F32).memref("sin", GM, F32).memref("rot", GM, F32)
            .memref("y", GM, F32)
            .tile("tx", R, H, F32).tile("tc", R, H, F32).tile("ts", R, H, F32).tile("tr", H, H, F32)
            .tile("a", R, H, F32).tile("rx", R, H, F32).tile("b", R, H, F32).tile("ty", R, H, F32)
            .load("tx", "x").load("tc", "cos").load("ts", "sin").load("tr", "rot")
            .mul("a", "tx", "tc").matmul("rx", "tx", "tr").mul("b", "rx", "ts").add("ty", "a", "b")
            .store("ty", "y").build())
    (fn("attn_init").memref("m", GM, F32).memref("l", GM, F32).memref("acc", GM, F32)
        .tile("tm", R, 1, F32).tile("tl", R, 1, F32).tile("ta", R, H, F32)
        .fill("tm", float("-inf")).fill("tl", 0.0).fill("ta", 0.0)
        .store("tm", "m").store("tl", "l").store("ta", "acc").build())
    (fn("attn_score").memref("q", GM, F32).memref("kt", GM, F32).memref("s", GM, F32)
        .tile("tq", R, H, F32).tile("tk", H, R, F32).tile("ts", R, R, F32).tile("tss", R, R, F32)
        .load("tq", "q").load("tk", "kt").matmul("ts", "tq", "tk").muls("tss", "ts", 1.0 / math.sqrt(H))
        .store("tss", "s").build())
    (fn("attn_softmax").memref("s", GM, F32).memref("m", GM, F32).memref("l", GM, F32).memref("acc", GM, F32)
        .memref("p", GM, F32)
        .tile("ts", R, R, F32).tile("tm", R, 1, F32).tile("tl", R, 1, F32).tile("ta", R, H, F32)
        .tile("mx", R, 1, F32).tile("mn", R, 1, F32).tile("d", R, R, F32).tile("tp", R, R, F32)
        .tile("dm", R, 1, F32).tile("corr", R, 1, F32).tile("ps", R, 1, F32).tile("l2", R, 1, F32)
        .tile("l3", R, 1, F32).tile("a2", R, H, F32)
        .load("ts", "s").load("tm", "m").load("tl", "l").load("ta", "acc")
        .rowmax("mx", "ts").max("mn", "tm", "mx").rowexpandsub("d", "ts", "mn").exp("tp", "d")
        .sub("dm", "tm", "mn").exp("corr", "dm").rowsum("ps", "tp").mul("l2", "tl", "corr").add("l3", "l2", "ps")
        .rowexpandmul("a2", "ta", "corr")
        .store("mn", "m").store("l3", "l").store("a2", "acc").store("tp", "p").build())
    (fn("attn_output").memref("p", GM, F32).memref("v", GM, F32).memref("acc", GM, F32)
        .tile("tp", R, R, F32).tile("tv", R, H, F32).tile("ta", R, H, F32).tile("pv", R, H, F32)
        .tile("a2", R, H, F32)
        .load("tp", "p").load("tv", "v").load("ta", "acc").matmul("pv", "tp", "tv").add("a2", "ta", "pv")
        .store("a2", "acc").build())
    (fn("attn_finalize").memref("acc", GM, F32).memref("l", GM, F32).memref("o", GM, F32)
        .tile("ta", R, H, F32).tile("tl", R, 1, F32).tile("to", R, H, F32)
        .load("ta", "acc").load("tl", "l").rowexpanddiv("to", "ta", "tl").store("to", "o").build())
    matmul("o_proj", H, H)
    binary("residual", "add")
    rmsnorm("rmsnorm2")
    matmul("gate_proj", H, F)
    matmul("up_proj", H, F)
    (fn("swiglu").memref("g", GM, F32).memref("u", GM, F32).memref("y", GM, F32)
        .tile("tg", R, F, F32).tile("tu", R, F, F32).tile("sg", R, F, F32).tile("ty", R, F, F32)
        .load("tg", "g").load("tu", "u").silu("sg", "tg").mul("ty", "sg", "tu").store("ty", "y").build())
    matmul("down_proj", F, H)
    binary("residual2", "add")


def build_module(hidden: int = 64, ffn: int = 128, base_rows: int = 32, adaptive: bool = True) -> PTOModule:
    """The layer as a PTO module (entry: `llama_layer`)."""
    module = PTOModule("llama7b_layer")
    _kernels(module, base_rows, hidden, ffn, "")
    if adaptive:
        _kernels(module, 2 * base_rows, hidden, ffn, f"_{2 * base_rows}")
    levels = {b: 2 * base_rows for b in (4096, 2048, 1024, 512, 256, 128, 64, 32, 16)}
    levels[0] = base_rows
    ranged = dict(max_range=MAX_TILES, min_range=MIN_TILES, tile_levels=levels) if adaptive else {}

    o = PTOFunctionBuilder("llama_layer", module=module).not_in_core()
    for name in INPUTS + ["out"] + SCRATCH:
        o.memref(name, GM, F32)
    o.scalar("num_tiles", ElementType.I32)
    # K transposed for the score blocks: a view, no copy.
    o.view("kr_t", "kr", ["kr_d1", "kr_d0"], [0, 0], [1, 0], [1, 1], F32)

    def row(t, i="i"):
        return (t, i, 0)

    # Phase 1: pre-attention, every row tile independent.
    (o.for_loop("i", 0, "num_tiles", 1, **ranged)
        .call("rmsnorm", {"x": row("x"), "w": "w_norm1", "y": row("xn")})
        .call("q_proj", {"a": row("xn"), "w": "wq", "c": row("q")})
        .call("k_proj", {"a": row("xn"), "w": "wk", "c": row("k")})
        .call("v_proj", {"a": row("xn"), "w": "wv", "c": row("v")})
        .call("rope_q", {"x": row("q"), "cos": row("cos"), "sin": row("sin"), "rot": "rot", "y": row("qr")})
        .call("rope_k", {"x": row("k"), "cos": row("cos"), "sin": row("sin"), "rot": "rot", "y": row("kr")})
        .end_for())
    # Phase 2: flash attention, query tile i against every key/value tile j.
    (o.for_loop("qi", 0, "num_tiles", 1, **ranged)
        .call("attn_init", {"m": row("m", "qi"), "l": row("l", "qi"), "acc": row("acc", "qi")})
        .for_loop("kj", 0, "num_tiles", 1, **ranged)
        .call("attn_score", {"q": row("qr", "qi"), "kt": ("kr_t", 0, "kj"), "s": row("s", "qi")})
        .call("attn_softmax", {"s": row("s", "qi"), "m": row("m", "qi"), "l": row("l", "qi"),
                               "acc": row("acc", "qi"), "p": row("p", "qi")})
        .call("attn_output", {"p": row("p", "qi"), "v": row("v", "kj"), "acc": row("acc", "qi")})
        .end_for()
        .call("attn_finalize", {"acc": row("acc", "qi"), "l": row("l", "qi"), "o": row("attn", "qi")})
        .end_for())
    # Phase 3: post-attention and FFN, every row tile independent.
    (o.for_loop("i", 0, "num_tiles", 1, **ranged)
        .call("o_proj", {"a": row("attn"), "w": "wo", "c": row("a")})
        .call("residual", {"a": row("x"), "b": row("a"), "c": row("h")})
        .call("rmsnorm2", {"x": row("h"), "w": "w_norm2", "y": row("hn")})
        .call("gate_proj", {"a": row("hn"), "w": "wg", "c": row("g")})
        .call("up_proj", {"a": row("hn"), "w": "wu", "c": row("u")})
        .call("swiglu", {"g": row("g"), "u": row("u"), "y": row("sw")})
        .call("down_proj", {"a": row("sw"), "w": "wd", "c": row("d")})
        .call("residual2", {"a": row("h"), "b": row("d"), "c": row("out")})
        .end_for())
    o.build()
    return module


def expected_tasks(seq_len: int, base_rows: int = 32, adaptive: bool = True) -> int:
    n = seq_len // base_rows
    if adaptive:
        n //= 2
    return 16 * n + 3 * n * n


def scratch_shapes(seq_len: int, hidden: int, ffn: int, base_rows: int = 32) -> dict:
    blk = 2 * base_rows  # the widest score block (64-row variants)
    shapes = {name: (seq_len, hidden) for name in SCRATCH}
    shapes.update(m=(seq_len, 1), l=(seq_len, 1), s=(seq_len, blk), p=(seq_len, blk), g=(seq_len, ffn),
                  u=(seq_len, ffn), sw=(seq_len, ffn))
    return shapes


def weights(hidden: int, ffn: int, seed: int = 0) -> dict:
    """Random weights, RoPE tables come from `rope_tables`."""
    rng = np.random.default_rng(seed)

    def w(*s, scale):
        return (rng.standard_normal(s) * scale).astype(np.float32)

    H, F = hidden, ffn
    rot = np.zeros((H, H), np.float32)  # x @ rot = rotate_half(x) = [-x2, x1]
    half = H // 2
    rot[half:, :half] = -np.eye(half, dtype=np.float32)
    rot[:half, half:] = np.eye(half, dtype=np.float32)
    return dict(w_norm1=1 + w(1, H, scale=0.1), wq=w(H, H, scale=H ** -0.5), wk=w(H, H, scale=H ** -0.5),
                wv=w(H, H, scale=H ** -0.5), rot=rot, wo=w(H, H, scale=H ** -0.5), w_norm2=1 + w(1, H, scale=0.1),
                wg=w(H, F, scale=H ** -0.5), wu=w(H, F, scale=H ** -0.5), wd=w(F, H, scale=F ** -0.5))


def rope_tables(seq_len: int, hidden: int) -> tuple[np.ndarray, np.ndarray]:
    half = hidden // 2
    inv = 1.0 / (10000 ** (np.arange(half) / half))
    ang = np.arange(seq_len)[:, None] * inv[None, :]
    ang = np.concatenate([ang, ang], axis=1)
    return np.cos(ang).astype(np.float32), np.sin(ang).astype(np.float32)


class LlamaLayer:
    """The compiled layer: `layer(x)` returns the output for a (seq, hidden)
    float32 NumPy array; scratch buffers are allocated per call."""

    def __init__(self, hidden: int = 64, ffn: int = 128, base_rows: int = 32, adaptive: bool = True, seed: int = 0,
                 empty_kernels: bool = False):
        self.hidden, self.ffn, self.base_rows = hidden, ffn, base_rows
        self.program = pto.compile(build_module(hidden, ffn, base_rows, adaptive), empty_kernels=empty_kernels)
        self.w = weights(hidden, ffn, seed)

    def arrays(self, x: np.ndarray) -> dict:
        seq = x.shape[0]
        if seq % (2 * self.base_rows * MIN_TILES):
            raise ValueError(f"sequence length must be a multiple of {2 * self.base_rows * MIN_TILES}, found {seq}")
        cos, sin = rope_tables(seq, self.hidden)
        a = dict(self.w, x=x, cos=cos, sin=sin, out=np.zeros_like(x))
        for name, shape in scratch_shapes(seq, self.hidden, self.ffn, self.base_rows).items():
            a[name] = np.zeros(shape, np.float32)
        return a

    def shapes_only(self, seq: int) -> dict:
        """Zeroed arguments of the right shapes, for building or counting the
        task graph or running empty kernels: np.zeros maps its pages lazily, so
        memory nobody touches stays unallocated."""
        shapes = {name: np.shape(v) for name, v in self.w.items()}
        shapes.update(x=(seq, self.hidden), cos=(seq, self.hidden), sin=(seq, self.hidden), out=(seq, self.hidden))
        shapes.update(scratch_shapes(seq, self.hidden, self.ffn, self.base_rows))
        out = {k: np.zeros(s, np.float32) for k, s in shapes.items()}
        out["num_tiles"] = seq // self.base_rows
        return out

    def __call__(self, x: np.ndarray) -> np.ndarray:
        a = self.arrays(x)
        self.program(**a, num_tiles=x.shape[0] // self.base_rows)
        return a["out"]


def reference(x, w, cos, sin):
    """The same layer in torch (non-causal single-head attention)."""
    import torch

    t = {k: torch.from_numpy(v).double() for k, v in w.items()}
    x, cos, sin = (torch.from_numpy(v).double() for v in (x, cos, sin))

    def rms(v, g):
        return v * torch.rsqrt((v * v).mean(-1, keepdim=True) + EPS) * g

    xn = rms(x, t["w_norm1"])
    q, k, v = xn @ t["wq"], xn @ t["wk"], xn @ t["wv"]
    q = q * cos + (q @ t["rot"]) * sin
    k = k * cos + (k @ t["rot"]) * sin
    att = torch.softmax(q @ k.T / math.sqrt(x.shape[1]), -1) @ v
    h = x + att @ t["wo"]
    hn = rms(h, t["w_norm2"])
    return (h + (torch.nn.functional.silu(hn @ t["wg"]) * (hn @ t["wu"])) @ t["wd"]).float()
