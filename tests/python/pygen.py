#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Code objects that die before ffm decodes their frames (tests/python/test_python_sites.sh).

Makes FUNCS functions at run time (compile() of a generated module each: module i is
"gen/mod_<i>.py" beside this file, not on disk, its function at line i + 1) and calls the
simulated driver once from each, in a burst of a few milliseconds. Then it drops them all
(their code objects are freed) and makes as many decoys of the same sizes ("gen/decoy_<i>.py",
never called), which mostly take the freed memory, before it pauses and exits. ffm unwinds the
burst's stacks while this happens: every read must still be named at its own module's line,
never a decoy's. (A first read and a pause before the burst let ffm find the interpreter.)
"""
import gc
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pysites import N, Gpu, ck, cu  # noqa: E402

FUNCS = int(os.environ.get("PYGEN_FUNCS", "40"))
HERE = os.path.dirname(os.path.abspath(__file__))


def make(kind, i):
    src = "\n" * i + "def read_%d(g):\n    ck(cu.cuMemcpyDtoH_v2(g.host, g.buf, N * 4))\n" % i
    ns = {"ck": ck, "cu": cu, "N": N}
    exec(compile(src, os.path.join(HERE, "gen", "%s_%d.py" % (kind, i)), "exec"), ns)
    return ns["read_%d" % i]


def main():
    g = Gpu()
    ck(cu.cuMemcpyDtoH_v2(g.host, g.buf, N * 4))
    time.sleep(0.5)
    funcs = [make("mod", i) for i in range(FUNCS)]
    for f in funcs:
        f(g)
    del funcs, f
    gc.collect()
    decoys = [make("decoy", i) for i in range(FUNCS)]
    time.sleep(0.2)
    print("PYGEN done", FUNCS, len(decoys))


if __name__ == "__main__":
    main()
