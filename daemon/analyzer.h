/* SPDX-License-Identifier: MIT */
/*
 * The analysis of each ended run, off ffmd's loop (docs/STORE.md, "The stored analysis"): when a
 * run of a job ends, ffmd submits (store root, key, job id); one worker thread opens the key's
 * store with a connection of its own, runs the job's analysis as its report does and stores the
 * results (ffm_analysis__store_job). The loop learns of finished ones through an eventfd it
 * polls and takes each headline once (for the Prometheus metrics, daemon/metrics.h). An
 * analysis takes what the report takes (about a second per million events): the loop never
 * waits for one; a full queue drops the request, which the log says.
 */
#ifndef FFM_ANALYZER_H
#define FFM_ANALYZER_H

#include <limits.h>
#include <stdint.h>

#include "store/ffm_store.h"

struct ffm_analyzer;

struct ffm_analyzer_result {
	char job_id[128];
	char path[PATH_MAX + 256]; /* the store ("" when it could not be opened) and its root */
	char root[PATH_MAX];
	int err; /* 0: @head is the stored analysis's headline */
	double secs; /* how long it took */
	struct ffm_store_analysis head; /* job_id and strings not set */
};

int ffm_analyzer__new(const char *tool_version, struct ffm_analyzer **ret);
/* Readable (EPOLLIN) while results wait to be taken. */
int ffm_analyzer__fd(const struct ffm_analyzer *a);
/* Queue the analysis of @job_id in the store of @key and owner @uid under store root @root;
 * -ENOSPC when the queue is full, -ENAMETOOLONG for names that do not fit. */
int ffm_analyzer__submit(struct ffm_analyzer *a, const char *root, const char *key, uint32_t uid,
			 const char *job_id);
/* Take one finished result: 0, or -EAGAIN when none is waiting. */
int ffm_analyzer__take(struct ffm_analyzer *a, struct ffm_analyzer_result *out);
/* Stops the worker after its current analysis; requests not started are dropped. */
struct ffm_analyzer *ffm_analyzer__free(struct ffm_analyzer *a);

#endif
