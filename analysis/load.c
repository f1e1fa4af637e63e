/* SPDX-License-Identifier: MIT */
/*
 * Pass "load runs and sites" (analysis/analysis.c runs the passes): the key's runs and which of
 * them the analysis uses (analysis/runs.c), the driver functions' names, the profile run's call
 * sites from its per-stack totals (analysis/sites.c, sampled runs' estimates: sampled.c) and the
 * time per driver function. Without a timeline the wall time is the baseline's.
 */
#include <errno.h>

#include "analysis/analysis_int.h"

static int api_totals(struct ffm_analysis *a)
{
	struct ffm_analysis_result *res = &a->res;

	for (size_t i = 0; i < res->n_sites; i++) {
		const struct ffm_an_site *x = &res->sites[i];
		struct ffm_an_api *api;

		if (!x->in_timeline)
			continue;
		api = an_api_slot(a, x->api);
		if (!api)
			return -ENOMEM;
		api->calls += x->count;
		api->dur_ns += x->dur_ns;
		api->wait_ns += x->wait_ns;
	}
	return 0;
}

/* The run whose sites the report lists: the timeline, else the baseline, or as opts say. */
static int64_t profile_run(const struct ffm_analysis *a)
{
	if (a->o.profile_stage == 1)
		return a->res.run_baseline;
	if (a->o.profile_stage == 2)
		return a->res.run_timeline;
	return a->res.run_timeline ? a->res.run_timeline : a->res.run_baseline;
}

bool an_has_timeline(const struct ffm_analysis *a)
{
	return a->res.run_timeline && a->res.run_profile == a->res.run_timeline;
}

int an_load_runs_and_sites(struct ffm_analysis *a)
{
	struct ffm_store_key key = { 0 };
	int err = ffm_store__key(a->s, &key);

	if (err && err != -ENOENT)
		return err;
	a->res.key = an_pool_dup(&a->pool, key.key, "?");
	err = an_load_runs(a);
	if (!err)
		err = ffm_store__for_each_api_name(a->s, an_on_api_name, a);
	if (err)
		return err;
	a->res.run_profile = profile_run(a);
	if (a->res.run_profile) {
		err = ffm_store__for_each_stack_agg(a->s, a->res.run_profile, an_on_agg, a);
		if (!err)
			err = an_apply_samples(a, a->res.run_profile);
		if (err)
			return err;
	}
	err = api_totals(a);
	if (err || an_has_timeline(a) || !a->res.run_baseline)
		return err;
	for (size_t i = 0; i < a->res.n_runs; i++)
		if (a->res.runs[i].id == a->res.run_baseline)
			a->res.wall_ns = (uint64_t)(a->res.runs[i].wall_s * 1e9);
	return 0;
}
