/* SPDX-License-Identifier: MIT */
/*
 * What a duplicate copy costs, timed in two runs.
 *
 * A duplicate transfer's fix deletes the call, so its benefit is the call's own time (outside
 * its wait; stages/ffm_model.h), measured in the timeline run. For a large copy from pageable
 * memory that time is mostly the driver's memcpy into its staging buffers, and it moves with
 * whatever else the node did during that one run. On the H100 the 4 MiB copies of
 * tests/workloads/dup_transfer took a median of 354, 409 and 556 us in three profiles' stage-2
 * runs, 373-375 us in the same profiles' stage-4 runs and 404 us a copy without ffm (the fix's
 * saving): one run's estimate was 40% high.
 *
 * The first-use run (stage 4) has the same probes on the same calls (its watchpoints guard
 * device-to-host destinations, which a host-to-device duplicate has none of; stage 3 hashes
 * every transfer's bytes inside the call and is no measure of it). Interference only adds
 * time, so per site key the lower of the two runs' median own times is the better measure:
 * where the first-use run's is lower, each duplicate's own time in the timeline is scaled by
 * the ratio, and the time taken off stays in the timeline as CPU work (the graph's gap before
 * the next call). A site whose call count differs between the runs beyond the join tolerance
 * (ffm_verdict_counts_differ) did different things there and is left as measured. Without a
 * first-use run nothing changes.
 */
#include <errno.h>

#include "analysis/analysis_int.h"
#include "analysis/ffm_verdict.h"

/* Per site key: the own times of its copies in the timeline (t2) and the first-use run (t4). */
struct dup_key {
	struct oa_key k; /* (site key, 0) */
	struct an_i64s t2, t4;
	uint64_t calls2; /* the timeline's calls at the key (every site's n2) */
	int64_t m2, m4;	 /* the medians; m4 < m2: scale by m4 / m2 */
};

struct dup_scan {
	struct ffm_analysis *a;
	struct oatab keys;	     /* site key -> struct dup_key */
	struct an_key_cache stacks; /* the first-use run's stacks */
};

static uint64_t own_of(const struct ffm_event *e)
{
	return e->dur_ns > e->wait_ns ? e->dur_ns - e->wait_ns : 0;
}

static bool copy_call(const struct ffm_event *e)
{
	/* the sync half of a split duplicate (analysis/events.c) is a FFM_CALL_SYNC */
	return e->kind == FFM_CALL_TRANSFER || e->kind == FFM_CALL_MEMSET;
}

static int on_first_use_event(const struct ffm_store_event *ev, void *ctx)
{
	struct dup_scan *d = ctx;
	struct dup_key *p;
	uint64_t key;
	int err;

	if (ev->kind != FFM_EV_TRANSFER && ev->kind != FFM_EV_MEMSET)
		return 0;
	err = an_event_key(d->a, &d->stacks, ev, &key);
	if (err || !key || !(p = oatab_get(&d->keys, key, 0)))
		return err;
	return an_i64s_push(&p->t4,
			    (int64_t)(ev->dur_ns > ev->wait_ns ? ev->dur_ns - ev->wait_ns : 0));
}

/* The key of the site of @e, 0 when @e's site has no duplicates or no key entry. */
static struct dup_key *key_of(struct ffm_analysis *a, struct oatab *keys,
			      const struct ffm_event *e, bool insert)
{
	uint32_t site = oatab_get_u32(&a->site_of, e->stack_id);

	if (site == UINT32_MAX)
		return NULL;
	return insert ? oatab_find(keys, a->res.sites[site].key, 0, true)
		      : oatab_get(keys, a->res.sites[site].key, 0);
}

/* The keys of the sites with duplicates, each with its timeline copies' own times. */
static int collect_timeline(struct ffm_analysis *a, struct oatab *keys)
{
	struct ffm_analysis_result *res = &a->res;

	for (size_t i = 0; i < a->n_ev; i++) {
		const struct ffm_event *e = &a->ev[i];

		if (e->problem == FFM_PROBLEM_DUPLICATE_TRANSFER && !key_of(a, keys, e, true))
			return -ENOMEM;
	}
	for (size_t i = 0; i < a->n_ev && keys->n; i++) {
		const struct ffm_event *e = &a->ev[i];
		struct dup_key *p = copy_call(e) ? key_of(a, keys, e, false) : NULL;

		if (p && an_i64s_push(&p->t2, (int64_t)own_of(e)))
			return -ENOMEM;
	}
	for (size_t i = 0; i < res->n_sites && keys->n; i++) {
		struct dup_key *p = oatab_get(keys, res->sites[i].key, 0);

		if (p)
			p->calls2 += a->si[i].n2;
	}
	return 0;
}

static void free_keys(struct oatab *keys)
{
	for (size_t i = 0; i < keys->cap; i++) {
		struct dup_key *p = oatab_slot(keys, i);

		if (p) {
			free(p->t2.v);
			free(p->t4.v);
		}
	}
	oatab_free(keys);
}

int an_dup_cost(struct ffm_analysis *a)
{
	struct ffm_analysis_result *res = &a->res;
	struct dup_scan d = { .a = a, .keys = OATAB_INIT(struct dup_key),
			      .stacks = AN_KEY_CACHE_INIT };
	int err;

	if (!res->run_first_use || res->run_first_use == res->run_timeline)
		return 0;
	err = collect_timeline(a, &d.keys);
	if (!err && d.keys.n)
		err = an_scan_run(a, res->run_first_use, on_first_use_event, &d);
	for (size_t i = 0; i < d.keys.cap && !err; i++) {
		struct dup_key *p = oatab_slot(&d.keys, i);

		if (!p || !p->t2.n || !p->t4.n || ffm_verdict_counts_differ(p->calls2, p->t4.n))
			continue;
		p->m2 = an_median_i64(p->t2.v, p->t2.n);
		p->m4 = an_median_i64(p->t4.v, p->t4.n);
	}
	for (size_t i = 0; i < a->n_ev && !err && d.keys.n; i++) {
		struct ffm_event *e = &a->ev[i];
		struct dup_key *p;
		uint64_t own, keep;

		if (e->problem != FFM_PROBLEM_DUPLICATE_TRANSFER || !copy_call(e))
			continue;
		p = key_of(a, &d.keys, e, false);
		if (!p || p->m4 < 0 || p->m4 >= p->m2)
			continue;
		own = own_of(e);
		keep = (uint64_t)((unsigned __int128)own * (uint64_t)p->m4 / (uint64_t)p->m2);
		e->dur_ns -= own - keep;
		res->q.dup_trimmed_ns += own - keep;
	}
	free_keys(&d.keys);
	an_key_cache_fini(&d.stacks);
	return err;
}
