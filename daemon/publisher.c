/* SPDX-License-Identifier: MIT */
/*
 * The publisher: ffmd's one thread that copies stores for their readers (ffm_store__publish:
 * the copy in done/<uid>/ that a job's owner and other hosts open). A copy takes time in
 * proportion to the store, which a job's user makes as large as they like, so it never runs on
 * the loop; the loop only queues a store's path. A store already queued is not queued again:
 * its copy is taken when the thread comes to it, with everything written by then.
 *
 * What queues: a job's end (jobs.c), a run a restart closed (jobs.c), and ffmd's start, for each
 * store of this node whose copy is missing or older than the store (a copy that a stop or a
 * crash cut short). A stop waits for the queue to empty, 60 s at most.
 *
 * Each queued copy has a ticket (publish's result; a store already queued shares its ticket),
 * and the thread hands each finished one back to the loop (publish_fd, publish_take), which
 * answers the requests that wait for a job's copy (jobs.c, control.c): the loop never waits
 * for the thread.
 */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "daemon/ffmd_int.h"
#include "daemon/log.h"
#include "store/ffm_store.h"

#define STOP_WAIT_S 60

struct item {
	struct item *next;
	char *path, *root, *why;
	uint64_t ticket;
};

static struct {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	pthread_t th;
	bool started, stop, busy;
	struct item *head, *tail;
	uint64_t last_ticket; /* the newest given out */
	uint64_t done;        /* the newest copy finished and not yet taken (copies go in order) */
	bool have_done;
	int efd;              /* readable while a finished copy waits to be taken */
} pub = { .mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER, .efd = -1 };

static void item_free(struct item *it)
{
	if (!it)
		return;
	free(it->path);
	free(it->root);
	free(it->why);
	free(it);
}

static void publish_one(const struct item *it)
{
	uint32_t uid = 0;
	int err = ffm_store__publish(it->path, it->root, &uid);

	if (err == -ENOTSUP)
		log_err("%s: the copy of %s is readable by root and the admin group only: the file "
			"system of %s takes no POSIX ACL, so uid %u cannot read it", it->why, it->path,
			it->root, uid);
	else if (err < 0)
		log_err("%s: cannot publish %s for its readers: %s", it->why, it->path,
			ffm_store__strerror(err));
}

static void *publisher(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&pub.mu);
	for (;;) {
		struct item *it;

		while (!pub.head && !pub.stop)
			pthread_cond_wait(&pub.cv, &pub.mu);
		if (!pub.head)
			break;
		it = pub.head;
		pub.head = it->next;
		if (!pub.head)
			pub.tail = NULL;
		pub.busy = true;
		pthread_mutex_unlock(&pub.mu);
		publish_one(it);
		pthread_mutex_lock(&pub.mu);
		pub.done = it->ticket;
		pub.have_done = true;
		if (pub.efd >= 0 && eventfd_write(pub.efd, 1) < 0)
			log_err("%s: cannot tell the loop its copy is made: %s", it->why, strerror(errno));
		item_free(it);
		pub.busy = false;
		pthread_cond_broadcast(&pub.cv);
	}
	pthread_mutex_unlock(&pub.mu);
	return NULL;
}

/* The ticket of the item of @path that waits in the queue, 0 if none. */
static uint64_t queued(const char *path)
{
	for (struct item *it = pub.head; it; it = it->next)
		if (!strcmp(it->path, path))
			return it->ticket;
	return 0;
}

int publish_fd(void)
{
	pthread_mutex_lock(&pub.mu);
	if (pub.efd < 0 && (pub.efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) < 0)
		log_err("cannot make the publisher's eventfd: %s", strerror(errno));
	pthread_mutex_unlock(&pub.mu);
	return pub.efd;
}

bool publish_take(uint64_t *ticket)
{
	eventfd_t x;
	bool any;

	if (pub.efd >= 0)
		(void)eventfd_read(pub.efd, &x); /* EAGAIN: nothing new, which have_done says too */
	pthread_mutex_lock(&pub.mu);
	any = pub.have_done;
	*ticket = pub.done;
	pub.have_done = false;
	pthread_mutex_unlock(&pub.mu);
	return any;
}

uint64_t publish(const char *path, const char *root, const char *why)
{
	struct item *it = calloc(1, sizeof(*it));
	uint64_t ticket = 0;
	bool running;

	if (!it || !(it->path = strdup(path)) || !(it->root = strdup(root)) ||
	    !(it->why = strdup(why))) {
		log_err("%s: cannot publish %s for its readers: out of memory", why, path);
		item_free(it);
		return 0;
	}
	pthread_mutex_lock(&pub.mu);
	if (!pub.started && !pub.stop)
		pub.started = pthread_create(&pub.th, NULL, publisher, NULL) == 0;
	running = pub.started && !pub.stop;
	if (!running || (ticket = queued(path))) {
		pthread_mutex_unlock(&pub.mu);
		if (!running)
			log_err("%s: cannot publish %s for its readers: no publisher thread", why, path);
		item_free(it);
		return ticket;
	}
	it->ticket = ticket = ++pub.last_ticket;
	if (pub.tail)
		pub.tail->next = it;
	else
		pub.head = it;
	pub.tail = it;
	pthread_cond_signal(&pub.cv);
	pthread_mutex_unlock(&pub.mu);
	return ticket;
}

void publish_wait(void)
{
	struct timespec until;
	bool drained;

	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += STOP_WAIT_S;
	pthread_mutex_lock(&pub.mu);
	while ((pub.head || pub.busy) &&
	       pthread_cond_timedwait(&pub.cv, &pub.mu, &until) != ETIMEDOUT)
		;
	drained = !pub.head && !pub.busy;
	pub.stop = true;
	pthread_cond_broadcast(&pub.cv);
	pthread_mutex_unlock(&pub.mu);
	if (!pub.started)
		return;
	if (drained) {
		pthread_join(pub.th, NULL);
		pthread_mutex_lock(&pub.mu);
		pub.started = pub.stop = false; /* another ffmd of this process starts it again */
		pthread_mutex_unlock(&pub.mu);
	} else /* the copy under way is left half made; the next start makes it again */
		log_err("stopping with stores not yet published: the next start publishes them");
}

static int64_t mtime_ns(const char *path)
{
	struct stat st;

	return stat(path, &st) == 0 ? (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec : 0;
}

/* The newest modification of the live store @path (its -wal holds what is not checkpointed). */
static int64_t changed(const char *path)
{
	char wal[PATH_MAX + NAME_MAX + 8];
	int64_t t = mtime_ns(path), w;

	snprintf(wal, sizeof(wal), "%s-wal", path);
	w = mtime_ns(wal);
	return w > t ? w : t;
}

/* The newest copy of store file @name among <root>/done/ * /, 0 if none. */
static int64_t copied(const char *done, const char *name)
{
	char path[PATH_MAX + 2 * NAME_MAX];
	struct dirent *de;
	int64_t t = 0, c;
	DIR *d = opendir(done);

	while (d && (de = readdir(d))) {
		if (de->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/%s/%s", done, de->d_name, name);
		if ((c = mtime_ns(path)) > t)
			t = c;
	}
	if (d)
		closedir(d);
	return t;
}

void publish_stale(const char *root)
{
	char keys[PATH_MAX], done[PATH_MAX], path[PATH_MAX + NAME_MAX + 2];
	struct dirent *de;
	DIR *d;

	if (ffm_state_path(root, FFM_STATE_KEYS, NULL, keys, sizeof(keys)) < 0 ||
	    ffm_state_path(root, FFM_STATE_DONE, NULL, done, sizeof(done)) < 0 || !(d = opendir(keys)))
		return;
	while ((de = readdir(d))) {
		size_t n = strlen(de->d_name);

		if (de->d_name[0] == '.' || n < 4 || strcmp(de->d_name + n - 3, ".db") ||
		    strstr(de->d_name, ".db.new."))
			continue;
		snprintf(path, sizeof(path), "%s/%s", keys, de->d_name);
		if (copied(done, de->d_name) < changed(path))
			publish(path, root, "start");
	}
	closedir(d);
}
