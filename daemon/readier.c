/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "daemon/readier.h"

#define QUEUE 32

struct request {
	char path[PATH_MAX];
	uint64_t cookie;
};

struct ffm_readier {
	char *state_dir;
	int efd;
	pthread_t th;
	bool started, stop;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct request q[QUEUE];   /* waiting, oldest first */
	int nq;
	bool busy;                 /* the worker is on one */
	struct ffm_readier_result *done[QUEUE];
	int ndone;
};

static void *worker(void *arg)
{
	struct ffm_readier *r = arg;

	pthread_mutex_lock(&r->mu);
	for (;;) {
		struct ffm_readier_result *res;
		struct request rq;

		while (!r->nq && !r->stop)
			pthread_cond_wait(&r->cv, &r->mu);
		if (r->stop)
			break;
		rq = r->q[0];
		memmove(r->q, r->q + 1, sizeof(r->q[0]) * (size_t)--r->nq);
		r->busy = true;
		pthread_mutex_unlock(&r->mu);

		res = calloc(1, sizeof(*res));
		if (res) {
			res->cookie = rq.cookie;
			res->err = ffm_driver_ready(rq.path, r->state_dir, 0, &res->rd, res->why,
						    sizeof(res->why));
		}

		pthread_mutex_lock(&r->mu);
		r->busy = false;
		if (!res)
			continue; /* out of memory: the submitter's entry stays pending, and says so */
		/* done[] cannot be full: at most QUEUE requests are submitted and not yet taken. */
		r->done[r->ndone++] = res;
		/* Cannot fail: the counter saturates only after 2^64 - 2 writes. */
		(void)!write(r->efd, &(uint64_t){ 1 }, sizeof(uint64_t));
	}
	pthread_mutex_unlock(&r->mu);
	return NULL;
}

int ffm_readier__new(const char *state_dir, struct ffm_readier **ret)
{
	struct ffm_readier *r = calloc(1, sizeof(*r));
	sigset_t all, old;
	int err;

	*ret = NULL;
	if (!r)
		return -ENOMEM;
	pthread_mutex_init(&r->mu, NULL);
	pthread_cond_init(&r->cv, NULL);
	r->state_dir = strdup(state_dir);
	r->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (!r->state_dir || r->efd < 0) {
		err = r->state_dir ? -errno : -ENOMEM;
		ffm_readier__free(r);
		return err;
	}
	/* Signals are the loop's (signalfd): the thread starts with every one blocked. */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	err = -pthread_create(&r->th, NULL, worker, r);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (err) {
		ffm_readier__free(r);
		return err;
	}
	r->started = true;
	*ret = r;
	return 0;
}

int ffm_readier__fd(const struct ffm_readier *r)
{
	return r->efd;
}

int ffm_readier__submit(struct ffm_readier *r, const char *path, uint64_t cookie)
{
	int err = 0;

	pthread_mutex_lock(&r->mu);
	if (r->nq + r->ndone + r->busy >= QUEUE) {
		err = -ENOSPC;
	} else {
		snprintf(r->q[r->nq].path, sizeof(r->q[r->nq].path), "%s", path);
		r->q[r->nq++].cookie = cookie;
		pthread_cond_signal(&r->cv);
	}
	pthread_mutex_unlock(&r->mu);
	return err;
}

int ffm_readier__take(struct ffm_readier *r, struct ffm_readier_result *out)
{
	struct ffm_readier_result *res = NULL;
	uint64_t x;

	pthread_mutex_lock(&r->mu);
	if (r->ndone) {
		res = r->done[0];
		memmove(r->done, r->done + 1, sizeof(r->done[0]) * (size_t)--r->ndone);
	}
	if (!r->ndone)
		(void)!read(r->efd, &x, sizeof(x)); /* EAGAIN: nothing signalled since the last read */
	pthread_mutex_unlock(&r->mu);
	if (!res)
		return -EAGAIN;
	*out = *res;
	free(res);
	return 0;
}

struct ffm_readier *ffm_readier__free(struct ffm_readier *r)
{
	if (!r)
		return NULL;
	if (r->started) {
		pthread_mutex_lock(&r->mu);
		r->stop = true;
		pthread_cond_signal(&r->cv);
		pthread_mutex_unlock(&r->mu);
		pthread_join(r->th, NULL);
	}
	for (int i = 0; i < r->ndone; i++) {
		ffm_ready_driver__release(&r->done[i]->rd);
		free(r->done[i]);
	}
	if (r->efd >= 0)
		close(r->efd);
	free(r->state_dir);
	pthread_mutex_destroy(&r->mu);
	pthread_cond_destroy(&r->cv);
	free(r);
	return NULL;
}
