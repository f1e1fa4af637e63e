/* SPDX-License-Identifier: MIT */
/*
 * ffm-calib-probe: the program the wait-function calibration (symbols/calibrate.c) watches.
 *
 *   ffm-calib-probe LIBCUDA_PATH
 *
 * It dlopens the given libcuda (nothing CUDA is linked in: this program runs on GPU nodes whose
 * glibc is newer than the build machine's, with whichever driver --driver names), creates a
 * context per schedule mode, loads a tiny PTX module (ffm_hang, ffm_spin) and performs one
 * driver call per command, speaking a line protocol on stdin/stdout:
 *
 *   -> READY <pid>                       after cuInit and cuDeviceGet
 *   <- RUN <call> <mode>                 start ffm_hang (never finishes until released), then
 *   -> BLOCKING <call> <mode> <tid>      ... and block in <call> on thread <tid>
 *   <- RELEASE                           (read by a second thread) sets the hang flag
 *   -> DONE <call> <mode> <CUresult>     <call> returned
 *   <- CALL <call> <mode>                a short ffm_spin, then <call> (verification)
 *   -> DONE <call> <mode> <CUresult>
 *   <- MEASURE                           the node model (symbols/ffm_node_model.h):
 *   -> GPU <name> sm_<XY> <MiB>MiB       the key of the GPU measured (device 0)
 *   -> COPY <h2d|d2h> <pageable|pinned|managed> <bytes> <ns>    one synchronous copy
 *   -> MIGRATE <to_device|to_host> <page size> <pages> <ns>      managed pages moved
 *   -> FAULTS to_host <pages> <faults>   the host's page faults in that to_host measurement
 *   -> EXIT <spin|yield|blocking> <wait ns> <ns>  host time of launch + wait minus the kernel
 *   -> MEASURED <seconds>
 *   <- QUIT
 *   -> ERROR <text>                      a command failed (the probe stays usable)
 *
 * calls: ctx_sync stream_sync event_sync memcpy_dtoh mem_free memcpy_dtoh_async_pageable
 *        (synchronizing), launch driver_version memcpy_htod_async_pinned event_record (not)
 * modes: spin yield blocking auto
 * End of stdin releases any hang and exits.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/perf_event.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef void *CUcontext, *CUmodule, *CUfunction, *CUstream, *CUevent;

/* PTX of:  extern "C" __global__ void ffm_hang(volatile unsigned *flag) { while (!*flag); }
 *          extern "C" __global__ void ffm_spin(unsigned long long ns)  { busy on %globaltimer }
 * (nvcc -ptx -arch=compute_75, CUDA 13.0) */
static const char ptx[] =
	".version 9.0\n.target sm_75\n.address_size 64\n"
	".visible .entry ffm_hang(\n\t.param .u64 ffm_hang_param_0\n)\n{\n"
	"\t.reg .pred %p<2>;\n\t.reg .b32 %r<2>;\n\t.reg .b64 %rd<3>;\n"
	"\tld.param.u64 %rd2, [ffm_hang_param_0];\n\tcvta.to.global.u64 %rd1, %rd2;\n"
	"$L__BB0_1:\n\tld.volatile.global.u32 %r1, [%rd1];\n\tsetp.eq.s32 %p1, %r1, 0;\n"
	"\t@%p1 bra $L__BB0_1;\n\tret;\n}\n"
	".visible .entry ffm_spin(\n\t.param .u64 ffm_spin_param_0\n)\n{\n"
	"\t.reg .pred %p<2>;\n\t.reg .b64 %rd<6>;\n"
	"\tld.param.u64 %rd2, [ffm_spin_param_0];\n\tmov.u64 %rd3, %globaltimer;\n"
	"$L__BB1_1:\n\tmov.u64 %rd4, %globaltimer;\n\tsub.s64 %rd5, %rd4, %rd3;\n"
	"\tsetp.lt.u64 %p1, %rd5, %rd2;\n\t@%p1 bra $L__BB1_1;\n\tret;\n}\n";

static struct {
	CUresult (*Init)(unsigned);
	CUresult (*DeviceGet)(CUdevice *, int);
	CUresult (*DriverGetVersion)(int *);
	CUresult (*CtxCreate)(CUcontext *, unsigned, CUdevice);
	CUresult (*CtxDestroy)(CUcontext);
	CUresult (*CtxSetCurrent)(CUcontext);
	CUresult (*CtxSynchronize)(void);
	CUresult (*ModuleLoadData)(CUmodule *, const void *);
	CUresult (*ModuleGetFunction)(CUfunction *, CUmodule, const char *);
	CUresult (*LaunchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned,
				 unsigned, unsigned, CUstream, void **, void **);
	CUresult (*StreamCreate)(CUstream *, unsigned);
	CUresult (*StreamSynchronize)(CUstream);
	CUresult (*EventCreate)(CUevent *, unsigned);
	CUresult (*EventRecord)(CUevent, CUstream);
	CUresult (*EventSynchronize)(CUevent);
	CUresult (*MemAlloc)(CUdeviceptr *, size_t);
	CUresult (*MemFree)(CUdeviceptr);
	CUresult (*MemAllocHost)(void **, size_t);
	CUresult (*MemHostGetDevicePointer)(CUdeviceptr *, void *, unsigned);
	CUresult (*MemcpyDtoH)(void *, CUdeviceptr, size_t);
	CUresult (*MemcpyDtoHAsync)(void *, CUdeviceptr, size_t, CUstream);
	CUresult (*MemcpyHtoDAsync)(CUdeviceptr, const void *, size_t, CUstream);
	CUresult (*MemcpyHtoD)(CUdeviceptr, const void *, size_t);
	CUresult (*MemAllocManaged)(CUdeviceptr *, size_t, unsigned);
	CUresult (*MemsetD8)(CUdeviceptr, unsigned char, size_t);
	CUresult (*MemFreeHost)(void *);
	CUresult (*EventElapsedTime)(float *, CUevent, CUevent);
	CUresult (*DeviceGetName)(char *, int, CUdevice);
	CUresult (*DeviceGetAttribute)(int *, int, CUdevice);
	CUresult (*DeviceTotalMem)(size_t *, CUdevice);
} cu;

#define BUF 4096

static struct {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	char queue[16][128];
	int head, tail;
	int eof;
} cmdq = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER };

static volatile unsigned int *hang_flag; /* pinned host memory the kernel polls */
static CUdeviceptr hang_flag_dev;
static CUdevice dev;
static CUcontext ctx;
static const char *ctx_mode;
static CUmodule mod;
static CUfunction f_hang, f_spin;
static CUstream stream;
static CUevent event;
static CUdeviceptr dbuf;
static void *pinned, *pageable;

static pthread_mutex_t out_lock = PTHREAD_MUTEX_INITIALIZER;

static void say(const char *fmt, ...)
{
	va_list ap;

	pthread_mutex_lock(&out_lock);
	va_start(ap, fmt);
	vfprintf(stdout, fmt, ap);
	va_end(ap);
	fputc('\n', stdout);
	fflush(stdout);
	pthread_mutex_unlock(&out_lock);
}

/* The second thread: reads every command; RELEASE acts at once, the rest go to main. */
static void *reader(void *arg)
{
	char line[128];

	(void)arg;
	while (fgets(line, sizeof(line), stdin)) {
		line[strcspn(line, "\r\n")] = 0;
		if (!strcmp(line, "RELEASE")) {
			if (hang_flag)
				__atomic_store_n(hang_flag, 1, __ATOMIC_SEQ_CST);
			continue;
		}
		pthread_mutex_lock(&cmdq.lock);
		if ((cmdq.tail + 1) % 16 != cmdq.head) {
			snprintf(cmdq.queue[cmdq.tail], sizeof(cmdq.queue[0]), "%s", line);
			cmdq.tail = (cmdq.tail + 1) % 16;
		}
		pthread_cond_signal(&cmdq.cond);
		pthread_mutex_unlock(&cmdq.lock);
	}
	/* The calibrator went away: never leave a kernel hanging. */
	if (hang_flag)
		__atomic_store_n(hang_flag, 1, __ATOMIC_SEQ_CST);
	pthread_mutex_lock(&cmdq.lock);
	cmdq.eof = 1;
	pthread_cond_signal(&cmdq.cond);
	pthread_mutex_unlock(&cmdq.lock);
	return NULL;
}

static int next_cmd(char *buf, size_t len)
{
	pthread_mutex_lock(&cmdq.lock);
	while (cmdq.head == cmdq.tail && !cmdq.eof)
		pthread_cond_wait(&cmdq.cond, &cmdq.lock);
	if (cmdq.head == cmdq.tail) {
		pthread_mutex_unlock(&cmdq.lock);
		return -1;
	}
	snprintf(buf, len, "%s", cmdq.queue[cmdq.head]);
	cmdq.head = (cmdq.head + 1) % 16;
	pthread_mutex_unlock(&cmdq.lock);
	return 0;
}

static void *sym2(void *h, const char *a, const char *b)
{
	void *p = dlsym(h, a);

	return p ? p : (b ? dlsym(h, b) : NULL);
}

static int load(const char *path)
{
	void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);

	if (!h) {
		say("ERROR dlopen %s: %s", path, dlerror());
		return -1;
	}
#define L(field, a, b)                                                                             \
	do {                                                                                       \
		*(void **)&cu.field = sym2(h, a, b);                                               \
		if (!cu.field) {                                                                   \
			say("ERROR %s has no %s", path, a);                                        \
			return -1;                                                                 \
		}                                                                                  \
	} while (0)
	L(Init, "cuInit", NULL);
	L(DeviceGet, "cuDeviceGet", NULL);
	L(DriverGetVersion, "cuDriverGetVersion", NULL);
	L(CtxCreate, "cuCtxCreate_v2", "cuCtxCreate");
	L(CtxDestroy, "cuCtxDestroy_v2", "cuCtxDestroy");
	L(CtxSetCurrent, "cuCtxSetCurrent", NULL);
	L(CtxSynchronize, "cuCtxSynchronize", NULL);
	L(ModuleLoadData, "cuModuleLoadData", NULL);
	L(ModuleGetFunction, "cuModuleGetFunction", NULL);
	L(LaunchKernel, "cuLaunchKernel", NULL);
	L(StreamCreate, "cuStreamCreate", NULL);
	L(StreamSynchronize, "cuStreamSynchronize", NULL);
	L(EventCreate, "cuEventCreate", NULL);
	L(EventRecord, "cuEventRecord", NULL);
	L(EventSynchronize, "cuEventSynchronize", NULL);
	L(MemAlloc, "cuMemAlloc_v2", "cuMemAlloc");
	L(MemFree, "cuMemFree_v2", "cuMemFree");
	L(MemAllocHost, "cuMemAllocHost_v2", "cuMemAllocHost");
	L(MemHostGetDevicePointer, "cuMemHostGetDevicePointer_v2", "cuMemHostGetDevicePointer");
	L(MemcpyDtoH, "cuMemcpyDtoH_v2", "cuMemcpyDtoH");
	L(MemcpyDtoHAsync, "cuMemcpyDtoHAsync_v2", "cuMemcpyDtoHAsync");
	L(MemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2", "cuMemcpyHtoDAsync");
	L(MemcpyHtoD, "cuMemcpyHtoD_v2", "cuMemcpyHtoD");
	L(MemAllocManaged, "cuMemAllocManaged", NULL);
	L(MemsetD8, "cuMemsetD8_v2", "cuMemsetD8");
	L(MemFreeHost, "cuMemFreeHost", NULL);
	L(EventElapsedTime, "cuEventElapsedTime", NULL);
	L(DeviceGetName, "cuDeviceGetName", NULL);
	L(DeviceGetAttribute, "cuDeviceGetAttribute", NULL);
	L(DeviceTotalMem, "cuDeviceTotalMem_v2", "cuDeviceTotalMem");
#undef L
	return 0;
}

static unsigned mode_flags(const char *mode)
{
	if (!strcmp(mode, "spin"))
		return 0x01;
	if (!strcmp(mode, "yield"))
		return 0x02;
	if (!strcmp(mode, "blocking"))
		return 0x04;
	return 0x00; /* auto */
}

#define CK(expr)                                                                                   \
	do {                                                                                       \
		CUresult _r = (expr);                                                              \
		if (_r) {                                                                          \
			say("ERROR %s: CUresult %d", #expr, _r);                                   \
			return -1;                                                                 \
		}                                                                                  \
	} while (0)

static int ensure_ctx(const char *mode)
{
	if (ctx && ctx_mode && !strcmp(ctx_mode, mode))
		return 0;
	if (ctx) {
		CUresult r = cu.CtxDestroy(ctx); /* frees its streams, events, modules, memory */

		ctx = NULL;
		if (r) {
			say("ERROR cuCtxDestroy: CUresult %d", r);
			return -1;
		}
		hang_flag = NULL;
	}
	CK(cu.CtxCreate(&ctx, mode_flags(mode), dev));
	ctx_mode = mode;
	CK(cu.ModuleLoadData(&mod, ptx));
	CK(cu.ModuleGetFunction(&f_hang, mod, "ffm_hang"));
	CK(cu.ModuleGetFunction(&f_spin, mod, "ffm_spin"));
	CK(cu.StreamCreate(&stream, 0));
	CK(cu.EventCreate(&event, 0));
	CK(cu.MemAlloc(&dbuf, BUF));
	CK(cu.MemAllocHost(&pinned, BUF));
	{
		void *fp;

		CK(cu.MemAllocHost(&fp, 64));
		hang_flag = fp;
		/* UVA: the host address is the device address; ask anyway. */
		if (cu.MemHostGetDevicePointer(&hang_flag_dev, fp, 0))
			hang_flag_dev = (CUdeviceptr)(uintptr_t)fp;
	}
	return 0;
}

static int launch_hang(CUstream s)
{
	void *args[] = { &hang_flag_dev };

	*hang_flag = 0;
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	CK(cu.LaunchKernel(f_hang, 1, 1, 1, 1, 1, 1, 0, s, args, NULL));
	return 0;
}

static int launch_spin(CUstream s, unsigned long long ns)
{
	void *args[] = { &ns };

	CK(cu.LaunchKernel(f_spin, 1, 1, 1, 1, 1, 1, 0, s, args, NULL));
	return 0;
}

static int is_sync_call(const char *call)
{
	return !strcmp(call, "ctx_sync") || !strcmp(call, "stream_sync") ||
	       !strcmp(call, "event_sync") || !strcmp(call, "memcpy_dtoh") ||
	       !strcmp(call, "mem_free") || !strcmp(call, "memcpy_dtoh_async_pageable");
}

/* Queue the GPU work that @call will wait for: the hang kernel, or a short spin. */
static int prepare(const char *call, int hang, CUdeviceptr *tofree)
{
	/* Synchronous copies and frees wait for the legacy stream (0); the rest use `stream`. */
	CUstream s = !strcmp(call, "memcpy_dtoh") || !strcmp(call, "mem_free") ? NULL : stream;

	if (!strcmp(call, "mem_free"))
		CK(cu.MemAlloc(tofree, BUF));
	if (!is_sync_call(call))
		return 0;
	if (hang ? launch_hang(s) : launch_spin(s, 2000000))
		return -1;
	if (!strcmp(call, "event_sync"))
		CK(cu.EventRecord(event, s));
	return 0;
}

/* The call itself: one function so that its frame is recognizable in stacks. */
static __attribute__((noinline)) CUresult do_call(const char *call, CUdeviceptr tofree)
{
	int v;

	if (!strcmp(call, "ctx_sync"))
		return cu.CtxSynchronize();
	if (!strcmp(call, "stream_sync"))
		return cu.StreamSynchronize(stream);
	if (!strcmp(call, "event_sync"))
		return cu.EventSynchronize(event);
	if (!strcmp(call, "memcpy_dtoh"))
		return cu.MemcpyDtoH(pinned, dbuf, BUF);
	if (!strcmp(call, "mem_free"))
		return cu.MemFree(tofree);
	if (!strcmp(call, "memcpy_dtoh_async_pageable"))
		return cu.MemcpyDtoHAsync(pageable, dbuf, BUF, stream);
	if (!strcmp(call, "launch"))
		return launch_spin(stream, 1000) ? 1 : 0;
	if (!strcmp(call, "driver_version"))
		return cu.DriverGetVersion(&v);
	if (!strcmp(call, "memcpy_htod_async_pinned"))
		return cu.MemcpyHtoDAsync(dbuf, pinned, BUF, stream);
	if (!strcmp(call, "event_record"))
		return cu.EventRecord(event, stream);
	return 999;
}

static int known_call(const char *c)
{
	return is_sync_call(c) || !strcmp(c, "launch") || !strcmp(c, "driver_version") ||
	       !strcmp(c, "memcpy_htod_async_pinned") || !strcmp(c, "event_record");
}

/* ------------------------------------------------------------------ MEASURE: the node model */

#define MEASURE_BUDGET_NS 3000000000ull /* past it, every point is measured once */
#define MEASURE_MAX (64u << 20)
#define MIGRATE_BYTES (16u << 20)

static volatile unsigned touched; /* what the host read of the pages (touch_pages) */

static const size_t copy_sizes[] = { 4096, 65536, 1u << 20, 16u << 20, MEASURE_MAX };
static const unsigned long long exit_waits[] = { 20000, 100000, 500000, 1000000, 5000000 };
static unsigned long long measure_t0;

static unsigned long long now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (unsigned long long)ts.tv_sec * 1000000000ull + (unsigned long long)ts.tv_nsec;
}

/* Repetitions of one point: fewer for big ones, one when the budget is spent. */
static int reps_for(size_t bytes, int small)
{
	if (now_ns() - measure_t0 > MEASURE_BUDGET_NS)
		return 1;
	return bytes >= (16u << 20) ? 2 : small;
}

static int gpu_key(void)
{
	char name[100];
	int major = 0, minor = 0;
	size_t mem = 0;

	/* CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR / _MINOR */
	CK(cu.DeviceGetName(name, sizeof(name), dev));
	CK(cu.DeviceGetAttribute(&major, 75, dev));
	CK(cu.DeviceGetAttribute(&minor, 76, dev));
	CK(cu.DeviceTotalMem(&mem, dev));
	for (char *c = name; *c; c++)
		if (*c < 0x20 || *c > 0x7e)
			*c = '?';
	say("GPU %s sm_%d%d %zuMiB", name, major, minor, mem >> 20);
	return 0;
}

/* The fastest of a few synchronous copies of @n bytes between @host and @d. */
static int time_copy(int d2h, void *host, CUdeviceptr d, size_t n, unsigned long long *best)
{
	int reps = reps_for(n, 5);

	*best = ~0ull;
	/* i = -1: a warm-up, where the fastest of a few would not hide a first call's cost */
	for (int i = reps > 2 ? -1 : 0; i < reps; i++) {
		unsigned long long t0 = now_ns(), t;

		CK(d2h ? cu.MemcpyDtoH(host, d, n) : cu.MemcpyHtoD(d, host, n));
		t = now_ns() - t0;
		if (i >= 0 && t < *best)
			*best = t;
	}
	return 0;
}

static int measure_copies(CUdeviceptr d, void *const host[3])
{
	static const char *const kinds[3] = { "pageable", "pinned", "managed" };

	for (size_t s = 0; s < sizeof(copy_sizes) / sizeof(copy_sizes[0]); s++)
		for (int dir = 0; dir < 2; dir++)
			for (int k = 0; k < 3; k++) {
				unsigned long long ns;

				if (time_copy(dir, host[k], d, copy_sizes[s], &ns) < 0)
					return -1;
				say("COPY %s %s %zu %llu", dir ? "d2h" : "h2d", kinds[k],
				    copy_sizes[s], ns);
			}
	return 0;
}

/* The host reads a byte of each page: a program reading what the GPU wrote (the faults the
 * managed memset rule prices, stages/ffm_price.h, are of such reads). */
static unsigned long long touch_pages(volatile unsigned char *p, size_t n, size_t page)
{
	unsigned long long t0 = now_ns();
	unsigned s = 0;

	for (size_t i = 0; i < n; i += page)
		s += p[i];
	touched += s; /* kept: the reads are the point */
	return now_ns() - t0;
}

/* A counter of this thread's page faults (a software perf event, user mode only: allowed
 * unprivileged up to perf_event_paranoid 2); -1 where the kernel refuses it. */
static int fault_counter(void)
{
	struct perf_event_attr a = { .type = PERF_TYPE_SOFTWARE, .size = sizeof(a),
				     .config = PERF_COUNT_SW_PAGE_FAULTS, .exclude_kernel = 1,
				     .exclude_hv = 1 };

	return (int)syscall(SYS_perf_event_open, &a, 0, -1, -1, PERF_FLAG_FD_CLOEXEC);
}

static unsigned long long faults_now(int fd)
{
	unsigned long long v = 0;

	return fd >= 0 && read(fd, &v, sizeof(v)) == (ssize_t)sizeof(v) ? v : 0;
}

static int device_write(CUdeviceptr m, size_t n, unsigned long long *ns)
{
	unsigned long long t0 = now_ns();

	CK(cu.MemsetD8(m, 1, n));
	CK(cu.CtxSynchronize());
	*ns = now_ns() - t0;
	return 0;
}

/* Managed pages both ways: the fastest first touch minus the fastest touch of resident pages
 * (noise only adds, so the fastest of a few is the least disturbed). */
static int measure_migration(CUdeviceptr m)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE), pages = MIGRATE_BYTES / page;
	volatile unsigned char *p = (volatile unsigned char *)(uintptr_t)m;
	unsigned long long best[4] = { ~0ull, ~0ull, ~0ull, ~0ull }, t[4], f0, faults = 0;
	int fd = fault_counter();

	for (int i = 0, reps = reps_for(MIGRATE_BYTES, 3); i < reps; i++) {
		touch_pages(p, MIGRATE_BYTES, page);
		if (device_write(m, MIGRATE_BYTES, &t[0]) < 0 ||
		    device_write(m, MIGRATE_BYTES, &t[1]) < 0) {
			if (fd >= 0)
				close(fd);
			return -1;
		}
		f0 = faults_now(fd);
		t[2] = touch_pages(p, MIGRATE_BYTES, page);
		if (t[2] < best[2]) /* the faults of the touch measured */
			faults = faults_now(fd) - f0;
		t[3] = touch_pages(p, MIGRATE_BYTES, page);
		for (int k = 0; k < 4; k++)
			best[k] = t[k] < best[k] ? t[k] : best[k];
	}
	if (fd >= 0)
		close(fd);
	say("MIGRATE to_device %zu %zu %llu", page, pages, best[0] > best[1] ? best[0] - best[1] : 0);
	say("MIGRATE to_host %zu %zu %llu", page, pages, best[2] > best[3] ? best[2] - best[3] : 0);
	/* The driver may bring several pages back per fault (read-ahead): stage 4 counts faults. */
	if (faults && faults <= pages)
		say("FAULTS to_host %zu %llu", pages, faults);
	return 0;
}

/* Host time of launch + stream sync minus the kernel's event-timed length; the fastest of a
 * few (noise only adds). Each figure holds the launch too: only differences are used. */
static int measure_exit(const char *mode, CUevent e0, CUevent e1)
{
	for (size_t w = 0; w < sizeof(exit_waits) / sizeof(exit_waits[0]); w++) {
		long long best = 0;
		int reps = reps_for(0, 7);

		for (int i = 0; i < reps; i++) {
			unsigned long long t0 = now_ns(), t;
			long long v;
			float ms;

			CK(cu.EventRecord(e0, stream));
			if (launch_spin(stream, exit_waits[w]) < 0)
				return -1;
			CK(cu.EventRecord(e1, stream));
			CK(cu.StreamSynchronize(stream));
			t = now_ns() - t0;
			CK(cu.EventElapsedTime(&ms, e0, e1));
			v = (long long)t - (long long)((double)ms * 1e6);
			best = !i || v < best ? v : best;
		}
		say("EXIT %s %llu %lld", mode, exit_waits[w], best);
	}
	return 0;
}

static int measure_buffers(void)
{
	CUdeviceptr d = 0, m = 0;
	void *host[3] = { NULL, NULL, NULL };
	int err = -1;

	host[0] = malloc(MEASURE_MAX);
	if (!host[0]) {
		say("ERROR out of memory");
		return -1;
	}
	memset(host[0], 1, MEASURE_MAX);
	if (!cu.MemAlloc(&d, MEASURE_MAX) && !cu.MemAllocHost(&host[1], MEASURE_MAX) &&
	    !cu.MemAllocManaged(&m, MEASURE_MAX, 1 /* CU_MEM_ATTACH_GLOBAL */)) {
		host[2] = (void *)(uintptr_t)m;
		memset(host[2], 1, MEASURE_MAX);
		err = measure_copies(d, host) < 0 || measure_migration(m) < 0 ? -1 : 0;
	} else {
		say("ERROR cannot allocate the buffers measured");
	}
	if (m)
		cu.MemFree(m);
	if (host[1])
		cu.MemFreeHost(host[1]);
	if (d)
		cu.MemFree(d);
	free(host[0]);
	return err;
}

static int measure(void)
{
	static const char *const exit_modes[] = { "spin", "yield", "blocking" };

	measure_t0 = now_ns();
	if (ensure_ctx("spin") < 0 || gpu_key() < 0)
		return -1;
	/* Exit latency first: the figure most easily disturbed gets its repetitions. */
	for (int i = 0; i < 3; i++) {
		CUevent e0, e1;

		if (ensure_ctx(exit_modes[i]) < 0)
			return -1;
		CK(cu.EventCreate(&e0, 0));
		CK(cu.EventCreate(&e1, 0));
		if (measure_exit(exit_modes[i], e0, e1) < 0)
			return -1;
	}
	/* Copies and migrations in a spinning context: no wait's exit latency in their times. */
	if (ensure_ctx("spin") < 0 || measure_buffers() < 0)
		return -1;
	say("MEASURED %.3f", (double)(now_ns() - measure_t0) / 1e9);
	return 0;
}

static const char *const modes[] = { "spin", "yield", "blocking", "auto" };

int main(int argc, char **argv)
{
	pthread_t rt;
	char line[128];

	if (argc != 2) {
		fprintf(stderr, "usage: %s LIBCUDA_PATH (driven by ffmctl calibrate)\n", argv[0]);
		return 2;
	}
	pageable = malloc(BUF);
	if (!pageable || load(argv[1]) < 0)
		return 1;
	if (cu.Init(0) || cu.DeviceGet(&dev, 0)) {
		say("ERROR cuInit/cuDeviceGet failed (no usable GPU?)");
		return 1;
	}
	if (pthread_create(&rt, NULL, reader, NULL)) {
		say("ERROR pthread_create");
		return 1;
	}
	say("READY %d", (int)getpid());
	while (next_cmd(line, sizeof(line)) == 0) {
		char verb[16], call[64], modebuf[16];
		const char *mode = NULL;
		CUdeviceptr tofree = 0;
		CUresult r;
		int hang;

		if (!strcmp(line, "QUIT"))
			break;
		if (!strcmp(line, "MEASURE")) {
			measure(); /* an ERROR line ends it early */
			continue;
		}
		if (sscanf(line, "%15s %63s %15s", verb, call, modebuf) != 3 ||
		    (strcmp(verb, "RUN") && strcmp(verb, "CALL")) || !known_call(call)) {
			say("ERROR bad command '%s'", line);
			continue;
		}
		for (size_t i = 0; i < sizeof(modes) / sizeof(modes[0]); i++)
			if (!strcmp(modebuf, modes[i]))
				mode = modes[i];
		if (!mode) {
			say("ERROR unknown mode '%s'", modebuf);
			continue;
		}
		hang = !strcmp(verb, "RUN");
		if (hang && !is_sync_call(call)) {
			say("ERROR %s does not block", call);
			continue;
		}
		if (ensure_ctx(mode) < 0 || prepare(call, hang, &tofree) < 0)
			continue;
		if (hang)
			say("BLOCKING %s %s %ld", call, mode, (long)syscall(SYS_gettid));
		r = do_call(call, tofree);
		say("DONE %s %s %d", call, mode, r);
	}
	if (hang_flag)
		*hang_flag = 1;
	if (ctx)
		cu.CtxDestroy(ctx);
	return 0;
}
