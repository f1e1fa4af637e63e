/* SPDX-License-Identifier: MIT */
/* Opening a job user's files as that user, off the caller's thread: see symbols/useropen.h. */
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "symbols/useropen.h"

#ifndef FUSE_SUPER_MAGIC
#define FUSE_SUPER_MAGIC 0x65735546
#endif

const struct ffm_user ffm_user_root = { 0 };
const struct ffm_user ffm_user_nobody = { .uid = 65534, .gid = 65534 };

/* ------------------------------------------------------------------ credentials */

/* The 4th number of a "Uid:" / "Gid:" line (real, effective, saved, fs). */
static int status_fs_id(const char *line, uint32_t *id)
{
	unsigned long v[4];

	if (sscanf(line, "%*s %lu %lu %lu %lu", &v[0], &v[1], &v[2], &v[3]) != 4 ||
	    v[3] > UINT32_MAX)
		return -EINVAL;
	*id = (uint32_t)v[3];
	return 0;
}

static void status_groups(const char *line, struct ffm_user *u)
{
	const char *p = line + strlen("Groups:");
	char *end;

	u->ngroups = 0;
	while (u->ngroups < FFM_USER_MAX_GROUPS) {
		unsigned long g = strtoul(p, &end, 10);

		if (end == p || g > UINT32_MAX)
			break;
		u->groups[u->ngroups++] = (uint32_t)g;
		p = end;
	}
}

int ffm_user_of_pid(const char *proc_root, pid_t pid, struct ffm_user *u)
{
	char path[4096], line[4096];
	int got = 0, err = 0;
	FILE *f;

	*u = ffm_user_nobody;
	snprintf(path, sizeof(path), "%s/%d/status", proc_root ? proc_root : "/proc", (int)pid);
	f = fopen(path, "re");
	if (!f)
		return errno == ENOENT ? -ESRCH : -errno;
	while (fgets(line, sizeof(line), f)) {
		if (!strncmp(line, "Uid:", 4) && !(err = status_fs_id(line, &u->uid)))
			got |= 1;
		else if (!strncmp(line, "Gid:", 4) && !(err = status_fs_id(line, &u->gid)))
			got |= 2;
		else if (!strncmp(line, "Groups:", 7))
			status_groups(line, u);
	}
	fclose(f);
	if (got != 3) {
		*u = ffm_user_nobody;
		return err ? err : -EINVAL;
	}
	return 0;
}

/* Take @u's fs credentials in the calling thread only (raw syscalls: no glibc broadcast). */
static int become(const struct ffm_user *u)
{
	gid_t groups[FFM_USER_MAX_GROUPS];

	/* Root's processes; and a caller that is not root opens with its own rights anyway. */
	if (u->uid == 0 || syscall(SYS_setfsuid, (uid_t)-1) != 0)
		return 0;
	for (int i = 0; i < u->ngroups; i++)
		groups[i] = u->groups[i];
	if (syscall(SYS_setgroups, (size_t)u->ngroups, groups) < 0)
		return -errno;
	syscall(SYS_setfsgid, (gid_t)u->gid);
	syscall(SYS_setfsuid, (uid_t)u->uid);
	/* setfsuid/setfsgid return the previous id and fail silently: ask again. */
	if ((uint32_t)syscall(SYS_setfsgid, (gid_t)-1) != u->gid ||
	    (uint32_t)syscall(SYS_setfsuid, (uid_t)-1) != u->uid)
		return -EPERM;
	return 0;
}

/* ------------------------------------------------------------------ the helper thread */

struct job {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	int refs;        /* caller + thread */
	bool done, abandoned;
	int fd;          /* result: fd or -errno */
	struct stat st;
	struct ffm_user u;
	int dirfd;       /* a dup of the caller's, or AT_FDCWD */
	unsigned flags;
	char path[];
};

static pthread_mutex_t stuck_lock = PTHREAD_MUTEX_INITIALIZER;
static int stuck;

/*
 * Per user, the time the caller spent waiting on slow opens (SLOW_MS or more) in a window of
 * WINDOW_MS: past BUDGET_MS that user's opens fail at once (-EAGAIN) until the window ends. A
 * file system that answers just before each deadline then costs the caller at most BUDGET_MS
 * per user per window, not a deadline per file. Under stuck_lock.
 */
#define SLOW_MS 100
#define BUDGET_MS 1000
#define WINDOW_MS 10000
static struct slow {
	uint32_t uid;
	bool used;
	uint64_t start_ms, spent_ms;
} slow_tab[16];

static uint64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* @uid's entry (its window restarted when over), else the entry to reuse. */
static struct slow *slow_of(uint32_t uid, uint64_t now)
{
	struct slow *e = NULL, *oldest = &slow_tab[0];

	for (size_t i = 0; i < sizeof(slow_tab) / sizeof(slow_tab[0]) && !e; i++) {
		if (slow_tab[i].used && slow_tab[i].uid == uid)
			e = &slow_tab[i];
		else if (!slow_tab[i].used || slow_tab[i].start_ms < oldest->start_ms)
			oldest = &slow_tab[i];
	}
	if (!e) {
		e = oldest;
		*e = (struct slow){ .uid = uid, .used = true, .start_ms = now };
	}
	if (now - e->start_ms >= WINDOW_MS) {
		e->start_ms = now;
		e->spent_ms = 0;
	}
	return e;
}
static unsigned deadline_ms = FFM_USER_OPEN_DEADLINE_MS;
static void (*test_hook)(const char *path);

static bool abandoned(struct job *j)
{
	bool a;

	pthread_mutex_lock(&j->lock);
	a = j->abandoned;
	pthread_mutex_unlock(&j->lock);
	return a;
}

/* A FUSE file's bytes into a memfd (the caller never reads from the user's server). */
static int fuse_copy(struct job *j, int fd)
{
	char buf[1 << 16];
	size_t total = 0;
	int mfd;

	if (j->st.st_size > (off_t)FFM_USER_OPEN_FUSE_MAX)
		return -EFBIG;
	mfd = memfd_create("ffm-fuse-copy", MFD_CLOEXEC);
	if (mfd < 0)
		return -errno;
	for (;;) {
		ssize_t n = read(fd, buf, sizeof(buf));

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0 || abandoned(j)) {
			if (n == 0 && !abandoned(j))
				return mfd;
			close(mfd);
			return n < 0 ? -errno : -ETIMEDOUT;
		}
		total += (size_t)n;
		if (total > FFM_USER_OPEN_FUSE_MAX || write(mfd, buf, (size_t)n) != n) {
			close(mfd);
			return total > FFM_USER_OPEN_FUSE_MAX ? -EFBIG : -EIO;
		}
	}
}

/* O_PATH, regular only, reopen non-blocking; in the helper thread, as j->u. */
static int open_as(struct job *j)
{
	struct open_how how = { .flags = O_PATH | O_CLOEXEC };
	struct statfs sf;
	char self[64];
	int pfd, fd;

	if (!(j->flags & FFM_UOPEN_MAGICLINKS))
		how.resolve |= RESOLVE_NO_MAGICLINKS;
	if (j->flags & FFM_UOPEN_IN_ROOT)
		how.resolve |= RESOLVE_IN_ROOT;
	pfd = (int)syscall(SYS_openat2, j->dirfd >= 0 ? j->dirfd : AT_FDCWD, j->path, &how,
			   sizeof(how));
	if (pfd < 0)
		return -errno;
	if (fstat(pfd, &j->st) < 0) {
		fd = -errno;
	} else if (!S_ISREG(j->st.st_mode)) {
		fd = S_ISDIR(j->st.st_mode) ? -EISDIR : -EINVAL;
	} else {
		snprintf(self, sizeof(self), "/proc/self/fd/%d", pfd);
		fd = open(self, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
		if (fd < 0)
			fd = -errno;
	}
	close(pfd);
	if (fd >= 0 && fstatfs(fd, &sf) == 0 && (uint32_t)sf.f_type == FUSE_SUPER_MAGIC) {
		int mfd = fuse_copy(j, fd);

		close(fd);
		fd = mfd;
	}
	return fd;
}

static void job_put(struct job *j)
{
	if (j->dirfd >= 0)
		close(j->dirfd);
	pthread_mutex_destroy(&j->lock);
	pthread_cond_destroy(&j->cond);
	free(j);
}

/* FFM_TEST_OPEN_DELAY=SUFFIX:MS (tests only, from the environment of ffm's own process): the
 * opens of paths that end in SUFFIX take MS longer, as on a stalled file system. */
static void env_delay(const char *path)
{
	const char *e = getenv("FFM_TEST_OPEN_DELAY"), *colon = e ? strrchr(e, ':') : NULL;
	size_t ns = colon ? (size_t)(colon - e) : 0, np = strlen(path);
	unsigned long ms;

	if (!colon || !ns || np < ns || strncmp(path + np - ns, e, ns))
		return;
	ms = strtoul(colon + 1, NULL, 10);
	fprintf(stderr, "useropen: test delay of %lu ms opening %s\n", ms, path);
	nanosleep(&(struct timespec){ .tv_sec = (time_t)(ms / 1000),
				      .tv_nsec = (long)(ms % 1000) * 1000000L }, NULL);
}

static void *helper(void *arg)
{
	struct job *j = arg;
	int fd = become(&j->u);
	bool last, was_abandoned;

	if (fd == 0) {
		if (test_hook)
			test_hook(j->path);
		env_delay(j->path);
		fd = open_as(j);
	}
	pthread_mutex_lock(&j->lock);
	was_abandoned = j->abandoned;
	if (was_abandoned && fd >= 0)
		close(fd); /* the caller gave up: nobody else will */
	j->fd = fd;
	j->done = true;
	last = --j->refs == 0;
	pthread_cond_signal(&j->cond);
	pthread_mutex_unlock(&j->lock);
	if (was_abandoned) {
		pthread_mutex_lock(&stuck_lock);
		stuck--;
		pthread_mutex_unlock(&stuck_lock);
	}
	if (last)
		job_put(j);
	return NULL;
}

static struct job *job_new(const struct ffm_user *u, int dirfd, const char *path, unsigned flags)
{
	size_t len = strlen(path) + 1;
	struct job *j = calloc(1, sizeof(*j) + len);
	pthread_condattr_t ca;

	if (!j)
		return NULL;
	memcpy(j->path, path, len);
	j->u = *u;
	j->flags = flags;
	j->refs = 2;
	j->dirfd = dirfd == AT_FDCWD ? -1 : fcntl(dirfd, F_DUPFD_CLOEXEC, 3);
	if (dirfd != AT_FDCWD && j->dirfd < 0) {
		free(j);
		return NULL;
	}
	pthread_mutex_init(&j->lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&j->cond, &ca);
	pthread_condattr_destroy(&ca);
	return j;
}

/* Start the helper with every signal blocked (they stay the caller's threads' business). */
static int start_helper(struct job *j)
{
	sigset_t all, old;
	pthread_attr_t a;
	pthread_t t;
	int err;

	sigfillset(&all);
	pthread_attr_init(&a);
	pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
	pthread_attr_setstacksize(&a, 256 << 10);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	err = pthread_create(&t, &a, helper, j);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	pthread_attr_destroy(&a);
	return -err;
}

static void charge_slow(uint32_t uid, uint64_t t0)
{
	uint64_t now = mono_ms();

	if (now - t0 < SLOW_MS)
		return;
	pthread_mutex_lock(&stuck_lock);
	slow_of(uid, now)->spent_ms += now - t0;
	pthread_mutex_unlock(&stuck_lock);
}

int ffm_user_open(const struct ffm_user *u, int dirfd, const char *path, unsigned flags,
		  struct stat *st)
{
	struct timespec until;
	uint64_t t0;
	struct job *j;
	int err = 0, fd;
	bool last;

	if (!path || !*path)
		return -ENOENT;
	t0 = mono_ms();
	pthread_mutex_lock(&stuck_lock);
	err = stuck >= FFM_USER_OPEN_MAX_STUCK || slow_of(u->uid, t0)->spent_ms >= BUDGET_MS
		      ? -EAGAIN : 0;
	pthread_mutex_unlock(&stuck_lock);
	if (err)
		return err;
	j = job_new(u, dirfd, path, flags);
	if (!j)
		return -ENOMEM;
	err = start_helper(j);
	if (err) {
		job_put(j);
		return err;
	}
	clock_gettime(CLOCK_MONOTONIC, &until);
	until.tv_nsec += (long)(deadline_ms % 1000) * 1000000L;
	until.tv_sec += deadline_ms / 1000 + until.tv_nsec / 1000000000L;
	until.tv_nsec %= 1000000000L;
	pthread_mutex_lock(&j->lock);
	while (!j->done && err != ETIMEDOUT)
		err = pthread_cond_timedwait(&j->cond, &j->lock, &until);
	if (j->done) {
		fd = j->fd;
		if (fd >= 0 && st)
			*st = j->st;
	} else {
		j->abandoned = true;
		fd = -ETIMEDOUT;
		pthread_mutex_lock(&stuck_lock);
		stuck++;
		pthread_mutex_unlock(&stuck_lock);
	}
	last = --j->refs == 0;
	pthread_mutex_unlock(&j->lock);
	if (last)
		job_put(j);
	charge_slow(u->uid, t0);
	return fd;
}

int ffm_user_open_stuck(void)
{
	int n;

	pthread_mutex_lock(&stuck_lock);
	n = stuck;
	pthread_mutex_unlock(&stuck_lock);
	return n;
}

void ffm_user_open__set_test_hook(void (*hook)(const char *path)) { test_hook = hook; }
void ffm_user_open__set_deadline_ms(unsigned ms)
{
	deadline_ms = ms ? ms : FFM_USER_OPEN_DEADLINE_MS;
}
