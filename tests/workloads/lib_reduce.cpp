// SPDX-License-Identifier: MIT
/*
 * lib_reduce: host_read's pattern through a library template, as a C++ program that calls
 * thrust::reduce (or cublasSdot in host pointer mode) every iteration: each iteration launches a
 * kernel, then a header template inlined into step() (toolkit/include/cccl/wl_reduce.h) copies
 * one word back and waits for it; the value is only logged. ffm must name the user's line of
 * step() that calls the template, not the header's, and price the read every iteration as one
 * problem at that line (the copy and the stream sync are two driver calls there). Fixed: the
 * word is read every 50th iteration only (LOGGED differs; CHECKSUM, of the buffer, does not).
 *
 *   plain: iters * (kernel_us + T + cpu_us); fixed: about iters * max(kernel_us, cpu_us).
 */
#include <stdio.h>

extern "C" {
#include "wl.h"
}
#include "cccl/wl_reduce.h"

static long long kernel_us = 500, cpu_us = 1000, n = 65536, every = 50;

WL_NOINLINE static uint64_t step(struct wl *w, CUdeviceptr buf, unsigned int i, uint64_t logged)
{
	wl_work(w, 0, buf, n, 3, i, kernel_us * 1000);
	if (!w->fixed || (i + 1) % every == 0)
		logged += wl_cccl::read_to_host<uint32_t>(buf, 0); /* FFM-PLANT: lib_reduce host-read */
	wl_cpu_work(cpu_us * 1000);
	return logged;
}

int main(int argc, char **argv)
{
	static const struct wl_opt opts[] = {
		{ "kernel-us", &kernel_us, "GPU time of each iteration's kernel" },
		{ "cpu-us", &cpu_us, "CPU work of each iteration, independent of the GPU's data" },
		{ "n", &n, "32-bit words the kernel updates" },
		{ "every", &every, "--fixed reads the word every this many iterations" },
		{ nullptr, nullptr, nullptr },
	};
	struct wl w = {};
	CUdeviceptr buf;
	uint64_t logged = 0, h;

	w.iters = 400;
	wl_init(&w, "lib_reduce", argc, argv, opts);
	if (every < 1) {
		fprintf(stderr, "lib_reduce: --every wants 1 or more\n");
		return 2;
	}
	CK(cuMemAlloc(&buf, n * 4 + 4));
	CK(cuMemsetD32(buf, 1, n));

	wl_loop_begin(&w);
	for (long long i = 0; i < w.iters; i++)
		logged = step(&w, buf, (unsigned int)i, logged);
	CK(cuCtxSynchronize());
	wl_loop_end(&w);

	h = wl_hash_device(WL_FNV_INIT, buf, n);
	CK(cuMemFree(buf));
	printf("LOGGED %llu\n", (unsigned long long)logged);
	wl_finish(&w, h);
	return 0;
}
