"""torch is optional: with it unimportable, the NumPy path works."""

import os
import subprocess
import sys
import textwrap


def test_numpy_path_without_torch():
    script = textwrap.dedent("""
        import sys
        sys.modules["torch"] = None  # any 'import torch' now fails
        import numpy as np
        import pypto

        @pypto.frontend.jit
        def softmax(x: pypto.Tensor((10, 70), pypto.DT_FP32)) -> pypto.Tensor((10, 70), pypto.DT_FP32):
            pypto.set_vec_tile_shapes(8, 32)
            m = pypto.amax(x, -1, True)
            e = pypto.exp(pypto.sub(x, m))
            return pypto.div(e, pypto.sum(e, -1, True))

        x = np.random.default_rng(0).standard_normal((10, 70)).astype(np.float32)
        y = softmax(x)
        ref = np.exp(x - x.max(-1, keepdims=True))
        ref /= ref.sum(-1, keepdims=True)
        assert isinstance(y, np.ndarray)
        np.testing.assert_allclose(y, ref, atol=1e-5, rtol=0)
        print("ok")
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300, env=dict(os.environ))
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"
