# SPDX-License-Identifier: MIT
"""Python call sites on the simulated driver (tests/python/test_python_sites.sh).

Calls libcuda through ctypes from a plain function, a nested function, a method, a generator,
a lambda, a decorated function, a thread and child processes (multiprocessing, fork and
spawn). Each planted call is on a line of its own, marked "# SITE <name>"; the test finds the
lines by those marks, so the file may be edited freely. Verdicts:
  needless: a kernel, then cuCtxSynchronize, and nothing of the GPU's data read after it
  used:     a kernel, then a DtoH copy whose bytes are read at once
"""
import ctypes
import multiprocessing
import os
import sys
import threading

ITERS = int(os.environ.get("PYSITES_ITERS", "30"))
KERNEL_NS = 200000
N = 1024

cu = ctypes.CDLL("libcuda.so.1")


def ck(r):
    if r != 0:
        raise RuntimeError("CUDA error %d" % r)


class Gpu:
    def __init__(self):
        ck(cu.cuInit(0))
        dev = ctypes.c_int()
        ck(cu.cuDeviceGet(ctypes.byref(dev), 0))
        self.ctx = ctypes.c_void_p()
        ck(cu.cuDevicePrimaryCtxRetain(ctypes.byref(self.ctx), dev))
        ck(cu.cuCtxSetCurrent(self.ctx))
        here = os.path.dirname(os.path.abspath(__file__))
        ptx = open(os.environ.get("PYSITES_PTX", os.path.join(here, "../workloads/kernels.ptx")), "rb").read() + b"\0"
        self.mod = ctypes.c_void_p()
        ck(cu.cuModuleLoadData(ctypes.byref(self.mod), ptx))
        self.fn = ctypes.c_void_p()
        ck(cu.cuModuleGetFunction(ctypes.byref(self.fn), self.mod, b"ffm_work"))
        self.buf = ctypes.c_uint64()
        ck(cu.cuMemAlloc_v2(ctypes.byref(self.buf), N * 4))
        self.host = (ctypes.c_uint32 * N)()

    def launch(self, i, kernel_ns=KERNEL_NS):
        buf, n = ctypes.c_uint64(self.buf.value), ctypes.c_uint64(N)
        mul, add, ns = ctypes.c_uint32(3), ctypes.c_uint32(i), ctypes.c_uint64(kernel_ns)
        args = (ctypes.c_void_p * 5)(*[ctypes.cast(ctypes.byref(a), ctypes.c_void_p)
                                       for a in (buf, n, mul, add, ns)])
        ck(cu.cuLaunchKernel(self.fn, 4, 1, 1, 256, 1, 1, 0, None, args, None))

    def method_read(self, i):
        self.launch(i)
        ck(cu.cuMemcpyDtoH_v2(self.host, self.buf, N * 4))  # SITE method_read
        return self.host[0] + self.host[N - 1]


def plain_needless(g, i):
    g.launch(i)
    ck(cu.cuCtxSynchronize())  # SITE plain_needless


def outer(g, i):
    def inner():
        g.launch(i)
        ck(cu.cuCtxSynchronize())  # SITE nested_needless
    inner()


def gen_reads(g, n):
    for i in range(n):
        g.launch(i)
        ck(cu.cuMemcpyDtoH_v2(g.host, g.buf, N * 4))  # SITE generator_read
        yield g.host[1]


def traced(f):
    def wrapper(*a):
        return f(*a)
    return wrapper


@traced
def decorated_needless(g, i):
    g.launch(i)
    ck(cu.cuCtxSynchronize())  # SITE decorated_needless


lambda_needless = lambda g: ck(cu.cuCtxSynchronize())  # SITE lambda_needless


def thread_body(g):
    ck(cu.cuCtxSetCurrent(g.ctx))
    for i in range(ITERS):
        g.launch(i)
        ck(cu.cuCtxSynchronize())  # SITE thread_needless


def child(mode):
    g = Gpu()
    total = 0
    for i in range(ITERS):
        g.launch(i)
        ck(cu.cuMemcpyDtoH_v2(g.host, g.buf, N * 4))  # SITE child_read
        total += g.host[0] + g.host[N - 1]
    sys.exit(0 if total >= 0 else 1)


def run_child(mode, modes):
    if mode in modes or "all" in modes:
        p = multiprocessing.get_context(mode).Process(target=child, args=(mode,))
        p.start()
        p.join()
        if p.exitcode:
            sys.exit(p.exitcode)


def main():
    modes = sys.argv[1:] or ["all"]
    run_child("fork", modes)
    g = Gpu()
    total = 0
    for i in range(ITERS):
        plain_needless(g, i)
        outer(g, i)
        total += g.method_read(i)
        decorated_needless(g, i)
        g.launch(i)
        lambda_needless(g)
    total += sum(gen_reads(g, ITERS))
    t = threading.Thread(target=thread_body, args=(g,))
    t.start()
    t.join()
    run_child("spawn", modes)
    print("PYSITES done", total)


if __name__ == "__main__":
    main()
