/* SPDX-License-Identifier: MIT */
/*
 * Waits that stage 2's probes hid: part of the pass "apply verdicts", after the scan. In: the
 * model's events, the sites' sync occurrences, the baseline's runs in the store. Out: the
 * sites' hidden waits (struct site_int), the events' removed time, q's hidden-wait totals.
 *
 * Every probed call of stage 2 costs its thread a few microseconds (the traps and ffm's
 * programs: 2-4 us a call on the H100, docs/OVERHEAD.md). Where the GPU runs through a
 * stretch of calls, the CPU reaches the sync at its end that much later and waits that much
 * less: a PyTorch step of ~40 launches shortens its .item() wait by ~100 us. That wait is
 * time the fix recovers, and the timeline no longer shows it.
 *
 * Three measurements bound it:
 *   - The timeline's own: each call carries what the probes had cost its thread
 *     (events.probe_ns), so a sync knows what they cost between its thread's first GPU
 *     submission after the previous sync and the sync itself (analysis/events.c,
 *     probe_span()). The GPU gets that work no later without the probes, so at most this much
 *     wait can have been hidden; less where the GPU ran dry within the span (a CPU-bound loop
 *     whose last kernel is short hides nothing, however many calls it makes).
 *   - The thread's CPU time between two occurrences of the site (the time from one's end to
 *     the next one's, less the thread's waits in between), median in the timeline less median
 *     in the baseline: what the probes really cost the loop. In a large process it is several
 *     times the accounted price (a PyTorch step of 40 launches on the H100: 250-680 us more a
 *     step against 50-110 us accounted; the records do not say where the rest goes). Where it
 *     is larger it replaces the first bound, up to AN_HIDDEN_GROWTH_MAX times it (more than
 *     that is the load of the machine, which moves between the two runs; on the loaded 2-core
 *     CI machine a simulated loop whose probes cost a few us a sync grew by 100 us and more).
 *     It is only taken where the baseline has at most
 *     one wait record per occurrence (a copy that waits once per staging chunk has gaps inside
 *     the call) and each run has AN_HIDDEN_MIN_GAPS gaps. Each thread counts its own gaps
 *     (threads that sync at one line do not interleave theirs).
 *   - The baseline run's (stage 1 probes the wait function only): the site's mean wait
 *     there, over as many occurrences as the timeline has (a sync that did not wait there has
 *     no record: it counts 0), less its mean wait in the timeline. This says whether the
 *     GPU did run through; on its own it moves with the machine's load between the two runs.
 *     Means, not medians: what the fix recovers is the sum of the waits, and a loop's waits
 *     are often two-humped (the PyTorch .item() loop on the H100: a median 8-36 us a read,
 *     a mean 40-60 us, a quarter of the reads waiting over 60 us). The lowest and highest
 *     hundredth are left out (a lazy load's one long wait).
 * Per site key (the same code in both runs): hidden = min(max(median probe span, CPU growth),
 * mean baseline wait - mean timeline wait), never below 0, and nothing without a probe
 * span (no GPU work submitted since the previous sync, or stores of schema 7, whose calls
 * carry no probe cost). A removed sync (unnecessary, host read) takes it along with its
 * measured wait (ffm_event.removed_ns). Without a baseline run nothing is added.
 *
 * The baseline is every stage-1 run of the key that describes the program as the timeline
 * does, up to AN_BASELINE_RUNS of the newest: the profile's own and the monitoring runs
 * that follow stage 4 (a job that runs again and again). How long a loop waits at its read
 * moves from one process to the next far more than within one (the PyTorch loop on the H100:
 * a median 10 us a read in one stage-1 run, 97-274 us in the others of the same day, as the
 * process's CPU time a step moved from 1.4 to 2.0 ms), so one process's wait is a poor
 * measure of the program's. Each run gives its mean wait and its median CPU gap per key;
 * the bounds use the median of those over the runs. Runs that are left out: incomplete,
 * dropped records, a failed program, sampled (adaptive stage 1 keeps only windows of the
 * waits), and, when the timeline is a re-trace for drift (stages/ffm_plan.h), those before
 * the stage-1 run that saw the drift.
 *
 * A host read whose copy waits itself (a .cpu() of a CUDA tensor copies to pageable memory,
 * so the read waits inside cuMemcpyDtoHAsync and its stream sync finds the GPU done) goes with
 * that copy (events.c, read_copy): the copy's occurrence is part of the read's, its wait and
 * span added to the sync's, and the baseline's waits at the copy's key count as the read's.
 * Without it the read kept only the timeline's wait in the copy: on the H100 the .cpu() loop
 * of tests/gpu/torch_item.py was priced at 0.106 s where 0.148 s with it, against a saving of
 * 0.152 s (the median of the six profiled processes' own, 1000 steps). Where such a loop is
 * GPU-bound the baseline's longer wait is not all time the fix recovers (.tolist() of two
 * metrics was once priced at 0.31 s so, for a saving of 0.15-0.19 s); the next paragraph's
 * bound applies there.
 *
 * The same comparison says whether the GPU ran through the stretch before a key's syncs,
 * busy from the thread's first submission after the previous sync until the wait ended
 * (ran_through()): then the probes' cost in that stretch delayed the CPU, not the GPU, and the
 * wait shrank by it. A fix of such a sync cannot make the GPU's work shorter; it saves at most
 * the time the GPU idled after the wait, until the thread's next submission (events.c,
 * note_next_submit; stages/ffm_model.h, "GPU idle after the sync").
 *
 * The CPU growth counts the whole gap, not only the span after the first submission: probe
 * time before it delays the GPU's work as much as the CPU's and hides nothing, so this bound
 * is loose where a loop spends much of its step before its first launch; the baseline's bound
 * still holds there.
 */
#include <errno.h>

#include "analysis/analysis_int.h"

#define AN_HIDDEN_MIN_GAPS 3
/* The probe span below which a shrunk wait says nothing of the GPU (ran_through()): a stretch
 * of one or two probed calls costs a few µs, less than a loop's waits move by between two
 * runs (a simulated sequence on the 2-core CI machine: ±3 µs of 300 µs, its 2 µs span
 * "run through" in one profile of three). At this size the drop it asks for is at least
 * FFM_MODEL_BUSY_WAIT_NS. */
#define AN_RAN_THROUGH_MIN_SPAN_NS (2 * FFM_MODEL_BUSY_WAIT_NS)
/* Growth beyond this multiple of the accounted span is taken as the machine's load between the
 * two runs, not the probes' (the PyTorch loop on the H100: 4.2-6.6 times its 60-72 us). */
#define AN_HIDDEN_GROWTH_MAX 8

/* The CPU time between the previous occurrence @l's end and @end, given the thread's waits
 * until each (@wsum now); -1 for a thread's first. @l becomes this occurrence. */
static int64_t cpu_gap(struct an_sync_last *l, uint64_t end, uint64_t wsum)
{
	int64_t gap = -1;

	if (l->end && end > l->end && wsum >= l->wsum && end - l->end >= wsum - l->wsum)
		gap = (int64_t)(end - l->end - (wsum - l->wsum));
	l->end = end;
	l->wsum = wsum;
	return gap;
}

int an_note_sync(struct an_apply_ctx *a, uint32_t site, struct thread *t, uint64_t end,
		 uint64_t wait_ns, uint64_t probe_span_ns, bool copy)
{
	struct site_int *si = &a->cat->si[site];
	/* per site key, as in the baseline: the stacks of one line take turns in some programs */
	struct an_sync_last *l = oatab_find(&a->sync_last, a->res->sites[site].key, t->tid, true);

	if (!l || ffm_grow((void **)&si->obs, &si->cap_obs, si->n_obs + 1, sizeof(*si->obs)))
		return -ENOMEM;
	if (copy && t->last_ev && t->obs_ev == t->last_ev) {
		/* the copy waited, and the sync its read made after it (whose span starts at the
		 * copy) is part of the same wait for the GPU */
		struct an_sync_obs *o = &a->cat->si[t->last_site].obs[t->obs_idx];

		wait_ns += (uint64_t)o->wait_ns;
		probe_span_ns += (uint64_t)o->span_ns;
		o->wait_ns = -1;
	}
	si->obs[si->n_obs++] = (struct an_sync_obs){ (int64_t)wait_ns, (int64_t)probe_span_ns,
						     cpu_gap(l, end, t->wait_sum) };
	t->obs_ev = a->tl->n_ev + 1; /* the event's last_ev once pushed */
	t->obs_idx = si->n_obs - 1;
	return 0;
}

/* Per site key: the baseline's waits and CPU gaps, the timeline's waits, probe spans and CPU
 * gaps. */
struct per_key {
	struct oa_key k; /* (site key, 0) */
	struct an_i64s w1, c1;	     /* the baseline run being read */
	struct an_i64s m1, g1;	     /* per baseline run: its mean wait, its median CPU gap */
	bool many_records;	     /* a baseline run had more wait records than occurrences */
	struct an_i64s w2, span, c2; /* the timeline's; the medians sort each on its own */
	uint64_t hidden_ns;
	bool ran_through; /* the GPU ran through the stretches before its syncs (ran_through()) */
};

/* A key whose baseline waits count as another's: a copy's, its host read's (copy_site). */
struct key_alias {
	struct oa_key k; /* (copy's site key, 0) */
	uint64_t to;
};

/* The baseline's waits so far per thread. */
struct base_thread {
	struct oa_key k; /* (tid, 0) */
	uint64_t wsum;
};

struct hidden_scan {
	struct an_apply_ctx *a;
	struct oatab keys;	     /* site key -> struct per_key */
	struct oatab aliases;	     /* site key -> struct key_alias */
	struct oatab threads;	     /* tid -> struct base_thread, of the run being read */
	struct oatab last;	     /* (site key, tid) -> struct an_sync_last, likewise */
	struct an_key_cache stacks; /* the baseline runs' stacks */
};

/* A site's occurrences into its key's waits, spans and CPU gaps. */
static int add_site(struct per_key *p, const struct site_int *si)
{
	for (size_t k = 0; k < si->n_obs; k++) {
		const struct an_sync_obs *o = &si->obs[k];

		if (o->wait_ns < 0) /* part of a read's occurrence (an_note_sync) */
			continue;
		if (an_i64s_push(&p->w2, o->wait_ns) || an_i64s_push(&p->span, o->span_ns) ||
		    (o->cpu_ns >= 0 && an_i64s_push(&p->c2, o->cpu_ns)))
			return -ENOMEM;
	}
	return 0;
}

/* A wait of the baseline run (stage 1 records nothing else) into its key's. */
static int on_base_event(const struct ffm_store_event *ev, void *ctx)
{
	struct hidden_scan *h = ctx;
	struct base_thread *bt;
	struct an_sync_last *l;
	struct per_key *p;
	int64_t cpu;
	uint64_t key;
	int err;

	if (ev->kind != FFM_EV_WAIT)
		return 0;
	bt = oatab_find(&h->threads, ev->tid, 0, true);
	if (!bt)
		return -ENOMEM;
	bt->wsum += ev->dur_ns;
	err = an_event_key(h->a->cat, &h->stacks, ev, &key);
	if (err || !key)
		return err;
	if (!(p = oatab_get(&h->keys, key, 0))) {
		const struct key_alias *al = oatab_get(&h->aliases, key, 0);

		if (!al || !(p = oatab_get(&h->keys, al->to, 0)))
			return 0;
		key = al->to;
	}
	l = oatab_find(&h->last, key, ev->tid, true);
	if (!l)
		return -ENOMEM;
	cpu = cpu_gap(l, ev->start_ns + ev->dur_ns, bt->wsum);
	if (cpu >= 0 && an_i64s_push(&p->c1, cpu))
		return -ENOMEM;
	return an_i64s_push(&p->w1, (int64_t)ev->dur_ns);
}

/* The end of one baseline run: its mean wait (over as many occurrences as the timeline has:
 * those without a record did not wait) and median CPU gap per key. */
static int end_base_run(struct hidden_scan *h)
{
	for (size_t i = 0; i < h->keys.cap; i++) {
		struct per_key *p = oatab_slot(&h->keys, i);

		if (!p || !p->w2.n)
			continue;
		if (p->w1.n > p->w2.n)
			p->many_records = true;
		while (p->w1.n < p->w2.n) {
			if (an_i64s_push(&p->w1, 0))
				return -ENOMEM;
		}
		if (an_i64s_push(&p->m1, an_trimmed_mean_i64(p->w1.v, p->w1.n)) ||
		    (p->c1.n >= AN_HIDDEN_MIN_GAPS &&
		     an_i64s_push(&p->g1, an_median_i64(p->c1.v, p->c1.n))))
			return -ENOMEM;
		p->w1.n = p->c1.n = 0;
	}
	oatab_free(&h->threads);
	oatab_free(&h->last);
	h->threads = OATAB_INIT(struct base_thread);
	h->last = OATAB_INIT(struct an_sync_last);
	return 0;
}

/* One key's waits: the baseline's (the median over the runs of each run's mean), the
 * timeline's mean and its median probe span. Each sorts its array: taken once per key. */
struct key_waits {
	int64_t base, timeline, span;
};

/* False without a baseline or a timeline wait. */
static bool key_waits(struct per_key *p, struct key_waits *w)
{
	if (!p->m1.n || !p->w2.n || !p->span.n)
		return false;
	w->base = an_median_i64(p->m1.v, p->m1.n);
	w->timeline = an_trimmed_mean_i64(p->w2.v, p->w2.n);
	w->span = an_median_i64(p->span.v, p->span.n);
	return true;
}

/* The hidden wait per occurrence of one key (see the top of the file). */
static uint64_t hidden_of(struct per_key *p, const struct key_waits *w)
{
	int64_t drop = w->base - w->timeline, bound = w->span;

	if (drop <= 0 || bound <= 0)
		return 0;
	if (!p->many_records && p->g1.n && p->c2.n >= AN_HIDDEN_MIN_GAPS) {
		int64_t growth = an_median_i64(p->c2.v, p->c2.n) - an_median_i64(p->g1.v, p->g1.n);

		if (growth > AN_HIDDEN_GROWTH_MAX * bound)
			growth = AN_HIDDEN_GROWTH_MAX * bound;
		if (growth > bound)
			bound = growth;
	}
	return (uint64_t)(drop < bound ? drop : bound);
}

/*
 * Whether the GPU ran through the stretches before one key's syncs: busy from the thread's
 * first submission after the previous sync until the wait ended. Then the probes' cost in
 * that stretch delayed the CPU and not the GPU, and the wait shrank by it: the timeline's
 * mean wait is at least half the median probe span shorter than the baseline's, which
 * waited for the GPU (FFM_MODEL_BUSY_WAIT_NS), over a span long enough to tell
 * (AN_RAN_THROUGH_MIN_SPAN_NS: a large process's step, not a loop of one launch). A loop
 * that runs its GPU dry within the stretch (a CPU-bound loop whose last kernel is long waits
 * as long in both runs) does not pass. A removed sync there saves at most the time the GPU
 * idled after it (stages/ffm_model.h, "GPU idle after the sync").
 */
static bool ran_through(const struct key_waits *w)
{
	return w->base >= FFM_MODEL_BUSY_WAIT_NS && w->span >= AN_RAN_THROUGH_MIN_SPAN_NS &&
	       w->base - w->timeline >= w->span / 2;
}

static void free_keys(struct oatab *keys)
{
	for (size_t i = 0; i < keys->cap; i++) {
		struct per_key *p = oatab_slot(keys, i);

		if (p) {
			free(p->w1.v);
			free(p->c1.v);
			free(p->m1.v);
			free(p->g1.v);
			free(p->w2.v);
			free(p->span.v);
			free(p->c2.v);
		}
	}
	oatab_free(keys);
}

int an_hidden_waits(struct an_apply_ctx *a)
{
	struct ffm_analysis_result *res = a->res;
	struct hidden_scan h = { .a = a, .keys = OATAB_INIT(struct per_key),
				 .aliases = OATAB_INIT(struct key_alias),
				 .threads = OATAB_INIT(struct base_thread),
				 .last = OATAB_INIT(struct an_sync_last),
				 .stacks = AN_KEY_CACHE_INIT };
	size_t wanted = 0;
	int err = 0;

	if (!res->run_baseline)
		return 0;
	/* The keys of the sites that lose syncs to a fix, with a probe cost to correct. */
	for (size_t i = 0; i < res->n_sites && !err; i++) {
		struct site_int *si = &a->cat->si[i];
		struct per_key *p;

		if (!si->n_removed || !si->n_obs)
			continue;
		p = oatab_find(&h.keys, res->sites[i].key, 0, true);
		err = p ? add_site(p, si) : -ENOMEM;
		if (!err && si->copy_site) {
			struct key_alias *al = oatab_find(
				&h.aliases, res->sites[si->copy_site - 1].key, 0, true);

			if (!al)
				err = -ENOMEM;
			else
				al->to = res->sites[i].key;
		}
		wanted++;
	}
	if (!err && wanted) {
		const int64_t *runs = a->base->id;
		size_t n = a->base->n;

		if (!n) { /* none is whole: the latest as it is */
			runs = &res->run_baseline;
			n = 1;
		}
		for (size_t i = 0; i < n && !err; i++) {
			err = an_scan_run(a->s, runs[i], on_base_event, &h);
			if (!err)
				err = end_base_run(&h);
		}
		res->q.baseline_runs = (uint32_t)n;
	}
	for (size_t i = 0; i < h.keys.cap && !err; i++) {
		struct per_key *p = oatab_slot(&h.keys, i);

		struct key_waits w;

		if (p && key_waits(p, &w)) {
			p->hidden_ns = hidden_of(p, &w);
			p->ran_through = ran_through(&w);
		}
	}
	for (size_t i = 0; i < res->n_sites && !err; i++) {
		struct site_int *si = &a->cat->si[i];
		struct per_key *p = si->n_removed && si->n_obs ?
					    oatab_get(&h.keys, res->sites[i].key, 0) : NULL;

		si->hidden_ns = p ? p->hidden_ns : 0;
		si->ran_through = p && p->ran_through;
		res->q.hidden_wait_ns += si->hidden_ns * si->n_obs;
		free(si->obs);
		si->obs = NULL;
		si->n_obs = si->cap_obs = 0;
	}
	/* The removed occurrences take it along; where the GPU ran through, the model bounds
	 * each by the GPU's idle time after it (events.c, note_next_submit). */
	for (size_t i = 0; i < a->tl->n_ev && !err && wanted; i++) {
		struct ffm_event *e = &a->tl->ev[i];
		const struct site_int *si;
		uint32_t site;

		if (e->problem != FFM_PROBLEM_UNNECESSARY_SYNC && e->problem != FFM_PROBLEM_HOST_READ)
			continue;
		site = oatab_get_u32(&a->cat->site_of, e->stack_id);
		if (site == UINT32_MAX)
			continue;
		si = &a->cat->si[site];
		e->removed_ns += si->hidden_ns;
		res->q.hidden_removed_ns += si->hidden_ns;
		if (si->ran_through && e->gpu_idle_ns) {
			e->flags |= FFM_EVENT_GPU_IDLE;
			res->q.gpu_idle_syncs++;
		}
	}
	free_keys(&h.keys);
	oatab_free(&h.aliases);
	oatab_free(&h.threads);
	oatab_free(&h.last);
	an_key_cache_fini(&h.stacks);
	return err;
}
