"""Postponed annotations (this module uses ``from __future__ import annotations``) are evaluated
where the jitted function is defined, so shapes and dtypes are still checked; an annotation that
cannot be evaluated is a clear error, not a silently unannotated parameter."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import pypto

ROWS, COLS = 6, 40


@pypto.frontend.jit
def doubled(x: pypto.Tensor((ROWS, COLS), pypto.DT_FP32)) -> pypto.Tensor((ROWS, COLS), pypto.DT_FP32):
    pypto.set_vec_tile_shapes(8, 64)
    return x + x


def test_postponed_annotations_are_checked():
    x = torch.randn(ROWS, COLS)
    torch.testing.assert_close(doubled(x), x + x)
    with pytest.raises(pypto.UserError, match=r"expects shape \(6, 40\)"):
        doubled(torch.randn(ROWS, COLS + 1))
    with pytest.raises(pypto.UserTypeError, match="expects dtype"):
        doubled(np.zeros((ROWS, COLS), np.float64))


def test_unevaluable_annotation_is_an_error_at_decoration():
    def make():
        local_rows = 4

        def f(x: pypto.Tensor((local_rows, 4), pypto.DT_FP32)):
            return x

        return f

    with pytest.raises(pypto.UserError, match=r"cannot evaluate the annotation .* of parameter 'x'.*module globals"):
        pypto.frontend.jit(make())
