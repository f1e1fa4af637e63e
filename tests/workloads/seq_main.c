/* SPDX-License-Identifier: MIT */
/*
 * sequence: three problems in a row inside one loop iteration, in two functions of two files,
 * before the iteration's one required sync:
 *   1. compute() (this file): cuCtxSynchronize right after the main kernel, protecting nothing;
 *   2. seq_fetch_and_scratch() (seq_helpers.c): cuMemcpyDtoHAsync into pageable memory, which
 *      waits for the kernel and the copy although the result is read only after the required
 *      sync;
 *   3. seq_fetch_and_scratch(): cuMemAlloc/cuMemFree of a scratch buffer, the free waiting for
 *      the scratch kernel.
 * --fixed removes all three (no sync in compute(), pinned host buffer, scratch allocated once).
 *
 * Per iteration: main kernel kernel_us, cpu_us of CPU work, copy of n words (time T), scratch
 * kernel scratch_us, cpu2_us of CPU work, required sync, use of the copy.
 *   plain:  iters * (kernel_us + cpu_us + T + scratch_us + cpu2_us)
 *   fixed:  iters * max(kernel_us + T + scratch_us, cpu_us + cpu2_us)
 *   saved:  with the defaults about iters * (kernel_us + T + scratch_us)
 */
#include "seq.h"

#include <stdlib.h>

static long long kernel_us = 300, cpu_us = 400, scratch_us = 300, cpu2_us = 400, n = 65536,
		 scratch = 16384;

static const struct wl_opt opts[] = {
	{ "kernel-us", &kernel_us, "GPU time of each iteration's main kernel" },
	{ "cpu-us", &cpu_us, "CPU work after the main kernel's launch (seq_main.c)" },
	{ "scratch-us", &scratch_us, "GPU time of the scratch kernel (seq_helpers.c)" },
	{ "cpu2-us", &cpu2_us, "CPU work after the scratch kernel (seq_helpers.c)" },
	{ "n", &n, "32-bit words computed and copied back each iteration" },
	{ "scratch", &scratch, "32-bit words of the scratch buffer" },
	{},
};

WL_NOINLINE static void compute(struct wl *w, struct seq *s, unsigned int i)
{
	wl_work(w, 0, s->buf, s->n, 3, i, kernel_us * 1000);
	if (!w->fixed)
		CK(cuCtxSynchronize()); /* FFM-PLANT: sequence unnecessary-sync */
	wl_cpu_work(cpu_us * 1000);
}

WL_NOINLINE static uint64_t finish_iteration(struct seq *s, uint64_t acc)
{
	const uint32_t *host = s->host;

	CK(cuCtxSynchronize()); /* FFM-NOTE: sequence required-sync */
	for (long long j = 0; j < s->n; j++) acc = acc * 31 + host[j]; /* FFM-NOTE: sequence first-use */
	return acc;
}

int main(int argc, char **argv)
{
	struct wl w = { .iters = 500 };
	struct seq s = { 0 };
	uint64_t acc = 0;

	wl_init(&w, "sequence", argc, argv, opts);
	s.n = n;
	s.scratch = scratch;
	s.scratch_us = scratch_us;
	s.cpu2_us = cpu2_us;
	CK(cuMemAlloc(&s.buf, n * 4 + 4));
	CK(cuMemsetD32(s.buf, 1, n));
	if (w.fixed) {
		CK(cuMemAlloc(&s.tmp, scratch * 4 + 4));
		CK(cuMemAllocHost((void **)&s.host, n * 4 + 4));
	} else {
		s.host = wl_xmalloc(n * 4 + 4);
	}

	wl_loop_begin(&w);
	for (long long i = 0; i < w.iters; i++) {
		compute(&w, &s, (unsigned int)i);
		seq_fetch_and_scratch(&w, &s, (unsigned int)i);
		acc = finish_iteration(&s, acc);
	}
	wl_loop_end(&w);

	if (w.fixed) {
		CK(cuMemFreeHost(s.host));
		CK(cuMemFree(s.tmp));
	} else {
		free(s.host);
	}
	CK(cuMemFree(s.buf));
	wl_finish(&w, wl_fnv1a(WL_FNV_INIT, &acc, sizeof(acc)));
	return 0;
}
