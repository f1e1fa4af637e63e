/* SPDX-License-Identifier: MIT */
/*
 * Per-event verdicts (ffm_analysis__event_verdict): what the analysis decided for each recorded
 * event, kept while it decides (events.c for the timeline, verdicts.c for the rows of stages 3
 * and 4), so that an export marks exactly the events the report counts.
 * In: the verdicts kept (struct an_evvs, sorted by an_evv_sort once the passes are done), the
 * catalog's sites and per-site state. Out: one event's struct ffm_an_event_verdict.
 */
#include <errno.h>

#include "analysis/analysis_int.h"

int an_evv_add(struct an_evvs *evv, const struct an_evv *e)
{
	if (ffm_grow((void **)&evv->v, &evv->cap, evv->n + 1, sizeof(*evv->v)))
		return -ENOMEM;
	evv->v[evv->n++] = *e;
	return 0;
}

static int cmp_evv(const void *x, const void *y)
{
	const struct an_evv *a = x, *b = y;

	if (a->run != b->run)
		return a->run < b->run ? -1 : 1;
	if (a->event != b->event)
		return a->event < b->event ? -1 : 1;
	return a->sync - b->sync; /* a transfer's row before its sync row */
}

int an_evv_sort(struct an_evvs *evv)
{
	if (evv->n) /* NULL when there is none: qsort(NULL, 0) is UB */
		qsort(evv->v, evv->n, sizeof(*evv->v), cmp_evv);
	return 0;
}

/* The first entry of (run, event), or NULL. */
static const struct an_evv *evv_find(const struct an_evvs *evv, int64_t run, int64_t event)
{
	size_t lo = 0, hi = evv->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		const struct an_evv *e = &evv->v[mid];

		if (e->run < run || (e->run == run && e->event < event))
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < evv->n && evv->v[lo].run == run && evv->v[lo].event == event ? &evv->v[lo]
										 : NULL;
}

/* An event of the stage-3/4 run used: its own rows, under its site's decisions. False when it
 * has none (stage 4 times only the syncs stage 3 saw used). */
static bool from_rows(const struct an_evvs *evv, const struct site_int *sis,
		      const struct ffm_store_event *ev, struct ffm_an_event_verdict *out)
{
	const struct an_evv *first = evv_find(evv, ev->run, ev->id);

	for (const struct an_evv *e = first;
	     e && e < evv->v + evv->n && e->run == ev->run && e->event == ev->id; e++) {
		const struct site_int *si = &sis[e->si];
		enum ffm_verdict vd;

		if (!e->sync) {
			out->duplicate = true;
			out->first_event = e->first_event;
			if (out->problem == FFM_PROBLEM_NONE)
				out->problem = FFM_PROBLEM_DUPLICATE_TRANSFER;
			continue;
		}
		vd = ffm_verdict_sync(e->what, si->any_used3, si->misplaced, e->delay, ev->wait_ns);
		if (vd == FFM_VERDICT_UNNECESSARY || vd == FFM_VERDICT_MISPLACED) {
			out->problem = ffm_verdict_problem(vd);
			out->partial = e->what == FFM_SEEN_NONE_PART || e->what == FFM_SEEN_UNKNOWN;
			out->use_delay_ns = vd != FFM_VERDICT_MISPLACED ? -1 :
				ffm_verdict_misplaced_delay(e->what, e->delay, si->site_delay);
		}
	}
	return first != NULL;
}

/* An event of a run the analysis did not use (or one without rows of its own): its call site's
 * verdict, when every occurrence of the site in the timeline that got one got the same. */
static void from_site(const struct an_catalog *cat, const struct ffm_store_event *ev,
		      struct ffm_an_event_verdict *out)
{
	const struct ffm_analysis_result *res = cat->res;
	uint32_t i = oatab_get_u32(&cat->site_of, (uint64_t)ev->stack);
	const struct ffm_an_site *x;

	if (!ev->stack || i == UINT32_MAX)
		return;
	x = &res->sites[i];
	if (x->n_classified && x->n_unnecessary == x->n_classified) {
		out->problem = FFM_PROBLEM_UNNECESSARY_SYNC;
		out->checked = x->n_classified;
	} else if (x->n_classified && x->n_unnecessary + x->n_misplaced == x->n_classified) {
		out->problem = FFM_PROBLEM_MISPLACED_SYNC;
		out->checked = x->n_classified;
		out->use_delay_ns = x->use_delay_ns;
	} else if (x->n_xclassified && x->n_dup == x->n_xclassified) {
		out->problem = FFM_PROBLEM_DUPLICATE_TRANSFER;
		out->duplicate = true;
		out->checked = x->n_xclassified;
	}
	out->site_wide = out->problem != FFM_PROBLEM_NONE;
}

void an_event_verdict(const struct an_evvs *evv, const struct an_catalog *cat,
		      const struct ffm_store_event *ev, struct ffm_an_event_verdict *out)
{
	const struct ffm_analysis_result *res = cat->res;
	const struct an_evv *e;

	*out = (struct ffm_an_event_verdict){ .use_delay_ns = -1, .from_run = res->run_verdicts };
	if (!res->have_problems)
		return;
	if (ev->run == res->run_timeline) {
		e = evv_find(evv, ev->run, ev->id);
		if (e) {
			out->problem = e->what;
			out->duplicate = e->dup;
			out->use_delay_ns = e->what == FFM_PROBLEM_MISPLACED_SYNC ? e->delay : -1;
		}
	} else if ((ev->run == res->run_verdicts || ev->run == res->run_first_use) &&
		   from_rows(evv, cat->si, ev, out)) {
		out->from_run = ev->run;
	} else {
		from_site(cat, ev, out);
	}
}
