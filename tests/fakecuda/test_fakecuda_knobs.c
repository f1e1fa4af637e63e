/* SPDX-License-Identifier: MIT */
/* ffm-test: timing: each knob is checked by timing the simulated driver;
 * tests/run-tests.sh runs it once more when it fails. */
/*
 * What holds before cuInit, and the FAKECUDA_* environment knobs (README.md). The driver reads
 * them once, at cuInit, so each case runs in a forked child that sets its environment and only
 * then loads the library; the child reports its measurements through a pipe.
 */
#include <sys/wait.h>

#include "tests/fakecuda/fk_test.h"

#define FK_SLACK_MS 8.0
#define FK_EARLY_MS 0.2

struct result {
	int init;	 /* cuInit's CUresult */
	int before_init; /* cuMemAlloc_v2 before cuInit */
	int version;
	char name[64];
	double ms[4];
};

/* Runs fn in a child with env ("NAME=value", ...; NULL-terminated) and returns its result. */
static void in_child(const char *const *env, void (*fn)(struct result *r), struct result *out)
{
	int fds[2], status;
	pid_t pid;

	ASSERT_OK(pipe(fds));
	pid = fork();
	ASSERT(pid >= 0);
	if (pid == 0) {
		struct result r;

		memset(&r, 0, sizeof(r));
		close(fds[0]);
		for (const char *const *e = env; e && *e; e++)
			putenv((char *)*e);
		/* A failed ASSERT in the child must not run the parent's test loop. */
		if (setjmp(ffm_test_jmp) == 0) {
			fk_load();
			fn(&r);
			if (write(fds[1], &r, sizeof(r)) != sizeof(r))
				_exit(3);
			_exit(0);
		}
		_exit(2);
	}
	close(fds[1]);
	memset(out, 0, sizeof(*out));
	ASSERT_EQ(read(fds[0], out, sizeof(*out)), sizeof(*out));
	close(fds[0]);
	ASSERT_EQ(waitpid(pid, &status, 0), pid);
	ASSERT_MSG(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child failed (status %#x)",
		   status);
}

/*
 * Fails if ms is below the model; returns false if it is above by more than the slack, which
 * the caller answers by measuring again (a loaded machine delays single runs, a wrong model
 * every run).
 */
static bool check_ms(double ms, double want, const char *what)
{
	printf("# %s: %.3f ms (model %.3f ms)\n", what, ms, want);
	ASSERT_MSG(ms >= want - FK_EARLY_MS, "%s took %.3f ms, less than the model's %.3f ms", what,
		   ms, want);
	return ms <= want + FK_SLACK_MS;
}

static void child_init(struct result *r)
{
	CUdeviceptr d;
	CUdevice dev;

	r->before_init = cu.cuMemAlloc_v2(&d, 64);
	/* Works before cuInit, as the CUDA runtime expects. */
	if (cu.cuDriverGetVersion(&r->version))
		r->version = -1;
	r->init = cu.cuInit(0);
	if (r->init == CUDA_SUCCESS && (cu.cuDeviceGet(&dev, 0) ||
					cu.cuDeviceGetName(r->name, sizeof(r->name), dev)))
		r->name[0] = '\0';
}

TEST(nothing_works_before_cuinit)
{
	struct result r;

	in_child(NULL, child_init, &r);
	ASSERT_EQ(r.before_init, CUDA_ERROR_NOT_INITIALIZED);
	ASSERT_EQ(r.version, 13000);
	ASSERT_EQ(r.init, CUDA_SUCCESS);
	ASSERT_STREQ(r.name, "ffm simulated GPU");
}

TEST(malformed_knob_fails_cuinit)
{
	static const char *const env[] = { "FAKECUDA_COPY_GBPS=fast", NULL };
	static const char *const env0[] = { "FAKECUDA_COPY_GBPS=0", NULL };
	struct result r;

	in_child(env, child_init, &r);
	ASSERT_EQ(r.init, CUDA_ERROR_INVALID_VALUE);
	in_child(env0, child_init, &r);
	ASSERT_EQ(r.init, CUDA_ERROR_INVALID_VALUE);
}

static double timed_copy(CUdeviceptr dst, CUdeviceptr src, void *host, size_t bytes, int kind)
{
	uint64_t t0 = fk_now();

	if (kind == 0)
		CU_OK(cu.cuMemcpyHtoD_v2(dst, host, bytes));
	else if (kind == 1)
		CU_OK(cu.cuMemcpyDtoH_v2(host, src, bytes));
	else
		CU_OK(cu.cuMemcpyDtoD_v2(dst, src, bytes));
	return (double)(fk_now() - t0) / 1e6;
}

/* cuInit, device 0, a context with @flags: how every child below starts. */
static CUcontext child_ctx(unsigned int flags)
{
	CUcontext ctx;
	CUdevice dev;

	CU_OK(cu.cuInit(0));
	CU_OK(cu.cuDeviceGet(&dev, 0));
	CU_OK(cu.cuCtxCreate_v2(&ctx, flags, dev));
	return ctx;
}

static void child_copies(struct result *r)
{
	size_t small = 1000000, large = 4000000;
	CUcontext ctx;
	CUdeviceptr a, b;
	void *h = malloc(large);

	ASSERT(h);
	memset(h, 1, large);
	ctx = child_ctx(CU_CTX_SCHED_BLOCKING_SYNC);
	CU_OK(cu.cuMemAlloc_v2(&a, large));
	CU_OK(cu.cuMemAlloc_v2(&b, large));
	r->ms[0] = timed_copy(a, 0, h, small, 0);
	r->ms[1] = timed_copy(a, 0, h, large, 0);
	r->ms[2] = timed_copy(0, a, h, large, 1);
	r->ms[3] = timed_copy(b, a, NULL, small, 2);
	CU_OK(cu.cuCtxDestroy_v2(ctx));
	free(h);
}

TEST(copy_time_is_latency_plus_bytes_over_bandwidth)
{
	/* 2 ms + 1 byte/ns (1 GB/s); device-local copies at 0.5 GB/s. */
	static const char *const env[] = { "FAKECUDA_COPY_LAT_US=2000", "FAKECUDA_COPY_GBPS=1",
					   "FAKECUDA_DTOD_GBPS=0.5", NULL };
	struct result r;

	for (int attempt = 0; attempt < 3; attempt++) {
		bool ok = true;

		in_child(env, child_copies, &r);
		ok &= check_ms(r.ms[0], 2.0 + 1.0, "HtoD 1 MB");
		ok &= check_ms(r.ms[1], 2.0 + 4.0, "HtoD 4 MB");
		ok &= check_ms(r.ms[2], 2.0 + 4.0, "DtoH 4 MB");
		ok &= check_ms(r.ms[3], 2.0 + 2.0, "DtoD 1 MB");
		if (ok)
			return;
	}
	FAIL("slower than the model by more than %.1f ms three times", FK_SLACK_MS);
}

TEST(default_copy_model)
{
	static const char *const env[] = { "FAKECUDA_COPY_LAT_US=", "FAKECUDA_COPY_GBPS=",
					   "FAKECUDA_DTOD_GBPS=", NULL };
	struct result r;

	/* 8 us + bytes / 12 GB/s: 1 MB is 0.091 ms, 4 MB 0.341 ms; only a floor is checkable
	 * here, since moving 4 MB with memmove may itself take longer on a busy machine. */
	in_child(env, child_copies, &r);
	printf("# HtoD 1 MB %.3f ms, 4 MB %.3f ms, DtoH 4 MB %.3f ms, DtoD 1 MB %.3f ms\n",
	       r.ms[0], r.ms[1], r.ms[2], r.ms[3]);
	ASSERT(r.ms[0] >= 0.008 + 1e6 / 12e6 - FK_EARLY_MS / 10);
	ASSERT(r.ms[1] >= 0.008 + 4e6 / 12e6 - FK_EARLY_MS / 10);
}

static void child_launch(struct result *r)
{
	CUcontext ctx;
	CUdevice dev;
	struct fk_kernels k;
	uint64_t t0;

	CU_OK(cu.cuInit(0));
	CU_OK(cu.cuDeviceGet(&dev, 0));
	CU_OK(cu.cuCtxCreate_v2(&ctx, 0, dev));
	fk_kernels_load(&k);
	t0 = fk_now();
	CU_OK(fk_spin(&k, NULL, 1000000));
	CU_OK(cu.cuCtxSynchronize());
	r->ms[0] = (double)(fk_now() - t0) / 1e6;
	CU_OK(cu.cuCtxDestroy_v2(ctx));
}

TEST(launch_latency_knob)
{
	static const char *const env[] = { "FAKECUDA_LAUNCH_LAT_US=5000", NULL };
	struct result r;

	for (int attempt = 0; attempt < 3; attempt++) {
		in_child(env, child_launch, &r);
		if (check_ms(r.ms[0], 5.0 + 1.0, "1 ms kernel with 5 ms launch latency"))
			return;
	}
	FAIL("slower than the model by more than %.1f ms three times", FK_SLACK_MS);
}

static void child_pageable(struct result *r)
{
	size_t n = 1000000;
	CUcontext ctx;
	CUdeviceptr a;
	void *pinned, *pageable = malloc(n);

	ASSERT(pageable);
	memset(pageable, 1, n);
	ctx = child_ctx(CU_CTX_SCHED_BLOCKING_SYNC);
	CU_OK(cu.cuMemAlloc_v2(&a, n));
	CU_OK(cu.cuMemAllocHost_v2(&pinned, n));
	timed_copy(a, 0, pinned, 4096, 0); /* the first op also starts the stream's engine */
	r->ms[0] = timed_copy(a, 0, pinned, n, 0);
	r->ms[1] = timed_copy(a, 0, pageable, n, 0);
	r->ms[2] = timed_copy(0, a, pinned, n, 1);
	r->ms[3] = timed_copy(0, a, pageable, n, 1);
	CU_OK(cu.cuCtxDestroy_v2(ctx));
	free(pageable);
}

TEST(pageable_copies_at_their_own_speed)
{
	/* Pinned at 1 GB/s, pageable (staging included) at 0.25 GB/s. */
	static const char *const env[] = { "FAKECUDA_COPY_LAT_US=0", "FAKECUDA_COPY_GBPS=1",
					   "FAKECUDA_PAGEABLE_GBPS=0.25", NULL };
	struct result r;

	for (int attempt = 0; attempt < 3; attempt++) {
		bool ok = true;

		in_child(env, child_pageable, &r);
		ok &= check_ms(r.ms[0], 1.0, "HtoD 1 MB pinned");
		ok &= check_ms(r.ms[1], 4.0, "HtoD 1 MB pageable");
		ok &= check_ms(r.ms[2], 1.0, "DtoH 1 MB pinned");
		ok &= check_ms(r.ms[3], 4.0, "DtoH 1 MB pageable");
		ok &= r.ms[0] < 3.0 && r.ms[2] < 3.0; /* a pinned copy is not slowed */
		if (ok)
			return;
	}
	FAIL("slower than the model by more than %.1f ms three times", FK_SLACK_MS);
}

static double timed_spin_sync(struct fk_kernels *k, uint64_t ns)
{
	uint64_t t0 = fk_now();

	CU_OK(fk_spin(k, NULL, ns));
	CU_OK(cu.cuCtxSynchronize());
	return (double)(fk_now() - t0) / 1e6;
}

static void child_exit(struct result *r)
{
	unsigned int flags[2] = { CU_CTX_SCHED_YIELD, CU_CTX_SCHED_BLOCKING_SYNC };
	struct fk_kernels k;
	CUcontext ctx;
	CUdevice dev;

	CU_OK(cu.cuInit(0));
	CU_OK(cu.cuDeviceGet(&dev, 0));
	for (int i = 0; i < 2; i++) {
		CU_OK(cu.cuCtxCreate_v2(&ctx, flags[i], dev));
		fk_kernels_load(&k);
		timed_spin_sync(&k, 1000); /* the first op also starts the stream's engine */
		r->ms[2 * i] = timed_spin_sync(&k, 1000000);
		r->ms[2 * i + 1] = timed_spin_sync(&k, 10000000);
		CU_OK(cu.cuCtxDestroy_v2(ctx));
	}
}

TEST(wait_exit_latency_by_mode_and_length)
{
	/* Yield returns 1 ms late, blocking 2 ms; both 3 ms more after waits of 5 ms or longer.
	 * (Spin is not timed here: on a loaded 2-CPU machine a spinning waiter starves the
	 * simulated engine by more than the slack.) */
	static const char *const env[] = { "FAKECUDA_EXIT_YIELD_US=1000",
					   "FAKECUDA_EXIT_BLOCK_US=2000", "FAKECUDA_EXIT_LONG_US=3000",
					   "FAKECUDA_EXIT_LONG_AFTER_US=5000", NULL };
	struct result r;

	for (int attempt = 0; attempt < 3; attempt++) {
		bool ok = true;

		in_child(env, child_exit, &r);
		ok &= check_ms(r.ms[0], 1.0 + 1.0, "yield, 1 ms kernel");
		ok &= check_ms(r.ms[1], 10.0 + 1.0 + 3.0, "yield, 10 ms kernel");
		ok &= check_ms(r.ms[2], 1.0 + 2.0, "blocking, 1 ms kernel");
		ok &= check_ms(r.ms[3], 10.0 + 2.0 + 3.0, "blocking, 10 ms kernel");
		if (ok)
			return;
	}
	FAIL("slower than the model by more than %.1f ms three times", FK_SLACK_MS);
}

static double timed_touch(volatile uint8_t *p, size_t n)
{
	uint64_t t0 = fk_now();

	for (size_t i = 0; i < n; i += 4096)
		p[i]++;
	return (double)(fk_now() - t0) / 1e6;
}

static void child_migrate(struct result *r)
{
	size_t n = 256 * 4096;
	CUcontext ctx = child_ctx(CU_CTX_SCHED_BLOCKING_SYNC);
	CUdeviceptr m;
	uint64_t t0;

	CU_OK(cu.cuMemAllocManaged(&m, n, CU_MEM_ATTACH_GLOBAL));
	memset((void *)(uintptr_t)m, 1, n); /* first touch: the host's, no migration */
	t0 = fk_now();
	CU_OK(cu.cuMemsetD8_v2(m, 2, n)); /* synchronous on managed memory */
	r->ms[0] = (double)(fk_now() - t0) / 1e6;
	r->ms[1] = timed_touch((volatile uint8_t *)(uintptr_t)m, n);
	CU_OK(cu.cuMemsetD8_v2(m, 3, n));
	t0 = fk_now();
	CU_OK(cu.cuMemsetD8_v2(m, 4, n)); /* the device touched it last: nothing moves */
	r->ms[2] = (double)(fk_now() - t0) / 1e6;
	timed_touch((volatile uint8_t *)(uintptr_t)m, n);
	r->ms[3] = timed_touch((volatile uint8_t *)(uintptr_t)m, n); /* the host's already */
	ASSERT_EQ(((volatile uint8_t *)(uintptr_t)m)[4096], 6);
	CU_OK(cu.cuMemFree_v2(m));
	CU_OK(cu.cuCtxDestroy_v2(ctx));
}

TEST(managed_pages_migrate_and_fault)
{
	/* 256 pages: 10 us each to the device, 20 us each host fault back; memsets at 1 GB/s. */
	static const char *const env[] = { "FAKECUDA_COPY_LAT_US=0", "FAKECUDA_DTOD_GBPS=1",
					   "FAKECUDA_MIGRATE_PAGE_US=10", "FAKECUDA_FAULT_PAGE_US=20",
					   NULL };
	struct result r;

	for (int attempt = 0; attempt < 3; attempt++) {
		bool ok = true;

		in_child(env, child_migrate, &r);
		ok &= check_ms(r.ms[0], 1.048576 + 2.56, "memset after the host touched");
		/* Only a floor: each fault's signal and mprotect cost more on a loaded machine. */
		check_ms(r.ms[1], 5.12, "host touch after the device wrote");
		ok &= check_ms(r.ms[2], 1.048576, "memset after the device wrote");
		ok &= r.ms[2] < 1.048576 + 2.0 && r.ms[3] < 2.0; /* nothing migrates twice */
		if (ok)
			return;
	}
	FAIL("off the model by more than %.1f ms three times", FK_SLACK_MS);
}

static void child_alloc(struct result *r)
{
	CUcontext ctx = child_ctx(0);
	CUdeviceptr d;
	uint64_t t0 = fk_now();

	CU_OK(cu.cuMemAlloc_v2(&d, 4096));
	r->ms[0] = (double)(fk_now() - t0) / 1e6;
	t0 = fk_now();
	CU_OK(cu.cuMemFree_v2(d));
	r->ms[1] = (double)(fk_now() - t0) / 1e6;
	t0 = fk_now();
	CU_OK(cu.cuMemAlloc_v2(&d, 8u << 20));
	r->ms[2] = (double)(fk_now() - t0) / 1e6;
	CU_OK(cu.cuMemFree_v2(d));
	CU_OK(cu.cuCtxDestroy_v2(ctx));
}

TEST(alloc_and_free_cost)
{
	/* 2 ms an allocation and 1 ms a MiB of it; 3 ms a free. */
	static const char *const env[] = { "FAKECUDA_ALLOC_US=2000", "FAKECUDA_ALLOC_MIB_US=1000",
					   "FAKECUDA_FREE_US=3000", NULL };
	struct result r;

	for (int attempt = 0; attempt < 3; attempt++) {
		bool ok = true;

		in_child(env, child_alloc, &r);
		ok &= check_ms(r.ms[0], 2.0 + 4096.0 / (1 << 20), "4 KiB allocation");
		ok &= check_ms(r.ms[1], 3.0, "free of an idle device's buffer");
		ok &= check_ms(r.ms[2], 2.0 + 8.0, "8 MiB allocation");
		if (ok)
			return;
	}
	FAIL("off the model by more than %.1f ms three times", FK_SLACK_MS);
}

TEST_MAIN()
