/* SPDX-License-Identifier: MIT */
/*
 * What a duplicate copy costs, timed in several runs: part of the pass "apply verdicts", after
 * the scan. In: the model's events, the timeline's, first-use and baseline runs in the store.
 * Out: the duplicate copies' own time in the model's events (later events shifted to match).
 *
 * A duplicate transfer's fix deletes the call, so its benefit is the call's own time (outside
 * its wait; stages/ffm_model.h), measured in the timeline run. For a large copy from pageable
 * memory that time is mostly the driver's memcpy into its staging buffers, and it moves with
 * whatever else the node did during that one run. On the H100 the 4 MiB copies of
 * tests/workloads/dup_transfer took a median of 354, 409 and 556 us in three profiles' stage-2
 * runs, 373-375 us in the same profiles' stage-4 runs and 404 us a copy without ffm (the fix's
 * saving): one run's estimate was 40% high. Processes of one batch spread as far: ten plain
 * runs' loops at -9% to +17% of the fix's saving around their median.
 *
 * Other runs time the same calls: the first-use run (stage 4: the same probes on the copies;
 * its watchpoints guard device-to-host destinations, which a host-to-device duplicate has none
 * of; stage 3 hashes every transfer's bytes inside the call and is no measure of it), and the
 * monitoring runs of a key whose copies repeat (stages/ffm_plan.h: they time the copies besides
 * stage 1's records, FFM_RUN_COPIES) among the baseline's stage-1 runs (an_choose_baseline()).
 * Per site key each run gives its mean own time (what the fix saves is the copies' sum: in
 * eight monitoring processes on the H100 the loop less that sum stayed within 0.4095-0.4131 s
 * while the sum went from 0.125 to 0.172 s; the median times the count, 0.122-0.152 s, fell
 * short most where the copies were slowest, their slow tail being longer); a run whose count
 * of copies there differs from the timeline's beyond the join tolerance
 * (ffm_verdict_counts_differ) did different things and gives none. The price of a copy is then
 *   - with fewer than AN_DUP_POOL runs (the timeline's included): the lowest mean, since
 *     interference only adds time and two runs say little more;
 *   - with AN_DUP_POOL or more: the median of the means, the typical process, higher or
 *     lower than the timeline's.
 * Each duplicate's own time in the timeline is scaled by price / the timeline's mean. Time
 * taken off stays in the timeline as CPU work (the graph's gap before the next call). Time
 * added makes the copy that much longer and the thread's later calls start that much later,
 * as in a process whose copies ran at that price (taking it out of the next gap would clip
 * the next call: its own time and its wait, which the copy's speed does not change). Without
 * other runs nothing changes.
 */
#include <errno.h>

#include "analysis/analysis_int.h"
#include "analysis/ffm_verdict.h"

#define AN_DUP_POOL 3 /* runs from which their median replaces the lowest */

/* Per site key: the own times of its copies in the timeline (t2) and in the run being read
 * (cur), the means of the runs read (means). */
struct dup_key {
	struct oa_key k; /* (site key, 0) */
	struct an_i64s t2, cur, means;
	uint64_t calls2; /* the timeline's calls at the key (every site's n2) */
	int64_t m2, price; /* the timeline's mean, the price; price != m2: scale */
};

/* The time the copies priced higher added to a thread so far: its later calls come that much
 * later. */
struct tid_shift {
	struct oa_key k; /* (tid, 0) */
	uint64_t ns;
};

struct dup_scan {
	struct an_apply_ctx *a;
	struct oatab keys;	     /* site key -> struct dup_key */
	struct an_key_cache stacks; /* the other runs' stacks */
};

static bool copy_call(const struct ffm_event *e)
{
	/* the sync half of a split duplicate (analysis/events.c) is a FFM_CALL_SYNC */
	return e->kind == FFM_CALL_TRANSFER || e->kind == FFM_CALL_MEMSET;
}

static int on_run_event(const struct ffm_store_event *ev, void *ctx)
{
	struct dup_scan *d = ctx;
	struct dup_key *p;
	uint64_t key;
	int err;

	if (ev->kind != FFM_EV_TRANSFER && ev->kind != FFM_EV_MEMSET)
		return 0;
	err = an_event_key(d->a->cat, &d->stacks, ev, &key);
	if (err || !key || !(p = oatab_get(&d->keys, key, 0)))
		return err;
	return an_i64s_push(&p->cur, (int64_t)an_own_ns(ev->dur_ns, ev->wait_ns));
}

static int64_t mean_of(const struct an_i64s *x)
{
	int64_t sum = 0;

	for (size_t i = 0; i < x->n; i++)
		sum += x->v[i];
	return x->n ? sum / (int64_t)x->n : -1;
}

/* Run @run's copies at each key: its mean into the key's, where its count matches. */
static int read_run(struct dup_scan *d, int64_t run)
{
	int err = an_scan_run(d->a->s, run, on_run_event, d);

	for (size_t i = 0; i < d->keys.cap; i++) {
		struct dup_key *p = oatab_slot(&d->keys, i);

		if (!p || !p->cur.n)
			continue;
		if (!err && !ffm_verdict_counts_differ(p->calls2, p->cur.n))
			err = an_i64s_push(&p->means, mean_of(&p->cur));
		p->cur.n = 0;
	}
	return err;
}

/* The key of the site of @e, 0 when @e's site has no duplicates or no key entry. */
static struct dup_key *key_of(struct an_apply_ctx *a, struct oatab *keys,
			      const struct ffm_event *e, bool insert)
{
	uint32_t site = oatab_get_u32(&a->cat->site_of, e->stack_id);

	if (site == UINT32_MAX)
		return NULL;
	return insert ? oatab_find(keys, a->res->sites[site].key, 0, true)
		      : oatab_get(keys, a->res->sites[site].key, 0);
}

/* The keys of the sites with duplicates, each with its timeline copies' own times. */
static int collect_timeline(struct an_apply_ctx *a, struct oatab *keys)
{
	struct ffm_analysis_result *res = a->res;

	for (size_t i = 0; i < a->tl->n_ev; i++) {
		const struct ffm_event *e = &a->tl->ev[i];

		if (e->problem == FFM_PROBLEM_DUPLICATE_TRANSFER && !key_of(a, keys, e, true))
			return -ENOMEM;
	}
	for (size_t i = 0; i < a->tl->n_ev && keys->n; i++) {
		const struct ffm_event *e = &a->tl->ev[i];
		struct dup_key *p = copy_call(e) ? key_of(a, keys, e, false) : NULL;

		if (p && an_i64s_push(&p->t2, (int64_t)an_own_ns(e->dur_ns, e->wait_ns)))
			return -ENOMEM;
	}
	for (size_t i = 0; i < res->n_sites && keys->n; i++) {
		struct dup_key *p = oatab_get(keys, res->sites[i].key, 0);

		if (p)
			p->calls2 += a->cat->si[i].n2;
	}
	return 0;
}

/* A key's price from the timeline's mean and the other runs' (see the top). */
static void price_of(struct dup_key *p)
{
	int64_t low = p->m2;

	p->price = p->m2;
	if (!p->means.n)
		return;
	if (p->means.n + 1 >= AN_DUP_POOL) {
		if (an_i64s_push(&p->means, p->m2) == 0)
			p->price = an_median_i64(p->means.v, p->means.n);
		return;
	}
	for (size_t k = 0; k < p->means.n; k++)
		low = p->means.v[k] < low ? p->means.v[k] : low;
	p->price = low;
}

static void free_keys(struct oatab *keys)
{
	for (size_t i = 0; i < keys->cap; i++) {
		struct dup_key *p = oatab_slot(keys, i);

		if (p) {
			free(p->t2.v);
			free(p->cur.v);
			free(p->means.v);
		}
	}
	oatab_free(keys);
}

int an_dup_cost(struct an_apply_ctx *a)
{
	struct ffm_analysis_result *res = a->res;
	struct dup_scan d = { .a = a, .keys = OATAB_INIT(struct dup_key),
			      .stacks = AN_KEY_CACHE_INIT };
	struct oatab shifts = OATAB_INIT(struct tid_shift); /* tid -> time added so far */
	bool first_use = res->run_first_use && res->run_first_use != res->run_timeline;
	const int64_t *runs = a->base->id;
	size_t n = a->base->n;
	uint32_t most = 0;
	int err;

	if (!first_use && !n)
		return 0;
	err = collect_timeline(a, &d.keys);
	if (!err && d.keys.n && first_use)
		err = read_run(&d, res->run_first_use);
	/* the runs without FFM_RUN_COPIES hold waits only */
	for (size_t i = 0; i < n && !err && d.keys.n; i++)
		if (an_run_flags(res->runs, res->n_runs, runs[i]) & FFM_RUN_COPIES)
			err = read_run(&d, runs[i]);
	for (size_t i = 0; i < d.keys.cap && !err; i++) {
		struct dup_key *p = oatab_slot(&d.keys, i);

		if (!p || !p->t2.n)
			continue;
		p->m2 = mean_of(&p->t2);
		if (p->means.n + 1 > most) /* the runs its price rests on, the timeline's included */
			most = (uint32_t)p->means.n + 1;
		price_of(p);
	}
	for (size_t i = 0; i < a->tl->n_ev && !err && d.keys.n; i++) {
		struct ffm_event *e = &a->tl->ev[i];
		struct tid_shift *sh = oatab_get(&shifts, e->tid, 0);
		struct dup_key *p;
		uint64_t own, now;

		if (sh)
			e->start_ns += sh->ns;
		if (e->problem != FFM_PROBLEM_DUPLICATE_TRANSFER || !copy_call(e))
			continue;
		p = key_of(a, &d.keys, e, false);
		if (!p || p->m2 <= 0 || p->price == p->m2)
			continue;
		own = an_own_ns(e->dur_ns, e->wait_ns);
		now = (uint64_t)((unsigned __int128)own * (uint64_t)p->price / (uint64_t)p->m2);
		e->dur_ns = e->dur_ns - own + now;
		if (now < own) {
			res->q.dup_trimmed_ns += own - now;
			continue;
		}
		res->q.dup_added_ns += now - own;
		if (!sh && !(sh = oatab_find(&shifts, e->tid, 0, true)))
			err = -ENOMEM;
		else
			sh->ns += now - own;
	}
	res->q.dup_price_runs = most;
	free_keys(&d.keys);
	oatab_free(&shifts);
	an_key_cache_fini(&d.stacks);
	return err;
}
