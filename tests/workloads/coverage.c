/* SPDX-License-Identifier: MIT */
/*
 * coverage: a clean program whose first use of each result is not in its first 8 bytes, the
 * test of stage 3's coverage of a protected range. Each iteration launches a kernel whose
 * parameter comes from the previous result, copies the result into pinned memory
 * (cuMemcpyDtoHAsync), synchronizes, reads part of the result at once to choose the next
 * parameter (--read), then does CPU work:
 *   mod     the word i % n (one 4-byte element, moving through the buffer)
 *   mod64   the 8-byte element i % (n / 2)
 *   last    the last word
 *   middle  the word n / 2
 *   stride  every --stride-th word, starting at the word stride / 2
 *   none    nothing in the loop (the whole result is read once after it): the sync is
 *           unnecessary, the negative of the others; --fixed moves it after the loop
 * For every mode but none the sync is required and --fixed changes nothing: ffm must report no
 * problem. With --n in MiBs the buffer is large (the kernel still computes only its first
 * --work words: the simulated driver runs kernels on a CPU thread).
 *
 * Per iteration: kernel of kernel_us plus a copy of n words (time T), cpu_us of CPU work.
 *   plain = fixed = iters * (kernel_us + T + cpu_us)                       (every mode but none)
 *   none:  fixed = iters * max(kernel_us + T, cpu_us), saved about iters * min(kernel_us + T,
 *          cpu_us) (the copies run behind the CPU work once the sync is gone)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wl.h"

static long long kernel_us = 500, cpu_us = 1000, n = 4096, work = 4096, stride = 16;
static const char *modes[] = { "mod", "mod64", "last", "middle", "stride", "none", NULL };
static long long mode; /* index into modes */
static char read_mode[16] = "mod";

static const struct wl_opt opts[] = {
	{ "kernel-us", &kernel_us, "GPU time of each iteration's kernel" },
	{ "cpu-us", &cpu_us, "CPU work after the use of the result" },
	{ "n", &n, "32-bit words copied back each iteration" },
	{ "work", &work, "32-bit words the kernel computes (at most n)" },
	{ "stride", &stride, "--read stride: words between two read words" },
	{},
};

/* What the CPU reads of the result right after the sync (the value feeds the next kernel). */
static uint32_t use(const uint32_t *host, long long i)
{
	uint32_t v = 0;

	switch (mode) {
	case 0: return host[i % n];
	case 1: return (uint32_t)((const uint64_t *)host)[i % (n / 2)];
	case 2: return host[n - 1];
	case 3: return host[n / 2];
	case 4:
		for (long long j = stride / 2; j < n; j += stride)
			v += host[j];
		return v;
	default: return 1;
	}
}

WL_NOINLINE static uint32_t step(struct wl *w, CUdeviceptr buf, uint32_t *host, long long i,
				 uint32_t add)
{
	uint32_t v;

	wl_work(w, 0, buf, work, 3, add, kernel_us * 1000);
	CK(cuMemcpyDtoHAsync(host, buf, n * 4, 0));
	if (mode != 5 || !w->fixed)
		CK(cuCtxSynchronize()); /* FFM-NOTE: coverage required-sync */
	v = use(host, i) & 0xff;
	wl_cpu_work(cpu_us * 1000);
	return v;
}

/* --read is a word, not a number: taken out of argv before wl_init sees it. */
static int take_read(int argc, char **argv)
{
	int o = 1;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--read") && i + 1 < argc) {
			snprintf(read_mode, sizeof(read_mode), "%s", argv[++i]);
			continue;
		}
		argv[o++] = argv[i];
	}
	for (mode = 0; modes[mode] && strcmp(modes[mode], read_mode); mode++)
		;
	if (!modes[mode]) {
		fprintf(stderr, "coverage: --read is mod, mod64, last, middle, stride or none, not '%s'\n",
			read_mode);
		exit(2);
	}
	argv[o] = NULL;
	return o;
}

int main(int argc, char **argv)
{
	struct wl w = { .iters = 400 };
	CUdeviceptr buf;
	uint32_t *host, add = 1;
	uint64_t acc = 0;

	argc = take_read(argc, argv);
	wl_init(&w, "coverage", argc, argv, opts);
	if (n < 2 || work > n || stride < 1) {
		fprintf(stderr, "coverage: needs --n >= 2, --work <= --n and --stride >= 1\n");
		return 2;
	}
	printf("READ %s\n", read_mode);
	CK(cuMemAlloc(&buf, n * 4));
	CK(cuMemAllocHost((void **)&host, n * 4));
	CK(cuMemsetD32(buf, 1, n));

	wl_loop_begin(&w);
	for (long long i = 0; i < w.iters; i++) {
		add = step(&w, buf, host, i, add);
		acc = acc * 31 + add;
	}
	CK(cuCtxSynchronize());
	wl_loop_end(&w);

	acc = wl_fnv1a(acc, host, n * 4);
	CK(cuMemFreeHost(host));
	CK(cuMemFree(buf));
	wl_finish(&w, acc);
	return 0;
}
