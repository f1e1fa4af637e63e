/* SPDX-License-Identifier: MIT */
/* Reading the timeline (stage 2's events) in parallel slices, and the run's processes. */
#include <errno.h>
#include <pthread.h>
#include <unistd.h>

#include "analysis/analysis_int.h"

/*
 * The timeline is read in P time slices in parallel (SQLite's row decoding is most of a big
 * report's time), each slice by a thread with its own read-only connection, into chunks of "raw"
 * events (struct an_raw: the model's event with the store's fields it lacks beside it). The
 * calling thread meanwhile turns the chunks into model events in time order (slice by slice,
 * chunk by chunk, as they arrive) and hands each chunk back for reuse, so the scan and the
 * conversion overlap and few chunk pages are ever faulted in. The slices only drop events of
 * sites the model does not need (an_keep_site(): decided before the scan, read-only while the
 * threads run); everything that depends on order (occurrence counts, nested waits) happens in
 * the calling thread.
 */
#define CHUNK_EVENTS 32768

struct chunk {
	struct chunk *next;
	size_t n;
	struct an_raw ev[CHUNK_EVENTS];
};

/* Chunks queued and not yet consumed, at most: while the calling thread loads stage 3's
 * verdicts the slices run ahead, by at most this much memory (128 × 2.75 MiB). */
#define MAX_QUEUED 128

struct scan_ctl {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct chunk *free; /* chunks handed back */
	unsigned queued;
	bool stop;	    /* the consumer failed: producers end early */
};

struct slice {
	struct ffm_analysis *a;
	struct scan_ctl *ctl;
	pthread_t th;
	bool started, done; /* done: no more chunks will be queued */
	uint64_t from, to;  /* cursor bounds: start_ns in [from, to], to 0 = none */
	struct chunk *head, *tail; /* queued for the consumer */
	struct chunk *cur;	   /* being filled */
	uint64_t scanned, lo, hi;
	struct an_late late;
	/* per thread: the probe cost at the first launch left out since its last kept event
	 * (struct an_raw.sub_probe_ns) */
	struct oatab sub_of;
	int err;
};

struct sub_ent {
	struct oa_key k; /* (tid, 0) */
	uint64_t probe_ns, start_ns;
};

static struct chunk *chunk_get(struct scan_ctl *ctl)
{
	struct chunk *c;

	pthread_mutex_lock(&ctl->mu);
	c = ctl->free;
	if (c)
		ctl->free = c->next;
	pthread_mutex_unlock(&ctl->mu);
	if (!c)
		c = malloc(sizeof(*c));
	if (c) {
		c->next = NULL;
		c->n = 0;
	}
	return c;
}

/* Queue the chunk being filled (if any) and, with done, say the slice has ended. */
static bool slice_flush(struct slice *sl, bool done)
{
	struct scan_ctl *ctl = sl->ctl;
	bool stop;

	pthread_mutex_lock(&ctl->mu);
	if (sl->cur) {
		if (sl->tail)
			sl->tail->next = sl->cur;
		else
			sl->head = sl->cur;
		sl->tail = sl->cur;
		sl->cur = NULL;
		ctl->queued++;
	}
	pthread_cond_broadcast(&ctl->cv);
	while (!done && !ctl->stop && ctl->queued >= MAX_QUEUED)
		pthread_cond_wait(&ctl->cv, &ctl->mu);
	if (done)
		sl->done = true;
	stop = ctl->stop;
	pthread_cond_broadcast(&ctl->cv);
	pthread_mutex_unlock(&ctl->mu);
	return stop;
}

/* Note an event of thread @tid that ended at @end in @l (struct an_late). */
static void late_note(struct an_late *l, uint32_t tid, uint64_t end)
{
	if (tid == l->tid[0]) {
		if (end > l->end[0])
			l->end[0] = end;
	} else if (end > l->end[0]) {
		/* the old first is the latest of every thread but @tid */
		l->end[1] = l->end[0];
		l->tid[1] = l->tid[0];
		l->end[0] = end;
		l->tid[0] = tid;
	} else if (end > l->end[1]) {
		l->end[1] = end;
		l->tid[1] = tid;
	}
}

static void *scan_slice(void *arg)
{
	struct slice *sl = arg;
	struct ffm_analysis *a = sl->a;
	struct ffm_store_opts so = { .sz = sizeof(so), .read_only = true };
	struct ffm_store *s = NULL;
	struct ffm_store_cursor *cur = NULL;
	struct ffm_store_event se;
	int err;

	so.immutable = ffm_store__immutable(a->s); /* a published copy: no lock, no side file */
	err = ffm_store__open(ffm_store__path(a->s), &so, &s);
	if (!err)
		err = ffm_store_cursor__new_timing(s, a->res.run_timeline, sl->from, sl->to, &cur);
	while (!err && (err = ffm_store_cursor__next(cur, &se)) == 1) {
		uint32_t keep = oatab_get_u32(&a->keep_of, (uint64_t)se.stack);

		err = 0;
		sl->scanned++;
		if (se.start_ns < sl->lo)
			sl->lo = se.start_ns;
		if (se.start_ns + se.dur_ns > sl->hi)
			sl->hi = se.start_ns + se.dur_ns;
		late_note(&sl->late, se.tid, se.start_ns + se.dur_ns);
		if (!keep) {
			/* A launch, left out of the model; where the next sync's hidden wait
			 * starts (analysis/hidden.c), or the GPU's idle time after the last one
			 * ends (events.c, note_next_submit), may be here. */
			if (se.kind == FFM_EV_LAUNCH) {
				struct sub_ent *x = oatab_find(&sl->sub_of, se.tid, 0, true);

				if (x && !x->probe_ns)
					x->probe_ns = se.probe_ns;
				if (x && !x->start_ns)
					x->start_ns = se.start_ns;
			}
			continue;
		}
		if (sl->cur && sl->cur->n == CHUNK_EVENTS && slice_flush(sl, false))
			break;
		if (!sl->cur && !(sl->cur = chunk_get(sl->ctl))) {
			err = -ENOMEM;
			break;
		}
		{
			struct sub_ent *x = oatab_get(&sl->sub_of, se.tid, 0);
			struct an_raw *r = &sl->cur->ev[sl->cur->n++];

			*r = (struct an_raw){
				.start_ns = se.start_ns, .dur_ns = se.dur_ns,
				.wait_ns = se.kind == FFM_EV_WAIT ? se.dur_ns : se.wait_ns,
				.stack = se.stack, .event = se.id, .stream = se.stream,
				.probe_ns = se.probe_ns,
				.sub_probe_ns = x ? x->probe_ns : 0,
				.sub_start_ns = x ? x->start_ns : 0,
				.tid = se.tid, .tgid = se.tgid, .api = se.api, .kind = se.kind,
			};
			if (x)
				x->probe_ns = x->start_ns = 0;
		}
	}
	oatab_free(&sl->sub_of);
	ffm_store_cursor__free(cur);
	ffm_store__free(s);
	sl->err = err;
	slice_flush(sl, true);
	return NULL;
}

int an_scan_slices(struct ffm_analysis *a, struct ev_scan *sc, uint64_t lo, uint64_t hi)
{
	struct scan_ctl ctl = { .mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER };
	unsigned n = a->o.scan_threads;
	struct slice *sl;
	int err = 0;

	if (!n) {
		long cpus = sysconf(_SC_NPROCESSORS_ONLN);

		/* More than one slice pays off for big runs only (a connection each). */
		n = a->cap_ev < 1000000 ? 1 : cpus > 4 ? 4 : cpus > 1 ? (unsigned)cpus : 1;
	}
	if (n > 64)
		n = 64;
	if (hi <= lo + n)
		n = 1;
	sl = calloc(n, sizeof(*sl));
	if (!sl)
		return -ENOMEM;
	for (unsigned i = 0; i < n; i++) {
		uint64_t span = (hi - lo) / n;

		sl[i].a = a;
		sl[i].ctl = &ctl;
		sl[i].sub_of = OATAB_INIT(struct sub_ent);
		sl[i].lo = UINT64_MAX;
		sl[i].from = i ? lo + span * i : 0;
		sl[i].to = i + 1 < n ? lo + span * (i + 1) - 1 : 0;
		if (pthread_create(&sl[i].th, NULL, scan_slice, &sl[i])) {
			sl[i].err = -EAGAIN;
			sl[i].done = true;
		} else {
			sl[i].started = true;
		}
	}
	/* Stage 3/4's verdicts load while the slices read the timeline. */
	an_phase(a, "reading the verdicts of stages 3 and 4");
	err = an_load_verdicts(a);
	an_phase(a, "reading the timeline");
	an_progress_add(a, 0, sc->expected);
	if (err) {
		pthread_mutex_lock(&ctl.mu);
		ctl.stop = true;
		pthread_cond_broadcast(&ctl.cv);
		pthread_mutex_unlock(&ctl.mu);
	}
	/* Consume in time order: slice by slice, chunk by chunk. */
	for (unsigned i = 0; i < n && !err; i++) {
		for (;;) {
			struct chunk *c;

			pthread_mutex_lock(&ctl.mu);
			while (!sl[i].head && !sl[i].done)
				pthread_cond_wait(&ctl.cv, &ctl.mu);
			c = sl[i].head;
			if (c) {
				sl[i].head = c->next;
				if (!sl[i].head)
					sl[i].tail = NULL;
				ctl.queued--;
				pthread_cond_broadcast(&ctl.cv);
			}
			pthread_mutex_unlock(&ctl.mu);
			if (!c)
				break;
			for (size_t k = 0; k < c->n && !err; k++)
				err = an_on_raw_event(sc, &c->ev[k]);
			an_progress_add(a, c->n, 0);
			pthread_mutex_lock(&ctl.mu);
			c->next = ctl.free;
			ctl.free = c;
			if (err)
				ctl.stop = true;
			pthread_mutex_unlock(&ctl.mu);
			if (err)
				break;
		}
		if (err)
			break;
	}
	for (unsigned i = 0; i < n; i++) {
		if (sl[i].started)
			pthread_join(sl[i].th, NULL);
		if (!err && sl[i].err)
			err = sl[i].err;
		a->res.events += sl[i].scanned;
		if (sl[i].lo < sc->lo)
			sc->lo = sl[i].lo;
		if (sl[i].hi > sc->hi)
			sc->hi = sl[i].hi;
		for (int k = 0; k < 2; k++)
			late_note(&sc->late, sl[i].late.tid[k], sl[i].late.end[k]);
		for (struct chunk *c = sl[i].head, *next; c; c = next) {
			next = c->next;
			free(c);
		}
		free(sl[i].cur);
	}
	for (struct chunk *c = ctl.free, *next; c; c = next) {
		next = c->next;
		free(c);
	}
	free(sl);
	return err;
}

struct proc_scan {
	struct ffm_analysis *a;
	size_t cap;
	uint64_t lo, hi;
};

static int on_process(const struct ffm_store_process *p, void *ctx)
{
	struct proc_scan *ps = ctx;
	struct ffm_analysis_result *res = &ps->a->res;
	struct ffm_an_proc *x;

	if (ffm_grow((void **)&res->procs, &ps->cap, res->n_procs + 1, sizeof(*res->procs)))
		return -ENOMEM;
	x = &res->procs[res->n_procs++];
	*x = (struct ffm_an_proc){ .tgid = p->tgid, .start_ns = p->start_ns, .end_ns = p->end_ns };
	x->exe = an_pool_dup(&ps->a->pool, p->exe, "?");
	return x->exe ? 0 : -ENOMEM;
}

struct ffm_an_proc *an_proc_of(struct ffm_analysis_result *res, uint32_t tgid)
{
	/* The latest process of that tgid (a tgid may be reused within a run). */
	for (size_t i = res->n_procs; i-- > 0;)
		if (res->procs[i].tgid == tgid)
			return &res->procs[i];
	return NULL;
}

int an_load_timeline(struct ffm_analysis *a)
{
	struct ffm_analysis_result *res = &a->res;
	struct proc_scan ps = { .a = a };
	struct ev_scan sc = { .a = a, .last_site = UINT32_MAX };
	struct ffm_graph_opts go = { 0 };
	uint64_t total = 0;
	int err;

	for (size_t i = 0; i < res->n_sites; i++) {
		a->si[i].keep = an_keep_site(&res->sites[i]);
		if (a->si[i].keep)
			total += a->si[i].n2;
		err = oatab_put_u32(&a->keep_of, (uint64_t)res->sites[i].stack, a->si[i].keep);
		if (err)
			return err;
	}
	sc.lo = UINT64_MAX;
	sc.expected = total;
	a->cap_ev = total + total / 64 + 64;
	a->ev = malloc(a->cap_ev * sizeof(*a->ev));
	if (!a->ev)
		return -ENOMEM;
	/* The slices split the run's time: its processes' span, else the run's own. */
	err = ffm_store__for_each_process(a->s, res->run_timeline, on_process, &ps);
	if (err)
		return err < 0 ? err : -EIO;
	{
		uint64_t lo = ps.lo, hi = ps.hi, run_lo = 0, run_hi = 0;

		for (size_t i = 0; i < res->n_runs; i++)
			if (res->runs[i].id == res->run_timeline) {
				run_lo = res->runs[i].start_ns;
				run_hi = res->runs[i].end_ns;
			}
		/* The processes' lifetime, as the run's stored wall time (one definition: a
		 * process that did not exit ends with the run). */
		err = ffm_store__run_procs_span(a->s, res->run_timeline, run_hi, &ps.lo, &ps.hi);
		if (err)
			return err;
		if (!ps.hi || !ps.lo)
			ps.lo = UINT64_MAX;
		lo = ps.lo == UINT64_MAX ? run_lo : ps.lo;
		hi = ps.hi ? ps.hi : run_hi;
		err = an_scan_slices(a, &sc, lo == UINT64_MAX ? 0 : lo, hi);
		if (!err)
			err = an_hidden_waits(a);
		if (!err)
			err = an_dup_cost(a);
		if (err)
			return err;
	}
	res->modelled_events = a->n_ev;
	/* The verdicts are in the events now: give their memory back before the graph. */
	for (size_t i = 0; i < res->n_sites; i++) {
		an_verdicts_fini(&a->si[i].s3);
		an_verdicts_fini(&a->si[i].s4);
		an_verdicts_fini(&a->si[i].x3);
	}
	for (size_t i = 0; i < res->n_procs; i++) {
		struct ffm_an_proc *p = &res->procs[i];

		if (!p->end_ns)
			p->end_ns = ps.hi;
	}
	for (size_t i = 0; i < a->n_thr; i++) {
		struct ffm_an_proc *p = an_proc_of(res, a->thr[i].tgid);

		if (p)
			p->threads++;
	}
	/* The run: its processes' lifetimes, at least every event's span. */
	go.run_start_ns = ps.lo < sc.lo ? ps.lo : sc.lo != UINT64_MAX ? sc.lo : 0;
	go.run_end_ns = ps.hi > sc.hi ? ps.hi : sc.hi;
	a->run_start_ns = go.run_start_ns;
	a->run_end_ns = go.run_end_ns;
	a->late = sc.late;
	an_phase(a, "modelling");
	err = ffm_graph__build(a->ev, a->n_ev, &go, &a->g);
	if (err)
		return err;
	err = an_run_model(a);
	if (err)
		return err;
	err = an_evidence(a);
	if (err)
		return err;
	if (!a->o.keep_graph) {
		a->g = ffm_graph__free(a->g);
		free(a->ev);
		a->ev = NULL;
	}
	return 0;
}
