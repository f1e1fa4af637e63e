/* SPDX-License-Identifier: MIT */
/*
 * The model's results: per-problem-node statistics, the point/fold/sequence groupings, the
 * per-API benefits, the evidence (first uses, first transfers) and the sites' final order.
 */
#include <errno.h>

#include "analysis/analysis_int.h"

static int cmp_group(const void *x, const void *y)
{
	const struct ffm_an_group *a = x, *b = y;

	if (a->benefit_ns != b->benefit_ns)
		return a->benefit_ns < b->benefit_ns ? 1 : -1;
	if (a->wait_ns != b->wait_ns)
		return a->wait_ns < b->wait_ns ? 1 : -1;
	return a->key < b->key ? -1 : a->key > b->key;
}

static int cmp_site(const void *x, const void *y)
{
	const struct ffm_an_site *a = x, *b = y;

	if (a->wait_ns != b->wait_ns)
		return a->wait_ns < b->wait_ns ? 1 : -1;
	if (a->dur_ns != b->dur_ns)
		return a->dur_ns < b->dur_ns ? 1 : -1;
	return a->key < b->key ? -1 : a->key > b->key;
}

int an_cmp_api(const void *x, const void *y)
{
	const struct ffm_an_api *a = x, *b = y;

	if (a->wait_ns != b->wait_ns)
		return a->wait_ns < b->wait_ns ? 1 : -1;
	if (a->dur_ns != b->dur_ns)
		return a->dur_ns < b->dur_ns ? 1 : -1;
	return strcmp(a->name, b->name);
}

static uint32_t site_of_node(struct ffm_analysis *a, const struct ffm_node *n)
{
	uint32_t i = oatab_get_u32(&a->site_of, n->stack_id);

	return i == UINT32_MAX ? 0 : i;
}

/* In the per-node problem array: the node is the sync half of a split duplicate (FFM_EVENT_SPLIT),
 * a second problem of a call already counted. */
#define NODE_SPLIT 0x80u

/* @prob: the node's problem type, with NODE_SPLIT */
static void group_add_member(struct ffm_analysis *a, struct ffm_an_group *gr, uint32_t site,
			     unsigned prob)
{
	const struct ffm_an_site *x = &a->res.sites[site];

	gr->count += !(prob & NODE_SPLIT); /* calls, not problems */
	gr->n_type[prob & ~NODE_SPLIT]++;
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

/* Folded-function groups from the model's; member statistics from the problem nodes. */
static int make_fold_groups(struct ffm_analysis *a, const struct ffm_group *mg, size_t n_mg,
			    const uint32_t *node_site, const uint8_t *node_prob)
{
	struct ffm_analysis_result *res = &a->res;
	struct oatab idx = OATAB_U32_INIT;
	int err = 0;

	res->groups = calloc(n_mg ? n_mg : 1, sizeof(*res->groups));
	if (!res->groups)
		return -ENOMEM;
	res->n_groups = n_mg;
	for (size_t i = 0; i < n_mg; i++) {
		struct ffm_an_group *gr = &res->groups[i];
		struct ffm_node n;

		err = ffm_graph__node(a->g, mg[i].first_node, &n);
		if (err)
			goto out;
		gr->site = site_of_node(a, &n);
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
			group_add_member(a, &res->groups[gi], node_site[k], node_prob[k]);
	}
	for (size_t i = 0; i < n_mg; i++)
		res->groups[i].occurrences = res->groups[i].count;
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
static uint64_t line_key(const struct ffm_an_site *x)
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
static void line_group_site(struct ffm_analysis *a, struct ffm_an_group *gr)
{
	const struct ffm_an_site *sites = a->res.sites;
	unsigned main = ffm_an_main_problem(gr->n_type);

	for (uint32_t m = 0; m < gr->n_members; m++) {
		uint32_t si = gr->seq_sites[m];
		bool fits = ffm_an_site_problem(&sites[si]) == main;
		bool cur = ffm_an_site_problem(&sites[gr->site]) == main;

		if ((fits && !cur) || (fits == cur && sites[si].wait_ns > sites[gr->site].wait_ns))
			gr->site = si;
	}
}

/*
 * The benefit of fixing each bucket's problems and nothing else: a problem node goes to the
 * bucket of its site (@site_bucket, UINT32_MAX: none); out[b] gets the model over bucket b's
 * nodes, n[b] (optional) how many there are. The API and line groupings' benefits.
 */
static int bucket_benefits(struct ffm_analysis *a, const uint32_t *node_site,
			   const uint32_t *site_bucket, size_t nb, uint64_t *out, uint32_t *n)
{
	struct ffm_analysis_result *res = &a->res;
	uint32_t *off = calloc(nb + 1, sizeof(*off)), *nodes = NULL;
	int err = 0;

	if (!off)
		return -ENOMEM;
	for (size_t k = 0; k < res->problem_nodes; k++) {
		uint32_t b = site_bucket[node_site[k]];

		if (b != UINT32_MAX)
			off[b + 1]++;
	}
	for (size_t b = 0; b < nb; b++)
		off[b + 1] += off[b];
	nodes = malloc((off[nb] + 1) * sizeof(*nodes));
	if (!nodes) {
		free(off);
		return -ENOMEM;
	}
	for (size_t k = 0; k < res->problem_nodes; k++) {
		uint32_t b = site_bucket[node_site[k]];

		if (b != UINT32_MAX)
			nodes[off[b]++] = (uint32_t)ffm_graph__problem_node(a->g, k);
	}
	/* off[b] now ends bucket b, which starts where bucket b - 1 ends; nodes stay sorted */
	for (size_t b = 0, start = 0; b < nb && !err; start = off[b], b++) {
		if (n)
			n[b] = off[b] - (uint32_t)start;
		err = ffm_model__estimate(a->g, nodes + start, off[b] - start, NULL, &out[b]);
	}
	free(off);
	free(nodes);
	return err;
}

/* A line of several sites is worth the model over all of their problems at once. */
static int line_benefits(struct ffm_analysis *a, uint32_t *site_group, const uint32_t *node_site)
{
	struct ffm_analysis_result *res = &a->res;
	uint64_t *ben = malloc((res->n_groups + 1) * sizeof(*ben));
	int err;

	if (!ben)
		return -ENOMEM;
	for (size_t si = 0; si < res->n_sites; si++) /* single-site lines keep their point benefit */
		if (site_group[si] != UINT32_MAX && res->groups[site_group[si]].n_members < 2)
			site_group[si] = UINT32_MAX;
	err = bucket_benefits(a, node_site, site_group, res->n_groups, ben, NULL);
	for (size_t i = 0; !err && i < res->n_groups; i++)
		if (res->groups[i].n_members > 1)
			res->groups[i].benefit_ns = ben[i];
	free(ben);
	return err;
}

static int make_line_groups(struct ffm_analysis *a, const struct ffm_group *pg, size_t n_pg,
			    const uint32_t *node_site, const uint8_t *node_prob)
{
	struct ffm_analysis_result *res = &a->res;
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
		uint32_t si = oatab_get_u32(&a->site_of, pg[i].key), gi, *ms;
		struct ffm_an_group *gr;
		uint64_t key;
		bool ins;

		if (si == UINT32_MAX)
			continue;
		key = line_key(&res->sites[si]);
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
			group_add_member(a, &res->groups[gi], node_site[k], node_prob[k]);
	}
	err = line_benefits(a, site_group, node_site);
	for (size_t i = 0; !err && i < res->n_groups; i++) {
		struct ffm_an_group *gr = &res->groups[i];

		gr->occurrences = gr->count;
		line_group_site(a, gr);
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

/* Sequence patterns: model sequences whose members repeat the same sites in the same order. */
static int make_seq_groups(struct ffm_analysis *a, const struct ffm_group *mg, size_t n_mg,
			   const uint32_t *node_site, const uint8_t *node_prob)
{
	struct ffm_analysis_result *res = &a->res;
	struct oatab pat = OATAB_U32_INIT;
	size_t cap = 0, k = 0;
	int err = 0;

	if (a->o.keep_graph) {
		a->seqs = calloc(n_mg ? n_mg : 1, sizeof(*a->seqs));
		if (!a->seqs)
			return -ENOMEM;
		a->n_seqs = n_mg;
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
			if (ffm_grow((void **)&res->groups, &cap, res->n_groups + 1, sizeof(*res->groups))) {
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
		gr->benefit_ns += mg[i].benefit_ns;
		for (uint32_t m = 0; m < mg[i].members; m++)
			group_add_member(a, gr, node_site[k + m], node_prob[k + m]);
		if (a->seqs)
			a->seqs[i] = (struct seq_ref){ .g = mg[i], .pattern = pi, .period = per,
						       .reps = reps, .first = (uint32_t)k };
		k += mg[i].members;
	}
	if (a->seqs) {
		a->pattern_key = malloc((res->n_groups ? res->n_groups : 1) * sizeof(uint64_t));
		if (!a->pattern_key) {
			err = -ENOMEM;
			goto out;
		}
		for (size_t i = 0; i < res->n_groups; i++)
			a->pattern_key[i] = res->groups[i].key;
	}
out:
	oatab_free(&pat);
	return err;
}

/* Per API: the benefit of fixing all of its problems, nothing else. */
static int api_benefits(struct ffm_analysis *a, const uint32_t *node_site)
{
	struct ffm_analysis_result *res = &a->res;
	uint32_t *site_api = malloc((res->n_sites + 1) * sizeof(*site_api));
	uint32_t *cnt = malloc((res->n_apis + 1) * sizeof(*cnt));
	uint64_t *ben = malloc((res->n_apis + 1) * sizeof(*ben));
	int err = -ENOMEM;

	if (site_api && cnt && ben) {
		for (size_t si = 0; si < res->n_sites; si++)
			site_api[si] = oatab_get_u32(&a->api_of, res->sites[si].api);
		err = bucket_benefits(a, node_site, site_api, res->n_apis, ben, cnt);
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

static int cmp_busy(const void *x, const void *y)
{
	const struct busy *a = x, *b = y;

	if (a->stream != b->stream)
		return a->stream < b->stream ? -1 : 1;
	return a->start < b->start ? -1 : a->start > b->start;
}

/* The union of a->busy's intervals per stream; the largest one, with in *first the start of
 * that stream's first interval and in *last its latest-ending one. */
static uint64_t busiest_stream(struct ffm_analysis *a, uint64_t *first, struct busy *last)
{
	uint64_t best = 0, sum = 0, cov_end = 0, start = 0;
	struct busy end = { 0 };

	*first = 0;
	*last = end;
	if (!a->n_busy)
		return 0;
	qsort(a->busy, a->n_busy, sizeof(*a->busy), cmp_busy);
	for (size_t i = 0; i <= a->n_busy; i++) {
		const struct busy *b = i < a->n_busy ? &a->busy[i] : NULL;

		if (i && (!b || b->stream != a->busy[i - 1].stream)) {
			if (sum > best) {
				best = sum;
				*first = start;
				*last = end;
			}
			sum = cov_end = 0;
		}
		if (!b)
			break;
		if (!sum)
			start = b->start;
		if (b->end > cov_end) {
			sum += b->end - (b->start > cov_end ? b->start : cov_end);
			cov_end = b->end;
			end = *b;
		}
	}
	return best;
}

/*
 * The part of the run before the busiest stream's first work that no fix can take away: the
 * time from the run's start to @first, less every wait that ended by then (a removed one could
 * bring that work forward; threads' waits are added up, which only makes this smaller).
 */
static uint64_t head_before(const struct ffm_analysis *a, uint64_t first)
{
	uint64_t head, waits = 0;

	if (!first || first <= a->run_start_ns || !a->run_start_ns)
		return 0;
	head = first - a->run_start_ns;
	for (size_t i = 0; i < a->n_ev; i++) {
		const struct ffm_event *e = &a->ev[i];

		if (e->wait_ns && e->start_ns + e->dur_ns <= first)
			waits += e->wait_ns;
	}
	return head > waits ? head - waits : 0;
}

/*
 * The part of the run after the busiest stream's last work that no fix can take away. When
 * that work ended with a wait that every fix keeps (@last: the thread goes on with the
 * stream's results), its thread's time from there to the run's end comes after the stream's
 * work in the fixed program too, less what a fix removes in it (its waits, the CPU time of
 * deleted calls). That holds while the thread's process is the run's last to end and no other
 * thread calls the driver after the wait. Mostly the process's exit: after threads sharing
 * the legacy stream read their results, the driver's teardown took 12.6 ms of a 1.07 s run on
 * the H100, most of what was left "recoverable" for a fix that saves nothing. Not seen: a
 * thread that computes without calling the driver after the wait and is joined at the exit,
 * whose work a fix of its earlier syncs could bring forward.
 */
static uint64_t tail_after(struct ffm_analysis *a, const struct busy *last)
{
	const struct ffm_an_proc *p = an_proc_of(&a->res, last->tgid);
	uint64_t tail, less = 0;

	if (!last->required || !p || p->end_ns < a->run_end_ns || p->end_ns <= last->end)
		return 0;
	/* another thread's latest call, the launches the model leaves out included */
	if (a->late.end[a->late.tid[0] == last->tid] > last->end)
		return 0;
	tail = p->end_ns - last->end;
	for (size_t i = 0; i < a->n_ev; i++) {
		const struct ffm_event *e = &a->ev[i];

		if (e->start_ns + e->dur_ns > last->end)
			less += e->wait_ns + e->removed_ns;
	}
	return tail > less ? tail - less : 0;
}

static void cap_at(uint64_t *v, uint64_t cap, bool *capped)
{
	if (*v > cap) {
		*v = cap;
		*capped = true;
	}
}

/*
 * No fix on the CPU side makes a stream's work finish sooner: the run lasts at least as long as
 * its busiest stream was busy, plus the CPU work before that stream's first work and after its
 * last (head_before, tail_after), so no benefit exceeds wall - all three. The waits on a
 * stream bound its busy time from below (the stream's work ran while the CPU waited for it);
 * threads sharing the legacy stream whose kernels run one after the other leave that bound
 * near the wall time, and removing their syncs saves nothing (measured on the H100: 0.001 s
 * of 0.8 s). The head counts: there, 0.3 s of a 1.08 s profiled run set up CUDA and the
 * buffers before the first kernel, and the cap without it left 0.27 s "recoverable" (0.019 s
 * with it; 0.004 s with the tail).
 */
static void apply_stream_bound(struct ffm_analysis *a)
{
	struct ffm_analysis_result *res = &a->res;
	struct ffm_an_quality *q = &res->q;
	uint64_t cap, first, floor;
	struct busy last;
	bool sums = false;

	q->stream_busy_ns = busiest_stream(a, &first, &last);
	free(a->busy);
	a->busy = NULL;
	a->n_busy = a->cap_busy = 0;
	if (!q->stream_busy_ns)
		return;
	q->stream_head_ns = head_before(a, first);
	q->stream_tail_ns = tail_after(a, &last);
	floor = q->stream_busy_ns + q->stream_head_ns + q->stream_tail_ns;
	cap = res->wall_ns > floor ? res->wall_ns - floor : 0;
	/* "GPU-bound" (stream_capped) when the headline or a problem's own benefit was capped:
	 * a sum over threads or sites (a function's, a process's) may reach the cap alone. */
	cap_at(&res->totals.total_ns, cap, &q->stream_capped);
	for (size_t i = 0; i < res->n_sites; i++)
		cap_at(&res->sites[i].benefit_ns, cap, &q->stream_capped);
	for (size_t i = 0; i < res->n_groups; i++)
		cap_at(&res->groups[i].benefit_ns, cap, &sums);
	for (size_t i = 0; i < res->n_apis; i++)
		cap_at(&res->apis[i].benefit_ns, cap, &sums);
	for (size_t i = 0; i < res->n_procs; i++)
		cap_at(&res->procs[i].benefit_ns, cap, &sums);
}

int an_run_model(struct ffm_analysis *a)
{
	struct ffm_analysis_result *res = &a->res;
	struct ffm_group *pg = NULL, *mg = NULL;
	size_t n_pg = 0, n_mg = 0;
	uint64_t *ben = NULL;
	uint32_t *node_site = NULL;
	uint8_t *node_prob = NULL;
	int err;

	res->problem_nodes = ffm_graph__problem_count(a->g);
	res->wall_ns = ffm_graph__wall_ns(a->g);
	ben = malloc((res->problem_nodes + 1) * sizeof(*ben));
	node_site = malloc((res->problem_nodes + 1) * sizeof(*node_site));
	node_prob = malloc(res->problem_nodes + 1);
	if (!ben || !node_site || !node_prob) {
		err = -ENOMEM;
		goto out;
	}
	err = ffm_model__benefit(a->g, ben, &res->totals);
	if (err)
		goto out;

	/* Per problem node: its site, type, thread's process. */
	for (size_t k = 0; k < res->problem_nodes; k++) {
		int64_t ni = ffm_graph__problem_node(a->g, k);
		struct ffm_an_site *x;
		struct ffm_node n;
		uint32_t ti;

		if (ni < 0 || (err = ffm_graph__node(a->g, (size_t)ni, &n)))
			goto out;
		node_site[k] = site_of_node(a, &n);
		node_prob[k] = n.problem;
		if (a->ev[n.event].flags & FFM_EVENT_SPLIT)
			node_prob[k] |= NODE_SPLIT;
		x = &res->sites[node_site[k]];
		x->n_unnecessary += n.problem == FFM_PROBLEM_UNNECESSARY_SYNC;
		x->n_misplaced += n.problem == FFM_PROBLEM_MISPLACED_SYNC;
		x->n_dup += n.problem == FFM_PROBLEM_DUPLICATE_TRANSFER;
		x->n_host_read += n.problem == FFM_PROBLEM_HOST_READ;
		x->n_launch_blocked += n.problem == FFM_PROBLEM_LAUNCH_BLOCKED;
		ti = oatab_get_u32(&a->thr_of, n.tid);
		if (ti != UINT32_MAX) {
			struct ffm_an_proc *p = an_proc_of(res, a->thr[ti].tgid);

			if (p)
				p->benefit_ns += ben[k];
		}
	}
	free(ben); /* 8 bytes a problem: gone before the groupings allocate theirs */
	ben = NULL;

	/* Point groups always: they are the per-site benefits. */
	err = ffm_model__group(a->g, FFM_GROUP_POINT, &pg, &n_pg);
	if (err)
		goto out;
	for (size_t i = 0; i < n_pg; i++) {
		uint32_t si = oatab_get_u32(&a->site_of, pg[i].key);

		if (si != UINT32_MAX)
			res->sites[si].benefit_ns = pg[i].benefit_ns;
	}

	/* Per API: fixing all of its problems, nothing else. */
	err = api_benefits(a, node_site);
	if (err)
		goto out;

	/* The requested grouping. */
	if (a->o.grouping == FFM_GROUP_SEQUENCE) {
		err = ffm_model__group(a->g, FFM_GROUP_SEQUENCE, &mg, &n_mg);
		if (!err)
			err = make_seq_groups(a, mg, n_mg, node_site, node_prob);
	} else {
		if (a->o.grouping == FFM_GROUP_FOLD) {
			err = ffm_model__group(a->g, FFM_GROUP_FOLD, &mg, &n_mg);
			err = err ? err : make_fold_groups(a, mg, n_mg, node_site, node_prob);
		} else {
			err = make_line_groups(a, pg, n_pg, node_site, node_prob);
		}
	}
	if (err)
		goto out;
	apply_stream_bound(a);
	/* Sequence patterns keep creation order until the caller sorts via result(); point and
	 * fold groups are sorted now. The subsequence lookup goes by key, so order is free. */
	if (res->n_groups) /* NULL when there is no group: qsort(NULL, 0) is UB */
		qsort(res->groups, res->n_groups, sizeof(*res->groups), cmp_group);

	/* A process cannot save more than it lasted. */
	for (size_t i = 0; i < res->n_procs; i++) {
		struct ffm_an_proc *p = &res->procs[i];
		uint64_t span = p->end_ns > p->start_ns ? p->end_ns - p->start_ns : res->wall_ns;

		if (p->benefit_ns > span)
			p->benefit_ns = span;
	}
out:
	free(pg);
	free(mg);
	free(ben);
	free(node_site);
	free(node_prob);
	return err;
}

/* First-use and first-transfer locations of the sites with problems. The use is named like a
 * call site: its first frame of the highest ffm_an_frame_rank (the user's line, not a header's). */
struct use_frame {
	struct ffm_analysis *a;
	const char *func, *file;
	uint32_t line;
	int rank;
	bool done;
};

static int on_use_frame(const struct ffm_store_frame *f, uint32_t depth, void *ctx)
{
	struct use_frame *u = ctx;
	int rank = ffm_an_frame_rank(f, u->a->o.src_library);

	if (u->done && rank <= u->rank)
		return 0;
	u->done = true;
	u->rank = rank;
	u->func = an_pool_dup(&u->a->pool, f->demangled ? f->demangled : f->func, "?");
	u->file = an_pool_dup(&u->a->pool, f->file, "");
	u->line = f->line;
	return u->func && u->file ? 0 : -ENOMEM;
}

int an_evidence(struct ffm_analysis *a)
{
	struct ffm_analysis_result *res = &a->res;

	for (size_t i = 0; i < res->n_sites; i++) {
		struct ffm_an_site *x = &res->sites[i];
		struct site_int *si = &a->si[i];
		struct use_frame u = { .a = a };
		int err = 0;

		x->use_delay_ns = an_median_i64(si->delays, si->n_delays);
		if (si->use_frame)
			err = ffm_store__get_frame(a->s, si->use_frame, on_use_frame, &u);
		if ((err >= 0 || err == -ENOENT) && si->use_stack && u.rank < FFM_AN_RANK_USER_LINE)
			err = ffm_store__for_each_frame(a->s, si->use_stack, on_use_frame, &u);
		if (err < 0 && err != -ENOENT)
			return err;
		if (u.done) {
			x->use_function = u.func;
			x->use_file = u.file;
			x->use_line = u.line;
		}
		x->first_xfer_stack = si->first_stack;
		if (si->first_stack) {
			uint32_t fi = oatab_get_u32(&a->site_of, (uint64_t)si->first_stack);

			if (fi == UINT32_MAX) {
				err = an_site_for(a, si->first_stack, x->api, FFM_EV_TRANSFER, &fi);
				if (err)
					return err;
				x = &res->sites[i]; /* site_for may move the array */
			}
			x->first_xfer_site = (int)fi;
		}
		res->q.partial_syncs += x->n_partial;
	}
	return 0;
}

static int cmp_site_idx(const void *x, const void *y, void *arg)
{
	const struct ffm_an_site *s = arg;
	uint32_t i = *(const uint32_t *)x, j = *(const uint32_t *)y;
	int c = cmp_site(&s[i], &s[j]);

	return c ? c : i < j ? -1 : i > j;
}

/* Sort the sites (by time) once every index into them has been handed out, and renumber the
 * references: groups, first transfers, the stack map. The internal per-site state (a->si) is
 * not needed after the scan and stays in the old order. */
int an_sort_sites(struct ffm_analysis *a)
{
	struct ffm_analysis_result *res = &a->res;
	size_t n = res->n_sites;
	struct ffm_an_site *tmp = NULL;
	uint32_t *perm = NULL, *inv = NULL;
	int err = 0;

	if (n < 2)
		return 0;
	tmp = malloc(n * sizeof(*tmp));
	perm = malloc(n * sizeof(*perm));
	inv = malloc(n * sizeof(*inv));
	if (!tmp || !perm || !inv) {
		err = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < n; i++)
		perm[i] = (uint32_t)i;
	qsort_r(perm, n, sizeof(*perm), cmp_site_idx, res->sites);
	memcpy(tmp, res->sites, n * sizeof(*tmp));
	for (size_t i = 0; i < n; i++) {
		res->sites[i] = tmp[perm[i]];
		inv[perm[i]] = (uint32_t)i;
	}
	for (size_t i = 0; i < n; i++)
		if (res->sites[i].first_xfer_site >= 0)
			res->sites[i].first_xfer_site = (int)inv[res->sites[i].first_xfer_site];
	for (size_t i = 0; i < res->n_groups; i++) {
		struct ffm_an_group *gr = &res->groups[i];

		gr->site = inv[gr->site];
		for (uint32_t m = 0; m < gr->n_members; m++)
			gr->seq_sites[m] = inv[gr->seq_sites[m]];
	}
	oatab_free(&a->site_of);
	for (size_t i = 0; i < n && !err; i++)
		err = oatab_put_u32(&a->site_of, (uint64_t)res->sites[i].stack, (uint32_t)i);
out:
	free(tmp);
	free(perm);
	free(inv);
	return err;
}
