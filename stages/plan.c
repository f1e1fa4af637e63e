// SPDX-License-Identifier: MIT
/* The FFM stage plan and the driver API tables (see ffm_plan.h). */
#include <errno.h>
#include <string.h>

#include "stages/ffm_plan.h"

#define ALL_STAGES                                                                                 \
	(FFM_STAGE_BIT(1) | FFM_STAGE_BIT(2) | FFM_STAGE_BIT(3) | FFM_STAGE_BIT(4))

/* Every stage knows the wall time and sees each wait with its stack. */
#define BASE (FFM_PROBE_PROC | FFM_PROBE_WAIT)
#define CALLS                                                                                      \
	(FFM_PROBE_SYNC_FUNCS | FFM_PROBE_TRANSFER | FFM_PROBE_ALLOC | FFM_PROBE_FREE |            \
	 FFM_PROBE_MEMSET | FFM_PROBE_LAUNCH)

uint32_t ffm_plan__probes(enum ffm_stage stage)
{
	switch (stage) {
	case FFM_STAGE_BASELINE:
		return BASE;
	case FFM_STAGE_DETAIL:
		return BASE | CALLS;
	case FFM_STAGE_MEMORY:
		/* protected regions come from transfers and (managed) allocations of this run */
		return BASE | FFM_PROBE_SYNC_FUNCS | FFM_PROBE_TRANSFER | FFM_PROBE_ALLOC |
		       FFM_PROBE_FREE | FFM_PROBE_MEMTRACE | FFM_PROBE_HASH;
	case FFM_STAGE_SYNC_USE:
		/* addresses differ per run: find this run's regions again, then time first uses */
		return BASE | FFM_PROBE_SYNC_FUNCS | FFM_PROBE_TRANSFER | FFM_PROBE_ALLOC |
		       FFM_PROBE_FREE | FFM_PROBE_SYNC_USE;
	default:
		return 0;
	}
}

static bool given_up(const struct ffm_plan_input *in, unsigned s)
{
	return !(in->completed & FFM_STAGE_BIT(s)) && in->failures[s] >= FFM_PLAN_MAX_FAILURES;
}

int ffm_plan__next(const struct ffm_plan_input *in, struct ffm_plan *out)
{
	uint32_t skipped = 0;
	unsigned next = 0;

	if (!in || !out)
		return -EINVAL;
	if (in->override_stage < 0 || in->override_stage >= FFM_STAGE__MAX)
		return -EINVAL;
	memset(out, 0, sizeof(*out));

	for (unsigned s = FFM_STAGE_BASELINE; s < FFM_STAGE__MAX; s++)
		if (given_up(in, s))
			skipped |= FFM_STAGE_BIT(s);
	/* Stage 4 times the accesses stage 3 finds: nothing to do without them. */
	if ((skipped & FFM_STAGE_BIT(FFM_STAGE_MEMORY)) && !(in->completed & FFM_STAGE_BIT(4)))
		skipped |= FFM_STAGE_BIT(FFM_STAGE_SYNC_USE);
	out->skipped = skipped;
	out->analysis_ready = ((in->completed | skipped) & ALL_STAGES) == ALL_STAGES;

	if (in->override_stage) {
		next = (unsigned)in->override_stage;
		out->reason = FFM_PLAN_OVERRIDE;
	} else if (out->analysis_ready && in->drift) {
		next = FFM_STAGE_DETAIL;
		out->reason = FFM_PLAN_DRIFT;
		out->invalidate = FFM_STAGE_BIT(2) | FFM_STAGE_BIT(3) | FFM_STAGE_BIT(4);
	} else if (out->analysis_ready) {
		next = FFM_STAGE_BASELINE;
		out->reason = FFM_PLAN_MONITOR;
	} else {
		for (unsigned s = FFM_STAGE_BASELINE; s < FFM_STAGE__MAX && !next; s++)
			if (!((in->completed | skipped) & FFM_STAGE_BIT(s)))
				next = s;
		out->reason = in->failures[next] ? FFM_PLAN_RETRY : FFM_PLAN_NEXT;
	}
	out->stage = next;
	out->probes = ffm_plan__probes(next);
	/* No stage-1 list of synchronizing functions: probe the known ones. */
	if ((out->probes & FFM_PROBE_SYNC_FUNCS) &&
	    !(in->completed & FFM_STAGE_BIT(FFM_STAGE_BASELINE)))
		out->probes = (out->probes & ~FFM_PROBE_SYNC_FUNCS) | FFM_PROBE_SYNC_STATIC;
	return 0;
}

/* ---- driver API tables ------------------------------------------------------------------- */

/* The spellings cuda.h produces: plain, _v2, and the per-thread-default-stream variants
 * (__CUDA_API_PTDS for synchronous calls, __CUDA_API_PTSZ for asynchronous ones). */
#define V2_PTDS(n) #n, #n "_v2", #n "_v2_ptds"
#define V2_PTSZ(n) #n, #n "_v2", #n "_v2_ptsz"
#define PTDS(n) #n, #n "_ptds"
#define PTSZ(n) #n, #n "_ptsz"

static const char *const sync_names[] = {
	"cuCtxSynchronize", "cuCtxSynchronize_v2", PTSZ(cuStreamSynchronize), "cuEventSynchronize",
};

static const char *const transfer_names[] = {
	PTDS(cuMemcpy),
	PTSZ(cuMemcpyAsync),
	PTDS(cuMemcpyPeer),
	PTSZ(cuMemcpyPeerAsync),
	V2_PTDS(cuMemcpyHtoD),
	V2_PTSZ(cuMemcpyHtoDAsync),
	V2_PTDS(cuMemcpyDtoH),
	V2_PTSZ(cuMemcpyDtoHAsync),
	V2_PTDS(cuMemcpyDtoD),
	V2_PTSZ(cuMemcpyDtoDAsync),
	V2_PTDS(cuMemcpyDtoA),
	V2_PTDS(cuMemcpyAtoD),
	V2_PTDS(cuMemcpyHtoA),
	V2_PTSZ(cuMemcpyHtoAAsync),
	V2_PTDS(cuMemcpyAtoH),
	V2_PTSZ(cuMemcpyAtoHAsync),
	V2_PTDS(cuMemcpyAtoA),
	V2_PTDS(cuMemcpy2D),
	V2_PTDS(cuMemcpy2DUnaligned),
	V2_PTSZ(cuMemcpy2DAsync),
	V2_PTDS(cuMemcpy3D),
	V2_PTSZ(cuMemcpy3DAsync),
	PTDS(cuMemcpy3DPeer),
	PTSZ(cuMemcpy3DPeerAsync),
	PTSZ(cuMemcpyBatchAsync),
	"cuMemcpyBatchAsync_v2", "cuMemcpyBatchAsync_v2_ptsz",
	PTSZ(cuMemcpy3DBatchAsync),
	"cuMemcpy3DBatchAsync_v2", "cuMemcpy3DBatchAsync_v2_ptsz",
};

static const char *const alloc_names[] = {
	"cuMemAlloc",	       "cuMemAlloc_v2",	     "cuMemAllocHost",	 "cuMemAllocHost_v2",
	"cuMemHostAlloc",      "cuMemAllocManaged", "cuMemAllocPitch",	 "cuMemAllocPitch_v2",
	PTSZ(cuMemAllocAsync), PTSZ(cuMemAllocFromPoolAsync),		 "cuMemHostRegister",
	"cuMemHostRegister_v2",
};

static const char *const free_names[] = {
	"cuMemFree", "cuMemFree_v2", "cuMemFreeHost", PTSZ(cuMemFreeAsync), "cuMemHostUnregister",
};

static const char *const memset_names[] = {
	V2_PTDS(cuMemsetD8),	V2_PTDS(cuMemsetD16),	  V2_PTDS(cuMemsetD32),
	V2_PTDS(cuMemsetD2D8),	V2_PTDS(cuMemsetD2D16),	  V2_PTDS(cuMemsetD2D32),
	PTSZ(cuMemsetD8Async),	PTSZ(cuMemsetD16Async),	  PTSZ(cuMemsetD32Async),
	PTSZ(cuMemsetD2D8Async), PTSZ(cuMemsetD2D16Async), PTSZ(cuMemsetD2D32Async),
};

static const char *const launch_names[] = {
	PTSZ(cuLaunchKernel),
	PTSZ(cuLaunchKernelEx),
	PTSZ(cuLaunchCooperativeKernel),
	"cuLaunchCooperativeKernelMultiDevice",
	PTSZ(cuLaunchHostFunc),
	PTSZ(cuGraphLaunch),
	"cuLaunch",
	"cuLaunchGrid",
	"cuLaunchGridAsync",
};

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

static const struct {
	const char *const *names;
	size_t n;
	uint32_t probe;
} api_tables[FFM_API__MAX] = {
	[FFM_API_SYNC] = { sync_names, ARRAY_SIZE(sync_names), FFM_PROBE_SYNC_STATIC },
	[FFM_API_TRANSFER] = { transfer_names, ARRAY_SIZE(transfer_names), FFM_PROBE_TRANSFER },
	[FFM_API_ALLOC] = { alloc_names, ARRAY_SIZE(alloc_names), FFM_PROBE_ALLOC },
	[FFM_API_FREE] = { free_names, ARRAY_SIZE(free_names), FFM_PROBE_FREE },
	[FFM_API_MEMSET] = { memset_names, ARRAY_SIZE(memset_names), FFM_PROBE_MEMSET },
	[FFM_API_LAUNCH] = { launch_names, ARRAY_SIZE(launch_names), FFM_PROBE_LAUNCH },
};

const char *const *ffm_plan__api_names(enum ffm_api_class cls, size_t *n)
{
	if ((unsigned)cls >= FFM_API__MAX) {
		if (n)
			*n = 0;
		return NULL;
	}
	if (n)
		*n = api_tables[cls].n;
	return api_tables[cls].names;
}

int ffm_plan__api_class(const char *name)
{
	if (!name)
		return -EINVAL;
	for (unsigned c = 0; c < FFM_API__MAX; c++)
		for (size_t i = 0; i < api_tables[c].n; i++)
			if (!strcmp(api_tables[c].names[i], name))
				return (int)c;
	return -ENOENT;
}

uint32_t ffm_plan__class_probe(enum ffm_api_class cls)
{
	return (unsigned)cls < FFM_API__MAX ? api_tables[cls].probe : 0;
}
