/* SPDX-License-Identifier: MIT */
/*
 * The analysis's entry points (ffm_analysis.h) and its method, run_passes(): one pass a step,
 * each in its own file with what it reads and writes in analysis_int.h, in the order of
 * docs/DESIGN.md ("The analysis's passes").
 */
#include <errno.h>

#include "analysis/analysis_int.h"

/* The analysis: the result, what the passes hand each other, and what the public entries keep
 * (the graph and sequences for ffm_analysis__subsequence, the event verdicts). Only this file
 * sees it; each pass is handed its parts. */
struct ffm_analysis {
	struct ffm_analysis_result res;
	struct ffm_analysis_opts o;
	struct strpool pool;
	struct ffm_store *s;
	struct an_catalog cat; /* the driver functions and call sites */
	struct an_timeline tl; /* the scan's and the verdicts' output */
	struct an_cpu cpu;   /* the CPU samples' pass's output */
	struct an_baseline base; /* with a timeline: the baseline's runs */
	struct ffm_graph *g;
	struct an_seqs seqs; /* sequences (keep_graph), for ffm_analysis__subsequence() */
	struct an_evvs evv;    /* event verdicts (opts.event_verdicts) */
};

static void drop_graph(struct ffm_analysis *a);

/* Scan the timeline, applying stage 3/4's verdicts to each event as it is read; then what the
 * probes hid and what the duplicate copies cost. In: the catalog, the CPU samples, the baseline.
 * Out: a->tl, the sites' verdict counts, the event verdicts. */
static int scan_and_apply(struct ffm_analysis *a)
{
	struct an_apply_ctx actx = {
		.s = a->s, .o = &a->o, .cpu = &a->cpu, .base = &a->base, .cat = &a->cat,
		.res = &a->res, .tl = &a->tl, .evv = &a->evv,
		.sync_last = OATAB_INIT(struct an_sync_last),
	};
	struct an_apply ap;
	struct an_scan_sink verdicts = an_apply_sink(&ap, &actx);
	int err = an_scan_timeline(&(struct an_scan_in){
			.s = a->s, .scan_threads = a->o.scan_threads, .progress = a->o.progress,
			.run = a->res.run_timeline, .runs = a->res.runs, .n_runs = a->res.n_runs,
			.sites = a->res.sites, .n_sites = a->res.n_sites }, &verdicts,
		&(struct an_scan_out){ .si = a->cat.si, .pool = &a->pool, .res = &a->res,
				       .tl = &a->tl });

	err = err ? err : an_apply_finish(&actx);
	an_apply_fini(&actx);
	return err;
}

/* Price each fix, build the graph, run the model, group, bound by the busiest stream. In: a->tl,
 * the catalog. Out: a->g, a->seqs, res's benefits, groups and quality counts. */
static int model_and_group(struct ffm_analysis *a)
{
	struct an_model_out model = { 0 };
	int err = an_price(&(struct an_price_in){ .s = a->s, .run = a->res.run_timeline,
						  .tl = &a->tl, .site_of = &a->cat.site_of,
						  .sites = a->res.sites, .si = a->cat.si },
			   &a->tl.deleted, &a->res.q);

	err = err ? err : an_reuse(&(struct an_reuse_in){ .s = a->s, .run = a->res.run_timeline,
							 .site_of = &a->cat.site_of,
							 .sites = a->res.sites,
							 .n_sites = a->res.n_sites },
				   &a->tl, &a->res.q);
	err = err ? err : an_managed(&(struct an_managed_in){ .s = a->s,
							     .run = a->res.run_timeline,
							     .run_faults = a->res.run_first_use,
							     .tl = &a->tl, .site_of = &a->cat.site_of,
							     .sites = a->res.sites,
							     .deleted = &a->tl.deleted },
				     &a->res.q);
	an_phase(a->o.progress, "modelling");
	err = err ? err : an_build_graph(&a->tl, &a->g);
	err = err ? err : an_run_model(&(struct an_model_in){ .g = a->g, .tl = &a->tl,
							 .site_of = &a->cat.site_of,
							 .api_of = &a->cat.api_of },
				       &a->res, &model);
	err = err ? err : an_group(&(struct an_group_in){ .g = a->g, .site_of = &a->cat.site_of,
							 .model = &model, .grouping = a->o.grouping,
							 .keep_seqs = a->o.keep_graph },
				   &a->res, &a->seqs);
	an_model_out_fini(&model);
	if (!err)
		an_stream_bound(&a->tl, &a->res);
	return err;
}

/*
 * The method (docs/DESIGN.md, "The analysis's passes"). With a timeline (a stage-2 run that is
 * the profile run) the events are scanned and modelled; without one the report has the profile
 * run's sites, by time, and no problems.
 */
static int run_passes(struct ffm_analysis *a)
{
	int err;

	an_phase(a->o.progress, "reading the runs");
	err = an_load_runs_and_sites(&a->cat);
	if (!err && an_has_timeline(&a->res)) {
		an_phase(a->o.progress, "reading the timeline");
		an_choose_baseline(a->s, &a->res, &a->base);
		err = an_site_kernels(&a->cat, a->res.run_timeline);
		err = err ? err : an_load_cpu_samples(a->s, a->o.py_library, a->res.run_timeline,
						      &a->cpu);
		err = err ? err : scan_and_apply(a);
		err = err ? err : model_and_group(a);
		err = err ? err : an_evidence(&a->cat, &a->res.q);
		drop_graph(a);
	}
	an_phase(a->o.progress, "grouping");
	return err ? err : an_sort(&a->res, &a->cat.site_of, &a->cat.api_of, &a->evv);
}

int ffm_analysis__run(struct ffm_store *s, const struct ffm_analysis_opts *opts,
		      struct ffm_analysis **ret)
{
	struct ffm_analysis *a;
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
	a->res.read_every = a->o.read_every ? a->o.read_every : FFM_HOST_READ_EVERY;
	a->cat = (struct an_catalog){ .s = s, .o = &a->o, .pool = &a->pool, .res = &a->res };
	a->cat.site_of = a->cat.api_of = a->cat.fold_of = a->tl.thr_of = OATAB_U32_INIT;
	a->cpu = (struct an_cpu)AN_CPU_INIT;
	a->tl.deleted = a->tl.streams = OATAB_U32_INIT;
	err = (unsigned)a->o.grouping >= FFM_GROUP__MAX ? -EINVAL : run_passes(a);
	if (err) {
		ffm_analysis__free(a);
		return err;
	}
	*ret = a;
	return 0;
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

	if (!a || !a->g || !a->seqs.v || a->o.grouping != FFM_GROUP_SEQUENCE)
		return -EINVAL;
	for (size_t i = 0; i < a->seqs.n; i++) {
		uint64_t b;
		int err;

		if (a->seqs.pattern_key[a->seqs.v[i].pattern] != key)
			continue;
		found = true;
		if (a->seqs.v[i].period)
			err = periodic_subsequence(a, &a->seqs.v[i], from, to, &b);
		else
			err = ffm_model__subsequence(a->g, &a->seqs.v[i].g, from, to, &b);
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

int ffm_analysis__event_verdict(const struct ffm_analysis *a, const struct ffm_store_event *ev,
				struct ffm_an_event_verdict *out)
{
	if (!a || !ev || !out || !a->o.event_verdicts)
		return -EINVAL;
	an_event_verdict(&a->evv, &a->cat, ev, out);
	return 0;
}

int ffm_analysis__save(const struct ffm_analysis *a, struct ffm_store *s, const char *tool_version,
		       int64_t *ret_id)
{
	return an_save(&(struct an_save_in){ .res = &a->res, .job_id = a->o.job_id,
					     .grouping = a->o.grouping,
					     .tool_version = tool_version }, s, ret_id);
}

int ffm_analysis__store_job(struct ffm_store *s, const char *job_id, const char *tool_version,
			    struct ffm_store_analysis *head)
{
	struct ffm_analysis_opts ao = { .sz = sizeof(ao), .job_id = job_id };
	struct ffm_analysis *a = NULL;
	int err;

	err = ffm_analysis__run(s, &ao, &a);
	if (!err)
		err = ffm_analysis__save(a, s, tool_version, NULL);
	if (!err && head) {
		an_save_head(&(struct an_save_in){ .res = &a->res, .job_id = a->o.job_id,
						   .grouping = a->o.grouping,
						   .tool_version = tool_version }, head);
		head->job_id = NULL; /* the caller's */
	}
	ffm_analysis__free(a);
	return err;
}

struct ffm_analysis *ffm_analysis__free(struct ffm_analysis *a)
{
	if (!a)
		return NULL;
	ffm_graph__free(a->g);
	free(a->tl.ev);
	for (size_t i = 0; i < a->res.n_sites && a->cat.si; i++) {
		an_verdicts_fini(&a->cat.si[i].s3);
		an_verdicts_fini(&a->cat.si[i].s4);
		an_verdicts_fini(&a->cat.si[i].x3);
		free(a->cat.si[i].delays);
		free(a->cat.si[i].obs);
	}
	an_catalog_fini(&a->cat);
	for (size_t i = 0; i < a->res.n_groups; i++)
		free(a->res.groups[i].seq_sites);
	free(a->res.groups);
	free(a->res.sites);
	free(a->res.apis);
	free(a->res.procs);
	free(a->res.runs);
	free(a->seqs.v);
	free(a->seqs.pattern_key);
	free(a->evv.v);
	free(a->tl.thr);
	free(a->tl.busy);
	an_cpu_fini(&a->cpu);
	oatab_free(&a->tl.thr_of);
	oatab_free(&a->tl.deleted);
	oatab_free(&a->tl.streams);
	an_pool_fini(&a->pool);
	free(a);
	return NULL;
}

/* The graph and the events, unless opts.keep_graph keeps them. */
static void drop_graph(struct ffm_analysis *a)
{
	if (a->o.keep_graph)
		return;
	a->g = ffm_graph__free(a->g);
	free(a->tl.ev);
	a->tl.ev = NULL;
}
