/* SPDX-License-Identifier: MIT */
/*
 * managed_memset: each iteration resets a managed-memory buffer with cuMemsetD32 after launching
 * the main kernel. The synchronous memset functions are fully synchronous when the target is
 * managed (unified) memory (CUDA "API synchronization behavior"), so the memset waits for the
 * main kernel, and the CPU work after it cannot overlap the kernel. The CPU reads the managed
 * buffer only after the loop.
 *
 * Fix: reset the buffer with a kernel (ffm_work with mul = 0, add = value), which is queued on
 * the stream like any launch and never waits on the host, whatever the memory kind. That keeps
 * the buffer managed (the CPU still reads it directly at the end). cuMemsetD32Async would also do
 * on the real driver, but a launch is asynchronous by definition, while an Async memset to
 * managed memory is what drivers have treated specially (README.md has the measurement).
 *
 * Per iteration: main kernel of kernel_us on device memory, reset of m managed words, a small
 * kernel that uses them, cpu_us of CPU work.
 *   plain:  iters * (kernel_us + cpu_us)
 *   fixed:  iters * max(kernel_us, cpu_us)
 *   saved:  about iters * min(kernel_us, cpu_us)
 */
#include "wl.h"

static long long kernel_us = 500, cpu_us = 1000, n = 65536, m = 16384;

static const struct wl_opt opts[] = {
	{ "kernel-us", &kernel_us, "GPU time of each iteration's main kernel" },
	{ "cpu-us", &cpu_us, "CPU work of each iteration, independent of the GPU's data" },
	{ "n", &n, "32-bit words the main kernel updates (device memory)" },
	{ "m", &m, "32-bit words of the managed buffer reset each iteration" },
	{},
};

WL_NOINLINE static void step(struct wl *w, CUdeviceptr buf, CUdeviceptr managed, unsigned int i)
{
	wl_work(w, 0, buf, n, 3, i, kernel_us * 1000);
	if (!w->fixed)
		CK(cuMemsetD32(managed, i, m)); /* FFM-PLANT: managed_memset managed-memset */
	else
		wl_work(w, 0, managed, m, 0, i, 0);
	wl_work(w, 0, managed, m, 5, 1, 0);
	wl_cpu_work(cpu_us * 1000);
}

int main(int argc, char **argv)
{
	struct wl w = { .iters = 400 };
	CUdeviceptr buf, managed;
	uint64_t h;

	wl_init(&w, "managed_memset", argc, argv, opts);
	CK(cuMemAlloc(&buf, n * 4 + 4));
	CK(cuMemsetD32(buf, 1, n));
	CK(cuMemAllocManaged(&managed, m * 4 + 4, CU_MEM_ATTACH_GLOBAL));

	wl_loop_begin(&w);
	for (long long i = 0; i < w.iters; i++)
		step(&w, buf, managed, (unsigned int)i);
	CK(cuCtxSynchronize());
	wl_loop_end(&w);

	/* Managed memory: the CPU reads the GPU's result in place, no copy. */
	h = wl_fnv1a(WL_FNV_INIT, (const void *)(uintptr_t)managed, m * 4);
	h = wl_hash_device(h, buf, n);
	CK(cuMemFree(managed));
	CK(cuMemFree(buf));
	wl_finish(&w, h);
	return 0;
}
