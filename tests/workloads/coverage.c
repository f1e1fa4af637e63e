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
 *   first   the first word (the consumer that reads from the start)
 *   none    nothing in the loop (the whole result is read once after it): the sync is
 *           unnecessary, the negative of the others; --fixed moves it after the loop
 * For every mode but none the sync is required and --fixed changes nothing: ffm must report no
 * problem. With --n in MiBs the buffer is large (the kernel still computes only its first
 * --work words: the simulated driver runs kernels on a CPU thread).
 *
 * --dr-busy K: the loop's thread holds every debug register it can get (hardware breakpoints
 * on a variable of its own, as a program under a debugger or one using watchpoints itself has)
 * during its first K iterations, so that a profiler's watchpoints on that thread are refused
 * then. The syncs of those iterations were watched by nothing: they must not count as "no use
 * seen" (tests/report/test_coverage.sh).
 *
 * Per iteration: kernel of kernel_us plus a copy of n words (time T), cpu_us of CPU work.
 *   plain = fixed = iters * (kernel_us + T + cpu_us)                       (every mode but none)
 *   none:  fixed = iters * max(kernel_us + T, cpu_us), saved about iters * min(kernel_us + T,
 *          cpu_us) (the copies run behind the CPU work once the sync is gone)
 */
#include <errno.h>
#include <linux/hw_breakpoint.h>
#include <linux/perf_event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "wl.h"

static long long kernel_us = 500, cpu_us = 1000, n = 4096, work = 4096, stride = 16, dr_busy;
static const char *modes[] = { "mod", "mod64", "last", "middle", "stride", "none", "first", NULL };
static long long mode; /* index into modes */
static char read_mode[16] = "mod";

static const struct wl_opt opts[] = {
	{ "kernel-us", &kernel_us, "GPU time of each iteration's kernel" },
	{ "cpu-us", &cpu_us, "CPU work after the use of the result" },
	{ "n", &n, "32-bit words copied back each iteration" },
	{ "work", &work, "32-bit words the kernel computes (at most n)" },
	{ "stride", &stride, "--read stride: words between two read words" },
	{ "dr-busy", &dr_busy, "iterations during which the thread holds its debug registers" },
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
	case 6: return host[0];
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

/* The debug registers of the calling thread taken (read/write breakpoints on a word of its own
 * that nothing touches); how many were taken. fds gets their descriptors, -1 after the last. */
#define DR_MAX 8
static volatile uint64_t dr_word[DR_MAX];

static int dr_take(int *fds)
{
	int got = 0;

	for (int i = 0; i < DR_MAX; i++) {
		struct perf_event_attr a = {
			.size = sizeof(a), .type = PERF_TYPE_BREAKPOINT, .bp_type = HW_BREAKPOINT_RW,
			.bp_addr = (uint64_t)(uintptr_t)&dr_word[i], .bp_len = HW_BREAKPOINT_LEN_8,
			.exclude_kernel = 1, .exclude_hv = 1,
		};
		int fd = (int)syscall(SYS_perf_event_open, &a, 0, -1, -1, 0);

		fds[i] = -1;
		if (fd < 0) {
			if (errno != ENOSPC)
				fprintf(stderr, "coverage: hardware breakpoint: %s\n", strerror(errno));
			break;
		}
		fds[got++] = fd;
	}
	return got;
}

static void dr_give_back(int *fds)
{
	for (int i = 0; i < DR_MAX && fds[i] >= 0; i++) {
		close(fds[i]);
		fds[i] = -1;
	}
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
		fprintf(stderr, "coverage: --read is mod, mod64, last, middle, stride, none or first, not '%s'\n",
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
	int dr_fds[DR_MAX] = { -1 }; /* the list ends at its first -1 */

	argc = take_read(argc, argv);
	wl_init(&w, "coverage", argc, argv, opts);
	if (n < 2 || work > n || stride < 1) {
		fprintf(stderr, "coverage: needs --n >= 2, --work <= --n and --stride >= 1\n");
		return 2;
	}
	printf("READ %s\n", read_mode);
	if (dr_busy > 0)
		printf("DEBUG_REGISTERS_TAKEN %d\n", dr_take(dr_fds));
	CK(cuMemAlloc(&buf, n * 4));
	CK(cuMemAllocHost((void **)&host, n * 4));
	CK(cuMemsetD32(buf, 1, n));

	wl_loop_begin(&w);
	for (long long i = 0; i < w.iters; i++) {
		if (i == dr_busy)
			dr_give_back(dr_fds);
		add = step(&w, buf, host, i, add);
		acc = acc * 31 + add;
	}
	CK(cuCtxSynchronize());
	wl_loop_end(&w);
	dr_give_back(dr_fds);

	acc = wl_fnv1a(acc, host, n * 4);
	CK(cuMemFreeHost(host));
	CK(cuMemFree(buf));
	wl_finish(&w, acc);
	return 0;
}
