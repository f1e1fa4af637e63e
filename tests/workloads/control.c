/* SPDX-License-Identifier: MIT */
/*
 * control: a clean program, ffm's negative control. Each iteration launches a kernel whose
 * parameter depends on the previous result, starts an asynchronous copy of the result into pinned
 * memory, does CPU work that overlaps them, synchronizes and reads the result at once to choose
 * the next kernel's parameter. Every sync waits (kernel_us > cpu_us) and every sync is needed;
 * no transfer repeats. --fixed is accepted and changes nothing: ffm must report no problem here
 * (and no expected benefit beyond noise).
 *
 * Per iteration: kernel of kernel_us plus a copy of n words (time T), cpu_us of CPU work.
 *   plain = fixed = iters * max(kernel_us + T, cpu_us)
 */
#include "wl.h"

static long long kernel_us = 1000, cpu_us = 500, n = 4096;

static const struct wl_opt opts[] = {
	{ "kernel-us", &kernel_us, "GPU time of each iteration's kernel" },
	{ "cpu-us", &cpu_us, "CPU work that overlaps the kernel and the copy" },
	{ "n", &n, "32-bit words computed and copied back each iteration" },
	{},
};

WL_NOINLINE static uint64_t step(struct wl *w, CUdeviceptr buf, uint32_t *host, unsigned int *add,
				 uint64_t acc)
{
	wl_work(w, 0, buf, n, 3, *add, kernel_us * 1000);
	CK(cuMemcpyDtoHAsync(host, buf, n * 4, 0));
	wl_cpu_work(cpu_us * 1000);
	CK(cuCtxSynchronize()); /* FFM-NOTE: control required-sync */
	*add = host[0] & 0xff; /* FFM-NOTE: control first-use */
	for (long long j = 0; j < n; j++)
		acc = acc * 31 + host[j];
	return acc;
}

int main(int argc, char **argv)
{
	struct wl w = { .iters = 500 };
	CUdeviceptr buf;
	uint32_t *host;
	unsigned int add = 1;
	uint64_t acc = 0;

	/* --fixed only sets w.fixed, which nothing here reads: the run is identical. */
	wl_init(&w, "control", argc, argv, opts);
	CK(cuMemAlloc(&buf, n * 4 + 4));
	CK(cuMemAllocHost((void **)&host, n * 4 + 4));
	CK(cuMemsetD32(buf, 1, n));

	wl_loop_begin(&w);
	for (long long i = 0; i < w.iters; i++)
		acc = step(&w, buf, host, &add, acc);
	wl_loop_end(&w);

	CK(cuMemFreeHost(host));
	CK(cuMemFree(buf));
	wl_finish(&w, wl_fnv1a(WL_FNV_INIT, &acc, sizeof(acc)));
	return 0;
}
