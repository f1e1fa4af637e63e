/* SPDX-License-Identifier: MIT */
/*
 * The simulated GPU's behaviour: bytes really move, kernels really compute, asynchronous
 * results appear only when the GPU gets there, durations are what the launch and the copy
 * model say (in wall-clock time), the legacy default stream orders work as on a GPU, events
 * time it, and bad input gets the real driver's error codes.
 *
 * Copy durations are tested in test_fakecuda_knobs, with a copy model slow enough that the
 * host's memmove (2-10 GB/s on a loaded CI VM) never dominates.
 *
 * Timing tolerances: a simulated duration is never shorter than asked (lower bounds are
 * strict, 0.2 ms for clock granularity); it may be longer by scheduling delays of the engine
 * and test threads on a loaded 2-CPU CI machine, so upper bounds allow FK_SLACK_MS.
 */
#include <pthread.h>

#include "tests/fakecuda/fk_test.h"

#define FK_SLACK_MS 8.0
#define FK_EARLY_MS 0.2

static CUcontext ctx;
static struct fk_kernels k;

/* Every case runs in one process, with the default copy model and a fresh context. */
static void setup(void)
{
	CUdevice dev;

	fk_load();
	if (!ctx) {
		/* Fixed model for the timing checks, whatever the caller's environment says. */
		unsetenv("FAKECUDA_COPY_LAT_US");
		unsetenv("FAKECUDA_COPY_GBPS");
		unsetenv("FAKECUDA_DTOD_GBPS");
		unsetenv("FAKECUDA_LAUNCH_LAT_US");
		CU_OK(cu.cuInit(0));
		CU_OK(cu.cuDeviceGet(&dev, 0));
		CU_OK(cu.cuCtxCreate_v2(&ctx, CU_CTX_SCHED_BLOCKING_SYNC, dev));
		fk_kernels_load(&k);
	}
	CU_OK(cu.cuCtxSetCurrent(ctx));
}

static double ms_since(uint64_t t0)
{
	return (double)(fk_now() - t0) / 1e6;
}

/*
 * A duration shorter than the model fails at once. A longer one marks the attempt as slow: the
 * TIMED_TEST runs its body again, up to three times, because a loaded CI machine can delay any
 * one run by many milliseconds, while a simulator bug makes every run slow.
 */
static bool attempt_slow;

#define ASSERT_DURATION(ms, want)                                                                  \
	do {                                                                                       \
		double _ms = (ms), _w = (want);                                                    \
		printf("# %s: %.3f ms (model %.3f ms)\n", #ms, _ms, _w);                          \
		ASSERT_MSG(_ms >= _w - FK_EARLY_MS, "%s took %.3f ms, less than the model's %.3f", \
			   #ms, _ms, _w);                                                          \
		if (_ms > _w + FK_SLACK_MS)                                                        \
			attempt_slow = true;                                                       \
	} while (0)

#define TIMED_TEST(name)                                                                           \
	static void name##_body(void);                                                             \
	TEST(name)                                                                                 \
	{                                                                                          \
		for (int _attempt = 0; _attempt < 3; _attempt++) {                                 \
			attempt_slow = false;                                                      \
			name##_body();                                                             \
			if (!attempt_slow)                                                         \
				return;                                                            \
			printf("# attempt %d was more than %.1f ms slow\n", _attempt + 1,          \
			       FK_SLACK_MS);                                                       \
		}                                                                                  \
		FAIL("slower than the model by more than %.1f ms three times", FK_SLACK_MS);       \
	}                                                                                          \
	static void name##_body(void)

static void fill(uint32_t *p, size_t n, uint32_t seed)
{
	for (size_t i = 0; i < n; i++)
		p[i] = seed + (uint32_t)i * 2654435761u;
}

TEST(round_trip_moves_real_bytes)
{
	size_t n = 256 * 1024, bytes = n * 4;
	uint32_t *src = malloc(bytes), *dst = calloc(n, 4);
	CUdeviceptr d, d2;

	setup();
	ASSERT(src && dst);
	fill(src, n, 1);
	CU_OK(cu.cuMemAlloc_v2(&d, bytes));
	CU_OK(cu.cuMemAlloc_v2(&d2, bytes));
	CU_OK(cu.cuMemcpyHtoD_v2(d, src, bytes));
	CU_OK(cu.cuMemcpyDtoD_v2(d2, d, bytes));
	CU_OK(cu.cuMemcpyDtoH_v2(dst, d2, bytes));
	ASSERT(!memcmp(src, dst, bytes));
	/* Through the unified-addressing cuMemcpy as well. */
	memset(dst, 0, bytes);
	CU_OK(cu.cuMemcpy((CUdeviceptr)(uintptr_t)dst, d, bytes));
	ASSERT(!memcmp(src, dst, bytes));
	CU_OK(cu.cuMemFree_v2(d));
	CU_OK(cu.cuMemFree_v2(d2));
	free(src);
	free(dst);
}

TEST(kernel_output_visible_after_sync)
{
	size_t n = 100000;
	uint32_t *h = malloc(n * 4);
	CUdeviceptr d, m;
	uint32_t *mp;

	setup();
	fill(h, n, 5);
	CU_OK(cu.cuMemAlloc_v2(&d, n * 4));
	CU_OK(cu.cuMemcpyHtoD_v2(d, h, n * 4));
	CU_OK(fk_work(&k, NULL, d, n, 3, 1, 0));
	CU_OK(cu.cuMemcpyDtoH_v2(h, d, n * 4));
	for (size_t i = 0; i < n; i++)
		ASSERT_EQ(h[i], (5 + (uint32_t)i * 2654435761u) * 3 + 1);

	/* Managed memory: the host reads the kernel's result directly, after the sync only. */
	CU_OK(cu.cuMemAllocManaged(&m, n * 4, CU_MEM_ATTACH_GLOBAL));
	mp = (uint32_t *)(uintptr_t)m;
	for (size_t i = 0; i < n; i++)
		mp[i] = (uint32_t)i;
	CU_OK(fk_work(&k, NULL, m, n, 0, 42, 10000000));
	ASSERT_EQ(mp[n - 1], n - 1); /* still running */
	CU_OK(cu.cuCtxSynchronize());
	for (size_t i = 0; i < n; i++)
		ASSERT_EQ(mp[i], 42);

	/* n = 0 and a NULL buffer: a pure delay, no memory touched. */
	CU_OK(fk_work(&k, NULL, 0, 0, 1, 1, 1000));
	CU_OK(cu.cuCtxSynchronize());
	CU_OK(cu.cuMemFree_v2(d));
	CU_OK(cu.cuMemFree_v2(m));
	free(h);
}

TEST(async_dtoh_to_pinned_visible_only_after_stream_sync)
{
	size_t n = 4096;
	uint32_t *src = malloc(n * 4), *pinned;
	CUdeviceptr d;
	CUstream s;

	setup();
	fill(src, n, 9);
	CU_OK(cu.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
	CU_OK(cu.cuMemAlloc_v2(&d, n * 4));
	CU_OK(cu.cuMemAllocHost_v2((void **)&pinned, n * 4));
	memset(pinned, 0, n * 4);
	CU_OK(cu.cuMemcpyHtoD_v2(d, src, n * 4));
	CU_OK(fk_spin(&k, s, 20000000));
	CU_OK(cu.cuMemcpyDtoHAsync_v2(pinned, d, n * 4, s));
	/* The copy is queued behind 20 ms of kernel: nothing has arrived yet. */
	usleep(5000);
	ASSERT_EQ(cu.cuStreamQuery(s), CUDA_ERROR_NOT_READY);
	for (size_t i = 0; i < n; i++)
		ASSERT_EQ(pinned[i], 0);
	CU_OK(cu.cuStreamSynchronize(s));
	ASSERT(!memcmp(pinned, src, n * 4));
	CU_OK(cu.cuStreamQuery(s));
	CU_OK(cu.cuMemFreeHost(pinned));
	CU_OK(cu.cuMemFree_v2(d));
	CU_OK(cu.cuStreamDestroy_v2(s));
	free(src);
}

TEST(async_htod_reads_pinned_late_pageable_at_call)
{
	size_t n = 1024;
	uint32_t *pinned, *pageable = malloc(n * 4), *out = malloc(n * 4);
	CUdeviceptr d1, d2;
	CUstream s;

	setup();
	CU_OK(cu.cuStreamCreate(&s, CU_STREAM_DEFAULT));
	CU_OK(cu.cuMemAlloc_v2(&d1, n * 4));
	CU_OK(cu.cuMemAlloc_v2(&d2, n * 4));
	CU_OK(cu.cuMemAllocHost_v2((void **)&pinned, n * 4));
	fill(pinned, n, 1);
	fill(pageable, n, 1);
	CU_OK(fk_spin(&k, s, 10000000));
	CU_OK(cu.cuMemcpyHtoDAsync_v2(d1, pinned, n * 4, s));
	CU_OK(cu.cuMemcpyHtoDAsync_v2(d2, pageable, n * 4, s));
	/* Changed before the GPU gets to the copies: DMA from pinned memory sees the change,
	 * the pageable source was staged by the call. */
	fill(pinned, n, 2);
	fill(pageable, n, 2);
	CU_OK(cu.cuStreamSynchronize(s));
	CU_OK(cu.cuMemcpyDtoH_v2(out, d1, n * 4));
	ASSERT(!memcmp(out, pinned, n * 4));
	CU_OK(cu.cuMemcpyDtoH_v2(out, d2, n * 4));
	fill(pageable, n, 1);
	ASSERT(!memcmp(out, pageable, n * 4));
	CU_OK(cu.cuMemFreeHost(pinned));
	CU_OK(cu.cuMemFree_v2(d1));
	CU_OK(cu.cuMemFree_v2(d2));
	CU_OK(cu.cuStreamDestroy_v2(s));
	free(pageable);
	free(out);
}

TEST(memset_writes_elements)
{
	CUdeviceptr d;
	uint32_t out[8];
	uint8_t b[8];

	setup();
	CU_OK(cu.cuMemAlloc_v2(&d, sizeof(out)));
	CU_OK(cu.cuMemsetD32_v2(d, 0xdeadbeef, 8));
	CU_OK(cu.cuMemcpyDtoH_v2(out, d, sizeof(out)));
	for (int i = 0; i < 8; i++)
		ASSERT_EQ(out[i], 0xdeadbeef);
	CU_OK(cu.cuMemsetD8_v2(d + 1, 0x11, 2));
	CU_OK(cu.cuMemcpyDtoH_v2(b, d, sizeof(b)));
	ASSERT(b[0] == 0xef && b[1] == 0x11 && b[2] == 0x11 && b[3] == 0xde);
	ASSERT_EQ(cu.cuMemsetD32_v2(d + 2, 0, 1), CUDA_ERROR_INVALID_VALUE); /* misaligned */
	CU_OK(cu.cuMemFree_v2(d));
}

TIMED_TEST(spin_kernel_takes_its_time)
{
	uint64_t t0;

	setup();
	t0 = fk_now();
	CU_OK(fk_spin(&k, NULL, 20000000));
	/* The launch itself does not wait (half the kernel's time: room for a preemption). */
	ASSERT_MSG(ms_since(t0) < 10.0, "cuLaunchKernel took %.3f ms", ms_since(t0));
	CU_OK(cu.cuCtxSynchronize());
	ASSERT_DURATION(ms_since(t0), 20.0);
}

TEST(hang_kernel_runs_until_released)
{
	volatile uint32_t *flag;
	uint64_t t0;
	CUstream s;

	setup();
	CU_OK(cu.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
	CU_OK(cu.cuMemAllocHost_v2((void **)&flag, sizeof(*flag)));
	*flag = 0;
	CU_OK(fk_hang(&k, s, (CUdeviceptr)(uintptr_t)flag));
	usleep(30000);
	ASSERT_EQ(cu.cuStreamQuery(s), CUDA_ERROR_NOT_READY);
	t0 = fk_now();
	__atomic_store_n(flag, 1, __ATOMIC_RELEASE);
	CU_OK(cu.cuStreamSynchronize(s));
	ASSERT_MSG(ms_since(t0) < 20.0, "released hang took %.3f ms to finish", ms_since(t0));
	/* Its flag must be memory the GPU can read. */
	{
		uint32_t host_flag = 0;

		ASSERT_EQ(fk_hang(&k, s, (CUdeviceptr)(uintptr_t)&host_flag),
			  CUDA_ERROR_INVALID_VALUE);
	}
	CU_OK(cu.cuMemFreeHost((void *)flag));
	CU_OK(cu.cuStreamDestroy_v2(s));
}

TIMED_TEST(legacy_stream_waits_for_blocking_streams)
{
	CUstream a;
	CUdeviceptr d;
	uint32_t v = 1;
	uint64_t t0;

	setup();
	CU_OK(cu.cuStreamCreate(&a, CU_STREAM_DEFAULT));
	CU_OK(cu.cuMemAlloc_v2(&d, 4));
	CU_OK(cu.cuMemcpyHtoD_v2(d, &v, 4));
	t0 = fk_now();
	CU_OK(fk_spin(&k, a, 30000000));
	/* Queued after stream a's 30 ms kernel: must not run before it ends. */
	CU_OK(fk_work(&k, NULL, d, 1, 0, 7, 0));
	usleep(10000);
	ASSERT_EQ(cu.cuStreamQuery(NULL), CUDA_ERROR_NOT_READY);
	CU_OK(cu.cuStreamSynchronize(NULL));
	ASSERT_DURATION(ms_since(t0), 30.0);
	CU_OK(cu.cuMemcpyDtoH_v2(&v, d, 4));
	ASSERT_EQ(v, 7);

	/* And the other way: work on a blocking stream waits for earlier legacy work. */
	t0 = fk_now();
	CU_OK(fk_spin(&k, NULL, 30000000));
	CU_OK(fk_work(&k, a, d, 1, 1, 1, 0));
	CU_OK(cu.cuStreamSynchronize(a));
	ASSERT_DURATION(ms_since(t0), 30.0);
	CU_OK(cu.cuMemcpyDtoH_v2(&v, d, 4));
	ASSERT_EQ(v, 8);
	CU_OK(cu.cuMemFree_v2(d));
	CU_OK(cu.cuStreamDestroy_v2(a));
}

TIMED_TEST(non_blocking_streams_and_streams_overlap)
{
	CUstream nb, a, b;
	uint64_t t0;

	setup();
	CU_OK(cu.cuStreamCreate(&nb, CU_STREAM_NON_BLOCKING));
	CU_OK(cu.cuStreamCreate(&a, CU_STREAM_DEFAULT));
	CU_OK(cu.cuStreamCreate(&b, CU_STREAM_DEFAULT));

	/* A non-blocking stream's work does not hold back the legacy stream. */
	CU_OK(fk_spin(&k, nb, 40000000));
	t0 = fk_now();
	CU_OK(fk_spin(&k, NULL, 1000000));
	CU_OK(cu.cuStreamSynchronize(NULL));
	ASSERT_DURATION(ms_since(t0), 1.0);
	CU_OK(cu.cuCtxSynchronize());

	/* Two streams run concurrently: 2 x 30 ms takes 30 ms, not 60. */
	t0 = fk_now();
	CU_OK(fk_spin(&k, a, 30000000));
	CU_OK(fk_spin(&k, b, 30000000));
	CU_OK(cu.cuCtxSynchronize());
	ASSERT_DURATION(ms_since(t0), 30.0);

	/* One stream runs in order: 2 x 15 ms takes 30 ms. */
	t0 = fk_now();
	CU_OK(fk_spin(&k, a, 15000000));
	CU_OK(fk_spin(&k, a, 15000000));
	CU_OK(cu.cuStreamSynchronize(a));
	ASSERT_DURATION(ms_since(t0), 30.0);

	CU_OK(cu.cuStreamDestroy_v2(nb));
	CU_OK(cu.cuStreamDestroy_v2(a));
	CU_OK(cu.cuStreamDestroy_v2(b));
}

TEST(stream_wait_event_orders_across_streams)
{
	CUstream a, b;
	CUevent ev;
	CUdeviceptr d;
	uint32_t v = 2;

	setup();
	CU_OK(cu.cuStreamCreate(&a, CU_STREAM_NON_BLOCKING));
	CU_OK(cu.cuStreamCreate(&b, CU_STREAM_NON_BLOCKING));
	CU_OK(cu.cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING));
	CU_OK(cu.cuMemAlloc_v2(&d, 4));
	CU_OK(cu.cuMemcpyHtoD_v2(d, &v, 4));
	CU_OK(fk_work(&k, a, d, 1, 10, 0, 20000000)); /* v = 20 after 20 ms */
	CU_OK(cu.cuEventRecord(ev, a));
	CU_OK(cu.cuStreamWaitEvent(b, ev, 0));
	CU_OK(fk_work(&k, b, d, 1, 1, 1, 0)); /* v = 21, only if after a's kernel */
	CU_OK(cu.cuStreamSynchronize(b));
	CU_OK(cu.cuMemcpyDtoH_v2(&v, d, 4));
	ASSERT_EQ(v, 21);
	CU_OK(cu.cuMemFree_v2(d));
	CU_OK(cu.cuEventDestroy_v2(ev));
	CU_OK(cu.cuStreamDestroy_v2(a));
	CU_OK(cu.cuStreamDestroy_v2(b));
}

TIMED_TEST(events_time_gpu_work)
{
	CUevent e0, e1, nt;
	CUstream s;
	float ms;

	setup();
	CU_OK(cu.cuStreamCreate(&s, CU_STREAM_DEFAULT));
	CU_OK(cu.cuEventCreate(&e0, CU_EVENT_DEFAULT));
	CU_OK(cu.cuEventCreate(&e1, CU_EVENT_BLOCKING_SYNC));
	CU_OK(cu.cuEventCreate(&nt, CU_EVENT_DISABLE_TIMING));
	/* Never recorded: elapsed time is an invalid-handle error; query/sync succeed. */
	ASSERT_EQ(cu.cuEventElapsedTime_v2(&ms, e0, e1), CUDA_ERROR_INVALID_HANDLE);
	CU_OK(cu.cuEventQuery(e0));
	CU_OK(cu.cuEventSynchronize(e0));

	CU_OK(cu.cuEventRecord(e0, s));
	CU_OK(fk_spin(&k, s, 15000000));
	CU_OK(cu.cuEventRecord(e1, s));
	CU_OK(cu.cuEventRecord(nt, s));
	ASSERT_EQ(cu.cuEventQuery(e1), CUDA_ERROR_NOT_READY);
	ASSERT_EQ(cu.cuEventElapsedTime_v2(&ms, e0, e1), CUDA_ERROR_NOT_READY);
	CU_OK(cu.cuEventSynchronize(e1));
	CU_OK(cu.cuEventElapsedTime_v2(&ms, e0, e1));
	ASSERT_DURATION((double)ms, 15.0);
	ASSERT_EQ(cu.cuEventElapsedTime_v2(&ms, e0, nt), CUDA_ERROR_INVALID_HANDLE);
	CU_OK(cu.cuEventDestroy_v2(e0));
	CU_OK(cu.cuEventDestroy_v2(e1));
	CU_OK(cu.cuEventDestroy_v2(nt));
	CU_OK(cu.cuStreamDestroy_v2(s));
}

TIMED_TEST(destroy_stream_with_pending_work_returns_at_once)
{
	CUstream s;
	uint64_t t0;

	setup();
	CU_OK(cu.cuStreamCreate(&s, CU_STREAM_DEFAULT));
	CU_OK(fk_spin(&k, s, 20000000));
	t0 = fk_now();
	CU_OK(cu.cuStreamDestroy_v2(s));
	ASSERT(ms_since(t0) < 10.0); /* not the kernel's 20 ms */
	ASSERT_EQ(cu.cuStreamSynchronize(s), CUDA_ERROR_INVALID_HANDLE);
	/* The work still runs, and a context sync still waits for it. */
	CU_OK(cu.cuCtxSynchronize());
	ASSERT_DURATION(ms_since(t0), 20.0);
}

TEST(pointer_attributes_tell_memory_kinds)
{
	CUdeviceptr d, m;
	void *p;
	unsigned int type;
	int managed;
	char stack_var;

	setup();
	CU_OK(cu.cuMemAlloc_v2(&d, 64));
	CU_OK(cu.cuMemAllocManaged(&m, 64, CU_MEM_ATTACH_GLOBAL));
	CU_OK(cu.cuMemHostAlloc(&p, 64, CU_MEMHOSTALLOC_PORTABLE));
	CU_OK(cu.cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, d + 8));
	ASSERT_EQ(type, CU_MEMORYTYPE_DEVICE);
	CU_OK(cu.cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
				       (CUdeviceptr)(uintptr_t)p));
	ASSERT_EQ(type, CU_MEMORYTYPE_HOST);
	CU_OK(cu.cuPointerGetAttribute(&managed, CU_POINTER_ATTRIBUTE_IS_MANAGED, m));
	ASSERT_EQ(managed, 1);
	ASSERT_EQ(cu.cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
					   (CUdeviceptr)(uintptr_t)&stack_var),
		  CUDA_ERROR_INVALID_VALUE);
	CU_OK(cu.cuMemFree_v2(d));
	CU_OK(cu.cuMemFree_v2(m));
	CU_OK(cu.cuMemFreeHost(p));
}

TEST(bad_input_gets_driver_error_codes)
{
	CUdeviceptr d;
	CUfunction f;
	CUmodule mod;
	CUstream s;
	void *pinned;
	int junk[64] = { 0 };
	const char *str;
	unsigned long long ns = 1;
	void *params[] = { &ns };

	setup();
	CU_OK(cu.cuMemAlloc_v2(&d, 64));
	CU_OK(cu.cuMemAllocHost_v2(&pinned, 64));
	/* Freeing what was never allocated, twice, or with the wrong call. */
	ASSERT_EQ(cu.cuMemFree_v2((CUdeviceptr)(uintptr_t)junk), CUDA_ERROR_INVALID_VALUE);
	ASSERT_EQ(cu.cuMemFree_v2(d + 4), CUDA_ERROR_INVALID_VALUE);
	ASSERT_EQ(cu.cuMemFree_v2((CUdeviceptr)(uintptr_t)pinned), CUDA_ERROR_INVALID_VALUE);
	ASSERT_EQ(cu.cuMemFreeHost((void *)(uintptr_t)d), CUDA_ERROR_INVALID_VALUE);
	CU_OK(cu.cuMemFree_v2(d));
	ASSERT_EQ(cu.cuMemFree_v2(d), CUDA_ERROR_INVALID_VALUE);
	CU_OK(cu.cuMemFreeHost(pinned));
	ASSERT_EQ(cu.cuMemAlloc_v2(&d, 0), CUDA_ERROR_INVALID_VALUE);
	ASSERT_EQ(cu.cuMemAlloc_v2(NULL, 64), CUDA_ERROR_INVALID_VALUE);

	/* Copies to or from memory the GPU does not know. */
	ASSERT_EQ(cu.cuMemcpyHtoD_v2((CUdeviceptr)(uintptr_t)junk, junk, 16),
		  CUDA_ERROR_INVALID_VALUE);
	ASSERT_EQ(cu.cuMemcpyDtoH_v2(junk, (CUdeviceptr)(uintptr_t)junk, 16),
		  CUDA_ERROR_INVALID_VALUE);

	/* Handles that are not handles. */
	ASSERT_EQ(cu.cuStreamSynchronize((CUstream)junk), CUDA_ERROR_INVALID_HANDLE);
	ASSERT_EQ(cu.cuStreamDestroy_v2(NULL), CUDA_ERROR_INVALID_HANDLE);
	ASSERT_EQ(cu.cuEventRecord((CUevent)junk, NULL), CUDA_ERROR_INVALID_HANDLE);
	ASSERT_EQ(cu.cuCtxSynchronize_v2((CUcontext)junk), CUDA_ERROR_INVALID_CONTEXT);
	ASSERT_EQ(cu.cuLaunchKernel((CUfunction)junk, 1, 1, 1, 1, 1, 1, 0, NULL, params, NULL),
		  CUDA_ERROR_INVALID_HANDLE);
	ASSERT_EQ(cu.cuStreamCreate(&s, 0x80), CUDA_ERROR_INVALID_VALUE);

	/* Launch geometry, parameters, names. */
	ASSERT_EQ(cu.cuLaunchKernel(k.spin, 1, 1, 1, 2048, 1, 1, 0, NULL, params, NULL),
		  CUDA_ERROR_INVALID_VALUE);
	ASSERT_EQ(cu.cuLaunchKernel(k.spin, 0, 1, 1, 1, 1, 1, 0, NULL, params, NULL),
		  CUDA_ERROR_INVALID_VALUE);
	ASSERT_EQ(cu.cuLaunchKernel(k.spin, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL),
		  CUDA_ERROR_INVALID_VALUE);
	ASSERT_EQ(cu.cuModuleGetFunction(&f, k.mod, "ffm_nope"), CUDA_ERROR_NOT_FOUND);
	ASSERT_EQ(cu.cuModuleLoadData(&mod, "not ptx at all"), CUDA_ERROR_INVALID_PTX);
	/* A known kernel declared with other parameters than the simulator implements. */
	ASSERT_EQ(cu.cuModuleLoadData(&mod, ".version 8.0\n.target sm_52\n"
					    ".visible .entry ffm_work(\n.param .u64 p0\n)\n{ ret; }\n"),
		  CUDA_ERROR_INVALID_PTX);
	/* An entry the simulator does not implement loads, but cannot be resolved. */
	CU_OK(cu.cuModuleLoadData(&mod, ".version 8.0\n.target sm_52\n"
					".visible .entry other(\n.param .u64 p0\n)\n{ ret; }\n"));
	ASSERT_EQ(cu.cuModuleGetFunction(&f, mod, "other"), CUDA_ERROR_NOT_FOUND);
	CU_OK(cu.cuModuleUnload(mod));
	ASSERT_EQ(cu.cuModuleUnload(mod), CUDA_ERROR_INVALID_HANDLE);

	/* Error strings. */
	CU_OK(cu.cuGetErrorName(CUDA_ERROR_INVALID_HANDLE, &str));
	ASSERT_STREQ(str, "CUDA_ERROR_INVALID_HANDLE");
	CU_OK(cu.cuGetErrorString(CUDA_ERROR_INVALID_VALUE, &str));
	ASSERT_STREQ(str, "invalid argument");
	ASSERT_EQ(cu.cuGetErrorName((CUresult)12345, &str), CUDA_ERROR_INVALID_VALUE);

	/* No current context. */
	CU_OK(cu.cuCtxSetCurrent(NULL));
	ASSERT_EQ(cu.cuCtxSynchronize(), CUDA_ERROR_INVALID_CONTEXT);
	ASSERT_EQ(cu.cuMemAlloc_v2(&d, 64), CUDA_ERROR_INVALID_CONTEXT);
}

TEST(get_proc_address_hands_out_versioned_entry_points)
{
	CUdriverProcAddressQueryResult st;
	void *fn;

	setup();
	/* What a CUDA 13 runtime gets for cudaDeviceSynchronize, and an older one. */
	CU_OK(cu.cuGetProcAddress_v2("cuCtxSynchronize", &fn, 13000, 0, &st));
	ASSERT(fn == (void *)cu.cuCtxSynchronize_v2 && st == CU_GET_PROC_ADDRESS_SUCCESS);
	CU_OK(cu.cuGetProcAddress_v2("cuCtxSynchronize", &fn, 12040, 0, &st));
	ASSERT(fn == (void *)cu.cuCtxSynchronize);
	CU_OK(cu.cuGetProcAddress_v2("cuMemcpyDtoH", &fn, 12000, 0, &st));
	ASSERT(fn == (void *)cu.cuMemcpyDtoH_v2);
	CU_OK(cu.cuGetProcAddress_v2("cuMemcpyDtoH", &fn, 12000,
				     CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, &st));
	ASSERT(fn == dlsym(cu.handle, "cuMemcpyDtoH_v2_ptds"));
	CU_OK(cu.cuGetProcAddress_v2("cuStreamSynchronize", &fn, 12000,
				     CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, &st));
	ASSERT(fn == (void *)cu.cuStreamSynchronize_ptsz);
	CU_OK(cu.cuGetProcAddress_v2("cuMemFree", &fn, 12000, 0, &st));
	ASSERT(fn == (void *)cu.cuMemFree_v2);
	CU_OK(cu.cuGetProcAddress_v2("cuEventElapsedTime", &fn, 13000, 0, &st));
	ASSERT(fn == (void *)cu.cuEventElapsedTime_v2);
	ASSERT_EQ(cu.cuGetProcAddress_v2("cuNoSuchThing", &fn, 13000, 0, &st),
		  CUDA_ERROR_NOT_FOUND);
	ASSERT_EQ(st, CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
	ASSERT_EQ(cu.cuGetProcAddress_v2("cuMemAllocManaged", &fn, 5050, 0, &st),
		  CUDA_ERROR_NOT_FOUND);
	ASSERT_EQ(st, CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);
}

TEST(workloads_ptx_loads)
{
	const char *path = "tests/workloads/kernels.ptx";
	FILE *f;
	char *text;
	long n;
	CUmodule mod;
	CUfunction fn;

	/* The checked-in PTX of tests/workloads, if that directory has it yet. */
	f = fopen(path, "re");
	if (!f)
		SKIP("tests/workloads/kernels.ptx not present");
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	rewind(f);
	text = calloc(1, (size_t)n + 1);
	ASSERT(text && fread(text, 1, (size_t)n, f) == (size_t)n);
	fclose(f);
	setup();
	CU_OK(cu.cuModuleLoadData(&mod, text));
	CU_OK(cu.cuModuleGetFunction(&fn, mod, "ffm_spin"));
	CU_OK(cu.cuModuleGetFunction(&fn, mod, "ffm_work"));
	CU_OK(cu.cuModuleGetFunction(&fn, mod, "ffm_hang"));
	CU_OK(cu.cuModuleUnload(mod));
	free(text);
}

struct worker {
	CUcontext ctx;
	int id, failures;
};

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	size_t n = 4096;
	uint32_t *in = malloc(n * 4), *out = malloc(n * 4);
	CUstream s;
	CUdeviceptr d;

	if (cu.cuCtxSetCurrent(w->ctx) || cu.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING) ||
	    cu.cuMemAlloc_v2(&d, n * 4)) {
		w->failures++;
		return NULL;
	}
	for (int it = 0; it < 20; it++) {
		fill(in, n, (uint32_t)(w->id * 1000 + it));
		if (cu.cuMemcpyHtoDAsync_v2(d, in, n * 4, s) ||
		    fk_work(&k, s, d, n, 2, (unsigned int)w->id, 100000) ||
		    cu.cuMemcpyDtoHAsync_v2(out, d, n * 4, s) || cu.cuStreamSynchronize(s)) {
			w->failures++;
			break;
		}
		for (size_t i = 0; i < n; i++)
			if (out[i] != in[i] * 2 + (uint32_t)w->id) {
				w->failures++;
				break;
			}
	}
	cu.cuMemFree_v2(d);
	cu.cuStreamDestroy_v2(s);
	free(in);
	free(out);
	return NULL;
}

TEST(threads_share_a_context)
{
	struct worker w[4];
	pthread_t t[4];

	setup();
	for (int i = 0; i < 4; i++) {
		w[i] = (struct worker){ .ctx = ctx, .id = i + 1 };
		ASSERT_EQ(pthread_create(&t[i], NULL, worker_main, &w[i]), 0);
	}
	for (int i = 0; i < 4; i++) {
		pthread_join(t[i], NULL);
		ASSERT_EQ(w[i].failures, 0);
	}
}

TEST_MAIN()
