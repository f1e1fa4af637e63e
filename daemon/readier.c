/* SPDX-License-Identifier: MIT */
/* Drivers made ready on a worker thread (daemon/readier.h, daemon/worker.h). */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/readier.h"
#include "daemon/worker.h"

#define QUEUE 32

struct request {
	char path[PATH_MAX];
	uint64_t cookie;
};

struct ffm_readier {
	char *state_dir;
	struct ffm_worker *w;
};

static void *ready(void *arg, void *ctx)
{
	struct ffm_readier *r = ctx;
	struct request *rq = arg;
	struct ffm_readier_result *res = calloc(1, sizeof(*res));

	/* Out of memory: the submitter's entry stays pending, and says so. */
	if (res) {
		res->cookie = rq->cookie;
		res->err = ffm_driver_ready(rq->path, r->state_dir, 0, &res->rd, res->why,
					    sizeof(res->why));
	}
	free(rq);
	return res;
}

int ffm_readier__new(const char *state_dir, struct ffm_readier **ret)
{
	struct ffm_readier *r = calloc(1, sizeof(*r));
	int err;

	*ret = NULL;
	if (!r)
		return -ENOMEM;
	r->state_dir = strdup(state_dir);
	err = r->state_dir ? ffm_worker__new(QUEUE, ready, r, &r->w) : -ENOMEM;
	if (err) {
		ffm_readier__free(r);
		return err;
	}
	*ret = r;
	return 0;
}

int ffm_readier__fd(const struct ffm_readier *r)
{
	return ffm_worker__fd(r->w);
}

int ffm_readier__submit(struct ffm_readier *r, const char *path, uint64_t cookie)
{
	struct request *rq = malloc(sizeof(*rq));

	if (!rq)
		return -ENOMEM;
	snprintf(rq->path, sizeof(rq->path), "%s", path);
	rq->cookie = cookie;
	return ffm_worker__submit(r->w, rq);
}

int ffm_readier__take(struct ffm_readier *r, struct ffm_readier_result *out)
{
	struct ffm_readier_result *res = ffm_worker__take(r->w);

	if (!res)
		return -EAGAIN;
	*out = *res;
	free(res);
	return 0;
}

static void drop(void *p)
{
	struct ffm_readier_result *res = p;

	ffm_ready_driver__release(&res->rd);
	free(res);
}

struct ffm_readier *ffm_readier__free(struct ffm_readier *r)
{
	if (!r)
		return NULL;
	ffm_worker__free(r->w, drop);
	free(r->state_dir);
	free(r);
	return NULL;
}
