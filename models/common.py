"""What the model folders share: the kernels' buffer budget, the tiling of a product by whole
weight rows, the kernels as torch custom ops, and the error measure their tests and benchmarks
compare with."""

import hashlib
import threading
import types

import pypto

# Tile-buffer budget of the model kernels (a core's L2 of 1 MiB, not the default 256 KiB).
BUDGET_KB = 1024


# Cube tiles ((L0, L1) for m, k and n) of a product of many rows by a weight: 256 rows, so each
# weight tile (transposed as it loads) serves 256 tokens; three 256 KiB fp32 tiles fit the budget.
PREFILL_TILES = ([256, 256], [256, 256], [256, 256])


def whole_rows(k: int, multiple: int = 1) -> int:
    """How many weight rows of length k (fp32 bound) fit three quarters of the budget, rounded
    down to a multiple of `multiple` (at least one multiple)."""
    return max(multiple, (BUDGET_KB * 1024 * 3 // 4) // (k * 4) // multiple * multiple)


def linear(x, w, dtype, multiple: int = 1, tiles=PREFILL_TILES):
    """x @ w^T (w in nn.Linear's [out, in] layout) with an fp32 accumulator, in `dtype`. One row
    (decode): tiles of whole rows of w (dense in memory, read where they lie, no copy), as many as
    whole_rows gives; otherwise the cube tiles `tiles` (None: the ones set)."""
    if isinstance(x.shape[0], int) and x.shape[0] == 1:
        k = w.shape[1]
        n = whole_rows(k, multiple)
        pypto.set_cube_tile_shapes([1, 1], [k, k], [n, n])
    elif tiles is not None:
        pypto.set_cube_tile_shapes(*tiles)
    return pypto.matmul(x, w, dtype, b_trans=True)


_OPS: dict = {}
_OPS_LOCK = threading.Lock()


def torch_ops(prefix: str, key, make, mutates: dict | None = None):
    """The jitted kernels of the namespace `make()` returns, registered as torch custom ops
    (`pypto.torch.custom_op`) named `<prefix>_<hash of key>_<kernel>`, in a namespace of the same
    attribute names. `key` (dims, dtype, ...) says what the kernels are made for: the first call
    with a key makes and registers them, later calls return the same ops. `mutates` maps a kernel's
    attribute name to the tensor parameters it writes into (a cache). A model whose patched forward
    calls these ops runs under torch.compile(fullgraph=True) with no graph break."""
    from pypto.frontend.jit import JitFunction

    name = f"{prefix}_{hashlib.sha1(repr(key).encode()).hexdigest()[:12]}"
    with _OPS_LOCK:
        if name not in _OPS:
            kernels = make()
            ops = types.SimpleNamespace()
            for attr in dir(kernels):
                fn = getattr(kernels, attr)
                if isinstance(fn, JitFunction):
                    setattr(ops, attr, pypto.torch.custom_op(fn, name=f"{name}_{attr}",
                                                             mutates_args=tuple((mutates or {}).get(attr, ()))))
            _OPS[name] = ops
        return _OPS[name]


def causal_mask(n, t):
    """The additive causal mask [n, t] of n new tokens after t - n cached positions: 0 where new
    token i (position t - n + i) sees key position j (j <= t - n + i), -inf elsewhere. Traced into
    the calling kernel, with the vec tiles the caller set."""
    rows = pypto.reshape(pypto.arange(n, dtype=pypto.DT_INT32), [n, 1])
    cols = pypto.reshape(pypto.arange(t, dtype=pypto.DT_INT32), [1, t])
    return pypto.where((cols - rows) > (t - n), float("-inf"), 0.0)


def rel_err(got, want) -> float:
    """max |got - want| / max |want|, in fp32 (torch tensors)."""
    return ((got.float() - want.float()).abs().max() / want.float().abs().max()).item()


def compile_fullgraph(module):
    """(torch.compile(module, fullgraph=True) with the default inductor backend, the list into which
    each compiled graph's call targets go as strings): tests check a patched model compiles with no
    graph break (one would raise) and that its graphs call the pypto ops."""
    import torch
    from torch._inductor.compile_fx import compile_fx

    targets: list = []

    def inductor(gm, example_inputs):
        targets.extend(str(n.target) for n in gm.graph.nodes if n.op == "call_function")
        return compile_fx(gm, example_inputs)

    return torch.compile(module, fullgraph=True, backend=inductor), targets
