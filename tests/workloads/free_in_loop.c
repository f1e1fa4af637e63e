/* SPDX-License-Identifier: MIT */
/*
 * free_in_loop: each iteration allocates a scratch buffer, uses it in a kernel and frees it.
 * cuMemFree synchronizes implicitly (it waits for all work on the device), so the CPU work after
 * it cannot overlap the iteration's kernel, although nothing the GPU wrote is read in the loop.
 *
 * Per iteration: main kernel of kernel_us on buf, a scratch kernel on tmp, cpu_us of CPU work.
 *   plain:  iters * (kernel_us + cpu_us + alloc/free cost)
 *   fixed:  iters * max(kernel_us, cpu_us)     (tmp allocated once before the loop)
 *   saved:  about iters * min(kernel_us, cpu_us)
 */
#include "wl.h"

static long long kernel_us = 500, cpu_us = 1000, n = 65536, scratch = 16384;

static const struct wl_opt opts[] = {
	{ "kernel-us", &kernel_us, "GPU time of each iteration's main kernel" },
	{ "cpu-us", &cpu_us, "CPU work of each iteration, independent of the GPU's data" },
	{ "n", &n, "32-bit words the main kernel updates" },
	{ "scratch", &scratch, "32-bit words of the per-iteration scratch buffer" },
	{},
};

WL_NOINLINE static void step(struct wl *w, CUdeviceptr buf, CUdeviceptr tmp, unsigned int i)
{
	if (!w->fixed)
		CK(cuMemAlloc(&tmp, scratch * 4 + 4)); /* FFM-PLANT: free_in_loop temp-buffer */
	wl_work(w, 0, buf, n, 3, i, kernel_us * 1000);
	wl_work(w, 0, tmp, scratch, 0, i, 0);
	if (!w->fixed)
		CK(cuMemFree(tmp)); /* FFM-PLANT: free_in_loop free-sync */
	wl_cpu_work(cpu_us * 1000);
}

int main(int argc, char **argv)
{
	struct wl w = { .iters = 400 };
	CUdeviceptr buf, tmp = 0;
	uint64_t h;

	wl_init(&w, "free_in_loop", argc, argv, opts);
	CK(cuMemAlloc(&buf, n * 4 + 4));
	CK(cuMemsetD32(buf, 1, n));
	if (w.fixed)
		CK(cuMemAlloc(&tmp, scratch * 4 + 4));

	wl_loop_begin(&w);
	for (long long i = 0; i < w.iters; i++)
		step(&w, buf, tmp, (unsigned int)i);
	CK(cuCtxSynchronize());
	wl_loop_end(&w);

	h = wl_hash_device(WL_FNV_INIT, buf, n);
	if (w.fixed)
		CK(cuMemFree(tmp));
	CK(cuMemFree(buf));
	wl_finish(&w, h);
	return 0;
}
