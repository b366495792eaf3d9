"""The pypto gated-delta layer inside transformers: `patch(module)` swaps the forward of every
Qwen3NextGatedDeltaNet in `module` for the pypto kernels, called as torch custom ops (so a
patched model runs under torch.compile with no graph break); `unpatch(module)` restores it.

A patched layer called with transformers' cache (as `generate` calls it) reads and updates the
cache's own state tensors in place: the conv state [1, conv_dim, width] and the recurrent state
[1, v_heads, d_k, d_v], made (zero) by the layer's first call as transformers' forward makes them.
A call of several tokens runs the prefill kernel (the chunked rule, continuing from the cached
states when there are some), a call of one token the decode kernel. Without a cache, a call runs
its sequence from zero states.
"""

import pypto
from models.qwen3_next import layer as L


def _layers(module):
    from transformers.models.qwen3_next.modeling_qwen3_next import Qwen3NextGatedDeltaNet

    return [m for m in module.modules() if isinstance(m, Qwen3NextGatedDeltaNet)]


def _cached_states(cache, idx: int, net: L.GatedDeltaNet):
    """The conv and recurrent states of layer `idx` in transformers' cache (batch row 0, views the
    kernels update in place), made zero on the layer's first call."""
    import torch

    d = net.dims
    if cache.is_recording_past(idx):
        raise pypto.NotSupportedError("models/qwen3_next patch: a cache recording past states (assisted "
                                      "decoding) is not supported yet")
    conv, rec = cache.get_conv_state(idx), cache.get_recurrent_state(idx)
    if conv is None or rec is None:
        dtype = net.conv_state.dtype
        cache.update_conv_state(torch.zeros(1, d.conv_dim, d.conv_width, dtype=dtype), idx,
                                conv_kernel_size=d.conv_width)
        cache.update_recurrent_state(torch.zeros(1, d.v_heads, d.k_dim, d.v_dim), idx)
        conv, rec = cache.get_conv_state(idx), cache.get_recurrent_state(idx)
    for what, t, shape, dtype in (("conv", conv, (1, d.conv_dim, d.conv_width), net.conv_state.dtype),
                                  ("recurrent", rec, (1, d.v_heads, d.k_dim, d.v_dim), torch.float32)):
        if tuple(t.shape) != shape or t.dtype != dtype:
            raise pypto.NotSupportedError(f"models/qwen3_next patch: the cache's {what} state of layer {idx} is "
                                          f"{tuple(t.shape)} {t.dtype}, expected {shape} {dtype}")
    return conv[0], rec[0]


def patch(module):
    """Swaps every Qwen3NextGatedDeltaNet's forward in `module`; returns the number patched."""
    layers = _layers(module)
    for m in layers:
        if "forward" in m.__dict__:
            continue
        net = L.GatedDeltaNet.from_hf(m, torch_ops=True)

        def forward(hidden_states, cache=None, attention_mask=None, _net=net, _idx=m.layer_idx, **kwargs):
            b, s, h = hidden_states.shape
            if b != 1:
                raise pypto.NotSupportedError(f"models/qwen3_next patch: batch {b}; only batch 1 is supported yet")
            x = hidden_states[0]
            if cache is None:
                _net.reset()
                return _net.prefill(x)[None]
            conv, rec = _cached_states(cache, _idx, _net)
            kernel = _net.kernels.decode if s == 1 else _net.kernels.prefill
            return kernel(x, conv, rec, *_net.weights())[None]

        m.forward = forward
    return len(layers)


def unpatch(module):
    for m in _layers(module):
        m.__dict__.pop("forward", None)
