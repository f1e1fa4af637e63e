/* SPDX-License-Identifier: MIT */
/*
 * Pass "collect evidence" (analysis/analysis.c runs the passes): per site with problems, its
 * median first-use delay, where the protected data was first used and the first of its
 * duplicate transfers, from the verdicts' notes and the store's frames.
 * In: the catalog's per-site notes (struct site_int), the store's frames. Out: the sites' use
 * and first-transfer fields (a first transfer's site created if new); q.partial_syncs.
 */
#include <errno.h>

#include "analysis/analysis_int.h"

/* First-use and first-transfer locations of the sites with problems. The use is named like a
 * call site: its first frame of the highest ffm_an_frame_rank (the user's line, not a header's). */
struct use_frame {
	const struct an_catalog *cat;
	const char *func, *file;
	uint32_t line;
	int rank;
	bool done;
};

static int on_use_frame(const struct ffm_store_frame *f, uint32_t depth, void *ctx)
{
	struct use_frame *u = ctx;
	int rank = ffm_an_frame_rank(f, u->cat->o->src_library);

	if (u->done && rank <= u->rank)
		return 0;
	u->done = true;
	u->rank = rank;
	u->func = an_pool_dup(u->cat->pool, f->demangled ? f->demangled : f->func, "?");
	u->file = an_pool_dup(u->cat->pool, f->file, "");
	u->line = f->line;
	return u->func && u->file ? 0 : -ENOMEM;
}

int an_evidence(struct an_catalog *cat, struct ffm_an_quality *q)
{
	struct ffm_analysis_result *res = cat->res;

	for (size_t i = 0; i < res->n_sites; i++) {
		struct ffm_an_site *x = &res->sites[i];
		struct site_int *si = &cat->si[i];
		struct use_frame u = { .cat = cat };
		int err = 0;

		x->use_delay_ns = an_median_i64(si->delays, si->n_delays);
		if (si->use_frame)
			err = ffm_store__get_frame(cat->s, si->use_frame, on_use_frame, &u);
		if ((err >= 0 || err == -ENOENT) && si->use_stack && u.rank < FFM_AN_RANK_USER_LINE)
			err = ffm_store__for_each_frame(cat->s, si->use_stack, on_use_frame, &u);
		if (err < 0 && err != -ENOENT)
			return err;
		if (u.done) {
			x->use_function = u.func;
			x->use_file = u.file;
			x->use_line = u.line;
		}
		x->first_xfer_stack = si->first_stack;
		if (si->first_stack) {
			uint32_t fi = oatab_get_u32(&cat->site_of, (uint64_t)si->first_stack);

			if (fi == UINT32_MAX) {
				err = an_site_for(cat, si->first_stack, x->api, FFM_EV_TRANSFER, &fi);
				if (err)
					return err;
				x = &res->sites[i]; /* site_for may move the array */
			}
			x->first_xfer_site = (int)fi;
		}
		q->partial_syncs += x->n_partial;
	}
	return 0;
}
