/* SPDX-License-Identifier: MIT */
/*
 * Several analyses into one: the nodes of a job (ffm_an_merge: problems by call-site identity,
 * per-API sums, load imbalance) and two jobs of a key (ffm_an_compare: predicted benefit against
 * measured change, per call site).
 */
#include <errno.h>

#include "analysis/analysis_int.h"

static int cmp_mgroup(const void *x, const void *y)
{
	const struct ffm_an_mgroup *a = x, *b = y;

	if (a->g.conditional != b->g.conditional) /* as sort.c: conditional reads last */
		return a->g.conditional ? 1 : -1;
	if (a->g.benefit_ns != b->g.benefit_ns)
		return a->g.benefit_ns < b->g.benefit_ns ? 1 : -1;
	if (a->g.wait_ns != b->g.wait_ns)
		return a->g.wait_ns < b->g.wait_ns ? 1 : -1;
	return a->g.key < b->g.key ? -1 : a->g.key > b->g.key;
}

static double imbalance(const uint64_t *v, size_t n)
{
	uint64_t max = 0;
	double sum = 0;

	if (n < 2)
		return -1;
	for (size_t i = 0; i < n; i++) {
		sum += (double)v[i];
		if (v[i] > max)
			max = v[i];
	}
	return sum > 0 ? (double)max / (sum / n) - 1 : 0;
}

/* Node @r's data-quality counts into @m's. */
static void merge_quality(struct ffm_an_merged *m, const struct ffm_analysis_result *r)
{
	for (int d = 0; d < FFM_DROP__MAX; d++)
		m->q.drops[d] += r->q.drops[d];
	m->q.incomplete_runs += r->q.incomplete_runs;
	if (r->q.failed_runs && !m->q.failed_runs)
		m->q.failed_status = r->q.failed_status;
	m->q.failed_runs += r->q.failed_runs;
	m->q.partial_syncs += r->q.partial_syncs;
	m->q.withheld_syncs += r->q.withheld_syncs;
	m->q.site_misplaced_syncs += r->q.site_misplaced_syncs;
	m->q.divergent_sites += r->q.divergent_sites;
	m->q.unmatched_sites += r->q.unmatched_sites;
	m->q.unclassified_syncs += r->q.unclassified_syncs;
	m->q.unclassified_wait_ns += r->q.unclassified_wait_ns;
	if (r->q.stream_busy_ns > m->q.stream_busy_ns) {
		m->q.stream_busy_ns = r->q.stream_busy_ns;
		m->q.stream_head_ns = r->q.stream_head_ns;
		m->q.stream_tail_ns = r->q.stream_tail_ns;
	}
	m->q.stream_capped |= r->q.stream_capped;
	m->q.read_lib_cpu_ns += r->q.read_lib_cpu_ns;
	m->q.hidden_wait_ns += r->q.hidden_wait_ns;
	m->q.hidden_removed_ns += r->q.hidden_removed_ns;
	m->q.gpu_idle_syncs += r->q.gpu_idle_syncs;
	m->q.node_model |= r->q.node_model;
	m->q.priced_calls += r->q.priced_calls;
	m->q.priced_deleted_ns += r->q.priced_deleted_ns;
	m->q.unpriced_calls += r->q.unpriced_calls;
	m->q.baseline_runs += r->q.baseline_runs; /* each node's own runs */
	m->q.dup_trimmed_ns += r->q.dup_trimmed_ns;
	m->q.dup_added_ns += r->q.dup_added_ns;
	if (r->q.dup_price_runs > m->q.dup_price_runs)
		m->q.dup_price_runs = r->q.dup_price_runs;
}

/* Node @ni's groups into @m's, by key. */
static int merge_groups(struct ffm_an_merged *m, const struct ffm_analysis_result *r, size_t ni,
			size_t *cap)
{
	for (size_t i = 0; i < r->n_groups; i++) {
		const struct ffm_an_group *g = &r->groups[i];
		struct ffm_an_mgroup *mg = NULL;

		for (size_t j = 0; j < m->n_groups; j++)
			if (m->groups[j].g.key == g->key) {
				mg = &m->groups[j];
				break;
			}
		if (!mg) {
			if (FFM_GROW(m->groups, *cap, m->n_groups + 1))
				return -ENOMEM;
			mg = &m->groups[m->n_groups++];
			mg->g = *g;
			mg->node = ni;
			mg->nodes = 1;
			continue;
		}
		mg->nodes++;
		mg->g.problems |= g->problems;
		mg->g.count += g->count;
		mg->g.occurrences += g->occurrences;
		for (int t = 0; t < FFM_PROBLEM__MAX; t++)
			mg->g.n_type[t] += g->n_type[t];
		mg->g.wait_ns += g->wait_ns;
		mg->g.benefit_ns += g->benefit_ns;
		mg->g.partial |= g->partial;
		mg->g.divergent |= g->divergent;
		mg->g.conditional &= g->conditional;
		an_group_coverage(&mg->g, g->coverage_known, g->coverage);
	}
	return 0;
}

/* Node @r's driver functions into @m's, by name. */
static int merge_apis(struct ffm_an_merged *m, const struct ffm_analysis_result *r, size_t *cap)
{
	for (size_t i = 0; i < r->n_apis; i++) {
		const struct ffm_an_api *a = &r->apis[i];
		struct ffm_an_api *ma = NULL;

		if (!a->calls && !a->problems)
			continue;
		for (size_t j = 0; j < m->n_apis; j++)
			if (!strcmp(m->apis[j].name, a->name)) {
				ma = &m->apis[j];
				break;
			}
		if (!ma) {
			if (FFM_GROW(m->apis, *cap, m->n_apis + 1))
				return -ENOMEM;
			ma = &m->apis[m->n_apis++];
			ma->api = a->api;
			ma->name = a->name;
		}
		ma->calls += a->calls;
		ma->dur_ns += a->dur_ns;
		ma->wait_ns += a->wait_ns;
		ma->benefit_ns += a->benefit_ns;
		ma->problems += a->problems;
	}
	return 0;
}

int ffm_an_merge(const struct ffm_analysis_result *const *res, size_t nr, struct ffm_an_merged *m)
{
	uint64_t *node_rec = calloc(nr + 1, sizeof(*node_rec)), *proc_rec = NULL;
	size_t cap_groups = 0, cap_apis = 0;
	int err = 0;

	memset(m, 0, sizeof(*m));
	if (!node_rec)
		return -ENOMEM;
	for (size_t ni = 0; ni < nr; ni++) {
		const struct ffm_analysis_result *r = res[ni];

		node_rec[ni] = r->totals.total_ns;
		m->rec_ns += r->totals.total_ns;
		m->wall_sum_ns += r->wall_ns;
		if (r->wall_ns > m->wall_max_ns)
			m->wall_max_ns = r->wall_ns;
		m->have_problems |= r->have_problems;
		m->n_procs += r->n_procs;
		for (size_t i = 0; i < r->n_runs; i++)
			if (r->runs[i].ended)
				m->stages_done |= 1u << r->runs[i].stage;
		merge_quality(m, r);
		err = merge_groups(m, r, ni, &cap_groups);
		if (!err)
			err = merge_apis(m, r, &cap_apis);
		if (err)
			goto out;
	}
	/* NULL when there is nothing to merge: qsort(NULL, 0) is UB */
	if (m->n_groups)
		qsort(m->groups, m->n_groups, sizeof(*m->groups), cmp_mgroup);
	if (m->n_apis)
		qsort(m->apis, m->n_apis, sizeof(*m->apis), an_cmp_api);
	m->imbalance = imbalance(node_rec, nr);
	proc_rec = calloc(m->n_procs + 1, sizeof(*proc_rec));
	if (!proc_rec) {
		err = -ENOMEM;
		goto out;
	}
	{
		size_t k = 0;

		for (size_t ni = 0; ni < nr; ni++) {
			const struct ffm_analysis_result *r = res[ni];

			for (size_t i = 0; i < r->n_procs; i++)
				if (r->procs[i].threads) /* processes that used the driver */
					proc_rec[k++] = r->procs[i].benefit_ns;
		}
		m->proc_imbalance = imbalance(proc_rec, k);
	}
out:
	free(node_rec);
	free(proc_rec);
	return err;
}

void ffm_an_merged_free(struct ffm_an_merged *m)
{
	free(m->groups);
	free(m->apis);
}

/* ---- two jobs ------------------------------------------------------------------------------- */

static int cmp_row(const void *x, const void *y)
{
	const struct ffm_an_diff_row *a = x, *b = y;

	if (a->predicted_ns != b->predicted_ns)
		return a->predicted_ns < b->predicted_ns ? 1 : -1;
	if (a->before_ns != b->before_ns)
		return a->before_ns < b->before_ns ? 1 : -1;
	return a->key < b->key ? -1 : a->key > b->key;
}

struct rows {
	struct ffm_an_diff_row *v;
	size_t n, cap;
	struct oatab of; /* site key -> row */
};

static struct ffm_an_diff_row *row_of(struct rows *rs, const struct ffm_an_site *x)
{
	uint32_t i = oatab_get_u32(&rs->of, x->key);
	struct ffm_an_diff_row *r;

	if (i != UINT32_MAX)
		return &rs->v[i];
	if (ffm_grow((void **)&rs->v, &rs->cap, rs->n + 1, sizeof(*rs->v)) ||
	    oatab_put_u32(&rs->of, x->key, (uint32_t)rs->n))
		return NULL;
	r = &rs->v[rs->n++];
	*r = (struct ffm_an_diff_row){ .key = x->key, .site = x };
	return r;
}

/* One side's measured time per site: stage 2 measures time in the calls, stage 1 time waited. */
static int add_times(struct rows *rs, const struct ffm_analysis_result *const *m, size_t n,
		     bool after, int stage)
{
	for (size_t i = 0; i < n; i++) {
		for (size_t k = 0; k < m[i]->n_sites; k++) {
			const struct ffm_an_site *x = &m[i]->sites[k];
			struct ffm_an_diff_row *r;

			if (!x->count)
				continue;
			r = row_of(rs, x);
			if (!r)
				return -ENOMEM;
			*(after ? &r->after_ns : &r->before_ns) += stage == 2 ? x->dur_ns : x->wait_ns;
			*(after ? &r->n_after : &r->n_before) += x->count;
		}
	}
	return 0;
}

int ffm_an_compare(const struct ffm_analysis_result *const *pred,
		   const struct ffm_analysis_result *const *before, size_t nb,
		   const struct ffm_analysis_result *const *after, size_t na, int stage,
		   struct ffm_an_diff_row **rows, size_t *n)
{
	struct rows rs = { .of = OATAB_U32_INIT };
	int err = 0;

	for (size_t i = 0; i < nb && !err; i++) {
		for (size_t k = 0; k < pred[i]->n_sites; k++) {
			const struct ffm_an_site *x = &pred[i]->sites[k];
			struct ffm_an_diff_row *r;

			if (!x->benefit_ns)
				continue;
			r = row_of(&rs, x);
			if (!r) {
				err = -ENOMEM;
				break;
			}
			r->predicted_ns += x->benefit_ns;
		}
	}
	if (!err)
		err = add_times(&rs, before, nb, false, stage);
	if (!err)
		err = add_times(&rs, after, na, true, stage);
	oatab_free(&rs.of);
	if (err) {
		free(rs.v);
		return err;
	}
	if (rs.n) /* NULL when neither job has a row: qsort(NULL, 0) is UB */
		qsort(rs.v, rs.n, sizeof(*rs.v), cmp_row);
	*rows = rs.v;
	*n = rs.n;
	return 0;
}
