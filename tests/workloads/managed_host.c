/* SPDX-License-Identifier: MIT */
/*
 * managed_host: each iteration sets a managed buffer of --bytes with cuMemsetD8 (cudaMemset's
 * call), then the host
 * reads it back (--read-pages pages of it, 0: every page) and does cpu_us of CPU work. The
 * memset is fully synchronous on managed memory (it waits for its own GPU work), and on a
 * driver that migrates managed pages (the simulated one with FAKECUDA_MIGRATE_PAGE_US and
 * FAKECUDA_FAULT_PAGE_US, a real GPU) the pages the host touched last move to the GPU for it,
 * and the host's reads after it fault them back, page by page.
 *
 * Fix: the host sets the buffer itself (memset): only the host uses it, so the call goes whole,
 * with its wait, the migration and the faults.
 *
 * --device 1 is the control: the buffer is device memory; the memset (which returns at once on
 * device memory) sets it for a kernel that adds to it, and the host copies the result back and
 * reads it: every call is required, --fixed changes nothing.
 * --threads T: T host threads, each with its own buffer and loop (legacy default stream); with
 * one, the loop runs in the main thread.
 *
 * Per iteration (managed): own time + migrated pages * MIGRATE + the memset's GPU time (the
 * wait), read pages * FAULT, cpu_us; fixed: a host memset of --bytes and cpu_us. The fix's own
 * work (the host's memsets) is printed as FIX_S: what ffm prices is what the fix deletes.
 */
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "wl.h"

#define MAX_THREADS 16

static long long bytes = 2 << 20, read_pages, cpu_us = 200, nthreads = 1, device, sync_after;

static const struct wl_opt opts[] = {
	{ "bytes", &bytes, "size of each thread's buffer (a multiple of the page size)" },
	{ "read-pages", &read_pages, "pages the host reads after each memset (0: every page)" },
	{ "sync-after", &sync_after, "1: a cuCtxSynchronize between the set and the host's read" },
	{ "cpu-us", &cpu_us, "CPU work of each iteration" },
	{ "threads", &nthreads, "host threads, each with its own buffer and loop" },
	{ "device", &device, "1: the control, on device memory (every call required)" },
	{},
};

struct worker {
	struct wl *w;
	pthread_t th;
	CUdeviceptr buf;
	uint32_t *host; /* --device: the copy of the result */
	uint64_t sum;
	uint64_t fix_ns; /* --fixed: the time of the fix's own work (the host's memsets) */
};

static size_t page_size(void)
{
	long p = sysconf(_SC_PAGESIZE);

	return p > 0 ? (size_t)p : 4096;
}

/* The host reads one word of each of the first @pages pages of @p. */
static uint64_t read_back(const uint32_t *p, size_t pages)
{
	size_t step = page_size() / 4;
	uint64_t s = 0;

	for (size_t i = 0; i < pages; i++)
		s += ((const volatile uint32_t *)p)[i * step];
	return s;
}

WL_NOINLINE static void step_managed(struct worker *k, unsigned int i, size_t pages)
{
	uint32_t *p = (uint32_t *)(uintptr_t)k->buf;
	size_t nb = (size_t)bytes;
	uint64_t t0;

	if (!k->w->fixed) {
		CK(cuMemsetD8(k->buf, i & 0xff, nb)); /* FFM-PLANT: managed_host managed-set */
	} else {
		t0 = wl_now_ns();
		memset(p, (int)(i & 0xff), nb); /* the fix: the host sets what it reads */
		k->fix_ns += wl_now_ns() - t0;
	}
	if (sync_after) /* a call between the set and the faults (as a stream sync before a read) */
		CK(cuCtxSynchronize());
	k->sum += read_back(p, pages);
	wl_cpu_work(cpu_us * 1000);
}

WL_NOINLINE static void step_device(struct worker *k, unsigned int i)
{
	size_t n = (size_t)bytes / 4;

	CK(cuMemsetD32(k->buf, i, n)); /* FFM-NOTE: managed_host device-set */
	wl_work(k->w, 0, k->buf, n, 1, 1, 0);
	CK(cuMemcpyDtoH(k->host, k->buf, (size_t)bytes));
	k->sum += read_back(k->host, (size_t)bytes / page_size());
	wl_cpu_work(cpu_us * 1000);
}

static void *run(void *arg)
{
	struct worker *k = arg;
	size_t all = (size_t)bytes / page_size();
	size_t pages = read_pages > 0 && (size_t)read_pages < all ? (size_t)read_pages : all;

	CK(cuCtxSetCurrent(k->w->ctx));
	for (long long i = 0; i < k->w->iters; i++) {
		if (device)
			step_device(k, (unsigned int)i);
		else
			step_managed(k, (unsigned int)i, pages);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	struct worker k[MAX_THREADS] = { 0 };
	struct wl w = { .iters = 200 };
	uint64_t h = WL_FNV_INIT, fix_ns = 0;

	wl_init(&w, "managed_host", argc, argv, opts);
	if (nthreads < 1 || nthreads > MAX_THREADS || bytes < (long long)page_size() ||
	    bytes % (long long)page_size()) {
		fprintf(stderr, "managed_host: --threads 1 to %d, --bytes whole pages\n",
			MAX_THREADS);
		return 2;
	}
	for (long long t = 0; t < nthreads; t++) {
		k[t].w = &w;
		if (device) {
			CK(cuMemAlloc(&k[t].buf, (size_t)bytes));
			k[t].host = wl_xmalloc((size_t)bytes);
		} else {
			CK(cuMemAllocManaged(&k[t].buf, (size_t)bytes, CU_MEM_ATTACH_GLOBAL));
			memset((void *)(uintptr_t)k[t].buf, 0, (size_t)bytes); /* the host's, first */
		}
	}

	wl_loop_begin(&w);
	if (nthreads == 1) /* one thread: the main one, as most programs */
		run(&k[0]);
	for (long long t = 0; t < nthreads && nthreads > 1; t++)
		if (pthread_create(&k[t].th, NULL, run, &k[t])) {
			fprintf(stderr, "managed_host: pthread_create failed\n");
			return 1;
		}
	for (long long t = 0; t < nthreads && nthreads > 1; t++)
		pthread_join(k[t].th, NULL);
	wl_loop_end(&w);

	for (long long t = 0; t < nthreads; t++) {
		fix_ns = k[t].fix_ns > fix_ns ? k[t].fix_ns : fix_ns;
		h = wl_fnv1a(h, &k[t].sum, sizeof(k[t].sum));
		CK(cuMemFree(k[t].buf));
		free(k[t].host);
	}
	/* What the fix adds (the slowest thread's): the saving of the deleted call alone is the
	 * plain run's loop less the fixed run's, plus this. */
	printf("FIX_S %.6f\n", (double)fix_ns / 1e9);
	wl_finish(&w, h);
	return 0;
}
