/* SPDX-License-Identifier: MIT */
/* Shared code of the ffm workloads; the contract is in wl.h. */
#include "wl.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* kernels.ptx as one NUL-terminated C string (generated into $(O)/workloads by workloads.mk). */
static const char wl_ptx[] =
#include "kernels_ptx.h"
	;

/*
 * Largest grid wl_work launches: 128 blocks of 256 threads are resident together on any GPU with
 * 16 or more SMs (8 such blocks fit per SM from sm_75 on), so every thread's busy-wait overlaps
 * and the kernel lasts ns. A bigger grid would run in waves and multiply the duration.
 */
#define WL_BLOCK 256u
#define WL_MAX_GRID 128u

uint64_t wl_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

void wl_cuda_fail(CUresult r, const char *expr, const char *file, int line)
{
	const char *name = NULL, *desc = NULL;

	/* Both may fail (e.g. before cuInit on some drivers): print the number then. */
	if (cuGetErrorName(r, &name) != CUDA_SUCCESS)
		name = NULL;
	if (cuGetErrorString(r, &desc) != CUDA_SUCCESS)
		desc = NULL;
	fprintf(stderr, "%s:%d: %s failed: %s (%d)%s%s\n", file, line, expr,
		name ? name : "CUDA_ERROR_?", (int)r, desc ? ": " : "", desc ? desc : "");
	exit(1);
}

void *wl_xmalloc(size_t n)
{
	void *p = malloc(n ? n : 1);

	if (!p) {
		fprintf(stderr, "out of memory allocating %zu bytes\n", n);
		exit(1);
	}
	return p;
}

uint64_t wl_fnv1a(uint64_t h, const void *p, size_t n)
{
	const unsigned char *b = p;

	for (size_t i = 0; i < n; i++) {
		h ^= b[i];
		h *= 0x100000001b3ULL;
	}
	return h;
}

uint64_t wl_hash_device(uint64_t h, CUdeviceptr buf, size_t n)
{
	uint32_t *host = wl_xmalloc(n * sizeof(*host));

	CK(cuMemcpyDtoH(host, buf, n * sizeof(*host)));
	h = wl_fnv1a(h, host, n * sizeof(*host));
	free(host);
	return h;
}

/* FFM_WL_TRACE=FILE: the time each wl_cpu_work call starts is appended to FILE (8 bytes,
 * CLOCK_MONOTONIC ns): in a loop that syncs right before it, when each iteration's sync
 * returned. A test tells calls that never happened (the machine was busy) from calls lost. */
static void trace_point(uint64_t t)
{
	static int fd = -2;

	if (fd == -2) {
		const char *p = getenv("FFM_WL_TRACE");

		fd = p && *p ? open(p, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644) : -1;
	}
	if (fd >= 0 && write(fd, &t, sizeof(t)) != (ssize_t)sizeof(t))
		fd = -1;
}

void wl_cpu_work(unsigned long long ns)
{
	uint64_t end = wl_now_ns() + ns;

	trace_point(end - ns);

	/* The clock read is the work: a vDSO call that keeps the CPU busy, never sleeps. */
	while (wl_now_ns() < end)
		;
}

void wl_spin(struct wl *w, CUstream s, unsigned long long ns)
{
	void *args[] = { &ns };

	CK(cuLaunchKernel(w->fn_spin, 1, 1, 1, 1, 1, 1, 0, s, args, NULL));
}

void wl_work(struct wl *w, CUstream s, CUdeviceptr buf, unsigned long long n, unsigned int mul,
	     unsigned int add, unsigned long long ns)
{
	unsigned long long blocks = (n + WL_BLOCK - 1) / WL_BLOCK;
	void *args[] = { &buf, &n, &mul, &add, &ns };

	if (blocks == 0)
		blocks = 1;
	if (blocks > WL_MAX_GRID)
		blocks = WL_MAX_GRID;
	CK(cuLaunchKernel(w->fn_work, (unsigned int)blocks, 1, 1, WL_BLOCK, 1, 1, 0, s, args,
			  NULL));
}

static void usage(const struct wl *w, const struct wl_opt *opts, FILE *f)
{
	fprintf(f, "usage: %s [--fixed] [--iters N]", w->name);
	for (const struct wl_opt *o = opts; o && o->name; o++)
		fprintf(f, " [--%s N]", o->name);
	fprintf(f, "\n  --fixed      apply the fix for the planted problem (same CHECKSUM)\n"
		   "  --iters N    main loop iterations (default %lld)\n",
		w->iters);
	for (const struct wl_opt *o = opts; o && o->name; o++)
		fprintf(f, "  --%-11s %s (default %lld)\n", o->name, o->help, *o->val);
	fprintf(f, "env FFM_SCHED=spin|yield|blocking selects the context's wait mode\n");
	fprintf(f, "env FFM_WL_FORK=1 runs the workload in a forked child (no exec)\n");
	fprintf(f, "env FFM_WL_TRACE=FILE appends the start time of each CPU-work step to FILE\n");
}

static int parse_ll(const char *s, long long *v)
{
	char *end;

	errno = 0;
	*v = strtoll(s, &end, 0);
	return errno || end == s || *end || *v < 0 ? -EINVAL : 0;
}

static void parse_args(struct wl *w, int argc, char **argv, const struct wl_opt *opts)
{
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *val = NULL;
		long long *dst = NULL;
		size_t len;

		if (!strcmp(a, "--fixed")) {
			w->fixed = 1;
			continue;
		}
		if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
			usage(w, opts, stdout);
			exit(0);
		}
		if (strncmp(a, "--", 2)) {
			fprintf(stderr, "%s: unexpected argument '%s' (see --help)\n", w->name, a);
			exit(2);
		}
		a += 2;
		len = strcspn(a, "=");
		if (len == 5 && !strncmp(a, "iters", 5))
			dst = &w->iters;
		for (const struct wl_opt *o = opts; !dst && o && o->name; o++)
			if (strlen(o->name) == len && !strncmp(a, o->name, len))
				dst = o->val;
		if (!dst) {
			fprintf(stderr, "%s: unknown option '%s' (see --help)\n", w->name, argv[i]);
			exit(2);
		}
		if (a[len] == '=')
			val = a + len + 1;
		else if (i + 1 < argc)
			val = argv[++i];
		if (!val || parse_ll(val, dst)) {
			fprintf(stderr, "%s: --%.*s needs a non-negative integer\n", w->name, (int)len,
				a);
			exit(2);
		}
	}
}

static unsigned int sched_flags(const char *name)
{
	const char *s = getenv("FFM_SCHED");

	if (!s || !*s || !strcmp(s, "auto"))
		return CU_CTX_SCHED_AUTO;
	if (!strcmp(s, "spin"))
		return CU_CTX_SCHED_SPIN;
	if (!strcmp(s, "yield"))
		return CU_CTX_SCHED_YIELD;
	if (!strcmp(s, "blocking"))
		return CU_CTX_SCHED_BLOCKING_SYNC;
	fprintf(stderr, "%s: FFM_SCHED='%s' is not one of spin, yield, blocking, auto\n", name, s);
	exit(2);
}

void wl_init(struct wl *w, const char *name, int argc, char **argv, const struct wl_opt *opts)
{
	unsigned int flags;

	w->t0_ns = wl_now_ns();
	w->name = name;
	parse_args(w, argc, argv, opts);
	flags = sched_flags(name);

	printf("PARAMS %s fixed=%d iters=%lld", name, w->fixed, w->iters);
	for (const struct wl_opt *o = opts; o && o->name; o++)
		printf(" %s=%lld", o->name, *o->val);
	printf(" sched=%s\n", getenv("FFM_SCHED") ? getenv("FFM_SCHED") : "auto");
	fflush(stdout);
	/* FFM_WL_FORK=1: the workload runs in a child forked here, without exec, as launchers and
	 * worker pools do: the child inherits libcuda mapped (not initialized) from the parent,
	 * which waits for it and exits with its status. */
	if (getenv("FFM_WL_FORK") && !strcmp(getenv("FFM_WL_FORK"), "1")) {
		pid_t pid = fork();
		int st;

		if (pid < 0) {
			perror("fork");
			exit(1);
		}
		if (pid > 0) {
			while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
				;
			exit(WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
		}
	}

	CK(cuInit(0));
	CK(cuDeviceGet(&w->dev, 0));
	/*
	 * The primary context, configured before first use, is what the CUDA runtime creates for
	 * an application; a workload that made its own context would exercise a path real apps
	 * rarely take.
	 */
	CK(cuDevicePrimaryCtxSetFlags(w->dev, flags));
	CK(cuDevicePrimaryCtxRetain(&w->ctx, w->dev));
	CK(cuCtxSetCurrent(w->ctx));
	CK(cuModuleLoadData(&w->mod, wl_ptx));
	CK(cuModuleGetFunction(&w->fn_spin, w->mod, "ffm_spin"));
	CK(cuModuleGetFunction(&w->fn_hang, w->mod, "ffm_hang"));
	/* ffm_work as the CUDA runtime (12, 13) gets its kernels: a library, its CUkernel, the
	 * kernel's CUfunction in this context (ffm names the kernel from either getter). */
	{
		CUkernel k;

		CK(cuLibraryLoadData(&w->lib, wl_ptx, NULL, NULL, 0, NULL, NULL, 0));
		CK(cuLibraryGetKernel(&k, w->lib, "ffm_work"));
		CK(cuKernelGetFunction(&w->fn_work, k));
	}
}

void wl_finish(struct wl *w, uint64_t checksum)
{
	printf("CHECKSUM %016" PRIx64 "\n", checksum);
	if (w->loop_t1_ns > w->loop_t0_ns)
		printf("LOOP_S %.6f\n", (double)(w->loop_t1_ns - w->loop_t0_ns) / 1e9);
	CK(cuModuleUnload(w->mod));
	CK(cuLibraryUnload(w->lib));
	CK(cuDevicePrimaryCtxRelease(w->dev));
	printf("WALL_S %.6f\n", (double)(wl_now_ns() - w->t0_ns) / 1e9);
	fflush(stdout);
}
