/* SPDX-License-Identifier: MIT */
/*
 * Which libcuda a job's process maps or will load, looked up off the loop. The lookup reads
 * the process's maps and environment and opens the LD_LIBRARY_PATH entries it names as its
 * user (daemon/resolve.c, procfs.c's driver_path_of): files the job's user controls, each open
 * up to its deadline (symbols/useropen.h), and a process the map guard stopped is waited for
 * first (500 ms at most). One worker thread (daemon/worker.h) takes the lookups in order; the
 * loop learns of finished ones through an eventfd (TAG_LOOKED) and acts on each answer
 * (drivers.c). Owns the worker and the list of lookups asked and not yet taken, by process,
 * so that one process is not looked up twice at once. Nothing here knows of jobs, holds or
 * the drivers' table; the worker touches nothing of struct ffmd.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "daemon/ffmd_int.h"
#include "daemon/worker.h"

static void *look(void *arg, void *ctx)
{
	struct lookup *l = arg;
	uint64_t t0;

	(void)ctx;
	atomic_store(&l->started, true);
	/* Its maps show the file only once the stop has landed (the wait is the hold's price,
	 * not the lookup's). */
	if (l->map && l->m.stopped)
		l->stopped = wait_stopped(l->pid, 500);
	t0 = ffm_now_ns();
	l->err = driver_path_of(l->pid, l->path, sizeof(l->path));
	l->found = l->err >= 0 && stat(l->path, &l->st) == 0;
	l->ns = ffm_now_ns() - t0;
	return l;
}

int lookups_start(struct ffmd *d)
{
	return ffm_worker__new(MAX_LOOKUPS, look, NULL, &d->lk.w);
}

int lookups_fd(const struct ffmd *d)
{
	return ffm_worker__fd(d->lk.w);
}

void lookups_stop(struct ffmd *d)
{
	if (d->lk.w)
		ffm_worker__free(d->lk.w, free); /* answers nobody waits for any more */
	d->lk.w = NULL;
	d->lk.n = 0;
}

bool lookup_pending(const struct ffmd *d, pid_t pid)
{
	for (int i = 0; i < d->lk.n; i++)
		if (d->lk.asked[i]->pid == pid)
			return true;
	return false;
}

/* A lookup of @pid that the worker has not begun: what it reads of the process is as new as
 * what a lookup asked now would read. */
static bool queued(const struct ffmd *d, pid_t pid)
{
	for (int i = 0; i < d->lk.n; i++)
		if (d->lk.asked[i]->pid == pid && !atomic_load(&d->lk.asked[i]->started))
			return true;
	return false;
}

int lookup_ask(struct ffmd *d, pid_t pid, const struct ffm_rec_map *m)
{
	struct lookup *l;
	int err;

	/* One not begun serves an exec's or a fork's (a rule's exec asks three times); one begun
	 * may have read the image before this exec, and a map record's must read the maps as
	 * they are after its mmap. */
	if (!m && queued(d, pid))
		return -EALREADY;
	if (d->lk.n >= MAX_LOOKUPS)
		return -ENOSPC;
	if (!(l = calloc(1, sizeof(*l))))
		return -ENOMEM;
	l->pid = pid;
	l->start = proc_start_time(pid);
	if (m) {
		l->map = true;
		l->m = *m;
	}
	/* Listed first: once submitted, it is the worker's until taken (freed if refused). */
	d->lk.asked[d->lk.n++] = l;
	err = ffm_worker__submit(d->lk.w, l);
	if (err < 0)
		d->lk.n--;
	return err < 0 ? err : 0;
}

struct lookup *lookup_take(struct ffmd *d)
{
	struct lookup *l = ffm_worker__take(d->lk.w);

	if (!l)
		return NULL;
	for (int i = 0; i < d->lk.n; i++)
		if (d->lk.asked[i] == l) {
			d->lk.asked[i] = d->lk.asked[--d->lk.n];
			break;
		}
	return l;
}
