/* SPDX-License-Identifier: MIT */
/*
 * threads: --threads host threads (default 4), each with its own stream and buffer; each
 * iteration launches a kernel on the thread's stream and then synchronizes that stream,
 * although the thread reads nothing the GPU wrote until after its loop, then does CPU work.
 * The threads wait side by side: fixing the one sync line saves each iteration's overlap once
 * in the wall time, not once per thread. Fixed: one cuStreamSynchronize after each loop.
 * --shared puts every thread on the legacy default stream instead (the kernels then run one
 * after the other on the GPU, so the GPU, not the CPU, bounds the fixed run).
 * --pool makes the threads a pool: the iters * threads iterations are tasks, each taken by
 * whichever worker is free from a shared counter, as thread pools hand out work; a worker's
 * task count and which tasks it ran change from run to run. Each task adds its own number to
 * the worker's buffer, so the buffers' sum, the checksum, does not.
 *
 * Per thread and iteration: kernel of kernel_us, cpu_us of CPU work.
 *   plain:  iters * (kernel_us + cpu_us)
 *   fixed:  iters * max(kernel_us, cpu_us) + the last kernel (separate streams)
 *   saved:  about (iters - 1) * min(kernel_us, cpu_us) of wall time, whatever the thread count
 */
#include <pthread.h>
#include <stdio.h>

#include "wl.h"

#define MAX_THREADS 64

static long long kernel_us = 500, cpu_us = 1000, n = 16384, nthreads = 4, shared, pool;

static const struct wl_opt opts[] = {
	{ "kernel-us", &kernel_us, "GPU time of each iteration's kernel" },
	{ "cpu-us", &cpu_us, "CPU work of each iteration, independent of the GPU's data" },
	{ "n", &n, "32-bit words each thread's kernel updates" },
	{ "threads", &nthreads, "host threads, each with its own loop" },
	{ "shared", &shared, "1: every thread uses the legacy default stream" },
	{ "pool", &pool, "1: the threads are a pool taking iters * threads tasks from a counter" },
	{},
};

struct worker {
	struct wl *w;
	pthread_t th;
	CUstream s;
	CUdeviceptr buf;
	unsigned int seed;
	long long *next; /* --pool: the shared task counter */
};

WL_NOINLINE static void step(struct worker *k, unsigned int i)
{
	if (pool) /* commutative: the buffers' sum does not depend on who ran what */
		wl_work(k->w, k->s, k->buf, n, 1, i + 1, kernel_us * 1000);
	else
		wl_work(k->w, k->s, k->buf, n, 3, i + k->seed, kernel_us * 1000);
	if (!k->w->fixed)
		CK(cuStreamSynchronize(k->s)); /* FFM-PLANT: threads unnecessary-sync */
	wl_cpu_work(cpu_us * 1000);
}

static void *run(void *arg)
{
	struct worker *k = arg;

	CK(cuCtxSetCurrent(k->w->ctx));
	if (pool) {
		for (long long i; (i = __atomic_fetch_add(k->next, 1, __ATOMIC_RELAXED)) <
				  k->w->iters * nthreads;)
			step(k, (unsigned int)i);
	} else {
		for (long long i = 0; i < k->w->iters; i++)
			step(k, (unsigned int)i);
	}
	CK(cuStreamSynchronize(k->s));
	return NULL;
}

int main(int argc, char **argv)
{
	struct worker k[MAX_THREADS] = { 0 };
	struct wl w = { .iters = 400 };
	uint64_t h = WL_FNV_INIT;
	long long next = 0;
	uint32_t sum = 0, v;

	wl_init(&w, "threads", argc, argv, opts);
	if (nthreads < 1 || nthreads > MAX_THREADS) {
		fprintf(stderr, "threads: --threads wants 1 to %d\n", MAX_THREADS);
		return 2;
	}
	for (long long t = 0; t < nthreads; t++) {
		k[t] = (struct worker){ .w = &w, .seed = (unsigned int)t * 7919u, .next = &next };
		if (!shared)
			CK(cuStreamCreate(&k[t].s, CU_STREAM_NON_BLOCKING));
		CK(cuMemAlloc(&k[t].buf, n * 4 + 4));
		CK(cuMemsetD32(k[t].buf, 1, n));
	}
	CK(cuCtxSynchronize());

	wl_loop_begin(&w);
	for (long long t = 0; t < nthreads; t++)
		if (pthread_create(&k[t].th, NULL, run, &k[t])) {
			fprintf(stderr, "threads: pthread_create failed\n");
			return 1;
		}
	for (long long t = 0; t < nthreads; t++)
		pthread_join(k[t].th, NULL);
	wl_loop_end(&w);

	for (long long t = 0; t < nthreads; t++) {
		if (pool) { /* every word got the same adds: the first stands for the buffer */
			CK(cuMemcpyDtoH(&v, k[t].buf, 4));
			sum += v;
		} else {
			h = wl_hash_device(h, k[t].buf, n);
		}
		CK(cuMemFree(k[t].buf));
		if (k[t].s)
			CK(cuStreamDestroy(k[t].s));
	}
	if (pool)
		h = wl_fnv1a(h, &sum, sizeof(sum));
	wl_finish(&w, h);
	return 0;
}
