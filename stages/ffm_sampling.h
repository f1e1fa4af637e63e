/* SPDX-License-Identifier: MIT */
/*
 * ffm_sampling.h — adaptive stage 1: when a process's wait probe may be taken off, for how
 * long, and how the waits seen in the windows stand for the whole span. Pure functions over
 * plain structs (the daemon feeds the clock and the waits and applies the actions; the analysis
 * extrapolates); no I/O, no globals.
 *
 * The state machine, per process (struct ffm_sampler):
 *   FULL  every wait is traced. The picture is *stable* when no new key (a (driver function,
 *         stack) pair the process had not shown) came in the last stable_waits waits and the
 *         last stable_s seconds. Then, if full tracing costs more than the budget
 *         (wait_cost_ns * rate > budget), the probe goes (action DETACH) and the span of
 *         sampling begins.
 *   OFF   the probe is off until a window fits the budget: the cost of all tracing since the
 *         process was first seen (full phases and windows, at the last measured rate), the
 *         new window included, stays within budget * FFM_SAMPLING_HEADROOM of its age; so a
 *         full phase is paid back by longer off times, and the bound holds over the process's
 *         life, not only in the steady state. Nor is a window ever more than max_gap_s after
 *         the last one: coverage (and the latency of noticing a new call site) wins over the
 *         budget there, at rates where even that costs more. Then ATTACH.
 *   ON    a window: the probe is on for window_s (the tick after it); then DETACH. The probe
 *         stays on for switch_s more while it is taken off: counted as traced time. A new key
 *         seen in a window ends the span and the process is back in FULL (the probe stays):
 *         the picture is being re-learned, and a monitoring run's changed behaviour is
 *         traced in full. A new key in a record that comes in OFF (the window's tail,
 *         recorded while the probe was being taken off) does the same at the next tick
 *         (ATTACH, mode FULL).
 *         A context release (the process's work with it is over) ends the span too, at
 *         its time, and the process is traced in full again: ffm_sampler__release.
 *   The steady duty cycle that follows: duty = budget * FFM_SAMPLING_HEADROOM / cost_frac,
 *   cost_frac = wait_cost_ns * rate / 1e9, at least window_s / (window_s + max_gap_s), at most 1
 *   (1: full tracing is within budget, the process is never sampled). The rate is measured in
 *   FULL, and in each window.
 *
 * Extrapolation (ffm_sampling__estimate): in a span of length T with windows of lengths L_i in
 * which a call site showed x_i (waits, or wait time), the estimate is T * Σx / ΣL (a ratio
 * estimator), its standard error T * sqrt(Σ(x_i - R L_i)² / (n (n-1))) / mean(L) with R =
 * Σx/ΣL; with fewer than two windows (no variance to read) the Poisson bound on the count is
 * used: the estimate times 1/sqrt(count).
 */
#ifndef FFM_SAMPLING_H
#define FFM_SAMPLING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The part of the budget the windows may use; the rest pays for the full phases. */
#define FFM_SAMPLING_HEADROOM 0.8

struct ffm_sampling_cfg {
	double budget;         /* fraction of the process's time (0.001 = 0.1%); 0: never sample */
	double wait_cost_ns;   /* what one traced wait costs the process */
	uint64_t stable_waits; /* no new key in this many waits ... */
	double stable_s;       /* ... and in this many seconds */
	double window_s;       /* a window's length */
	double max_gap_s;      /* a window at least this often, whatever the budget (0: none) */
	double switch_s;       /* the probe's time on beyond a window: taking it off is not
				* instant (the caller measures it from the waits recorded after
				* the detach was queued; 0: unknown) */
};

/* Defaults: budget 0.1%, 2.8 µs a wait (docs/OVERHEAD.md), stable after 200 waits and 0.2 s,
 * 0.1 s windows, at most 2 s between two windows. */
void ffm_sampling__defaults(struct ffm_sampling_cfg *c);

enum ffm_sampler_mode { FFM_SAMPLER_FULL = 0, FFM_SAMPLER_ON, FFM_SAMPLER_OFF };
enum ffm_sampler_action { FFM_SAMPLER_NONE = 0, FFM_SAMPLER_ATTACH, FFM_SAMPLER_DETACH };

struct ffm_sampler {
	struct ffm_sampling_cfg cfg;
	enum ffm_sampler_mode mode;
	double since;          /* the mode's start (s) */
	double full_since;     /* FFM_SAMPLER_FULL: when it began (the rate's origin) */
	uint64_t full_waits;   /* ... waits since */
	double last_new;       /* the last new key (s) */
	uint64_t since_new;    /* waits since it */
	uint64_t window_waits; /* waits in the current window (and its records read after it) */
	double last_window_s;  /* OFF: the last window's length, until its rate is read */
	double born;           /* the process's first look (s) */
	double traced_s;       /* time with the probe on since, full phases and windows */
	double rate;           /* waits/s, as last measured */
	double duty;           /* the steady duty cycle for that rate (ffm_sampling__duty) */
	double span_start;     /* the span being sampled (0: none) */
	double on_s;           /* its windows' time so far */
	uint32_t windows;      /* ... and their number */
	uint32_t spans;        /* spans so far (each a return to FULL but the last) */
	uint32_t retraced;     /* returns to FULL because a window saw a new key */
	bool pending;          /* OFF: a late record of the last window had a new key */
	bool released;         /* OFF: the process released a context (ffm_sampler__release) */
};

void ffm_sampler__init(struct ffm_sampler *s, const struct ffm_sampling_cfg *cfg, double now);
/* A wait seen at @now; @new_key: its key was new to the process. True when it ended a span (a
 * new key in a window: the process is traced in full again, the probe stays): the caller
 * records the span from s->span_start, s->on_s, s->windows (kept until the next span) and
 * the window that ended at @now. */
bool ffm_sampler__wait(struct ffm_sampler *s, double now, bool new_key);
/* The process began releasing a CUDA context at @now (cuDevicePrimaryCtxRelease/Reset,
 * cuCtxDestroy): the end of its work with it. True when a span was open: it ends at @now (the
 * caller records it, as for ffm_sampler__wait's true), so that the rate of its windows is not
 * extrapolated over the teardown and the exit that follow, where the loop's waits are no more.
 * The process is traced in full from then on (OFF: the probe goes back at the next tick, an
 * ATTACH that leaves the mode FULL); not counted as retraced. */
bool ffm_sampler__release(struct ffm_sampler *s, double now);
/* What the probe needs at @now; the mode changes as if the action was done at @now. An ATTACH
 * that leaves the mode FULL ended the span (a late new key). */
enum ffm_sampler_action ffm_sampler__tick(struct ffm_sampler *s, double now);
/* The duty cycle for @rate waits/s under @c (1: trace everything). */
double ffm_sampling__duty(const struct ffm_sampling_cfg *c, double rate);
/* The estimated cost of the process's tracing as a fraction of its time at duty @duty. */
double ffm_sampling__cost(const struct ffm_sampling_cfg *c, double rate, double duty);

/*
 * The total over a span of length @span_ns from @n windows of lengths @len_ns[i] with values
 * @x[i] (a count or a sum); @count: the waits behind the values (for the Poisson bound when
 * n < 2). *@est and *@se get the estimate and its standard error. -EINVAL for no window time.
 */
int ffm_sampling__estimate(const double *x, const double *len_ns, size_t n, double span_ns,
			   double count, double *est, double *se);

#endif
