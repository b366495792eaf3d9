"""A seeded mutation fuzzer over .pto texts (issue 17).

Seeds are the .pto texts of real kernels, made at fuzz time: jitted kernels
compiled with pypto (``pypto.compile(fn, *args).pto()``), PTOFunctionBuilder
modules (the demo of docs/pto.md among them) and a few hand-written texts.
Each case mutates one seed text (integer literals, dims, loop bounds, view
offsets, CALL regions, lines, tokens, dtypes, bytes and unicode, truncation)
with ``random.Random(f"pto-fuzz:{seed}:{case}")``, so a case is
reproducible from the seed and its number alone.

A mutant goes through these stages, in a worker process:

  parse    ``pypto.pto.parse``; its canonical text must parse back to itself
  verify   ``pypto.pto.compile`` with CXX set to a script that exits 97:
           parsing, verification, the passes and C++ generation run, the
           host compile fails at once (a CompileError we expect); no C++
           compiler runs
  compile  ``pypto.pto.compile`` with the real compiler, for at most
           ``--max-compiles`` mutants that generate new C++ (a second pass
           over the verified mutants, in case order, once every case has
           been through the cheap stages)
  run      the program on small NumPy arrays sized from the entry's memrefs
           (symbolic dims and scalars small ints), each array between guard
           bytes that must not change

Outcomes: ok, a pypto error (an instance of a class of pypto.errors other
than InternalError, or a bare ValueError/TypeError/SyntaxError/
NotImplementedError raised by a ``raise`` in pypto's own Python code), or
bad: a crash (the worker died from a signal), a hang (a stage took longer
than ``--timeout``), InternalError, a std:: exception turned into
InternalError, pybind11's "incompatible function arguments", any other
exception class (KeyError, IndexError, UnicodeError, ...), canonical text
that does not parse back to itself, a verified module whose C++ does not
compile, a write outside an array, a syntax error without a sane position.

The worker is ``python pto_fuzz.py --worker``: it reads cases as JSON lines
on stdin and answers on stdout, so a crash or a hang kills only the worker;
the harness records it (stage, signal, stderr tail), saves the mutant under
``--out`` and starts a new worker.

  python python/tests/fuzz/pto_fuzz.py --seed 1 --cases 2000 --max-compiles 100 --out /tmp/fuzz
  python python/tests/fuzz/pto_fuzz.py --replay /tmp/fuzz/crash-SIGSEGV-run-s1-c42.json
  python python/tests/fuzz/pto_fuzz.py --shrink /tmp/fuzz/crash-SIGSEGV-run-s1-c42.json

The exit status is 1 when a bad outcome occurred.
"""

import argparse
import collections
import json
import os
import random
import re
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from typing import Optional

# ---------------------------------------------------------------------------------------------------------------
# Seeds
# ---------------------------------------------------------------------------------------------------------------

# Hand-written texts. Each seed has hints: sizes for symbolic dims and values for scalars when a mutant is run.
HAND_SEEDS = {
    # The small program of python/tests/ir/test_pto_parser.py: a parallel loop over one InCore function.
    "hand_small": ("""\
// PTO Module: m
// Entry: @main

// Function Type: InCore
// Buffer bytes: 256
func @k(%a: !pto.memref<gm,8x8,f32>, %o: !pto.memref<gm,8x8,f32> out, %g0: index) {
  %t0 = alloc_tile : !pto.tile<8x8xf32>
  %t1 = alloc_tile : !pto.tile<8x8xf32>
  %t0 = tload %a[0, 0] valid [8, 8] : !pto.tile<8x8xf32>
  %t1 = tadds %t0, 1 : !pto.tile<8x8xf32>
  tstore %t1, %o[0, 0] valid [8, 8]
  return
}

// Function Type: Orchestration
func @main(%x: !pto.memref<gm,16x8,f32>, %y: !pto.memref<gm,16x8,f32> out) {
  FOR %g0:idx, 0:idx, 2:idx, 1:idx  // parallel dim=0 tile=8
    CALL @k(%a -> %x[(g0 * 8), 0; 8, 8], %o -> %y[(g0 * 8), 0; 8, 8], %g0 -> g0)
  ENDFOR
  return
}
""", {}),
    # The seed's hand-written forms: no alloc_tile or valid extents, typed tload/trowmax, %n in bounds,
    # whole-tensor CALL arguments.
    "hand_seed_forms": ("""\
// Function Type: InCore
func @rowmax(%input: !pto.memref<gm,8x8xf32>, %output: !pto.memref<gm,8x1xf32> out) {
  %x = tload %input[0, 0] : (!pto.memref) -> !pto.tile<8x8xf32>
  %result = trowmax %x : !pto.tile<8x8xf32> -> !pto.tile<8x1xf32>
  tstore %result, %output[0, 0]
  return
}

// Function Type: Orchestration
func @main(%input: !pto.memref<gm,8x8,f32>, %output: !pto.memref<gm,8x1,f32> out, %n: index) {
  %temp_max = alloc_workspace : !pto.memref<gm,8x1,f32>
  FOR %i:idx, 0:idx, %n:idx, 1:idx
    CALL @rowmax(%input -> %input, %output -> %temp_max)
  ENDFOR
  return
}
""", {"n": 2}),
    # An InCore loop, a local buffer, tcast, tarange, tcmpgt/tselect, IF/ELSE on a scalar, column reductions.
    "hand_misc": ("""\
// PTO Module: misc
// Entry: @main

// Function Type: InCore
func @misc(%a: !pto.memref<gm,16x16,f32>, %i: !pto.memref<gm,16x16,i32>, %o: !pto.memref<gm,16x16,f32> out, %c: !pto.memref<gm,1x16,f32> out, %k: index) {
  %buf = alloc_local : !pto.memref<local,8x16,f32>
  %x = alloc_tile : !pto.tile<8x16xf32>
  %y = alloc_tile : !pto.tile<8x16xf32>
  %z = alloc_tile : !pto.tile<8x16xf32>
  %m = alloc_tile : !pto.tile<8x16xi32>
  %r = alloc_tile : !pto.tile<8x16xf32>
  %n = alloc_tile : !pto.tile<8x16xi32>
  %s = alloc_tile : !pto.tile<1x16xf32>
  %acc = alloc_tile : !pto.tile<1x16xf32>
  %acc = tfill 0 : !pto.tile<1x16xf32>
  FOR %j:idx, 0:idx, 2:idx, 1:idx
    %x = tload %a[j, 0] valid [8, 16] : !pto.tile<8x16xf32>
    %n = tload %i[j, 0] valid [8, 16] : !pto.tile<8x16xi32>
    %y = tcast %n to=f32 : !pto.tile<8x16xf32>
    %r = tarange 0, 1, (j * 128) : !pto.tile<8x16xf32>
    %m = tcmpgt %x, %y : !pto.tile<8x16xi32>
    %z = tselect %m, %x, %r : !pto.tile<8x16xf32>
    IF (0 < k)
      %z = tmuls %z, (k + 1) : !pto.tile<8x16xf32>
    ELSE
      %z = tsubs 1, %z : !pto.tile<8x16xf32>
    ENDIF
    tstore %z, %buf[0, 0] valid [8, 16]
    %z = tload %buf[0, 0] valid [8, 16] : !pto.tile<8x16xf32>
    %s = tcolsum %z valid [8, 16] : !pto.tile<1x16xf32>
    %acc = tadd %acc, %s : !pto.tile<1x16xf32>
    %z = tcolexpandsub %z, %s : !pto.tile<8x16xf32>
    tstore %z, %o[j, 0] valid [8, 16]
  ENDFOR
  tstore %acc, %c[0, 0] valid [1, 16]
  return
}

// Function Type: Orchestration
func @main(%a: !pto.memref<gm,16x16,f32>, %i: !pto.memref<gm,16x16,i32>, %o: !pto.memref<gm,16x16,f32> out, %c: !pto.memref<gm,1x16,f32> out) {
  %k = alloc_scalar : i32
  CALL @misc(%a -> %a, %i -> %i, %o -> %o, %c -> %c, %k -> k)
  return
}
""", {"k": 1}),
    # Orchestration: a workspace, a view and a reshape, IF/ELSE with && and min(), a scalar dim, scalar arguments.
    "hand_orch": ("""\
// PTO Module: orch
// Entry: @main

// Function Type: InCore
func @half(%src: !pto.memref<gm,4x8,f32>, %dst: !pto.memref<gm,4x8,f32> out, %s: index) {
  %t = alloc_tile : !pto.tile<4x8xf32>
  %u = alloc_tile : !pto.tile<4x8xf32>
  %t = tload %src[0, 0] valid [4, 8] : !pto.tile<4x8xf32>
  %u = tmuls %t, 0.5 : !pto.tile<4x8xf32>
  %u = tadds %u, s : !pto.tile<4x8xf32>
  tstore %u, %dst[0, 0] valid [4, 8]
  return
}

// Function Type: InCore
func @rowsum(%src: !pto.memref<gm,4x8,f32>, %dst: !pto.memref<gm,4x1,f32> out) {
  %t = alloc_tile : !pto.tile<4x8xf32>
  %r = alloc_tile : !pto.tile<4x1xf32>
  %t = tload %src[0, 0] valid [4, 8] : !pto.tile<4x8xf32>
  %r = trowsum %t valid [4, 8] : !pto.tile<4x1xf32>
  tstore %r, %dst[0, 0] valid [4, 1]
  return
}

// Function Type: Orchestration
func @main(%x: !pto.memref<gm,16x8,f32>, %y: !pto.memref<gm,16x8,f32> out, %r: !pto.memref<gm,(n)x1,f32> out) {
  %n = alloc_scalar : i64
  %mode = alloc_scalar : i32
  %tmp = alloc_workspace : !pto.memref<gm,16x8,f32>
  %xt = view %x[4, 0] dims [0, 1] steps [1, 1] : !pto.memref<gm,12x8,f32>
  %flat = reshape %tmp : !pto.memref<gm,8x16,f32>
  FOR %i:idx, 0:idx, 3:idx, 1:idx
    IF ((mode == 1) && (i < 2))
      CALL @half(%src -> %xt[(i * 4), 0; 4, 8], %dst -> %tmp[(i * 4), 0; 4, 8], %s -> (i + 1))
    ELSE
      CALL @half(%src -> %x[(i * 4), 0; 4, 8], %dst -> %tmp[(i * 4), 0; 4, 8], %s -> min(i, mode))
    ENDIF
  ENDFOR
  FOR %i:idx, 0:idx, (n // 4):idx, 1:idx
    CALL @rowsum(%src -> %tmp[(i * 4), 0; 4, 8], %dst -> %r[(i * 4), 0; 4, 1])
  ENDFOR
  CALL @half(%src -> %tmp[8, 0; 4, 8], %dst -> %y[(n % 16), 0; 4, 8], %s -> 0)
  return
}
""", {"n": 8, "mode": 1}),
}


def _jit_kernels():
    """(name, function, example arrays, hints) of the jitted seed kernels."""
    import numpy as np

    import pypto

    T, F = pypto.Tensor, pypto.DT_FP32

    def softmax(x: T((32, 64), F)):
        pypto.set_vec_tile_shapes(8, 64)
        return pypto.softmax(x, -1)

    def rms_norm(x: T((16, 128), F), w: T((128,), F)):
        pypto.set_vec_tile_shapes(8, 64)
        return pypto.rms_norm(x, w)

    def chain(x: T((16, 32), F), y: T((16, 32), F)):
        pypto.set_vec_tile_shapes(8, 16)
        return pypto.sigmoid(pypto.exp(x) * y - 0.5) + pypto.abs(y) / 2

    def matmul(a: T((32, 48), F), b: T((48, 16), F)):
        pypto.set_cube_tile_shapes([16, 16], [16, 48], [16, 16])
        pypto.set_vec_tile_shapes(16, 16)
        return pypto.relu(pypto.matmul(a, b) + 1.0)

    def reduce(x: T((4, 8, 32), F)):
        pypto.set_vec_tile_shapes(2, 8, 16)
        return pypto.sum(x, -1, True), pypto.amax(x, 1)

    def views(x: T((12, 40), F)):
        pypto.set_vec_tile_shapes(4, 16)
        return x[2:10, 5:37] * 2, pypto.transpose(x, 0, 1) + 1, pypto.reshape(x, (24, 20)) * 3

    def dyn_loop(x: T([pypto.DYNAMIC, 32], F), out: T([pypto.DYNAMIC, 32], F)):
        pypto.set_vec_tile_shapes(8, 32)
        rows = x.shape[0]
        for i in pypto.loop(0, pypto.ceildiv(rows, 8), 1, idx_name="blk"):
            valid = (rows - i * 8).min(8)
            xb = pypto.view(x, [8, 32], [i * 8, 0], valid_shape=[valid, 32])
            pypto.assemble(pypto.rms_norm(xb), [i * 8, 0], out)

    M = pypto.frontend.dynamic("M")

    def dyn_dim(x: T([M, 16], F), y: T([M, 16], F)):
        pypto.set_vec_tile_shapes(8, 16)
        return pypto.exp(x) * y - 0.5

    def gather(x: T((8, 12), F), i: T((8, 4), pypto.DT_INT32)):
        pypto.set_vec_tile_shapes(4, 4)
        return pypto.gather(x, 1, i)

    def branch(x: T((4, 2, 16), F), out: T((4, 2, 16), F)):
        pypto.set_vec_tile_shapes(1, 1, 16)
        for i in pypto.loop(4):
            for j in pypto.loop(2):
                v = x[i:i + 1, j:j + 1, :]
                if i == 0:
                    out[i:i + 1, j:j + 1, :] = v * 10
                else:
                    out[i:i + 1, j:j + 1, :] = pypto.exp(v)

    def z(*shape, dtype=np.float32):
        return np.zeros(shape, dtype)

    # (No postponed annotations in this module: the jit evaluates T and F here, as local names.)
    return [
        ("softmax", softmax, (z(32, 64),), {}),
        ("rms_norm", rms_norm, (z(16, 128), z(128)), {}),
        ("chain", chain, (z(16, 32), z(16, 32)), {}),
        ("matmul", matmul, (z(32, 48), z(48, 16)), {}),
        ("reduce", reduce, (z(4, 8, 32),), {}),
        ("views", views, (z(12, 40),), {}),
        ("dyn_loop", dyn_loop, (z(20, 32), z(20, 32)), {"x_0": 20, "out_0": 20}),
        ("dyn_dim", dyn_dim, (z(24, 16), z(24, 16)), {"M": 24}),
        ("gather", gather, (z(8, 12), z(8, 4, dtype=np.int32)), {}),
        ("branch", branch, (z(4, 2, 16), z(4, 2, 16)), {}),
    ]


def _builder_seeds():
    """(name, text, hints) of PTOFunctionBuilder modules, printed without compiling."""
    from pypto.pto import ElementType, MemorySpace, PTOFunctionBuilder, PTOModule

    F32, GM = ElementType.F32, MemorySpace.GLOBAL
    out = []

    # The demo of docs/pto.md.
    m = PTOModule("demo")
    (PTOFunctionBuilder("scale", module=m).in_core()
        .memref("src", GM, F32).memref("dst", GM, F32)
        .tile("t", 8, 64, F32).tile("u", 8, 64, F32)
        .load("t", "src").muls("u", "t", 2.0).store("u", "dst")
        .build())
    (PTOFunctionBuilder("main", module=m).not_in_core()
        .memref("x", GM, F32).memref("y", GM, F32).scalar("n", ElementType.I32)
        .for_loop("i", 0, "n", 1)
        .call("scale", {"src": ("x", "i", 0), "dst": ("y", "i", 0)})
        .end_for()
        .build())
    out.append(("builder_demo", m.to_pto(), {"n": 4, "x_d0": 32, "x_d1": 64, "y_d0": 32, "y_d1": 64}))

    # Accumulation over k in an InCore loop, an L0 block, two nested orchestration loops.
    m = PTOModule("mm")
    (PTOFunctionBuilder("mm_tile", module=m).in_core()
        .memref("a", GM, F32).memref("b", GM, F32).memref("c", GM, F32)
        .tile("x", 16, 8, F32).tile("y", 8, 16, F32).tile("acc", 16, 16, F32)
        .load("x", "a", 0, 0).load("y", "b", 0, 0).matmul("acc", "x", "y", l0=(8, 8, 16))
        .for_loop("k", 1, 4, 1)
        .load("x", "a", 0, "k").load("y", "b", "k", 0).matmul_acc("acc", "x", "y")
        .end_for()
        .store("acc", "c").build())
    (PTOFunctionBuilder("main", module=m).not_in_core()
        .memref("A", GM, F32).memref("B", GM, F32).memref("C", GM, F32).scalar("mt").scalar("nt")
        .for_loop("i", 0, "mt").for_loop("j", 0, "nt")
        .call("mm_tile", {"a": ("A", "i", 0), "b": ("B", 0, "j"), "c": ("C", "i", "j")})
        .end_for().end_for().build())
    out.append(("builder_matmul", m.to_pto(), {"mt": 2, "nt": 2, "A_d0": 32, "A_d1": 32, "B_d0": 32, "B_d1": 32,
                                                "C_d0": 32, "C_d1": 32}))

    # Binary expansion with tile levels: variants <f>_16 of each function, an IF inside an InCore function.
    m = PTOModule("softmax_module")
    for suffix, rows in (("", 8), ("_16", 16)):
        (PTOFunctionBuilder("rowmax" + suffix, module=m).in_core()
            .memref("input", GM, F32).memref("output", GM, F32).scalar("mode")
            .tile("x", rows, 8, F32).tile("y", rows, 1, F32).tile("z", rows, 1, F32)
            .load("x", "input").rowmax("y", "x")
            .if_then("mode > 0").muls("z", "y", 2.0).else_().neg("z", "y").end_if()
            .store("output", "z").build())
        (PTOFunctionBuilder("rowexpandsub" + suffix, module=m).in_core()
            .memref("input_x", GM, F32).memref("input_row", GM, F32).memref("output", GM, F32)
            .tile("x", rows, 8, F32).tile("row", rows, 1, F32).tile("y", rows, 8, F32)
            .load("x", "input_x").load("row", "input_row").rowexpandsub("y", "x", "row")
            .store("output", "y").build())
    (PTOFunctionBuilder("dynamic_softmax", module=m).not_in_core()
        .memref("input", GM, F32).memref("output", GM, F32).memref("temp_max", GM, F32)
        .scalar("num_tiles", ElementType.I32)
        .for_loop("tile_idx", 0, "num_tiles", 1, max_range=64, min_range=4, tile_levels={64: 16, 8: 16, 0: 8})
        .call("rowmax", {"input": ("input", "tile_idx", 0), "output": ("temp_max", "tile_idx", 0),
                         "mode": "tile_idx % 2"})
        .call("rowexpandsub", {"input_x": ("input", "tile_idx", 0), "input_row": ("temp_max", "tile_idx", 0),
                               "output": ("output", "tile_idx", 0)})
        .end_for().build())
    out.append(("builder_binexp", m.to_pto(), {"num_tiles": 9, "input_d0": 72, "input_d1": 8, "output_d0": 72,
                                                "output_d1": 8, "temp_max_d0": 72, "temp_max_d1": 1}))
    return out


_SEED_CACHE: dict = {}


def seed_texts(kernels=None, log=None):
    """[(name, text, hints)] of every seed (jitted kernels compiled once per process and kept in memory).
    `kernels` picks jitted kernels by name (default: all)."""
    key = tuple(kernels) if kernels is not None else None
    if key in _SEED_CACHE:
        return _SEED_CACHE[key]
    import pypto

    seeds = []
    for name, fn, args, hints in _jit_kernels():
        if kernels is not None and name not in kernels:
            continue
        t0 = time.monotonic()
        text = pypto.compile(pypto.jit(fn), *args).pto()
        if log:
            log(f"seed {name}: {len(text)} chars ({time.monotonic() - t0:.1f} s)")
        seeds.append((name, text, hints))
    seeds.extend(_builder_seeds())
    seeds.extend((name, text, hints) for name, (text, hints) in HAND_SEEDS.items())
    _SEED_CACHE[key] = seeds
    return seeds


# ---------------------------------------------------------------------------------------------------------------
# Mutators: each takes (rng, text, ctx) and returns the mutated text, or None when it does not apply.
# ---------------------------------------------------------------------------------------------------------------

BOUNDARY = [0, -1, 1, 2, 7, 2**15, 2**16, 2**31 - 1, 2**31, -2**31, -2**31 - 1, 2**32, 2**32 + 1, 2**62,
            2**63 - 1, 2**63, -2**63, -2**63 - 1, 2**64, 2**64 + 1, 10**30, -(10**30)]
TILES = [1, 4, 8, 16, 32, 64, 128]
INT_RE = re.compile(r"(?<![\w.])-?\d+(?![\w.])")
FLOAT_RE = re.compile(r"(?<![\w.])-?(?:\d+\.\d*(?:e[-+]?\d+)?|\d+e[-+]?\d+|inf\b|nan\b)")
MEMREF_RE = re.compile(r"!pto\.memref<(\w+),([^>]*?),(\w+)>")
TILE_RE = re.compile(r"!pto\.tile<([^>]*)>")
DIM_TOKEN_RE = re.compile(r"\((?:[^()]|\([^()]*\))*\)|-?\d+")
FOR_RE = re.compile(r"FOR %(\w+):idx, (.+?):idx, (.+?):idx, (.+?):idx(.*)$", re.M)
VIEW_RE = re.compile(r"= view %(\w+)\[([^\]]*)\] dims \[([^\]]*)\] steps \[([^\]]*)\]")
REGION_RE = re.compile(r"-> %(\w+)\[([^\];]*);([^\]]*)\]")
VALID_RE = re.compile(r"valid \[([^\]]*)\]")
NAME_RE = re.compile(r"%\w+")
FUNC_RE = re.compile(r"@\w+")
EXPR_OP_RE = re.compile(r" (\+|-|\*|//|%|<|<=|==|!=|&&|\|\|) ")
DTYPES = ["f32", "f16", "bf16", "f64", "i8", "i16", "i32", "i64", "u8", "i1", "f31", "index", "idx"]
OPCODES = ["tload", "tstore", "tfill", "tadd", "tsub", "tmul", "tdiv", "tmax", "tmin", "tpow", "tcmpgt", "tcmpeq",
           "tadds", "tsubs", "tmuls", "tdivs", "tmaxs", "tmins", "texp", "tlog", "tsqrt", "trsqrt", "trecip", "tneg",
           "tabs", "trelu", "tsigmoid", "tnot", "tselect", "tcast", "trowsum", "trowmax", "trowmin", "trowprod",
           "tcolsum", "tcolmax", "tredsum", "tredmax", "trowexpandadd", "trowexpandsub", "trowexpandmul",
           "trowexpanddiv", "tcolexpandmul", "tcolexpandsub", "texpand", "treshape", "tmatmul", "tmatmul_acc",
           "tarange", "tgather", "tscatter"]
KEYWORDS = ["FOR", "ENDFOR", "IF", "ELSE", "ENDIF", "CALL", "return", "func", "alloc_tile", "alloc_local",
            "alloc_scalar", "alloc_workspace", "view", "reshape", "out", "index", "valid", "dims", "steps", "axis",
            "to", "l0", "max_range", "min_range", "tile_levels", "parallel"]
WEIRD = ["\x00", "\ud800", "\udfff", "\udc80", "\u202e", "\u2028", "\ufeff", "\uffff", "\x1b", "\x7f", "\x0b",
         "\x0c", "\r", "\t", "\u00e9", "\u0130", "\U0001F4A5", "\x85", "\u00a0", "\u3000", "%", "@", "(", ")", "[",
         "]", "{", "}", "<", ">", ",", ";", ":", "!", "-", "x", "//", "/*", "\\", "\"", "'", " ", "\n", "0", "9"]


def _pick_match(rng, regex, text):
    ms = list(regex.finditer(text))
    return rng.choice(ms) if ms else None


def _replace_span(text, start, end, new):
    return text[:start] + new + text[end:]


def _new_int(rng, v=None):
    r = rng.random()
    if v is not None and r < 0.35:
        return v + rng.choice([1, -1, 2, -2] + TILES + [-t for t in TILES])
    if v is not None and r < 0.45:
        return rng.choice([-v, 2 * v, v // 2, v * v, v * 1000])
    return rng.choice(BOUNDARY + TILES)


def m_int(rng, text, ctx):
    """An integer literal becomes 0, -1, a boundary value, or itself plus or minus a little or a tile."""
    m = _pick_match(rng, INT_RE, text)
    if not m:
        return None
    return _replace_span(text, m.start(), m.end(), str(_new_int(rng, int(m.group()))))


def m_float(rng, text, ctx):
    """A float constant (a scalar operand, tfill) becomes nan, inf, a huge or subnormal value, ..."""
    m = _pick_match(rng, FLOAT_RE, text)
    if not m:
        return None
    new = rng.choice(["nan", "-nan", "inf", "-inf", "1e308", "1e309", "-1e39", "1e-320", "-0.0", "0", "1e",
                      "1.5e+", "0x10", "1_0", "3.4028236e38", "0.1.2", "+1", ".5"])
    return _replace_span(text, m.start(), m.end(), new)


def _mutate_dims(rng, dims, names):
    """A dim list ['8', '64'] mutated: one dim changed, a dim added or dropped, two dims swapped."""
    r = rng.random()
    dims = list(dims)
    if r < 0.65 or len(dims) < 2:
        i = rng.randrange(len(dims))
        try:
            v = int(dims[i])
        except ValueError:
            v = 8
        choices = [str(x) for x in (0, -1, 1, v + 1, v - 1, 2 * v, v * 1000, 2**31 - 1, 2**31, 2**32, 2**63 - 1,
                                    2**63, 2**64)]
        choices += ["(n)", "(m)", "(M)", "(x_0)", "(0)", "(-1)", "()", "(n // 0)", "(n % 0)", "((n + 7) // 8)"]
        choices += [f"({n})" for n in names[:4]]
        dims[i] = rng.choice(choices)
    elif r < 0.8:
        dims.insert(rng.randrange(len(dims) + 1), rng.choice(["1", "2", "8", "0"]))
    elif r < 0.9:
        del dims[rng.randrange(len(dims))]
    else:
        i, j = rng.sample(range(len(dims)), 2)
        dims[i], dims[j] = dims[j], dims[i]
    return dims


def m_dims(rng, text, ctx):
    """The dims of a memref or tile type: 8x64 -> 0x64, -1x64, (n)x64, 2**31x64, 64x8, 8x64x1, ..."""
    cands = [("memref", m) for m in MEMREF_RE.finditer(text)] + [("tile", m) for m in TILE_RE.finditer(text)]
    if not cands:
        return None
    kind, m = rng.choice(cands)
    names = sorted({n[1:] for n in NAME_RE.findall(text)})
    if kind == "memref":
        dims = DIM_TOKEN_RE.findall(m.group(2)) or ["8"]
        new = f"!pto.memref<{m.group(1)},{'x'.join(_mutate_dims(rng, dims, names))},{m.group(3)}>"
    else:
        body = m.group(1)
        if "x" not in body:
            return None
        dimtext, dtype = body.rsplit("x", 1)
        dims = DIM_TOKEN_RE.findall(dimtext) or ["8"]
        new = f"!pto.tile<{'x'.join(_mutate_dims(rng, dims, names))}x{dtype}>"
    return _replace_span(text, m.start(), m.end(), new)


def _new_expr(rng, old, names):
    """An expression (a loop bound, an offset, an extent) replaced by another."""
    r = rng.random()
    if r < 0.4:
        return str(rng.choice(BOUNDARY + TILES))
    if r < 0.55 and names:
        return rng.choice(names)
    if r < 0.7:
        return f"({old} {rng.choice(['+', '-', '*', '//', '%'])} {rng.choice([0, 1, -1, 8, 2**31, 2**62])})"
    if r < 0.8:
        return f"({old} // 0)" if rng.random() < 0.5 else f"({old} % 0)"
    if r < 0.9:
        return f"{rng.choice(['min', 'max'])}({old}, {rng.choice([0, -1, 2**63 - 1])})"
    return rng.choice(["", "()", "(", "%n", "n n", "1 +", "(1 < 2)", "(0 && 1)", "-(1)", "--1"])


def m_loop(rng, text, ctx):
    """A FOR's start, end or step (to 0, negative, huge, an expression dividing by zero) or its range options."""
    m = _pick_match(rng, FOR_RE, text)
    if not m:
        return None
    names = sorted({n[1:] for n in NAME_RE.findall(text)})
    var, start, stop, step, rest = m.groups()
    r = rng.random()
    if r < 0.25:
        start = _new_expr(rng, start, names)
    elif r < 0.55:
        stop = _new_expr(rng, stop, names)
    elif r < 0.75:
        step = rng.choice(["0", "-1", "2", "8", str(2**31), str(2**63 - 1), "-" + str(2**63), "n", "(1 // 0)"])
    elif r < 0.9:
        rest = rng.choice([
            " max_range=4096 min_range=256", " max_range=0 min_range=0", " max_range=3 min_range=5",
            " max_range=4096 min_range=1 tile_levels={4096:16,0:8}", " max_range=64 min_range=64 tile_levels={}",
            " max_range=64 min_range=4 tile_levels={64:0,0:8}", f" max_range={2**62} min_range=1",
            " tile_levels={8:16}", "  // parallel dim=9 tile=0", "  // parallel dim=-1 tile=8", "",
            " parallel dim=9 tile=0", " parallel dim=-1 tile=8", " parallel dim=0", " parallel",
            " max_range=-64 min_range=-4", " max_range=64 min_range=4 tile_levels={64:16,0:8,64:32}"])
    else:
        var = rng.choice(names) if names else var
    new = f"FOR %{var}:idx, {start}:idx, {stop}:idx, {step}:idx{rest}"
    return _replace_span(text, m.start(), m.end(), new)


def m_view(rng, text, ctx):
    """A view's offsets, dims permutation or steps."""
    m = _pick_match(rng, VIEW_RE, text)
    if not m:
        return None
    names = sorted({n[1:] for n in NAME_RE.findall(text)})
    base, offs, dims, steps = m.groups()
    parts = [p.strip() for p in offs.split(",")]
    r = rng.random()
    if r < 0.5:
        i = rng.randrange(len(parts))
        parts[i] = _new_expr(rng, parts[i], names)
        offs = ", ".join(parts)
    elif r < 0.75:
        d = [p.strip() for p in dims.split(",")]
        d[rng.randrange(len(d))] = str(rng.choice([0, 1, 2, -1, 7, 2**31]))
        dims = ", ".join(d)
    else:
        s = [p.strip() for p in steps.split(",")]
        s[rng.randrange(len(s))] = str(rng.choice([0, -1, 2, 3, 1000, 2**31, 2**62]))
        steps = ", ".join(s)
    return _replace_span(text, m.start(), m.end(), f"= view %{base}[{offs}] dims [{dims}] steps [{steps}]")


def m_region(rng, text, ctx):
    """A CALL argument's region: an offset or extent changed, or the region's rank or form broken."""
    m = _pick_match(rng, REGION_RE, text)
    if not m:
        return None
    names = sorted({n[1:] for n in NAME_RE.findall(text)})
    tensor, offs, exts = m.group(1), [p.strip() for p in m.group(2).split(",")], \
        [p.strip() for p in m.group(3).split(",")]
    r = rng.random()
    if r < 0.45:
        i = rng.randrange(len(offs))
        offs[i] = _new_expr(rng, offs[i], names)
    elif r < 0.85:
        i = rng.randrange(len(exts))
        exts[i] = _new_expr(rng, exts[i], names)
    elif r < 0.92:
        offs, exts = exts, offs
    else:
        (offs if rng.random() < 0.5 else exts).pop()
    new = f"-> %{tensor}[{', '.join(offs)}; {', '.join(exts)}]"
    if rng.random() < 0.05:
        new = f"-> %{tensor}"
    return _replace_span(text, m.start(), m.end(), new)


def m_valid(rng, text, ctx):
    """A `valid [...]` extent."""
    m = _pick_match(rng, VALID_RE, text)
    if not m:
        return None
    names = sorted({n[1:] for n in NAME_RE.findall(text)})
    parts = [p.strip() for p in m.group(1).split(",")]
    i = rng.randrange(len(parts))
    parts[i] = _new_expr(rng, parts[i], names)
    return _replace_span(text, m.start(), m.end(), f"valid [{', '.join(parts)}]")


def m_expr_op(rng, text, ctx):
    """An operator of an expression: (a * b) -> (a // b), (a + b) -> (a % b), min -> max, ..."""
    if rng.random() < 0.2:
        ms = list(re.finditer(r"\b(min|max)\(", text))
        if ms:
            m = rng.choice(ms)
            return _replace_span(text, m.start(1), m.end(1), "max" if m.group(1) == "min" else "min")
    m = _pick_match(rng, EXPR_OP_RE, text)
    if not m:
        return None
    op = rng.choice(["+", "-", "*", "//", "%", "<", "<=", "==", "!=", "&&", "||", ">", "/", "**", "^"])
    return _replace_span(text, m.start(1), m.end(1), op)


def m_lines(rng, text, ctx):
    """Lines deleted, duplicated, swapped or moved."""
    lines = text.split("\n")
    if len(lines) < 2:
        return None
    r = rng.random()
    i = rng.randrange(len(lines))
    if r < 0.35:
        del lines[i]
    elif r < 0.6:
        lines.insert(i, lines[i])
    elif r < 0.8:
        j = rng.randrange(len(lines))
        lines[i], lines[j] = lines[j], lines[i]
    elif r < 0.9:
        j = min(i + 1, len(lines) - 1)
        lines[i], lines[j] = lines[j], lines[i]
    else:
        line = lines.pop(i)
        lines.insert(rng.randrange(len(lines) + 1), line)
    return "\n".join(lines)


def m_splice(rng, text, ctx):
    """A line of another seed inserted somewhere."""
    others = ctx.get("seed_lines") or []
    if not others:
        return None
    lines = text.split("\n")
    lines.insert(rng.randrange(len(lines) + 1), rng.choice(others))
    return "\n".join(lines)


def m_names(rng, text, ctx):
    """A %name or @name replaced by another one of the text (or a new one)."""
    regex = NAME_RE if rng.random() < 0.8 else FUNC_RE
    ms = list(regex.finditer(text))
    if not ms:
        return None
    m = rng.choice(ms)
    pool = sorted({x.group() for x in ms})
    sigil = m.group()[0]
    new = rng.choice(pool + [sigil + "undeclared", sigil, sigil + "0", sigil + "x" * 300, sigil + "é"])
    return _replace_span(text, m.start(), m.end(), new)


def m_opcode(rng, text, ctx):
    """An instruction mnemonic or a keyword replaced by another."""
    words = OPCODES + KEYWORDS
    ms = [m for m in re.finditer(r"\b[A-Za-z_]\w*\b", text) if m.group() in words]
    if not ms:
        return None
    m = rng.choice(ms)
    pool = OPCODES if m.group() in OPCODES else KEYWORDS
    if rng.random() < 0.15:
        pool = words + ["tfoo", "", m.group().upper()]
    return _replace_span(text, m.start(), m.end(), rng.choice(pool))


def m_dtype(rng, text, ctx):
    """An element type or memory space changed (f32 -> i1, gm -> local, ...)."""
    ms = list(re.finditer(r"(?<=[x,: ])(f32|f16|bf16|f64|i8|i16|i32|i64|u8|i1|gm|local)(?=[>,\s]|$)", text))
    if not ms:
        return None
    m = rng.choice(ms)
    pool = ["gm", "local", "ub", "global"] if m.group() in ("gm", "local") else DTYPES
    return _replace_span(text, m.start(), m.end(), rng.choice(pool))


def m_header(rng, text, ctx):
    """The module line, function kinds, buffer bytes, fused lists, parallel notes and `out`, in the
    syntax and in the older comment form."""
    r = rng.random()
    if r < 0.2:
        new = rng.choice(["// Entry: @nowhere", "// Entry: @", "// Entry:", "", "// Entry: @" + "k" * 50,
                          "module @m entry @nowhere", "module @m", "module entry @main", "module @m entry @main x"])
        m = re.search(r"^(// Entry: .*|module @.*)$", text, re.M)
        return _replace_span(text, m.start(), m.end(), new) if m else new + "\n" + text
    if r < 0.45:
        ms = list(re.finditer(r"// Function Type: (\w+)|^(incore|orchestration)(?= func)", text, re.M))
        if not ms:
            return None
        m = rng.choice(ms)
        g = 1 if m.group(1) is not None else 2
        new = rng.choice(["InCore", "Orchestration", "Other", ""] if g == 1 else ["incore", "orchestration", "other", ""])
        return _replace_span(text, m.start(g), m.end(g), new)
    if r < 0.52:
        ms = list(re.finditer(r"fused=\[[^\]\n]*\]", text))
        if not ms:
            return None
        m = rng.choice(ms)
        return _replace_span(text, m.start(), m.end(), rng.choice(
            ["fused=[]", "fused=[", 'fused=["a b", c.d]', 'fused=["x]', "fused=[a,,b]", "fused=[1x]", ""]))
    if r < 0.6:
        ms = list(re.finditer(r"(?:// Buffer bytes: |buffer_bytes=)(\d+)", text))
        if not ms:
            return None
        m = rng.choice(ms)
        return _replace_span(text, m.start(1), m.end(1), str(rng.choice([0, -1, 1, 2**63 - 1, 2**64, 10**40])))
    if r < 0.75:
        ms = list(re.finditer(r" out(?=[,)])", text))
        if ms and rng.random() < 0.5:
            m = rng.choice(ms)
            return _replace_span(text, m.start(), m.end(), "")
        ms = list(re.finditer(r"f32>(?=[,)])", text))
        if not ms:
            return None
        m = rng.choice(ms)
        return _replace_span(text, m.end(), m.end(), " out")
    ms = list(re.finditer(r"parallel dim=(\d+) tile=(\d+)", text))
    if not ms:
        return None
    m = rng.choice(ms)
    g = rng.choice([1, 2])
    return _replace_span(text, m.start(g), m.end(g), str(rng.choice([0, -1, 1, 3, 99, 2**31, 2**64])))


def m_bytes(rng, text, ctx):
    """Random bytes and unicode inserted or overwritten: NUL, lone surrogates, U+202E, control characters."""
    if not text:
        return rng.choice(WEIRD)
    i = rng.randrange(len(text) + 1)
    s = "".join(rng.choice(WEIRD) for _ in range(rng.choice([1, 1, 1, 2, 5])))
    if rng.random() < 0.3:
        s = "".join(chr(rng.randrange(0x110000)) for _ in range(rng.choice([1, 3])))
    if rng.random() < 0.5:
        return text[:i] + s + text[i:]
    return text[:i] + s + text[i + len(s):]


def m_truncate(rng, text, ctx):
    """The text cut at a random point (or its middle dropped)."""
    if not text:
        return None
    i = rng.randrange(len(text))
    if rng.random() < 0.7:
        return text[:i]
    j = rng.randrange(i, len(text) + 1)
    return text[:i] + text[j:]


MUTATORS = [  # (mutator, weight)
    (m_int, 14), (m_dims, 10), (m_loop, 7), (m_view, 4), (m_region, 8), (m_valid, 5), (m_expr_op, 4),
    (m_float, 3), (m_lines, 8), (m_splice, 3), (m_names, 6), (m_opcode, 6), (m_dtype, 5), (m_header, 4),
    (m_bytes, 5), (m_truncate, 3),
]


def make_case(seed, case, seeds):
    """The mutant of case `case` under `seed`: {case, seed, kernel, mutations, text, hints, rng_seed}.
    A function of (seed, case) and the seed texts only."""
    rng = random.Random(f"pto-fuzz:{seed}:{case}")
    name, text, hints = seeds[rng.randrange(len(seeds))]
    ctx = {"seed_lines": [line for n, t, _ in seeds if n != name for line in t.split("\n") if line.strip()]}
    ctx["seed_lines"] = ctx["seed_lines"][:: max(1, len(ctx["seed_lines"]) // 400)]
    mutators, weights = zip(*MUTATORS)
    applied = []
    for _ in range(rng.choice([1, 1, 1, 1, 2, 2, 3])):
        for _attempt in range(10):
            mut = rng.choices(mutators, weights)[0]
            new = mut(rng, text, ctx)
            if new is not None and new != text:
                text = new
                applied.append(mut.__name__[2:])
                break
    return {"case": case, "seed": seed, "kernel": name, "mutations": applied, "text": text, "hints": hints,
            "rng_seed": rng.randrange(2**32)}


# ---------------------------------------------------------------------------------------------------------------
# Worker (the child process): runs cases, one JSON line in, stage messages and one result line out.
# ---------------------------------------------------------------------------------------------------------------

STD_MESSAGES = ("std::", "basic_string", "_M_range_check", "vector::", "map::at", "unordered_map", "stoi", "stol",
                "stoll", "bad_alloc", "bad_variant_access", "bad_optional_access", "out_of_range", "invalid_argument",
                "__cxa", "terminate called")
FAKE_CXX_MARK = "pto-fuzz-no-compiler"
SELFTEST_MARK = "// pto-fuzz-selftest: "
MAX_TASK_WORK = 200_000       # skip running mutants whose loops would run longer than this (tasks x InCore iterations)
MAX_ARRAY_ELEMENTS = 1 << 22  # ... or whose arrays would be larger
GUARD = 4096                  # bytes checked on both sides of each array


def _raised_by_pypto(e: BaseException) -> bool:
    """Whether the innermost frame of `e` is a `raise` statement in pypto's Python code."""
    import pypto

    root = os.path.dirname(os.path.abspath(pypto.__file__))
    tb = traceback.extract_tb(e.__traceback__)
    if not tb:
        return False
    last = tb[-1]
    return os.path.abspath(last.filename).startswith(root + os.sep) and (last.line or "").lstrip().startswith("raise")


def classify_exception(e: BaseException, stage: str, text: str = "") -> dict:
    """{'outcome': 'error'|'bad', 'cls': ..., 'exc': type name, 'msg': ...} for an exception of a stage."""
    import pypto.errors as pe

    msg = str(e)
    exc = f"{type(e).__module__}.{type(e).__qualname__}".replace("builtins.", "")
    out = {"stage": stage, "exc": exc, "msg": msg[:2000]}
    pypto_classes = tuple(c for c in pe.PyptoError if c is not pe.InternalError)
    if isinstance(e, pe.InternalError):
        cls = "std-exception" if msg.startswith("pypto internal error") else "internal-error"
    elif isinstance(e, TypeError) and "incompatible function arguments" in msg:
        cls = "pybind-type-error"
    elif isinstance(e, UnicodeError):
        cls = "unicode-error"
    elif isinstance(e, pypto_classes):
        cls = None
        if any(s in msg for s in STD_MESSAGES):
            cls = "std-message"
        elif not msg.strip():
            cls = "empty-message"
        elif isinstance(e, pe.PtoSyntaxError):
            line, col = getattr(e, "line", None), getattr(e, "column", None)
            nlines = text.count("\n") + 1
            if not (isinstance(line, int) and isinstance(col, int) and 1 <= line <= nlines and col >= 1):
                cls = "bad-position"
        if cls is None:
            return dict(out, outcome="error", cls=type(e).__name__)
    elif isinstance(e, (ValueError, TypeError, SyntaxError, NotImplementedError)) and _raised_by_pypto(e) \
            and msg.strip() and not any(s in msg for s in STD_MESSAGES):
        return dict(out, outcome="error", cls="builtin-" + type(e).__name__)
    elif isinstance(e, MemoryError) and msg.startswith("pypto: a workspace"):
        # A workspace larger than the machine: pypto's MemoryError names its size.
        return dict(out, outcome="error", cls="builtin-MemoryError")
    elif isinstance(e, (ValueError, TypeError, SyntaxError, NotImplementedError)):
        cls = "wrong-class"
    else:
        cls = "exception"
    out["where"] = "".join(traceback.format_exception(type(e), e, e.__traceback__)[-6:])[-3000:]
    return dict(out, outcome="bad", cls=cls)


class _Skip(Exception):
    """The harness does not run this mutant (too large, no sizes for it)."""


class _DivZero(_Skip):
    """An expression divides by zero."""


_TOKEN = re.compile(r"\s*(\d+|[A-Za-z_]\w*|//|<=|==|!=|&&|\|\||[-+*%<(),])")


def eval_pto_expr(text: str, env: dict) -> int:
    """Evaluates a .pto integer expression (ints, names, + - * // %, comparisons, && ||, min, max)."""
    toks, i = [], 0
    text = text.strip()
    while i < len(text):
        m = _TOKEN.match(text, i)
        if not m:
            raise _Skip(f"cannot evaluate {text!r}")
        toks.append(m.group(1))
        i = m.end()
        while i < len(text) and text[i].isspace():
            i += 1
    pos = [0]

    def peek():
        return toks[pos[0]] if pos[0] < len(toks) else None

    def take(t=None):
        tok = peek()
        if tok is None or (t is not None and tok != t):
            raise _Skip(f"cannot evaluate {text!r}")
        pos[0] += 1
        return tok

    def atom():
        tok = take()
        if tok == "(":
            v = binary(0)
            take(")")
            return v
        if tok == "-":
            return -atom()
        if tok in ("min", "max") and peek() == "(":
            take("(")
            a = binary(0)
            take(",")
            b = binary(0)
            take(")")
            return min(a, b) if tok == "min" else max(a, b)
        if tok.isdigit():
            return int(tok)
        if tok in env:
            return env[tok]
        raise _Skip(f"unknown name {tok} in {text!r}")

    levels = [("||",), ("&&",), ("<", "<=", "==", "!="), ("+", "-"), ("*", "//", "%")]

    def binary(level):
        if level == len(levels):
            return atom()
        v = binary(level + 1)
        while peek() in levels[level]:
            op = take()
            w = binary(level + 1)
            if op in ("//", "%") and w == 0:
                raise _DivZero("division by zero")
            v = {"||": lambda: int(bool(v) or bool(w)), "&&": lambda: int(bool(v) and bool(w)),
                 "<": lambda: int(v < w), "<=": lambda: int(v <= w), "==": lambda: int(v == w),
                 "!=": lambda: int(v != w), "+": lambda: v + w, "-": lambda: v - w, "*": lambda: v * w,
                 "//": lambda: v // w, "%": lambda: v % w}[op]()
        return v

    v = binary(0)
    if pos[0] != len(toks):
        raise _Skip(f"cannot evaluate {text!r}")
    return v


def estimate_work(data: dict, env: dict) -> int:
    """Tasks of the orchestration times the iterations of their InCore loops, stopping past MAX_TASK_WORK.
    Raises _Skip for loops that would not end (a step <= 0) or expressions it cannot evaluate."""
    inner = {}

    def body_iters(body):
        n = 1
        for s in body:
            if s["kind"] == "loop":
                try:
                    a, b, c = (eval_pto_expr(s[k], {}) for k in ("start", "stop", "step"))
                except _Skip:
                    continue  # bounds over scalar parameters: not bounded here
                if c <= 0 and a < b:
                    raise _Skip("an InCore loop with a step <= 0")
                n += max(0, (b - a + c - 1) // c) * body_iters(s["body"]) if c > 0 else 0
            elif s["kind"] == "if":
                n += max(body_iters(s["then"]), body_iters(s["else"]))
        return n

    for f in data["functions"]:
        inner[f["name"]] = body_iters(f["body"])

    def walk(body, env):
        total = 0
        for s in body:
            if s["kind"] == "call":
                total += inner.get(s["callee"], 1)
            elif s["kind"] == "if":
                total += walk(s["then"] if eval_pto_expr(s["cond"], env) else s["else"], env)
            elif s["kind"] == "loop":
                a, b, c = (eval_pto_expr(s[k], env) for k in ("start", "stop", "step"))
                if c <= 0 and a < b:
                    raise _Skip("an orchestration loop with a step <= 0")
                if c > 0 and (b - a) // c > MAX_TASK_WORK:
                    raise _Skip(f"a loop of {(b - a) // c} iterations")
                i = a
                while i < b:
                    total += walk(s["body"], dict(env, **{s["var"]: i}))
                    if total > MAX_TASK_WORK:
                        raise _Skip(f"more than {MAX_TASK_WORK} tasks x InCore iterations")
                    i += c
        return total

    return walk(data["orchestration"]["body"], env)


def make_arguments(prog, hints: dict, rng_seed: int):
    """(arrays, scalars, guards) for a compiled mutant: arrays sized from the entry's memrefs, symbolic dims and
    scalars from the seed's hints or small ints, each array inside a buffer with GUARD bytes on both sides."""
    import numpy as np

    from pypto import _dtypes

    rng = random.Random(rng_seed)
    nprng = np.random.default_rng(rng_seed)
    env = {}
    memrefs = [(name, dt, [str(d) for d in dims], out) for name, dt, dims, out in prog._program.entry_memrefs()]
    for _, _, dims, _ in memrefs:
        for d in dims:
            if re.fullmatch(r"[A-Za-z_]\w*", d) and d not in env:
                env[d] = hints.get(d, rng.choice([8, 16, 24, 32, 64]))
    scalars = []
    for s in prog.parameters[len(memrefs):]:
        env[s] = hints.get(s, rng.choice([0, 1, 2, 3, 4, 8]))
        scalars.append(env[s])
    arrays, guards = [], []
    total = 0
    for name, dt, dims, _ in memrefs:
        shape = [eval_pto_expr(d, env) for d in dims]
        if any(d < 0 for d in shape):
            raise _Skip(f"'{name}' has a negative dim {shape}")
        n = 1
        for d in shape:
            n *= d
        total += n
        if total > MAX_ARRAY_ELEMENTS:
            raise _Skip(f"arrays of more than {MAX_ARRAY_ELEMENTS} elements")
        if dt == _dtypes.DT_BF16:
            npdt, torch_view = np.dtype(np.uint16), True
        else:
            npdt, torch_view = _dtypes.to_numpy(dt), False
        raw = np.full(2 * GUARD + n * npdt.itemsize, 0xA5, np.uint8)
        body = raw[GUARD:GUARD + n * npdt.itemsize].view(npdt).reshape(shape)
        if npdt.kind == "f":
            body[...] = nprng.standard_normal(shape).astype(npdt)
        elif npdt.kind in "iu":
            body[...] = nprng.integers(0, 4, shape).astype(npdt)
        else:
            body[...] = nprng.integers(0, 2, shape).astype(npdt)
        arr = body
        if torch_view:
            import torch

            arr = torch.from_numpy(body).view(torch.bfloat16)
        arrays.append(arr)
        guards.append((name, raw))
    return arrays, scalars, guards, env


class Worker:
    """The child side: stage messages and results as JSON lines on `out`."""

    def __init__(self, out, real_cache: str, scratch: str, hooks: bool):
        self.out = out
        self.real_cache = real_cache
        self.scratch = scratch
        self.hooks = hooks
        self.real_cxx = os.environ.get("CXX")
        self.fake_cxx = os.path.join(scratch, FAKE_CXX_MARK)
        with open(self.fake_cxx, "w") as f:
            f.write("#!/bin/sh\nexit 97\n")
        os.chmod(self.fake_cxx, 0o755)
        self.kernels_ran = 0  # cases whose kernels ran in this process

    def send(self, msg):
        self.out.write(json.dumps(msg) + "\n")
        self.out.flush()

    def stage(self, name):
        self.send({"stage": name})

    def selftest(self, text, stage):
        if not self.hooks or SELFTEST_MARK not in text:
            return
        at, _, action = text.split(SELFTEST_MARK, 1)[1].split("\n", 1)[0].strip().partition(":")
        if at != stage:
            return
        if action == "abort" or (action == "abort-if-ran" and self.kernels_ran):
            os.abort()
        if action == "segv":
            os.kill(os.getpid(), signal.SIGSEGV)
        if action == "hang":
            time.sleep(3600)
        if action == "exit":
            os._exit(3)
        if action == "keyerror":
            raise KeyError("selftest")

    def _use_compiler(self, real: bool):
        if real:
            os.environ["PYPTO_CACHE_DIR"] = self.real_cache
            if self.real_cxx is None:
                os.environ.pop("CXX", None)
            else:
                os.environ["CXX"] = self.real_cxx
        else:
            os.environ["PYPTO_CACHE_DIR"] = os.path.join(self.scratch, "cache")
            os.environ["CXX"] = self.fake_cxx

    def run_case(self, case: dict) -> dict:
        import pypto.errors as pe
        import pypto.pto as pto
        from pypto import _C

        text = case["text"]
        res = {"case": case["case"], "parsed": False, "verified": False, "compiled": False, "host_compile": False,
               "ran": False}

        def fail(e, stage):
            return dict(res, **classify_exception(e, stage, text))

        # parse (and the canonical text must print back unchanged)
        self.stage("parse")
        try:
            self.selftest(text, "parse")
            module = pto.parse(text)
        except Exception as e:
            return fail(e, "parse")
        res["parsed"] = True
        canonical = module._text
        try:
            again = _C.parse_pto_roundtrip(canonical)
        except Exception as e:
            r = fail(e, "roundtrip")
            if r["outcome"] == "error":
                r.update(outcome="bad", cls="roundtrip")
            return r
        if again != canonical:
            at = next((i for i, (a, b) in enumerate(zip(again.split("\n"), canonical.split("\n"))) if a != b), -1)
            return dict(res, stage="roundtrip", outcome="bad", cls="roundtrip", exc="",
                        msg=f"the canonical text prints differently after parsing, from line {at + 1}")

        # verify: compile with a compiler that fails at once
        self.stage("verify")
        self._use_compiler(real=False)
        try:
            self.selftest(text, "verify")
            pto.compile(text)
            return dict(res, stage="verify", outcome="bad", cls="harness", exc="",
                        msg="compiled with the fake compiler")
        except pe.CompileError as e:
            if "exit 97" not in str(e):
                return fail(e, "verify")
        except Exception as e:
            return fail(e, "verify")
        finally:
            shutil.rmtree(os.path.join(self.scratch, "cache"), ignore_errors=True)
        res["verified"] = True
        if not case.get("compile"):
            return dict(res, stage="verify", outcome="ok")

        # compile with the real compiler
        self.stage("compile")
        self._use_compiler(real=True)
        try:
            self.selftest(text, "compile")
            prog = pto.compile(text)
            res["host_compile"] = prog.stats()["cache"] == "compiled"
        except pe.CompileError as e:
            res["host_compile"] = "compiling kernel" in str(e)
            r = fail(e, "compile")
            if res["host_compile"]:  # verified, but its C++ does not compile
                r.update(outcome="bad", cls="cxx-error")
            return r
        except Exception as e:
            return fail(e, "compile")
        res["compiled"] = True

        # run on small arrays
        self.stage("run")
        try:
            arrays, scalars, guards, env = make_arguments(prog, case.get("hints", {}), case.get("rng_seed", 0))
            try:
                res["work"] = estimate_work(_C.pto_module_data(prog.pto()), env)
            except _DivZero:
                res["work"] = None  # run it: the program should report the division, not crash or hang
        except _Skip as e:
            return dict(res, stage="run", outcome="ok", skipped=str(e))
        except Exception as e:
            r = fail(e, "run-setup")
            if r["outcome"] == "error":  # pypto rejected the sizes we chose: not a run
                return dict(r, outcome="ok", skipped=f"{r['exc']}: {r['msg'][:200]}")
            return r
        res["args"] = {"dims": {k: v for k, v in env.items() if k not in prog.parameters}, "scalars": scalars,
                       "shapes": [list(getattr(a, "shape", ())) for a in arrays]}
        self.send({"stage": "run", "args": res["args"]})  # the harness keeps them for a crash report
        self.kernels_ran += 1
        try:
            self.selftest(text, "run")
            prog(*arrays, *scalars)
        except Exception as e:
            return fail(e, "run")
        res["ran"] = True
        for name, raw in guards:
            if (raw[:GUARD] != 0xA5).any() or (raw[len(raw) - GUARD:] != 0xA5).any():
                return dict(res, stage="run", outcome="bad", cls="oob-write", exc="",
                            msg=f"bytes next to array '{name}' changed")
        return dict(res, stage="run", outcome="ok")


def worker_main(args) -> int:
    out = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)  # anything else printed goes to stderr
    sys.stdout = sys.stderr
    import pypto  # noqa: F401  (before the first case, so that import time is not counted in a case's timeout)
    import pypto.pto  # noqa: F401

    w = Worker(out, args.worker_cache, args.worker_scratch, args.hooks)
    w.send({"ready": os.getpid()})
    for line in sys.stdin:
        case = json.loads(line)
        w.send({"result": w.run_case(case)})
    return 0


# ---------------------------------------------------------------------------------------------------------------
# Harness (the parent): feeds cases to a worker, detects crashes and hangs, restarts the worker.
# ---------------------------------------------------------------------------------------------------------------


def malloc_check_env() -> dict:
    """Environment that makes glibc check the heap on each malloc and free and abort on corruption, so that a
    kernel that writes outside its memory is caught in its own case rather than in a later one."""
    env = {"MALLOC_CHECK_": "3"}  # glibc before 2.34
    for d in ("/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib64", "/usr/lib64", "/lib/aarch64-linux-gnu"):
        lib = os.path.join(d, "libc_malloc_debug.so.0")
        if os.path.exists(lib):  # glibc 2.34 and later: the checks live in this library
            env["LD_PRELOAD"] = " ".join(filter(None, [os.environ.get("LD_PRELOAD", ""), lib]))
            env["GLIBC_TUNABLES"] = ":".join(filter(None, [os.environ.get("GLIBC_TUNABLES", ""),
                                                           "glibc.malloc.check=3"]))
            break
    return env


class WorkerProcess:
    """A worker subprocess and its pipes. `run(case)` returns the result dict, or a crash/hang result.
    `ran` lists the cases whose kernels ran in the current worker process (suspects when it crashes later)."""

    def __init__(self, tmp: str, cache: str, timeout: float, hooks: bool = False, start_timeout: float = 120,
                 malloc_check: bool = True):
        self.tmp, self.cache, self.timeout, self.hooks, self.start_timeout = tmp, cache, timeout, hooks, start_timeout
        self.env = dict(os.environ, PYTHONFAULTHANDLER="1", **(malloc_check_env() if malloc_check else {}))
        self.proc = None
        self.spawns = 0
        self.ran = []

    def _start(self):
        self.spawns += 1
        scratch = tempfile.mkdtemp(prefix="worker-", dir=self.tmp)
        self.err_path = os.path.join(scratch, "stderr.log")
        self.err = open(self.err_path, "wb")
        cmd = [sys.executable, os.path.abspath(__file__), "--worker", "--worker-cache", self.cache,
               "--worker-scratch", scratch] + (["--hooks"] if self.hooks else [])
        self.scratch = scratch
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.err,
                                     start_new_session=True, env=self.env)
        self.buf = b""
        self.ran = []
        msg = self._read(self.start_timeout)
        if not msg or "ready" not in msg:
            tail = self._stderr_tail(0)
            self.close()
            raise RuntimeError(f"the fuzz worker did not start: {msg}\n{tail}")

    def _read(self, timeout):
        """The next JSON message, None at EOF, or 'timeout'."""
        deadline = time.monotonic() + timeout
        fd = self.proc.stdout.fileno()
        while b"\n" not in self.buf:
            left = deadline - time.monotonic()
            if left <= 0:
                return "timeout"
            ready, _, _ = select.select([fd], [], [], left)
            if not ready:
                continue
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                return None
            self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        return json.loads(line)

    def _stderr_tail(self, since: int) -> str:
        try:
            self.err.flush()
            with open(self.err_path, "rb") as f:
                f.seek(since)
                data = f.read()
            return data[-3000:].decode("utf-8", "replace")
        except OSError:
            return ""

    def close(self):
        if self.proc is None:
            return
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        self.proc.wait()
        for f in (self.proc.stdin, self.proc.stdout):
            try:
                f.close()
            except OSError:
                pass
        self.err.close()
        shutil.rmtree(self.scratch, ignore_errors=True)
        self.proc = None

    def run(self, case: dict) -> dict:
        if self.proc is None:
            self._start()
        since = os.path.getsize(self.err_path)
        stage, info = "send", {}
        try:
            self.proc.stdin.write((json.dumps(case) + "\n").encode())
            self.proc.stdin.flush()
        except BrokenPipeError:
            pass
        while True:
            # The real host compile gets more time: it runs the C++ compiler on a loaded machine.
            limit = self.timeout * (3 if stage == "compile" else 1)
            msg = self._read(limit)
            if msg == "timeout" or msg is None:
                rc = None if msg == "timeout" else self.proc.wait()
                tail = self._stderr_tail(since)
                self.close()
                r = {"case": case["case"], "stage": stage, "outcome": "bad", "exc": "", "stderr": tail, **info,
                     **_reached(stage), "earlier_runs": [c for c in self.ran if c != case["case"]]}
                if rc is None:
                    return dict(r, cls="hang", msg=f"no answer within {limit:g} s in stage {stage}")
                if rc < 0:
                    name = signal.Signals(-rc).name
                    return dict(r, cls=f"crash:{name}", signal=name,
                                msg=f"the worker died from {name} in stage {stage}")
                return dict(r, cls="worker-exit", msg=f"the worker exited with status {rc} in stage {stage}")
            if "stage" in msg:
                stage = msg["stage"]
                info.update({k: v for k, v in msg.items() if k != "stage"})
                if stage == "run" and "args" in msg:
                    self.ran.append(case["case"])
                continue
            if "result" in msg:
                return msg["result"]


def _reached(stage: str) -> dict:
    """The stages a case passed when it crashed or hung in `stage`."""
    order = ["parse", "verify", "compile", "run"]
    at = order.index(stage) if stage in order else 0
    return {"parsed": at > 0, "verified": at > 1, "compiled": at > 2, "ran": False}


def signature(r: dict) -> str:
    """A short key grouping results that are probably the same problem."""
    msg = (r.get("msg") or "").split("\n")[0]
    msg = re.sub(r"/\S+", "<path>", msg)
    msg = re.sub(r"%\w+|@\w+|'[^']*'", "<name>", msg)
    msg = re.sub(r"-?\d+", "N", msg)
    return f"{r['cls']} [{r.get('stage')}] {r.get('exc', '')}: {msg[:110]}"


def save_case(out_dir: str, case: dict, result: dict) -> str:
    """Writes <cls>-<stage>-s<seed>-c<case>.pto (the mutant, lone surrogates kept) and .json (case and result)."""
    os.makedirs(out_dir, exist_ok=True)
    base = os.path.join(out_dir, f"{result['cls'].replace(':', '-')}-{result.get('stage')}-s{case['seed']}-"
                                 f"c{case['case']}")
    with open(base + ".pto", "w", encoding="utf-8", errors="surrogatepass") as f:
        f.write(case["text"])
    with open(base + ".json", "w", encoding="utf-8") as f:
        json.dump({"case": case, "result": result}, f, indent=1)
    return base


class Stats:
    def __init__(self):
        self.cases = self.parsed = self.verified = self.compiled = self.ran = self.errors = self.host_compiles = 0
        self.skipped = 0
        self.bad = collections.Counter()
        self.errors_by = collections.Counter()
        self.skips = collections.Counter()
        self.signatures = collections.OrderedDict()

    def add(self, r: dict, saved: str = ""):
        self.cases += 1
        self.parsed += bool(r.get("parsed"))
        self.verified += bool(r.get("verified"))
        self.compiled += bool(r.get("compiled"))
        self.ran += bool(r.get("ran"))
        self.host_compiles += bool(r.get("host_compile"))
        if r.get("skipped"):
            self.skipped += 1
            self.skips[re.sub(r"-?\d+", "N", r["skipped"])[:80]] += 1
        if r["outcome"] == "error":
            self.errors += 1
            self.errors_by[f"{r['stage']}:{r['cls']}"] += 1
        elif r["outcome"] == "bad":
            self.bad[r["cls"]] += 1
            sig = signature(r)
            entry = self.signatures.setdefault(sig, {"count": 0, "first": saved or f"case {r['case']}"})
            entry["count"] += 1

    def line(self, seed, elapsed, stopped=""):
        bad = " ".join(f"{k}={v}" for k, v in sorted(self.bad.items()))
        return (f"pto-fuzz: seed={seed} cases={self.cases} parsed={self.parsed} verified={self.verified} "
                f"compiled={self.compiled} ran={self.ran} pypto_errors={self.errors} "
                f"bad={sum(self.bad.values())}" + (f" [{bad}]" if bad else "")
                + f" host_compiles={self.host_compiles} time={elapsed:.1f}s"
                + (f" stopped={stopped}" if stopped else ""))


def _inject(case: dict, spec: str, seeds) -> dict:
    """A self-test case: the seed text of the case with a marker the worker acts on (--hooks)."""
    stage, action = spec.split(":")
    name, text, hints = seeds[0]
    return dict(case, kernel=name, hints=hints, mutations=[f"selftest-{stage}-{action}"],
                text=f"{SELFTEST_MARK}{stage}:{action}\n" + text)


def fuzz(seed: int, cases: int, max_compiles: int, timeout: float, out_dir: Optional[str],
         time_budget: Optional[float], kernels=None, inject=None, verbose=False, log=print, first_case: int = 0,
         malloc_check: bool = True):
    """Runs the fuzzer; returns Stats. `inject` maps case numbers to 'stage:action' self-test cases.

    Two passes, so that a slow machine cuts the expensive part only: first every case up to the verify stage,
    then the verified ones in case order through the real compile and a run, while host compiles (cache misses)
    stay within `max_compiles` and time within `time_budget`."""
    t0 = time.monotonic()
    seeds = seed_texts(kernels, log=log if verbose else None)
    if verbose:
        log(f"{len(seeds)} seeds ready in {time.monotonic() - t0:.1f} s")
    tmp = tempfile.mkdtemp(prefix="pto-fuzz-")
    cache = os.environ.get("PYPTO_CACHE_DIR") or os.path.join(tmp, "cache")
    stats = Stats()
    stopped = ""
    worker = WorkerProcess(tmp, cache, timeout, hooks=bool(inject), malloc_check=malloc_check)
    out_of_time = lambda: time_budget is not None and time.monotonic() - t0 > time_budget  # noqa: E731

    def confirm(case, r):
        """A crash after other kernels ran in the same worker is run again alone: a kernel that wrote outside
        its memory may have made a later case crash."""
        if not (r["outcome"] == "bad" and r["cls"].startswith(("crash:", "worker-exit")) and r.get("earlier_runs")):
            return r
        again = worker.run(dict(case, compile=True))  # a new worker: the crash closed the old one
        if again["outcome"] == "bad" and again["cls"] == r["cls"]:
            return dict(again, confirmed=True)
        return dict(r, cls="heap-corruption",
                    msg=f"{r['msg']}, but not when run alone ({again['outcome']} {again.get('cls', '')}): "
                        f"memory corrupted by a kernel that ran before in this worker, one of cases "
                        f"{r['earlier_runs'][-20:]}")

    def record(case, r):
        saved = save_case(out_dir, case, r) if r["outcome"] == "bad" and out_dir else ""
        stats.add(r, saved)
        if verbose and r["outcome"] == "bad":
            log(f"case {case['case']} ({case['kernel']}, {'+'.join(case['mutations'])}): BAD {signature(r)}"
                + (f" -> {saved}.pto" if saved else ""))

    try:
        verified = []
        for n in range(first_case, first_case + cases):
            if out_of_time():
                stopped = "time-budget"
                break
            case = make_case(seed, n, seeds)
            if inject and n in inject:
                case = _inject(case, inject[n], seeds)
            r = worker.run(dict(case, compile=False))
            if r["outcome"] == "ok" and r["verified"] and max_compiles > 0:
                verified.append((case, r))  # recorded after the second pass
            else:
                record(case, r)
        budget = max_compiles
        for case, r in verified:
            if budget > 0 and not out_of_time():
                r = confirm(case, worker.run(dict(case, compile=True)))
                budget -= bool(r.get("host_compile"))
            elif budget > 0:
                stopped = "time-budget"
            record(case, r)
    finally:
        worker.close()
        shutil.rmtree(tmp, ignore_errors=True)
    stats.elapsed = time.monotonic() - t0
    stats.stopped = stopped
    stats.spawns = worker.spawns
    return stats


# ---------------------------------------------------------------------------------------------------------------
# Replay and shrinking
# ---------------------------------------------------------------------------------------------------------------


def _load_case(path: str) -> dict:
    if path.endswith(".json"):
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
        return dict(data.get("case", data))
    with open(path, encoding="utf-8", errors="surrogatepass") as f:
        text = f.read()
    return {"case": 0, "seed": 0, "kernel": os.path.basename(path), "mutations": [], "text": text, "hints": {},
            "rng_seed": 0}


def _same_failure(a: dict, b: dict) -> bool:
    if b.get("outcome") != "bad" or a.get("cls") != b.get("cls") or a.get("stage") != b.get("stage"):
        return False
    if a.get("exc") != b.get("exc"):
        return False
    # The same message up to numbers and names (for InternalError and friends the message says what broke).
    norm = lambda r: re.sub(r"-?\d+|%\w+|@\w+|'[^']*'|/\S+", "", (r.get("msg") or "").split("\n")[0])  # noqa: E731
    return a.get("cls", "").startswith(("crash", "hang", "oob", "roundtrip", "cxx")) or norm(a) == norm(b)


def shrink(case: dict, worker: WorkerProcess, log=print, max_tests: int = 1500) -> tuple:
    """Delta debugging over lines, then over the tokens of each line, then numbers made small: the smallest
    text found (within `max_tests` runs) that fails the same way. Returns (text, its result)."""
    case = dict(case, compile=True)
    target = worker.run(case)
    if target.get("outcome") != "bad":
        raise SystemExit(f"the case does not fail: {target.get('outcome')} {target.get('cls', '')}")
    log(f"target: {signature(target)}")
    tests = [0]

    def fails(text):
        if tests[0] >= max_tests:
            return False
        tests[0] += 1
        return _same_failure(target, worker.run(dict(case, text=text)))

    def ddmin(parts, joiner, build=lambda t: t):
        n = 2
        while len(parts) >= 2 and tests[0] < max_tests:
            chunk = max(1, len(parts) // n)
            for i in range(0, len(parts), chunk):
                cand = parts[:i] + parts[i + chunk:]
                if cand and fails(build(joiner.join(cand))):
                    parts, n = cand, max(n - 1, 2)
                    break
            else:
                if chunk == 1:
                    break
                n = min(len(parts), n * 2)
        return parts

    lines = ddmin(case["text"].split("\n"), "\n")
    log(f"lines: {len(lines)} ({tests[0]} tests)")
    for i in range(len(lines)):
        toks = re.findall(r"^\s+|%?\w+\s*|[^\w\s]\s*", lines[i])  # words and punctuation with their spaces
        if len(toks) > 1:
            lines[i] = "".join(ddmin(toks, "", lambda t, i=i: "\n".join(lines[:i] + [t] + lines[i + 1:])))
    text = "\n".join(lines)
    log(f"tokens: {len(text)} chars ({tests[0]} tests)")
    for m in reversed(list(INT_RE.finditer(text))):
        for v in ("0", "1", "8"):
            cand = _replace_span(text, m.start(), m.end(), v)
            if cand != text and len(cand) <= len(text) and fails(cand):
                text = cand
                break
    log(f"shrunk to {len(text)} chars in {tests[0]} tests")
    return text, worker.run(dict(case, text=text))


# ---------------------------------------------------------------------------------------------------------------
# Command line
# ---------------------------------------------------------------------------------------------------------------


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description="Seeded mutation fuzzer over .pto texts of real kernels (issue 17).")
    p.add_argument("--seed", type=int, default=1, help="the run's seed (a case is a function of seed and number)")
    p.add_argument("--cases", type=int, default=1000, help="mutants to try")
    p.add_argument("--first-case", type=int, default=0, help="number of the first case")
    p.add_argument("--max-compiles", type=int, default=100, help="at most this many host (C++) compiles of mutants")
    p.add_argument("--timeout", type=float, default=20.0,
                   help="seconds a stage may take before it counts as a hang (x3 for the host compile)")
    p.add_argument("--out", help="directory for the failing mutants (.pto and .json per case)")
    p.add_argument("--time-budget", type=float, help="stop starting cases after this many seconds")
    p.add_argument("--no-malloc-check", action="store_true",
                   help="do not run the workers with glibc's heap checks (MALLOC_CHECK_, libc_malloc_debug)")
    p.add_argument("--kernels", help="comma-separated jitted seed kernels to use, 'none' for the builder and "
                   "hand-written seeds only (default: all)")
    p.add_argument("--inject", action="append", default=[], metavar="CASE=STAGE:ACTION",
                   help="self-test: make case CASE abort/segv/hang/exit/keyerror in STAGE (parse, verify, compile, "
                   "run); abort-if-ran aborts only in a worker that has run kernels; none is an unmutated seed")
    p.add_argument("--replay", metavar="FILE", help="run one saved case (.json or .pto) and print its outcome")
    p.add_argument("--shrink", metavar="FILE", help="shrink a saved failing case; writes FILE's base + .min.pto")
    p.add_argument("--max-tests", type=int, default=1500, help="runs a --shrink may take")
    p.add_argument("--show", metavar="CASE", type=int, help="print the mutant of case CASE and exit")
    p.add_argument("-v", "--verbose", action="store_true", help="print each bad outcome as it happens")
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--worker-cache", help=argparse.SUPPRESS)
    p.add_argument("--worker-scratch", help=argparse.SUPPRESS)
    p.add_argument("--hooks", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.worker:
        return worker_main(args)
    kernels = None if args.kernels is None else [k for k in args.kernels.split(",") if k and k != "none"]

    if args.show is not None:
        case = make_case(args.seed, args.show, seed_texts(kernels))
        print(f"// case {args.show} of seed {args.seed}: {case['kernel']}, {'+'.join(case['mutations'])}")
        sys.stdout.write(case["text"].encode("utf-8", "surrogatepass").decode("utf-8", "replace"))
        return 0

    if args.replay or args.shrink:
        path = args.replay or args.shrink
        case = _load_case(path)
        tmp = tempfile.mkdtemp(prefix="pto-fuzz-")
        cache = os.environ.get("PYPTO_CACHE_DIR") or os.path.join(tmp, "cache")
        worker = WorkerProcess(tmp, cache, args.timeout, malloc_check=not args.no_malloc_check)
        try:
            if args.replay:
                r = worker.run(dict(case, compile=True))
                print(json.dumps(r, indent=1))
                return 1 if r.get("outcome") == "bad" else 0
            text, final = shrink(case, worker, max_tests=args.max_tests)
            base = path.rsplit(".", 1)[0]
            with open(base + ".min.pto", "w", encoding="utf-8", errors="surrogatepass") as f:
                f.write(text)
            print(f"{base}.min.pto ({len(text)} chars): {signature(final)}")
            print(text.encode("utf-8", "surrogatepass").decode("utf-8", "replace"))
            return 0
        finally:
            worker.close()
            shutil.rmtree(tmp, ignore_errors=True)

    inject = {}
    for spec in args.inject:
        n, what = spec.split("=", 1)
        inject[int(n)] = what
    stats = fuzz(args.seed, args.cases, args.max_compiles, args.timeout, args.out, args.time_budget, kernels,
                 inject or None, args.verbose, first_case=args.first_case, malloc_check=not args.no_malloc_check)
    if stats.signatures:
        print("distinct bad outcomes:")
        for sig, e in stats.signatures.items():
            print(f"  {e['count']:4d} x {sig}  (first: {e['first']})")
    if args.verbose:
        for k, v in stats.errors_by.most_common():
            print(f"  pypto error {k}: {v}")
        for k, v in stats.skips.most_common():
            print(f"  run skipped: {k}: {v}")
        print(f"  workers started: {stats.spawns}")
    print(stats.line(args.seed, stats.elapsed, stats.stopped))
    return 1 if stats.bad else 0


if __name__ == "__main__":
    sys.exit(main())
