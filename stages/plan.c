// SPDX-License-Identifier: MIT
/* The FFM stage plan (see ffm_plan.h). */
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
		return BASE | CALLS | FFM_PROBE_CPU_SAMPLE;
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
	if (out->reason == FFM_PLAN_MONITOR && in->time_copies)
		out->probes |= FFM_PROBE_COPIES;
	/* No stage-1 list of synchronizing functions: probe the known ones. */
	if ((out->probes & FFM_PROBE_SYNC_FUNCS) &&
	    !(in->completed & FFM_STAGE_BIT(FFM_STAGE_BASELINE)))
		out->probes = (out->probes & ~FFM_PROBE_SYNC_FUNCS) | FFM_PROBE_SYNC_STATIC;
	return 0;
}
