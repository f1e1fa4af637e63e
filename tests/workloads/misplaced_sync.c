/* SPDX-License-Identifier: MIT */
/*
 * misplaced_sync: each iteration launches a kernel, copies its result into pinned host memory
 * (cuMemcpyDtoHAsync, truly asynchronous), synchronizes, and only then does CPU work that does
 * not need the result; the result is read after that work. The sync is required, but too early:
 * its first use comes cpu_us after it.
 *
 * Per iteration: kernel of kernel_us (+ a small copy of n words), cpu_us of unrelated CPU work.
 *   plain:  iters * (kernel_us + copy + cpu_us)
 *   fixed:  iters * max(kernel_us + copy, cpu_us)     (CPU work first, sync right before use)
 *   saved:  about iters * min(kernel_us + copy, cpu_us); ffm's first-use time is cpu_us
 */
#include "wl.h"

static long long kernel_us = 500, cpu_us = 1000, n = 4096;

static const struct wl_opt opts[] = {
	{ "kernel-us", &kernel_us, "GPU time of each iteration's kernel" },
	{ "cpu-us", &cpu_us, "CPU work between the sync and the use of the result" },
	{ "n", &n, "32-bit words computed and copied back each iteration" },
	{},
};

WL_NOINLINE static uint64_t step(struct wl *w, CUdeviceptr buf, uint32_t *host, unsigned int i,
				 uint64_t acc)
{
	wl_work(w, 0, buf, n, 3, i, kernel_us * 1000);
	CK(cuMemcpyDtoHAsync(host, buf, n * 4, 0));
	if (!w->fixed)
		CK(cuCtxSynchronize()); /* FFM-PLANT: misplaced_sync misplaced-sync */
	wl_cpu_work(cpu_us * 1000);
	if (w->fixed)
		CK(cuCtxSynchronize());
	for (long long j = 0; j < n; j++) acc = acc * 31 + host[j]; /* FFM-NOTE: misplaced_sync first-use */
	return acc;
}

int main(int argc, char **argv)
{
	struct wl w = { .iters = 400 };
	CUdeviceptr buf;
	uint32_t *host;
	uint64_t acc = 0;

	wl_init(&w, "misplaced_sync", argc, argv, opts);
	CK(cuMemAlloc(&buf, n * 4 + 4));
	CK(cuMemAllocHost((void **)&host, n * 4 + 4));
	CK(cuMemsetD32(buf, 1, n));

	wl_loop_begin(&w);
	for (long long i = 0; i < w.iters; i++)
		acc = step(&w, buf, host, (unsigned int)i, acc);
	wl_loop_end(&w);

	CK(cuMemFreeHost(host));
	CK(cuMemFree(buf));
	wl_finish(&w, wl_fnv1a(WL_FNV_INIT, &acc, sizeof(acc)));
	return 0;
}
