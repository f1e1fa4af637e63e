# SPDX-License-Identifier: MIT
"""The call timer of bench/bench_python.sh: N calls of a cheap probed driver function
(cuStreamWaitEvent on a completed event: a stage-2 event that never waits) through ctypes, DEPTH Python frames below the module, timed with perf_counter_ns; prints
"ns_per_call <value>" (the best of ROUNDS rounds)."""
import ctypes
import os
import sys
import time

cu = ctypes.CDLL(os.environ.get("FFM_BENCH_LIBCUDA", "libcuda.so.1"))
n, depth, rounds = (int(a) for a in (sys.argv[1:] + ["200000", "10", "5"])[:3])
ctx, ev, dev = ctypes.c_void_p(), ctypes.c_void_p(), ctypes.c_int()
call = cu.cuStreamWaitEvent


def loop(k):
    t = time.perf_counter_ns()
    for _ in range(k):
        call(None, ev, 0)
    return time.perf_counter_ns() - t


def nest(d, k):
    return nest(d - 1, k) if d > 1 else loop(k)


if (cu.cuInit(0) or cu.cuDeviceGet(ctypes.byref(dev), 0) or
        cu.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev) or cu.cuCtxSetCurrent(ctx) or
        cu.cuEventCreate(ctypes.byref(ev), 0) or cu.cuEventRecord(ev, None) or
        cu.cuEventSynchronize(ev)):
    sys.exit("driver setup failed")
best = min(nest(depth, n) for _ in range(rounds))
print("ns_per_call %.1f" % (best / n))
