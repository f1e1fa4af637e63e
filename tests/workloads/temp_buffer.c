/* SPDX-License-Identifier: MIT */
/*
 * temp_buffer: --threads host threads (default 1), each with its own blocking stream (the
 * result's copy on the legacy stream after the loop waits for it); every step each
 * thread allocates a temporary buffer of --bytes, fills it (cuMemsetD8Async, with --memset 1),
 * overwrites its first words in a kernel, launches its main kernel of K on its own buffer,
 * frees the temporary (cuMemFree waits for the whole device) and does C of CPU work. Fixed:
 * each thread allocates (and fills) one buffer before its loop and frees it after: the
 * allocations, fills and frees of every step but one go. Profiled --fixed, it is the control
 * that allocates once. The simulated driver plants an allocation's and a free's own time
 * (FAKECUDA_ALLOC_US, FAKECUDA_ALLOC_MIB_US, FAKECUDA_FREE_US: tests/fakecuda/README.md).
 *
 * Per thread and step: planted alloc A + fill + kernels + free's wait + planted free F + C.
 *   fixed:  the kernels overlap C (K < C)
 *   saved:  (N - 1) * (A + F) for the calls the fix deletes, and the free's wait (its own
 *           problem: an unnecessary sync) about N * min(K + fill, C)
 */
#include <pthread.h>
#include <stdio.h>

#include "wl.h"

#define MAX_THREADS 64
#define TOUCH_WORDS 1024 /* the temporary's words the kernel writes */

static long long kernel_us = 100, cpu_us = 1000, n = 4096, bytes = 4096, fill = 1, nthreads = 1;

static const struct wl_opt opts[] = {
	{ "kernel-us", &kernel_us, "GPU time of each step's main kernel" },
	{ "cpu-us", &cpu_us, "CPU work of each step, independent of the GPU's data" },
	{ "n", &n, "32-bit words each thread's main kernel updates" },
	{ "bytes", &bytes, "bytes of each step's temporary buffer" },
	{ "memset", &fill, "1: fill the temporary with cuMemsetD8Async after allocating it" },
	{ "threads", &nthreads, "host threads, each with its own loop" },
	{},
};

struct worker {
	struct wl *w;
	pthread_t th;
	CUstream s;
	CUdeviceptr buf, tmp;
	unsigned int seed;
};

static unsigned long long touched(void)
{
	return (unsigned long long)bytes / 4 < TOUCH_WORDS ? (unsigned long long)bytes / 4
							   : TOUCH_WORDS;
}

WL_NOINLINE static void step(struct worker *k, unsigned int i)
{
	CUdeviceptr tmp = k->tmp;

	if (!k->w->fixed)
		CK(cuMemAlloc(&tmp, (size_t)bytes)); /* FFM-PLANT: temp_buffer temp-buffer */
	if (!k->w->fixed && fill)
		CK(cuMemsetD8Async(tmp, 0, (size_t)bytes, k->s));
	wl_work(k->w, k->s, tmp, touched(), 0, i, 0);
	wl_work(k->w, k->s, k->buf, n, 3, i + k->seed, kernel_us * 1000);
	if (!k->w->fixed)
		CK(cuMemFree(tmp)); /* FFM-PLANT: temp_buffer free-sync */
	wl_cpu_work(cpu_us * 1000);
}

static void *run(void *arg)
{
	struct worker *k = arg;

	CK(cuCtxSetCurrent(k->w->ctx));
	CK(cuMemsetD32Async(k->buf, 1, n, k->s)); /* in stream order: no sync before the loop */
	if (k->w->fixed) {
		CK(cuMemAlloc(&k->tmp, (size_t)bytes));
		if (fill)
			CK(cuMemsetD8Async(k->tmp, 0, (size_t)bytes, k->s));
	}
	for (long long i = 0; i < k->w->iters; i++)
		step(k, (unsigned int)i);
	/* No sync: the result's copy on the legacy stream waits for this (blocking) stream. */
	if (k->w->fixed)
		CK(cuMemFree(k->tmp));
	return NULL;
}

int main(int argc, char **argv)
{
	struct worker k[MAX_THREADS] = { 0 };
	struct wl w = { .iters = 200 };
	uint64_t h = WL_FNV_INIT;

	wl_init(&w, "temp_buffer", argc, argv, opts);
	if (nthreads < 1 || nthreads > MAX_THREADS || bytes < 4) {
		fprintf(stderr, "temp_buffer: --threads wants 1 to %d, --bytes at least 4\n",
			MAX_THREADS);
		return 2;
	}
	for (long long t = 0; t < nthreads; t++) {
		k[t] = (struct worker){ .w = &w, .seed = (unsigned int)t * 7919u };
		CK(cuStreamCreate(&k[t].s, CU_STREAM_DEFAULT));
		CK(cuMemAlloc(&k[t].buf, n * 4 + 4));
	}

	wl_loop_begin(&w);
	for (long long t = 0; t < nthreads; t++)
		if (pthread_create(&k[t].th, NULL, run, &k[t])) {
			fprintf(stderr, "temp_buffer: pthread_create failed\n");
			return 1;
		}
	for (long long t = 0; t < nthreads; t++)
		pthread_join(k[t].th, NULL);
	wl_loop_end(&w);

	for (long long t = 0; t < nthreads; t++) {
		h = wl_hash_device(h, k[t].buf, n);
		CK(cuMemFree(k[t].buf));
		CK(cuStreamDestroy(k[t].s));
	}
	wl_finish(&w, h);
	return 0;
}
