/* SPDX-License-Identifier: MIT */
/*
 * Pass "group" (analysis/analysis.c runs the passes): the model's problem nodes into the
 * requested grouping (ffm_analysis_opts.grouping): a line of the program (point), a folded
 * function, or a sequence between required syncs with its repeating pattern; each group's
 * members, problem counts and benefit. The name of a group is its main problem
 * (ffm_an_main_problem, analysis/verdict.c, beside the verdict rules).
 */
#include <errno.h>

#include "analysis/analysis_int.h"

static uint32_t site_of_node(const struct oatab *site_of, const struct ffm_node *n)
{
	uint32_t i = oatab_get_u32(site_of, n->stack_id);

	return i == UINT32_MAX ? 0 : i;
}

/* @prob: the node's problem type, with AN_NODE_SPLIT and AN_NODE_COND */
static void group_add_member(const struct ffm_an_site *sites, struct ffm_an_group *gr,
			     uint32_t site, unsigned prob)
{
	const struct ffm_an_site *x = &sites[site];
	bool first = true;

	for (unsigned t = 0; t < FFM_PROBLEM__MAX; t++)
		first &= !gr->n_type[t];
	/* conditional: every member is a conditional read */
	gr->conditional = (first || gr->conditional) && (prob & AN_NODE_COND);
	gr->count += !(prob & AN_NODE_SPLIT); /* calls, not problems */
	gr->n_type[AN_NODE_TYPE(prob)]++;
	gr->partial |= x->n_partial != 0;
	gr->divergent |= x->divergent;
	an_group_coverage(gr, x->coverage_known, x->coverage);
}

void an_group_coverage(struct ffm_an_group *gr, bool known, double coverage)
{
	if (known && (!gr->coverage_known || coverage < gr->coverage)) {
		gr->coverage = coverage;
		gr->coverage_known = true;
	}
}

/* A function with conditional reads and other problems is worth the others alone. */
static int fold_without_conditional(const struct an_group_in *in, const struct oatab *idx,
				    struct ffm_analysis_result *res)
{
	uint32_t *bucket;
	uint64_t *ben;
	bool any = false;
	int err;

	for (size_t si = 0; si < res->n_sites; si++)
		any |= res->sites[si].read_conditional;
	if (!any)
		return 0;
	bucket = malloc((res->n_sites + 1) * sizeof(*bucket));
	ben = malloc((res->n_groups + 1) * sizeof(*ben));
	err = bucket && ben ? 0 : -ENOMEM;
	for (size_t si = 0; !err && si < res->n_sites; si++)
		bucket[si] = res->sites[si].read_conditional ?
				     UINT32_MAX : oatab_get_u32(idx, res->sites[si].fold_id);
	if (!err)
		err = an_bucket_benefits(in->g, &in->model->nodes, bucket, res->n_groups, ben,
					 NULL);
	for (size_t i = 0; !err && i < res->n_groups; i++)
		if (!res->groups[i].conditional)
			res->groups[i].benefit_ns = ben[i];
	free(bucket);
	free(ben);
	return err;
}

/* Folded-function groups from the model's; member statistics from the problem nodes. */
static int make_fold_groups(const struct an_group_in *in, const struct ffm_group *mg, size_t n_mg,
			    struct ffm_analysis_result *res)
{
	const uint32_t *node_site = in->model->nodes.site;
	const uint8_t *node_prob = in->model->nodes.prob;
	struct oatab idx = OATAB_U32_INIT;
	int err = 0;

	res->groups = calloc(n_mg ? n_mg : 1, sizeof(*res->groups));
	if (!res->groups)
		return -ENOMEM;
	res->n_groups = n_mg;
	for (size_t i = 0; i < n_mg; i++) {
		struct ffm_an_group *gr = &res->groups[i];
		struct ffm_node n;

		err = ffm_graph__node(in->g, mg[i].first_node, &n);
		if (err)
			goto out;
		gr->site = site_of_node(in->site_of, &n);
		gr->key = an_str_hash(res->sites[gr->site].folded);
		gr->problems = mg[i].problems;
		gr->wait_ns = mg[i].wait_ns;
		gr->benefit_ns = mg[i].benefit_ns;
		err = oatab_put_u32(&idx, mg[i].key, (uint32_t)i);
		if (err)
			goto out;
	}
	for (size_t k = 0; k < res->problem_nodes; k++) {
		const struct ffm_an_site *x = &res->sites[node_site[k]];
		uint32_t gi = oatab_get_u32(&idx, x->fold_id);

		if (gi != UINT32_MAX)
			group_add_member(res->sites, &res->groups[gi], node_site[k], node_prob[k]);
	}
	for (size_t i = 0; i < n_mg; i++)
		res->groups[i].occurrences = res->groups[i].count;
	err = fold_without_conditional(in, &idx, res);
out:
	oatab_free(&idx);
	return err;
}

/*
 * Point groups are the user's lines: the calls one line makes (a library's copy and its stream
 * sync, the instantiations of a template) are one problem, whose benefit is the model's for
 * all of their problems at once (fixing the line fixes them together: one alone often saves
 * nothing, a later wait absorbing it). A site without a source line is a group of its own.
 */
uint64_t an_line_key(const struct ffm_an_site *x)
{
	uint64_t h = FFM_FNV1A_INIT;

	if (!x->file[0] || !x->line)
		return x->key;
	h = ffm_fnv1a(h, x->module, strlen(x->module) + 1);
	h = ffm_fnv1a(h, x->file, strlen(x->file) + 1);
	h = ffm_fnv1a(h, &x->line, sizeof(x->line));
	h = ffm_fnv1a(h, x->folded, strlen(x->folded) + 1);
	return h ? h : 1;
}

/* The site that names a line's group: of the group's main problem type, the longest waited. */
static void line_group_site(const struct ffm_an_site *sites, struct ffm_an_group *gr)
{
	unsigned main = ffm_an_main_problem(gr->n_type);

	for (uint32_t m = 0; m < gr->n_members; m++) {
		uint32_t si = gr->seq_sites[m];
		bool fits = ffm_an_site_problem(&sites[si]) == main;
		bool cur = ffm_an_site_problem(&sites[gr->site]) == main;

		if ((fits && !cur) || (fits == cur && sites[si].wait_ns > sites[gr->site].wait_ns))
			gr->site = si;
	}
}

/* A line of several sites is worth the model over all of their problems at once. */
static int line_benefits(const struct an_group_in *in, uint32_t *site_group,
			 struct ffm_analysis_result *res)
{
	uint64_t *ben = malloc((res->n_groups + 1) * sizeof(*ben));
	int err;

	if (!ben)
		return -ENOMEM;
	for (size_t si = 0; si < res->n_sites; si++) { /* single-site lines keep their point's */
		const struct ffm_an_group *gr;

		if (site_group[si] == UINT32_MAX)
			continue;
		gr = &res->groups[site_group[si]];
		/* a line with other problems is worth them, without its conditional reads */
		if (gr->n_members < 2 || (res->sites[si].read_conditional && !gr->conditional))
			site_group[si] = UINT32_MAX;
	}
	err = an_bucket_benefits(in->g, &in->model->nodes, site_group, res->n_groups, ben, NULL);
	for (size_t i = 0; !err && i < res->n_groups; i++)
		if (res->groups[i].n_members > 1)
			res->groups[i].benefit_ns = ben[i];
	free(ben);
	return err;
}

static int make_line_groups(const struct an_group_in *in, struct ffm_analysis_result *res)
{
	const struct ffm_group *pg = in->model->points;
	size_t n_pg = in->model->n_points;
	const uint32_t *node_site = in->model->nodes.site;
	const uint8_t *node_prob = in->model->nodes.prob;
	struct oatab idx = OATAB_U32_INIT;
	uint32_t *site_group = malloc((res->n_sites + 1) * sizeof(*site_group));
	int err = 0;

	res->groups = calloc(n_pg ? n_pg : 1, sizeof(*res->groups));
	if (!res->groups || !site_group) {
		free(site_group);
		return -ENOMEM;
	}
	memset(site_group, 0xff, (res->n_sites + 1) * sizeof(*site_group));
	for (size_t i = 0; i < n_pg; i++) {
		uint32_t si = oatab_get_u32(in->site_of, pg[i].key), gi, *ms;
		struct ffm_an_group *gr;
		uint64_t key;
		bool ins;

		if (si == UINT32_MAX)
			continue;
		key = an_line_key(&res->sites[si]);
		gi = oatab_get_or_put_u32(&idx, key, (uint32_t)res->n_groups, &ins);
		if (gi == UINT32_MAX) {
			err = -ENOMEM;
			goto out;
		}
		gr = &res->groups[gi];
		if (ins) {
			res->n_groups++;
			gr->key = key;
			gr->site = si;
		}
		ms = realloc(gr->seq_sites, (gr->n_members + 1) * sizeof(*ms));
		if (!ms) {
			err = -ENOMEM;
			goto out;
		}
		gr->seq_sites = ms;
		gr->seq_sites[gr->n_members++] = si;
		gr->problems |= pg[i].problems;
		gr->wait_ns += pg[i].wait_ns;
		gr->benefit_ns = pg[i].benefit_ns; /* a line of one site; several: below */
		site_group[si] = gi;
	}
	for (size_t k = 0; k < res->problem_nodes; k++) {
		uint32_t gi = site_group[node_site[k]];

		if (gi != UINT32_MAX)
			group_add_member(res->sites, &res->groups[gi], node_site[k], node_prob[k]);
	}
	err = line_benefits(in, site_group, res);
	for (size_t i = 0; !err && i < res->n_groups; i++) {
		struct ffm_an_group *gr = &res->groups[i];

		gr->occurrences = gr->count;
		line_group_site(res->sites, gr);
		if (gr->n_members < 2) { /* seq_sites lists a line's sites when it has several */
			free(gr->seq_sites);
			gr->seq_sites = NULL;
			gr->n_members = 0;
		}
	}
out:
	oatab_free(&idx);
	free(site_group);
	return err;
}

/*
 * A loop whose iterations hold no required sync is one sequence of all of its iterations; it
 * shows as one iteration's calls repeated, then what follows the loop. Of the periods up to
 * SEQ_MAX_PERIOD that repeat at least twice from the start, the one that leaves the shortest
 * pattern (one period and the tail after the last full repetition), the shorter on a tie:
 * *reps full periods, then the tail. 0 when nothing repeats.
 */
#define SEQ_MAX_PERIOD 64

static uint32_t seq_period(const struct ffm_an_site *sites, const uint32_t *node_site, size_t k,
			   uint32_t m, uint32_t *reps)
{
	uint32_t best = 0, best_len = m;

	*reps = 1;
	for (uint32_t p = 1; 2 * p <= m && p <= SEQ_MAX_PERIOD; p++) {
		uint32_t i = p, full, len;

		while (i < m && sites[node_site[k + i]].key == sites[node_site[k + i - p]].key)
			i++;
		full = i / p;
		len = p + (m - full * p);
		if (full >= 2 && len < best_len) {
			best = p;
			best_len = len;
			*reps = full;
		}
	}
	return best;
}

/* Sequence @mg, members k..: its benefit added to *sum; with conditional reads and other
 * problems among them, the others' alone. */
static int seq_benefit(const struct ffm_graph *g, const uint8_t *node_prob, size_t k,
		       const struct ffm_group *mg, uint64_t *sum)
{
	uint32_t *sel, m = 0, n_cond = 0;
	uint64_t b;
	int err;

	for (uint32_t j = 0; j < mg->members; j++)
		n_cond += (node_prob[k + j] & AN_NODE_COND) != 0;
	if (!n_cond || n_cond == mg->members) {
		*sum += mg->benefit_ns;
		return 0;
	}
	sel = malloc(mg->members * sizeof(*sel));
	if (!sel)
		return -ENOMEM;
	for (uint32_t j = 0; j < mg->members; j++)
		if (!(node_prob[k + j] & AN_NODE_COND))
			sel[m++] = (uint32_t)ffm_graph__problem_node(g, k + j);
	err = ffm_model__estimate(g, sel, m, NULL, &b);
	free(sel);
	if (!err)
		*sum += b;
	return err;
}

/* Sequence patterns: model sequences whose members repeat the same sites in the same order. */
static int make_seq_groups(const struct an_group_in *in, const struct ffm_group *mg, size_t n_mg,
			   struct ffm_analysis_result *res, struct an_seqs *seqs)
{
	const uint32_t *node_site = in->model->nodes.site;
	const uint8_t *node_prob = in->model->nodes.prob;
	struct oatab pat = OATAB_U32_INIT;
	size_t cap = 0, k = 0;
	int err = 0;

	if (in->keep_seqs) {
		seqs->v = calloc(n_mg ? n_mg : 1, sizeof(*seqs->v));
		if (!seqs->v)
			return -ENOMEM;
		seqs->n = n_mg;
	}
	for (size_t i = 0; i < n_mg; i++) {
		uint32_t reps, per = seq_period(res->sites, node_site, k, mg[i].members, &reps);
		/* the pattern: one period and the tail, or every member */
		uint32_t skip = per ? per * (reps - 1) : 0, n_pat = mg[i].members - skip;
		uint64_t h = FFM_FNV1A_INIT;
		struct ffm_an_group *gr;
		uint32_t pi;

		/* Members are the problem nodes k .. k + members - 1 (sequences are slices). */
		if (per) /* a pattern that does not repeat keeps the key it always had */
			h = ffm_fnv1a(h, &per, sizeof(per));
		for (uint32_t m = 0; m < n_pat; m++)
			h = ffm_fnv1a(h, &res->sites[node_site[k + (m < per ? m : m + skip)]].key,
				      sizeof(uint64_t));
		h = h ? h : 1;
		pi = oatab_get_u32(&pat, h);
		if (pi == UINT32_MAX) {
			if (ffm_grow((void **)&res->groups, &cap, res->n_groups + 1,
				     sizeof(*res->groups))) {
				err = -ENOMEM;
				goto out;
			}
			pi = (uint32_t)res->n_groups++;
			gr = &res->groups[pi];
			memset(gr, 0, sizeof(*gr));
			gr->key = h;
			gr->site = node_site[k];
			gr->n_members = n_pat;
			gr->period = per;
			gr->repeats = reps;
			gr->seq_sites = malloc(n_pat * sizeof(*gr->seq_sites));
			err = gr->seq_sites ? oatab_put_u32(&pat, h, pi) : -ENOMEM;
			if (err)
				goto out;
			for (uint32_t m = 0; m < n_pat; m++)
				gr->seq_sites[m] = node_site[k + (m < per ? m : m + skip)];
		}
		gr = &res->groups[pi];
		gr->occurrences++;
		gr->problems |= mg[i].problems;
		gr->wait_ns += mg[i].wait_ns;
		for (uint32_t m = 0; m < mg[i].members; m++)
			group_add_member(res->sites, gr, node_site[k + m], node_prob[k + m]);
		err = seq_benefit(in->g, node_prob, k, &mg[i], &gr->benefit_ns);
		if (err)
			goto out;
		if (seqs->v)
			seqs->v[i] = (struct seq_ref){ .g = mg[i], .pattern = pi, .period = per,
						       .reps = reps, .first = (uint32_t)k };
		k += mg[i].members;
	}
	if (seqs->v) {
		seqs->pattern_key = malloc((res->n_groups ? res->n_groups : 1) * sizeof(uint64_t));
		if (!seqs->pattern_key) {
			err = -ENOMEM;
			goto out;
		}
		for (size_t i = 0; i < res->n_groups; i++)
			seqs->pattern_key[i] = res->groups[i].key;
	}
out:
	oatab_free(&pat);
	return err;
}

int an_group(const struct an_group_in *in, struct ffm_analysis_result *res, struct an_seqs *seqs)
{
	struct ffm_group *mg = NULL;
	size_t n_mg = 0;
	int err;

	if (in->grouping == FFM_GROUP_SEQUENCE) {
		err = ffm_model__group(in->g, FFM_GROUP_SEQUENCE, &mg, &n_mg);
		if (!err)
			err = make_seq_groups(in, mg, n_mg, res, seqs);
	} else if (in->grouping == FFM_GROUP_FOLD) {
		err = ffm_model__group(in->g, FFM_GROUP_FOLD, &mg, &n_mg);
		if (!err)
			err = make_fold_groups(in, mg, n_mg, res);
	} else {
		err = make_line_groups(in, res);
	}
	free(mg);
	return err;
}
