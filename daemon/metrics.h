/* SPDX-License-Identifier: MIT */
/*
 * Per-job metrics for Prometheus (node_exporter's textfile collector), off unless ffmd.conf sets
 * metrics_dir: ffmd keeps its jobs' stage, the last analysis's recoverable time and share and
 * the records lost, and rewrites <metrics_dir>/ffm.prom in the text exposition format (0.0.4)
 * whenever they change: a temporary file in the directory renamed over it, so the collector
 * never reads half a file. The directory is opened once, at start (O_NOFOLLOW): it must be
 * root's and writable by nobody else, so nobody can plant a file or link in it; files are
 * written through that descriptor only (docs/SECURITY.md). The file is 0640, of the directory's
 * group: it names every job, its key and its owner, which only root, that group (give the
 * directory the exporter's group) and the admins may read. The metric list is in
 * systemd/README.md.
 */
#ifndef FFM_METRICS_H
#define FFM_METRICS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "store/ffm_store.h"

#define FFM_METRICS_FILE "ffm.prom"
#define FFM_METRICS_MODE 0640

struct ffm_metrics;

/* Open @dir for metrics: -errno with the reason in @why (not a directory, a link, not root's,
 * writable by group or others). */
int ffm_metrics__open(const char *dir, struct ffm_metrics **ret, char *why, size_t len);
/* A job began a run of @stage (running) or ended one. */
void ffm_metrics__job(struct ffm_metrics *m, const char *job_id, const char *key, uint32_t uid,
		      int stage, bool running);
/* The headline of @job_id's latest analysis. */
void ffm_metrics__analysis(struct ffm_metrics *m, const char *job_id,
			   const struct ffm_store_analysis *h);
/* 1 while ffmd runs, 0 for the last write as it stops. */
void ffm_metrics__set_up(struct ffm_metrics *m, bool up);
/* The exposition text of the current state. */
int ffm_metrics__format(const struct ffm_metrics *m, FILE *f);
/* Rewrite <dir>/ffm.prom (temporary file, then rename). 0 or -errno. */
int ffm_metrics__write(struct ffm_metrics *m);
struct ffm_metrics *ffm_metrics__free(struct ffm_metrics *m);

#endif
