/* SPDX-License-Identifier: MIT */
/*
 * An analysis's results as store rows (ffm_store__put_results): the headline, the call sites
 * with their verdicts, the problem groups in the report's order and the per-function benefits,
 * so that SQL on the store sees what `ffmctl report` shows. Only the store's writer calls this
 * (ffmd at a job's end, ffmctl profile); the analysis itself still only reads.
 * In: the result, the job and grouping it was made for (struct an_save_in). Out: the store's
 * result rows (ffm_store__put_results), or their headline alone.
 */
#include <errno.h>
#include <stdlib.h>
#include <time.h>

#include "analysis/analysis_int.h"

static struct ffm_store_problem_counts counts_of(const uint64_t *n)
{
	return (struct ffm_store_problem_counts){
		.unnecessary = n[FFM_PROBLEM_UNNECESSARY_SYNC],
		.misplaced = n[FFM_PROBLEM_MISPLACED_SYNC],
		.duplicate = n[FFM_PROBLEM_DUPLICATE_TRANSFER],
		.host_read = n[FFM_PROBLEM_HOST_READ],
		.launch_blocked = n[FFM_PROBLEM_LAUNCH_BLOCKED],
	};
}

void an_save_head(const struct an_save_in *in, struct ffm_store_analysis *h)
{
	const struct ffm_analysis_result *r = in->res;
	uint64_t lost = 0;

	for (int i = 0; i < FFM_DROP__MAX; i++)
		lost += r->q.drops[i];
	*h = (struct ffm_store_analysis){
		.job_id = in->job_id, .at_unix = time(NULL), .tool_version = in->tool_version,
		.grouping = ffm_an_grouping_name(in->grouping), .run_baseline = r->run_baseline,
		.run_timeline = r->run_timeline, .run_verdicts = r->run_verdicts,
		.run_first_use = r->run_first_use, .have_problems = r->have_problems,
		.wall_ns = r->wall_ns, .wait_ns = r->totals.wait_ns,
		.recoverable_ns = r->have_problems ? r->totals.total_ns : 0,
		.recoverable_share = r->have_problems && r->wall_ns ?
					     (double)r->totals.total_ns / (double)r->wall_ns : 0,
		.events = r->events, .records_lost = lost, .incomplete_runs = r->q.incomplete_runs,
		.divergent_sites = r->q.divergent_sites,
	};
}

static void site_of(const struct ffm_an_site *x, struct ffm_store_site_result *o)
{
	uint64_t n[FFM_PROBLEM__MAX] = { 0, x->n_unnecessary, x->n_misplaced, x->n_dup,
					 x->n_host_read, x->n_launch_blocked, x->n_temp_buffer };

	*o = (struct ffm_store_site_result){
		.stack = x->stack, .api = x->api, .kind = x->kind, .function = x->function,
		.file = x->file, .line = x->line, .driver_function = x->api_name, .count = x->count,
		.dur_ns = x->dur_ns, .wait_ns = x->wait_ns, .bytes = x->bytes,
		.problem = ffm_an_site_problem(x), .n = counts_of(n), .n_classified = x->n_classified,
		.benefit_ns = x->benefit_ns, .use_delay_ns = x->use_delay_ns, .divergent = x->divergent,
	};
}

static void problem_of(const struct ffm_analysis_result *r, const struct ffm_an_group *g,
		       struct ffm_store_problem_result *o)
{
	*o = (struct ffm_store_problem_result){
		.problem = ffm_an_main_problem(g->n_type),
		.stack = g->site < r->n_sites ? r->sites[g->site].stack : 0, .count = g->count,
		.n = counts_of(g->n_type), .wait_ns = g->wait_ns, .benefit_ns = g->benefit_ns,
		.partial = g->partial, .divergent = g->divergent,
	};
}

int an_save(const struct an_save_in *in, struct ffm_store *s, int64_t *ret_id)
{
	const struct ffm_analysis_result *r = in->res;
	struct ffm_store_site_result *sites;
	struct ffm_store_problem_result *probs;
	struct ffm_store_benefit_result *bens;
	struct ffm_store_results out = { 0 };
	int err = -ENOMEM;

	if (!in->job_id)
		return -EINVAL;
	sites = calloc(r->n_sites + 1, sizeof(*sites));
	probs = calloc(r->n_groups + 1, sizeof(*probs));
	bens = calloc(r->n_apis + 1, sizeof(*bens));
	if (!sites || !probs || !bens)
		goto out;
	an_save_head(in, &out.a);
	for (size_t i = 0; i < r->n_sites; i++)
		site_of(&r->sites[i], &sites[i]);
	/* conditional reads count in no total: not the store's problems either */
	for (size_t i = 0; r->have_problems && i < r->n_groups; i++)
		if (!r->groups[i].conditional)
			problem_of(r, &r->groups[i], &probs[out.n_problems++]);
	for (size_t i = 0; i < r->n_apis; i++) {
		const struct ffm_an_api *p = &r->apis[i];

		bens[i] = (struct ffm_store_benefit_result){
			.api = p->api, .function = p->name, .calls = p->calls, .dur_ns = p->dur_ns,
			.wait_ns = p->wait_ns, .problems = p->problems, .benefit_ns = p->benefit_ns,
		};
	}
	out.sites = sites;
	out.n_sites = r->n_sites;
	out.problems = probs;
	out.benefits = bens;
	out.n_benefits = r->n_apis;
	err = ffm_store__put_results(s, &out, ret_id);
out:
	free(sites);
	free(probs);
	free(bens);
	return err;
}
