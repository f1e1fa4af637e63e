/* SPDX-License-Identifier: MIT */
/*
 * Pass "run the model" (analysis/analysis.c runs the passes): the model's benefit of each problem
 * node on the graph, per node its site and problem type, per site its problem counts and point
 * benefit, per process and per driver function what fixing its problems saves.
 */
#include <errno.h>

#include "analysis/analysis_int.h"

static uint32_t site_of_node(const struct oatab *site_of, const struct ffm_node *n)
{
	uint32_t i = oatab_get_u32(site_of, n->stack_id);

	return i == UINT32_MAX ? 0 : i;
}

int an_bucket_benefits(const struct ffm_graph *g, const struct an_nodes *nodes,
		       const uint32_t *site_bucket, size_t nb, uint64_t *out, uint32_t *n)
{
	uint32_t *off = calloc(nb + 1, sizeof(*off)), *sel = NULL;
	int err = 0;

	if (!off)
		return -ENOMEM;
	for (size_t k = 0; k < nodes->n; k++) {
		uint32_t b = site_bucket[nodes->site[k]];

		if (b != UINT32_MAX)
			off[b + 1]++;
	}
	for (size_t b = 0; b < nb; b++)
		off[b + 1] += off[b];
	sel = malloc((off[nb] + 1) * sizeof(*sel));
	if (!sel) {
		free(off);
		return -ENOMEM;
	}
	for (size_t k = 0; k < nodes->n; k++) {
		uint32_t b = site_bucket[nodes->site[k]];

		if (b != UINT32_MAX)
			sel[off[b]++] = (uint32_t)ffm_graph__problem_node(g, k);
	}
	/* off[b] now ends bucket b, which starts where bucket b - 1 ends; nodes stay sorted */
	for (size_t b = 0, start = 0; b < nb && !err; start = off[b], b++) {
		if (n)
			n[b] = off[b] - (uint32_t)start;
		err = ffm_model__estimate(g, sel + start, off[b] - start, NULL, &out[b]);
	}
	free(off);
	free(sel);
	return err;
}

/* Per API: the benefit of fixing all of its problems, nothing else (conditional reads: none). */
static int api_benefits(const struct an_model_in *in, const struct an_nodes *nodes,
			struct ffm_analysis_result *res)
{
	uint32_t *site_api = malloc((res->n_sites + 1) * sizeof(*site_api));
	uint32_t *cnt = malloc((res->n_apis + 1) * sizeof(*cnt));
	uint64_t *ben = malloc((res->n_apis + 1) * sizeof(*ben));
	int err = -ENOMEM;

	if (site_api && cnt && ben) {
		for (size_t si = 0; si < res->n_sites; si++) {
			const struct ffm_an_site *x = &res->sites[si];

			site_api[si] = x->read_conditional ? UINT32_MAX :
							     oatab_get_u32(in->api_of, x->api);
		}
		err = an_bucket_benefits(in->g, nodes, site_api, res->n_apis, ben, cnt);
	}
	for (size_t i = 0; !err && i < res->n_apis; i++) {
		res->apis[i].problems = cnt[i];
		res->apis[i].benefit_ns = ben[i];
	}
	free(site_api);
	free(cnt);
	free(ben);
	return err;
}

/* Per problem node: its site and type (AN_NODE_SPLIT, AN_NODE_COND); the sites' counts. */
static int node_stats(const struct an_model_in *in, struct ffm_analysis_result *res,
		      struct an_nodes *out, size_t *n_cond)
{
	const struct an_timeline *tl = in->tl;

	*n_cond = 0;
	for (size_t k = 0; k < out->n; k++) {
		int64_t ni = ffm_graph__problem_node(in->g, k);
		struct ffm_an_site *x;
		struct ffm_node n;
		int err;

		if (ni < 0 || (err = ffm_graph__node(in->g, (size_t)ni, &n)))
			return ni < 0 ? -EINVAL : err;
		out->site[k] = site_of_node(in->site_of, &n);
		out->prob[k] = n.problem;
		if (tl->ev[n.event].flags & FFM_EVENT_SPLIT)
			out->prob[k] |= AN_NODE_SPLIT;
		x = &res->sites[out->site[k]];
		if (x->read_conditional) { /* a read, or another call of its line */
			out->prob[k] |= AN_NODE_COND;
			++*n_cond;
		}
		x->n_unnecessary += n.problem == FFM_PROBLEM_UNNECESSARY_SYNC;
		x->n_misplaced += n.problem == FFM_PROBLEM_MISPLACED_SYNC;
		x->n_dup += n.problem == FFM_PROBLEM_DUPLICATE_TRANSFER;
		x->n_host_read += n.problem == FFM_PROBLEM_HOST_READ;
		x->n_launch_blocked += n.problem == FFM_PROBLEM_LAUNCH_BLOCKED;
		x->n_temp_buffer += n.problem == FFM_PROBLEM_TEMP_BUFFER;
	}
	return 0;
}

/*
 * The required-read rule: conditional host reads count in no total. The headline is the
 * model's over the other problems (they stay required waits); ben[] of the conditional ones
 * becomes 0, of the others their benefit without them.
 */
static int drop_conditional(const struct an_model_in *in, const struct an_nodes *nodes,
			    uint64_t *ben, struct ffm_totals *tot)
{
	uint32_t *sel = malloc((nodes->n + 1) * sizeof(*sel));
	uint64_t *sub = malloc((nodes->n + 1) * sizeof(*sub));
	size_t m = 0;
	int err = -ENOMEM;

	if (sel && sub) {
		for (size_t k = 0; k < nodes->n; k++)
			if (!(nodes->prob[k] & AN_NODE_COND))
				sel[m++] = (uint32_t)ffm_graph__problem_node(in->g, k);
		err = ffm_model__estimate(in->g, sel, m, sub, &tot->total_ns);
	}
	for (size_t k = 0, j = 0; !err && k < nodes->n; k++) {
		struct ffm_node n;

		if (!(nodes->prob[k] & AN_NODE_COND)) {
			ben[k] = sub[j++];
			continue;
		}
		ben[k] = 0;
		err = ffm_graph__node(in->g, (size_t)ffm_graph__problem_node(in->g, k), &n);
		if (!err && n.type == FFM_NODE_CWAIT)
			tot->problem_wait_ns -= n.dur_ns < tot->problem_wait_ns ?
							n.dur_ns : tot->problem_wait_ns;
	}
	tot->sum_ns = 0;
	for (size_t k = 0; !err && k < nodes->n; k++)
		tot->sum_ns += ben[k];
	if (tot->max_chain_ns > tot->total_ns) /* a bound: the chains' own sums are not kept */
		tot->max_chain_ns = tot->total_ns;
	free(sel);
	free(sub);
	return err;
}

/* Per process: its threads' share of the benefit. */
static void proc_benefits(const struct an_model_in *in, const uint64_t *ben,
			  struct ffm_analysis_result *res)
{
	const struct an_timeline *tl = in->tl;

	for (size_t k = 0; k < res->problem_nodes; k++) {
		struct ffm_node n;
		uint32_t ti;

		if (ffm_graph__node(in->g, (size_t)ffm_graph__problem_node(in->g, k), &n))
			continue;
		ti = oatab_get_u32(&tl->thr_of, n.tid);
		if (ti != UINT32_MAX) {
			struct ffm_an_proc *p = an_proc_of(res, tl->thr[ti].tgid);

			if (p)
				p->benefit_ns += ben[k];
		}
	}
}

int an_run_model(const struct an_model_in *in, struct ffm_analysis_result *res,
		 struct an_model_out *out)
{
	struct an_nodes *nodes = &out->nodes;
	size_t n_cond = 0;
	uint64_t *ben;
	int err;

	res->problem_nodes = ffm_graph__problem_count(in->g);
	res->wall_ns = ffm_graph__wall_ns(in->g);
	nodes->n = res->problem_nodes;
	ben = malloc((nodes->n + 1) * sizeof(*ben));
	nodes->site = malloc((nodes->n + 1) * sizeof(*nodes->site));
	nodes->prob = malloc(nodes->n + 1);
	if (!ben || !nodes->site || !nodes->prob) {
		free(ben);
		return -ENOMEM;
	}
	err = ffm_model__benefit(in->g, ben, &res->totals);
	if (!err)
		err = node_stats(in, res, nodes, &n_cond);
	if (!err && n_cond)
		err = drop_conditional(in, nodes, ben, &res->totals);
	if (!err)
		proc_benefits(in, ben, res);
	free(ben); /* 8 bytes a problem: gone before the groupings allocate theirs */
	/* Point groups always: they are the per-site benefits (a conditional read's: its
	 * conditional price, the model's for reading it every N iterations). */
	if (!err)
		err = ffm_model__group(in->g, FFM_GROUP_POINT, &out->points, &out->n_points);
	for (size_t i = 0; !err && i < out->n_points; i++) {
		uint32_t si = oatab_get_u32(in->site_of, out->points[i].key);

		if (si != UINT32_MAX)
			res->sites[si].benefit_ns = out->points[i].benefit_ns;
	}
	/* Per API: fixing all of its problems, nothing else. */
	return err ? err : api_benefits(in, nodes, res);
}

void an_model_out_fini(struct an_model_out *out)
{
	free(out->nodes.site);
	free(out->nodes.prob);
	free(out->points);
	memset(out, 0, sizeof(*out));
}
