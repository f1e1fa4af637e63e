// SPDX-License-Identifier: MIT
/* The plan's input from what a key's store knows of its runs (see ffm_plan.h). */
#include <errno.h>
#include <string.h>

#include "stages/ffm_plan.h"
#include "store/ffm_store.h"

/* Drift (docs/DESIGN.md, "The stage plan"): the key's latest stage-1 run came after its latest
 * stage-2 run and waited at least DRIFT_PPM of its wait time at call sites new to the key. */
#define DRIFT_PPM 10000 /* 1% */
static bool drifted(struct ffm_store *s, const struct ffm_store_stage_history *h)
{
	int64_t ppm = 0;

	if (!h->last_run[1] || !h->last_run[2] || h->last_run[1] < h->last_run[2])
		return false;
	return ffm_store__new_wait_share(s, h->last_run[1], &ppm) == 0 && ppm >= DRIFT_PPM;
}

/* Whether the key's latest stage-3 run saw a transfer repeat itself, once stage 4 is done
 * (its monitoring runs then time the copies); an error reads as no. */
static bool has_duplicates(struct ffm_store *s, const struct ffm_store_stage_history *h)
{
	int64_t any = 0;

	return h->last_run[FFM_STAGE_MEMORY] && h->runs[FFM_STAGE_SYNC_USE] &&
	       ffm_store__dup_transfers(s, h->last_run[FFM_STAGE_MEMORY], &any) == 0 && any;
}

int ffm_plan__input(struct ffm_store *s, int override_stage, struct ffm_plan_input *in,
		    struct ffm_store_stage_history *hist)
{
	int err;

	if (!s || !in || !hist)
		return -EINVAL;
	memset(in, 0, sizeof(*in));
	in->override_stage = override_stage;
	err = ffm_store__stage_history(s, hist);
	if (err < 0)
		return err;
	for (int st = 1; st < FFM_STAGE__MAX && st <= FFM_STORE_MAX_STAGE; st++) {
		/* A run the collector's restart cut short is no failure of its stage: a stage is
		 * given up only after runs that could not cover it on their own. */
		uint32_t failed = hist->partial[st] - hist->interrupted[st];

		if (hist->runs[st] > hist->partial[st])
			in->completed |= FFM_STAGE_BIT(st);
		else
			in->failures[st] = failed > 255 ? 255 : (uint8_t)failed;
	}
	in->drift = drifted(s, hist);
	in->time_copies = has_duplicates(s, hist);
	return 0;
}

int ffm_plan__of_key(struct ffm_store *s, struct ffm_plan *out)
{
	struct ffm_store_stage_history hist;
	struct ffm_plan_input in;
	int err = ffm_plan__input(s, 0, &in, &hist);

	return err < 0 ? err : ffm_plan__next(&in, out);
}
