// SPDX-License-Identifier: MIT
/*
 * The CPU timeline graph and the expected-benefit model (see ffm_model.h for the contract and
 * the decisions). Nodes are stored as three parallel arrays (structure of arrays, 13 bytes a
 * node) because a 10M-event run has 20-30M nodes and the report must stay under 1 GiB.
 */
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "common/oatab.h"
#include "stages/ffm_model.h"

/* Node bits: type in bits 0-1, then flags, problem in bits 4-6. */
#define NB_TYPE_MASK 0x03u
#define NB_SYNC 0x04u
#define NB_END 0x08u
#define NB_PROB_SHIFT 4
#define NB_PROB_MASK 0x70u
_Static_assert(FFM_PROBLEM__MAX <= 8, "problems fit in 3 node bits");

#define NO_NODE UINT32_MAX
#define FIG5_SLICES 200	  /* at most, to compare threads' savings in time (set_slices) */
#define FIG5_PER_SLICE 20 /* problems of the sparsest busy thread per slice */
#define MAX_ITEMS (UINT32_MAX - 1)

struct ffm_graph {
	const struct ffm_event *ev; /* borrowed */
	size_t n_ev;
	const struct oatab *deleted_of; /* borrowed: ffm_graph_opts */
	uint64_t run_start, run_end;

	size_t n_nodes;
	uint64_t *dur;
	uint32_t *nev;  /* node -> event index or FFM_NO_EVENT */
	uint8_t *bits;

	size_t n_chains;
	struct ffm_chain *chains;

	size_t n_prob;
	uint32_t *prob; /* problematic node indexes, ascending */
	unsigned slices; /* how finely threads' savings are compared in time (set_slices) */
};

static inline unsigned nb_type(uint8_t b)
{
	return b & NB_TYPE_MASK;
}

static inline unsigned nb_prob(uint8_t b)
{
	return (b & NB_PROB_MASK) >> NB_PROB_SHIFT;
}

static inline uint64_t sat_add(uint64_t a, uint64_t b)
{
	return a + b < a ? UINT64_MAX : a + b;
}

static inline uint64_t min_u64(uint64_t a, uint64_t b)
{
	return a < b ? a : b;
}

static bool kind_is_launch(unsigned kind)
{
	return kind == FFM_CALL_LAUNCH || kind == FFM_CALL_TRANSFER || kind == FFM_CALL_MEMSET;
}

/* Problems of a wait (a CWait node), as opposed to the copy of a duplicate transfer. */
static bool prob_is_sync(unsigned p)
{
	return p != FFM_PROBLEM_NONE && p != FFM_PROBLEM_DUPLICATE_TRANSFER &&
	       p != FFM_PROBLEM_TEMP_BUFFER;
}

/* ---- build ---------------------------------------------------------------------------------- */

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	return x < y ? -1 : x > y;
}

static int cmp_ev_start(const void *a, const void *b, void *arg)
{
	const struct ffm_event *ev = arg;
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	if (ev[x].start_ns != ev[y].start_ns)
		return ev[x].start_ns < ev[y].start_ns ? -1 : 1;
	return x < y ? -1 : x > y; /* stable: input order breaks ties */
}

/* Sorts one chain's event indexes by start time, ties in index order (o[] comes ascending).
 * LSD radix sort over (start, index) pairs, skipping the bytes on which all starts agree (most
 * of a u64 nanosecond clock); O(m) time and 32 bytes per event of scratch, freed before the
 * nodes are allocated. Without the scratch memory, qsort_r does it in place. */
struct kv {
	uint64_t k;
	uint32_t i;
	uint32_t _pad;
};

static void sort_chain(const struct ffm_event *ev, uint32_t *o, size_t m)
{
	struct kv *a = malloc(m * sizeof(*a)), *b = malloc(m * sizeof(*b));
	size_t(*hist)[256] = calloc(8, sizeof(*hist));

	if (!a || !b || !hist) {
		free(a);
		free(b);
		free(hist);
		qsort_r(o, m, sizeof(*o), cmp_ev_start, (void *)ev);
		return;
	}
	for (size_t k = 0; k < m; k++) {
		uint64_t key = ev[o[k]].start_ns;
		a[k].k = key;
		a[k].i = o[k];
		for (unsigned d = 0; d < 8; d++)
			hist[d][(key >> (8 * d)) & 0xff]++;
	}
	for (unsigned d = 0; d < 8; d++) {
		size_t sum = 0;
		struct kv *t;

		if (hist[d][(a[0].k >> (8 * d)) & 0xff] == m)
			continue; /* every key has the same byte here */
		for (unsigned v = 0; v < 256; v++) {
			size_t c = hist[d][v];
			hist[d][v] = sum;
			sum += c;
		}
		for (size_t k = 0; k < m; k++)
			b[hist[d][(a[k].k >> (8 * d)) & 0xff]++] = a[k];
		t = a;
		a = b;
		b = t;
	}
	for (size_t k = 0; k < m; k++)
		o[k] = a[k].i;
	free(a);
	free(b);
	free(hist);
}

struct builder {
	struct ffm_graph *g;
	size_t chain_first; /* first node of the chain being emitted */
};

static void emit(struct builder *b, unsigned type, uint64_t dur, uint32_t ev, uint8_t extra)
{
	struct ffm_graph *g = b->g;
	size_t i = g->n_nodes;

	/* Adjacent CPU-work pieces merge: a gap followed by an alloc call is one stretch of CPU
	 * time as far as the GPU is concerned; a problem's piece (a temporary buffer's
	 * allocation) stays a node of its own. */
	if (type == FFM_NODE_CWORK && i > b->chain_first && nb_type(g->bits[i - 1]) == FFM_NODE_CWORK &&
	    !(extra & NB_PROB_MASK) && !(g->bits[i - 1] & NB_PROB_MASK)) {
		g->dur[i - 1] = sat_add(g->dur[i - 1], dur);
		if (ev != FFM_NO_EVENT)
			g->nev[i - 1] = ev;
		return;
	}
	g->dur[i] = dur;
	g->nev[i] = ev;
	g->bits[i] = (uint8_t)(type | extra);
	g->n_nodes++;
}

static void emit_chain(struct builder *b, struct ffm_chain *c, const uint32_t *order)
{
	struct ffm_graph *g = b->g;
	const struct ffm_event *ev = g->ev;
	uint64_t cursor = ev[order[0]].start_ns;
	bool worker;

	b->chain_first = g->n_nodes;
	c->first_node = (uint32_t)g->n_nodes;
	c->start_ns = cursor;
	for (uint32_t k = 0; k < c->n_events; k++) {
		uint32_t idx = order[k];
		const struct ffm_event *e = &ev[idx];
		uint64_t s = e->start_ns, end = sat_add(s, e->dur_ns), wait, pre;
		bool sync_prob = prob_is_sync(e->problem);

		if (s > cursor)
			emit(b, FFM_NODE_CWORK, s - cursor, FFM_NO_EVENT, 0);
		/* Clip to the time not yet accounted for on this thread. */
		if (s < cursor)
			s = cursor;
		if (end < s)
			end = s;
		wait = min_u64(e->wait_ns, end - s);
		pre = end - s - wait;

		if (kind_is_launch(e->kind)) {
			uint8_t p = e->problem == FFM_PROBLEM_DUPLICATE_TRANSFER
					    ? (uint8_t)(e->problem << NB_PROB_SHIFT)
					    : 0;
			emit(b, FFM_NODE_CLAUNCH, pre, idx, p);
		} else if (e->problem == FFM_PROBLEM_TEMP_BUFFER) {
			emit(b, FFM_NODE_CWORK, pre, idx, (uint8_t)(e->problem << NB_PROB_SHIFT));
		} else if (pre) {
			emit(b, FFM_NODE_CWORK, pre, idx, 0);
		}
		if (wait || (e->flags & FFM_EVENT_SYNC) || sync_prob) {
			uint8_t x = 0;

			if ((e->flags & FFM_EVENT_SYNC) || sync_prob)
				x |= NB_SYNC;
			if (sync_prob)
				x |= (uint8_t)(e->problem << NB_PROB_SHIFT);
			emit(b, FFM_NODE_CWAIT, wait, idx, x);
		}
		cursor = end;
	}
	worker = ev[order[c->n_events - 1]].flags & FFM_EVENT_WORKER;
	if (g->run_end > cursor && !worker)
		emit(b, FFM_NODE_CWORK, g->run_end - cursor, FFM_NO_EVENT, 0);
	emit(b, FFM_NODE_CWAIT, 0, FFM_NO_EVENT, NB_SYNC | NB_END);
	c->n_nodes = (uint32_t)(g->n_nodes - c->first_node);
	c->end_ns = worker ? cursor : g->run_end;
}

static int validate(const struct ffm_event *ev, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		if (ev[i].kind >= FFM_CALL__MAX || ev[i].problem >= FFM_PROBLEM__MAX)
			return -EINVAL;
		if (ev[i].problem == FFM_PROBLEM_DUPLICATE_TRANSFER && !kind_is_launch(ev[i].kind))
			return -EINVAL;
	}
	return 0;
}

/* The distinct tids of @ev, sorted (*list, *n_list), and @tids mapping each to its index. */
static int distinct_tids(const struct ffm_event *ev, size_t n, struct oatab *tids, uint32_t **list,
			 size_t *n_list)
{
	uint32_t last_tid = 0, last = UINT32_MAX, *tid_list = NULL;
	size_t n_tids = 0;
	int err = 0;

	for (size_t i = 0; i < n; i++) {
		bool ins;

		if (ev[i].tid == last_tid && last != UINT32_MAX)
			continue;
		last = oatab_get_or_put_u32(tids, ev[i].tid, (uint32_t)n_tids, &ins);
		if (last == UINT32_MAX) {
			err = -ENOMEM;
			goto out;
		}
		last_tid = ev[i].tid;
		if (ins) {
			if ((n_tids & (n_tids - 1)) == 0) {
				uint32_t *t = realloc(tid_list, (n_tids ? n_tids * 2 : 1) * sizeof(*t));
				if (!t) {
					err = -ENOMEM;
					goto out;
				}
				tid_list = t;
			}
			tid_list[n_tids++] = ev[i].tid;
		}
	}
	if (n_tids) {
		qsort(tid_list, n_tids, sizeof(*tid_list), cmp_u32);
		for (size_t t = 0; t < n_tids && !err; t++)
			err = oatab_put_u32(tids, tid_list[t], (uint32_t)t);
	}
out:
	*list = tid_list;
	*n_list = n_tids;
	return err;
}

/*
 * Slices fine enough to tell threads that work one after the other from threads that work side
 * by side, coarse enough that side-by-side threads' problems, which never line up exactly, fall
 * in the same slices: every thread with at least FIG5_PER_SLICE problems has that many per slice
 * on average (a slice of about one loop iteration would credit whichever thread happened to
 * wait once more in it, +50% for two threads in step).
 */
static void set_slices(struct ffm_graph *g)
{
	size_t fewest = SIZE_MAX;

	for (size_t c = 0, k = 0; c < g->n_chains; c++) {
		size_t end = g->chains[c].first_node + g->chains[c].n_nodes, np = 0;

		for (; k < g->n_prob && g->prob[k] < end; k++)
			np++;
		if (np >= FIG5_PER_SLICE && np < fewest)
			fewest = np;
	}
	g->slices = fewest == SIZE_MAX ? 1 : (unsigned)min_u64(fewest / FIG5_PER_SLICE, FIG5_SLICES);
}

/* The run's first and last instants: the events' span, widened to the run's bounds in @opts. */
static void set_run_bounds(struct ffm_graph *g, const struct ffm_event *ev, size_t n,
			   const struct ffm_graph_opts *opts)
{
	uint64_t lo = UINT64_MAX, hi = 0;

	for (size_t i = 0; i < n; i++) {
		uint64_t end = sat_add(ev[i].start_ns, ev[i].dur_ns);
		if (ev[i].start_ns < lo)
			lo = ev[i].start_ns;
		if (end > hi)
			hi = end;
	}
	if (!n) /* no event: the run's own bounds, not 0 to its end (its wall time since boot) */
		lo = hi = opts && opts->run_start_ns ? opts->run_start_ns : 0;
	g->run_start = opts && opts->run_start_ns && opts->run_start_ns < lo ? opts->run_start_ns : lo;
	g->run_end = opts && opts->run_end_ns > hi ? opts->run_end_ns : hi;
}

/* Into @order, the indexes of @ev by chain (@tids maps a tid to its chain in g->chains, whose
 * tid and n_events are set here from @tid_list), then by start within each chain: 0 or
 * -ENOMEM. A counting sort (stable); a chain is sorted only when not already in order. */
static int order_by_chain(struct ffm_graph *g, const struct ffm_event *ev, size_t n,
			  const struct oatab *tids, const uint32_t *tid_list, uint32_t *order)
{
	uint32_t *cnt = calloc(g->n_chains + 1, sizeof(*cnt));
	uint32_t last_tid = 0, last_chain = UINT32_MAX;

	if (!cnt)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		if (last_chain == UINT32_MAX || ev[i].tid != last_tid) {
			last_chain = oatab_get_u32(tids, ev[i].tid);
			last_tid = ev[i].tid;
		}
		cnt[last_chain + 1]++;
	}
	for (size_t t = 0; t < g->n_chains; t++) {
		g->chains[t].tid = tid_list[t];
		g->chains[t].n_events = cnt[t + 1];
		cnt[t + 1] += cnt[t];
	}
	last_chain = UINT32_MAX;
	for (size_t i = 0; i < n; i++) {
		if (last_chain == UINT32_MAX || ev[i].tid != last_tid) {
			last_chain = oatab_get_u32(tids, ev[i].tid);
			last_tid = ev[i].tid;
		}
		order[cnt[last_chain]++] = (uint32_t)i;
	}
	free(cnt);
	for (size_t t = 0, off = 0; t < g->n_chains; off += g->chains[t].n_events, t++) {
		uint32_t *o = order + off;
		size_t m = g->chains[t].n_events;
		bool sorted = true;

		for (size_t k = 1; k < m && sorted; k++)
			sorted = ev[o[k - 1]].start_ns <= ev[o[k]].start_ns;
		if (!sorted)
			sort_chain(ev, o, m);
	}
	return 0;
}

/* The nodes of every chain, from its events in @order: 0, -E2BIG or -ENOMEM. At most 3 per
 * event and 2 per chain: untouched pages of that upper bound cost no memory, and shrink_nodes
 * gives back the rest. */
static int emit_nodes(struct ffm_graph *g, const uint32_t *order)
{
	size_t cap_nodes = 3 * g->n_ev + 2 * g->n_chains;
	struct builder b = { .g = g };

	if (cap_nodes > MAX_ITEMS)
		return -E2BIG;
	g->dur = malloc((cap_nodes ? cap_nodes : 1) * sizeof(*g->dur));
	g->nev = malloc((cap_nodes ? cap_nodes : 1) * sizeof(*g->nev));
	g->bits = malloc(cap_nodes ? cap_nodes : 1);
	if (!g->dur || !g->nev || !g->bits)
		return -ENOMEM;
	for (size_t t = 0, off = 0; t < g->n_chains; off += g->chains[t].n_events, t++)
		emit_chain(&b, &g->chains[t], order + off);
	return 0;
}

/* The node arrays cut to the nodes emitted (kept as they are when realloc fails). */
static void shrink_nodes(struct ffm_graph *g)
{
	size_t cap_nodes = 3 * g->n_ev + 2 * g->n_chains;
	void *p;

	if (g->n_nodes >= cap_nodes || !g->n_nodes)
		return;
	if ((p = realloc(g->dur, g->n_nodes * sizeof(*g->dur))))
		g->dur = p;
	if ((p = realloc(g->nev, g->n_nodes * sizeof(*g->nev))))
		g->nev = p;
	if ((p = realloc(g->bits, g->n_nodes)))
		g->bits = p;
}

/* g->prob: the nodes that carry a problem, in node order: 0 or -ENOMEM. */
static int list_problems(struct ffm_graph *g)
{
	for (size_t i = 0; i < g->n_nodes; i++)
		g->n_prob += nb_prob(g->bits[i]) != FFM_PROBLEM_NONE;
	g->prob = malloc((g->n_prob ? g->n_prob : 1) * sizeof(*g->prob));
	if (!g->prob)
		return -ENOMEM;
	for (size_t i = 0, k = 0; i < g->n_nodes; i++)
		if (nb_prob(g->bits[i]) != FFM_PROBLEM_NONE)
			g->prob[k++] = (uint32_t)i;
	return 0;
}

int ffm_graph__build(const struct ffm_event *ev, size_t n, const struct ffm_graph_opts *opts,
		     struct ffm_graph **ret)
{
	struct ffm_graph *g = NULL;
	struct oatab tids = OATAB_U32_INIT; /* tid -> chain */
	uint32_t *order = NULL, *tid_list = NULL;
	size_t n_tids = 0;
	int err;

	if (!ret || (!ev && n))
		return -EINVAL;
	if (n > MAX_ITEMS / 3)
		return -E2BIG;
	err = validate(ev, n);
	if (err)
		return err;

	g = calloc(1, sizeof(*g));
	if (!g)
		return -ENOMEM;
	g->ev = ev;
	g->n_ev = n;
	g->deleted_of = opts ? opts->deleted_of : NULL;
	set_run_bounds(g, ev, n, opts);

	/* Distinct tids -> chains, in tid order. */
	err = distinct_tids(ev, n, &tids, &tid_list, &n_tids);
	if (err)
		goto out;
	g->n_chains = n_tids;
	g->chains = calloc(n_tids ? n_tids : 1, sizeof(*g->chains));
	order = malloc((n ? n : 1) * sizeof(*order));
	if (!g->chains || !order) {
		err = -ENOMEM;
		goto out;
	}
	err = order_by_chain(g, ev, n, &tids, tid_list, order);
	if (!err)
		err = emit_nodes(g, order);
	if (err)
		goto out;
	free(order);
	order = NULL;
	shrink_nodes(g);
	err = list_problems(g);
	if (err)
		goto out;
	set_slices(g);

	*ret = g;
	g = NULL;
out:
	oatab_free(&tids);
	free(order);
	free(tid_list);
	ffm_graph__free(g);
	return err;
}

struct ffm_graph *ffm_graph__free(struct ffm_graph *g)
{
	if (!g)
		return NULL;
	free(g->dur);
	free(g->nev);
	free(g->bits);
	free(g->chains);
	free(g->prob);
	free(g);
	return NULL;
}

size_t ffm_graph__node_count(const struct ffm_graph *g)
{
	return g ? g->n_nodes : 0;
}

size_t ffm_graph__chain_count(const struct ffm_graph *g)
{
	return g ? g->n_chains : 0;
}

size_t ffm_graph__problem_count(const struct ffm_graph *g)
{
	return g ? g->n_prob : 0;
}

uint64_t ffm_graph__wall_ns(const struct ffm_graph *g)
{
	return g ? g->run_end - g->run_start : 0;
}

int ffm_graph__chain(const struct ffm_graph *g, size_t i, struct ffm_chain *out)
{
	if (!g || !out)
		return -EINVAL;
	if (i >= g->n_chains)
		return -ERANGE;
	*out = g->chains[i];
	return 0;
}

int64_t ffm_graph__problem_node(const struct ffm_graph *g, size_t k)
{
	if (!g)
		return -EINVAL;
	if (k >= g->n_prob)
		return -ERANGE;
	return g->prob[k];
}

/* The chain holding node @node. */static size_t chain_of(const struct ffm_graph *g, uint32_t node)
{
	size_t lo = 0, hi = g->n_chains;

	while (hi - lo > 1) {
		size_t mid = (lo + hi) / 2;
		if (g->chains[mid].first_node <= node)
			lo = mid;
		else
			hi = mid;
	}
	return lo;
}

/* Start of node i: a call's pieces from its own timestamps, a CWork node ends where the next
 * node (never CWork: they merge) starts, END at the run's end. */
static uint64_t node_start(const struct ffm_graph *g, size_t i)
{
	uint8_t b = g->bits[i];
	const struct ffm_event *e;

	if (b & NB_END)
		return g->chains[chain_of(g, (uint32_t)i)].end_ns;
	if (nb_type(b) == FFM_NODE_CWORK) {
		uint64_t next = node_start(g, i + 1);
		return next > g->dur[i] ? next - g->dur[i] : 0;
	}
	e = &g->ev[g->nev[i]];
	if (nb_type(b) == FFM_NODE_CLAUNCH)
		return e->start_ns;
	return sat_add(e->start_ns, e->dur_ns) - g->dur[i]; /* the wait ends the call */
}

int ffm_graph__node(const struct ffm_graph *g, size_t i, struct ffm_node *out)
{
	uint8_t b;
	uint32_t e;

	if (!g || !out)
		return -EINVAL;
	if (i >= g->n_nodes)
		return -ERANGE;
	b = g->bits[i];
	e = g->nev[i];
	memset(out, 0, sizeof(*out));
	out->start_ns = node_start(g, i);
	out->dur_ns = g->dur[i];
	out->event = e;
	out->type = (uint8_t)nb_type(b);
	out->problem = (uint8_t)nb_prob(b);
	out->sync = !!(b & NB_SYNC);
	out->end = !!(b & NB_END);
	if (e != FFM_NO_EVENT) {
		out->stack_id = g->ev[e].stack_id;
		out->first_use_ns = g->ev[e].first_use_ns;
		out->removed_ns = g->ev[e].removed_ns;
		out->tid = g->ev[e].tid;
		out->fold_id = g->ev[e].fold_id;
		out->api_id = g->ev[e].api_id;
	} else {
		out->tid = g->n_chains ? g->chains[chain_of(g, (uint32_t)i)].tid : 0;
	}
	return 0;
}

/* ---- Figure 5 ------------------------------------------------------------------------------ */

/*
 * How per-thread savings become the run's (see "Threads" in ffm_model.h): the run is cut into
 * g->slices equal slices of its wall time; a node's benefit falls in the slice where its call
 * began; per slice the largest thread's benefit counts. One thread: the plain sum.
 */

struct fig5_sum {
	uint64_t sum;	     /* Σ per-node benefits */
	uint64_t wall;	     /* what the run's wall time loses */
	uint64_t max_chain;  /* the largest per-thread sum ... */
	uint32_t max_tid;    /* ... and its thread */
	uint64_t chain_sum;  /* scratch: the chain being walked */
	bool multi;	     /* the nodes lie on more than one chain: the slices below are used */
	uint64_t acc[FIG5_SLICES], best[FIG5_SLICES];
};


static unsigned slice_of(const struct ffm_graph *g, uint32_t node)
{
	uint64_t t = g->nev[node] == FFM_NO_EVENT ? g->run_end : g->ev[g->nev[node]].start_ns;
	uint64_t span = g->run_end - g->run_start + 1;

	t = t > g->run_start ? t - g->run_start : 0;
	return (unsigned)((unsigned __int128)t * g->slices / span) % FIG5_SLICES;
}

/* The chain walked so far is done: fold its slices into the per-slice maxima. */
static void fig5_flush(struct fig5_sum *r, uint32_t tid)
{
	if (r->chain_sum > r->max_chain || !r->max_tid) {
		r->max_chain = r->chain_sum;
		r->max_tid = tid;
	}
	for (unsigned s = 0; r->multi && r->chain_sum && s < FIG5_SLICES; s++) {
		if (r->acc[s] > r->best[s])
			r->best[s] = r->acc[s];
		r->acc[s] = 0;
	}
	r->chain_sum = 0;
}

static void fig5_finish(const struct ffm_graph *g, struct fig5_sum *r, uint32_t tid)
{
	fig5_flush(r, tid);
	r->wall = r->multi ? 0 : r->sum;
	for (unsigned s = 0; r->multi && s < FIG5_SLICES; s++)
		r->wall = sat_add(r->wall, r->best[s]);
	r->wall = min_u64(r->wall, ffm_graph__wall_ns(g));
}

/* Node @i's work that its fix deletes whichever side bounds (ffm_graph_opts.deleted_of). */
static uint64_t deleted_ns(const struct ffm_graph *g, uint32_t i)
{
	uint32_t v;

	if (!g->deleted_of || g->nev[i] == FFM_NO_EVENT)
		return 0;
	v = oatab_get_u32(g->deleted_of, g->nev[i]);
	return v == UINT32_MAX ? 0 : v;
}

/*
 * Runs the algorithm over `nodes` (ascending, all problematic), leaving every other node as it
 * is. The paper writes the new durations into the graph; the only written value a later node
 * reads is NextSync's grown duration, which is the next sync after the removed node: at most one
 * pending "carry" exists at a time, so a register replaces the writes (see ffm_model.h).
 * Walks from distinct unnecessary syncs cover disjoint stretches (each stops at the next sync),
 * so one call is O(nodes).
 */
static void run_fig5(const struct ffm_graph *g, const uint32_t *nodes, size_t n, uint64_t *out,
		     struct fig5_sum *r)
{
	uint32_t carry_to = NO_NODE, chain_end = 0, tid = 0;
	uint64_t carry = 0;
	size_t c = 0;

	/* Sequences and most point groups lie on one thread: no slices to fill. */
	memset(r, 0, offsetof(struct fig5_sum, acc));
	r->multi = n && chain_of(g, nodes[0]) != chain_of(g, nodes[n - 1]);
	if (r->multi)
		memset(r->acc, 0, sizeof(r->acc) + sizeof(r->best));
	for (size_t k = 0; k < n; k++) {
		uint32_t i = nodes[k];
		uint8_t b = g->bits[i];
		uint64_t dur = g->dur[i], est = 0;

		if (i >= chain_end) {
			/* entering another chain */
			if (k)
				fig5_flush(r, tid);
			while (c < g->n_chains && g->chains[c].first_node + g->chains[c].n_nodes <= i)
				c++;
			chain_end = g->chains[c].first_node + g->chains[c].n_nodes;
			tid = g->chains[c].tid;
		}
		if (carry_to == i) {
			dur = sat_add(dur, carry);
			carry_to = NO_NODE;
		}
		switch (nb_prob(b)) {
		case FFM_PROBLEM_UNNECESSARY_SYNC:
		case FFM_PROBLEM_HOST_READ: {
			uint64_t idle = 0, idle_to_submit = 0;
			bool submitted = false;
			uint32_t j = i + 1;
			size_t m = k + 1; /* the next member of the set */

			/* the CPU time deleted with the wait moves the CPU ahead the same way */
			dur = sat_add(dur, g->ev[g->nev[i]].removed_ns);

			/* Every chain ends with a sync (END), so the walk stops inside the chain.
			 * A duplicate transfer fixed in the same set is no CPU time of the fixed
			 * program: it cannot absorb the wait (its time is its own benefit). */
			for (; !(g->bits[j] & NB_SYNC); j++) {
				while (m < n && nodes[m] < j)
					m++;
				if (m < n && nodes[m] == j)
					continue;
				if (nb_type(g->bits[j]) != FFM_NODE_CWAIT)
					idle = sat_add(idle, g->dur[j]);
				if (nb_type(g->bits[j]) == FFM_NODE_CLAUNCH) {
					idle_to_submit = idle;
					submitted = true;
				}
			}
			/* NextSync waited for the GPU: the GPU was busy from the last submission
			 * before it until it returned (ffm_model.h, "GPU-busy CPU time"). */
			if (submitted && !(g->bits[j] & NB_END) && g->dur[j] >= FFM_MODEL_BUSY_WAIT_NS)
				idle = idle_to_submit;
			/* ... and the GPU ran through the stretch before this one: it idles only
			 * until the thread's next submission ("GPU idle after the sync") */
			if (g->ev[g->nev[i]].flags & FFM_EVENT_GPU_IDLE)
				idle = min_u64(idle, g->ev[g->nev[i]].gpu_idle_ns);
			est = min_u64(sat_add(idle, deleted_ns(g, i)), dur);
			if (dur > est) {
				carry_to = j;
				carry = dur - est;
			}
			break;
		}
		case FFM_PROBLEM_MISPLACED_SYNC:
			/* Capped at the wait itself; whatever remains of it stays in the sync. A
			 * shorter wait also returns sooner after the GPU is done (deleted_ns: the
			 * exit latency its mode saves, stages/ffm_price.h rule (d)). */
			est = min_u64(sat_add(g->ev[g->nev[i]].first_use_ns, deleted_ns(g, i)), dur);
			break;
		case FFM_PROBLEM_DUPLICATE_TRANSFER:
			est = dur;
			break;
		case FFM_PROBLEM_TEMP_BUFFER:
			/* the set's deleted calls, wherever they lie (stages/ffm_price.h rule (c)) */
			est = deleted_ns(g, i);
			break;
		default: /* launch blocked: a wait that stays, named but not removed */
			break;
		}
		if (out)
			out[k] = est;
		r->sum = sat_add(r->sum, est);
		r->chain_sum = sat_add(r->chain_sum, est);
		if (r->multi)
			r->acc[slice_of(g, i)] += est;
	}
	fig5_finish(g, r, tid);
}

/* run_fig5 for callers that want the wall time's saving only. */
static uint64_t fig5_wall(const struct ffm_graph *g, const uint32_t *nodes, size_t n)
{
	struct fig5_sum r;

	run_fig5(g, nodes, n, NULL, &r);
	return r.wall;
}

int ffm_model__benefit(const struct ffm_graph *g, uint64_t *benefit, struct ffm_totals *tot)
{
	struct fig5_sum r;

	if (!g)
		return -EINVAL;
	run_fig5(g, g->prob, g->n_prob, benefit, &r);
	if (tot) {
		memset(tot, 0, sizeof(*tot));
		tot->wall_ns = ffm_graph__wall_ns(g);
		for (size_t i = 0; i < g->n_nodes; i++)
			if ((g->bits[i] & NB_SYNC) && nb_type(g->bits[i]) == FFM_NODE_CWAIT)
				tot->wait_ns = sat_add(tot->wait_ns, g->dur[i]);
		for (size_t k = 0; k < g->n_prob; k++)
			if (nb_type(g->bits[g->prob[k]]) == FFM_NODE_CWAIT)
				tot->problem_wait_ns = sat_add(tot->problem_wait_ns, g->dur[g->prob[k]]);
		tot->sum_ns = r.sum;
		tot->max_chain_ns = r.max_chain;
		tot->max_chain_tid = r.max_tid;
		tot->total_ns = r.wall;
	}
	return 0;
}

int ffm_model__estimate(const struct ffm_graph *g, const uint32_t *nodes, size_t n,
			uint64_t *benefit, uint64_t *total)
{
	struct fig5_sum r;

	if (!g || (!nodes && n))
		return -EINVAL;
	for (size_t k = 0; k < n; k++) {
		if (nodes[k] >= g->n_nodes)
			return -ERANGE;
		if (k && nodes[k] <= nodes[k - 1])
			return -EINVAL;
		if (nb_prob(g->bits[nodes[k]]) == FFM_PROBLEM_NONE)
			return -EINVAL;
	}
	run_fig5(g, nodes, n, benefit, &r);
	if (total)
		*total = r.wall;
	return 0;
}

/* ---- groupings ----------------------------------------------------------------------------- */

static void group_add(const struct ffm_graph *g, struct ffm_group *gr, uint32_t node)
{
	if (!gr->members) {
		gr->first_node = node;
		gr->tid = g->ev[g->nev[node]].tid;
	}
	gr->last_node = node;
	gr->members++;
	if (nb_type(g->bits[node]) == FFM_NODE_CWAIT)
		gr->wait_ns = sat_add(gr->wait_ns, g->dur[node]);
	gr->problems |= 1u << nb_prob(g->bits[node]);
}

/* Point and fold groups: hash the key, bucket the members in timeline order (counting sort),
 * then run Figure 5 over each bucket. */
static int group_by_key(const struct ffm_graph *g, bool fold, struct ffm_group **ret, size_t *ret_n)
{
	struct oatab map = OATAB_U32_INIT; /* key -> group */
	struct ffm_group *gr = NULL;
	uint32_t *gid = NULL, *off = NULL, *members = NULL;
	size_t n_gr = 0;
	int err;

	err = oatab_reserve(&map, g->n_prob);
	if (err)
		return err;
	gid = malloc(g->n_prob * sizeof(*gid));
	gr = calloc(g->n_prob, sizeof(*gr));
	if (!gid || !gr) {
		err = -ENOMEM;
		goto out;
	}
	for (size_t k = 0; k < g->n_prob; k++) {
		const struct ffm_event *e = &g->ev[g->nev[g->prob[k]]];
		uint64_t key = fold ? e->fold_id : e->stack_id;
		bool ins;

		gid[k] = oatab_get_or_put_u32(&map, key, (uint32_t)n_gr, &ins);
		if (gid[k] == UINT32_MAX) { /* reserved above: cannot happen */
			err = -ENOMEM;
			goto out;
		}
		if (ins)
			gr[n_gr++].key = key;
		group_add(g, &gr[gid[k]], g->prob[k]);
	}
	off = calloc(n_gr + 1, sizeof(*off));
	members = malloc(g->n_prob * sizeof(*members));
	if (!off || !members) {
		err = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < n_gr; i++)
		off[i + 1] = off[i] + gr[i].members;
	for (size_t k = 0; k < g->n_prob; k++)
		members[off[gid[k]]++] = g->prob[k];
	for (size_t i = 0, start = 0; i < n_gr; start += gr[i].members, i++)
		gr[i].benefit_ns = fig5_wall(g, members + start, gr[i].members);

	if (n_gr < g->n_prob) {
		struct ffm_group *p = realloc(gr, n_gr * sizeof(*gr));
		if (p)
			gr = p;
	}
	*ret = gr;
	*ret_n = n_gr;
	gr = NULL;
out:
	oatab_free(&map);
	free(gid);
	free(off);
	free(members);
	free(gr);
	return err;
}

/* Sequences: consecutive problematic nodes of one chain with no required sync between them.
 * Each sequence is a slice of g->prob. */
static int group_sequences(const struct ffm_graph *g, struct ffm_group **ret, size_t *ret_n)
{
	struct ffm_group *gr;
	size_t n_gr = 0, start = 0;

	gr = calloc(g->n_prob, sizeof(*gr));
	if (!gr)
		return -ENOMEM;
	for (size_t k = 0; k < g->n_prob; k++) {
		bool split = false;

		if (k) {
			/* A required sync (problem-free sync node, END included) between the two? */
			for (uint32_t j = g->prob[k - 1] + 1; j < g->prob[k]; j++) {
				uint8_t b = g->bits[j];
				if ((b & NB_SYNC) && nb_prob(b) == FFM_PROBLEM_NONE) {
					split = true;
					break;
				}
			}
		}
		if (k && split) {
			gr[n_gr].benefit_ns = fig5_wall(g, g->prob + start, k - start);
			n_gr++;
			start = k;
		}
		if (!gr[n_gr].members)
			gr[n_gr].key = n_gr;
		group_add(g, &gr[n_gr], g->prob[k]);
	}
	if (g->n_prob) {
		gr[n_gr].benefit_ns = fig5_wall(g, g->prob + start, g->n_prob - start);
		n_gr++;
	}
	if (n_gr < g->n_prob) {
		struct ffm_group *p = realloc(gr, n_gr * sizeof(*gr));
		if (p)
			gr = p;
	}
	*ret = gr;
	*ret_n = n_gr;
	return 0;
}

int ffm_model__group(const struct ffm_graph *g, enum ffm_grouping how, struct ffm_group **groups,
		     size_t *n)
{
	if (!g || !groups || !n || (unsigned)how >= FFM_GROUP__MAX)
		return -EINVAL;
	*groups = NULL;
	*n = 0;
	if (!g->n_prob)
		return 0;
	if (how == FFM_GROUP_SEQUENCE)
		return group_sequences(g, groups, n);
	return group_by_key(g, how == FFM_GROUP_FOLD, groups, n);
}

int ffm_model__subsequence(const struct ffm_graph *g, const struct ffm_group *seq, uint32_t from,
			   uint32_t to, uint64_t *benefit)
{
	size_t lo = 0, hi;

	if (!g || !seq || !benefit || from > to)
		return -EINVAL;
	if (to >= seq->members)
		return -ERANGE;
	/* Find the sequence's first member in g->prob; it must be a slice of it. */
	hi = g->n_prob;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (g->prob[mid] < seq->first_node)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo >= g->n_prob || g->prob[lo] != seq->first_node ||
	    lo + seq->members > g->n_prob || g->prob[lo + seq->members - 1] != seq->last_node)
		return -EINVAL;
	*benefit = fig5_wall(g, g->prob + lo + from, (size_t)to - from + 1);
	return 0;
}
