# SPDX-License-Identifier: MIT
"""A stack flood (tests/daemon/test_sec_flood.sh): a Python program that compiles function
after function, each with a name of PYFLOOD_NAME characters in a "file" of as long a name, and
waits for the simulated driver once from each: every call is a new call stack (its Python
frame is new: each function is kept, so that no code object takes a freed one's address), with
long strings in its frames. It makes at most PYFLOOD_MAX functions, then calls them over again,
for PYFLOOD_SECS seconds in all, and prints how many functions it made.
"""
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "../python"))
from pysites import Gpu, ck, cu  # noqa: E402

SECS = float(os.environ.get("PYFLOOD_SECS", "8"))
NAME = int(os.environ.get("PYFLOOD_NAME", "4000"))
MAX = int(os.environ.get("PYFLOOD_MAX", "20000"))


def make(i):
    name = "f%d_" % i
    name += "x" * (NAME - len(name))
    src = "def %s(g, i):\n    g.launch(i, 1000)\n    ck(cu.cuCtxSynchronize())\n" % name
    ns = {"ck": ck, "cu": cu}
    exec(compile(src, "/flood/%s_%d.py" % ("d" * NAME, i), "exec"), ns)
    return ns[name]


def main():
    g = Gpu()
    g.launch(0, 1000)
    ck(cu.cuCtxSynchronize())
    time.sleep(0.5)  # ffm finds the interpreter
    t0, funcs, i = time.time(), [], 0
    while time.time() - t0 < SECS:
        if len(funcs) < MAX:
            funcs.append(make(len(funcs)))
            funcs[-1](g, i)
        else:
            funcs[i % MAX](g, i)
        i += 1
    print("PYFLOOD", len(funcs), flush=True)


if __name__ == "__main__":
    main()
