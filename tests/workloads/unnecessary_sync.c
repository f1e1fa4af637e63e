/* SPDX-License-Identifier: MIT */
/*
 * unnecessary_sync: each iteration launches a kernel and then calls cuCtxSynchronize, although
 * the CPU reads nothing the GPU wrote until after the loop. The sync stops the CPU work of the
 * iteration from overlapping the kernel.
 *
 * Per iteration: kernel of kernel_us on the GPU, cpu_us of unrelated CPU work.
 *   plain:  iters * (kernel_us + cpu_us)
 *   fixed:  iters * max(kernel_us, cpu_us) + the last kernel  (one sync after the loop)
 *   saved:  about iters * min(kernel_us, cpu_us)
 */
#include "wl.h"

static long long kernel_us = 500, cpu_us = 1000, n = 65536;

static const struct wl_opt opts[] = {
	{ "kernel-us", &kernel_us, "GPU time of each iteration's kernel" },
	{ "cpu-us", &cpu_us, "CPU work of each iteration, independent of the GPU's data" },
	{ "n", &n, "32-bit words the kernel updates" },
	{},
};

WL_NOINLINE static void step(struct wl *w, CUdeviceptr buf, unsigned int i)
{
	wl_work(w, 0, buf, n, 3, i, kernel_us * 1000);
	if (!w->fixed)
		CK(cuCtxSynchronize()); /* FFM-PLANT: unnecessary_sync unnecessary-sync */
	wl_cpu_work(cpu_us * 1000);
}

int main(int argc, char **argv)
{
	struct wl w = { .iters = 400 };
	CUdeviceptr buf;
	uint64_t h;

	wl_init(&w, "unnecessary_sync", argc, argv, opts);
	CK(cuMemAlloc(&buf, n * 4 + 4));
	CK(cuMemsetD32(buf, 1, n));

	wl_loop_begin(&w);
	for (long long i = 0; i < w.iters; i++)
		step(&w, buf, (unsigned int)i);
	CK(cuCtxSynchronize());
	wl_loop_end(&w);

	h = wl_hash_device(WL_FNV_INIT, buf, n);
	CK(cuMemFree(buf));
	wl_finish(&w, h);
	return 0;
}
