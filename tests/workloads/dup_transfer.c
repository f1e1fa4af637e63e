/* SPDX-License-Identifier: MIT */
/*
 * dup_transfer: each iteration copies the same, unchanged host input to the same device buffer
 * with cuMemcpyHtoD before the kernel that reads it. The kernel only reads the input
 * (ffm_work with mul=1, add=0 rewrites each word unchanged), so the device copy is still intact
 * and every transfer after the first is a duplicate. The kernel touches only the first n words:
 * the simulated driver really executes ffm_work on a CPU thread, and a pass over all 4 MiB would
 * make the kernel's duration depend on that CPU instead of kernel_us.
 *
 * Per iteration: one in_words * 4 byte HtoD from pageable memory (time T), a kernel of kernel_us
 * that reads n words of the input, a small kernel on the output, cpu_us of CPU work.
 * With cpu_us >= kernel_us the copy's implicit stream sync finds the GPU idle, so:
 *   plain:  iters * (cpu_us + T)
 *   fixed:  iters * cpu_us + T      (the input is transferred once, before the loop)
 *   saved:  about (iters - 1) * T, T = in_words * 4 / (pageable HtoD bandwidth)
 */
#include "wl.h"

#include <stdlib.h>

static long long kernel_us = 200, cpu_us = 1000, in_words = 1 << 20, n = 4096;

static const struct wl_opt opts[] = {
	{ "kernel-us", &kernel_us, "GPU time of the kernel that reads the input" },
	{ "cpu-us", &cpu_us, "CPU work of each iteration, independent of the GPU's data" },
	{ "in-words", &in_words, "32-bit words of input transferred (4 bytes each)" },
	{ "n", &n, "32-bit words of input read and of output updated each iteration" },
	{},
};

WL_NOINLINE static void step(struct wl *w, CUdeviceptr in, const uint32_t *host_in,
			     CUdeviceptr out, unsigned int i)
{
	if (!w->fixed || i == 0)
		CK(cuMemcpyHtoD(in, host_in, in_words * 4)); /* FFM-PLANT: dup_transfer dup-transfer */
	wl_work(w, 0, in, n < in_words ? n : in_words, 1, 0, kernel_us * 1000);
	wl_work(w, 0, out, n, 3, i, 0);
	wl_cpu_work(cpu_us * 1000);
}

int main(int argc, char **argv)
{
	struct wl w = { .iters = 400 };
	CUdeviceptr in, out;
	uint32_t *host_in;
	uint64_t h;

	wl_init(&w, "dup_transfer", argc, argv, opts);
	/* Pageable input, as most applications' input arrays are. */
	host_in = wl_xmalloc(in_words * 4);
	for (long long j = 0; j < in_words; j++)
		host_in[j] = (uint32_t)(j * 2654435761u);
	CK(cuMemAlloc(&in, in_words * 4 + 4));
	CK(cuMemAlloc(&out, n * 4 + 4));
	CK(cuMemsetD32(out, 1, n));

	wl_loop_begin(&w);
	for (long long i = 0; i < w.iters; i++)
		step(&w, in, host_in, out, (unsigned int)i);
	CK(cuCtxSynchronize());
	wl_loop_end(&w);

	h = wl_hash_device(WL_FNV_INIT, in, in_words);
	h = wl_hash_device(h, out, n);
	CK(cuMemFree(out));
	CK(cuMemFree(in));
	free(host_in);
	wl_finish(&w, h);
	return 0;
}
