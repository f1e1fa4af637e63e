/* SPDX-License-Identifier: MIT */
/*
 * Stage 3/4's rows -> per-site verdict tables (struct verdicts), under the rules of
 * ffm_verdict.h: each sync occurrence's rows folded into one, the counts checked against the
 * timeline's (majority when they differ), each site's misplaced decision. The timeline scan
 * (events.c) then applies them occurrence by occurrence.
 * Part of the pass "apply verdicts", before the first event. In: the store's stage 3/4
 * rows, the catalog's sites. Out: the sites' verdict tables and notes, event verdicts.
 */
#include <errno.h>

#include "analysis/analysis_int.h"

void an_verdicts_fini(struct verdicts *v)
{
	free(v->v);
	free(v->delay);
	free(v->event);
	memset(v, 0, sizeof(*v));
}

static int verdict_add(struct verdicts *v, int64_t event, uint8_t val, int64_t delay,
		       bool keep_event)
{
	size_t cap = v->cap;

	if (ffm_grow((void **)&v->v, &v->cap, v->n + 1, sizeof(*v->v)))
		return -ENOMEM;
	if (v->cap != cap) {
		int64_t *d = realloc(v->delay, v->cap * sizeof(*d));

		if (!d)
			return -ENOMEM;
		v->delay = d;
		if (keep_event) {
			d = realloc(v->event, v->cap * sizeof(*d));
			if (!d)
				return -ENOMEM;
			v->event = d;
		}
	}
	v->v[v->n] = val;
	v->delay[v->n] = delay;
	if (keep_event)
		v->event[v->n] = event;
	v->n++;
	v->last_event = event;
	return 0;
}

/* Bytes a stage-3 sync protects, summed over its ranges (@first: its first range). */
static void note_prot(struct site_int *si, const struct ffm_store_sync_use *u, bool first)
{
	uint64_t b = u->prot_hi > u->prot_lo ? u->prot_hi - u->prot_lo : 0;

	si->prot_cur = first ? b : si->prot_cur + b;
	if (si->prot_cur > si->prot_max)
		si->prot_max = si->prot_cur;
}

/* The best-covered protected range of a site's stage-3 syncs. */
static void note_coverage(struct ffm_an_site *x, const struct ffm_store_sync_use *u)
{
	double c = ffm_verdict_coverage(u);

	if (c >= 0 && (!x->coverage_known || c > x->coverage)) {
		x->coverage = c;
		x->coverage_known = true;
	}
}

struct use_scan {
	struct an_apply_ctx *a;
	bool stage4;
};

static int on_sync_use(const struct ffm_store_sync_use *u, void *ctx)
{
	struct use_scan *us = ctx;
	struct an_apply_ctx *a = us->a;
	struct site_int *si;
	struct verdicts *v;
	uint32_t i;

	an_progress_add(a->o->progress, 1, 0);
	int err = an_site_for(a->cat, u->stack, 0, FFM_EV_API, &i);
	int64_t delay;
	uint8_t val = ffm_verdict_seen(u, &delay);

	if (err)
		return err;
	si = &a->cat->si[i];
	v = us->stage4 ? &si->s4 : &si->s3;
	if (!us->stage4 && ((u->flags & FFM_SYNC_USE_PARTIAL) || val == FFM_SEEN_NONE_PART))
		a->res->sites[i].n_partial++;
	if (val == FFM_SEEN_USED && !us->stage4)
		si->any_used3 = true;
	if (!us->stage4)
		note_coverage(&a->res->sites[i], u);
	if (val == FFM_SEEN_USED && !si->use_stack && !si->use_frame) {
		si->use_stack = u->use_stack;
		si->use_frame = u->use_frame;
	}
	if (v->n && v->last_event == u->event && u->event) {
		/* Another protected range of the same sync. */
		ffm_verdict_add_range(&v->v[v->n - 1], &v->delay[v->n - 1], val, delay);
		if (!us->stage4)
			note_prot(si, u, false);
		return 0;
	}
	if (!us->stage4)
		note_prot(si, u, true);
	return verdict_add(v, u->event, val, delay, a->o->event_verdicts);
}

static int on_xfer(const struct ffm_store_xfer_hash *h, void *ctx)
{
	struct an_apply_ctx *a = ctx;
	struct site_int *si;
	uint32_t i;
	int err = an_site_for(a->cat, h->stack, 0, FFM_EV_TRANSFER, &i);

	an_progress_add(a->o->progress, 1, 0);

	if (err)
		return err;
	si = &a->cat->si[i];
	if (h->dup == FFM_DUP_SAME_DST && !si->first_stack && h->first_stack)
		si->first_stack = h->first_stack;
	if (si->x3.n && si->x3.last_event == h->event && h->event)
		return 0;
	if (a->o->event_verdicts && h->dup == FFM_DUP_SAME_DST) {
		struct an_evv e = { .run = h->run, .event = h->event, .delay = -1,
				    .first_event = h->first_event, .si = i,
				    .what = FFM_DUP_SAME_DST };

		err = an_evv_add(a->evv, &e);
		if (err)
			return err;
	}
	return verdict_add(&si->x3, h->event, (uint8_t)h->dup, -1, false);
}

/* The median first-use delay of @v's used syncs into *med (-1: none): how many, or -ENOMEM. */
static int used_median(const struct verdicts *v, int64_t *med)
{
	int64_t *d = malloc((v->n + 1) * sizeof(*d));
	size_t nd = 0;

	if (!d)
		return -ENOMEM;
	for (size_t k = 0; k < v->n; k++)
		if (v->v[k] == FFM_SEEN_USED && v->delay[k] >= 0)
			d[nd++] = v->delay[k];
	*med = an_median_i64(d, nd);
	free(d);
	return (int)nd;
}

/* Majority verdict of a stack whose count differs too much from the timeline's. */
static int set_majority(struct verdicts *v, bool sync)
{
	size_t cnt[4] = { 0 };

	if (!v->n)
		return 0;
	v->majority = true;
	for (size_t k = 0; k < v->n; k++)
		cnt[v->v[k] & 3]++;
	if (!sync) {
		v->maj_v = ffm_verdict_majority_dup(cnt);
		return 0;
	}
	v->maj_v = ffm_verdict_majority_sync(cnt, v->n);
	return used_median(v, &v->maj_delay) < 0 ? -ENOMEM : 0;
}

/*
 * Whether a site's required syncs are misplaced: judged per site on its typical occurrence
 * (median first-use delay against its mean wait: ffm_verdict_site_misplaced), so that the noise
 * of single measurements (a use a watchpoint trap late, a sync that found the GPU done) neither
 * makes a required sync "misplaced" now and then nor hides a misplaced one. Delays from stage 4
 * where it timed any, else stage 3's.
 */
static int decide_misplaced(const struct ffm_an_site *x, struct site_int *si)
{
	uint64_t mean_wait = x->count ? x->wait_ns / x->count : 0;
	int64_t med;
	int nd = used_median(&si->s4, &med);

	if (!nd)
		nd = used_median(&si->s3, &med);
	if (nd > 0)
		si->misplaced = ffm_verdict_site_misplaced(med, mean_wait);
	si->site_delay = si->misplaced ? med : -1;
	return nd < 0 ? nd : 0;
}

/* A small read every iteration (ffm_verdict_site_host_read), judged on stage 3's rows. */
static void decide_host_read(struct ffm_an_site *x, struct site_int *si)
{
	uint64_t used = 0;

	for (size_t k = 0; k < si->s3.n; k++)
		used += (si->s3.v[k] & 3) == FFM_SEEN_USED;
	if (si->s3.majority)
		used = si->s3.maj_v == FFM_SEEN_USED ? si->s3.n : 0;
	si->host_read = ffm_verdict_site_host_read(used, si->s3.n, si->prot_max, si->n2,
						   si->misplaced);
	if (si->host_read)
		x->read_bytes = si->prot_max;
}

/* The sync rows of a stage-3/4 run as event verdicts (opts.event_verdicts). */
static int keep_sync_rows(struct an_apply_ctx *a, uint32_t i, const struct verdicts *v,
			  int64_t run)
{
	for (size_t k = 0; k < v->n && v->event; k++) {
		struct an_evv e = { .run = run, .event = v->event[k], .delay = v->delay[k], .si = i,
				    .what = v->v[k], .sync = true };
		int err = an_evv_add(a->evv, &e);

		if (err)
			return err;
	}
	return 0;
}

/* Counts against the timeline's, majorities, misplaced decisions, once every row is in. */
static int judge_sites(struct an_apply_ctx *a)
{
	struct ffm_analysis_result *res = a->res;
	int err = 0;

	for (size_t i = 0; i < res->n_sites && !err; i++) {
		struct ffm_an_site *x = &res->sites[i];
		struct site_int *si = &a->cat->si[i];
		bool div = false;

		if (si->s3.n || si->x3.n)
			res->have_problems = true;
		err = keep_sync_rows(a, (uint32_t)i, &si->s3, res->run_verdicts);
		if (!err)
			err = keep_sync_rows(a, (uint32_t)i, &si->s4, res->run_first_use);
		if (err)
			break;
		if (!x->in_timeline) {
			if (si->s3.n || si->s4.n || si->x3.n)
				res->q.unmatched_sites++;
			continue;
		}
		if (si->s3.n && ffm_verdict_counts_differ(si->n2, si->s3.n)) {
			div = true;
			err = set_majority(&si->s3, true);
		}
		if (!err && si->s4.n && ffm_verdict_counts_differ(si->n2, si->s4.n)) {
			div = true;
			err = set_majority(&si->s4, true);
		}
		if (!err && si->x3.n && ffm_verdict_counts_differ(si->n2, si->x3.n)) {
			div = true;
			err = set_majority(&si->x3, false);
		}
		if (!err)
			err = decide_misplaced(x, si);
		if (!err)
			decide_host_read(x, si);
		x->divergent = div;
		res->q.divergent_sites += div;
	}
	return err;
}

int an_load_verdicts(struct an_apply_ctx *a)
{
	struct ffm_analysis_result *res = a->res;
	struct use_scan us = { .a = a };
	int err;

	if (res->run_verdicts) {
		err = ffm_store__for_each_sync_use_by_stack(a->s, res->run_verdicts, on_sync_use, &us);
		if (!err)
			err = ffm_store__for_each_xfer_hash_by_stack(a->s, res->run_verdicts, on_xfer, a);
		if (err)
			return err < 0 ? err : -EIO;
	}
	if (res->run_first_use) {
		us.stage4 = true;
		err = ffm_store__for_each_sync_use_by_stack(a->s, res->run_first_use, on_sync_use, &us);
		if (err)
			return err < 0 ? err : -EIO;
	}
	err = judge_sites(a);
	if (err)
		return err;
	/* A stage-3 run that saw no sync and no transfer still classified the timeline. */
	if (res->run_verdicts)
		res->have_problems = true;
	return 0;
}

bool an_verdict_at(const struct verdicts *v, uint64_t k, uint64_t n2, uint8_t *val,
		   int64_t *delay)
{
	size_t j;

	if (!v->n)
		return false;
	if (v->majority) {
		*val = v->maj_v;
		*delay = v->maj_delay;
		return true;
	}
	j = ffm_verdict_join(k, n2, v->n);
	*val = v->v[j];
	*delay = v->delay ? v->delay[j] : -1;
	return true;
}
