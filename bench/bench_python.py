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
the collector's own price, without the noise of the rest of the call.

With FFM_BENCH_AB=1 as well (root, under `ffmctl profile` with the walk on), it measures the
walk inside this one process: it finds the collector's pyprocs map (the Python processes whose
frames the probes walk) by its name and this process's entry in it, then runs 2 x ROUNDS
rounds with the entry in and out alternately (ABBA), and prints
"ab_walk_bpf_ns <median over the pairs of the BPF time per call with the walk less without>"
and "ab_walk_ns <the same of the whole call>". Separate processes differ by more than the walk
costs on a shared VM; two rounds a few milliseconds apart in one process do not."""
import struct
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


BPF_MAP_LOOKUP_ELEM, BPF_MAP_UPDATE_ELEM, BPF_MAP_DELETE_ELEM = 1, 2, 3
BPF_MAP_GET_NEXT_ID, BPF_MAP_GET_FD_BY_ID, BPF_OBJ_GET_INFO_BY_FD = 12, 14, 15


def bpf(cmd, attr):
    libc = ctypes.CDLL(None, use_errno=True)
    return libc.syscall(321, cmd, ctypes.byref(attr), ctypes.sizeof(attr))  # x86-64 bpf(2)


def own_pyprocs_entry():
    """(map fd, key, value) of this process in a map named pyprocs, or None."""
    key = ctypes.c_uint32(os.getpid())
    mid = 0
    while True:
        attr = (ctypes.c_uint8 * 16)()
        struct.pack_into("I", attr, 0, mid)
        if bpf(BPF_MAP_GET_NEXT_ID, attr) < 0:
            return None
        mid = struct.unpack_from("I", attr, 4)[0]
        attr = (ctypes.c_uint8 * 16)()
        struct.pack_into("I", attr, 0, mid)
        fd = bpf(BPF_MAP_GET_FD_BY_ID, attr)
        if fd < 0:
            continue
        info = (ctypes.c_uint8 * 256)()
        attr = (ctypes.c_uint8 * 16)()
        struct.pack_into("IIQ", attr, 0, fd, ctypes.sizeof(info), ctypes.addressof(info))
        if bpf(BPF_OBJ_GET_INFO_BY_FD, attr) == 0:
            ksz, vsz = struct.unpack_from("II", info, 8)
            name = bytes(info[24:40]).split(b"\0")[0]
            if name == b"pyprocs" and ksz == 4:
                value = (ctypes.c_uint8 * vsz)()
                if map_op(BPF_MAP_LOOKUP_ELEM, fd, key, value) == 0:
                    return fd, key, value
        os.close(fd)


def map_op(cmd, fd, key, value=None):
    attr = (ctypes.c_uint8 * 32)()
    struct.pack_into("IIQQQ", attr, 0, fd, 0, ctypes.addressof(key),
                     ctypes.addressof(value) if value is not None else 0, 0)
    return bpf(cmd, attr)


def ab_walk(n, depth, rounds):
    """The walk's price inside this process: entry in (A) and out (B), ABBA pairs."""
    ent = own_pyprocs_entry()
    if ent is None:
        sys.exit("FFM_BENCH_AB: no pyprocs entry for this process (walk off, or not root)")
    fd, key, value = ent
    d_bpf, d_ns = [], []
    for r in range(rounds):
        res = {}
        for on in ((True, False) if r % 2 == 0 else (False, True)):
            if on:
                map_op(BPF_MAP_UPDATE_ELEM, fd, key, value)
            else:
                map_op(BPF_MAP_DELETE_ELEM, fd, key)
            b0 = parent_bpf_ns()
            t = nest(depth, n)
            res[on] = (t, parent_bpf_ns() - b0)
        d_ns.append((res[True][0] - res[False][0]) / n)
        d_bpf.append((res[True][1] - res[False][1]) / n)
    map_op(BPF_MAP_UPDATE_ELEM, fd, key, value)
    os.close(fd)
    d_bpf.sort()
    d_ns.sort()
    print("ab_walk_bpf_ns %.1f" % d_bpf[len(d_bpf) // 2])
    print("ab_walk_ns %.1f" % d_ns[len(d_ns) // 2])
    print("ab_walk_bpf_pairs %s" % " ".join("%.0f" % v for v in d_bpf))


if (cu.cuInit(0) or cu.cuDeviceGet(ctypes.byref(dev), 0) or
        cu.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev) or cu.cuCtxSetCurrent(ctx) or
        cu.cuEventCreate(ctypes.byref(ev), 0) or cu.cuEventRecord(ev, None) or
        cu.cuEventSynchronize(ev)):
    sys.exit("driver setup failed")
stats = enable_stats() if os.environ.get("FFM_BENCH_PROG_NS") == "1" else None
before = parent_bpf_ns() if stats is not None else 0
best = min(nest(depth, n) for _ in range(rounds))
if stats is not None and os.environ.get("FFM_BENCH_AB") == "1":
    mid = parent_bpf_ns()
    ab_walk(n, depth, 2 * rounds)
    before += parent_bpf_ns() - mid  # the A/B rounds stay out of bpf_ns_per_call
if stats is not None:
    spent = parent_bpf_ns() - before
    os.close(stats)
print("ns_per_call %.1f" % (best / n))
if stats is not None:
    print("bpf_ns_per_call %.1f" % (spent / (n * rounds)))
