/* SPDX-License-Identifier: MIT */
/*
 * Throughput of stage 3's content hash in user space (daemon/hash.c over bpf/ffm_hash.h), not a
 * test: GB/s over a 64 MiB buffer (memory-bound) and a 256 KiB one (cache-resident), min and
 * median of repeated runs. The BPF side's throughput is measured by bench_stages.
 *   build/bench/bench_hash [MiB]
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "daemon/hash.h"

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static int cmpd(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static void run(const char *what, size_t n, int reps)
{
	unsigned char *b = malloc(n);
	double gbps[64];
	uint64_t sink = 0;

	if (!b) {
		perror("malloc");
		exit(1);
	}
	for (size_t i = 0; i < n; i++)
		b[i] = (unsigned char)(i * 7 + (i >> 12));
	if (reps > 64)
		reps = 64;
	for (int r = 0; r < reps; r++) {
		int inner = n < (1u << 20) ? 256 : 1;
		double t0 = now();

		for (int k = 0; k < inner; k++)
			sink += ffm_hash64(b, n);
		gbps[r] = (double)n * inner / (now() - t0) / 1e9;
	}
	qsort(gbps, reps, sizeof(gbps[0]), cmpd);
	printf("hash %-22s %8zu KiB: max %.2f GB/s, median %.2f GB/s (%d runs; %016llx)\n", what,
	       n >> 10, gbps[reps - 1], gbps[reps / 2], reps, (unsigned long long)sink);
	free(b);
}

int main(int argc, char **argv)
{
	size_t mib = argc > 1 ? strtoul(argv[1], NULL, 10) : 64;

	run("memory-bound", mib << 20, 9);
	run("cache-resident", 256 << 10, 9);
	return 0;
}
