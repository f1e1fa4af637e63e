/* SPDX-License-Identifier: MIT */
/*
 * host_read: each iteration launches a kernel that updates a buffer, then reads one 32-bit word
 * of it back with cuMemcpyDtoH and adds it to a running value that is only printed at the end,
 * as a training loop logs its loss with .item() every step. Where it stands the read is
 * required (the CPU uses the word at once), but it stalls every iteration: the CPU can never run
 * ahead of the GPU. Fixed: the word is read every 50th iteration only (the fix changes when the
 * value is used, so LOGGED differs; CHECKSUM, of the buffer, does not).
 *
 * --async 1 reads the way PyTorch's .item() does: cuMemcpyDtoHAsync on a stream, then
 * cuStreamSynchronize (the copy call returns at once, the wait is in the sync). The fix deletes
 * both calls, so the estimate must count their CPU time as well as the wait.
 *
 * Per iteration: kernel of kernel_us, a 4-byte copy (time T), cpu_us of CPU work.
 *   plain:  iters * (kernel_us + T + cpu_us)
 *   fixed:  about iters * max(kernel_us, cpu_us) + iters/50 * (min(kernel_us, cpu_us) + T)
 *   saved:  about iters * 49/50 * (min(kernel_us, cpu_us) + T)
 */
#include <stdbool.h>
#include <stdio.h>

#include "wl.h"

static long long kernel_us = 500, cpu_us = 1000, n = 65536, every = 50, async, launch_first;
static CUstream stream;

static const struct wl_opt opts[] = {
	{ "kernel-us", &kernel_us, "GPU time of each iteration's kernel" },
	{ "cpu-us", &cpu_us, "CPU work of each iteration, independent of the GPU's data" },
	{ "n", &n, "32-bit words the kernel updates" },
	{ "every", &every, "--fixed reads the word every this many iterations" },
	{ "async", &async, "1: read with cuMemcpyDtoHAsync on a stream and cuStreamSynchronize" },
	{ "launch-first", &launch_first,
	  "1: read the previous step's word, launch, then use it (the value feeds no launch)" },
	{},
};

WL_NOINLINE static uint64_t step(struct wl *w, CUdeviceptr buf, unsigned int i, uint64_t logged)
{
	uint32_t word;

	wl_work(w, stream, buf, n, 3, i, kernel_us * 1000);
	if (!w->fixed || (i + 1) % every == 0) {
		if (async) {
			CK(cuMemcpyDtoHAsync(&word, buf, sizeof(word), stream)); CK(cuStreamSynchronize(stream)); /* --async's read */
		} else {
			CK(cuMemcpyDtoH(&word, buf, sizeof(word))); /* FFM-PLANT: host_read host-read */
		}
		logged += word;
	}
	wl_cpu_work(cpu_us * 1000);
	return logged;
}

/*
 * --launch-first: the read waits for the previous step's kernel, the step's kernel is launched
 * before the value is used: the value cannot feed that launch, so the read counts in the
 * headline (the required-read rule, docs/ACCURACY.md). It waits when kernel_us > cpu_us.
 */
WL_NOINLINE static uint64_t step_launch_first(struct wl *w, CUdeviceptr buf, unsigned int i,
					      uint64_t logged)
{
	bool read = i && (!w->fixed || (i + 1) % every == 0);
	uint32_t word = 0;

	if (read)
		CK(cuMemcpyDtoH(&word, buf, sizeof(word))); /* --launch-first's read */
	wl_work(w, stream, buf, n, 3, i, kernel_us * 1000);
	logged += word; /* after the launch: word's address escaped, so it is loaded here */
	wl_cpu_work(cpu_us * 1000);
	return logged;
}

int main(int argc, char **argv)
{
	struct wl w = { .iters = 400 };
	CUdeviceptr buf;
	uint64_t logged = 0, h;

	wl_init(&w, "host_read", argc, argv, opts);
	if (every < 1) {
		fprintf(stderr, "host_read: --every wants 1 or more\n");
		return 2;
	}
	if (async)
		CK(cuStreamCreate(&stream, 0));
	CK(cuMemAlloc(&buf, n * 4 + 4));
	CK(cuMemsetD32(buf, 1, n));

	wl_loop_begin(&w);
	for (long long i = 0; i < w.iters; i++)
		logged = launch_first ? step_launch_first(&w, buf, (unsigned int)i, logged) :
					step(&w, buf, (unsigned int)i, logged);
	CK(cuCtxSynchronize());
	wl_loop_end(&w);

	h = wl_hash_device(WL_FNV_INIT, buf, n);
	CK(cuMemFree(buf));
	printf("LOGGED %llu\n", (unsigned long long)logged);
	wl_finish(&w, h);
	return 0;
}
