# SPDX-License-Identifier: MIT
"""A loop that reads a scalar through a library every iteration, only to log it
(tests/python/test_python_read.sh): the pattern of `loss.item()` in a training loop.

Each iteration launches a kernel, does the program's own CPU work, then reads a scalar through
ffmreadlib (tests/python/site-packages), whose own CPU work around its driver calls (--lib-us)
no driver probe sees. --every N reads every N iterations instead: the fix. The CPU is the
bottleneck (the kernel is shorter than the CPU work), so the fix saves the reads' whole time.
Prints WALL_S, the loop's time.
"""
import argparse
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "site-packages"))
import ffmreadlib  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--iters", type=int, default=500)
    ap.add_argument("--every", type=int, default=1)
    ap.add_argument("--cpu-us", type=float, default=200)
    ap.add_argument("--lib-us", type=float, default=300)
    ap.add_argument("--kernel-us", type=float, default=100)
    a = ap.parse_args()
    g = ffmreadlib.Device(a.lib_us)
    total = 0.0
    t0 = time.monotonic()
    for i in range(a.iters):
        g.launch(i, int(a.kernel_us * 1000))
        ffmreadlib.busy(a.cpu_us)
        if (i + 1) % a.every == 0:
            total += g.read_scalar()  # SITE read
    wall = time.monotonic() - t0
    print("TOTAL %.0f" % total)
    print("WALL_S %.6f" % wall)


if __name__ == "__main__":
    main()
