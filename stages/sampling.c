// SPDX-License-Identifier: MIT
/* Adaptive stage 1: the sampler's state machine and the extrapolation (ffm_sampling.h). */
#include <errno.h>
#include <math.h>
#include <string.h>

#include "stages/ffm_sampling.h"

/* How long after a window's end its records may still come (ffmd polls the ring buffer every
 * 100 ms; the tick is 200 ms). */
#define RECORDS_LAG_S 0.15

void ffm_sampling__defaults(struct ffm_sampling_cfg *c)
{
	*c = (struct ffm_sampling_cfg){
		.budget = 0.001,
		.wait_cost_ns = 2800,
		.stable_waits = 200,
		.stable_s = 0.2,
		.window_s = 0.1,
		.max_gap_s = 2,
	};
}

double ffm_sampling__duty(const struct ffm_sampling_cfg *c, double rate)
{
	double frac = c->wait_cost_ns * rate / 1e9, duty;

	if (c->budget <= 0 || frac <= c->budget)
		return 1;
	duty = c->budget * FFM_SAMPLING_HEADROOM / frac;
	if (c->max_gap_s > 0 && duty < c->window_s / (c->window_s + c->max_gap_s))
		duty = c->window_s / (c->window_s + c->max_gap_s);
	return duty > 1 ? 1 : duty;
}

double ffm_sampling__cost(const struct ffm_sampling_cfg *c, double rate, double duty)
{
	return c->wait_cost_ns * rate / 1e9 * duty;
}

void ffm_sampler__init(struct ffm_sampler *s, const struct ffm_sampling_cfg *cfg, double now)
{
	memset(s, 0, sizeof(*s));
	s->cfg = *cfg;
	s->mode = FFM_SAMPLER_FULL;
	s->since = s->full_since = s->last_new = s->born = now;
	s->duty = 1;
}

static void to_full(struct ffm_sampler *s, double now)
{
	s->mode = FFM_SAMPLER_FULL;
	s->since = s->full_since = now;
	s->full_waits = 0;
}

bool ffm_sampler__wait(struct ffm_sampler *s, double now, bool new_key)
{
	s->since_new++;
	if (s->mode == FFM_SAMPLER_FULL)
		s->full_waits++;
	else
		s->window_waits++;
	if (!new_key)
		return false;
	s->last_new = now;
	s->since_new = 0;
	if (s->mode == FFM_SAMPLER_OFF)
		s->pending = true; /* a record the detach let through: full tracing at the next tick */
	if (s->mode != FFM_SAMPLER_ON)
		return false;
	/* A window saw something new: the rest of the span is traced, the window ends here. */
	s->on_s += now - s->since;
	s->traced_s += now - s->since;
	s->windows++;
	s->spans++;
	s->retraced++;
	to_full(s, now);
	return true;
}

bool ffm_sampler__release(struct ffm_sampler *s, double now)
{
	s->last_new = now;
	s->since_new = 0;
	switch (s->mode) {
	case FFM_SAMPLER_FULL:
		return false;
	case FFM_SAMPLER_ON:
		/* The window ends here (a release read after a later window opened: at once). */
		if (now > s->since) {
			s->on_s += now - s->since;
			s->traced_s += now - s->since;
		}
		s->windows++;
		s->spans++;
		to_full(s, now);
		return true;
	case FFM_SAMPLER_OFF:
		s->released = true; /* the probe goes back at the next tick */
		return true;
	}
	return false;
}

static bool stable(const struct ffm_sampler *s, double now)
{
	return s->since_new >= s->cfg.stable_waits && now - s->last_new >= s->cfg.stable_s;
}

static enum ffm_sampler_action tick_full(struct ffm_sampler *s, double now)
{
	double el = now - s->full_since;

	if (el < s->cfg.stable_s || !s->full_waits)
		return FFM_SAMPLER_NONE;
	s->rate = s->full_waits / el;
	if (!stable(s, now) || (s->duty = ffm_sampling__duty(&s->cfg, s->rate)) >= 1)
		return FFM_SAMPLER_NONE;
	s->traced_s += el;
	s->mode = FFM_SAMPLER_OFF;
	s->since = s->span_start = now;
	s->on_s = 0;
	s->windows = 0;
	return FFM_SAMPLER_DETACH;
}

/* Whether a window may open at @now: the tracing's cost since the process began, this window
 * included, stays within the budget's share for the windows; or the last window (or the span's
 * start) is max_gap_s ago. */
static bool window_due(const struct ffm_sampler *s, double now)
{
	double frac = s->cfg.wait_cost_ns * s->rate / 1e9;
	double allowed = s->cfg.budget * FFM_SAMPLING_HEADROOM * (now - s->born);

	if ((s->traced_s + s->cfg.window_s + s->cfg.switch_s) * frac <= allowed)
		return true;
	return s->cfg.max_gap_s > 0 && now - s->since >= s->cfg.max_gap_s;
}

enum ffm_sampler_action ffm_sampler__tick(struct ffm_sampler *s, double now)
{
	double el = now - s->since;

	switch (s->mode) {
	case FFM_SAMPLER_FULL:
		return tick_full(s, now);
	case FFM_SAMPLER_OFF:
		if (s->pending || s->released) {
			s->retraced += s->pending;
			s->pending = s->released = false;
			s->spans++;
			to_full(s, now);
			return FFM_SAMPLER_ATTACH;
		}
		/* The rate may have moved: the next window's time follows it. Read once the
		 * window's records are in (they come up to a poll period after its end). */
		if (s->last_window_s > 0 && el >= RECORDS_LAG_S) {
			if (s->window_waits) {
				s->rate = s->window_waits / s->last_window_s;
				s->duty = ffm_sampling__duty(&s->cfg, s->rate);
			}
			s->last_window_s = 0;
		}
		if (el <= 0 || !window_due(s, now))
			return FFM_SAMPLER_NONE;
		s->mode = FFM_SAMPLER_ON;
		s->since = now;
		s->window_waits = 0;
		return FFM_SAMPLER_ATTACH;
	case FFM_SAMPLER_ON:
		if (el + 1e-6 < s->cfg.window_s) /* a tick's clock is not exact */
			return FFM_SAMPLER_NONE;
		s->on_s += el;
		s->traced_s += el + s->cfg.switch_s;
		s->windows++;
		s->last_window_s = el;
		s->mode = FFM_SAMPLER_OFF;
		s->since = now;
		return FFM_SAMPLER_DETACH;
	}
	return FFM_SAMPLER_NONE;
}

int ffm_sampling__estimate(const double *x, const double *len_ns, size_t n, double span_ns,
			   double count, double *est, double *se)
{
	double sx = 0, sl = 0, r, ss = 0;

	for (size_t i = 0; i < n; i++) {
		sx += x[i];
		sl += len_ns[i];
	}
	if (sl <= 0 || span_ns < 0)
		return -EINVAL;
	r = sx / sl;
	*est = r * span_ns;
	if (n < 2) {
		*se = count > 0 ? *est / sqrt(count) : *est;
		return 0;
	}
	for (size_t i = 0; i < n; i++)
		ss += (x[i] - r * len_ns[i]) * (x[i] - r * len_ns[i]);
	*se = span_ns * sqrt(ss / ((double)n * (double)(n - 1))) / (sl / (double)n);
	return 0;
}
