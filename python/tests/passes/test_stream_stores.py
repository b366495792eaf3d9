"""Streaming stores (pass stream_stores, csrc/passes/stream_stores.cc; the kernel calls
pto::tstore_stream, or pto::store_strip<true> when the store is part of a fused run): returned
tensors from sixteen times a core's L2 on (16 MiB with 1 MiB L2s; the tests size them by this CPU's) are written with non-temporal stores where
rows are aligned, and the results are those of plain stores. The decision is the `stream`
attribute of the tstore in the .pto text."""

import re

import pytest
import torch

import pypto
from conftest import streaming_rows

L2_BYTES = pypto._C.cpu_target_info("native")["l2_bytes"]
BIG = streaming_rows(2048)  # rows of 2048 floats at the streaming threshold


def scaled_softmax(m, n, tile):
    @pypto.frontend.jit
    def f(x: pypto.Tensor((m, n), pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(*tile)
        e = pypto.exp(pypto.sub(x, pypto.amax(x, -1, True)))
        return pypto.div(e, pypto.sum(e, -1, True)) * 3.0
    return f


@pytest.mark.parametrize("m,n,tile", [(BIG, 2048, (4, 2048)),      # aligned rows: streamed
                                      (BIG - 1, 2056, (8, 2056)),  # rows alternate between aligned and not
                                      (BIG, 2048, (4, 512))])      # tiles narrower than a row
def test_large_outputs_stream_and_match_torch(m, n, tile):
    x = torch.randn(m, n)
    f = scaled_softmax(m, n, tile)
    src = pypto.compile(f, x).source()
    assert "pto::tstore_stream<" in src or "pto::store_strip<true" in src
    torch.testing.assert_close(f(x), torch.softmax(x, -1) * 3.0, atol=1e-6, rtol=1e-5)


def test_small_outputs_use_plain_stores():
    x = torch.randn(64, 256)
    src = pypto.compile(scaled_softmax(64, 256, (16, 256)), x).source()
    assert "pto::tstore_stream<" not in src and "pto::store_strip<true" not in src
    assert "pto::tstore<" in src or "pto::store_strip<false" in src


def test_the_decision_is_the_stream_attribute_and_a_note_of_the_pass():
    x = torch.randn(BIG, 2048)
    compiled = pypto.compile(scaled_softmax(BIG, 2048, (4, 2048)), x)
    assert re.search(r"^ *tstore %\w+, %\w+\[[^\]]*\][^\n]* stream$", compiled.pto(), re.M)
    assert re.search(rf"note: @\w+: stores into %\w+ stream \({BIG * 2048 * 4} bytes >= {16 * L2_BYTES}\)",
                     compiled.dump("passes"))
    small = pypto.compile(scaled_softmax(64, 256, (16, 256)), torch.randn(64, 256))
    assert " stream\n" not in small.pto()
