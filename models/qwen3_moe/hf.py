"""The pypto MoE block inside transformers: `patch(module)` swaps the forward of every
Qwen3MoeSparseMoeBlock in `module` (a block, a layer or a whole Qwen3MoeForCausalLM) for the
pypto kernels, called as torch custom ops (so a patched model runs under torch.compile with no
graph break); `unpatch(module)` restores it. The router logits transformers' auxiliary loss
reads are not returned (the block's forward returns the hidden states only, as transformers')."""

from models.qwen3_moe import block as B


def _blocks(module):
    from transformers.models.qwen3_moe.modeling_qwen3_moe import Qwen3MoeSparseMoeBlock

    return [m for m in module.modules() if isinstance(m, Qwen3MoeSparseMoeBlock)]


def patch(module):
    """Swaps every Qwen3MoeSparseMoeBlock's forward in `module` for the pypto kernels; returns
    the number of blocks patched."""
    blocks = _blocks(module)
    for m in blocks:
        if "forward" in m.__dict__:
            continue
        moe = B.MoeBlock.from_hf(m, torch_ops=True)

        def forward(hidden_states, _moe=moe):
            b, s, h = hidden_states.shape
            return _moe(hidden_states.reshape(b * s, h)).reshape(b, s, h)

        m.forward = forward
    return len(blocks)


def unpatch(module):
    """Restores the forward of every patched block in `module`."""
    for m in _blocks(module):
        m.__dict__.pop("forward", None)
