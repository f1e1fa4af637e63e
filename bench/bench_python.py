# SPDX-License-Identifier: MIT
"""The call timer of bench/bench_python.sh: N calls of a cheap probed driver function through
ctypes, DEPTH Python frames below the module, timed with perf_counter_ns; prints
"ns_per_call <value>" (the best of ROUNDS rounds).

MODE "call": cuStreamWaitEvent on a completed event (a stage-2 event that never waits).
MODE "wait": cuCtxSynchronize on an idle context (enters the driver's wait function: a stage-1
wait event).

With FFM_BENCH_PROG_NS=1 (root, under `ffmctl profile`), it also prints
"bpf_ns_per_call <value>": the run time the kernel accounted to the BPF programs of its parent
(ffmctl) over the rounds, per call (BPF_ENABLE_STATS is held only while the rounds run). It is
the collector's own price, without the noise of the rest of the call."""
import ctypes
import os
import sys
import time

cu = ctypes.CDLL(os.environ.get("FFM_BENCH_LIBCUDA", "libcuda.so.1"))
args = (sys.argv[1:] + ["200000", "10", "5", "call"][len(sys.argv) - 1:])[:4]
n, depth, rounds = (int(a) for a in args[:3])
mode = args[3]
ctx, ev, dev = ctypes.c_void_p(), ctypes.c_void_p(), ctypes.c_int()
if mode not in ("call", "wait"):
    sys.exit("mode must be call or wait")


def loop(k):
    t = time.perf_counter_ns()
    if mode == "call":
        call = cu.cuStreamWaitEvent
        for _ in range(k):
            call(None, ev, 0)
    else:
        call = cu.cuCtxSynchronize
        for _ in range(k):
            call()
    return time.perf_counter_ns() - t


def nest(d, k):
    return nest(d - 1, k) if d > 1 else loop(k)


def enable_stats():
    """A descriptor holding BPF_ENABLE_STATS (run time), or None."""
    libc = ctypes.CDLL(None, use_errno=True)
    attr = (ctypes.c_uint32 * 32)()  # union bpf_attr, enable_stats.type = BPF_STATS_RUN_TIME
    fd = libc.syscall(321, 32, ctypes.byref(attr), ctypes.sizeof(attr))  # x86-64 bpf(2)
    return fd if fd >= 0 else None


def parent_bpf_ns():
    """Sum of run_time_ns over the BPF programs the parent holds."""
    total, d = 0, "/proc/%d/fd" % os.getppid()
    for fd in os.listdir(d):
        try:
            if os.readlink(os.path.join(d, fd)) != "anon_inode:bpf-prog":
                continue
            with open("/proc/%d/fdinfo/%s" % (os.getppid(), fd)) as f:
                for line in f:
                    if line.startswith("run_time_ns:"):
                        total += int(line.split()[1])
        except OSError:
            pass
    return total


if (cu.cuInit(0) or cu.cuDeviceGet(ctypes.byref(dev), 0) or
        cu.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev) or cu.cuCtxSetCurrent(ctx) or
        cu.cuEventCreate(ctypes.byref(ev), 0) or cu.cuEventRecord(ev, None) or
        cu.cuEventSynchronize(ev)):
    sys.exit("driver setup failed")
stats = enable_stats() if os.environ.get("FFM_BENCH_PROG_NS") == "1" else None
before = parent_bpf_ns() if stats is not None else 0
best = min(nest(depth, n) for _ in range(rounds))
if stats is not None:
    spent = parent_bpf_ns() - before
    os.close(stats)
print("ns_per_call %.1f" % (best / n))
if stats is not None:
    print("bpf_ns_per_call %.1f" % (spent / (n * rounds)))
