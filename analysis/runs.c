/* SPDX-License-Identifier: MIT */
/*
 * The store, part 1 (the load pass's, analysis/load.c). In: the store, opts' job. Out: res's
 * runs, roles and run counts in q; the baseline's runs (an_choose_baseline); the catalog's
 * driver functions and their names (struct an_catalog).
 */
#include <errno.h>
#include <stdio.h>

#include "analysis/analysis_int.h"

/* ---- runs --------------------------------------------------------------------------------- */

struct run_scan {
	const struct ffm_analysis_opts *o;
	struct ffm_analysis_result *res;
	size_t cap;
	int64_t job_last; /* last run id of opts->job_id */
};

static int on_run(const struct ffm_store_run *r, void *ctx)
{
	struct run_scan *rs = ctx;
	struct ffm_analysis_result *res = rs->res;
	struct ffm_an_run *x;

	if (rs->o->job_id && r->job_id && !strcmp(rs->o->job_id, r->job_id))
		rs->job_last = r->id;
	if (rs->o->job_only && (!r->job_id || strcmp(rs->o->job_id, r->job_id)))
		return 0;
	if (ffm_grow((void **)&res->runs, &rs->cap, res->n_runs + 1, sizeof(*res->runs)))
		return -ENOMEM;
	x = &res->runs[res->n_runs++];
	*x = (struct ffm_an_run){ .id = r->id, .stage = r->stage, .wall_s = r->wall_s,
				  .start_ns = r->start_ns, .end_ns = r->end_ns, .flags = r->flags,
				  .exit_status = r->exit_status, .ended = r->end_ns != 0 };
	snprintf(x->job_id, sizeof(x->job_id), "%s", r->job_id ? r->job_id : "");
	return 0;
}

#define RUN_INCOMPLETE (FFM_RUN_PARTIAL | FFM_RUN_ABORTED)

/* The latest ended run of a stage, complete ones first. */
static struct ffm_an_run *pick_run(struct ffm_analysis_result *res, int stage)
{
	struct ffm_an_run *best = NULL;

	for (size_t i = 0; i < res->n_runs; i++) {
		struct ffm_an_run *r = &res->runs[i];

		if (!r->ended || r->stage != stage)
			continue;
		if (best && (r->flags & RUN_INCOMPLETE) && !(best->flags & RUN_INCOMPLETE))
			continue;
		best = r;
	}
	return best;
}

int an_load_runs(struct ffm_store *s, const struct ffm_analysis_opts *o,
		 struct ffm_analysis_result *res)
{
	struct run_scan rs = { .o = o, .res = res };
	int64_t *slot[5] = { NULL, &res->run_baseline, &res->run_timeline, &res->run_verdicts,
			     &res->run_first_use };
	int err;

	err = ffm_store__for_each_run(s, on_run, &rs);
	if (err)
		return err < 0 ? err : -EIO;
	if (o->job_id) {
		size_t n = 0;

		if (!rs.job_last)
			return -ENOENT;
		/* What was known when the job's last run ended. */
		while (n < res->n_runs && res->runs[n].id <= rs.job_last)
			n++;
		res->n_runs = n;
	}
	for (int st = 1; st <= 4; st++) {
		struct ffm_an_run *r = pick_run(res, st);

		if (!r)
			continue;
		r->role = st; /* enum ffm_an_role follows the stage numbers */
		*slot[st] = r->id;
		err = ffm_store__get_drops(s, r->id, &r->drops);
		if (err)
			return err;
		for (int d = 0; d < FFM_DROP__MAX; d++)
			res->q.drops[d] += r->drops.count[d];
		if (r->flags & (RUN_INCOMPLETE | FFM_RUN_DROPPED))
			res->q.incomplete_runs++;
		/* A program that failed may not have done what it does when it works: its
		 * measurements may not be the program's. */
		if (r->exit_status && !res->q.failed_runs++)
			res->q.failed_status = r->exit_status;
	}
	return 0;
}

static int any_sample(const struct ffm_store_sample *x, void *ctx)
{
	(void)x;
	(void)ctx;
	return 1;
}

/* Whether stage-1 run @r can stand for the program in the baseline: ended whole, the program
 * did not fail, and not sampled (adaptive stage 1 keeps only windows of the waits). */
static bool base_usable(struct ffm_store *s, const struct ffm_an_run *r)
{
	return r->ended && r->stage == 1 && !r->exit_status &&
	       !(r->flags & (RUN_INCOMPLETE | FFM_RUN_DROPPED)) &&
	       ffm_store__for_each_sample(s, r->id, any_sample, NULL) == 0;
}

uint32_t an_run_flags(const struct ffm_an_run *runs, size_t n, int64_t id)
{
	size_t lo = 0, hi = n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (runs[mid].id < id)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < n && runs[lo].id == id ? runs[lo].flags : 0;
}

void an_choose_baseline(struct ffm_store *s, const struct ffm_analysis_result *res,
			struct an_baseline *out)
{
	int64_t from = 0, drift = 0; /* from: the oldest run id taken */

	out->n = 0;
	/* After a re-trace for drift: from the stage-1 run that saw the drift on. */
	for (size_t i = 0; i < res->n_runs; i++) {
		const struct ffm_an_run *r = &res->runs[i];

		if (r->id == res->run_timeline) {
			if (r->flags & FFM_RUN_RETRACE)
				from = drift;
			break;
		}
		if (r->stage == 1)
			drift = r->id;
	}
	for (size_t i = res->n_runs; i-- > 0 && out->n < AN_BASELINE_RUNS;) {
		const struct ffm_an_run *r = &res->runs[i];

		if (r->id >= from && base_usable(s, r))
			out->id[out->n++] = r->id;
	}
}

/* ---- api names ---------------------------------------------------------------------------- */

struct ffm_an_api *an_api_slot(struct an_catalog *cat, uint32_t api)
{
	struct ffm_analysis_result *res = cat->res;
	uint32_t i = oatab_get_u32(&cat->api_of, api);

	if (i != UINT32_MAX)
		return &res->apis[i];
	if (ffm_grow((void **)&res->apis, &cat->cap_apis, res->n_apis + 1, sizeof(*res->apis)) ||
	    oatab_put_u32(&cat->api_of, api, (uint32_t)res->n_apis))
		return NULL;
	res->apis[res->n_apis] = (struct ffm_an_api){
		.api = api, .name = api ? "?" : "(unattributed wait)",
	};
	return &res->apis[res->n_apis++];
}

int an_on_api_name(uint32_t api, const char *name, void *ctx)
{
	struct an_catalog *cat = ctx;
	struct ffm_an_api *x = an_api_slot(cat, api);

	if (!x || !(x->name = an_pool_dup(cat->pool, name, "?")))
		return -ENOMEM;
	return 0;
}
