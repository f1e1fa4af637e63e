/* SPDX-License-Identifier: MIT */
/* The analyses of ended runs, on a worker thread (daemon/analyzer.h, daemon/worker.h). */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/ffm_analysis.h"
#include "common/util.h"
#include "daemon/analyzer.h"
#include "daemon/worker.h"

#define QUEUE 32

struct request {
	char root[PATH_MAX];
	char key[128];
	uint32_t uid;
	char job_id[128];
};

struct ffm_analyzer {
	char *tool_version;
	struct ffm_worker *w;
};

/* One analysis, with the worker's own connection to the store. */
static void *analyse(void *arg, void *ctx)
{
	const struct ffm_analyzer *a = ctx;
	/* keep_wal: its close must not lock readers out (checkpoints are the loop's) */
	struct ffm_store_opts so = { .sz = sizeof(so), .tool_version = a->tool_version,
				     .keep_wal = true };
	struct ffm_analyzer_result *res = calloc(1, sizeof(*res));
	struct request *rq = arg;
	struct ffm_store *s = NULL;

	double t0 = ffm_now_s();

	if (res) {
		snprintf(res->job_id, sizeof(res->job_id), "%s", rq->job_id);
		snprintf(res->root, sizeof(res->root), "%s", rq->root);
		res->err = ffm_store__open_key(rq->root, &(struct ffm_store_key){ .key = rq->key,
									 .uid = rq->uid }, &so, &s);
		if (!res->err)
			snprintf(res->path, sizeof(res->path), "%s", ffm_store__path(s));
		if (!res->err)
			res->err = ffm_analysis__store_job(s, rq->job_id, a->tool_version, &res->head);
		ffm_store__free(s);
		res->secs = ffm_now_s() - t0;
	}
	free(rq);
	return res;
}

int ffm_analyzer__new(const char *tool_version, struct ffm_analyzer **ret)
{
	struct ffm_analyzer *a = calloc(1, sizeof(*a));
	int err;

	*ret = NULL;
	if (!a)
		return -ENOMEM;
	a->tool_version = strdup(tool_version ? tool_version : "unknown");
	err = a->tool_version ? ffm_worker__new(QUEUE, analyse, a, &a->w) : -ENOMEM;
	if (err) {
		ffm_analyzer__free(a);
		return err;
	}
	*ret = a;
	return 0;
}

int ffm_analyzer__fd(const struct ffm_analyzer *a)
{
	return ffm_worker__fd(a->w);
}

int ffm_analyzer__submit(struct ffm_analyzer *a, const char *root, const char *key, uint32_t uid,
			 const char *job_id)
{
	struct request *rq;

	if (strlen(root) >= sizeof(rq->root) || strlen(key) >= sizeof(rq->key) ||
	    strlen(job_id) >= sizeof(rq->job_id))
		return -ENAMETOOLONG;
	rq = malloc(sizeof(*rq));
	if (!rq)
		return -ENOMEM;
	strcpy(rq->root, root);
	strcpy(rq->key, key);
	rq->uid = uid;
	strcpy(rq->job_id, job_id);
	return ffm_worker__submit(a->w, rq);
}

int ffm_analyzer__take(struct ffm_analyzer *a, struct ffm_analyzer_result *out)
{
	struct ffm_analyzer_result *res = ffm_worker__take(a->w);

	if (!res)
		return -EAGAIN;
	*out = *res;
	free(res);
	return 0;
}

struct ffm_analyzer *ffm_analyzer__free(struct ffm_analyzer *a)
{
	if (!a)
		return NULL;
	ffm_worker__free(a->w, free);
	free(a->tool_version);
	free(a);
	return NULL;
}
