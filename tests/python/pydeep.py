#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Two paths to one read, 21 frames deep, that differ only in main()'s line.

Run by tests/python/test_python_sites.sh under `ffmctl profile`: each frame is fat (50 locals,
about 500 bytes), so the 21 frames of a call from main() span more than one 8 KiB block of the
BPF walk's reads of the thread's data stack, and main()'s line, which tells the two paths
apart, is read from a block of its own. The driver is pysites.py's (ctypes on libcuda).
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pysites import ITERS, N, Gpu, ck, cu  # noqa: E402


def deep(g, k):
    a0 = a1 = a2 = a3 = a4 = a5 = a6 = a7 = a8 = a9 = k
    b0 = b1 = b2 = b3 = b4 = b5 = b6 = b7 = b8 = b9 = k
    c0 = c1 = c2 = c3 = c4 = c5 = c6 = c7 = c8 = c9 = k
    d0 = d1 = d2 = d3 = d4 = d5 = d6 = d7 = d8 = d9 = k
    e0 = e1 = e2 = e3 = e4 = e5 = e6 = e7 = e8 = e9 = k
    if k:
        return deep(g, k - 1)
    g.launch(0)
    ck(cu.cuMemcpyDtoH_v2(g.host, g.buf, N * 4))  # SITE deep_read
    return g.host[0]


def main():
    g = Gpu()
    total = 0
    for i in range(ITERS):
        total += deep(g, 20)
        total += deep(g, 20)  # a second path to deep_read
    print("PYDEEP done", total)


if __name__ == "__main__":
    main()
