// SPDX-License-Identifier: MIT
/*
 * The planted problems of tests/workloads, written against the CUDA runtime (cudart) as most
 * applications are: the runtime reaches the driver through the versioned entry points it gets
 * from cuGetProcAddress_v2, and some of its calls synchronize without saying so (cudaFree,
 * cudaMemcpyAsync into pageable memory, cudaMemset on managed memory). CUPTI-based tools record
 * these as API calls, not as synchronizations; ffm sees the wait inside them.
 *
 *     cudart_problems --problem NAME [--fixed] [--iters N] [--kernel-us K] [--cpu-us C]
 *     NAME: unnecessary_sync misplaced_sync free_in_loop dup_transfer pageable_async
 *           managed_memset control
 *
 * Prints PARAMS, CHECKSUM (equal with and without --fixed) and WALL_S lines like the driver-API
 * workloads. Runs on a real GPU only: the simulated driver cannot host the runtime.
 */
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CHECK(x)                                                                                   \
	do {                                                                                       \
		cudaError_t _e = (x);                                                              \
		if (_e != cudaSuccess) {                                                           \
			fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x,                 \
				cudaGetErrorName(_e));                                             \
			exit(1);                                                                   \
		}                                                                                  \
	} while (0)

/* Busy-waits ns on the GPU's global timer, then buf[i] = buf[i] * mul + add for i < n. */
__global__ void work(unsigned *buf, unsigned long long n, unsigned mul, unsigned add,
		     unsigned long long ns)
{
	unsigned long long t0, t;

	asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
	do
		asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
	while (t - t0 < ns);
	for (unsigned long long i = blockIdx.x * blockDim.x + threadIdx.x; i < n;
	     i += (unsigned long long)gridDim.x * blockDim.x)
		buf[i] = buf[i] * mul + add;
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* CPU work of a controlled duration (what the application does between GPU calls). */
static __attribute__((noinline)) void cpu_work(double us)
{
	double end = now_s() + us / 1e6;

	while (now_s() < end)
		;
}

static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
	const unsigned char *b = (const unsigned char *)p;

	for (size_t i = 0; i < n; i++)
		h = (h ^ b[i]) * 0x100000001b3ULL;
	return h;
}

struct opts {
	int iters;
	double kernel_us, cpu_us;
	bool fixed;
};

static void launch(unsigned *d, size_t n, unsigned mul, unsigned add, double us)
{
	work<<<1, 256>>>(d, n, mul, add, (unsigned long long)(us * 1000));
	CHECK(cudaGetLastError());
}

/* cudaDeviceSynchronize after every launch although nothing is read until the end. */
static __attribute__((noinline)) uint64_t unnecessary_sync(const struct opts *o)
{
	const size_t n = 4096;
	unsigned *d, h[4096];

	CHECK(cudaMalloc(&d, n * 4));
	CHECK(cudaMemset(d, 0, n * 4));
	for (int i = 0; i < o->iters; i++) {
		launch(d, n, 1, 1, o->kernel_us);
		if (!o->fixed)
			CHECK(cudaDeviceSynchronize()); /* FFM-PLANT: cudart unnecessary_sync */
		cpu_work(o->cpu_us);
	}
	CHECK(cudaMemcpy(h, d, sizeof(h), cudaMemcpyDeviceToHost));
	CHECK(cudaFree(d));
	return fnv(0xcbf29ce484222325ULL, h, sizeof(h));
}

/* Sync, then unrelated CPU work, then the use of the result. */
static __attribute__((noinline)) uint64_t misplaced_sync(const struct opts *o)
{
	const size_t n = 4096;
	unsigned *d, *h;
	uint64_t sum = 0;

	CHECK(cudaMalloc(&d, n * 4));
	CHECK(cudaMallocHost(&h, n * 4));
	CHECK(cudaMemset(d, 0, n * 4));
	for (int i = 0; i < o->iters; i++) {
		launch(d, n, 1, 1, o->kernel_us);
		CHECK(cudaMemcpyAsync(h, d, n * 4, cudaMemcpyDeviceToHost, 0));
		if (!o->fixed)
			CHECK(cudaStreamSynchronize(0)); /* FFM-PLANT: cudart misplaced_sync */
		cpu_work(o->cpu_us);
		if (o->fixed)
			CHECK(cudaStreamSynchronize(0));
		sum += h[i % n]; /* first use */
	}
	CHECK(cudaFreeHost(h));
	CHECK(cudaFree(d));
	return sum;
}

/* cudaMalloc/cudaFree of a temporary in the loop: cudaFree synchronizes the device. */
static __attribute__((noinline)) uint64_t free_in_loop(const struct opts *o)
{
	const size_t n = 4096;
	unsigned *d, *tmp = NULL, h[4096];

	CHECK(cudaMalloc(&d, n * 4));
	CHECK(cudaMemset(d, 0, n * 4));
	if (o->fixed)
		CHECK(cudaMalloc(&tmp, n * 4));
	for (int i = 0; i < o->iters; i++) {
		launch(d, n, 1, 1, o->kernel_us);
		if (!o->fixed)
			CHECK(cudaMalloc(&tmp, n * 4));
		launch(tmp, 0, 1, 0, 0);
		if (!o->fixed)
			CHECK(cudaFree(tmp)); /* FFM-PLANT: cudart free_in_loop */
		cpu_work(o->cpu_us);
	}
	if (o->fixed)
		CHECK(cudaFree(tmp));
	CHECK(cudaMemcpy(h, d, sizeof(h), cudaMemcpyDeviceToHost));
	CHECK(cudaFree(d));
	return fnv(0xcbf29ce484222325ULL, h, sizeof(h));
}

/* The same unchanged 4 MiB host buffer copied to the device every iteration. */
static __attribute__((noinline)) uint64_t dup_transfer(const struct opts *o)
{
	const size_t n = 1 << 20;
	unsigned *d, *hin, h[4096];

	hin = (unsigned *)malloc(n * 4);
	for (size_t i = 0; i < n; i++)
		hin[i] = (unsigned)i;
	CHECK(cudaMalloc(&d, n * 4));
	if (o->fixed)
		CHECK(cudaMemcpy(d, hin, n * 4, cudaMemcpyHostToDevice));
	for (int i = 0; i < o->iters; i++) {
		if (!o->fixed)
			CHECK(cudaMemcpy(d, hin, n * 4, cudaMemcpyHostToDevice)); /* FFM-PLANT: cudart dup_transfer */
		launch(d, 4096, 1, 0, o->kernel_us);
		cpu_work(o->cpu_us);
	}
	CHECK(cudaMemcpy(h, d, sizeof(h), cudaMemcpyDeviceToHost));
	CHECK(cudaFree(d));
	free(hin);
	return fnv(0xcbf29ce484222325ULL, h, sizeof(h));
}

/* cudaMemcpyAsync into pageable memory: the runtime waits for the copy. */
static __attribute__((noinline)) uint64_t pageable_async(const struct opts *o)
{
	const size_t n = 65536;
	unsigned *d, *h;
	uint64_t sum = 0;

	CHECK(cudaMalloc(&d, n * 4));
	CHECK(cudaMemset(d, 0, n * 4));
	if (o->fixed)
		CHECK(cudaMallocHost(&h, n * 4));
	else
		h = (unsigned *)malloc(n * 4);
	for (int i = 0; i < o->iters; i++) {
		launch(d, n, 1, 1, o->kernel_us);
		CHECK(cudaMemcpyAsync(h, d, n * 4, cudaMemcpyDeviceToHost, 0)); /* FFM-PLANT: cudart pageable_async */
		cpu_work(o->cpu_us);
		CHECK(cudaStreamSynchronize(0));
		sum += h[i % n];
	}
	if (o->fixed)
		CHECK(cudaFreeHost(h));
	else
		free(h);
	CHECK(cudaFree(d));
	return sum;
}

/* cudaMemset on managed memory each iteration: it synchronizes. */
static __attribute__((noinline)) uint64_t managed_memset(const struct opts *o)
{
	const size_t n = 4096;
	unsigned *d, *m;
	uint64_t sum = 0;

	CHECK(cudaMalloc(&d, n * 4));
	CHECK(cudaMallocManaged(&m, n * 4));
	CHECK(cudaMemset(d, 0, n * 4));
	for (int i = 0; i < o->iters; i++) {
		launch(d, n, 1, 1, o->kernel_us);
		if (!o->fixed)
			CHECK(cudaMemset(m, 0, n * 4)); /* FFM-PLANT: cudart managed_memset */
		else
			launch(m, n, 0, 0, 0);
		cpu_work(o->cpu_us);
	}
	CHECK(cudaDeviceSynchronize());
	for (size_t i = 0; i < n; i++)
		sum += m[i];
	CHECK(cudaFree(m));
	CHECK(cudaFree(d));
	return sum;
}

/* Every sync is needed: the result is read right after it. --fixed changes nothing. */
static __attribute__((noinline)) uint64_t control(const struct opts *o)
{
	const size_t n = 4096;
	unsigned *d, *h;
	uint64_t sum = 0;

	CHECK(cudaMalloc(&d, n * 4));
	CHECK(cudaMallocHost(&h, n * 4));
	CHECK(cudaMemset(d, 0, n * 4));
	for (int i = 0; i < o->iters; i++) {
		cpu_work(o->cpu_us);
		launch(d, n, 1, 1, o->kernel_us);
		CHECK(cudaMemcpyAsync(h, d, n * 4, cudaMemcpyDeviceToHost, 0));
		CHECK(cudaStreamSynchronize(0));
		sum += h[i % n];
	}
	CHECK(cudaFreeHost(h));
	CHECK(cudaFree(d));
	return sum;
}

int main(int argc, char **argv)
{
	static const struct {
		const char *name;
		uint64_t (*fn)(const struct opts *);
	} problems[] = {
		{ "unnecessary_sync", unnecessary_sync }, { "misplaced_sync", misplaced_sync },
		{ "free_in_loop", free_in_loop },	  { "dup_transfer", dup_transfer },
		{ "pageable_async", pageable_async },	  { "managed_memset", managed_memset },
		{ "control", control },
	};
	struct opts o = { 400, 500, 1000, false };
	const char *problem = NULL;
	double t0;
	uint64_t sum;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--fixed"))
			o.fixed = true;
		else if (!strcmp(argv[i], "--problem") && i + 1 < argc)
			problem = argv[++i];
		else if (!strcmp(argv[i], "--iters") && i + 1 < argc)
			o.iters = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--kernel-us") && i + 1 < argc)
			o.kernel_us = atof(argv[++i]);
		else if (!strcmp(argv[i], "--cpu-us") && i + 1 < argc)
			o.cpu_us = atof(argv[++i]);
		else {
			fprintf(stderr, "usage: %s --problem NAME [--fixed] [--iters N] [--kernel-us K] [--cpu-us C]\n", argv[0]);
			return 2;
		}
	}
	if (o.iters <= 0 || o.kernel_us < 0 || o.cpu_us < 0) {
		fprintf(stderr, "%s: iters must be > 0, times >= 0\n", argv[0]);
		return 2;
	}
	for (size_t i = 0; i < sizeof(problems) / sizeof(problems[0]); i++) {
		if (!problem || strcmp(problem, problems[i].name))
			continue;
		t0 = now_s();
		CHECK(cudaFree(0)); /* create the context inside the timed region, as an app would */
		printf("PARAMS cudart %s fixed=%d iters=%d kernel-us=%g cpu-us=%g\n", problem, o.fixed,
		       o.iters, o.kernel_us, o.cpu_us);
		sum = problems[i].fn(&o);
		printf("CHECKSUM %016llx\nWALL_S %.6f\n", (unsigned long long)sum, now_s() - t0);
		return 0;
	}
	fprintf(stderr, "%s: unknown or missing --problem\n", argv[0]);
	return 2;
}
