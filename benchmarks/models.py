"""Model blocks at their real dimensions: pypto against the transformers module in eager mode and
under torch.compile, side by side in one run (medians of calls taken in alternation).

    python benchmarks/models.py [--rounds 3] [--prefill 512,2048] [--context 2048] [--dtype fp32]
                                [--blocks llama3,qwen3_moe,deepseek_v3_moe] [--experts 128]
                                [--deepseek-experts 32] [--decode-steps 8]
                                (blocks: llama3, qwen3_moe, deepseek_v3_moe, deepseek_v3_mla, qwen3_next)

Rows (tokens per second, higher is better):
- llama3 prefill S: one LLaMA-3-8B decoder layer on a prompt of S tokens (causal GQA);
- llama3 decode: one token against a KV cache of `--context` positions;
- qwen3_moe prefill S / decode: Qwen3-30B-A3B's sparse MoE block (`--experts` routed experts,
  128 by default, top-8) on S tokens / one token;
- deepseek_v3_moe prefill S / decode: DeepSeek-V3's MoE layer (`--deepseek-experts` routed
  experts, 32 by default, in 8 groups of which 4 are kept, top-8, and the shared expert); the
  issue's figure is in bf16 (`--dtype bf16`);
- deepseek_v3_mla prefill S / decode: DeepSeek-V3's multi-head latent attention (128 heads, the
  absorbed form) on S tokens / one token against a cache of `--context` positions; the
  transformers module runs its sdpa attention.

- qwen3_next prefill S / decode: Qwen3-Next-80B-A3B's linear-attention layer (gated delta rule,
  chunked for prefill, recurrent for decode); decode continues after a prefill of --prefill's
  first length (transformers with its cache).

Each decode sample is the mean of `--decode-steps` calls in a row (8 by default) of one
implementation, the implementations taken in alternation: a model decodes token after token, and
a single call right after a torch call shares the cores with torch's threads still spinning from
it (the first pypto call after one measured 1.7x its steady time, qwen3_next fp32 on Zen 5).

OMP_WAIT_POLICY is left as the environment has it (unset: OpenMP's own policy, what a torch program
gets), so torch's threads spin briefly after each parallel region and pypto's tasks share the cores
with them. --omp-passive sets PASSIVE (unless it is set), as benchmarks/run.py does for its kernels:
torch's threads then sleep between parallel regions, which a block of many small ops (a MoE block,
a decode step) pays for in wake-ups, up to 2.2x its time here (docs/performance.md). The script
checks each pypto result against the eager module's before timing.
"""

import argparse
import os
import statistics
import sys

if "--omp-passive" in sys.argv:
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
OMP_POLICY = os.environ.get("OMP_WAIT_POLICY", "unset")   # as OpenMP reads it when torch loads

import torch  # noqa: E402 - after the OpenMP setting

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def _model_module(folder: str, name: str):
    """models/<folder>/<name>.py as `models.<folder>.<name>`. This script is itself named
    `models`, so the repository's namespace package `models` is registered by hand (the model
    folders import each other through it)."""
    import importlib
    import types

    pkg = sys.modules.get("models")
    if pkg is None or not hasattr(pkg, "__path__"):
        pkg = types.ModuleType("models")
        pkg.__path__ = [os.path.join(ROOT, "models")]
        sys.modules["models"] = pkg
    return importlib.import_module(f"models.{folder}.{name}")


llama3 = _model_module("llama3", "layer")
qwen3_moe = _model_module("qwen3_moe", "block")
deepseek_moe = _model_module("deepseek_v3", "moe")
deepseek_mla = _model_module("deepseek_v3", "mla")
qwen3_next = _model_module("qwen3_next", "layer")
from models.common import rel_err as _rel_err  # noqa: E402 - the package _model_module registered
from run import machine_info, time_interleaved  # noqa: E402 - benchmarks/run.py's machine line and timer
from transformers import DynamicCache, LlamaConfig  # noqa: E402
from transformers.models.llama.modeling_llama import LlamaDecoderLayer, LlamaRotaryEmbedding  # noqa: E402

import pypto  # noqa: E402


def alternate(fns: dict, rounds: int, calls: int = 1) -> dict:
    """Median seconds per call of each function, taken in alternation: each round runs each
    function `calls` times in a row (a sample is their mean), the order rotating from round to
    round (run.time_interleaved)."""
    def burst(fn):
        def run():
            for _ in range(calls):
                fn()
        return run

    samples = time_interleaved({name: burst(fn) for name, fn in fns.items()}, rounds)
    return {name: statistics.median(v) / calls for name, v in samples.items()}


def cached_block_rows(label, args, dtype, hidden, ours, ref, hf_call, cache_tensors, fill_ours, cfg):
    """Prefill rows (one per --prefill length) and a decode row (one token after --context cached
    positions) of a block with a cache: `ours` has reset/prefill/decode and a `length`;
    hf_call(module, x, start, cache) runs the transformers module; `cache_tensors` are what a
    transformers cache of `context` positions holds (passed to cache.update), which
    `fill_ours(*cache_tensors)` copies into ours."""
    compiled = torch.compile(ref)
    rows = []
    for s in args.prefill:
        x = torch.randn(1, s, hidden).to(dtype)

        def pypto_prefill():
            ours.reset()
            return ours.prefill(x[0])

        err = _rel_err(pypto_prefill(), hf_call(ref, x, 0, None)[0])
        hf_call(compiled, x, 0, None)
        t = alternate({"pypto": pypto_prefill, "eager": lambda: hf_call(ref, x, 0, None),
                       "compile": lambda: hf_call(compiled, x, 0, None)}, args.rounds)
        rows.append((f"{label} prefill {s}", s, t, err))
    # Decode against a cache of `context` positions (random contents, the same in both).
    ctx = args.context
    x = torch.randn(1, 1, hidden).to(dtype)

    def fresh_cache():
        cache = DynamicCache(config=cfg)
        cache.update(*cache_tensors, 0)
        return cache

    def pypto_decode():
        ours.length = ctx
        return ours.decode(x[0])

    fill_ours(*cache_tensors)
    err = _rel_err(pypto_decode(), hf_call(ref, x, ctx, fresh_cache())[0])
    caches = {"eager": fresh_cache(), "compile": fresh_cache()}

    def hf_decode(name, module):
        if caches[name].get_seq_length() > ctx:  # back to `context` positions: every call decodes the same step
            caches[name].crop(ctx - caches[name].get_seq_length())
        return hf_call(module, x, ctx, caches[name])

    hf_decode("compile", compiled)
    t = alternate({"pypto": pypto_decode, "eager": lambda: hf_decode("eager", ref),
                   "compile": lambda: hf_decode("compile", compiled)}, max(args.rounds, 5), args.decode_steps)
    rows.append((f"{label} decode (context {ctx})", 1, t, err))
    return rows


def stateless_block_rows(label, args, dtype, hidden, ours, ref):
    """Prefill rows and a one-token row of a block without a cache: ours(x [S, H]) against
    ref(x [1, S, H])."""
    compiled = torch.compile(ref)
    rows = []
    for s in args.prefill + [1]:
        x = torch.randn(1, s, hidden, dtype=dtype)
        with torch.no_grad():
            err = _rel_err(ours(x[0]), ref(x)[0])
        t = alternate({"pypto": lambda: ours(x[0]), "eager": lambda: ref(x), "compile": lambda: compiled(x)}, args.rounds,
                      args.decode_steps if s == 1 else 1)
        rows.append((f"{label} {'decode' if s == 1 else f'prefill {s}'}", s, t, err))
    return rows


def _causal_mask(s, start, dtype):
    return None if s == 1 else torch.full((s, start + s), float("-inf"), dtype=dtype).triu(start + 1)[None, None]


def llama3_rows(args, dtype):
    dims = llama3.LLAMA3_8B
    cfg = LlamaConfig(hidden_size=dims.hidden, num_attention_heads=dims.heads, num_key_value_heads=dims.kv_heads,
                      head_dim=dims.head_dim, intermediate_size=dims.ffn, rms_norm_eps=dims.eps,
                      rope_theta=dims.rope_theta, attn_implementation="sdpa")
    torch.manual_seed(0)
    ref = LlamaDecoderLayer(cfg, 0).eval().requires_grad_(False).to(dtype)
    rot = LlamaRotaryEmbedding(cfg)
    pdt = pypto.DT_BF16 if dtype == torch.bfloat16 else pypto.DT_FP32
    ours = llama3.LlamaLayer.from_hf(ref, max_positions=max(args.prefill + [args.context + 1]), dtype=pdt,
                                     inv_freq=rot.inv_freq)

    def hf_call(module, x, start, cache):
        pos = torch.arange(start, start + x.shape[1])[None]
        with torch.no_grad():
            return module(x, attention_mask=_causal_mask(x.shape[1], start, dtype), position_ids=pos,
                          position_embeddings=rot(x, pos), cache=cache, use_cache=cache is not None)

    def fill(k, v):
        ours.k_cache[:, :args.context], ours.v_cache[:, :args.context] = k[0], v[0]

    kv = [torch.randn(1, dims.kv_heads, args.context, dims.head_dim).to(dtype) for _ in range(2)]
    return cached_block_rows("llama3", args, dtype, dims.hidden, ours, ref, hf_call, kv, fill, cfg)


def qwen3_moe_rows(args, dtype):
    from transformers import Qwen3MoeConfig
    from transformers.models.qwen3_moe.modeling_qwen3_moe import Qwen3MoeSparseMoeBlock

    d = qwen3_moe.QWEN3_30B_A3B
    cfg = Qwen3MoeConfig(hidden_size=d.hidden, moe_intermediate_size=d.expert_ffn, num_experts=args.experts,
                         num_experts_per_tok=d.top_k, norm_topk_prob=d.norm_topk_prob)
    torch.manual_seed(0)
    ref = Qwen3MoeSparseMoeBlock(cfg).eval().requires_grad_(False)
    for p in ref.parameters():
        p.normal_(0.0, 0.02)
    ref = ref.to(dtype)
    return stateless_block_rows(f"qwen3_moe ({args.experts} experts)", args, dtype, d.hidden,
                                qwen3_moe.MoeBlock.from_hf(ref), ref)


def deepseek_v3_moe_rows(args, dtype):
    from transformers import DeepseekV3Config
    from transformers.models.deepseek_v3.modeling_deepseek_v3 import DeepseekV3MoE

    d = deepseek_moe.DEEPSEEK_V3
    e = args.deepseek_experts
    cfg = DeepseekV3Config(hidden_size=d.hidden, moe_intermediate_size=d.expert_ffn, n_routed_experts=e,
                           n_group=d.n_group, topk_group=d.topk_group, num_experts_per_tok=d.top_k,
                           n_shared_experts=d.shared_experts)
    torch.manual_seed(0)
    ref = DeepseekV3MoE(cfg).eval().requires_grad_(False)
    for p in ref.parameters():
        p.normal_(0.0, 0.02)
    ref = ref.to(dtype)
    ref.gate.float()   # the router stays fp32, as transformers' own bf16 checkpoints keep it
    return stateless_block_rows(f"deepseek_v3_moe ({e} experts)", args, dtype, d.hidden,
                                deepseek_moe.DeepseekMoe.from_hf(ref), ref)


def deepseek_v3_mla_rows(args, dtype):
    from transformers import DeepseekV3Config
    from transformers.models.deepseek_v3.modeling_deepseek_v3 import DeepseekV3Attention, DeepseekV3RotaryEmbedding

    cfg = DeepseekV3Config(rope_parameters={"rope_type": "default", "rope_theta": 10000.0})
    cfg._attn_implementation = "sdpa"
    torch.manual_seed(0)
    ref = DeepseekV3Attention(cfg, 0).eval().requires_grad_(False)
    for p in ref.parameters():
        p.normal_(0.0, 0.02)
    ref = ref.to(dtype)
    rot = DeepseekV3RotaryEmbedding(cfg)
    ours = deepseek_mla.MlaAttention.from_hf(ref, rot, max_positions=max(args.prefill + [args.context + 1]))

    def hf_call(module, x, start, cache):
        pos = torch.arange(start, start + x.shape[1])[None]
        with torch.no_grad():
            return module(x, rot(x, pos), _causal_mask(x.shape[1], start, dtype), cache)[0]

    def fill(latent, k_rope):
        ours.latent[:args.context], ours.k_rope[:args.context] = latent[0, 0], k_rope[0, 0]

    cached = [torch.randn(1, 1, args.context, n).to(dtype) for n in (cfg.kv_lora_rank, cfg.qk_rope_head_dim)]
    return cached_block_rows("deepseek_v3_mla", args, dtype, cfg.hidden_size, ours, ref, hf_call, cached, fill, cfg)


def qwen3_next_rows(args, dtype):
    from transformers import Qwen3NextConfig
    from transformers.models.qwen3_next.modeling_qwen3_next import Qwen3NextGatedDeltaNet

    cfg = Qwen3NextConfig(num_hidden_layers=4)
    torch.manual_seed(0)
    ref = Qwen3NextGatedDeltaNet(cfg, 0).eval().requires_grad_(False)
    for name, p in ref.named_parameters():
        if name not in ("A_log", "dt_bias"):
            p.normal_(0.0, 0.05)
    ref = ref.to(dtype)
    ours = qwen3_next.GatedDeltaNet.from_hf(ref)
    compiled = torch.compile(ref)
    rows = []

    def pypto_prefill(x):
        ours.reset()
        return ours.prefill(x[0])

    for s in args.prefill:
        x = torch.randn(1, s, cfg.hidden_size, dtype=dtype)
        with torch.no_grad():
            err = _rel_err(pypto_prefill(x), ref(x)[0])
        t = alternate({"pypto": lambda: pypto_prefill(x), "eager": lambda: ref(x), "compile": lambda: compiled(x)},
                      args.rounds)
        rows.append((f"qwen3_next prefill {s}", s, t, err))
    # Decode: each side continues its own state after the same prompt.
    prompt = torch.randn(1, (args.prefill or [64])[0], cfg.hidden_size, dtype=dtype)
    x = torch.randn(1, 1, cfg.hidden_size, dtype=dtype)
    caches = {}
    for name, module in (("eager", ref), ("compile", compiled)):
        caches[name] = DynamicCache(config=cfg)
        with torch.no_grad():
            module(prompt, cache=caches[name])
    pypto_prefill(prompt)
    with torch.no_grad():
        err = _rel_err(ours.decode(x[0]), ref(x, cache=caches["eager"])[0])

    def hf_decode(name, module):
        with torch.no_grad():
            return module(x, cache=caches[name])

    t = alternate({"pypto": lambda: ours.decode(x[0]), "eager": lambda: hf_decode("eager", ref),
                   "compile": lambda: hf_decode("compile", compiled)}, max(args.rounds, 5), args.decode_steps)
    rows.append(("qwen3_next decode", 1, t, err))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--prefill", default="512,2048", help="prompt lengths of the prefill rows")
    parser.add_argument("--context", type=int, default=2048, help="cached positions of the decode row")
    parser.add_argument("--dtype", choices=["fp32", "bf16"], default="fp32")
    parser.add_argument("--blocks", default="llama3,qwen3_moe,deepseek_v3_moe,deepseek_v3_mla,qwen3_next",
                        help="the blocks to measure")
    parser.add_argument("--deepseek-experts", type=int, default=32, help="routed experts of the deepseek_v3_moe block")
    parser.add_argument("--experts", type=int, default=128, help="routed experts of the qwen3_moe block")
    parser.add_argument("--decode-steps", type=int, default=8,
                        help="decode steps each side runs in a row per round (a decode loop's steady state)")
    parser.add_argument("--omp-passive", action="store_true",
                        help="set OMP_WAIT_POLICY=PASSIVE (unless set) before torch loads")
    args = parser.parse_args()
    args.prefill = [int(s) for s in args.prefill.split(",") if s]
    dtype = torch.bfloat16 if args.dtype == "bf16" else torch.float32
    import transformers

    m = machine_info()
    print(f"{m['cpu']} (family {m['cpu_family']}, model {m['cpu_model']}), {m['cores']} cores; torch {torch.__version__}, transformers "
          f"{transformers.__version__}; {args.dtype}; OMP_WAIT_POLICY={OMP_POLICY}; "
          f"cpu target {pypto.get_cpu_target()}")
    print(f"| block | pypto tok/s | eager tok/s | torch.compile tok/s | vs eager | vs compile | max rel. err |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    makers = {"llama3": llama3_rows, "qwen3_moe": qwen3_moe_rows, "deepseek_v3_moe": deepseek_v3_moe_rows,
              "deepseek_v3_mla": deepseek_v3_mla_rows, "qwen3_next": qwen3_next_rows}
    blocks = [b for b in args.blocks.split(",") if b]
    for b in blocks:
        if b not in makers:
            parser.error(f"--blocks: unknown block {b!r}; expected some of {', '.join(makers)}")
    rows = [row for b in blocks for row in makers[b](args, dtype)]
    for name, tokens, t, err in rows:
        print(f"| {name} | {tokens / t['pypto']:.1f} | {tokens / t['eager']:.1f} | {tokens / t['compile']:.1f} | "
              f"{t['eager'] / t['pypto']:.2f}x | {t['compile'] / t['pypto']:.2f}x | {err:.1e} |", flush=True)


if __name__ == "__main__":
    main()
