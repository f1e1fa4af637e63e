// SPDX-License-Identifier: MIT
/*
 * The peer measurement for docs/RESULTS.md: what a CUPTI-based tool (Nsight Systems, the
 * PyTorch profiler's Kineto, HPCToolkit's GPU support) sees of an unmodified CUDA program.
 *
 * Loaded with CUDA_INJECTION64_PATH=.../libffm_cupti_peer.so (no relinking, as those tools do).
 * It enables CUPTI's runtime-API, driver-API and synchronization activity records and, at
 * exit, writes to $FFM_PEER_OUT (default stderr) one JSON object:
 *   {"apis": [{"domain", "api", "calls", "time_s", "sync_calls", "sync_s"}], "sync_records": N}
 * time_s is the time spent in the call (what such tools show); sync_calls counts the calls
 * that CUPTI itself marked as a synchronization (a SYNCHRONIZATION record with the call's
 * correlation id). An implicit synchronization (cudaFree, cudaMemcpyAsync into pageable memory,
 * cudaMemset on managed memory) has time but no sync record: that is the gap ffm fills.
 */
#include <cupti.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BUF_SIZE (8u << 20)
#define MAX_APIS 1024

struct api_tot {
	int domain; /* 0 runtime, 1 driver */
	uint32_t cbid;
	uint64_t calls, ns, sync_calls, sync_ns;
};

static struct api_tot tots[MAX_APIS];
static int ntots;
/* Every API record is kept until exit to be joined with the sync records by correlation id
 * (records arrive in buffers in no particular order). */
static struct {
	uint32_t corr;
	int tot;
	uint64_t ns;
} *calls;
static size_t ncalls, capcalls;
static uint32_t *sync_corr;
static size_t nsync, capsync;

static void *grow(void *p, size_t *cap, size_t need, size_t elsz)
{
	if (need <= *cap)
		return p;
	*cap = *cap ? *cap * 2 : 65536;
	p = realloc(p, *cap * elsz);
	if (!p) {
		fprintf(stderr, "ffm_cupti_peer: out of memory\n");
		exit(1);
	}
	return p;
}

static int tot_index(int domain, uint32_t cbid)
{
	for (int i = 0; i < ntots; i++)
		if (tots[i].domain == domain && tots[i].cbid == cbid)
			return i;
	if (ntots == MAX_APIS)
		return -1;
	tots[ntots] = (struct api_tot){ .domain = domain, .cbid = cbid };
	return ntots++;
}

static void CUPTIAPI buffer_requested(uint8_t **buf, size_t *size, size_t *max_records)
{
	*buf = aligned_alloc(8, BUF_SIZE);
	*size = *buf ? BUF_SIZE : 0;
	*max_records = 0;
}

static void CUPTIAPI buffer_completed(CUcontext ctx, uint32_t stream, uint8_t *buf, size_t size,
				      size_t valid)
{
	CUpti_Activity *rec = NULL;

	while (cuptiActivityGetNextRecord(buf, valid, &rec) == CUPTI_SUCCESS) {
		if (rec->kind == CUPTI_ACTIVITY_KIND_RUNTIME || rec->kind == CUPTI_ACTIVITY_KIND_DRIVER) {
			CUpti_ActivityAPI *a = (CUpti_ActivityAPI *)rec;
			int t = tot_index(rec->kind == CUPTI_ACTIVITY_KIND_DRIVER, a->cbid);

			if (t < 0)
				continue;
			tots[t].calls++;
			tots[t].ns += a->end - a->start;
			calls = grow(calls, &capcalls, ncalls + 1, sizeof(*calls));
			calls[ncalls].corr = a->correlationId;
			calls[ncalls].tot = t;
			calls[ncalls].ns = a->end - a->start;
			ncalls++;
		} else if (rec->kind == CUPTI_ACTIVITY_KIND_SYNCHRONIZATION) {
			CUpti_ActivitySynchronization2 *s = (CUpti_ActivitySynchronization2 *)rec;

			sync_corr = grow(sync_corr, &capsync, nsync + 1, sizeof(*sync_corr));
			sync_corr[nsync++] = s->correlationId;
		}
	}
	free(buf);
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

static void report(void)
{
	const char *path = getenv("FFM_PEER_OUT");
	FILE *f = path && *path ? fopen(path, "w") : stderr;
	int first = 1;

	cuptiActivityFlushAll(1);
	qsort(sync_corr, nsync, sizeof(*sync_corr), cmp_u32);
	for (size_t i = 0; i < ncalls; i++) {
		if (bsearch(&calls[i].corr, sync_corr, nsync, sizeof(*sync_corr), cmp_u32)) {
			tots[calls[i].tot].sync_calls++;
			tots[calls[i].tot].sync_ns += calls[i].ns;
		}
	}
	if (!f)
		f = stderr;
	fprintf(f, "{\"tool\":\"cupti\",\"apis\":[");
	for (int i = 0; i < ntots; i++) {
		const char *name = NULL;

		cuptiGetCallbackName(tots[i].domain ? CUPTI_CB_DOMAIN_DRIVER_API : CUPTI_CB_DOMAIN_RUNTIME_API,
				     tots[i].cbid, &name);
		fprintf(f, "%s{\"domain\":\"%s\",\"api\":\"%s\",\"calls\":%llu,\"time_s\":%.9f,\"sync_calls\":%llu,\"sync_s\":%.9f}",
			first ? "" : ",", tots[i].domain ? "driver" : "runtime", name ? name : "?",
			(unsigned long long)tots[i].calls, tots[i].ns / 1e9,
			(unsigned long long)tots[i].sync_calls, tots[i].sync_ns / 1e9);
		first = 0;
	}
	fprintf(f, "],\"sync_records\":%zu}\n", nsync);
	if (f != stderr)
		fclose(f);
}

/* Called by the CUDA driver when CUDA_INJECTION64_PATH names this library. */
int InitializeInjection(void)
{
	if (cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed) != CUPTI_SUCCESS ||
	    cuptiActivityEnable(CUPTI_ACTIVITY_KIND_RUNTIME) != CUPTI_SUCCESS ||
	    cuptiActivityEnable(CUPTI_ACTIVITY_KIND_DRIVER) != CUPTI_SUCCESS ||
	    cuptiActivityEnable(CUPTI_ACTIVITY_KIND_SYNCHRONIZATION) != CUPTI_SUCCESS) {
		fprintf(stderr, "ffm_cupti_peer: CUPTI activity setup failed\n");
		return 0;
	}
	atexit(report);
	return 1;
}
