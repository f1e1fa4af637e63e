/* SPDX-License-Identifier: MIT */
/* One worker thread and its queues (daemon/worker.h). */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "daemon/worker.h"

struct ffm_worker {
	ffm_worker_fn fn;
	void *ctx;
	size_t cap;
	int efd;
	pthread_t th;
	bool started, stop, busy;
	pthread_mutex_t mu;
	pthread_cond_t cv, dcv; /* a request queued; a result done */
	void **q, **done; /* waiting (oldest first) and finished, cap each */
	size_t nq, ndone;
};

static void *pop(void **v, size_t *n)
{
	void *x = v[0];

	memmove(v, v + 1, sizeof(v[0]) * --*n);
	return x;
}

static void *worker(void *arg)
{
	struct ffm_worker *w = arg;

	pthread_mutex_lock(&w->mu);
	for (;;) {
		void *req, *res;

		while (!w->nq && !w->stop)
			pthread_cond_wait(&w->cv, &w->mu);
		if (w->stop)
			break;
		req = pop(w->q, &w->nq);
		w->busy = true;
		pthread_mutex_unlock(&w->mu);

		res = w->fn(req, w->ctx);

		pthread_mutex_lock(&w->mu);
		w->busy = false;
		if (!res) {
			pthread_cond_broadcast(&w->dcv);
			continue;
		}
		/* done[] has room: submit counts waiting, busy and done against cap. */
		w->done[w->ndone++] = res;
		pthread_cond_broadcast(&w->dcv);
		/* Cannot fail: the counter saturates only after 2^64 - 2 writes. */
		(void)!write(w->efd, &(uint64_t){ 1 }, sizeof(uint64_t));
	}
	pthread_mutex_unlock(&w->mu);
	return NULL;
}

int ffm_worker__new(size_t cap, ffm_worker_fn fn, void *ctx, struct ffm_worker **ret)
{
	struct ffm_worker *w = calloc(1, sizeof(*w));
	sigset_t all, old;
	int err;

	*ret = NULL;
	if (!w)
		return -ENOMEM;
	*w = (struct ffm_worker){ .fn = fn, .ctx = ctx, .cap = cap, .efd = -1 };
	pthread_mutex_init(&w->mu, NULL);
	pthread_cond_init(&w->cv, NULL);
	pthread_cond_init(&w->dcv, NULL);
	w->q = calloc(cap, sizeof(*w->q));
	w->done = calloc(cap, sizeof(*w->done));
	w->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (!w->q || !w->done || w->efd < 0) {
		err = w->efd < 0 ? -errno : -ENOMEM;
		ffm_worker__free(w, NULL);
		return err;
	}
	/* Signals are the loop's (signalfd): the thread starts with every one blocked. */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	err = -pthread_create(&w->th, NULL, worker, w);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (err) {
		ffm_worker__free(w, NULL);
		return err;
	}
	w->started = true;
	*ret = w;
	return 0;
}

int ffm_worker__fd(const struct ffm_worker *w)
{
	return w->efd;
}

int ffm_worker__submit(struct ffm_worker *w, void *req)
{
	int err = 0;

	pthread_mutex_lock(&w->mu);
	if (w->nq + w->ndone + w->busy >= w->cap) {
		err = -ENOSPC;
	} else {
		w->q[w->nq++] = req;
		pthread_cond_signal(&w->cv);
	}
	pthread_mutex_unlock(&w->mu);
	if (err)
		free(req);
	return err;
}

void *ffm_worker__take(struct ffm_worker *w)
{
	void *res = NULL;
	uint64_t x;

	pthread_mutex_lock(&w->mu);
	if (w->ndone)
		res = pop(w->done, &w->ndone);
	if (!w->ndone)
		(void)!read(w->efd, &x, sizeof(x)); /* EAGAIN: nothing signalled since the last read */
	pthread_mutex_unlock(&w->mu);
	return res;
}

void *ffm_worker__wait(struct ffm_worker *w)
{
	pthread_mutex_lock(&w->mu);
	while (!w->ndone && (w->nq || w->busy) && !w->stop)
		pthread_cond_wait(&w->dcv, &w->mu);
	pthread_mutex_unlock(&w->mu);
	return ffm_worker__take(w);
}

struct ffm_worker *ffm_worker__free(struct ffm_worker *w, void (*drop)(void *result))
{
	if (!w)
		return NULL;
	if (w->started) {
		pthread_mutex_lock(&w->mu);
		w->stop = true;
		pthread_cond_signal(&w->cv);
		pthread_mutex_unlock(&w->mu);
		pthread_join(w->th, NULL);
	}
	for (size_t i = 0; i < w->nq; i++)
		free(w->q[i]);
	for (size_t i = 0; i < w->ndone; i++)
		if (drop)
			drop(w->done[i]);
	if (w->efd >= 0)
		close(w->efd);
	free(w->q);
	free(w->done);
	pthread_mutex_destroy(&w->mu);
	pthread_cond_destroy(&w->cv);
	pthread_cond_destroy(&w->dcv);
	free(w);
	return NULL;
}
