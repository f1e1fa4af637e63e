/* SPDX-License-Identifier: MIT */
/*
 * Which libcuda a job's process maps or will load, looked up off the loop. The lookup reads
 * the process's maps and environment and opens the LD_LIBRARY_PATH entries it names as its
 * user (daemon/resolve.c, procfs.c's driver_path_of): files the job's user controls, each open
 * up to its deadline (symbols/useropen.h), and a process the map guard stopped is waited for
 * first (500 ms at most). A few worker threads (daemon/worker.h, a pool) take the lookups,
 * at most one per user at a time, in order per user: one user whose files are slow (each open
 * up to its deadline) or whose processes delay their stop holds one thread, never another
 * user's lookups (docs/SECURITY.md). The loop learns of finished ones through an eventfd
 * (TAG_LOOKED) and acts on each answer (drivers.c). Owns the workers and the list of lookups
 * asked and not yet taken, by process, so that one process is not looked up twice at once.
 * Nothing here knows of jobs, holds or the drivers' table; the workers touch nothing of
 * struct ffmd.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "daemon/ffmd_int.h"
#include "daemon/worker.h"

/* Threads of the pool: as many users' lookups run at once. */
#define LOOKUP_THREADS 4

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
	return ffm_worker__new_pool(MAX_LOOKUPS, LOOKUP_THREADS, look, NULL, &d->lk.w);
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

/* The pool's key of @pid's lookups: its user (the owner of /proc/PID, its effective uid),
 * plus one (0 is no key); processes already gone share one key (their lookups fail at once). */
static uint64_t user_key(pid_t pid)
{
	char path[32];
	struct stat st;

	snprintf(path, sizeof(path), "/proc/%d", pid);
	return stat(path, &st) == 0 ? (uint64_t)st.st_uid + 1 : 1ull << 33;
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
	err = ffm_worker__submit_key(d->lk.w, l, user_key(pid));
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
