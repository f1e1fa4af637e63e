/* SPDX-License-Identifier: MIT */
/*
 * Every synchronizing path of the simulated driver enters the one wait function, and nothing
 * else does, under each CPU wait mode: counted with a uprobe at the wait function's file
 * offset in the stripped libcuda.so.1 (symbols/uprobe_count.h, the perf uprobe PMU), which is
 * how ffm itself finds and probes it. The per-mode helpers are counted too, to show that the
 * context's schedule flag picks the way the thread waits.
 */
#include <sys/resource.h>

#include "symbols/uprobe_count.h"
#include "tests/fakecuda/fk_test.h"

enum { H_WAIT, H_SPIN, H_YIELD, H_BLOCK, H_N };
static const char *const helper_names[H_N] = { FK_WAIT_FN, "fake_wait_spin", "fake_wait_yield",
					       "fake_wait_block" };

struct env {
	struct ffm_uprobe_counter *c[H_N];
	CUcontext ctx;
	struct fk_kernels k;
	CUstream stream;
	CUevent ev;
	CUdeviceptr dev, dev2, managed;
	void *pinned, *pageable;
	size_t bytes;
};

/* The counters of a case that failed half-way (a FAIL longjmps past its teardown). */
static struct env *leaked;

static void counters_open(struct env *v)
{
	char real[PATH_MAX];

	if (!realpath(FK_LIB, real))
		FAIL("%s: %s (run make first)", FK_LIB, strerror(errno));
	for (int i = 0; i < H_N; i++) {
		uint64_t off = fk_wait_fn_offset(helper_names[i], NULL, NULL);
		int err = ffm_uprobe_counter__open(real, off, false, getpid(), &v->c[i]);

		if (err == -EACCES || err == -EPERM)
			SKIP("perf_event_open of a uprobe not permitted (%s): run as root or with "
			     "CAP_PERFMON", strerror(-err));
		if (err == -ENOENT && i == 0 && access("/sys/bus/event_source/devices/uprobe", F_OK))
			SKIP("kernel has no uprobe PMU (CONFIG_UPROBE_EVENTS)");
		ASSERT_MSG(err == 0, "uprobe on %s+%#llx (%s): %s", real, (unsigned long long)off,
			   helper_names[i], strerror(-err));
	}
	leaked = v;
}

static void counters_close(struct env *v)
{
	for (int i = 0; i < H_N; i++)
		v->c[i] = ffm_uprobe_counter__free(v->c[i]);
	leaked = NULL;
}

static void counters_reset(struct env *v)
{
	for (int i = 0; i < H_N; i++)
		ASSERT_OK(ffm_uprobe_counter__reset(v->c[i]));
}

static int64_t count(struct env *v, int which)
{
	int64_t n = ffm_uprobe_counter__read(v->c[which]);

	ASSERT_OK(n);
	return n;
}

static void env_setup(struct env *v, unsigned int sched, bool primary)
{
	CUdevice dev;

	if (leaked)
		counters_close(leaked);
	memset(v, 0, sizeof(*v));
	fk_load();
	CU_OK(cu.cuInit(0));
	CU_OK(cu.cuDeviceGet(&dev, 0));
	if (primary) {
		/* As the CUDA runtime does: flags on the primary context, then retain it. */
		CU_OK(cu.cuDevicePrimaryCtxSetFlags_v2(dev, sched));
		CU_OK(cu.cuDevicePrimaryCtxRetain(&v->ctx, dev));
		CU_OK(cu.cuCtxSetCurrent(v->ctx));
	} else {
		CU_OK(cu.cuCtxCreate_v2(&v->ctx, sched, dev));
	}
	fk_kernels_load(&v->k);
	CU_OK(cu.cuStreamCreate(&v->stream, CU_STREAM_DEFAULT));
	CU_OK(cu.cuEventCreate(&v->ev, CU_EVENT_DEFAULT));
	v->bytes = 1 << 20;
	CU_OK(cu.cuMemAlloc_v2(&v->dev, v->bytes));
	CU_OK(cu.cuMemAlloc_v2(&v->dev2, v->bytes));
	CU_OK(cu.cuMemAllocManaged(&v->managed, v->bytes, CU_MEM_ATTACH_GLOBAL));
	CU_OK(cu.cuMemAllocHost_v2(&v->pinned, v->bytes));
	v->pageable = calloc(1, v->bytes);
	ASSERT(v->pageable);
	/*
	 * Create every engine thread the cases need (here: this thread's per-thread default
	 * stream) before the counters exist: they are inherited by threads created later, and
	 * thread creation under inherited uprobe events has been seen to fail with ENOMEM.
	 */
	CU_OK(cu.cuStreamSynchronize_ptsz(NULL));
	counters_open(v);
}

static void env_teardown(struct env *v, bool primary)
{
	CUdevice dev = 0;

	counters_close(v);
	CU_OK(cu.cuCtxSynchronize());
	CU_OK(cu.cuMemFree_v2(v->dev));
	CU_OK(cu.cuMemFree_v2(v->dev2));
	CU_OK(cu.cuMemFree_v2(v->managed));
	CU_OK(cu.cuMemFreeHost(v->pinned));
	free(v->pageable);
	CU_OK(cu.cuEventDestroy_v2(v->ev));
	CU_OK(cu.cuStreamDestroy_v2(v->stream));
	CU_OK(cu.cuModuleUnload(v->k.mod));
	if (primary)
		CU_OK(cu.cuDevicePrimaryCtxRelease_v2(dev));
	else
		CU_OK(cu.cuCtxDestroy_v2(v->ctx));
}

/* Each case does one API call (after unprobed setup) and says whether it must wait. */
struct sync_case {
	const char *name;
	bool syncs;
	CUresult (*setup)(struct env *v); /* runs before the counters are reset */
	CUresult (*call)(struct env *v);
};

/* Setup for syncs: give the GPU 2 ms of work so that the wait really waits. */
static CUresult busy_legacy(struct env *v)
{
	return fk_spin(&v->k, NULL, 2000000);
}

static CUresult busy_stream(struct env *v)
{
	return fk_spin(&v->k, v->stream, 2000000);
}

static CUresult busy_event(struct env *v)
{
	CUresult r = fk_spin(&v->k, v->stream, 2000000);

	return r ? r : cu.cuEventRecord(v->ev, v->stream);
}

static CUresult c_ctx_sync(struct env *v)
{
	return cu.cuCtxSynchronize();
}

static CUresult c_ctx_sync_v2(struct env *v)
{
	return cu.cuCtxSynchronize_v2(NULL);
}

/* cudaDeviceSynchronize of a CUDA 13 runtime: whatever cuGetProcAddress hands out. */
static CUresult c_runtime_device_sync(struct env *v)
{
	CUresult (*fn)(CUcontext) = NULL;
	CUdriverProcAddressQueryResult st;
	CUresult r = cu.cuGetProcAddress_v2("cuCtxSynchronize", (void **)&fn, 13000,
					    CU_GET_PROC_ADDRESS_DEFAULT, &st);

	return r ? r : fn(NULL);
}

static CUresult c_stream_sync(struct env *v)
{
	return cu.cuStreamSynchronize(v->stream);
}

static CUresult c_stream_sync_ptsz(struct env *v)
{
	return cu.cuStreamSynchronize_ptsz(NULL);
}

static CUresult c_event_sync(struct env *v)
{
	return cu.cuEventSynchronize(v->ev);
}

static CUresult c_htod(struct env *v)
{
	return cu.cuMemcpyHtoD_v2(v->dev, v->pageable, v->bytes);
}

static CUresult c_htod_pinned(struct env *v)
{
	return cu.cuMemcpyHtoD_v2(v->dev, v->pinned, v->bytes);
}

static CUresult c_dtoh(struct env *v)
{
	return cu.cuMemcpyDtoH_v2(v->pageable, v->dev, v->bytes);
}

static CUresult c_dtod(struct env *v)
{
	return cu.cuMemcpyDtoD_v2(v->dev2, v->dev, v->bytes);
}

static CUresult c_memcpy_unified_dtoh(struct env *v)
{
	return cu.cuMemcpy((CUdeviceptr)(uintptr_t)v->pageable, v->dev, v->bytes);
}

static CUresult c_dtoh_async_pageable(struct env *v)
{
	return cu.cuMemcpyDtoHAsync_v2(v->pageable, v->dev, v->bytes, v->stream);
}

static CUresult c_mem_free(struct env *v)
{
	CUresult r = cu.cuMemFree_v2(v->dev);

	v->dev = 0;
	return r;
}

static CUresult c_mem_free_reallocate(struct env *v)
{
	return cu.cuMemAlloc_v2(&v->dev, v->bytes);
}

static CUresult c_memset_managed(struct env *v)
{
	return cu.cuMemsetD32_v2(v->managed, 7, v->bytes / 4);
}

static CUresult c_launch(struct env *v)
{
	return fk_spin(&v->k, v->stream, 2000000);
}

static CUresult c_launch_legacy(struct env *v)
{
	return fk_work(&v->k, NULL, v->dev, v->bytes / 4, 1, 1, 1000000);
}

static CUresult c_htod_async_pinned(struct env *v)
{
	return cu.cuMemcpyHtoDAsync_v2(v->dev, v->pinned, v->bytes, v->stream);
}

static CUresult c_htod_async_pageable(struct env *v)
{
	return cu.cuMemcpyHtoDAsync_v2(v->dev, v->pageable, v->bytes, v->stream);
}

static CUresult c_dtoh_async_pinned(struct env *v)
{
	return cu.cuMemcpyDtoHAsync_v2(v->pinned, v->dev, v->bytes, v->stream);
}

static CUresult c_driver_version(struct env *v)
{
	int ver;

	return cu.cuDriverGetVersion(&ver);
}

static CUresult c_event_record(struct env *v)
{
	return cu.cuEventRecord(v->ev, v->stream);
}

static CUresult c_memset_device(struct env *v)
{
	return cu.cuMemsetD32_v2(v->dev, 7, v->bytes / 4);
}

static CUresult c_stream_query(struct env *v)
{
	CUresult r = cu.cuStreamQuery(v->stream);

	return r == CUDA_ERROR_NOT_READY ? CUDA_SUCCESS : r;
}

static const struct sync_case cases[] = {
	{ "cuCtxSynchronize", true, busy_legacy, c_ctx_sync },
	{ "cuCtxSynchronize_v2", true, busy_stream, c_ctx_sync_v2 },
	{ "cuGetProcAddress(cuCtxSynchronize, 13000)", true, busy_stream, c_runtime_device_sync },
	{ "cuStreamSynchronize", true, busy_stream, c_stream_sync },
	{ "cuStreamSynchronize_ptsz(NULL)", true, NULL, c_stream_sync_ptsz },
	{ "cuEventSynchronize", true, busy_event, c_event_sync },
	{ "cuMemcpyHtoD_v2 (pageable)", true, busy_legacy, c_htod },
	{ "cuMemcpyHtoD_v2 (pinned)", true, NULL, c_htod_pinned },
	{ "cuMemcpyDtoH_v2", true, busy_legacy, c_dtoh },
	{ "cuMemcpyDtoD_v2", true, NULL, c_dtod },
	{ "cuMemcpy DtoH", true, NULL, c_memcpy_unified_dtoh },
	{ "cuMemcpyDtoHAsync_v2 to pageable", true, busy_stream, c_dtoh_async_pageable },
	{ "cuMemFree_v2", true, busy_stream, c_mem_free },
	{ "cuMemsetD32_v2 on managed memory", true, busy_legacy, c_memset_managed },

	{ "cuMemAlloc_v2", false, NULL, c_mem_free_reallocate },
	{ "cuLaunchKernel", false, NULL, c_launch },
	{ "cuLaunchKernel on the legacy stream", false, busy_stream, c_launch_legacy },
	{ "cuMemcpyHtoDAsync_v2 from pinned", false, busy_stream, c_htod_async_pinned },
	{ "cuMemcpyHtoDAsync_v2 from pageable", false, busy_stream, c_htod_async_pageable },
	{ "cuMemcpyDtoHAsync_v2 to pinned", false, busy_stream, c_dtoh_async_pinned },
	{ "cuDriverGetVersion", false, NULL, c_driver_version },
	{ "cuEventRecord", false, busy_stream, c_event_record },
	{ "cuMemsetD32_v2 on device memory", false, busy_stream, c_memset_device },
	{ "cuStreamQuery", false, busy_stream, c_stream_query },
};

static void run_cases(unsigned int sched, bool primary)
{
	/* Which helper the mode must use. */
	int helper = sched == CU_CTX_SCHED_BLOCKING_SYNC ? H_BLOCK
		     : sched == CU_CTX_SCHED_YIELD	 ? H_YIELD
							 : H_SPIN;
	struct env v;

	env_setup(&v, sched, primary);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const struct sync_case *c = &cases[i];
		int64_t n[H_N];

		if (c->setup)
			CU_OK(c->setup(&v));
		counters_reset(&v);
		CU_OK(c->call(&v));
		for (int h = 0; h < H_N; h++)
			n[h] = count(&v, h);
		/* Drain outside the counted window, so that cases do not leak into each other. */
		CU_OK(cu.cuCtxSynchronize());
		printf("# %-44s wait=%" PRId64 " spin=%" PRId64 " yield=%" PRId64 " block=%" PRId64
		       "\n",
		       c->name, n[H_WAIT], n[H_SPIN], n[H_YIELD], n[H_BLOCK]);
		if (c->syncs) {
			ASSERT_MSG(n[H_WAIT] >= 1, "%s did not enter %s", c->name, FK_WAIT_FN);
			ASSERT_MSG(n[helper] >= 1, "%s waited, but not in %s", c->name,
				   helper_names[helper]);
			for (int h = H_SPIN; h < H_N; h++)
				ASSERT_MSG(h == helper || n[h] == 0, "%s used %s in this mode",
					   c->name, helper_names[h]);
		} else {
			for (int h = 0; h < H_N; h++)
				ASSERT_MSG(n[h] == 0, "%s entered %s %" PRId64 " times", c->name,
					   helper_names[h], n[h]);
		}
	}
	env_teardown(&v, primary);
}

TEST(sync_paths_spin)
{
	run_cases(CU_CTX_SCHED_SPIN, false);
}

TEST(sync_paths_auto)
{
	run_cases(CU_CTX_SCHED_AUTO, false);
}

TEST(sync_paths_yield)
{
	run_cases(CU_CTX_SCHED_YIELD, false);
}

TEST(sync_paths_blocking)
{
	run_cases(CU_CTX_SCHED_BLOCKING_SYNC, false);
}

TEST(sync_paths_primary_ctx_blocking)
{
	run_cases(CU_CTX_SCHED_BLOCKING_SYNC, true);
}

static double thread_cpu_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* The modes differ where it matters to ffm: spinning burns the CPU, blocking sleeps. */
static double cpu_ms_of_wait(unsigned int sched, double *wall_ms)
{
	CUcontext ctx;
	CUdevice dev;
	struct fk_kernels k;
	double c0;
	uint64_t t0;

	fk_load();
	CU_OK(cu.cuInit(0));
	CU_OK(cu.cuDeviceGet(&dev, 0));
	CU_OK(cu.cuCtxCreate_v2(&ctx, sched, dev));
	fk_kernels_load(&k);
	CU_OK(fk_spin(&k, NULL, 50000000));
	c0 = thread_cpu_ms();
	t0 = fk_now();
	CU_OK(cu.cuCtxSynchronize());
	*wall_ms = (fk_now() - t0) / 1e6;
	c0 = thread_cpu_ms() - c0;
	CU_OK(cu.cuModuleUnload(k.mod));
	CU_OK(cu.cuCtxDestroy_v2(ctx));
	return c0;
}

TEST(spin_burns_cpu_blocking_sleeps)
{
	double spin_wall, block_wall, block, spin = cpu_ms_of_wait(CU_CTX_SCHED_SPIN, &spin_wall);

	printf("# spin: %.1f ms CPU in a %.1f ms wait\n", spin, spin_wall);
	block = cpu_ms_of_wait(CU_CTX_SCHED_BLOCKING_SYNC, &block_wall);
	printf("# blocking: %.1f ms CPU in a %.1f ms wait\n", block, block_wall);
	/* Bounds loose enough for a machine whose other load halves our share of a CPU. */
	ASSERT_MSG(spin > 0.25 * spin_wall, "a spinning wait used only %.1f of %.1f ms CPU", spin,
		   spin_wall);
	ASSERT_MSG(block < 0.1 * block_wall, "a blocking wait used %.1f of %.1f ms CPU", block,
		   block_wall);
}

TEST_MAIN()
