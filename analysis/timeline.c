/* SPDX-License-Identifier: MIT */
/*
 * Pass "scan the timeline": stage 2's events read in parallel slices, and the run's processes.
 * In: struct an_scan_in (the store, the timeline run, the sites and their occurrence counts).
 * Out: every kept event to the sink in time order; struct an_scan_out (which sites are kept,
 * res's processes and event count, the run's span and its last threads in the timeline).
 */
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
 * sites the model does not need (keep_site(): decided before the scan, read-only while the
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

/* The pass's state: its input, output and the kept sites' stack ids. */
struct scan {
	const struct an_scan_in *in;
	struct an_scan_out *out;
	struct oatab keep_of; /* stack id -> keep_site(), the slices' read-only copy */
};

struct slice {
	const struct scan *sc;
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
	const struct scan *sc = sl->sc;
	struct ffm_store_opts so = { .sz = sizeof(so), .read_only = true };
	struct ffm_store *s = NULL;
	struct ffm_store_cursor *cur = NULL;
	struct ffm_store_event se;
	int err;

	so.immutable = ffm_store__immutable(sc->in->s); /* a published copy: no lock, no side file */
	err = ffm_store__open(ffm_store__path(sc->in->s), &so, &s);
	if (!err)
		err = ffm_store_cursor__new_timing(s, sc->in->run, sl->from, sl->to, &cur);
	while (!err && (err = ffm_store_cursor__next(cur, &se)) == 1) {
		uint32_t keep = oatab_get_u32(&sc->keep_of, (uint64_t)se.stack);

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

/* What the consumer learns of the whole scan: the span of every event (dropped ones
 * included), the threads that called the driver last, how many events the slices read. */
struct scan_sum {
	uint64_t lo, hi;
	struct an_late late;
	uint64_t scanned;
};

static void stop_slices(struct scan_ctl *ctl)
{
	pthread_mutex_lock(&ctl->mu);
	ctl->stop = true;
	pthread_cond_broadcast(&ctl->cv);
	pthread_mutex_unlock(&ctl->mu);
}

/* The next chunk of slice @sl, NULL when it has ended. */
static struct chunk *next_chunk(struct scan_ctl *ctl, struct slice *sl)
{
	struct chunk *c;

	pthread_mutex_lock(&ctl->mu);
	while (!sl->head && !sl->done)
		pthread_cond_wait(&ctl->cv, &ctl->mu);
	c = sl->head;
	if (c) {
		sl->head = c->next;
		if (!sl->head)
			sl->tail = NULL;
		ctl->queued--;
		pthread_cond_broadcast(&ctl->cv);
	}
	pthread_mutex_unlock(&ctl->mu);
	return c;
}

/* Every chunk to the sink in time order: slice by slice, chunk by chunk. */
static int consume(const struct scan *sc, struct scan_ctl *ctl, struct slice *sl, unsigned n,
		   const struct an_scan_sink *sink)
{
	int err = 0;

	for (unsigned i = 0; i < n && !err; i++) {
		struct chunk *c;

		while (!err && (c = next_chunk(ctl, &sl[i]))) {
			for (size_t k = 0; k < c->n && !err; k++)
				err = sink->event(sink->ctx, &c->ev[k]);
			an_progress_add(sc->in->progress, c->n, 0);
			pthread_mutex_lock(&ctl->mu);
			c->next = ctl->free;
			ctl->free = c;
			if (err)
				ctl->stop = true;
			pthread_mutex_unlock(&ctl->mu);
		}
	}
	return err;
}

/* Join the slices, add up what they saw into @sum, free their chunks. */
static int join_slices(struct scan_ctl *ctl, struct slice *sl, unsigned n, struct scan_sum *sum,
		       int err)
{
	for (unsigned i = 0; i < n; i++) {
		if (sl[i].started)
			pthread_join(sl[i].th, NULL);
		if (!err && sl[i].err)
			err = sl[i].err;
		sum->scanned += sl[i].scanned;
		if (sl[i].lo < sum->lo)
			sum->lo = sl[i].lo;
		if (sl[i].hi > sum->hi)
			sum->hi = sl[i].hi;
		for (int k = 0; k < 2; k++)
			late_note(&sum->late, sl[i].late.tid[k], sl[i].late.end[k]);
		for (struct chunk *c = sl[i].head, *next; c; c = next) {
			next = c->next;
			free(c);
		}
		free(sl[i].cur);
	}
	for (struct chunk *c = ctl->free, *next; c; c = next) {
		next = c->next;
		free(c);
	}
	return err;
}

/* How many slices: opts.scan_threads, else by the events expected and the CPUs. */
static unsigned slice_count(const struct an_scan_in *in, uint64_t expected, uint64_t lo,
			    uint64_t hi)
{
	unsigned n = in->scan_threads;

	if (!n) {
		long cpus = sysconf(_SC_NPROCESSORS_ONLN);
		/* the event array's capacity, as sized for the model before the scan */
		uint64_t cap = expected + expected / 64 + 64;

		/* More than one slice pays off for big runs only (a connection each). */
		n = cap < 1000000 ? 1 : cpus > 4 ? 4 : cpus > 1 ? (unsigned)cpus : 1;
	}
	if (n > 64)
		n = 64;
	if (hi <= lo + n)
		n = 1;
	return n;
}

static int scan_slices(struct scan *sc, const struct an_scan_sink *sink, uint64_t expected,
		       uint64_t lo, uint64_t hi, struct scan_sum *sum)
{
	struct scan_ctl ctl = { .mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER };
	unsigned n = slice_count(sc->in, expected, lo, hi);
	struct slice *sl = calloc(n, sizeof(*sl));
	int err = 0;

	if (!sl)
		return -ENOMEM;
	for (unsigned i = 0; i < n; i++) {
		uint64_t span = (hi - lo) / n;

		sl[i].sc = sc;
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
	/* What the sink needs before the first event loads while the slices read. */
	if (sink->start)
		err = sink->start(sink->ctx, expected);
	an_phase(sc->in->progress, "reading the timeline");
	an_progress_add(sc->in->progress, 0, expected);
	if (err)
		stop_slices(&ctl);
	else
		err = consume(sc, &ctl, sl, n, sink);
	err = join_slices(&ctl, sl, n, sum, err);
	free(sl);
	return err;
}

struct proc_scan {
	struct an_scan_out *out;
	size_t cap;
	uint64_t lo, hi;
};

static int on_process(const struct ffm_store_process *p, void *ctx)
{
	struct proc_scan *ps = ctx;
	struct ffm_analysis_result *res = ps->out->res;
	struct ffm_an_proc *x;

	if (ffm_grow((void **)&res->procs, &ps->cap, res->n_procs + 1, sizeof(*res->procs)))
		return -ENOMEM;
	x = &res->procs[res->n_procs++];
	*x = (struct ffm_an_proc){ .tgid = p->tgid, .start_ns = p->start_ns, .end_ns = p->end_ns };
	x->exe = an_pool_dup(ps->out->pool, p->exe, "?");
	return x->exe ? 0 : -ENOMEM;
}

/*
 * Whether a site's events go into the model. A call that neither waits nor has a problem is CPU
 * time between syncs to Figure 5, whether it is a CLaunch or CWork node: both count as time the
 * GPU may idle, nothing else reads them. Left out, they become part of the gap the model fills
 * with CWork, with the same durations, so every benefit is exactly the same while the event
 * array and the graph shrink by the launches (most of a CUDA program's calls). Kept: explicit
 * syncs and wait-function events, any site that waited, any site with a stage 3/4 verdict.
 */
static bool keep_site(const struct ffm_an_site *x)
{
	/* Decided from stage 2's per-stack totals alone, so the scan can start before stage 3's
	 * verdicts are loaded: every sync can get a sync verdict, every copy or memset a
	 * duplicate one, every allocation that repeats a temporary buffer's (reuse.c). */
	return x->kind == FFM_EV_API || x->kind == FFM_EV_WAIT || x->wait_ns ||
	       x->kind == FFM_EV_TRANSFER || x->kind == FFM_EV_MEMSET ||
	       (x->kind == FFM_EV_ALLOC && x->count >= AN_REUSE_MIN_PAIRS);
}

/* The sites whose events the slices hand over (keep_site()); how many events that makes. */
static int keep_sites(struct scan *sc, uint64_t *total)
{
	const struct an_scan_in *in = sc->in;
	struct site_int *si = sc->out->si;

	*total = 0;
	for (size_t i = 0; i < in->n_sites; i++) {
		int err;

		si[i].keep = keep_site(&in->sites[i]);
		if (si[i].keep)
			*total += si[i].n2;
		err = oatab_put_u32(&sc->keep_of, (uint64_t)in->sites[i].stack, si[i].keep);
		if (err)
			return err;
	}
	return 0;
}

static int scan_run(struct scan *sc, const struct an_scan_sink *sink)
{
	const struct an_scan_in *in = sc->in;
	struct an_scan_out *out = sc->out;
	struct ffm_analysis_result *res = out->res;
	struct proc_scan ps = { .out = out };
	struct scan_sum sum = { .lo = UINT64_MAX };
	uint64_t total, lo, hi, run_lo = 0, run_hi = 0;
	int err = keep_sites(sc, &total);

	if (err)
		return err;
	/* The slices split the run's time: its processes' span, else the run's own. */
	err = ffm_store__for_each_process(in->s, in->run, on_process, &ps);
	if (err)
		return err < 0 ? err : -EIO;
	for (size_t i = 0; i < in->n_runs; i++)
		if (in->runs[i].id == in->run) {
			run_lo = in->runs[i].start_ns;
			run_hi = in->runs[i].end_ns;
		}
	/* The processes' lifetime, as the run's stored wall time (one definition: a process that
	 * did not exit ends with the run). */
	err = ffm_store__run_procs_span(in->s, in->run, run_hi, &ps.lo, &ps.hi);
	if (err)
		return err;
	if (!ps.hi || !ps.lo)
		ps.lo = UINT64_MAX;
	lo = ps.lo == UINT64_MAX ? run_lo : ps.lo;
	hi = ps.hi ? ps.hi : run_hi;
	err = scan_slices(sc, sink, total, lo == UINT64_MAX ? 0 : lo, hi, &sum);
	res->events += sum.scanned;
	if (err)
		return err;
	for (size_t i = 0; i < res->n_procs; i++) {
		struct ffm_an_proc *p = &res->procs[i];

		if (!p->end_ns)
			p->end_ns = ps.hi;
	}
	/* The run: its processes' lifetimes, at least every event's span. */
	out->tl->run_start_ns = ps.lo < sum.lo ? ps.lo : sum.lo != UINT64_MAX ? sum.lo : 0;
	out->tl->run_end_ns = ps.hi > sum.hi ? ps.hi : sum.hi;
	out->tl->late = sum.late;
	return 0;
}

int an_scan_timeline(const struct an_scan_in *in, const struct an_scan_sink *sink,
		     struct an_scan_out *out)
{
	struct scan sc = { .in = in, .out = out, .keep_of = OATAB_U32_INIT };
	int err = scan_run(&sc, sink);

	oatab_free(&sc.keep_of);
	return err;
}
