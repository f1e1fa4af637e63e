/* SPDX-License-Identifier: MIT */
/*
 * Progress of a long analysis on standard error: nothing for the first second, then one line,
 * rewritten in place a few times a second ("ffmctl report: job J: reading the timeline: 4.2M of
 * 10.0M events (42%), 3 s"), cleared at the end so that it never mixes with the output. Only
 * where standard error is a terminal: a log or a pipe gets no progress lines. FFM_PROGRESS_AFTER
 * sets the second (0: at once).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "cli/ffmctl.h"
#include "common/termsafe.h"
#include "common/util.h"

#define SHOW_AFTER_S 1.0 /* unless FFM_PROGRESS_AFTER says */
#define EVERY_MS 250

/* @n events as "950", "12.3k", "4.2M". */
static const char *count(uint64_t n, char *buf, size_t len)
{
	if (n >= 1000000)
		snprintf(buf, len, "%.1fM", n / 1e6);
	else if (n >= 10000)
		snprintf(buf, len, "%.1fk", n / 1e3);
	else
		snprintf(buf, len, "%" PRIu64, n);
	return buf;
}

/* The line goes straight to the terminal: its own \r and erase-line, the job id escaped. */
static void show(struct ffmctl_progress *p, double t)
{
	const char *phase = atomic_load(&p->an.phase);
	uint64_t done = atomic_load(&p->an.done), total = atomic_load(&p->an.total);
	unsigned node = atomic_load(&p->node), nodes = atomic_load(&p->nodes);
	char d[32], n[32], where[64] = "", job[128], line[512];
	int len;

	if (nodes > 1)
		snprintf(where, sizeof(where), " (node %u of %u)", node + 1, nodes);
	len = snprintf(line, sizeof(line), "\rffmctl %s: job %s%s: %s", p->verb,
		       ffm_termsafe_str(p->job, job, sizeof(job)), where,
		       phase ? phase : "opening the stores");
	if (phase && total && done < total)
		len += snprintf(line + len, sizeof(line) - (size_t)len, ": %s of %s events (%.0f%%)",
				count(done, d, sizeof(d)), count(total, n, sizeof(n)),
				100.0 * (double)done / (double)total);
	else if (phase && !total && done)
		len += snprintf(line + len, sizeof(line) - (size_t)len, ": %s read",
				count(done, d, sizeof(d)));
	len += snprintf(line + len, sizeof(line) - (size_t)len, ", %.0f s\033[K", t);
	if (len > (int)sizeof(line) - 1)
		len = (int)sizeof(line) - 1;
	if (write(STDERR_FILENO, line, (size_t)len) < 0)
		return; /* a progress line is not worth an error */
	p->shown = true;
}

static void *run(void *arg)
{
	struct ffmctl_progress *p = arg;
	struct timespec ts;

	pthread_mutex_lock(&p->mu);
	while (!p->stop) {
		double t = ffm_now_s() - p->t0;

		if (t >= p->after_s)
			show(p, t);
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_nsec += EVERY_MS * 1000000L;
		if (ts.tv_nsec >= 1000000000L) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000L;
		}
		pthread_cond_timedwait(&p->cv, &p->mu, &ts);
	}
	pthread_mutex_unlock(&p->mu);
	return NULL;
}

void ffmctl_progress__start(struct ffmctl_progress *p, const char *verb, const char *job)
{
	const char *env = getenv("FFM_PROGRESS_AFTER");
	char *end;

	*p = (struct ffmctl_progress){ .verb = verb, .job = job, .t0 = ffm_now_s(),
				       .after_s = SHOW_AFTER_S };
	if (env && *env) {
		p->after_s = strtod(env, &end);
		if (*end || !(p->after_s >= 0 && p->after_s <= 3600))
			p->after_s = SHOW_AFTER_S;
	}
	if (!isatty(STDERR_FILENO))
		return;
	pthread_mutex_init(&p->mu, NULL);
	pthread_cond_init(&p->cv, NULL);
	p->running = pthread_create(&p->th, NULL, run, p) == 0;
}

void ffmctl_progress__node(struct ffmctl_progress *p, size_t node, size_t nodes)
{
	atomic_store(&p->an.phase, NULL);
	atomic_store(&p->an.done, 0);
	atomic_store(&p->an.total, 0);
	atomic_store(&p->nodes, (unsigned)nodes);
	atomic_store(&p->node, (unsigned)node);
}

void ffmctl_progress__stop(struct ffmctl_progress *p)
{
	if (!p->running)
		return;
	pthread_mutex_lock(&p->mu);
	p->stop = true;
	pthread_cond_signal(&p->cv);
	pthread_mutex_unlock(&p->mu);
	pthread_join(p->th, NULL);
	if (p->shown && write(STDERR_FILENO, "\r\033[K", 4) < 0)
		p->shown = false; /* nothing to clear on a terminal that is gone */
	pthread_cond_destroy(&p->cv);
	pthread_mutex_destroy(&p->mu);
	p->running = false;
}
