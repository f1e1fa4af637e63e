/* SPDX-License-Identifier: MIT */
/*
 * The model's input: timeline events (stage 2) -> struct ffm_event, each with the verdict of
 * stages 3/4 for its occurrence (ffm_analysis.h, "Events" and "Verdicts").
 * Part of the pass "apply verdicts" (the scan's sink). In: each scanned event
 * (struct an_raw), the sites' verdict tables, the CPU samples. Out (struct an_apply_ctx): the
 * model's events, threads and busy streams in a->tl, the sites' problem counts, event verdicts.
 */
#include <errno.h>
#include <string.h>

#include "analysis/analysis_int.h"

static struct thread *thread_of(struct an_apply_ctx *a, uint32_t tid, uint32_t tgid)
{
	uint32_t i = oatab_get_u32(&a->tl->thr_of, tid);

	if (i != UINT32_MAX)
		return &a->tl->thr[i];
	if (ffm_grow((void **)&a->tl->thr, &a->tl->cap_thr, a->tl->n_thr + 1, sizeof(*a->tl->thr)) ||
	    oatab_put_u32(&a->tl->thr_of, tid, (uint32_t)a->tl->n_thr))
		return NULL;
	a->tl->thr[a->tl->n_thr] = (struct thread){ .tid = tid, .tgid = tgid };
	return &a->tl->thr[a->tl->n_thr++];
}

static uint8_t call_kind(uint32_t ev_kind)
{
	switch (ev_kind) {
	case FFM_EV_WAIT:
	case FFM_EV_API: return FFM_CALL_SYNC;
	case FFM_EV_TRANSFER: return FFM_CALL_TRANSFER;
	case FFM_EV_ALLOC: return FFM_CALL_ALLOC;
	case FFM_EV_FREE: return FFM_CALL_FREE;
	case FFM_EV_MEMSET: return FFM_CALL_MEMSET;
	case FFM_EV_LAUNCH: return FFM_CALL_LAUNCH;
	default: return FFM_CALL_OTHER;
	}
}

static int push_event(struct an_apply_ctx *a, const struct ffm_event *e)
{
	if (a->tl->n_ev == a->tl->cap_ev) {
		/* Only a split (dup + sync on one transfer) gets here: grow by an eighth. */
		size_t ncap = a->tl->cap_ev + a->tl->cap_ev / 8 + 64;
		struct ffm_event *n = realloc(a->tl->ev, ncap * sizeof(*n));

		if (!n)
			return -ENOMEM;
		a->tl->ev = n;
		a->tl->cap_ev = ncap;
	}
	a->tl->ev[a->tl->n_ev++] = *e;
	return 0;
}

static int note_delay(struct site_int *si, int64_t d)
{
	if (ffm_grow((void **)&si->delays, &si->cap_delays, si->n_delays + 1, sizeof(*si->delays)))
		return -ENOMEM;
	si->delays[si->n_delays++] = d;
	return 0;
}

/* The sync verdict of occurrence @k of site @x applied to @e (see ffm_verdict.h). */
static int apply_sync_verdict(struct an_apply_ctx *a, struct ffm_an_site *x, struct site_int *si,
			      uint64_t k, struct ffm_event *e, int64_t *use)
{
	struct ffm_analysis_result *res = a->res;
	int64_t d3 = -1, d4 = -1, d = -1;
	enum ffm_verdict vd;
	uint8_t sv, v4;

	if (!an_verdict_at(&si->s3, k, si->n2, &sv, &d3)) {
		if (e->flags & FFM_EVENT_SYNC && res->run_verdicts) {
			res->q.unclassified_syncs++;
			res->q.unclassified_wait_ns += e->wait_ns;
		}
		return 0;
	}
	x->n_classified++;
	if (sv == FFM_SEEN_USED) {
		/* Stage 4 times the use without stage 3's hashing; where it did not time this
		 * occurrence, stage 3's delay stands. */
		bool from4 = an_verdict_at(&si->s4, k, si->n2, &v4, &d4) && d4 >= 0;

		d = from4 ? d4 : d3;
		if (d >= 0) {
			if (!from4 && !si->s4.n) /* not one timed by a stage-4 run */
				x->delays_from_stage3 = true;
			if (note_delay(si, d))
				return -ENOMEM;
		}
	}
	vd = ffm_verdict_sync(sv, si->any_used3, si->misplaced, d, e->wait_ns);
	if (vd == FFM_VERDICT_WITHHELD)
		res->q.withheld_syncs++;
	if (vd == FFM_VERDICT_MISPLACED) {
		res->q.site_misplaced_syncs += sv != FFM_SEEN_USED;
		d = ffm_verdict_misplaced_delay(sv, d, si->site_delay);
	}
	e->problem = (uint8_t)ffm_verdict_problem(vd);
	if (vd == FFM_VERDICT_REQUIRED && si->host_read &&
	    ffm_verdict_host_read_removed(k, a->o->read_every)) {
		e->problem = FFM_PROBLEM_HOST_READ;
		*use = d; /* stage 4's delay, else stage 3's: when the value was first used */
	}
	if (vd == FFM_VERDICT_MISPLACED)
		e->first_use_ns = (uint64_t)d;
	return 0;
}

static bool same_line(const struct ffm_an_site *a, const struct ffm_an_site *b)
{
	return a->line == b->line && !strcmp(a->file, b->file) && !strcmp(a->function, b->function);
}

/*
 * The thread's previous model event when it is the copy that the read @e at @site made (a
 * transfer made by the same line of the program just before: .item()'s cudaMemcpyAsync
 * before its stream sync) and not a duplicate one; NULL otherwise.
 */
static const struct ffm_event *read_copy(const struct an_apply_ctx *a, const struct thread *t,
					 const struct ffm_event *e, uint32_t site)
{
	const struct ffm_event *prev;

	if (!t->last_ev)
		return NULL;
	prev = &a->tl->ev[t->last_ev - 1];
	if (prev->kind != FFM_CALL_TRANSFER || prev->problem == FFM_PROBLEM_DUPLICATE_TRANSFER ||
	    prev->start_ns + prev->dur_ns > e->start_ns ||
	    !same_line(&a->res->sites[t->last_site], &a->res->sites[site]))
		return NULL;
	return prev;
}

/*
 * The CPU time outside the wait that fixing @e deletes with it (ffm_event.removed_ns). An
 * unnecessary explicit sync is deleted, call and all. A host read goes whole: its sync call
 * and its copy (read_copy()), that one with its wait where no verdict of its own removes
 * that (a required wait of the copy: what stage 2's probes hid of it goes along too, as
 * the copy's occurrence is part of the read's in analysis/hidden.c).
 * A duplicate copy's time is its own problem's benefit already. An async copy that waited
 * (pageable memory) keeps its call but loses the CPU's part of it: its time outside the wait.
 * Other implicit syncs (a free, a synchronous copy) stay calls of the fixed program: nothing.
 * A Python read takes its library's
 * own CPU time around the driver calls too (the sampled time at its line, per read:
 * analysis/cputime.c).
 */
static uint64_t removed_cpu(struct an_apply_ctx *a, const struct thread *t,
			    const struct site_int *si, const struct ffm_event *e, uint32_t site)
{
	uint64_t own = an_own_ns(e->dur_ns, e->wait_ns);
	const struct ffm_event *prev;

	/* The CPU side of an async copy that waited: the driver staged pageable memory through a
	 * bounce buffer inside the call, and the fix (a pinned buffer) leaves the copy to the copy
	 * engine, the call returning at once. On the H100 that was about the 55 µs an iteration
	 * that pageable_async's estimate lacked (-9.8%). */
	if (e->problem == FFM_PROBLEM_UNNECESSARY_SYNC)
		return si->explicit_sync || si->async_copy ? own : 0;
	if (e->problem != FFM_PROBLEM_HOST_READ)
		return 0;
	if (si->py_anchor && si->n2) {
		uint64_t lib = an_cpu_at(a->cpu, si->py_anchor) / si->n2;

		a->res->q.read_lib_cpu_ns += lib;
		own += lib;
	}
	prev = read_copy(a, t, e, site);
	if (!prev)
		return own;
	return own + (prev->problem == FFM_PROBLEM_NONE ? prev->dur_ns :
						       an_own_ns(prev->dur_ns, prev->wait_ns));
}

/* The key of the stream @stream (the call's stream argument) of process @tgid, thread @tid:
 * the legacy stream has two handles (0, CU_STREAM_LEGACY); the per-thread default stream is
 * one per thread. */
static uint64_t stream_key(uint32_t tgid, uint32_t tid, uint64_t stream)
{
	uint64_t k;

	if (stream == 1) /* CU_STREAM_LEGACY */
		stream = 0;
	k = ffm_fnv1a(ffm_fnv1a(FFM_FNV1A_INIT, &tgid, sizeof(tgid)), &stream, sizeof(stream));
	return stream == 2 ? ffm_fnv1a(k, &tid, sizeof(tid)) : k; /* CU_STREAM_PER_THREAD */
}

static int push_busy(struct an_timeline *tl, struct busy b)
{
	if (ffm_grow((void **)&tl->busy, &tl->cap_busy, tl->n_busy + 1, sizeof(*tl->busy)))
		return -ENOMEM;
	tl->busy[tl->n_busy++] = b;
	return 0;
}

/* A wait of @e on one stream (@stream: the call's stream argument) into a->tl->busy. */
static int note_busy(struct an_apply_ctx *a, const struct ffm_event *e, uint32_t tgid,
		     uint64_t stream)
{
	uint64_t end = e->start_ns + e->dur_ns, wait = e->wait_ns < e->dur_ns ? e->wait_ns : e->dur_ns;

	return push_busy(a->tl, (struct busy){ .stream = stream_key(tgid, e->tid, stream),
					       .start = end - wait, .end = end, .tgid = tgid,
					       .tid = e->tid, .ev = (uint32_t)a->tl->n_ev, /* next */
					       .required = e->problem == FFM_PROBLEM_NONE });
}

/*
 * A stream's first work (a copy or memset on it, or a launch of a site the model keeps: one
 * that waited; timeline.c leaves the others out) as an empty interval of a->tl->busy, once per
 * stream: where the stream's work begins, for the bound's head (analysis/bound.c),
 * even where none of its waits is kept (a loop whose only waits are its duplicate copies'
 * own, or staging a pinned buffer removes: the H200's dup_transfer variant was capped at the
 * one wait of its last read, 5% of its saving).
 */
static int note_stream_start(struct an_apply_ctx *a, const struct an_raw *raw,
			     uint32_t tgid)
{
	uint64_t k = stream_key(tgid, raw->tid, raw->stream);

	if (oatab_get_u32(&a->tl->streams, k) != UINT32_MAX)
		return 0;
	if (oatab_put_u32(&a->tl->streams, k, 1))
		return -ENOMEM;
	return push_busy(a->tl, (struct busy){ .stream = k, .start = raw->start_ns,
					       .end = raw->start_ns, .tgid = tgid, .tid = raw->tid,
					       .ev = UINT32_MAX });
}

/* A duplicate transfer that is also a sync problem: the copy part is the duplicate, the wait
 * the sync problem, two model events. */
static int split_duplicate(struct an_apply_ctx *a, struct ffm_event *e)
{
	struct ffm_event cp = *e;
	uint64_t wait = e->wait_ns < e->dur_ns ? e->wait_ns : e->dur_ns;
	int err;

	cp.dur_ns = e->dur_ns - wait;
	cp.wait_ns = 0;
	cp.flags = 0;
	cp.first_use_ns = 0;
	cp.problem = FFM_PROBLEM_DUPLICATE_TRANSFER;
	err = push_event(a, &cp);
	if (err)
		return err;
	e->start_ns += cp.dur_ns;
	e->dur_ns = wait;
	e->kind = FFM_CALL_SYNC;
	e->flags |= FFM_EVENT_SPLIT;
	return 0;
}

/*
 * The probe cost thread @t paid between its first GPU submission since its last sync and the
 * call @r, when @r is a sync (and the thread starts over); 0 otherwise. Where the GPU ran
 * through that span, the program without probes reaches the sync that much earlier and waits
 * that much longer (analysis/hidden.c).
 */
static uint64_t probe_span(struct thread *t, const struct an_raw *r, bool sync, bool submits)
{
	uint64_t span = 0;

	if (r->sub_probe_ns && !t->sub_probe)
		t->sub_probe = r->sub_probe_ns;
	if (sync) {
		if (t->sub_probe && r->probe_ns > t->sub_probe)
			span = r->probe_ns - t->sub_probe;
		t->sub_probe = 0;
	} else if (submits && !t->sub_probe) {
		t->sub_probe = r->probe_ns;
	}
	return span;
}

/*
 * The thread's first GPU submission since its latest removed sync, if @r shows it (a launch
 * left out of the model before @r, or @r itself): how long the GPU idled after that sync's
 * wait (ffm_event.gpu_idle_ns; the model takes it where the GPU ran through the stretch
 * before the wait: analysis/hidden.c). A call's wait is taken to begin where the call does
 * (a stream sync's or a copy's own CPU time before it is a few µs, a copy's staging after
 * it more); a wait record inside the call, where there is one, says where it ended.
 */
static void note_next_submit(struct an_apply_ctx *a, struct thread *t, const struct an_raw *r,
			     bool submits)
{
	uint64_t sub = r->sub_start_ns ? r->sub_start_ns : submits ? r->start_ns : 0;

	if (!t->idle_ev || !sub)
		return;
	/* 0 is "not measured": a submission after the sync's return ends later than its wait */
	a->tl->ev[t->idle_ev - 1].gpu_idle_ns = sub > t->wait_end ? sub - t->wait_end : 1;
	if (a->tl->ev[t->idle_ev - 1].problem == FFM_PROBLEM_HOST_READ && t->read_use_ns >= 0) {
		/* the required-read rule: a use before this submission may have fed it */
		struct ffm_an_site *x = &a->res->sites[t->read_site];

		if (t->wait_end + (uint64_t)t->read_use_ns < sub)
			x->n_use_first++;
		else
			x->n_submit_first++;
	}
	t->idle_ev = 0;
}

/* The problem of occurrence @k of site @site: stage 3/4's verdict, then the rules for calls that
 * did not wait, set-up calls and launches that waited; *dup: it is a duplicate transfer. */
static int event_problem(struct an_apply_ctx *a, uint32_t site, uint64_t k, bool sync_call,
			 struct ffm_event *e, bool *dup, int64_t *use)
{
	struct ffm_an_site *x = &a->res->sites[site];
	struct site_int *si = &a->cat->si[site];
	uint8_t xv = 0;
	int64_t dx;
	int err;

	err = apply_sync_verdict(a, x, si, k, e, use);
	if (err)
		return err;
	if ((!sync_call || si->setup_api) && e->problem != FFM_PROBLEM_NONE) {
		/* A call of a function that waits now and then (a lazy module load in
		 * cuKernelGetFunction, say), which did not wait this time: no sync to remove,
		 * and no sync where a removed wait could land. A set-up call that waited keeps
		 * its wait, whatever stage 3 saw after it: nothing to remove either. */
		e->problem = FFM_PROBLEM_NONE;
		e->first_use_ns = 0;
	}
	/* A launch that waited found the GPU's queue full: not a sync to remove. */
	if (e->wait_ns && (e->kind == FFM_CALL_LAUNCH || si->launch_api))
		e->problem = FFM_PROBLEM_LAUNCH_BLOCKED;
	if ((e->kind == FFM_CALL_TRANSFER || e->kind == FFM_CALL_MEMSET) &&
	    an_verdict_at(&si->x3, k, si->n2, &xv, &dx)) {
		x->n_xclassified++;
		*dup = xv == FFM_DUP_SAME_DST;
	}
	return 0;
}

/* @e, just pushed, is its thread's latest model event; after a removed sync, the thread's next
 * submission is looked for (note_next_submit), with a read's first use (@use, -1: none timed)
 * for the required-read rule. */
static void note_last(struct an_apply *sc, struct thread *t, const struct ffm_event *e,
		      int64_t use)
{
	t->last_ev = sc->a->tl->n_ev;
	t->last_site = sc->last_site;
	if (e->problem != FFM_PROBLEM_UNNECESSARY_SYNC && e->problem != FFM_PROBLEM_HOST_READ)
		return;
	t->idle_ev = sc->a->tl->n_ev;
	t->read_use_ns = use;
	t->read_site = sc->last_site;
}

/* One raw event, in time order: into the model's array with its verdicts. */
static int on_raw_event(void *ctx, const struct an_raw *raw)
{
	struct an_apply *sc = ctx;
	struct an_apply_ctx *a = sc->a;
	struct ffm_analysis_result *res = a->res;
	struct thread *t = thread_of(a, raw->tid, raw->tgid);
	struct ffm_event e = { .start_ns = raw->start_ns, .dur_ns = raw->dur_ns,
			       .wait_ns = raw->wait_ns, .stack_id = (uint64_t)raw->stack,
			       .tid = raw->tid, .api_id = raw->api };
	struct ffm_an_site *x;
	struct site_int *si;
	bool dup = false, sync_call, submits;
	uint64_t k, span = 0;
	int64_t use = -1;
	int err;

	if (!t)
		return -ENOMEM;
	if (raw->kind == FFM_EV_WAIT && raw->start_ns < t->call_end) {
		/* inside a probed call, which carries the wait already */
		t->wait_end = raw->start_ns + raw->dur_ns;
		return 0;
	}
	if (raw->kind != FFM_EV_WAIT && raw->start_ns + raw->dur_ns > t->call_end)
		t->call_end = raw->start_ns + raw->dur_ns;
	t->wait_sum += raw->kind == FFM_EV_WAIT ? raw->dur_ns : raw->wait_ns;
	if (raw->stack != sc->last_stack || sc->last_site == UINT32_MAX) {
		err = an_site_for(a->cat, raw->stack, raw->api, raw->kind, &sc->last_site);
		if (err)
			return err;
		sc->last_stack = raw->stack;
		/* a stack the per-stack totals did not list: model it */
		if (!a->cat->si[sc->last_site].n2)
			a->cat->si[sc->last_site].keep = true;
	}
	x = &res->sites[sc->last_site];
	si = &a->cat->si[sc->last_site];
	if (!si->keep)
		return 0;
	k = si->seen++;

	e.fold_id = x->fold_id;
	e.kind = call_kind(raw->kind);
	sync_call = raw->kind == FFM_EV_WAIT || e.wait_ns || si->explicit_sync;
	if (sync_call)
		e.flags |= FFM_EVENT_SYNC;
	submits = e.kind == FFM_CALL_LAUNCH || e.kind == FFM_CALL_TRANSFER ||
		  e.kind == FFM_CALL_MEMSET;
	note_next_submit(a, t, raw, submits);
	if (e.wait_ns)
		t->wait_end = raw->start_ns + (e.wait_ns < raw->dur_ns ? e.wait_ns : raw->dur_ns);
	if (raw->kind != FFM_EV_WAIT)
		span = probe_span(t, raw, sync_call, submits);
	if (raw->tid != t->tgid)
		e.flags |= FFM_EVENT_WORKER;
	err = event_problem(a, sc->last_site, k, sync_call, &e, &dup, &use);
	if (err)
		return err;
	if (dup && e.problem != FFM_PROBLEM_NONE)
		err = split_duplicate(a, &e);
	else if (dup)
		e.problem = FFM_PROBLEM_DUPLICATE_TRANSFER;
	/* A wait for GPU work that the fix keeps (not a duplicate copy's own transfer). */
	if (!err && si->stream_scoped && e.wait_ns && !dup)
		err = note_busy(a, &e, t->tgid, raw->stream);
	if (!err && submits)
		err = note_stream_start(a, raw, t->tgid);
	if (!err && raw->kind != FFM_EV_WAIT && sync_call) {
		/* A read that waits inside its copy (a .cpu() of a CUDA tensor copies to pageable
		 * memory; its stream sync then finds the GPU done): the copy's wait is the read's,
		 * at every occurrence, whatever this one's verdict (analysis/hidden.c). */
		const struct ffm_event *cp = si->host_read ? read_copy(a, t, &e, sc->last_site) : NULL;
		bool copy = cp && cp->problem == FFM_PROBLEM_NONE;

		if (copy)
			si->copy_site = t->last_site + 1;
		err = an_note_sync(a, sc->last_site, t, raw->start_ns + raw->dur_ns, e.wait_ns,
				   span, copy);
	}
	if (!err)
		e.removed_ns = removed_cpu(a, t, si, &e, sc->last_site);
	if (e.problem == FFM_PROBLEM_UNNECESSARY_SYNC || e.problem == FFM_PROBLEM_HOST_READ)
		si->n_removed++;
	if (!err && a->o->event_verdicts && e.problem != FFM_PROBLEM_NONE) {
		struct an_evv v = { .run = res->run_timeline, .event = raw->event,
				    .delay = e.first_use_ns ? (int64_t)e.first_use_ns : -1,
				    .si = sc->last_site, .what = e.problem, .dup = dup };

		err = an_evv_add(a->evv, &v);
	}
	if (!err)
		err = push_event(a, &e);
	if (!err)
		note_last(sc, t, &e, use);
	return err;
}

/* Before the first event, while the slices read: stage 3/4's verdicts, the event array. */
static int apply_start(void *ctx, uint64_t expected)
{
	struct an_apply *ap = ctx;
	struct an_apply_ctx *a = ap->a;
	int err;

	a->tl->cap_ev = expected + expected / 64 + 64;
	a->tl->ev = malloc(a->tl->cap_ev * sizeof(*a->tl->ev));
	if (!a->tl->ev)
		return -ENOMEM;
	an_phase(a->o->progress, "reading the verdicts of stages 3 and 4");
	err = an_load_verdicts(a);
	return err;
}

struct an_scan_sink an_apply_sink(struct an_apply *ap, struct an_apply_ctx *a)
{
	*ap = (struct an_apply){ .a = a, .last_site = UINT32_MAX };
	return (struct an_scan_sink){ .start = apply_start, .event = on_raw_event, .ctx = ap };
}

/*
 * The required-read rule (ffm_verdict_read_conditional) per host-read site; a conditional read
 * takes its line along: the copy that .item() makes before its stream sync is the read's, and
 * the fix (reading less often) deletes it with the read.
 */
static int decide_conditional(struct ffm_analysis_result *res, const struct site_int *si)
{
	struct oatab lines = OATAB_U32_INIT;
	bool any = false;
	int err = 0;

	for (size_t i = 0; i < res->n_sites && !err; i++) {
		struct ffm_an_site *x = &res->sites[i];

		x->read_conditional =
			si[i].host_read &&
			ffm_verdict_read_conditional(x->n_use_first, x->n_submit_first);
		if (x->read_conditional) {
			any = true;
			err = oatab_put_u32(&lines, an_line_key(x), 1);
		}
	}
	for (size_t i = 0; any && !err && i < res->n_sites; i++)
		if (oatab_get_u32(&lines, an_line_key(&res->sites[i])) != UINT32_MAX)
			res->sites[i].read_conditional = true;
	oatab_free(&lines);
	return err;
}

int an_apply_finish(struct an_apply_ctx *a)
{
	struct ffm_analysis_result *res = a->res;
	int err = an_hidden_waits(a);

	if (!err)
		err = an_dup_cost(a);
	if (err)
		return err;
	res->modelled_events = a->tl->n_ev;
	/* The verdicts are in the events now: give their memory back before the graph. */
	for (size_t i = 0; i < res->n_sites; i++) {
		an_verdicts_fini(&a->cat->si[i].s3);
		an_verdicts_fini(&a->cat->si[i].s4);
		an_verdicts_fini(&a->cat->si[i].x3);
	}
	err = decide_conditional(res, a->cat->si);
	if (err)
		return err;
	for (size_t i = 0; i < a->tl->n_thr; i++) {
		struct ffm_an_proc *p = an_proc_of(res, a->tl->thr[i].tgid);

		if (p)
			p->threads++;
	}
	return 0;
}

void an_apply_fini(struct an_apply_ctx *a)
{
	oatab_free(&a->sync_last);
}
