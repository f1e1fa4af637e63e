// SPDX-License-Identifier: MIT
/*
 * The planted problems of tests/workloads, written against the CUDA runtime (cudart) as most
 * applications are: the runtime reaches the driver through the versioned entry points it gets
 * from cuGetProcAddress_v2, and some of its calls synchronize without saying so (cudaFree,
 * cudaMemcpyAsync into pageable memory, cudaMemset on managed memory). CUPTI-based tools record
 * these as API calls, not as synchronizations; ffm sees the wait inside them.
 *
 *     cudart_problems --problem NAME [--fixed] [--iters N] [--kernel-us K] [--cpu-us C]
 *                     [--threads T] [--shared] [--every E]
 *     NAME: unnecessary_sync misplaced_sync free_in_loop dup_transfer pageable_async
 *           managed_memset control host_read_memcpy host_read_cublas host_read_thrust threads
 *           pool
 *
 * The host reads (a few bytes of GPU results read by the CPU every iteration and only logged)
 * are fixed by keeping the results on the GPU and reading them every E iterations (default 50);
 * threads runs unnecessary_sync's loop with cudaStreamSynchronize on T host threads (default
 * 4), each with its own stream (--shared: all on the legacy default stream); pool runs the
 * same iters * T steps as tasks of a pool of T workers, each with its own stream, each taking
 * the next task from a shared counter as pools hand out work.
 *
 * Prints PARAMS, CHECKSUM (equal with and without --fixed) and WALL_S lines like the driver-API
 * workloads, then LOOP_S (WALL_S less the context's creation, which moves by tens of ms from
 * one process to the next) and, where the problem times its planted call, PLANT_S (the seconds
 * spent inside it: what the fix of a duplicate copy deletes, as this process saw it).
 * Runs on a real GPU only: the simulated driver cannot host the runtime.
 */
#include <cublas_v2.h>
#include <cub/device/device_reduce.cuh>
#include <cuda_runtime.h>
#include <pthread.h>
#include <thrust/execution_policy.h>
#include <thrust/reduce.h>
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
	int threads, every;
	bool shared;
};

/* Seconds inside the planted call, where a problem times it (dup_transfer). */
static double plant_s;

static void launch_on(cudaStream_t s, unsigned *d, size_t n, unsigned mul, unsigned add, double us)
{
	work<<<1, 256, 0, s>>>(d, n, mul, add, (unsigned long long)(us * 1000));
	CHECK(cudaGetLastError());
}

static void launch(unsigned *d, size_t n, unsigned mul, unsigned add, double us)
{
	launch_on(0, d, n, mul, add, us);
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
		if (!o->fixed) {
			double t = now_s();

			CHECK(cudaMemcpy(d, hin, n * 4, cudaMemcpyHostToDevice)); /* FFM-PLANT: cudart dup_transfer */
			plant_s += now_s() - t;
		}
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

/* 4 bytes of the result read back after every kernel and added to a logged value. */
static __attribute__((noinline)) uint64_t host_read_memcpy(const struct opts *o)
{
	const size_t n = 4096;
	unsigned *d, word, h[4096];
	uint64_t logged = 0;

	CHECK(cudaMalloc(&d, n * 4));
	CHECK(cudaMemset(d, 0, n * 4));
	for (int i = 0; i < o->iters; i++) {
		launch(d, n, 3, i, o->kernel_us);
		if (!o->fixed || (i + 1) % o->every == 0) {
			CHECK(cudaMemcpy(&word, d, 4, cudaMemcpyDeviceToHost)); /* FFM-PLANT: cudart host_read_memcpy */
			logged += word;
		}
		cpu_work(o->cpu_us);
	}
	CHECK(cudaMemcpy(h, d, sizeof(h), cudaMemcpyDeviceToHost));
	CHECK(cudaFree(d));
	printf("LOGGED %llu\n", (unsigned long long)logged);
	return fnv(0xcbf29ce484222325ULL, h, sizeof(h));
}

__global__ void fill(float *x, size_t n, float v)
{
	for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
		x[i] = v + (float)(i % 7);
}

/* The fixed host reads: every E iterations, the E results kept on the GPU, summed; else 0. */
static double read_every(const struct opts *o, int i, const float *res, float *rh)
{
	double sum = 0;

	if ((i + 1) % o->every)
		return 0;
	CHECK(cudaMemcpy(rh, res, o->every * sizeof(float), cudaMemcpyDeviceToHost));
	for (int k = 0; k < o->every; k++)
		sum += rh[k];
	return sum;
}

/* A dot product in cuBLAS's host pointer mode every iteration: the scalar comes back to the
 * host (cuBLAS waits for it), and it is only logged. Fixed: device pointer mode into a device
 * array, read every E iterations. */
static __attribute__((noinline)) uint64_t host_read_cublas(const struct opts *o)
{
	const size_t n = 1 << 16, nw = 4096;
	float *x, *res, r, *rh = (float *)calloc(o->every, sizeof(float));
	unsigned *d;
	double logged = 0;
	cublasHandle_t hd;

	CHECK(cudaMalloc(&x, n * sizeof(float)));
	CHECK(cudaMalloc(&res, o->every * sizeof(float)));
	CHECK(cudaMalloc(&d, nw * 4));
	fill<<<64, 256>>>(x, n, 0.5f);
	if (cublasCreate(&hd) != CUBLAS_STATUS_SUCCESS || !rh)
		exit(1);
	if (o->fixed)
		cublasSetPointerMode(hd, CUBLAS_POINTER_MODE_DEVICE);
	for (int i = 0; i < o->iters; i++) {
		launch(d, nw, 3, i, o->kernel_us);
		if (!o->fixed) {
			cublasSdot(hd, (int)n, x, 1, x, 1, &r); /* FFM-PLANT: cudart host_read_cublas */
			logged += r;
		} else {
			cublasSdot(hd, (int)n, x, 1, x, 1, res + i % o->every);
			logged += read_every(o, i, res, rh);
		}
		cpu_work(o->cpu_us);
	}
	CHECK(cudaDeviceSynchronize());
	cublasDestroy(hd);
	CHECK(cudaFree(d));
	CHECK(cudaFree(res));
	CHECK(cudaFree(x));
	free(rh);
	printf("LOGGED %.1f\n", logged);
	return (uint64_t)o->iters;
}

/* thrust::reduce returns its sum to the host every iteration (it also allocates and frees its
 * temporary storage each call). Fixed: cub::DeviceReduce into a device array with storage
 * allocated once, read every E iterations. */
static __attribute__((noinline)) uint64_t host_read_thrust(const struct opts *o)
{
	const size_t n = 1 << 16, nw = 4096;
	float *x, *res, *rh = (float *)calloc(o->every, sizeof(float));
	unsigned *d;
	void *tmp = NULL;
	size_t tmp_bytes = 0;
	double logged = 0;

	CHECK(cudaMalloc(&x, n * sizeof(float)));
	CHECK(cudaMalloc(&res, o->every * sizeof(float)));
	CHECK(cudaMalloc(&d, nw * 4));
	fill<<<64, 256>>>(x, n, 0.25f);
	CHECK(cub::DeviceReduce::Sum(tmp, tmp_bytes, x, res, (int)n));
	CHECK(cudaMalloc(&tmp, tmp_bytes));
	if (!rh)
		exit(1);
	for (int i = 0; i < o->iters; i++) {
		launch(d, nw, 3, i, o->kernel_us);
		if (!o->fixed) {
			logged += thrust::reduce(thrust::device, x, x + n); /* FFM-PLANT: cudart host_read_thrust */
		} else {
			CHECK(cub::DeviceReduce::Sum(tmp, tmp_bytes, x, res + i % o->every, (int)n));
			logged += read_every(o, i, res, rh);
		}
		cpu_work(o->cpu_us);
	}
	CHECK(cudaDeviceSynchronize());
	CHECK(cudaFree(tmp));
	CHECK(cudaFree(d));
	CHECK(cudaFree(res));
	CHECK(cudaFree(x));
	free(rh);
	printf("LOGGED %.1f\n", logged);
	return (uint64_t)o->iters;
}

struct worker {
	const struct opts *o;
	cudaStream_t s;
	unsigned *d;
	int seed;
	int *next;	/* pool: the shared task counter */
	uint64_t tasks; /* pool: the tasks this worker ran */
};

static __attribute__((noinline)) void thread_step(struct worker *k, int i)
{
	launch_on(k->s, k->d, 4096, 3, i + k->seed, k->o->kernel_us);
	if (!k->o->fixed)
		CHECK(cudaStreamSynchronize(k->s)); /* FFM-PLANT: cudart threads */
	cpu_work(k->o->cpu_us);
}

static void *thread_loop(void *arg)
{
	struct worker *k = (struct worker *)arg;

	for (int i = 0; i < k->o->iters; i++)
		thread_step(k, i);
	CHECK(cudaStreamSynchronize(k->s));
	return NULL;
}

/* A pool task: a step of unnecessary_sync's loop, on whichever worker took it. */
static __attribute__((noinline)) void pool_task(struct worker *k, int i)
{
	launch_on(k->s, k->d, 4096, 3, i, k->o->kernel_us);
	if (!k->o->fixed)
		CHECK(cudaStreamSynchronize(k->s)); /* FFM-PLANT: cudart pool */
	cpu_work(k->o->cpu_us);
}

static void *pool_loop(void *arg)
{
	struct worker *k = (struct worker *)arg;
	int n = k->o->iters * k->o->threads, i;

	while ((i = __atomic_fetch_add(k->next, 1, __ATOMIC_RELAXED)) < n) {
		pool_task(k, i);
		k->tasks++;
	}
	CHECK(cudaStreamSynchronize(k->s));
	return NULL;
}

/* T host threads running @loop side by side. The checksum hashes each one's buffer, or for a
 * pool, where which worker ran which task changes from run to run, the tasks run. */
static uint64_t workers(const struct opts *o, void *(*loop)(void *))
{
	struct worker k[64];
	pthread_t th[64];
	uint64_t h = 0xcbf29ce484222325ULL, tasks = 0;
	unsigned buf[4096];
	int next = 0;

	for (int t = 0; t < o->threads; t++) {
		k[t] = (struct worker){ o, 0, NULL, t * 7919, loop == pool_loop ? &next : NULL, 0 };
		if (!o->shared)
			CHECK(cudaStreamCreateWithFlags(&k[t].s, cudaStreamNonBlocking));
		CHECK(cudaMalloc(&k[t].d, sizeof(buf)));
		CHECK(cudaMemset(k[t].d, 0, sizeof(buf)));
	}
	CHECK(cudaDeviceSynchronize());
	for (int t = 0; t < o->threads; t++)
		if (pthread_create(&th[t], NULL, loop, &k[t]))
			exit(1);
	for (int t = 0; t < o->threads; t++)
		pthread_join(th[t], NULL);
	for (int t = 0; t < o->threads; t++) {
		CHECK(cudaMemcpy(buf, k[t].d, sizeof(buf), cudaMemcpyDeviceToHost));
		if (!k[t].next)
			h = fnv(h, buf, sizeof(buf));
		tasks += k[t].tasks;
		CHECK(cudaFree(k[t].d));
		if (k[t].s)
			CHECK(cudaStreamDestroy(k[t].s));
	}
	return k[0].next ? fnv(h, &tasks, sizeof(tasks)) : h;
}

/* unnecessary_sync's loop on T host threads that wait side by side. */
static __attribute__((noinline)) uint64_t threads(const struct opts *o)
{
	return workers(o, thread_loop);
}

/* The same steps as tasks of a pool of T workers. */
static __attribute__((noinline)) uint64_t pool(const struct opts *o)
{
	return workers(o, pool_loop);
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
		{ "host_read_memcpy", host_read_memcpy }, { "host_read_cublas", host_read_cublas },
		{ "host_read_thrust", host_read_thrust }, { "threads", threads }, { "pool", pool },
	};
	struct opts o = { 400, 500, 1000, false, 4, 50, false };
	const char *problem = NULL;
	double t0, t1;
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
		else if (!strcmp(argv[i], "--threads") && i + 1 < argc)
			o.threads = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--every") && i + 1 < argc)
			o.every = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--shared"))
			o.shared = true;
		else {
			fprintf(stderr, "usage: %s --problem NAME [--fixed] [--iters N] [--kernel-us K] [--cpu-us C] [--threads T] [--shared] [--every E]\n", argv[0]);
			return 2;
		}
	}
	if (o.iters <= 0 || o.kernel_us < 0 || o.cpu_us < 0 || o.threads < 1 || o.threads > 64 ||
	    o.every < 1) {
		fprintf(stderr, "%s: iters, every > 0, threads 1 to 64, times >= 0\n", argv[0]);
		return 2;
	}
	for (size_t i = 0; i < sizeof(problems) / sizeof(problems[0]); i++) {
		if (!problem || strcmp(problem, problems[i].name))
			continue;
		t0 = now_s();
		CHECK(cudaFree(0)); /* create the context inside the timed region, as an app would */
		printf("PARAMS cudart %s fixed=%d iters=%d kernel-us=%g cpu-us=%g threads=%d shared=%d every=%d\n",
		       problem, o.fixed, o.iters, o.kernel_us, o.cpu_us, o.threads, o.shared, o.every);
		t1 = now_s();
		sum = problems[i].fn(&o);
		printf("CHECKSUM %016llx\nWALL_S %.6f\nLOOP_S %.6f\n", (unsigned long long)sum,
		       now_s() - t0, now_s() - t1);
		if (plant_s > 0)
			printf("PLANT_S %.6f\n", plant_s);
		return 0;
	}
	fprintf(stderr, "%s: unknown or missing --problem\n", argv[0]);
	return 2;
}
