/* SPDX-License-Identifier: MIT */
/*
 * Waits that stage 2's probes hid.
 *
 * Every probed call of stage 2 costs its thread a few microseconds (the traps and ffm's
 * programs: 2-4 us a call on the H100, docs/OVERHEAD.md). Where the GPU runs through a
 * stretch of calls, the CPU reaches the sync at its end that much later and waits that much
 * less: a PyTorch step of ~40 launches shortens its .item() wait by ~100 us. That wait is
 * time the fix recovers, and the timeline no longer shows it.
 *
 * Two measurements bound it, and the correction is the smaller:
 *   - The timeline's own: each call carries what the probes had cost its thread
 *     (events.probe_ns), so a sync knows what they cost between its thread's first GPU
 *     submission after the previous sync and the sync itself (analysis/events.c,
 *     probe_span()). The GPU gets that work no later without the probes, so at most this much
 *     wait can have been hidden; less where the GPU ran dry within the span (a CPU-bound loop
 *     whose last kernel is short hides nothing, however many calls it makes).
 *   - The baseline run's (stage 1 probes the wait function only): the site's median wait
 *     there, over as many occurrences as the timeline has (a sync that did not wait there has
 *     no record: it counts 0), less its median wait in the timeline. This says whether the
 *     GPU did run through; on its own it moves with the machine's load between the two runs.
 * Per site key (the same code in both runs): hidden = min(median probe span, median baseline
 * wait - median timeline wait), never below 0. A removed sync (unnecessary, host read) takes
 * it along with its measured wait (ffm_event.removed_ns). Without a baseline run, or with
 * calls that carry no probe cost (stores of schema 7), nothing is added.
 */
#include <errno.h>

#include "analysis/analysis_int.h"

int an_note_sync(struct site_int *si, uint64_t wait_ns, uint64_t probe_span_ns)
{
	if (ffm_grow((void **)&si->obs, &si->cap_obs, si->n_obs + 1, sizeof(*si->obs)))
		return -ENOMEM;
	si->obs[si->n_obs++] = (struct an_sync_obs){ (int64_t)wait_ns, (int64_t)probe_span_ns };
	return 0;
}

/* Per site key: the baseline's waits, the timeline's waits and probe spans. */
struct per_key {
	struct oa_key k; /* (site key, 0) */
	int64_t *w1, *w2, *span; /* the medians sort each on its own */
	size_t n1, cap1, n2, cap2, cap_span;
	uint64_t hidden_ns;
};

struct hidden_scan {
	struct ffm_analysis *a;
	struct oatab keys;	     /* site key -> struct per_key */
	struct an_key_cache stacks; /* the baseline's stacks */
};

/* @nx more entries at the end of *v (zeros when @x is NULL). */
static int append(int64_t **v, size_t *n, size_t *cap, const int64_t *x, size_t nx)
{
	if (ffm_grow((void **)v, cap, *n + nx, sizeof(**v)))
		return -ENOMEM;
	if (x)
		memcpy(*v + *n, x, nx * sizeof(*x));
	else
		memset(*v + *n, 0, nx * sizeof(**v));
	*n += nx;
	return 0;
}

/* A site's occurrences into its key's waits and spans (w2 and span grow together). */
static int add_site(struct per_key *p, const struct site_int *si)
{
	if (ffm_grow((void **)&p->w2, &p->cap2, p->n2 + si->n_obs, sizeof(*p->w2)) ||
	    ffm_grow((void **)&p->span, &p->cap_span, p->n2 + si->n_obs, sizeof(*p->span)))
		return -ENOMEM;
	for (size_t k = 0; k < si->n_obs; k++) {
		p->w2[p->n2 + k] = si->obs[k].wait_ns;
		p->span[p->n2 + k] = si->obs[k].span_ns;
	}
	p->n2 += si->n_obs;
	return 0;
}

/* A wait of the baseline run (stage 1 records nothing else) into its key's. */
static int on_base_event(const struct ffm_store_event *ev, void *ctx)
{
	struct hidden_scan *h = ctx;
	struct per_key *p;
	int64_t w = (int64_t)ev->dur_ns;
	uint64_t key;
	int err;

	if (ev->kind != FFM_EV_WAIT)
		return 0;
	err = an_event_key(h->a, &h->stacks, ev, &key);
	if (err || !key || !(p = oatab_get(&h->keys, key, 0)))
		return err;
	return append(&p->w1, &p->n1, &p->cap1, &w, 1);
}

/* The hidden wait per occurrence of one key (see the top of the file). */
static uint64_t hidden_of(struct per_key *p)
{
	int64_t m1, m2, mspan;

	if (!p->n1 || !p->n2)
		return 0;
	/* Occurrences the baseline has no wait record of did not wait there. */
	if (p->n1 < p->n2 && append(&p->w1, &p->n1, &p->cap1, NULL, p->n2 - p->n1))
		return 0;
	m1 = an_median_i64(p->w1, p->n1);
	m2 = an_median_i64(p->w2, p->n2);
	mspan = an_median_i64(p->span, p->n2);
	if (m1 <= m2 || mspan <= 0)
		return 0;
	return (uint64_t)(m1 - m2 < mspan ? m1 - m2 : mspan);
}

static void free_keys(struct oatab *keys)
{
	for (size_t i = 0; i < keys->cap; i++) {
		struct per_key *p = oatab_slot(keys, i);

		if (p) {
			free(p->w1);
			free(p->w2);
			free(p->span);
		}
	}
	oatab_free(keys);
}

int an_hidden_waits(struct ffm_analysis *a)
{
	struct ffm_analysis_result *res = &a->res;
	struct hidden_scan h = { .a = a, .keys = OATAB_INIT(struct per_key),
				 .stacks = AN_KEY_CACHE_INIT };
	size_t wanted = 0;
	int err = 0;

	if (!res->run_baseline)
		return 0;
	/* The keys of the sites that lose syncs to a fix, with a probe cost to correct. */
	for (size_t i = 0; i < res->n_sites && !err; i++) {
		struct site_int *si = &a->si[i];
		struct per_key *p;

		if (!si->n_removed || !si->n_obs)
			continue;
		p = oatab_find(&h.keys, res->sites[i].key, 0, true);
		err = p ? add_site(p, si) : -ENOMEM;
		wanted++;
	}
	if (!err && wanted)
		err = an_scan_run(a, res->run_baseline, on_base_event, &h);
	for (size_t i = 0; i < h.keys.cap && !err; i++) {
		struct per_key *p = oatab_slot(&h.keys, i);

		if (p)
			p->hidden_ns = hidden_of(p);
	}
	for (size_t i = 0; i < res->n_sites && !err; i++) {
		struct site_int *si = &a->si[i];
		struct per_key *p = si->n_removed && si->n_obs ?
					    oatab_get(&h.keys, res->sites[i].key, 0) : NULL;

		si->hidden_ns = p ? p->hidden_ns : 0;
		res->q.hidden_wait_ns += si->hidden_ns * si->n_obs;
		free(si->obs);
		si->obs = NULL;
		si->n_obs = si->cap_obs = 0;
	}
	/* The removed occurrences take it along. */
	for (size_t i = 0; i < a->n_ev && !err && res->q.hidden_wait_ns; i++) {
		struct ffm_event *e = &a->ev[i];
		uint32_t site;

		if (e->problem != FFM_PROBLEM_UNNECESSARY_SYNC && e->problem != FFM_PROBLEM_HOST_READ)
			continue;
		site = oatab_get_u32(&a->site_of, e->stack_id);
		if (site == UINT32_MAX || !a->si[site].hidden_ns)
			continue;
		e->removed_ns += a->si[site].hidden_ns;
		res->q.hidden_removed_ns += a->si[site].hidden_ns;
	}
	free_keys(&h.keys);
	an_key_cache_fini(&h.stacks);
	return err;
}
