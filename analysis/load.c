/* SPDX-License-Identifier: MIT */
/*
 * Pass "load runs and sites" (analysis/analysis.c runs the passes): the key's runs and which of
 * them the analysis uses (analysis/runs.c), the driver functions' names, the profile run's call
 * sites from its per-stack totals (analysis/sites.c, sampled runs' estimates: sampled.c) and the
 * time per driver function. Without a timeline the wall time is the baseline's.
 * In: the catalog's store and options. Out: res's key, runs, roles, run counts in q and (without
 * a timeline) wall time; the catalog's driver functions and the profile run's sites.
 */
#include <errno.h>

#include "analysis/analysis_int.h"

static int api_totals(struct an_catalog *cat)
{
	struct ffm_analysis_result *res = cat->res;

	for (size_t i = 0; i < res->n_sites; i++) {
		const struct ffm_an_site *x = &res->sites[i];
		struct ffm_an_api *api;

		if (!x->in_timeline)
			continue;
		api = an_api_slot(cat, x->api);
		if (!api)
			return -ENOMEM;
		api->calls += x->count;
		api->dur_ns += x->dur_ns;
		api->wait_ns += x->wait_ns;
	}
	return 0;
}

/* The run whose sites the report lists: the timeline, else the baseline, or as opts say. */
static int64_t profile_run(const struct ffm_analysis_opts *o,
			   const struct ffm_analysis_result *res)
{
	if (o->profile_stage == 1)
		return res->run_baseline;
	if (o->profile_stage == 2)
		return res->run_timeline;
	return res->run_timeline ? res->run_timeline : res->run_baseline;
}

bool an_has_timeline(const struct ffm_analysis_result *res)
{
	return res->run_timeline && res->run_profile == res->run_timeline;
}

int an_load_runs_and_sites(struct an_catalog *cat)
{
	struct ffm_analysis_result *res = cat->res;
	struct ffm_store_key key = { 0 };
	int err = ffm_store__key(cat->s, &key);

	if (err && err != -ENOENT)
		return err;
	res->key = an_pool_dup(cat->pool, key.key, "?");
	err = an_load_runs(cat->s, cat->o, res);
	if (!err)
		err = ffm_store__for_each_api_name(cat->s, an_on_api_name, cat);
	if (err)
		return err;
	res->run_profile = profile_run(cat->o, res);
	if (res->run_profile) {
		err = ffm_store__for_each_stack_agg(cat->s, res->run_profile, an_on_agg, cat);
		if (!err)
			err = an_apply_samples(cat->s, res->run_profile, &cat->site_of, res->sites,
					       &res->sampled);
		if (err)
			return err;
	}
	err = api_totals(cat);
	if (err || an_has_timeline(res) || !res->run_baseline)
		return err;
	for (size_t i = 0; i < res->n_runs; i++)
		if (res->runs[i].id == res->run_baseline)
			res->wall_ns = (uint64_t)(res->runs[i].wall_s * 1e9);
	return 0;
}
