"""The pypto gated-delta layer inside transformers: `patch(module)` swaps the forward of every
Qwen3NextGatedDeltaNet in `module` for the pypto prefill kernel; `unpatch(module)` restores it.

A patched layer runs a whole sequence from zero states (no cache). Continuing from transformers'
cache (its conv and recurrent states) is not supported yet: `GatedDeltaNet` keeps its own states
for prefill-then-decode use.
"""

import pypto
from models.qwen3_next import layer as L


def _layers(module):
    from transformers.models.qwen3_next.modeling_qwen3_next import Qwen3NextGatedDeltaNet

    return [m for m in module.modules() if isinstance(m, Qwen3NextGatedDeltaNet)]


def patch(module):
    """Swaps every Qwen3NextGatedDeltaNet's forward in `module`; returns the number patched."""
    layers = _layers(module)
    for m in layers:
        if "forward" in m.__dict__:
            continue
        net = L.GatedDeltaNet.from_hf(m)

        def forward(hidden_states, cache=None, attention_mask=None, _net=net, **kwargs):
            if cache is not None:
                raise pypto.NotSupportedError("models/qwen3_next patch: continuing from transformers' cache is not "
                                              "supported yet; call with use_cache=False, or use GatedDeltaNet")
            b, s, h = hidden_states.shape
            if b != 1:
                raise pypto.NotSupportedError(f"models/qwen3_next patch: batch {b}; only batch 1 is supported yet")
            _net.reset()
            return _net.prefill(hidden_states[0])[None]

        m.forward = forward
    return len(layers)


def unpatch(module):
    for m in _layers(module):
        m.__dict__.pop("forward", None)
