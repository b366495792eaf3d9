"""A jitted kernel's .pto text, read back: parse it, compile the parsed
module, run it, and regenerate PTOFunctionBuilder code from it (what
`python -m pypto.pto parse` writes)."""

import os
import subprocess
import sys
import tempfile

import torch

import pypto
import pypto.pto as pto


@pypto.frontend.jit
def rms_norm(x: pypto.Tensor((64, 256), pypto.DT_FP32), w: pypto.Tensor((256,), pypto.DT_FP32)):
    pypto.set_vec_tile_shapes(16, 128)
    return pypto.rms_norm(x, w)


x, w = torch.randn(64, 256), torch.randn(256)
compiled = pypto.compile(rms_norm, x, w)
text = compiled.pto()
print(text)

# 1. Parse and print: the same text.
module = pto.parse(text)
assert module.to_pto() == text

# 2. Compile the parsed module and run it: outputs are parameters too.
program = pto.compile(module)
print("parameters:", program.parameters)
out = torch.empty(64, 256)
program(x, w, out)
torch.testing.assert_close(out, compiled(x, w))
torch.testing.assert_close(out, torch.nn.functional.rms_norm(x, (256,), w, 1e-6), atol=1e-5, rtol=1e-5)
print("parsed module: same results as the jitted kernel")

# 3. Builder code from the .pto file, run as a script: the same module again.
with tempfile.TemporaryDirectory() as d:
    path = os.path.join(d, "rms_norm.pto")
    with open(path, "w") as f:
        f.write(text)
    subprocess.run([sys.executable, "-m", "pypto.pto", "parse", path], check=True)
    rebuilt = subprocess.run([sys.executable, os.path.join(d, "rms_norm_builder.py")], check=True,
                             capture_output=True, text=True).stdout
    assert rebuilt.strip() == program.pto().strip(), "the builder code rebuilds another module"
    print("builder code rebuilds the same module")
    subprocess.run([sys.executable, "-m", "pypto.pto", "compile", path], check=True)
