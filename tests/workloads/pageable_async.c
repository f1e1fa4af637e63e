/* SPDX-License-Identifier: MIT */
/*
 * pageable_async: each iteration copies a kernel's result back with cuMemcpyDtoHAsync into
 * memory from malloc. The driver cannot DMA asynchronously into pageable memory, so the "async"
 * copy waits for the kernel and the copy before it returns: the CPU work that follows, meant to
 * overlap them, runs after them. The result is read after the one explicit sync.
 *
 * Per iteration: kernel of kernel_us, DtoH copy of n words (time T), cpu_us of CPU work.
 *   plain:  iters * (kernel_us + T + cpu_us)
 *   fixed:  iters * max(kernel_us + T, cpu_us)   (destination from cuMemAllocHost: pinned)
 *   saved:  about iters * min(kernel_us + T, cpu_us)
 */
#include "wl.h"

#include <stdlib.h>

static long long kernel_us = 500, cpu_us = 1000, n = 65536;

static const struct wl_opt opts[] = {
	{ "kernel-us", &kernel_us, "GPU time of each iteration's kernel" },
	{ "cpu-us", &cpu_us, "CPU work meant to overlap the kernel and the copy" },
	{ "n", &n, "32-bit words computed and copied back each iteration" },
	{},
};

WL_NOINLINE static uint64_t step(struct wl *w, CUdeviceptr buf, uint32_t *host, unsigned int i,
				 uint64_t acc)
{
	wl_work(w, 0, buf, n, 3, i, kernel_us * 1000);
	CK(cuMemcpyDtoHAsync(host, buf, n * 4, 0)); /* FFM-PLANT: pageable_async pageable-copy */
	wl_cpu_work(cpu_us * 1000);
	CK(cuCtxSynchronize()); /* FFM-NOTE: pageable_async required-sync */
	for (long long j = 0; j < n; j++) acc = acc * 31 + host[j]; /* FFM-NOTE: pageable_async first-use */
	return acc;
}

int main(int argc, char **argv)
{
	struct wl w = { .iters = 400 };
	CUdeviceptr buf;
	uint32_t *host;
	uint64_t acc = 0;

	wl_init(&w, "pageable_async", argc, argv, opts);
	if (w.fixed)
		CK(cuMemAllocHost((void **)&host, n * 4 + 4));
	else
		host = wl_xmalloc(n * 4 + 4);
	CK(cuMemAlloc(&buf, n * 4 + 4));
	CK(cuMemsetD32(buf, 1, n));

	wl_loop_begin(&w);
	for (long long i = 0; i < w.iters; i++)
		acc = step(&w, buf, host, (unsigned int)i, acc);
	wl_loop_end(&w);

	CK(cuMemFree(buf));
	if (w.fixed)
		CK(cuMemFreeHost(host));
	else
		free(host);
	wl_finish(&w, wl_fnv1a(WL_FNV_INIT, &acc, sizeof(acc)));
	return 0;
}
