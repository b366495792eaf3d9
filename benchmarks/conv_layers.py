"""pypto.conv against torch's F.conv2d on ResNet's 3x3 layers (stride 1, padding 1, channels in =
out), timed call by call in alternation (medians), after a check against a float64 reference.

    python benchmarks/conv_layers.py [--rounds 15]

Like benchmarks/run.py it sets OMP_WAIT_POLICY=PASSIVE unless it is set: torch's spinning OpenMP
threads otherwise take the cores pypto's tasks run on next.
"""

import argparse
import os
import statistics
import time

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import torch  # noqa: E402 - after the OpenMP setting
import torch.nn.functional as F  # noqa: E402

from run import pypto_conv  # noqa: E402 - the benchmark rows' conv kernel

LAYERS = [(1, 64, 56), (1, 128, 28), (1, 256, 14), (1, 512, 7), (8, 64, 56)]  # (batch, channels, size)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args()
    print(f"OMP_WAIT_POLICY={os.environ['OMP_WAIT_POLICY']}, torch {torch.__version__}, "
          f"{torch.get_num_threads()} threads")
    for n, c, hw in LAYERS:
        g = torch.Generator().manual_seed(c)
        x = torch.randn(n, c, hw, hw, generator=g)
        w = torch.randn(c, c, 3, 3, generator=g) / (9 * c) ** 0.5
        fns = {"pypto": pypto_conv(n, c, hw), "F.conv2d": lambda a, b: F.conv2d(a, b, padding=1)}
        ref = F.conv2d(x.double(), w.double(), padding=1)
        for name, fn in fns.items():
            torch.testing.assert_close(fn(x, w).double(), ref, rtol=1e-4, atol=1e-4, msg=name)
        times = {name: [] for name in fns}
        for _ in range(args.rounds):
            for name, fn in fns.items():
                t = time.perf_counter()
                fn(x, w)
                times[name].append(time.perf_counter() - t)
        ms = {name: statistics.median(v) * 1e3 for name, v in times.items()}
        print(f"{n} x {c} x {hw} x {hw}: pypto {ms['pypto']:.2f} ms, F.conv2d {ms['F.conv2d']:.2f} ms, "
              f"F.conv2d / pypto {ms['F.conv2d'] / ms['pypto']:.2f}x")


if __name__ == "__main__":
    main()
