/* SPDX-License-Identifier: MIT */
/*
 * The exported CUDA driver API of the simulator: argument checking, the current-context stack,
 * the primary context, and the translation of each call into engine operations. Which calls
 * wait for the GPU (through fk_host_sync, hence the wait function) follows the CUDA
 * documentation's "API synchronization behavior" and what was measured on the real driver:
 *
 *   always wait      cuCtxSynchronize(_v2), cuStreamSynchronize, cuEventSynchronize,
 *                    synchronous copies (HtoD, DtoH, DtoD, cuMemcpy), cuMemFree, cuMemFreeHost,
 *                    cuMemHostUnregister, cuCtxDestroy, the last cuDevicePrimaryCtxRelease
 *   wait sometimes   async DtoH/HtoH copies into pageable memory; synchronous memsets on
 *                    managed or pinned memory
 *   never wait       launches, event records, async copies from/to pinned memory, async HtoD
 *                    from pageable memory (staged at the call), memsets on device memory,
 *                    everything else
 *
 * Each exported name is its own function (no aliases, no tail calls into each other), so that a
 * probe on one entry point counts only that entry point, as on the real driver.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fakecuda.h"

static _Atomic bool initialized;

/* The current-context stack of each thread (cuCtxPush/PopCurrent); the top is current. */
#define FK_CTX_STACK 32
static __thread struct fk_ctx *tls_ctx[FK_CTX_STACK];
static __thread int tls_depth;

/* Each thread's per-thread default stream, per context (keyed by id: pointers are reused). */
#define FK_PTDS_SLOTS 8
static __thread struct {
	uint64_t ctx_id;
	struct fk_stream *s;
} tls_ptds[FK_PTDS_SLOTS];

/* The primary context of the one device, refcounted by cuDevicePrimaryCtxRetain/Release. */
static struct {
	pthread_mutex_t lock;
	struct fk_ctx *ctx;
	int refs;
	unsigned int flags;
} primary = { .lock = PTHREAD_MUTEX_INITIALIZER };

#define CHECK_INIT()                                                                               \
	do {                                                                                       \
		if (!atomic_load(&initialized))                                                    \
			return CUDA_ERROR_NOT_INITIALIZED;                                         \
	} while (0)

#define CHECK(expr)                                                                                \
	do {                                                                                       \
		CUresult _r = (expr);                                                              \
		if (_r != CUDA_SUCCESS)                                                            \
			return _r;                                                                 \
	} while (0)

static CUresult check_dev(CUdevice dev)
{
	return dev >= 0 && dev < FK_DEVICE_COUNT ? CUDA_SUCCESS : CUDA_ERROR_INVALID_DEVICE;
}

static CUresult cur_ctx(struct fk_ctx **ret)
{
	struct fk_ctx *ctx;

	CHECK_INIT();
	ctx = tls_depth ? tls_ctx[tls_depth - 1] : NULL;
	if (!ctx || !fk_handle_is(ctx, FK_T_CTX))
		return CUDA_ERROR_INVALID_CONTEXT;
	*ret = ctx;
	return CUDA_SUCCESS;
}

static CUresult per_thread_stream(struct fk_ctx *ctx, struct fk_stream **ret)
{
	int free_slot = -1;
	struct fk_stream *s;

	for (int i = 0; i < FK_PTDS_SLOTS; i++) {
		if (tls_ptds[i].ctx_id == ctx->id) {
			*ret = tls_ptds[i].s;
			return CUDA_SUCCESS;
		}
		/* A slot whose context is gone can be reused (its stream went with the context). */
		if (free_slot < 0 && (!tls_ptds[i].ctx_id || !tls_ptds[i].s ||
				      !fk_handle_is(tls_ptds[i].s, FK_T_STREAM)))
			free_slot = i;
	}
	if (free_slot < 0)
		return CUDA_ERROR_OUT_OF_MEMORY;
	CHECK(fk_stream_new(ctx, 0, 0, false, true, &s));
	/* Registered so that destroying the context retires it with the user's streams. */
	if (fk_handle_add(s, FK_T_STREAM) < 0) {
		fk_stream_retire(s);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	tls_ptds[free_slot].ctx_id = ctx->id;
	tls_ptds[free_slot].s = s;
	*ret = s;
	return CUDA_SUCCESS;
}

/*
 * The stream a handle names. NULL is the legacy default stream, or the per-thread one for the
 * _ptsz/_ptds entry points; CU_STREAM_LEGACY and CU_STREAM_PER_THREAD name them explicitly.
 */
static CUresult get_stream(CUstream h, bool ptds, struct fk_stream **ret)
{
	struct fk_ctx *ctx;

	if (h && h != CU_STREAM_LEGACY && h != CU_STREAM_PER_THREAD) {
		CHECK_INIT();
		if (!fk_handle_is(h, FK_T_STREAM))
			return CUDA_ERROR_INVALID_HANDLE;
		*ret = (struct fk_stream *)h;
		return CUDA_SUCCESS;
	}
	CHECK(cur_ctx(&ctx));
	if (h == CU_STREAM_PER_THREAD || (!h && ptds))
		return per_thread_stream(ctx, ret);
	*ret = ctx->legacy;
	return CUDA_SUCCESS;
}

/* Waits, through the wait function, for everything submitted to s so far. */
static CUresult sync_stream(struct fk_stream *s)
{
	struct fk_fence f = { .n = 1 };

	pthread_mutex_lock(&s->ctx->lock);
	f.pt[0].s = fk_stream_get(s);
	f.pt[0].seq = s->submitted;
	pthread_mutex_unlock(&s->ctx->lock);
	return fk_host_sync(s->ctx, &f);
}

static CUresult sync_point(struct fk_ctx *ctx, struct fk_point *pt)
{
	struct fk_fence f = { .n = 1, .pt = { *pt } };

	return fk_host_sync(ctx, &f);
}

static CUresult sync_ctx(struct fk_ctx *ctx)
{
	struct fk_fence f;

	fk_ctx_fence(ctx, &f);
	return fk_host_sync(ctx, &f);
}

/* ---- initialization, version, device ---- */

CUresult cuInit(unsigned int Flags)
{
	static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

	if (Flags)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&lock);
	if (!atomic_load(&initialized)) {
		fk_config_load();
		if (fk_config_valid())
			atomic_store(&initialized, true);
	}
	pthread_mutex_unlock(&lock);
	/* A malformed FAKECUDA_* knob fails loudly instead of simulating something else. */
	return atomic_load(&initialized) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CUresult cuDriverGetVersion(int *driverVersion)
{
	if (!driverVersion)
		return CUDA_ERROR_INVALID_VALUE;
	*driverVersion = FK_DRIVER_VERSION;
	return CUDA_SUCCESS;
}

CUresult cuDeviceGetCount(int *count)
{
	CHECK_INIT();
	if (!count)
		return CUDA_ERROR_INVALID_VALUE;
	*count = FK_DEVICE_COUNT;
	return CUDA_SUCCESS;
}

CUresult cuDeviceGet(CUdevice *device, int ordinal)
{
	CHECK_INIT();
	if (!device)
		return CUDA_ERROR_INVALID_VALUE;
	CHECK(check_dev(ordinal));
	*device = ordinal;
	return CUDA_SUCCESS;
}

CUresult cuDeviceGetName(char *name, int len, CUdevice dev)
{
	CHECK_INIT();
	if (!name || len <= 0)
		return CUDA_ERROR_INVALID_VALUE;
	CHECK(check_dev(dev));
	snprintf(name, (size_t)len, "%s", FK_DEVICE_NAME);
	return CUDA_SUCCESS;
}

static CUresult device_uuid(CUuuid *uuid, CUdevice dev)
{
	static const char id[16] = "ffm-fakecuda-gpu";

	CHECK_INIT();
	if (!uuid)
		return CUDA_ERROR_INVALID_VALUE;
	CHECK(check_dev(dev));
	memcpy(uuid->bytes, id, sizeof(uuid->bytes));
	return CUDA_SUCCESS;
}

CUresult cuDeviceGetUuid(CUuuid *uuid, CUdevice dev)
{
	return device_uuid(uuid, dev);
}

CUresult cuDeviceGetUuid_v2(CUuuid *uuid, CUdevice dev)
{
	return device_uuid(uuid, dev);
}

CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev)
{
	CHECK_INIT();
	if (!bytes)
		return CUDA_ERROR_INVALID_VALUE;
	CHECK(check_dev(dev));
	*bytes = FK_DEVICE_MEM;
	return CUDA_SUCCESS;
}

CUresult cuDeviceTotalMem(unsigned int *bytes, CUdevice dev)
{
	CHECK_INIT();
	if (!bytes)
		return CUDA_ERROR_INVALID_VALUE;
	CHECK(check_dev(dev));
	*bytes = 0xffffffffu; /* the legacy API's 32 bits saturate, as on any modern GPU */
	return CUDA_SUCCESS;
}

CUresult cuDeviceComputeCapability(int *major, int *minor, CUdevice dev)
{
	CHECK_INIT();
	if (!major || !minor)
		return CUDA_ERROR_INVALID_VALUE;
	CHECK(check_dev(dev));
	*major = 9;
	*minor = 0;
	return CUDA_SUCCESS;
}

CUresult cuDeviceGetAttribute(int *pi, CUdevice_attribute attrib, CUdevice dev)
{
	CHECK_INIT();
	if (!pi)
		return CUDA_ERROR_INVALID_VALUE;
	CHECK(check_dev(dev));
	/* An H100/H200-like device; attributes not listed read as 0 (feature absent). */
	switch (attrib) {
	case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK:
		*pi = 1024;
		break;
	case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X:
	case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y:
		*pi = 1024;
		break;
	case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z:
		*pi = 64;
		break;
	case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X:
		*pi = 0x7fffffff;
		break;
	case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y:
	case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z:
		*pi = 65535;
		break;
	case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK:
		*pi = 48 * 1024;
		break;
	case CU_DEVICE_ATTRIBUTE_WARP_SIZE:
		*pi = 32;
		break;
	case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT:
		*pi = 132;
		break;
	case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR:
		*pi = 9;
		break;
	case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR:
		*pi = 0;
		break;
	case CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT:
		*pi = 2; /* one copy engine per direction, as simulated */
		break;
	case CU_DEVICE_ATTRIBUTE_CONCURRENT_KERNELS:
	case CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING:
	case CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY:
	case CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY:
	case CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS:
		*pi = 1;
		break;
	default:
		*pi = 0;
		break;
	}
	return CUDA_SUCCESS;
}

/* ---- contexts ---- */

static CUresult check_ctx_flags(unsigned int flags)
{
	unsigned int sched = flags & CU_CTX_SCHED_MASK;

	/* At most one scheduling mode. */
	if (sched & (sched - 1))
		return CUDA_ERROR_INVALID_VALUE;
	if (flags & ~(CU_CTX_FLAGS_MASK))
		return CUDA_ERROR_INVALID_VALUE;
	return CUDA_SUCCESS;
}

static CUresult ctx_create(CUcontext *pctx, unsigned int flags, CUdevice dev)
{
	struct fk_ctx *ctx;

	CHECK_INIT();
	if (!pctx)
		return CUDA_ERROR_INVALID_VALUE;
	CHECK(check_dev(dev));
	CHECK(check_ctx_flags(flags));
	if (tls_depth == FK_CTX_STACK)
		return CUDA_ERROR_OUT_OF_MEMORY;
	CHECK(fk_ctx_new(dev, flags, false, &ctx));
	/* A new context becomes current: pushed onto this thread's stack. */
	tls_ctx[tls_depth++] = ctx;
	*pctx = (CUcontext)ctx;
	return CUDA_SUCCESS;
}

CUresult cuCtxCreate(CUcontext *pctx, unsigned int flags, CUdevice dev)
{
	return ctx_create(pctx, flags, dev);
}

CUresult cuCtxCreate_v2(CUcontext *pctx, unsigned int flags, CUdevice dev)
{
	return ctx_create(pctx, flags, dev);
}

CUresult cuCtxCreate_v3(CUcontext *pctx, CUexecAffinityParam *paramsArray, int numParams,
			unsigned int flags, CUdevice dev)
{
	/* Execution affinity (SM partitions) is accepted and ignored. */
	if (numParams < 0 || (numParams && !paramsArray))
		return CUDA_ERROR_INVALID_VALUE;
	return ctx_create(pctx, flags, dev);
}

CUresult cuCtxCreate_v4(CUcontext *pctx, CUctxCreateParams *ctxCreateParams, unsigned int flags,
			CUdevice dev)
{
	/* Affinity and CIG parameters are accepted and ignored. */
	return ctx_create(pctx, flags, dev);
}

/* Removes ctx from this thread's context stack wherever it is. */
static void unbind_ctx(struct fk_ctx *ctx)
{
	int j = 0;

	for (int i = 0; i < tls_depth; i++)
		if (tls_ctx[i] != ctx)
			tls_ctx[j++] = tls_ctx[i];
	tls_depth = j;
}

static CUresult ctx_destroy(CUcontext h)
{
	struct fk_ctx *ctx = (struct fk_ctx *)h;

	CHECK_INIT();
	if (!fk_handle_is(ctx, FK_T_CTX))
		return CUDA_ERROR_INVALID_CONTEXT;
	/* The primary context belongs to cuDevicePrimaryCtxRetain/Release. */
	if (ctx->primary)
		return CUDA_ERROR_INVALID_CONTEXT;
	unbind_ctx(ctx);
	return fk_ctx_destroy(ctx);
}

CUresult cuCtxDestroy(CUcontext ctx)
{
	return ctx_destroy(ctx);
}

CUresult cuCtxDestroy_v2(CUcontext ctx)
{
	return ctx_destroy(ctx);
}

CUresult cuCtxSetCurrent(CUcontext h)
{
	struct fk_ctx *ctx = (struct fk_ctx *)h;

	CHECK_INIT();
	if (ctx && !fk_handle_is(ctx, FK_T_CTX))
		return CUDA_ERROR_INVALID_CONTEXT;
	/* Replaces the top of the stack; NULL unbinds it. */
	if (!ctx) {
		if (tls_depth)
			tls_depth--;
	} else if (tls_depth) {
		tls_ctx[tls_depth - 1] = ctx;
	} else {
		tls_ctx[tls_depth++] = ctx;
	}
	return CUDA_SUCCESS;
}

CUresult cuCtxGetCurrent(CUcontext *pctx)
{
	CHECK_INIT();
	if (!pctx)
		return CUDA_ERROR_INVALID_VALUE;
	*pctx = tls_depth ? (CUcontext)tls_ctx[tls_depth - 1] : NULL;
	return CUDA_SUCCESS;
}

static CUresult ctx_push(CUcontext h)
{
	CHECK_INIT();
	if (!fk_handle_is(h, FK_T_CTX))
		return CUDA_ERROR_INVALID_CONTEXT;
	if (tls_depth == FK_CTX_STACK)
		return CUDA_ERROR_OUT_OF_MEMORY;
	tls_ctx[tls_depth++] = (struct fk_ctx *)h;
	return CUDA_SUCCESS;
}

static CUresult ctx_pop(CUcontext *pctx)
{
	CHECK_INIT();
	if (!tls_depth)
		return CUDA_ERROR_INVALID_CONTEXT;
	tls_depth--;
	if (pctx)
		*pctx = (CUcontext)tls_ctx[tls_depth];
	return CUDA_SUCCESS;
}

CUresult cuCtxPushCurrent(CUcontext ctx)
{
	return ctx_push(ctx);
}

CUresult cuCtxPushCurrent_v2(CUcontext ctx)
{
	return ctx_push(ctx);
}

CUresult cuCtxPopCurrent(CUcontext *pctx)
{
	return ctx_pop(pctx);
}

CUresult cuCtxPopCurrent_v2(CUcontext *pctx)
{
	return ctx_pop(pctx);
}

CUresult cuCtxGetDevice(CUdevice *device)
{
	struct fk_ctx *ctx;

	CHECK(cur_ctx(&ctx));
	if (!device)
		return CUDA_ERROR_INVALID_VALUE;
	*device = ctx->dev;
	return CUDA_SUCCESS;
}

CUresult cuCtxGetFlags(unsigned int *flags)
{
	struct fk_ctx *ctx;

	CHECK(cur_ctx(&ctx));
	if (!flags)
		return CUDA_ERROR_INVALID_VALUE;
	*flags = atomic_load(&ctx->flags);
	return CUDA_SUCCESS;
}

CUresult cuCtxGetApiVersion(CUcontext h, unsigned int *version)
{
	struct fk_ctx *ctx = (struct fk_ctx *)h;

	CHECK_INIT();
	if (!version)
		return CUDA_ERROR_INVALID_VALUE;
	if (!ctx)
		CHECK(cur_ctx(&ctx));
	else if (!fk_handle_is(ctx, FK_T_CTX))
		return CUDA_ERROR_INVALID_CONTEXT;
	*version = FK_DRIVER_VERSION;
	return CUDA_SUCCESS;
}

CUresult cuCtxSynchronize(void)
{
	struct fk_ctx *ctx;

	CHECK(cur_ctx(&ctx));
	return sync_ctx(ctx);
}

/* What cudaDeviceSynchronize of CUDA 13 calls (docs/DESIGN.md, facts); NULL: current context. */
CUresult cuCtxSynchronize_v2(CUcontext h)
{
	struct fk_ctx *ctx = (struct fk_ctx *)h;

	if (!ctx)
		CHECK(cur_ctx(&ctx));
	else if (!atomic_load(&initialized))
		return CUDA_ERROR_NOT_INITIALIZED;
	else if (!fk_handle_is(ctx, FK_T_CTX))
		return CUDA_ERROR_INVALID_CONTEXT;
	return sync_ctx(ctx);
}

/* ---- the primary context ---- */

CUresult cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev)
{
	CUresult r = CUDA_SUCCESS;

	CHECK_INIT();
	if (!pctx)
		return CUDA_ERROR_INVALID_VALUE;
	CHECK(check_dev(dev));
	pthread_mutex_lock(&primary.lock);
	if (!primary.ctx)
		r = fk_ctx_new(dev, primary.flags, true, &primary.ctx);
	if (r == CUDA_SUCCESS) {
		primary.refs++;
		*pctx = (CUcontext)primary.ctx;
	}
	pthread_mutex_unlock(&primary.lock);
	return r;
}

static CUresult primary_release(CUdevice dev)
{
	struct fk_ctx *ctx = NULL;

	CHECK_INIT();
	CHECK(check_dev(dev));
	pthread_mutex_lock(&primary.lock);
	if (!primary.refs) {
		pthread_mutex_unlock(&primary.lock);
		return CUDA_ERROR_INVALID_CONTEXT;
	}
	if (--primary.refs == 0) {
		ctx = primary.ctx;
		primary.ctx = NULL;
	}
	pthread_mutex_unlock(&primary.lock);
	/* The last release destroys the context, after waiting for its work. */
	if (ctx) {
		unbind_ctx(ctx);
		return fk_ctx_destroy(ctx);
	}
	return CUDA_SUCCESS;
}

CUresult cuDevicePrimaryCtxRelease(CUdevice dev)
{
	return primary_release(dev);
}

CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev)
{
	return primary_release(dev);
}

static CUresult primary_set_flags(CUdevice dev, unsigned int flags)
{
	CHECK_INIT();
	CHECK(check_dev(dev));
	CHECK(check_ctx_flags(flags));
	pthread_mutex_lock(&primary.lock);
	primary.flags = flags;
	/* Since CUDA 11 the flags may change while the context is active; the next wait uses them. */
	if (primary.ctx)
		atomic_store(&primary.ctx->flags, flags);
	pthread_mutex_unlock(&primary.lock);
	return CUDA_SUCCESS;
}

CUresult cuDevicePrimaryCtxSetFlags(CUdevice dev, unsigned int flags)
{
	return primary_set_flags(dev, flags);
}

CUresult cuDevicePrimaryCtxSetFlags_v2(CUdevice dev, unsigned int flags)
{
	return primary_set_flags(dev, flags);
}

CUresult cuDevicePrimaryCtxGetState(CUdevice dev, unsigned int *flags, int *active)
{
	CHECK_INIT();
	if (!flags || !active)
		return CUDA_ERROR_INVALID_VALUE;
	CHECK(check_dev(dev));
	pthread_mutex_lock(&primary.lock);
	*flags = primary.flags;
	*active = primary.ctx != NULL;
	pthread_mutex_unlock(&primary.lock);
	return CUDA_SUCCESS;
}

static CUresult primary_reset(CUdevice dev)
{
	struct fk_ctx *ctx;

	CHECK_INIT();
	CHECK(check_dev(dev));
	pthread_mutex_lock(&primary.lock);
	ctx = primary.ctx;
	primary.ctx = NULL;
	primary.refs = 0;
	primary.flags = 0;
	pthread_mutex_unlock(&primary.lock);
	if (ctx) {
		unbind_ctx(ctx);
		return fk_ctx_destroy(ctx);
	}
	return CUDA_SUCCESS;
}

CUresult cuDevicePrimaryCtxReset(CUdevice dev)
{
	return primary_reset(dev);
}

CUresult cuDevicePrimaryCtxReset_v2(CUdevice dev)
{
	return primary_reset(dev);
}

/* ---- streams ---- */

static CUresult stream_create(CUstream *phStream, unsigned int flags, int priority)
{
	struct fk_ctx *ctx;
	struct fk_stream *s;

	CHECK(cur_ctx(&ctx));
	if (!phStream || (flags & ~(unsigned int)CU_STREAM_NON_BLOCKING))
		return CUDA_ERROR_INVALID_VALUE;
	CHECK(fk_stream_new(ctx, flags, priority, false, false, &s));
	if (fk_handle_add(s, FK_T_STREAM) < 0) {
		fk_stream_retire(s);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	*phStream = (CUstream)s;
	return CUDA_SUCCESS;
}

CUresult cuStreamCreate(CUstream *phStream, unsigned int Flags)
{
	return stream_create(phStream, Flags, 0);
}

CUresult cuStreamCreateWithPriority(CUstream *phStream, unsigned int flags, int priority)
{
	/* Priorities are recorded, not scheduled: each stream has its own engine anyway. */
	return stream_create(phStream, flags, priority);
}

static CUresult stream_destroy(CUstream h)
{
	struct fk_stream *s = (struct fk_stream *)h;

	CHECK_INIT();
	if (!h || !fk_handle_is(s, FK_T_STREAM) || s->per_thread)
		return CUDA_ERROR_INVALID_HANDLE;
	/* Returns at once; queued work still runs and the stream goes when it is done. */
	fk_handle_del(s);
	fk_stream_retire(s);
	return CUDA_SUCCESS;
}

CUresult cuStreamDestroy(CUstream hStream)
{
	return stream_destroy(hStream);
}

CUresult cuStreamDestroy_v2(CUstream hStream)
{
	return stream_destroy(hStream);
}

static CUresult stream_synchronize(CUstream h, bool ptds)
{
	struct fk_stream *s;

	CHECK(get_stream(h, ptds, &s));
	return sync_stream(s);
}

CUresult cuStreamSynchronize(CUstream hStream)
{
	return stream_synchronize(hStream, false);
}

CUresult cuStreamSynchronize_ptsz(CUstream hStream)
{
	return stream_synchronize(hStream, true);
}

static CUresult stream_query(CUstream h, bool ptds)
{
	struct fk_stream *s;
	uint64_t submitted;

	CHECK(get_stream(h, ptds, &s));
	pthread_mutex_lock(&s->ctx->lock);
	submitted = s->submitted;
	pthread_mutex_unlock(&s->ctx->lock);
	return atomic_load(&s->completed) >= submitted ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}

CUresult cuStreamQuery(CUstream hStream)
{
	return stream_query(hStream, false);
}

CUresult cuStreamQuery_ptsz(CUstream hStream)
{
	return stream_query(hStream, true);
}

static CUresult stream_wait_event(CUstream h, CUevent hev, unsigned int flags, bool ptds)
{
	struct fk_event *ev = (struct fk_event *)hev;
	struct fk_stream *s;
	struct fk_op *op;

	CHECK(get_stream(h, ptds, &s));
	if (!fk_handle_is(ev, FK_T_EVENT))
		return CUDA_ERROR_INVALID_HANDLE;
	if (flags & ~(unsigned int)CU_EVENT_WAIT_EXTERNAL)
		return CUDA_ERROR_INVALID_VALUE;
	op = fk_op_new(FK_OP_NOP);
	if (!op)
		return CUDA_ERROR_OUT_OF_MEMORY;
	/* The stream waits for the event's latest record as of now (never recorded: no wait). */
	pthread_mutex_lock(&ev->lock);
	if (ev->pt.s) {
		op->deps[0].s = fk_stream_get(ev->pt.s);
		op->deps[0].seq = ev->pt.seq;
		op->ndeps = 1;
	}
	pthread_mutex_unlock(&ev->lock);
	return fk_submit(s, op, NULL);
}

CUresult cuStreamWaitEvent(CUstream hStream, CUevent hEvent, unsigned int Flags)
{
	return stream_wait_event(hStream, hEvent, Flags, false);
}

CUresult cuStreamWaitEvent_ptsz(CUstream hStream, CUevent hEvent, unsigned int Flags)
{
	return stream_wait_event(hStream, hEvent, Flags, true);
}

CUresult cuStreamGetFlags(CUstream hStream, unsigned int *flags)
{
	struct fk_stream *s;

	CHECK(get_stream(hStream, false, &s));
	if (!flags)
		return CUDA_ERROR_INVALID_VALUE;
	*flags = s->flags;
	return CUDA_SUCCESS;
}

CUresult cuStreamGetPriority(CUstream hStream, int *priority)
{
	struct fk_stream *s;

	CHECK(get_stream(hStream, false, &s));
	if (!priority)
		return CUDA_ERROR_INVALID_VALUE;
	*priority = s->priority;
	return CUDA_SUCCESS;
}

CUresult cuStreamGetCtx(CUstream hStream, CUcontext *pctx)
{
	struct fk_stream *s;

	CHECK(get_stream(hStream, false, &s));
	if (!pctx)
		return CUDA_ERROR_INVALID_VALUE;
	*pctx = (CUcontext)s->ctx;
	return CUDA_SUCCESS;
}

/* ---- events ---- */

void fk_event_put(struct fk_event *ev)
{
	if (atomic_fetch_sub_explicit(&ev->refs, 1, memory_order_acq_rel) != 1)
		return;
	fk_point_put(&ev->pt);
	pthread_mutex_destroy(&ev->lock);
	free(ev);
}

CUresult cuEventCreate(CUevent *phEvent, unsigned int Flags)
{
	struct fk_ctx *ctx;
	struct fk_event *ev;

	CHECK(cur_ctx(&ctx));
	if (!phEvent || (Flags & ~(unsigned int)(CU_EVENT_BLOCKING_SYNC | CU_EVENT_DISABLE_TIMING |
						 CU_EVENT_INTERPROCESS)))
		return CUDA_ERROR_INVALID_VALUE;
	if ((Flags & CU_EVENT_INTERPROCESS) && !(Flags & CU_EVENT_DISABLE_TIMING))
		return CUDA_ERROR_INVALID_VALUE;
	ev = calloc(1, sizeof(*ev));
	if (!ev)
		return CUDA_ERROR_OUT_OF_MEMORY;
	atomic_init(&ev->refs, 1);
	ev->ctx = ctx;
	ev->flags = Flags;
	pthread_mutex_init(&ev->lock, NULL);
	if (fk_handle_add(ev, FK_T_EVENT) < 0) {
		fk_event_put(ev);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	*phEvent = (CUevent)ev;
	return CUDA_SUCCESS;
}

static CUresult event_destroy(CUevent h)
{
	CHECK_INIT();
	if (!fk_handle_is(h, FK_T_EVENT))
		return CUDA_ERROR_INVALID_HANDLE;
	/* Returns at once; a pending record keeps the event alive until it completes. */
	fk_handle_del(h);
	fk_event_put((struct fk_event *)h);
	return CUDA_SUCCESS;
}

CUresult cuEventDestroy(CUevent hEvent)
{
	return event_destroy(hEvent);
}

CUresult cuEventDestroy_v2(CUevent hEvent)
{
	return event_destroy(hEvent);
}

static CUresult event_record(CUevent h, CUstream hs, unsigned int flags, bool ptds)
{
	struct fk_event *ev = (struct fk_event *)h;
	struct fk_stream *s;
	struct fk_point done = { 0 };
	struct fk_op *op;
	CUresult r;

	CHECK_INIT();
	if (!fk_handle_is(ev, FK_T_EVENT))
		return CUDA_ERROR_INVALID_HANDLE;
	CHECK(get_stream(hs, ptds, &s));
	if (flags & ~(unsigned int)CU_EVENT_RECORD_EXTERNAL)
		return CUDA_ERROR_INVALID_VALUE;
	op = fk_op_new(FK_OP_EVENT);
	if (!op)
		return CUDA_ERROR_OUT_OF_MEMORY;
	atomic_fetch_add(&ev->refs, 1);
	op->event.ev = ev;
	/* ev->lock across the submission: the record's generation and point change together. */
	pthread_mutex_lock(&ev->lock);
	op->event.gen = ++ev->gen;
	ev->timed = false;
	r = fk_submit(s, op, &done);
	if (r == CUDA_SUCCESS) {
		fk_point_put(&ev->pt);
		ev->pt = done;
	}
	pthread_mutex_unlock(&ev->lock);
	return r;
}

CUresult cuEventRecord(CUevent hEvent, CUstream hStream)
{
	return event_record(hEvent, hStream, 0, false);
}

CUresult cuEventRecord_ptsz(CUevent hEvent, CUstream hStream)
{
	return event_record(hEvent, hStream, 0, true);
}

CUresult cuEventRecordWithFlags(CUevent hEvent, CUstream hStream, unsigned int flags)
{
	return event_record(hEvent, hStream, flags, false);
}

CUresult cuEventRecordWithFlags_ptsz(CUevent hEvent, CUstream hStream, unsigned int flags)
{
	return event_record(hEvent, hStream, flags, true);
}

CUresult cuEventQuery(CUevent hEvent)
{
	struct fk_event *ev = (struct fk_event *)hEvent;
	bool done;

	CHECK_INIT();
	if (!fk_handle_is(ev, FK_T_EVENT))
		return CUDA_ERROR_INVALID_HANDLE;
	pthread_mutex_lock(&ev->lock);
	done = fk_point_done(&ev->pt);
	pthread_mutex_unlock(&ev->lock);
	return done ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}

CUresult cuEventSynchronize(CUevent hEvent)
{
	struct fk_event *ev = (struct fk_event *)hEvent;
	struct fk_fence f = { 0 };

	CHECK_INIT();
	if (!fk_handle_is(ev, FK_T_EVENT))
		return CUDA_ERROR_INVALID_HANDLE;
	pthread_mutex_lock(&ev->lock);
	if (ev->pt.s) {
		f.pt[0].s = fk_stream_get(ev->pt.s);
		f.pt[0].seq = ev->pt.seq;
		f.n = 1;
	}
	pthread_mutex_unlock(&ev->lock);
	/* A blocking-sync event blocks whatever the context's mode. */
	f.blocking = ev->flags & CU_EVENT_BLOCKING_SYNC;
	return fk_host_sync(ev->ctx, &f);
}

static CUresult event_elapsed(float *pMilliseconds, CUevent hStart, CUevent hEnd)
{
	struct fk_event *ev[2] = { (struct fk_event *)hStart, (struct fk_event *)hEnd };
	uint64_t t[2];

	CHECK_INIT();
	if (!pMilliseconds)
		return CUDA_ERROR_INVALID_VALUE;
	for (int i = 0; i < 2; i++) {
		bool recorded, done, timed;

		if (!fk_handle_is(ev[i], FK_T_EVENT) || (ev[i]->flags & CU_EVENT_DISABLE_TIMING))
			return CUDA_ERROR_INVALID_HANDLE;
		pthread_mutex_lock(&ev[i]->lock);
		recorded = ev[i]->pt.s != NULL;
		done = fk_point_done(&ev[i]->pt);
		timed = ev[i]->timed;
		t[i] = ev[i]->time_ns;
		pthread_mutex_unlock(&ev[i]->lock);
		if (!recorded)
			return CUDA_ERROR_INVALID_HANDLE;
		if (!done || !timed)
			return CUDA_ERROR_NOT_READY;
	}
	*pMilliseconds = (float)((double)((int64_t)(t[1] - t[0])) / 1e6);
	return CUDA_SUCCESS;
}

CUresult cuEventElapsedTime(float *pMilliseconds, CUevent hStart, CUevent hEnd)
{
	return event_elapsed(pMilliseconds, hStart, hEnd);
}

CUresult cuEventElapsedTime_v2(float *pMilliseconds, CUevent hStart, CUevent hEnd)
{
	return event_elapsed(pMilliseconds, hStart, hEnd);
}

/* ---- memory ---- */

#define KIND_BIT(k) (1u << (k))

static CUresult mem_alloc(CUdeviceptr *dptr, size_t bytesize, bool low32)
{
	uint64_t t0 = fk_now_ns();
	struct fk_ctx *ctx;
	void *p;

	CHECK(cur_ctx(&ctx));
	if (!dptr)
		return CUDA_ERROR_INVALID_VALUE;
	CHECK(fk_mem_alloc(ctx, bytesize, FK_MEM_DEVICE, 0, low32, &p));
	*dptr = (CUdeviceptr)(uintptr_t)p;
	/* The planted cost of an allocation (FAKECUDA_ALLOC_US, FAKECUDA_ALLOC_MIB_US): the
	 * call lasts that long, the simulation's own mapping included, when that is shorter. */
	if (fk_config.alloc_ns || fk_config.alloc_mib_ns)
		fk_engine_sleep_until(t0 + fk_config.alloc_ns +
				      (uint64_t)((double)fk_config.alloc_mib_ns * (double)bytesize /
						 (1024.0 * 1024.0)));
	fk_alloc_log("alloc", bytesize, fk_now_ns() - t0);
	return CUDA_SUCCESS;
}

CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize)
{
	return mem_alloc(dptr, bytesize, false);
}

CUresult cuMemAlloc(CUdeviceptr_v1 *dptr, unsigned int bytesize)
{
	CUdeviceptr p;

	if (!dptr)
		return CUDA_ERROR_INVALID_VALUE;
	CHECK(mem_alloc(&p, bytesize, true));
	*dptr = (CUdeviceptr_v1)p;
	return CUDA_SUCCESS;
}

/*
 * Frees after waiting for all of the context's work, as the real cuMemFree does (that implicit
 * synchronization is one of the problems ffm reports). A bad pointer fails before any wait.
 */
static CUresult mem_free(uintptr_t p, unsigned int kinds)
{
	struct fk_ctx *ctx;
	struct fk_alloc a;
	uint64_t t;
	CUresult r;

	CHECK(cur_ctx(&ctx));
	if (!fk_mem_lookup(p, &a) || a.base != p || !(kinds & KIND_BIT(a.kind)))
		return CUDA_ERROR_INVALID_VALUE;
	CHECK(sync_ctx(ctx));
	t = fk_now_ns();
	r = fk_mem_release(p, kinds);
	/* The planted cost of a free of device or managed memory after its wait
	 * (FAKECUDA_FREE_US): as an allocation's, the unmapping included. */
	if (fk_config.free_ns && a.kind != FK_MEM_PINNED)
		fk_engine_sleep_until(t + fk_config.free_ns);
	if (a.kind != FK_MEM_PINNED)
		fk_alloc_log("free", a.size, fk_now_ns() - t);
	return r;
}

CUresult cuMemFree_v2(CUdeviceptr dptr)
{
	return mem_free(dptr, KIND_BIT(FK_MEM_DEVICE) | KIND_BIT(FK_MEM_MANAGED));
}

CUresult cuMemFree(CUdeviceptr_v1 dptr)
{
	return mem_free(dptr, KIND_BIT(FK_MEM_DEVICE) | KIND_BIT(FK_MEM_MANAGED));
}

static CUresult mem_alloc_host(void **pp, size_t bytesize, unsigned int flags)
{
	struct fk_ctx *ctx;

	CHECK(cur_ctx(&ctx));
	if (!pp || (flags & ~(unsigned int)(CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP |
					     CU_MEMHOSTALLOC_WRITECOMBINED)))
		return CUDA_ERROR_INVALID_VALUE;
	return fk_mem_alloc(ctx, bytesize, FK_MEM_PINNED, flags, false, pp);
}

CUresult cuMemAllocHost_v2(void **pp, size_t bytesize)
{
	return mem_alloc_host(pp, bytesize, 0);
}

CUresult cuMemAllocHost(void **pp, unsigned int bytesize)
{
	return mem_alloc_host(pp, bytesize, 0);
}

CUresult cuMemHostAlloc(void **pp, size_t bytesize, unsigned int Flags)
{
	return mem_alloc_host(pp, bytesize, Flags);
}

CUresult cuMemFreeHost(void *p)
{
	return mem_free((uintptr_t)p, KIND_BIT(FK_MEM_PINNED));
}

CUresult cuMemAllocManaged(CUdeviceptr *dptr, size_t bytesize, unsigned int flags)
{
	struct fk_ctx *ctx;
	void *p;

	CHECK(cur_ctx(&ctx));
	if (!dptr || (flags != CU_MEM_ATTACH_GLOBAL && flags != CU_MEM_ATTACH_HOST))
		return CUDA_ERROR_INVALID_VALUE;
	CHECK(fk_mem_alloc(ctx, bytesize, FK_MEM_MANAGED, flags, false, &p));
	*dptr = (CUdeviceptr)(uintptr_t)p;
	return CUDA_SUCCESS;
}

static CUresult host_register(void *p, size_t bytesize, unsigned int flags)
{
	struct fk_ctx *ctx;

	CHECK(cur_ctx(&ctx));
	if (flags & ~(unsigned int)(CU_MEMHOSTREGISTER_PORTABLE | CU_MEMHOSTREGISTER_DEVICEMAP |
				    CU_MEMHOSTREGISTER_IOMEMORY | CU_MEMHOSTREGISTER_READ_ONLY))
		return CUDA_ERROR_INVALID_VALUE;
	return fk_mem_register(ctx, p, bytesize, flags);
}

CUresult cuMemHostRegister_v2(void *p, size_t bytesize, unsigned int Flags)
{
	return host_register(p, bytesize, Flags);
}

CUresult cuMemHostRegister(void *p, size_t bytesize, unsigned int Flags)
{
	return host_register(p, bytesize, Flags);
}

CUresult cuMemHostUnregister(void *p)
{
	struct fk_ctx *ctx;
	struct fk_alloc a;

	CHECK(cur_ctx(&ctx));
	if (!fk_mem_lookup((uintptr_t)p, &a) || a.base != (uintptr_t)p ||
	    a.kind != FK_MEM_REGISTERED)
		return CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED;
	/* Unpinning memory a copy may still be reading: wait for the GPU first. */
	CHECK(sync_ctx(ctx));
	return fk_mem_release((uintptr_t)p, KIND_BIT(FK_MEM_REGISTERED)) == CUDA_SUCCESS
		       ? CUDA_SUCCESS
		       : CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED;
}

static CUresult host_get_device_pointer(CUdeviceptr *pdptr, void *p, unsigned int flags)
{
	struct fk_alloc a;

	CHECK_INIT();
	if (!pdptr || flags)
		return CUDA_ERROR_INVALID_VALUE;
	if (!fk_mem_lookup((uintptr_t)p, &a) ||
	    (a.kind != FK_MEM_PINNED && a.kind != FK_MEM_REGISTERED))
		return CUDA_ERROR_INVALID_VALUE;
	/* Unified addressing: the device sees pinned memory at its host address. */
	*pdptr = (CUdeviceptr)(uintptr_t)p;
	return CUDA_SUCCESS;
}

CUresult cuMemHostGetDevicePointer_v2(CUdeviceptr *pdptr, void *p, unsigned int Flags)
{
	return host_get_device_pointer(pdptr, p, Flags);
}

CUresult cuMemHostGetDevicePointer(CUdeviceptr_v1 *pdptr, void *p, unsigned int Flags)
{
	CUdeviceptr d;

	if (!pdptr)
		return CUDA_ERROR_INVALID_VALUE;
	CHECK(host_get_device_pointer(&d, p, Flags));
	if (d > 0xffffffffu)
		return CUDA_ERROR_INVALID_VALUE;
	*pdptr = (CUdeviceptr_v1)d;
	return CUDA_SUCCESS;
}

static CUresult mem_get_info(size_t *free, size_t *total)
{
	struct fk_ctx *ctx;
	size_t used;

	CHECK(cur_ctx(&ctx));
	if (!free || !total)
		return CUDA_ERROR_INVALID_VALUE;
	fk_mem_usage(&used);
	*total = FK_DEVICE_MEM;
	*free = used < FK_DEVICE_MEM ? FK_DEVICE_MEM - used : 0;
	return CUDA_SUCCESS;
}

CUresult cuMemGetInfo_v2(size_t *free, size_t *total)
{
	return mem_get_info(free, total);
}

CUresult cuMemGetInfo(unsigned int *free, unsigned int *total)
{
	size_t f, t;

	if (!free || !total)
		return CUDA_ERROR_INVALID_VALUE;
	CHECK(mem_get_info(&f, &t));
	*free = f > 0xffffffffu ? 0xffffffffu : (unsigned int)f;
	*total = t > 0xffffffffu ? 0xffffffffu : (unsigned int)t;
	return CUDA_SUCCESS;
}

static CUresult mem_get_address_range(CUdeviceptr *pbase, size_t *psize, CUdeviceptr dptr)
{
	struct fk_alloc a;

	CHECK_INIT();
	if (!fk_mem_lookup(dptr, &a) || a.kind == FK_MEM_REGISTERED)
		return CUDA_ERROR_NOT_FOUND;
	if (pbase)
		*pbase = a.base;
	if (psize)
		*psize = a.size;
	return CUDA_SUCCESS;
}

CUresult cuMemGetAddressRange_v2(CUdeviceptr *pbase, size_t *psize, CUdeviceptr dptr)
{
	return mem_get_address_range(pbase, psize, dptr);
}

CUresult cuMemGetAddressRange(CUdeviceptr_v1 *pbase, unsigned int *psize, CUdeviceptr_v1 dptr)
{
	CUdeviceptr b;
	size_t sz;

	CHECK(mem_get_address_range(&b, &sz, dptr));
	if (pbase)
		*pbase = (CUdeviceptr_v1)b;
	if (psize)
		*psize = (unsigned int)sz;
	return CUDA_SUCCESS;
}

CUresult cuPointerGetAttribute(void *data, CUpointer_attribute attribute, CUdeviceptr ptr)
{
	struct fk_alloc a;

	CHECK_INIT();
	if (!data)
		return CUDA_ERROR_INVALID_VALUE;
	if (!fk_mem_lookup(ptr, &a))
		return CUDA_ERROR_INVALID_VALUE; /* memory the driver does not know */
	switch (attribute) {
	case CU_POINTER_ATTRIBUTE_CONTEXT:
		*(CUcontext *)data = (CUcontext)a.ctx;
		break;
	case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
		/* Managed memory reports as device memory, as on the real driver. */
		*(unsigned int *)data = a.kind == FK_MEM_DEVICE || a.kind == FK_MEM_MANAGED
						? CU_MEMORYTYPE_DEVICE
						: CU_MEMORYTYPE_HOST;
		break;
	case CU_POINTER_ATTRIBUTE_DEVICE_POINTER:
		*(CUdeviceptr *)data = ptr;
		break;
	case CU_POINTER_ATTRIBUTE_HOST_POINTER:
		if (a.kind == FK_MEM_DEVICE)
			return CUDA_ERROR_INVALID_VALUE;
		*(void **)data = (void *)(uintptr_t)ptr;
		break;
	case CU_POINTER_ATTRIBUTE_IS_MANAGED:
		*(int *)data = a.kind == FK_MEM_MANAGED;
		break;
	case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL:
		*(int *)data = 0;
		break;
	case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
		*(CUdeviceptr *)data = a.base;
		break;
	case CU_POINTER_ATTRIBUTE_RANGE_SIZE:
		*(size_t *)data = a.size;
		break;
	case CU_POINTER_ATTRIBUTE_MAPPED:
		*(int *)data = 1;
		break;
	default:
		return CUDA_ERROR_NOT_SUPPORTED;
	}
	return CUDA_SUCCESS;
}

/* ---- copies ---- */

static bool host_side_pinned(const void *p, size_t n)
{
	enum fk_mem_kind k = fk_mem_kind_of(p, n, NULL);

	return k == FK_MEM_PINNED || k == FK_MEM_REGISTERED;
}

static bool device_side(uintptr_t p, size_t n)
{
	enum fk_mem_kind k = fk_mem_kind_of((const void *)p, n, NULL);

	return k == FK_MEM_DEVICE || k == FK_MEM_MANAGED;
}

/*
 * Queues one copy on s and, where the call is synchronous, waits for it. sync: a synchronous
 * API (cuMemcpyXtoY); otherwise the async one, which still waits when the host side is
 * pageable memory that the GPU writes (DtoH, HtoH), as the real driver does.
 */
static CUresult copy(enum fk_dir dir, void *dst, const void *src, size_t n, struct fk_stream *s,
		     bool sync)
{
	bool pageable = false, wait;
	struct fk_point done = { 0 };
	struct fk_op *op;

	if (!n)
		return CUDA_SUCCESS;
	switch (dir) {
	case FK_HTOD:
		pageable = !host_side_pinned(src, n);
		break;
	case FK_DTOH:
		pageable = !host_side_pinned(dst, n);
		break;
	case FK_HTOH:
		pageable = !host_side_pinned(src, n) || !host_side_pinned(dst, n);
		break;
	case FK_DTOD:
		break;
	}
	wait = sync || (pageable && (dir == FK_DTOH || dir == FK_HTOH));
	op = fk_op_new(FK_OP_COPY);
	if (!op)
		return CUDA_ERROR_OUT_OF_MEMORY;
	op->copy.dir = dir;
	op->copy.dst = dst;
	op->copy.src = src;
	op->copy.bytes = n;
	op->copy.pageable = (dir == FK_HTOD || dir == FK_DTOH) &&
			    fk_mem_kind_of(dir == FK_HTOD ? src : dst, n, NULL) == FK_MEM_PAGEABLE;
	/*
	 * Async HtoD from pageable memory: the driver stages the bytes into its own pinned buffer
	 * before returning, so the copy transfers the bytes as they were at the call.
	 */
	if (dir == FK_HTOD && pageable && !wait) {
		op->copy.staging = malloc(n);
		if (!op->copy.staging) {
			fk_op_free(op);
			return CUDA_ERROR_OUT_OF_MEMORY;
		}
		memcpy(op->copy.staging, src, n);
	}
	CHECK(fk_submit(s, op, wait ? &done : NULL));
	return wait ? sync_point(s->ctx, &done) : CUDA_SUCCESS;
}

/* The stream a synchronous call runs on: the legacy default stream or the per-thread one. */
static CUresult sync_call_stream(bool ptds, struct fk_stream **s)
{
	return get_stream(NULL, ptds, s);
}

static CUresult memcpy_htod(CUdeviceptr dst, const void *src, size_t n, CUstream h, bool async,
			    bool ptds)
{
	struct fk_stream *s;

	CHECK(async ? get_stream(h, ptds, &s) : sync_call_stream(ptds, &s));
	if (n && (!src || !fk_mem_gpu_ok(dst, n)))
		return CUDA_ERROR_INVALID_VALUE;
	return copy(FK_HTOD, (void *)(uintptr_t)dst, src, n, s, !async);
}

static CUresult memcpy_dtoh(void *dst, CUdeviceptr src, size_t n, CUstream h, bool async,
			    bool ptds)
{
	struct fk_stream *s;

	CHECK(async ? get_stream(h, ptds, &s) : sync_call_stream(ptds, &s));
	if (n && (!dst || !fk_mem_gpu_ok(src, n)))
		return CUDA_ERROR_INVALID_VALUE;
	return copy(FK_DTOH, dst, (const void *)(uintptr_t)src, n, s, !async);
}

static CUresult memcpy_dtod(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream h, bool async,
			    bool ptds)
{
	struct fk_stream *s;

	CHECK(async ? get_stream(h, ptds, &s) : sync_call_stream(ptds, &s));
	if (n && (!fk_mem_gpu_ok(dst, n) || !fk_mem_gpu_ok(src, n)))
		return CUDA_ERROR_INVALID_VALUE;
	/*
	 * The CUDA documentation says a synchronous DtoD copy need not block the host; this
	 * simulator blocks (ffm's tests treat every synchronous copy as a sync point).
	 */
	return copy(FK_DTOD, (void *)(uintptr_t)dst, (const void *)(uintptr_t)src, n, s, !async);
}

/* cuMemcpy/cuMemcpyAsync: unified addressing, the direction follows from the pointers. */
static CUresult memcpy_unified(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream h, bool async,
			       bool ptds)
{
	bool dd = device_side(dst, n), sd = device_side(src, n);
	enum fk_dir dir = sd ? (dd ? FK_DTOD : FK_DTOH) : (dd ? FK_HTOD : FK_HTOH);
	struct fk_stream *s;

	CHECK(async ? get_stream(h, ptds, &s) : sync_call_stream(ptds, &s));
	if (n && (!dst || !src))
		return CUDA_ERROR_INVALID_VALUE;
	return copy(dir, (void *)(uintptr_t)dst, (const void *)(uintptr_t)src, n, s, !async);
}

CUresult cuMemcpyHtoD_v2(CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount)
{
	return memcpy_htod(dstDevice, srcHost, ByteCount, NULL, false, false);
}

CUresult cuMemcpyHtoD_v2_ptds(CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount)
{
	return memcpy_htod(dstDevice, srcHost, ByteCount, NULL, false, true);
}

CUresult cuMemcpyHtoD(CUdeviceptr_v1 dstDevice, const void *srcHost, unsigned int ByteCount)
{
	return memcpy_htod(dstDevice, srcHost, ByteCount, NULL, false, false);
}

CUresult cuMemcpyDtoH_v2(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount)
{
	return memcpy_dtoh(dstHost, srcDevice, ByteCount, NULL, false, false);
}

CUresult cuMemcpyDtoH_v2_ptds(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount)
{
	return memcpy_dtoh(dstHost, srcDevice, ByteCount, NULL, false, true);
}

CUresult cuMemcpyDtoH(void *dstHost, CUdeviceptr_v1 srcDevice, unsigned int ByteCount)
{
	return memcpy_dtoh(dstHost, srcDevice, ByteCount, NULL, false, false);
}

CUresult cuMemcpyDtoD_v2(CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount)
{
	return memcpy_dtod(dstDevice, srcDevice, ByteCount, NULL, false, false);
}

CUresult cuMemcpyDtoD_v2_ptds(CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount)
{
	return memcpy_dtod(dstDevice, srcDevice, ByteCount, NULL, false, true);
}

CUresult cuMemcpyDtoD(CUdeviceptr_v1 dstDevice, CUdeviceptr_v1 srcDevice, unsigned int ByteCount)
{
	return memcpy_dtod(dstDevice, srcDevice, ByteCount, NULL, false, false);
}

CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount,
			      CUstream hStream)
{
	return memcpy_htod(dstDevice, srcHost, ByteCount, hStream, true, false);
}

CUresult cuMemcpyHtoDAsync_v2_ptsz(CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount,
				   CUstream hStream)
{
	return memcpy_htod(dstDevice, srcHost, ByteCount, hStream, true, true);
}

CUresult cuMemcpyHtoDAsync(CUdeviceptr_v1 dstDevice, const void *srcHost, unsigned int ByteCount,
			   CUstream hStream)
{
	return memcpy_htod(dstDevice, srcHost, ByteCount, hStream, true, false);
}

CUresult cuMemcpyDtoHAsync_v2(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount,
			      CUstream hStream)
{
	return memcpy_dtoh(dstHost, srcDevice, ByteCount, hStream, true, false);
}

CUresult cuMemcpyDtoHAsync_v2_ptsz(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount,
				   CUstream hStream)
{
	return memcpy_dtoh(dstHost, srcDevice, ByteCount, hStream, true, true);
}

CUresult cuMemcpyDtoHAsync(void *dstHost, CUdeviceptr_v1 srcDevice, unsigned int ByteCount,
			   CUstream hStream)
{
	return memcpy_dtoh(dstHost, srcDevice, ByteCount, hStream, true, false);
}

CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount,
			      CUstream hStream)
{
	return memcpy_dtod(dstDevice, srcDevice, ByteCount, hStream, true, false);
}

CUresult cuMemcpyDtoDAsync_v2_ptsz(CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount,
				   CUstream hStream)
{
	return memcpy_dtod(dstDevice, srcDevice, ByteCount, hStream, true, true);
}

CUresult cuMemcpyDtoDAsync(CUdeviceptr_v1 dstDevice, CUdeviceptr_v1 srcDevice,
			   unsigned int ByteCount, CUstream hStream)
{
	return memcpy_dtod(dstDevice, srcDevice, ByteCount, hStream, true, false);
}

CUresult cuMemcpy(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount)
{
	return memcpy_unified(dst, src, ByteCount, NULL, false, false);
}

CUresult cuMemcpy_ptds(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount)
{
	return memcpy_unified(dst, src, ByteCount, NULL, false, true);
}

CUresult cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount, CUstream hStream)
{
	return memcpy_unified(dst, src, ByteCount, hStream, true, false);
}

CUresult cuMemcpyAsync_ptsz(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount, CUstream hStream)
{
	return memcpy_unified(dst, src, ByteCount, hStream, true, true);
}

/* ---- memset ---- */

/*
 * Synchronous memsets return at once on device memory but are fully synchronous on managed and
 * pinned memory (CUDA's "API synchronization behavior"); async ones never wait.
 */
static CUresult memset_common(CUdeviceptr dst, uint32_t value, unsigned int elem, size_t count,
			      CUstream h, bool async, bool ptds)
{
	struct fk_point done = { 0 };
	enum fk_mem_kind kind;
	struct fk_stream *s;
	struct fk_op *op;
	bool wait;

	CHECK(async ? get_stream(h, ptds, &s) : sync_call_stream(ptds, &s));
	if (dst % elem || count > SIZE_MAX / elem)
		return CUDA_ERROR_INVALID_VALUE;
	if (!count)
		return CUDA_SUCCESS;
	kind = fk_mem_kind_of((const void *)(uintptr_t)dst, count * elem, NULL);
	if (kind == FK_MEM_PAGEABLE)
		return CUDA_ERROR_INVALID_VALUE;
	wait = !async && kind != FK_MEM_DEVICE;
	op = fk_op_new(FK_OP_MEMSET);
	if (!op)
		return CUDA_ERROR_OUT_OF_MEMORY;
	op->memset.dst = (void *)(uintptr_t)dst;
	op->memset.value = value;
	op->memset.elem = elem;
	op->memset.count = count;
	CHECK(fk_submit(s, op, wait ? &done : NULL));
	return wait ? sync_point(s->ctx, &done) : CUDA_SUCCESS;
}

CUresult cuMemsetD8_v2(CUdeviceptr dstDevice, unsigned char uc, size_t N)
{
	return memset_common(dstDevice, uc, 1, N, NULL, false, false);
}

CUresult cuMemsetD8_v2_ptds(CUdeviceptr dstDevice, unsigned char uc, size_t N)
{
	return memset_common(dstDevice, uc, 1, N, NULL, false, true);
}

CUresult cuMemsetD8(CUdeviceptr_v1 dstDevice, unsigned char uc, unsigned int N)
{
	return memset_common(dstDevice, uc, 1, N, NULL, false, false);
}

CUresult cuMemsetD16_v2(CUdeviceptr dstDevice, unsigned short us, size_t N)
{
	return memset_common(dstDevice, us, 2, N, NULL, false, false);
}

CUresult cuMemsetD16_v2_ptds(CUdeviceptr dstDevice, unsigned short us, size_t N)
{
	return memset_common(dstDevice, us, 2, N, NULL, false, true);
}

CUresult cuMemsetD16(CUdeviceptr_v1 dstDevice, unsigned short us, unsigned int N)
{
	return memset_common(dstDevice, us, 2, N, NULL, false, false);
}

CUresult cuMemsetD32_v2(CUdeviceptr dstDevice, unsigned int ui, size_t N)
{
	return memset_common(dstDevice, ui, 4, N, NULL, false, false);
}

CUresult cuMemsetD32_v2_ptds(CUdeviceptr dstDevice, unsigned int ui, size_t N)
{
	return memset_common(dstDevice, ui, 4, N, NULL, false, true);
}

CUresult cuMemsetD32(CUdeviceptr_v1 dstDevice, unsigned int ui, unsigned int N)
{
	return memset_common(dstDevice, ui, 4, N, NULL, false, false);
}

CUresult cuMemsetD8Async(CUdeviceptr dstDevice, unsigned char uc, size_t N, CUstream hStream)
{
	return memset_common(dstDevice, uc, 1, N, hStream, true, false);
}

CUresult cuMemsetD8Async_ptsz(CUdeviceptr dstDevice, unsigned char uc, size_t N, CUstream hStream)
{
	return memset_common(dstDevice, uc, 1, N, hStream, true, true);
}

CUresult cuMemsetD16Async(CUdeviceptr dstDevice, unsigned short us, size_t N, CUstream hStream)
{
	return memset_common(dstDevice, us, 2, N, hStream, true, false);
}

CUresult cuMemsetD16Async_ptsz(CUdeviceptr dstDevice, unsigned short us, size_t N,
			       CUstream hStream)
{
	return memset_common(dstDevice, us, 2, N, hStream, true, true);
}

CUresult cuMemsetD32Async(CUdeviceptr dstDevice, unsigned int ui, size_t N, CUstream hStream)
{
	return memset_common(dstDevice, ui, 4, N, hStream, true, false);
}

CUresult cuMemsetD32Async_ptsz(CUdeviceptr dstDevice, unsigned int ui, size_t N, CUstream hStream)
{
	return memset_common(dstDevice, ui, 4, N, hStream, true, true);
}

/* ---- modules and launches ---- */

static CUresult module_load(CUmodule *module, const void *image, enum fk_type type)
{
	struct fk_ctx *ctx;
	struct fk_module *m;

	CHECK(cur_ctx(&ctx));
	if (!module || !image)
		return CUDA_ERROR_INVALID_VALUE;
	CHECK(fk_module_load_ptx(image, &m));
	if (fk_handle_add(m, type) < 0)
		goto nomem;
	for (int i = 0; i < m->nfuncs; i++) {
		if (fk_handle_add(&m->funcs[i], FK_T_FUNCTION) < 0) {
			while (i--)
				fk_handle_del(&m->funcs[i]);
			fk_handle_del(m);
			goto nomem;
		}
	}
	*module = (CUmodule)m;
	return CUDA_SUCCESS;
nomem:
	fk_module_free(m);
	return CUDA_ERROR_OUT_OF_MEMORY;
}

CUresult cuModuleLoadData(CUmodule *module, const void *image)
{
	return module_load(module, image, FK_T_MODULE);
}

CUresult cuModuleLoadDataEx(CUmodule *module, const void *image, unsigned int numOptions,
			    CUjit_option *options, void **optionValues)
{
	/* JIT options change nothing here: there is no JIT. */
	if (numOptions && (!options || !optionValues))
		return CUDA_ERROR_INVALID_VALUE;
	return module_load(module, image, FK_T_MODULE);
}

CUresult cuModuleLoad(CUmodule *module, const char *fname)
{
	struct stat st;
	CUresult r;
	char *buf;
	ssize_t n;
	int fd;

	CHECK_INIT();
	if (!module || !fname)
		return CUDA_ERROR_INVALID_VALUE;
	fd = open(fname, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return CUDA_ERROR_FILE_NOT_FOUND;
	if (fstat(fd, &st) < 0 || !(buf = malloc((size_t)st.st_size + 1))) {
		close(fd);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	n = read(fd, buf, (size_t)st.st_size);
	close(fd);
	if (n != st.st_size) {
		free(buf);
		return CUDA_ERROR_FILE_NOT_FOUND;
	}
	buf[n] = '\0';
	r = module_load(module, buf, FK_T_MODULE);
	free(buf);
	return r;
}

/* Entry @name of module @m, a handle of @type (a module or a library), in *@out. */
static CUresult get_function(void **out, const void *m, enum fk_type type, const char *name)
{
	struct fk_function *fn;

	CHECK_INIT();
	if (!fk_handle_is(m, type))
		return CUDA_ERROR_INVALID_HANDLE;
	if (!out || !name)
		return CUDA_ERROR_INVALID_VALUE;
	fn = fk_module_find((struct fk_module *)m, name);
	if (!fn)
		return CUDA_ERROR_NOT_FOUND;
	*out = fn;
	return CUDA_SUCCESS;
}

CUresult cuModuleGetFunction(CUfunction *hfunc, CUmodule hmod, const char *name)
{
	return get_function((void **)hfunc, hmod, FK_T_MODULE, name);
}

/* The CUDA runtime's way since CUDA 12: a library per fatbin, a CUkernel per entry (which
 * cuLaunchKernel takes as a CUfunction), its CUfunction from cuKernelGetFunction. Here a
 * library is a module, and a kernel is its function. */
CUresult cuLibraryLoadData(CUlibrary *library, const void *code, CUjit_option *jitOptions,
			   void **jitOptionsValues, unsigned int numJitOptions,
			   CUlibraryOption *libraryOptions, void **libraryOptionValues,
			   unsigned int numLibraryOptions)
{
	if ((numJitOptions && (!jitOptions || !jitOptionsValues)) ||
	    (numLibraryOptions && (!libraryOptions || !libraryOptionValues)))
		return CUDA_ERROR_INVALID_VALUE;
	return module_load((CUmodule *)library, code, FK_T_LIBRARY);
}

CUresult cuLibraryGetKernel(CUkernel *pKernel, CUlibrary library, const char *name)
{
	return get_function((void **)pKernel, library, FK_T_LIBRARY, name);
}

CUresult cuKernelGetFunction(CUfunction *pFunc, CUkernel kernel)
{
	CHECK_INIT();
	if (!fk_handle_is(kernel, FK_T_FUNCTION))
		return CUDA_ERROR_INVALID_HANDLE;
	if (!pFunc)
		return CUDA_ERROR_INVALID_VALUE;
	*pFunc = (CUfunction)kernel;
	return CUDA_SUCCESS;
}

static CUresult func_name(const char **name, const void *f)
{
	CHECK_INIT();
	if (!fk_handle_is(f, FK_T_FUNCTION))
		return CUDA_ERROR_INVALID_HANDLE;
	if (!name)
		return CUDA_ERROR_INVALID_VALUE;
	*name = ((const struct fk_function *)f)->name;
	return CUDA_SUCCESS;
}

CUresult cuKernelGetName(const char **name, CUkernel hfunc)
{
	return func_name(name, hfunc);
}

CUresult cuFuncGetName(const char **name, CUfunction hfunc)
{
	return func_name(name, hfunc);
}

static CUresult unload(struct fk_module *m, enum fk_type type)
{
	CHECK_INIT();
	if (!fk_handle_is(m, type))
		return CUDA_ERROR_INVALID_HANDLE;
	fk_handle_del(m);
	for (int i = 0; i < m->nfuncs; i++)
		fk_handle_del(&m->funcs[i]);
	/* Queued launches hold copies of what they need from the module. */
	fk_module_free(m);
	return CUDA_SUCCESS;
}

CUresult cuModuleUnload(CUmodule hmod)
{
	return unload((struct fk_module *)hmod, FK_T_MODULE);
}

CUresult cuLibraryUnload(CUlibrary library)
{
	return unload((struct fk_module *)library, FK_T_LIBRARY);
}

/* Kernel arguments from the `extra` array: one buffer, each parameter naturally aligned. */
static CUresult args_from_extra(const struct fk_function *fn, void **extra, uint64_t *args)
{
	const char *buf = NULL;
	size_t size = 0, off = 0;
	bool have_size = false;

	for (int i = 0; extra[i] != CU_LAUNCH_PARAM_END; i += 2) {
		if (extra[i] == CU_LAUNCH_PARAM_BUFFER_POINTER) {
			buf = extra[i + 1];
		} else if (extra[i] == CU_LAUNCH_PARAM_BUFFER_SIZE) {
			size = *(size_t *)extra[i + 1];
			have_size = true;
		} else {
			return CUDA_ERROR_INVALID_VALUE;
		}
	}
	if (!buf || !have_size)
		return CUDA_ERROR_INVALID_VALUE;
	for (int i = 0; i < fn->nparams; i++) {
		unsigned int sz = fn->psize[i];

		off = (off + sz - 1) / sz * sz;
		if (off + sz > size)
			return CUDA_ERROR_INVALID_VALUE;
		memcpy(&args[i], buf + off, sz);
		off += sz;
	}
	return CUDA_SUCCESS;
}

static CUresult launch(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz,
		       unsigned int bx, unsigned int by, unsigned int bz, unsigned int shmem,
		       CUstream h, void **params, void **extra, bool ptds)
{
	const struct fk_function *fn = (const struct fk_function *)f;
	uint64_t args[FK_MAX_PARAMS] = { 0 };
	struct fk_stream *s;
	struct fk_op *op;

	CHECK(get_stream(h, ptds, &s));
	if (!fk_handle_is(fn, FK_T_FUNCTION))
		return CUDA_ERROR_INVALID_HANDLE;
	/* The limits of the device cuDeviceGetAttribute describes. */
	if (!gx || !gy || !gz || !bx || !by || !bz || gx > 0x7fffffffu || gy > 65535 ||
	    gz > 65535 || bx > 1024 || by > 1024 || bz > 64 ||
	    (unsigned long long)bx * by * bz > 1024 || shmem > 48 * 1024)
		return CUDA_ERROR_INVALID_VALUE;
	if (params) {
		if (extra)
			return CUDA_ERROR_INVALID_VALUE;
		for (int i = 0; i < fn->nparams; i++) {
			if (!params[i])
				return CUDA_ERROR_INVALID_VALUE;
			/* Arguments are captured now: the caller may reuse its variables at once. */
			memcpy(&args[i], params[i], fn->psize[i]);
		}
	} else if (extra) {
		CHECK(args_from_extra(fn, extra, args));
	} else if (fn->nparams) {
		return CUDA_ERROR_INVALID_VALUE;
	}
	CHECK(fk_kernel_check(fn, args));
	op = fk_op_new(FK_OP_KERNEL);
	if (!op)
		return CUDA_ERROR_OUT_OF_MEMORY;
	op->kernel.fn = *fn;
	memcpy(op->kernel.args, args, sizeof(args));
	return fk_submit(s, op, NULL);
}

CUresult cuLaunchKernel(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
			unsigned int gridDimZ, unsigned int blockDimX, unsigned int blockDimY,
			unsigned int blockDimZ, unsigned int sharedMemBytes, CUstream hStream,
			void **kernelParams, void **extra)
{
	return launch(f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ,
		      sharedMemBytes, hStream, kernelParams, extra, false);
}

CUresult cuLaunchKernel_ptsz(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
			     unsigned int gridDimZ, unsigned int blockDimX, unsigned int blockDimY,
			     unsigned int blockDimZ, unsigned int sharedMemBytes, CUstream hStream,
			     void **kernelParams, void **extra)
{
	return launch(f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ,
		      sharedMemBytes, hStream, kernelParams, extra, true);
}
