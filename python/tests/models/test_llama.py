"""The tile-level LLaMA layer (models/llama): task counts of the seed's table
for 1K-16K tokens with and without adaptive tiles, and real kernels matching
torch (issue 6, point 4)."""

import os
import sys

import numpy as np
import pytest
import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "..", "models", "llama"))
import layer as L  # noqa: E402

HIDDEN, FFN = 64, 128
TABLE = {1024: (1024, 3584), 2048: (3584, 13312), 4096: (13312, 51200), 8192: (51200, 200704),
         16384: (200704, 794624)}


@pytest.fixture(scope="module")
def layers():
    return {True: L.LlamaLayer(HIDDEN, FFN, adaptive=True), False: L.LlamaLayer(HIDDEN, FFN, adaptive=False)}


@pytest.mark.parametrize("seq", sorted(TABLE))
def test_task_counts_follow_the_seed_table(layers, seq):
    with_adaptive, without = TABLE[seq]
    assert layers[True].program.count_tasks(**layers[True].shapes_only(seq)) == with_adaptive
    assert layers[False].program.count_tasks(**layers[False].shapes_only(seq)) == without
    assert L.expected_tasks(seq) == with_adaptive and L.expected_tasks(seq, adaptive=False) == without


@pytest.mark.parametrize("adaptive", [True, False])
def test_layer_with_real_kernels_matches_torch(layers, adaptive):
    seq = 1024
    x = np.random.default_rng(3).standard_normal((seq, HIDDEN)).astype(np.float32)
    out = layers[adaptive](x)
    cos, sin = L.rope_tables(seq, HIDDEN)
    torch.testing.assert_close(torch.from_numpy(out), L.reference(x, layers[adaptive].w, cos, sin), atol=2e-3,
                               rtol=2e-3)
    assert layers[adaptive].program.stats()["tasks"] == TABLE[seq][0 if adaptive else 1]


def test_adaptive_tiles_use_the_64_row_kernels(layers):
    text = layers[True].program.dump("execution")
    assert "CALL @attn_score_64" in text and "CALL @rmsnorm_64" in text
    assert "max_range=4096 min_range=16" in layers[True].program.pto()


def test_a_long_orchestration_is_built_as_out_of_line_parts(layers):
    # The adaptive layer submits from 460 call sites: each top-level statement becomes a lambda of
    # its own, and the orchestration is built at -O1 (one -O3 function took GCC minutes). The
    # 32-row layer's 19 call sites stay in one function. Both run right (tests above).
    long, short = layers[True].program.source(), layers[False].program.source()
    assert 'extern "C" __attribute__((optimize("O1"))) int32_t pypto_orchestrate(' in long
    assert long.count("auto part = [&]() __attribute__((noinline))") >= 8
    assert "if (int32_t status = part()) return status;" in long
    assert 'extern "C" __attribute__((optimize("O1"))) int32_t pypto_orchestrate(' in short
    assert "auto part = " not in short
