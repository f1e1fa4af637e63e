/* SPDX-License-Identifier: MIT */
/*
 * Adaptive stage 1 for ffmd's per-process probes: each process of a stage-1 job (a baseline or
 * a monitoring run) gets a sampler (stages/ffm_sampling.h) fed by its wait records; this file
 * keeps the sampler, the process's set of (stack, driver function) keys, and writes the spans
 * and windows it sampled into the run's store. Taking the wait probe off and putting it back
 * is links.c's (plinks_sample_tick), which asks here what each process needs.
 *
 * Time: the records' own clock (bpf_ktime_get_ns, CLOCK_MONOTONIC) for the waits, ffmd's
 * (ffm_now_ns, the same clock) for the windows: a window is [the moment its probe was in
 * place, the moment its detach was queued). A span begins with the stable part of the full
 * phase before it (from the last new key, or the phase's start, to the first detach), stored
 * as its first window: the process may end before its next window, and the waits of those
 * seconds stand for it as well as a window's. A wait belongs to the window it began in; one
 * that ends while the detacher is still taking the probe off is recorded whole (the detach
 * takes an RCU grace period, tens of ms), one that outlasts it is lost with the link (BPF
 * forgets its entry, struct ffm_proc.link_epoch).
 *
 * Bounded: at most MAX_SAMPLE_KEYS keys per process; past that every wait counts as new, so
 * a process with endless distinct stacks is traced in full, never sampled on a partial set.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/oatab.h"
#include "daemon/ffmd_int.h"
#include "daemon/jobrun.h"
#include "daemon/log.h"
#include "stages/ffm_sampling.h"
#include "store/ffm_store.h"

#define MAX_SAMPLE_KEYS 65536

struct psample {
	struct ffm_sampler s;
	struct oatab keys;	/* struct oa_key: (stack key, driver function + 1) */
	struct ffm_jobrun *jr;	/* the run the rows go to */
	int job;
	uint64_t span_ns, win_ns; /* the open span's and window's starts (0: none) */
	uint64_t span_on_ns;	  /* window time in the open span so far */
	/* How long waits still come after a detach is queued (the probe's breakpoints go before
	 * the detach's grace period ends): the latest start after off_ns in this off time, and the
	 * sum and number of those lags (the sampler's switch_s is their mean). */
	uint64_t off_ns, lag_ns, lag_sum_ns;
	uint32_t lag_n;
	/* ... and before a window: the attach's time (the probe works before it returns). */
	uint64_t att_ns, lead_sum_ns;
	uint32_t lead_n;
};

/* The probe's time on outside the windows, per window: the sampler pays it as traced time. */
static void set_switch(struct psample *ps)
{
	ps->s.cfg.switch_s = (ps->lag_n ? (double)ps->lag_sum_ns / ps->lag_n : 0) / 1e9 +
			     (ps->lead_n ? (double)ps->lead_sum_ns / ps->lead_n : 0) / 1e9;
}

/* A job whose processes may be sampled: stage 1 (a baseline or monitoring run), per-process
 * probes. Whether a process starts sampling is the budget's say (at its first wait). */
static bool job_stage1(const struct ffmd *d, int job)
{
	/* Not a monitoring run that times copies (stages/ffm_plan.h): a copy's own time is its
	 * call less its waits, which a window without the wait probe would not see, and the
	 * analysis prices copies from whole runs only. */
	return job >= 0 && d->jobs[job].used && d->jobs[job].jr && d->jobs[job].stage == 1 &&
	       !ffm_plan__times_copies(ffm_jobrun__plan(d->jobs[job].jr)) &&
	       ffm_collector__per_process(d->col);
}

static void put(struct ffmd *d, struct psample *ps, uint32_t tgid, uint32_t kind, uint64_t a,
		uint64_t b, uint64_t on)
{
	struct ffm_store_sample x = { .tgid = tgid, .kind = kind, .start_ns = a, .end_ns = b,
				      .on_ns = on };
	int err;

	if (ps->job < 0 || d->jobs[ps->job].jr != ps->jr)
		return; /* its run is over: the rows written so far stand */
	err = ffm_store__put_sample(ffm_jobrun__store(ps->jr), ffm_jobrun__run_id(ps->jr), &x);
	if (err < 0)
		log_err("job %s: storing a sampled span failed: %s", d->jobs[ps->job].id, strerror(-err));
}

/* The open window ends at @t: its row, and the span's row grown to @t. */
static void window_close(struct ffmd *d, struct plink *pl, uint64_t t)
{
	struct psample *ps = pl->smp;

	if (ps->win_ns && t >= ps->win_ns) {
		put(d, ps, (uint32_t)pl->pid, FFM_SAMPLE_WINDOW, ps->win_ns, t, t - ps->win_ns);
		ps->span_on_ns += t - ps->win_ns;
	}
	ps->win_ns = 0;
	if (ps->span_ns)
		put(d, ps, (uint32_t)pl->pid, FFM_SAMPLE_SPAN, ps->span_ns, t, ps->span_on_ns);
}

static void span_close(struct ffmd *d, struct plink *pl, uint64_t t)
{
	window_close(d, pl, t);
	pl->smp->span_ns = 0;
	pl->smp->span_on_ns = 0;
}

static struct psample *psample_new(struct ffmd *d, int job, double now)
{
	struct psample *ps = calloc(1, sizeof(*ps));
	struct ffm_sampling_cfg c;

	if (!ps)
		return NULL;
	ffm_sampling__defaults(&c);
	c.budget = d->cfg.sample_budget;
	c.wait_cost_ns = d->cfg.wait_cost_us * 1000;
	ffm_sampler__init(&ps->s, &c, now);
	ps->keys = OATAB_INIT(struct oa_key);
	ps->job = job;
	ps->jr = d->jobs[job].jr;
	return ps;
}

/* A process with probes on two driver files is traced in full: one sampler cannot tell whose
 * probe a wait came through. */
static bool two_drivers(const struct ffmd *d, const struct plink *pl)
{
	for (int i = 0; i < MAX_PLINKS; i++)
		if (d->plinks[i].pid == pl->pid && &d->plinks[i] != pl)
			return true;
	return false;
}

void sample_on_wait(struct ffmd *d, int job, const struct ffm_rec_wait *w)
{
	double t = w->hdr.ts_ns / 1e9;
	struct plink *pl = NULL;
	bool fresh = true;

	if (!job_stage1(d, job))
		return;
	/* Records come in runs of one process: the last one found is looked at first. */
	if (d->plinks[d->sample_hint].pid == (pid_t)w->hdr.tgid)
		pl = &d->plinks[d->sample_hint];
	for (int i = 0; i < MAX_PLINKS && !pl; i++)
		if (d->plinks[i].pid == (pid_t)w->hdr.tgid) {
			pl = &d->plinks[i];
			d->sample_hint = i;
		}
	if (!pl || (!pl->smp && d->cfg.sample_budget <= 0))
		return;
	if (!pl->smp && (two_drivers(d, pl) || !(pl->smp = psample_new(d, job, t))))
		return;
	if (pl->smp->keys.n < MAX_SAMPLE_KEYS) {
		size_t n = pl->smp->keys.n;

		/* the key is never (0, 0): its second word is at least 1 */
		fresh = oatab_find(&pl->smp->keys, w->stack_key, (uint64_t)w->api_id + 1, true) &&
			pl->smp->keys.n > n;
	}
	if (pl->smp->s.mode == FFM_SAMPLER_OFF && pl->smp->off_ns && w->start_ns > pl->smp->off_ns &&
	    w->start_ns - pl->smp->off_ns > pl->smp->lag_ns)
		pl->smp->lag_ns = w->start_ns - pl->smp->off_ns;
	if (ffm_sampler__wait(&pl->smp->s, t, fresh)) {
		span_close(d, pl, w->hdr.ts_ns);
		log_info("process %d: a new call site in a sampling window: traced in full again", pl->pid);
	}
}

/* A wait record of job @job's process @tgid, read after sample_on_wait: its price (the node's
 * wait_cost_us), by how it was traced: in a sampling window, or in full (learning, a window
 * with a new key, a job not sampled). */
void sample_overhead_wait(struct ffmd *d, int job, uint32_t tgid)
{
	const struct plink *pl = &d->plinks[d->sample_hint];
	bool sampled = pl->pid == (pid_t)tgid && pl->smp && pl->smp->s.mode != FFM_SAMPLER_FULL;

	ffm_overhead_add(job_overhead(d, job),
			 sampled ? FFM_OVERHEAD_WAITS_SAMPLED : FFM_OVERHEAD_WAITS_FULL,
			 (uint64_t)(d->cfg.wait_cost_us * 1000));
}

enum ffm_sampler_action sample_tick(struct ffmd *d, struct plink *pl, double now)
{
	struct psample *ps = pl->smp;
	enum ffm_sampler_mode was;
	enum ffm_sampler_action a;
	uint64_t t = (uint64_t)(now * 1e9);

	if (!ps)
		return FFM_SAMPLER_NONE;
	was = ps->s.mode;
	a = ffm_sampler__tick(&ps->s, now);
	if (was == FFM_SAMPLER_OFF && a == FFM_SAMPLER_ATTACH && ps->off_ns) {
		ps->lag_sum_ns += ps->lag_ns;
		ps->lag_n++;
		set_switch(ps);
		ps->off_ns = ps->lag_ns = 0;
	}
	if (a == FFM_SAMPLER_ATTACH)
		ps->att_ns = t;
	if (a == FFM_SAMPLER_DETACH)
		ps->off_ns = t;
	if (a == FFM_SAMPLER_DETACH && was == FFM_SAMPLER_FULL) {
		/* The span begins with the stable part of the full phase, since the last new key:
		 * its first window, so that no span lacks one (a process may end before the next). */
		double from = ps->s.last_new > ps->s.full_since ? ps->s.last_new : ps->s.full_since;

		ps->span_ns = ps->win_ns = (uint64_t)(from * 1e9);
		ps->span_on_ns = 0;
		window_close(d, pl, t);
	} else if (a == FFM_SAMPLER_DETACH) {
		window_close(d, pl, t);
	} else if (a == FFM_SAMPLER_ATTACH && ps->s.mode == FFM_SAMPLER_FULL && ps->span_ns) {
		/* (A release closed its span already, at its own time.) */
		span_close(d, pl, t);
		log_info("process %d: a new call site after a sampling window: traced in full again", pl->pid);
	}
	return a;
}

void sample_attached(struct ffmd *d, struct plink *pl, bool ok)
{
	if (!pl->smp)
		return;
	if (!ok) {
		/* No window this time: the span goes on, the next one is tried at the next tick. */
		pl->smp->s.mode = FFM_SAMPLER_OFF;
		return;
	}
	ffm_collector__link_epoch(d->col, pl->pid);
	if (pl->smp->s.mode == FFM_SAMPLER_ON) {
		pl->smp->win_ns = ffm_now_ns();
		if (pl->smp->att_ns && pl->smp->win_ns > pl->smp->att_ns) {
			pl->smp->lead_sum_ns += pl->smp->win_ns - pl->smp->att_ns;
			pl->smp->lead_n++;
			set_switch(pl->smp);
		}
	}
}

void sample_exit(struct ffmd *d, pid_t pid, uint64_t t)
{
	for (int i = 0; i < MAX_PLINKS; i++) {
		struct plink *pl = &d->plinks[i];

		if (pl->pid == pid && pl->smp && pl->smp->span_ns && t >= pl->smp->span_ns)
			span_close(d, pl, t);
	}
}

/* Process @pid entered a context release at @t: its work with that context is over, the span
 * ends there (ffm_sampler__release); it is traced in full from then on. */
void sample_release(struct ffmd *d, pid_t pid, uint64_t t)
{
	for (int i = 0; i < MAX_PLINKS; i++) {
		struct plink *pl = &d->plinks[i];

		if (pl->pid != pid || !pl->smp || !ffm_sampler__release(&pl->smp->s, t / 1e9))
			continue;
		if (pl->smp->span_ns && t >= pl->smp->span_ns) {
			span_close(d, pl, t);
			log_info("process %d releases a context: its sampled span ends, traced in full", pid);
		}
	}
}

void sample_end(struct ffmd *d, struct plink *pl)
{
	if (!pl->smp)
		return;
	if (pl->smp->span_ns)
		span_close(d, pl, ffm_now_ns());
	oatab_free(&pl->smp->keys);
	free(pl->smp);
	pl->smp = NULL;
}

/* The status of @job's sampling: processes sampled now, retraced, the cost estimate. */
void sample_job_status(struct ffmd *d, int job, struct sample_status *st)
{
	memset(st, 0, sizeof(*st));
	for (int i = 0; i < MAX_PLINKS; i++) {
		const struct psample *ps = d->plinks[i].smp;

		if (!d->plinks[i].pid || !ps || ps->job != job)
			continue;
		st->procs++;
		st->sampling += ps->s.mode != FFM_SAMPLER_FULL;
		st->retraced += ps->s.retraced;
		st->rate += ps->s.rate;
		st->cost += ffm_sampling__cost(&ps->s.cfg, ps->s.rate,
					       ps->s.mode == FFM_SAMPLER_FULL ? 1 : ps->s.duty);
		st->lag += ps->s.cfg.switch_s;
	}
	if (st->procs) {
		st->cost /= st->procs;
		st->lag /= st->procs;
	}
}
