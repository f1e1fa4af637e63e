// SPDX-License-Identifier: MIT
/*
 * The problem classes of ffm as variants that differ in what sets the price of their fix: the
 * size of the memory involved, the kernel's length against the host's work, who touches managed
 * memory, the host threads, the processes sharing the GPU and the context's schedule flag.
 * Each class has a plain mode (the problem) and --fixed (the fix a user would make, nothing
 * else); the controls' --fixed is the same program, since every sync there is required.
 *
 *     variants --class NAME [--fixed] [--iters N] [--kernel-us K] [--cpu-us C] [--size BYTES]
 *              [--touch host|device|both] [--threads T] [--ranks R] [--every E]
 *              [--sched auto|spin|yield|block]
 *
 * BYTES takes a K or M suffix (KiB, MiB). Each step launches a kernel of K us on the lane's
 * stream and does C us of host work; the class adds its planted call. The classes, what each
 * plants (the FFM-PLANT lines, "variants NAME") and its fix:
 *   unnecessary_sync  a stream sync after every launch; fix: delete it
 *   misplaced_sync    a sync right after a launch and a copy of BYTES, before C us of host work
 *                     that does not need the copy; fix: move it to the copy's first use
 *   managed_memset    cudaMemset of BYTES of managed memory every step, then --touch: the host
 *                     reads every page of it (host), a kernel uses it (device), or a kernel
 *                     writes it and the host reads a word of each page after the step's sync
 *                     (both); fix: a host memset (host), device memory (device, both)
 *   pageable_async    cudaMemcpyAsync of BYTES into pageable memory and a sync right after;
 *                     fix: a pinned buffer and the sync moved to the first use
 *   dup_transfer      the same unchanged BYTES copied to the device every step; fix: copy once
 *   temp_buffers      cudaMalloc, cudaMemsetAsync and cudaFree of a BYTES temporary each step;
 *                     fix: one buffer reused, which the kernel overwrites whole (deletes calls)
 *   lib_host_read     a cuBLAS dot of BYTES in host pointer mode each step, only logged; fix:
 *                     device pointer mode, the results read every E steps (default 50)
 *   free_in_loop      cudaMalloc and cudaFree of a temporary each step; fix: allocate it once
 *   host_read         4 bytes of the result copied back each step, only logged; fix: read
 *                     every E steps
 * The controls, every sync required:
 *   control_feed      the word read each step is the next launch's argument and the seed of
 *                     the data the host copies up for the next step
 *   control_converge  the loop runs until the value read says the work is done
 *   control_result    the host uses the whole BYTES result right after each step's sync
 *
 * --threads T runs the class on T host threads, each with a stream of its own (one thread: the
 * legacy default stream). --ranks R runs R processes of it at once, as ranks of a job on one
 * GPU, and waits for all. --sched sets the context's schedule flag (cudaSetDeviceFlags).
 *
 * Prints PARAMS, CHECKSUM (equal with and without --fixed), WALL_S (from before the context's
 * creation; with --ranks, the job's: from before the fork to the last rank's exit) and LOOP_S
 * (the classes' loops: with --ranks, from the first rank's start to the last rank's end).
 * Runs on a real GPU only: the simulated driver cannot host the runtime.
 */
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define CHECK(x)                                                                                   \
	do {                                                                                       \
		cudaError_t _e = (x);                                                              \
		if (_e != cudaSuccess) {                                                           \
			fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x,                 \
				cudaGetErrorName(_e));                                             \
			exit(1);                                                                   \
		}                                                                                  \
	} while (0)

#define PAGE 4096u
#define NOINLINE __attribute__((noinline))
#define D2H cudaMemcpyDeviceToHost
#define H2D cudaMemcpyHostToDevice

struct opts {
	const char *cls, *touch, *sched;
	bool fixed;
	int iters, threads, ranks, every;
	double kernel_us, cpu_us;
	size_t size;
};

__device__ size_t first(void)
{
	return blockIdx.x * blockDim.x + threadIdx.x;
}

__device__ size_t stride(void)
{
	return (size_t)gridDim.x * blockDim.x;
}

/* Busy-waits ns on the GPU's global timer, then buf[i] = buf[i] * mul + add for i < n. */
__global__ void work(unsigned *buf, size_t n, unsigned mul, unsigned add, unsigned long long ns)
{
	unsigned long long t0, t;

	asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
	do
		asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
	while (t - t0 < ns);
	for (size_t i = first(); i < n; i += stride())
		buf[i] = buf[i] * mul + add;
}

__global__ void accumulate(unsigned *dst, const unsigned *src, size_t n)
{
	for (size_t i = first(); i < n; i += stride())
		dst[i] += src[i];
}

__global__ void fill(float *x, size_t n, float v)
{
	for (size_t i = first(); i < n; i += stride())
		x[i] = v + (float)(i % 7);
}

/* At most 128 blocks of 256: resident together on the GPU, so the busy-wait lasts us once. */
static unsigned grid(size_t n)
{
	size_t b = (n + 255) / 256;

	return b < 1 ? 1 : b > 128 ? 128 : (unsigned)b;
}

static void launch(cudaStream_t s, unsigned *d, size_t n, unsigned mul, unsigned add, double us)
{
	work<<<grid(n), 256, 0, s>>>(d, n, mul, add, (unsigned long long)(us * 1000));
	CHECK(cudaGetLastError());
}

static void add_into(cudaStream_t s, unsigned *dst, const unsigned *src, size_t n)
{
	accumulate<<<grid(n), 256, 0, s>>>(dst, src, n);
	CHECK(cudaGetLastError());
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Host work of a controlled duration (what the application does between GPU calls). */
static NOINLINE void cpu_work(double us)
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

static void *xmalloc(size_t n)
{
	void *p = malloc(n);

	if (!p) {
		fprintf(stderr, "out of memory (%zu bytes)\n", n);
		exit(1);
	}
	return p;
}

/* The n words at d, after the stream's work, hashed: the run's result. */
static uint64_t hash_device(cudaStream_t s, const unsigned *d, size_t n)
{
	unsigned *h = (unsigned *)xmalloc(n * 4);
	uint64_t r;

	CHECK(cudaMemcpyAsync(h, d, n * 4, D2H, s));
	CHECK(cudaStreamSynchronize(s));
	r = fnv(0xcbf29ce484222325ULL, h, n * 4);
	free(h);
	return r;
}

/* n words of device memory, cleared in the stream's order. */
static unsigned *zeros(cudaStream_t s, size_t n)
{
	unsigned *d;

	CHECK(cudaMalloc(&d, n * 4));
	CHECK(cudaMemsetAsync(d, 0, n * 4, s));
	return d;
}

/* hash_device, then d freed: the class's last use of its result. */
static uint64_t hash_free(cudaStream_t s, unsigned *d, size_t n)
{
	uint64_t r = hash_device(s, d, n);

	CHECK(cudaFree(d));
	return r;
}

static size_t words(const struct opts *o)
{
	return o->size / 4 ? o->size / 4 : 1;
}

/* Words 0, step, 2 * step ... (count of them) of w, summed in order. */
static uint64_t sum_words(const unsigned *w, size_t count, size_t step)
{
	uint64_t sum = 0;

	for (size_t k = 0; k < count; k++)
		sum = sum * 31 + w[k * step];
	return sum;
}

/* A sync after every launch although nothing is read until the end. */
static NOINLINE uint64_t unnecessary_sync(const struct opts *o, cudaStream_t s, double *logged)
{
	size_t n = words(o);
	unsigned *d;

	d = zeros(s, n);
	for (int i = 0; i < o->iters; i++) {
		launch(s, d, n, 1, 1, o->kernel_us);
		if (!o->fixed)
			CHECK(cudaStreamSynchronize(s)); /* FFM-PLANT: unnecessary_sync */
		cpu_work(o->cpu_us);
	}
	return hash_free(s, d, n);
}

/* The sync right after the copy; the host work before the first use does not need it. */
static NOINLINE uint64_t misplaced_sync(const struct opts *o, cudaStream_t s, double *logged)
{
	size_t n = words(o);
	unsigned *d, *h;
	uint64_t sum = 0;

	d = zeros(s, n);
	CHECK(cudaMallocHost(&h, n * 4));
	for (int i = 0; i < o->iters; i++) {
		launch(s, d, n, 1, 1, o->kernel_us);
		CHECK(cudaMemcpyAsync(h, d, n * 4, D2H, s));
		if (!o->fixed)
			CHECK(cudaStreamSynchronize(s)); /* FFM-PLANT: misplaced_sync */
		cpu_work(o->cpu_us);
		if (o->fixed)
			CHECK(cudaStreamSynchronize(s)); /* the fix: at the first use */
		sum = sum * 31 + h[(size_t)i * 7919 % n]; /* first use */
	}
	CHECK(cudaFreeHost(h));
	CHECK(cudaFree(d));
	return sum;
}

/* The memory a step resets: managed (plain), or what the fix uses instead. */
struct managed_bufs {
	unsigned *m, *d, *samples; /* managed; device (the fix of device, both); pinned */
	bool host, device;	   /* who touches it between the calls */
};

/* One step's reset of the buffer to v and its use by the host and/or the device. */
static uint64_t managed_step(const struct opts *o, cudaStream_t s, struct managed_bufs *b,
			     int i)
{
	size_t n = words(o), pages = o->size / PAGE;
	unsigned v = i & 0xff, *buf = o->fixed && b->device ? b->d : b->m;

	if (!o->fixed)
		CHECK(cudaMemset(b->m, v, o->size)); /* FFM-PLANT: managed_memset */
	else if (!b->device)
		memset(b->m, v, o->size); /* the fix: the host sets what only the host reads */
	else
		CHECK(cudaMemsetAsync(b->d, v, o->size, s)); /* the fix: device memory */
	if (b->device)
		launch(s, buf, n, 3, i, 0); /* the device uses it */
	if (!b->host)
		return 0;
	if (!b->device)
		return sum_words(b->m, pages, PAGE / 4); /* host: reads it right after the set */
	if (o->fixed) /* both, fixed: a word of each page copied back */
		CHECK(cudaMemcpy2DAsync(b->samples, 4, b->d, PAGE, 4, pages, D2H,
					s));
	CHECK(cudaStreamSynchronize(s)); /* both: the host needs the step's result */
	return o->fixed ? sum_words(b->samples, pages, 1) : sum_words(b->m, pages, PAGE / 4);
}

/* cudaMemset on managed memory each step: it waits for the GPU, and the pages move to the
 * GPU and back to whoever touches them next. */
static NOINLINE uint64_t managed_memset(const struct opts *o, cudaStream_t s, double *logged)
{
	struct managed_bufs b = { NULL, NULL, NULL, strcmp(o->touch, "device") != 0,
				  strcmp(o->touch, "host") != 0 };
	size_t n = words(o), pages = o->size / PAGE;
	unsigned *k;
	uint64_t sum = 0;

	k = zeros(s, 4096);
	CHECK(cudaMallocManaged(&b.m, o->size));
	memset(b.m, 0, o->size); /* the host touched it last */
	CHECK(cudaMalloc(&b.d, o->size));
	CHECK(cudaMallocHost(&b.samples, pages * 4 + 4));
	for (int i = 0; i < o->iters; i++) {
		launch(s, k, 4096, 1, 1, o->kernel_us); /* the step's own GPU work */
		sum = sum * 31 + managed_step(o, s, &b, i);
		cpu_work(o->cpu_us);
	}
	CHECK(cudaStreamSynchronize(s));
	if (o->fixed && b.device)
		sum = sum * 31 + hash_device(s, b.d, n);
	else
		sum = sum * 31 + fnv(0xcbf29ce484222325ULL, b.m, o->size);
	sum = sum * 31 + hash_free(s, k, 4096);
	CHECK(cudaFreeHost(b.samples));
	CHECK(cudaFree(b.d));
	CHECK(cudaFree(b.m));
	return sum;
}

/* cudaMemcpyAsync into pageable memory returns only after the copy, through a staging
 * buffer; the sync after it is where the program thinks it waits. */
static NOINLINE uint64_t pageable_async(const struct opts *o, cudaStream_t s, double *logged)
{
	size_t n = words(o);
	unsigned *d, *h;
	uint64_t sum = 0;

	d = zeros(s, n);
	if (o->fixed)
		CHECK(cudaMallocHost(&h, n * 4)); /* the fix: pinned */
	else
		h = (unsigned *)xmalloc(n * 4);
	for (int i = 0; i < o->iters; i++) {
		launch(s, d, n, 1, 1, o->kernel_us);
		CHECK(cudaMemcpyAsync(h, d, n * 4, D2H, s)); /* FFM-PLANT: pageable_async */
		if (!o->fixed)
			CHECK(cudaStreamSynchronize(s)); /* FFM-PLANT: pageable_async */
		cpu_work(o->cpu_us);
		if (o->fixed)
			CHECK(cudaStreamSynchronize(s)); /* the fix: at the first use */
		sum = sum * 31 + h[(size_t)i * 7919 % n];
	}
	if (o->fixed)
		CHECK(cudaFreeHost(h));
	else
		free(h);
	CHECK(cudaFree(d));
	return sum;
}

/* The same unchanged host buffer copied to the device every step. */
static NOINLINE uint64_t dup_transfer(const struct opts *o, cudaStream_t s, double *logged)
{
	size_t n = words(o), m = n < 4096 ? n : 4096;
	unsigned *in, *out, *h = (unsigned *)xmalloc(n * 4);

	for (size_t i = 0; i < n; i++)
		h[i] = (unsigned)i;
	CHECK(cudaMalloc(&in, n * 4));
	out = zeros(s, m);
	if (o->fixed)
		CHECK(cudaMemcpyAsync(in, h, n * 4, H2D, s)); /* the fix: once */
	for (int i = 0; i < o->iters; i++) {
		if (!o->fixed)
			CHECK(cudaMemcpyAsync(in, h, n * 4, H2D, s)); /* FFM-PLANT: dup_transfer */
		launch(s, out, m, 1, 1, o->kernel_us);
		add_into(s, out, in, m);
		cpu_work(o->cpu_us);
	}
	uint64_t r = hash_free(s, out, m);
	CHECK(cudaFree(in));
	free(h);
	return r;
}

/* A temporary allocated, cleared and freed every step (cudaFree waits for the GPU). */
static NOINLINE uint64_t temp_buffers(const struct opts *o, cudaStream_t s, double *logged)
{
	size_t n = words(o);
	unsigned *out, *t = NULL;

	out = zeros(s, n);
	if (o->fixed)
		CHECK(cudaMalloc(&t, n * 4)); /* the fix: one buffer, reused */
	for (int i = 0; i < o->iters; i++) {
		if (!o->fixed) {
			CHECK(cudaMalloc(&t, n * 4)); /* FFM-PLANT: temp_buffers */
			CHECK(cudaMemsetAsync(t, 0, n * 4, s)); /* FFM-PLANT: temp_buffers */
		}
		/* t = i: on the cleared buffer (plain), or overwriting it whole (fixed) */
		launch(s, t, n, o->fixed ? 0 : 1, i, o->kernel_us);
		add_into(s, out, t, n);
		if (!o->fixed)
			CHECK(cudaFree(t)); /* FFM-PLANT: temp_buffers */
		cpu_work(o->cpu_us);
	}
	uint64_t r = hash_free(s, out, n);
	if (o->fixed)
		CHECK(cudaFree(t));
	return r;
}

/* The fixed host reads: every E steps, the E results kept on the GPU, summed; else 0. */
static double read_every(const struct opts *o, cudaStream_t s, int i, const float *res,
			 float *rh)
{
	double sum = 0;

	if ((i + 1) % o->every)
		return 0;
	CHECK(cudaMemcpyAsync(rh, res, o->every * sizeof(float), D2H, s));
	CHECK(cudaStreamSynchronize(s));
	for (int k = 0; k < o->every; k++)
		sum += rh[k];
	return sum;
}

/* A dot product in cuBLAS's host pointer mode every step: cuBLAS waits for the scalar, which
 * is only logged. Fixed: device pointer mode into a device array, read every E steps. */
static NOINLINE uint64_t lib_host_read(const struct opts *o, cudaStream_t s, double *logged)
{
	size_t n = words(o);
	float *x, *res, r, *rh;
	unsigned *d;
	cublasHandle_t hd;

	CHECK(cudaMalloc(&x, n * sizeof(float)));
	CHECK(cudaMalloc(&res, o->every * sizeof(float)));
	CHECK(cudaMallocHost(&rh, o->every * sizeof(float)));
	d = zeros(s, 4096);
	fill<<<grid(n), 256, 0, s>>>(x, n, 0.5f);
	if (cublasCreate(&hd) != CUBLAS_STATUS_SUCCESS || cublasSetStream(hd, s))
		exit(1);
	if (o->fixed && cublasSetPointerMode(hd, CUBLAS_POINTER_MODE_DEVICE))
		exit(1);
	for (int i = 0; i < o->iters; i++) {
		launch(s, d, 4096, 3, i, o->kernel_us);
		if (!o->fixed) {
			cublasSdot(hd, (int)n, x, 1, x, 1, &r); /* FFM-PLANT: lib_host_read */
			*logged += r;
		} else {
			cublasSdot(hd, (int)n, x, 1, x, 1, res + i % o->every);
			*logged += read_every(o, s, i, res, rh);
		}
		cpu_work(o->cpu_us);
	}
	uint64_t h = hash_free(s, d, 4096);
	cublasDestroy(hd);
	CHECK(cudaFreeHost(rh));
	CHECK(cudaFree(res));
	CHECK(cudaFree(x));
	return h;
}

/* cudaMalloc/cudaFree of a temporary in the loop: cudaFree waits for the GPU. */
static NOINLINE uint64_t free_in_loop(const struct opts *o, cudaStream_t s, double *logged)
{
	size_t n = words(o);
	unsigned *d, *tmp = NULL;

	d = zeros(s, n);
	if (o->fixed)
		CHECK(cudaMalloc(&tmp, 4096)); /* the fix: allocated once */
	for (int i = 0; i < o->iters; i++) {
		launch(s, d, n, 1, 1, o->kernel_us);
		if (!o->fixed)
			CHECK(cudaMalloc(&tmp, 4096)); /* FFM-PLANT: free_in_loop */
		launch(s, tmp, 0, 1, 0, 0); /* a kernel that is handed the temporary */
		if (!o->fixed)
			CHECK(cudaFree(tmp)); /* FFM-PLANT: free_in_loop */
		cpu_work(o->cpu_us);
	}
	if (o->fixed)
		CHECK(cudaFree(tmp));
	return hash_free(s, d, n);
}

/* 4 bytes of the result read back after every kernel and added to a logged value. */
static NOINLINE uint64_t host_read(const struct opts *o, cudaStream_t s, double *logged)
{
	size_t n = words(o);
	unsigned *d, *word;

	d = zeros(s, n);
	CHECK(cudaMallocHost(&word, 4));
	for (int i = 0; i < o->iters; i++) {
		launch(s, d, n, 3, i, o->kernel_us);
		if (!o->fixed || (i + 1) % o->every == 0) {
			CHECK(cudaMemcpyAsync(word, d, 4, D2H, s)); /* FFM-PLANT: host_read */
			CHECK(cudaStreamSynchronize(s)); /* FFM-PLANT: host_read */
			*logged += *word;
		}
		cpu_work(o->cpu_us);
	}
	uint64_t r = hash_free(s, d, n);
	CHECK(cudaFreeHost(word));
	return r;
}

/* Control: the word read each step is the next launch's argument, and the host computes the
 * next step's input from it. Every sync is required; --fixed changes nothing. */
static NOINLINE uint64_t control_feed(const struct opts *o, cudaStream_t s, double *logged)
{
	const size_t m = 256;
	size_t n = words(o);
	unsigned *d, *in, *hin, *word, arg = 1;
	uint64_t sum = 0;

	d = zeros(s, n);
	CHECK(cudaMalloc(&in, m * 4));
	CHECK(cudaMallocHost(&hin, m * 4));
	CHECK(cudaMallocHost(&word, 4));
	for (int i = 0; i < o->iters; i++) {
		for (size_t j = 0; j < m; j++)
			hin[j] = arg * (unsigned)(j + 1); /* the next copy's data, from it */
		CHECK(cudaMemcpyAsync(in, hin, m * 4, H2D, s));
		launch(s, d, n, 3, arg, o->kernel_us);
		add_into(s, d, in, n < m ? n : m);
		CHECK(cudaMemcpyAsync(word, d, 4, D2H, s));
		CHECK(cudaStreamSynchronize(s)); /* FFM-NOTE: control_feed required */
		arg = *word % 1000 + 1; /* the next launch's argument */
		sum = sum * 31 + arg;
		cpu_work(o->cpu_us);
	}
	CHECK(cudaFreeHost(word));
	CHECK(cudaFreeHost(hin));
	CHECK(cudaFree(in));
	CHECK(cudaFree(d));
	return sum;
}

/* Control: the loop runs until the value read says it is done (--iters steps of +1). */
static NOINLINE uint64_t control_converge(const struct opts *o, cudaStream_t s, double *logged)
{
	size_t n = words(o);
	unsigned *d, *word;
	int steps = 0;

	d = zeros(s, n);
	CHECK(cudaMallocHost(&word, 4));
	for (;;) {
		launch(s, d, n, 1, 1, o->kernel_us);
		CHECK(cudaMemcpyAsync(word, d, 4, D2H, s));
		CHECK(cudaStreamSynchronize(s)); /* FFM-NOTE: control_converge required */
		steps++;
		if (*word >= (unsigned)o->iters) /* done? decides whether to launch again */
			break;
		cpu_work(o->cpu_us);
	}
	CHECK(cudaFreeHost(word));
	CHECK(cudaFree(d));
	return (uint64_t)steps;
}

/* Control: the host uses the whole result right after each step's sync. */
static NOINLINE uint64_t control_result(const struct opts *o, cudaStream_t s, double *logged)
{
	size_t n = words(o);
	unsigned *d, *h;
	uint64_t sum = 0;

	d = zeros(s, n);
	CHECK(cudaMallocHost(&h, n * 4));
	for (int i = 0; i < o->iters; i++) {
		launch(s, d, n, 3, i, o->kernel_us);
		CHECK(cudaMemcpyAsync(h, d, n * 4, D2H, s));
		CHECK(cudaStreamSynchronize(s)); /* FFM-NOTE: control_result required */
		sum = fnv(sum, h, n * 4); /* the use: all of it, at once */
		cpu_work(o->cpu_us);
	}
	CHECK(cudaFreeHost(h));
	CHECK(cudaFree(d));
	return sum;
}

typedef uint64_t (*class_fn)(const struct opts *, cudaStream_t, double *);

static const struct {
	const char *name;
	class_fn fn;
} classes[] = {
	{ "unnecessary_sync", unnecessary_sync }, { "misplaced_sync", misplaced_sync },
	{ "managed_memset", managed_memset },	  { "pageable_async", pageable_async },
	{ "dup_transfer", dup_transfer },	  { "temp_buffers", temp_buffers },
	{ "lib_host_read", lib_host_read },	  { "free_in_loop", free_in_loop },
	{ "host_read", host_read },		  { "control_feed", control_feed },
	{ "control_converge", control_converge }, { "control_result", control_result },
};

/* A host thread running the class on a stream of its own. */
struct lane {
	const struct opts *o;
	class_fn fn;
	cudaStream_t s;
	uint64_t sum;
	double logged;
};

static void *lane_main(void *arg)
{
	struct lane *l = (struct lane *)arg;

	l->sum = l->fn(l->o, l->s, &l->logged);
	return NULL;
}

/* The class on --threads host threads (one: the calling thread, the legacy default stream). */
static uint64_t run_lanes(const struct opts *o, class_fn fn, double *logged)
{
	struct lane l[64];
	pthread_t th[64];
	uint64_t h = 0xcbf29ce484222325ULL;

	for (int t = 0; t < o->threads; t++) {
		l[t] = (struct lane){ o, fn, 0, 0, 0 };
		if (o->threads > 1)
			CHECK(cudaStreamCreateWithFlags(&l[t].s, cudaStreamNonBlocking));
	}
	CHECK(cudaDeviceSynchronize());
	if (o->threads == 1)
		lane_main(&l[0]);
	for (int t = 0; o->threads > 1 && t < o->threads; t++)
		if (pthread_create(&th[t], NULL, lane_main, &l[t]))
			exit(1);
	for (int t = 0; o->threads > 1 && t < o->threads; t++)
		pthread_join(th[t], NULL);
	for (int t = 0; t < o->threads; t++) {
		h = fnv(h, &l[t].sum, sizeof(l[t].sum));
		*logged += l[t].logged;
		if (l[t].s)
			CHECK(cudaStreamDestroy(l[t].s));
	}
	return h;
}

/* What one process of the job hands back. */
struct result {
	double loop0, loop1, logged;
	uint64_t sum;
	int done;
};

static void run_process(const struct opts *o, class_fn fn, struct result *r)
{
	static const struct {
		const char *name;
		unsigned flag;
	} sched[] = { { "auto", cudaDeviceScheduleAuto },
		      { "spin", cudaDeviceScheduleSpin },
		      { "yield", cudaDeviceScheduleYield },
		      { "block", cudaDeviceScheduleBlockingSync } };

	for (size_t i = 0; i < sizeof(sched) / sizeof(sched[0]); i++)
		if (!strcmp(o->sched, sched[i].name))
			CHECK(cudaSetDeviceFlags(sched[i].flag));
	CHECK(cudaFree(0)); /* the context, created inside WALL_S as an application's is */
	r->loop0 = now_s();
	r->sum = run_lanes(o, fn, &r->logged);
	r->loop1 = now_s();
	r->done = 1;
}

/* --ranks R: R processes of the class at once on the one GPU; waits for all of them. */
static int run_job(const struct opts *o, class_fn fn, struct result *job)
{
	size_t bytes = o->ranks * sizeof(struct result);
	struct result *r = (struct result *)mmap(NULL, bytes, PROT_READ | PROT_WRITE,
						  MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	int failed = 0;

	if (r == MAP_FAILED) {
		perror("mmap");
		return 1;
	}
	memset(r, 0, bytes);
	fflush(stdout);
	for (int k = 0; k < o->ranks; k++) {
		pid_t p = fork();

		if (p < 0) {
			perror("fork");
			return 1;
		}
		if (p == 0) { /* a rank: no CUDA was touched before the fork */
			run_process(o, fn, &r[k]);
			_exit(0);
		}
	}
	for (int k = 0; k < o->ranks; k++) {
		int st;

		if (wait(&st) < 0 || !WIFEXITED(st) || WEXITSTATUS(st))
			failed = 1;
	}
	*job = (struct result){ r[0].loop0, r[0].loop1, 0, 0xcbf29ce484222325ULL, 1 };
	for (int k = 0; k < o->ranks; k++) {
		failed |= !r[k].done;
		job->loop0 = r[k].loop0 < job->loop0 ? r[k].loop0 : job->loop0;
		job->loop1 = r[k].loop1 > job->loop1 ? r[k].loop1 : job->loop1;
		job->logged += r[k].logged;
		job->sum = fnv(job->sum, &r[k].sum, sizeof(r[k].sum));
	}
	munmap(r, bytes);
	return failed;
}

/* BYTES[K|M] -> bytes; 0 on a malformed size. */
static size_t parse_size(const char *s)
{
	char *end;
	unsigned long long v = strtoull(s, &end, 10);

	if (end == s)
		return 0;
	if (*end == 'K' || *end == 'k')
		v <<= 10, end++;
	else if (*end == 'M' || *end == 'm')
		v <<= 20, end++;
	return *end ? 0 : (size_t)v;
}

static int usage(const char *argv0)
{
	fprintf(stderr,
		"usage: %s --class NAME [--fixed] [--iters N] [--kernel-us K] [--cpu-us C]\n"
		"       [--size BYTES[K|M]] [--touch host|device|both] [--threads T] [--ranks R]\n"
		"       [--every E] [--sched auto|spin|yield|block]\n",
		argv0);
	return 2;
}

static int parse(int argc, char **argv, struct opts *o)
{
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;

		if (!strcmp(a, "--fixed")) {
			o->fixed = true;
			continue;
		}
		if (!v)
			return usage(argv[0]);
		i++;
		if (!strcmp(a, "--class"))
			o->cls = v;
		else if (!strcmp(a, "--iters"))
			o->iters = atoi(v);
		else if (!strcmp(a, "--kernel-us"))
			o->kernel_us = atof(v);
		else if (!strcmp(a, "--cpu-us"))
			o->cpu_us = atof(v);
		else if (!strcmp(a, "--size"))
			o->size = parse_size(v);
		else if (!strcmp(a, "--touch"))
			o->touch = v;
		else if (!strcmp(a, "--threads"))
			o->threads = atoi(v);
		else if (!strcmp(a, "--ranks"))
			o->ranks = atoi(v);
		else if (!strcmp(a, "--every"))
			o->every = atoi(v);
		else if (!strcmp(a, "--sched"))
			o->sched = v;
		else
			return usage(argv[0]);
	}
	return 0;
}

static bool valid(const struct opts *o)
{
	const char *sched = " auto spin yield block ", *touch = " host device both ";
	char w[32];

	if (o->iters <= 0 || o->kernel_us < 0 || o->cpu_us < 0 || o->threads < 1 ||
	    o->threads > 64 || o->ranks < 1 || o->ranks > 16 || o->every < 1 || o->size < 4 ||
	    o->size % 4 || o->size > ((size_t)1 << 32))
		return false;
	if (strlen(o->touch) > 16 || strlen(o->sched) > 16)
		return false;
	snprintf(w, sizeof(w), " %s ", o->touch);
	if (!strstr(touch, w))
		return false;
	snprintf(w, sizeof(w), " %s ", o->sched);
	return strstr(sched, w) != NULL;
}

int main(int argc, char **argv)
{
	struct opts o = { NULL, "host", "auto", false, 400, 1, 1, 50, 500, 1000, 16384 };
	struct result r = {};
	class_fn fn = NULL;
	double t0;

	if (parse(argc, argv, &o))
		return 2;
	if (!valid(&o)) {
		fprintf(stderr,
			"%s: iters, every > 0; threads 1-64; ranks 1-16; times >= 0; size 4 B "
			"to 4 GiB in whole words; touch host|device|both; "
			"sched auto|spin|yield|block\n",
			argv[0]);
		return 2;
	}
	for (size_t i = 0; o.cls && i < sizeof(classes) / sizeof(classes[0]); i++)
		if (!strcmp(o.cls, classes[i].name))
			fn = classes[i].fn;
	if (!fn) {
		fprintf(stderr, "%s: unknown or missing --class\n", argv[0]);
		return 2;
	}
	if (!strcmp(o.cls, "managed_memset") && o.size % PAGE) {
		fprintf(stderr, "%s: managed_memset wants --size in whole 4 KiB pages\n", argv[0]);
		return 2;
	}
	printf("PARAMS variants %s fixed=%d iters=%d kernel-us=%g cpu-us=%g size=%zu touch=%s "
	       "threads=%d ranks=%d every=%d sched=%s\n", o.cls, o.fixed, o.iters, o.kernel_us,
	       o.cpu_us, o.size, o.touch, o.threads, o.ranks, o.every, o.sched);
	t0 = now_s();
	if (o.ranks > 1 ? run_job(&o, fn, &r) : (run_process(&o, fn, &r), 0)) {
		fprintf(stderr, "%s: a rank failed\n", argv[0]);
		return 1;
	}
	if (r.logged != 0)
		printf("LOGGED %.1f\n", r.logged);
	printf("CHECKSUM %016llx\nWALL_S %.6f\nLOOP_S %.6f\n", (unsigned long long)r.sum,
	       now_s() - t0, r.loop1 - r.loop0);
	return 0;
}
