/* SPDX-License-Identifier: MIT */
/* The analysis's entry points (ffm_analysis.h). */
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

int ffm_analysis__run(struct ffm_store *s, const struct ffm_analysis_opts *opts,
		      struct ffm_analysis **ret)
{
	struct ffm_analysis *a;
	struct ffm_store_key key = { 0 };
	int64_t profile_run;
	int err;

	*ret = NULL;
	if (!s || (opts && opts->job_only && !opts->job_id))
		return -EINVAL;
	a = calloc(1, sizeof(*a));
	if (!a)
		return -ENOMEM;
	if (opts)
		memcpy(&a->o, opts, opts->sz && opts->sz < sizeof(a->o) ? opts->sz : sizeof(a->o));
	a->s = s;
	a->site_of = a->api_of = a->fold_of = a->thr_of = a->keep_of = a->cpu_of = OATAB_U32_INIT;
	a->sync_last = OATAB_INIT(struct an_sync_last);
	if ((unsigned)a->o.grouping >= FFM_GROUP__MAX) {
		err = -EINVAL;
		goto fail;
	}
	err = ffm_store__key(s, &key);
	if (err && err != -ENOENT)
		goto fail;
	a->res.key = an_pool_dup(&a->pool, key.key, "?");
	an_phase(a, "reading the runs");
	err = an_load_runs(a);
	if (err)
		goto fail;
	err = ffm_store__for_each_api_name(s, an_on_api_name, a);
	if (err)
		goto fail;
	profile_run = a->res.run_timeline ? a->res.run_timeline : a->res.run_baseline;
	if (a->o.profile_stage == 1)
		profile_run = a->res.run_baseline;
	else if (a->o.profile_stage == 2)
		profile_run = a->res.run_timeline;
	a->res.run_profile = profile_run;
	if (profile_run) {
		err = ffm_store__for_each_stack_agg(s, profile_run, an_on_agg, a);
		if (!err)
			err = an_apply_samples(a, profile_run);
		if (err)
			goto fail;
	}
	err = api_totals(a);
	if (err)
		goto fail;
	if (a->res.run_timeline && profile_run == a->res.run_timeline) {
		an_phase(a, "reading the timeline");
		err = an_site_kernels(a);
		if (!err)
			err = an_load_cpu_samples(a);
		if (!err)
			err = an_load_timeline(a); /* stage 3/4 verdicts included */
		if (err)
			goto fail;
	} else if (a->res.run_baseline) {
		for (size_t i = 0; i < a->res.n_runs; i++)
			if (a->res.runs[i].id == a->res.run_baseline)
				a->res.wall_ns = (uint64_t)(a->res.runs[i].wall_s * 1e9);
	}
	an_phase(a, "grouping");
	err = an_sort_sites(a);
	if (err)
		goto fail;
	if (a->res.n_apis) /* NULL when no run named an API: qsort(NULL, 0) is UB */
		qsort(a->res.apis, a->res.n_apis, sizeof(*a->res.apis), an_cmp_api);
	oatab_free(&a->api_of);
	err = an_evv_sort(a);
	if (err)
		goto fail;
	*ret = a;
	return 0;
fail:
	ffm_analysis__free(a);
	return err;
}

const struct ffm_analysis_result *ffm_analysis__result(const struct ffm_analysis *a)
{
	return a ? &a->res : NULL;
}

/* Entries from..to of every period of a repeating sequence, fixed together. */
static int periodic_subsequence(const struct ffm_analysis *a, const struct seq_ref *q,
				uint32_t from, uint32_t to, uint64_t *benefit)
{
	uint32_t *nodes, n = 0;
	int err;

	if (from > to)
		return -EINVAL;
	if (to >= q->g.members - q->period * (q->reps - 1))
		return -ERANGE;
	nodes = malloc(q->g.members * sizeof(*nodes));
	if (!nodes)
		return -ENOMEM;
	for (uint32_t j = 0; j < q->g.members; j++) {
		/* member j is pattern entry j % period in the loop, then the tail's in order */
		uint32_t body = q->period * q->reps;
		uint32_t e = j < body ? j % q->period : q->period + (j - body);

		if (e >= from && e <= to)
			nodes[n++] = (uint32_t)ffm_graph__problem_node(a->g, q->first + j);
	}
	err = ffm_model__estimate(a->g, nodes, n, NULL, benefit);
	free(nodes);
	return err;
}

int ffm_analysis__subsequence(const struct ffm_analysis *a, uint64_t key, uint32_t from,
			      uint32_t to, uint64_t *benefit_ns, uint64_t *occurrences)
{
	uint64_t sum = 0, occ = 0;
	bool found = false;

	if (!a || !a->g || !a->seqs || a->o.grouping != FFM_GROUP_SEQUENCE)
		return -EINVAL;
	for (size_t i = 0; i < a->n_seqs; i++) {
		uint64_t b;
		int err;

		if (a->pattern_key[a->seqs[i].pattern] != key)
			continue;
		found = true;
		if (a->seqs[i].period)
			err = periodic_subsequence(a, &a->seqs[i], from, to, &b);
		else
			err = ffm_model__subsequence(a->g, &a->seqs[i].g, from, to, &b);
		occ++;
		if (err)
			return err;
		sum += b;
	}
	if (!found)
		return -ENOENT;
	*benefit_ns = sum;
	if (occurrences)
		*occurrences = occ;
	return 0;
}

struct ffm_analysis *ffm_analysis__free(struct ffm_analysis *a)
{
	if (!a)
		return NULL;
	ffm_graph__free(a->g);
	free(a->ev);
	for (size_t i = 0; i < a->res.n_sites && a->si; i++) {
		an_verdicts_fini(&a->si[i].s3);
		an_verdicts_fini(&a->si[i].s4);
		an_verdicts_fini(&a->si[i].x3);
		free(a->si[i].delays);
		free(a->si[i].obs);
	}
	free(a->si);
	for (size_t i = 0; i < a->res.n_groups; i++)
		free(a->res.groups[i].seq_sites);
	free(a->res.groups);
	free(a->res.sites);
	free(a->res.apis);
	free(a->res.procs);
	free(a->res.runs);
	free(a->seqs);
	free(a->pattern_key);
	free(a->evv);
	free(a->thr);
	free(a->busy);
	free(a->cpu);
	oatab_free(&a->cpu_of);
	oatab_free(&a->site_of);
	oatab_free(&a->api_of);
	oatab_free(&a->fold_of);
	oatab_free(&a->thr_of);
	oatab_free(&a->keep_of);
	oatab_free(&a->sync_last);
	an_pool_fini(&a->pool);
	free(a);
	return NULL;
}

const char *ffm_an_grouping_name(enum ffm_grouping g)
{
	return g == FFM_GROUP_FOLD ? "function" : g == FFM_GROUP_SEQUENCE ? "sequence" : "point";
}

const char *ffm_an_problem_name(unsigned problem)
{
	static const char *const names[FFM_PROBLEM__MAX] = {
		[FFM_PROBLEM_UNNECESSARY_SYNC] = "unnecessary_sync",
		[FFM_PROBLEM_MISPLACED_SYNC] = "misplaced_sync",
		[FFM_PROBLEM_DUPLICATE_TRANSFER] = "duplicate_transfer",
		[FFM_PROBLEM_HOST_READ] = "host_read_every_iteration",
		[FFM_PROBLEM_LAUNCH_BLOCKED] = "launch_blocked",
	};

	return problem < FFM_PROBLEM__MAX && names[problem] ? names[problem] : "none";
}

/* The most frequent type, but a host read names any group it is in: its fix (read the value
 * every N iterations) is what the group's other calls, such as the copy before it, need too. */
unsigned ffm_an_main_problem(const uint64_t *n_type)
{
	unsigned best = FFM_PROBLEM_NONE;

	if (n_type[FFM_PROBLEM_HOST_READ])
		return FFM_PROBLEM_HOST_READ;
	for (unsigned t = 1; t < FFM_PROBLEM__MAX; t++)
		if (n_type[t] > (best ? n_type[best] : 0))
			best = t;
	if (n_type[FFM_PROBLEM_DUPLICATE_TRANSFER] &&
	    2 * n_type[FFM_PROBLEM_DUPLICATE_TRANSFER] >= n_type[best])
		return FFM_PROBLEM_DUPLICATE_TRANSFER;
	return best;
}

unsigned ffm_an_site_problem(const struct ffm_an_site *x)
{
	uint64_t n[FFM_PROBLEM__MAX] = { 0, x->n_unnecessary, x->n_misplaced, x->n_dup,
					 x->n_host_read, x->n_launch_blocked };

	return ffm_an_main_problem(n);
}
