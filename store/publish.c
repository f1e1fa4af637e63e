/* SPDX-License-Identifier: MIT */
/*
 * Publishing a store (ffm_store.h, "the state directory"): the finished copy of a key's live
 * store that readers open. The live store is WAL mode and only its writer's host may open it
 * (WAL's index is shared memory, which a network file system does not share between hosts);
 * the copy is a rollback-mode file that never changes once in place (a newer copy replaces it
 * by rename), so a reader anywhere opens it read-only and immutable: no lock, no -wal, -shm or
 * -journal file. It is also how a job's owner reads their jobs: the copy sits in
 * done/<uid>/, root's, and a POSIX ACL lets that one uid read it and nobody else (users never
 * write a store: ffmd parses every store it writes).
 *
 * Every directory below the store root is opened with O_NOFOLLOW|O_DIRECTORY from its parent's
 * descriptor, so no name in the path is followed through a link.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "store/store_int.h"

/* done/ lists to root and the directory's group only; each owner may go through it to their
 * own directory by an ACL entry of theirs (search only), so that nobody without jobs learns
 * who had some. */
#define DONE_DIR_MODE 0750
#define ACL_MAX_USERS 1024
#define OWNER_DIR_MODE 0750
#define COPY_MODE 0640

/* A POSIX access ACL (the kernel's system.posix_acl_access layout, version 2): the mode's
 * entries plus one named user with @perm, the mask @perm. */
static int grant_user(int fd, mode_t mode, uint32_t uid, uint16_t perm)
{
	struct { uint16_t tag, perm; uint32_t id; } __attribute__((packed)) e[5] = {
		{ 0x01, (mode >> 6) & 7, UINT32_MAX }, /* ACL_USER_OBJ */
		{ 0x02, perm, uid },		       /* ACL_USER */
		{ 0x04, (mode >> 3) & 7, UINT32_MAX }, /* ACL_GROUP_OBJ */
		{ 0x10, perm | ((mode >> 3) & 7), UINT32_MAX }, /* ACL_MASK */
		{ 0x20, mode & 7, UINT32_MAX },	       /* ACL_OTHER */
	};
	unsigned char buf[4 + sizeof(e)];
	uint32_t version = 2;

	memcpy(buf, &version, 4);
	memcpy(buf + 4, e, sizeof(e));
	return fsetxattr(fd, "system.posix_acl_access", buf, sizeof(buf), 0) < 0 ? -errno : 0;
}

/* The directory @name in the directory @at (made with @mode if missing), opened. A setgid
 * parent's group (the admin group's state directory) is kept: the copies get that group. */
static int subdir(int at, const char *name, mode_t mode)
{
	struct stat st;
	int fd;

	if (mkdirat(at, name, mode) == 0) {
		fd = openat(at, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (fd >= 0 && (fstat(fd, &st) < 0 || /* the mode whatever the umask */
				fchmod(fd, mode | (st.st_mode & S_ISGID)) < 0)) {
			close(fd);
			return -errno;
		}
		return fd < 0 ? -errno : fd;
	}
	if (errno != EEXIST)
		return -errno;
	fd = openat(at, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	return fd < 0 ? -errno : fd;
}

/* Add search (@perm) for @uid to the access ACL of the directory @fd of @mode, keeping the
 * named users and groups it has: entries sorted by tag, then id, the mask their union with the
 * group's. */
static int add_user(int fd, mode_t mode, uint32_t uid, uint16_t perm)
{
	struct acl_e { uint16_t tag, perm; uint32_t id; } __attribute__((packed));
	size_t size = 4 + (ACL_MAX_USERS + 8) * sizeof(struct acl_e), k = 0, nold;
	unsigned char *raw = malloc(size), *oraw = malloc(size); /* the version word, then entries */
	struct acl_e *e = raw ? (struct acl_e *)(raw + 4) : NULL;
	struct acl_e *old = oraw ? (struct acl_e *)(oraw + 4) : NULL;
	uint16_t mask = (mode >> 3) & 7;
	uint32_t version = 2;
	bool placed = false;
	ssize_t n;
	int err = 0;

	if (!old || !e) {
		err = -ENOMEM;
		goto out;
	}
	if ((n = fgetxattr(fd, "system.posix_acl_access", oraw, size)) < 0 && errno != ENODATA) {
		err = -errno;
		goto out;
	}
	nold = n > 4 ? ((size_t)n - 4) / sizeof(struct acl_e) : 0;
	e[k++] = (struct acl_e){ 0x01, (mode >> 6) & 7, UINT32_MAX };          /* ACL_USER_OBJ */
	for (size_t i = 0; i <= nold; i++) {
		bool user = i < nold && old[i].tag == 0x02;

		if (user && old[i].id == uid && (old[i].perm & perm) == perm)
			goto out; /* there already */
		if (!placed && (i == nold || old[i].tag > 0x02 || (user && old[i].id > uid))) {
			e[k++] = (struct acl_e){ 0x02, perm, uid };                   /* ACL_USER */
			mask |= perm;
			placed = true;
		}
		if (i < nold && old[i].tag == 0x04) /* ACL_GROUP_OBJ, then the named groups */
			e[k++] = (struct acl_e){ 0x04, (mode >> 3) & 7, UINT32_MAX };
		if ((user && old[i].id != uid) || (i < nold && old[i].tag == 0x08)) {
			if (k >= ACL_MAX_USERS) {
				err = -ENOSPC;
				goto out;
			}
			e[k++] = old[i];
			mask |= old[i].perm;
		}
	}
	if (!nold) /* no ACL yet */
		e[k++] = (struct acl_e){ 0x04, (mode >> 3) & 7, UINT32_MAX };
	e[k++] = (struct acl_e){ 0x10, mask, UINT32_MAX };                     /* ACL_MASK */
	e[k++] = (struct acl_e){ 0x20, mode & 7, UINT32_MAX };                 /* ACL_OTHER */
	memcpy(raw, &version, 4);
	if (fsetxattr(fd, "system.posix_acl_access", raw, 4 + k * sizeof(e[0]), 0) < 0)
		err = -errno;
out:
	free(oraw);
	free(raw);
	return err;
}

/* done/ in the store root @rootfd, opened: made if missing, its mode (earlier releases made
 * it 0751: anyone could test done/<uid>) and the owner @uid's way through it put right. */
static int done_dir(int rootfd, uint32_t uid, bool *reach)
{
	struct stat st;
	int fd = subdir(rootfd, "done", DONE_DIR_MODE), err;

	if (fd < 0)
		return fd;
	if (fstat(fd, &st) < 0 ||
	    ((st.st_mode & 07777 & ~S_ISGID) != DONE_DIR_MODE &&
	     fchmod(fd, DONE_DIR_MODE | (st.st_mode & S_ISGID)) < 0)) {
		err = -errno;
		close(fd);
		return err;
	}
	/* Without it the copy is still made: the caller says its owner cannot reach it. */
	*reach = !uid || add_user(fd, DONE_DIR_MODE, uid, 1) == 0;
	return fd;
}

/* The owner whose copy this is: the key row's uid, when every job of the store is theirs;
 * else root's alone (a store of an older ffm may hold several users' jobs). */
static int owner_of(sqlite3 *db, uint32_t *uid)
{
	sqlite3_stmt *st;
	int rc;

	rc = sqlite3_prepare_v2(db, "SELECT k.uid, (SELECT count(*) FROM jobs j WHERE j.uid != k.uid)"
				" FROM keys k", -1, &st, NULL);
	if (rc != SQLITE_OK)
		return ffm_store_err(db, rc);
	rc = sqlite3_step(st);
	*uid = rc == SQLITE_ROW && sqlite3_column_int64(st, 1) == 0 ?
		       (uint32_t)sqlite3_column_int64(st, 0) : 0;
	sqlite3_finalize(st);
	return rc == SQLITE_ROW || rc == SQLITE_DONE ? 0 : ffm_store_err(db, rc);
}

/* VACUUM INTO @tmp: a consistent snapshot of the live file, in rollback mode. */
static int snapshot(sqlite3 *db, const char *tmp)
{
	char *q = sqlite3_mprintf("VACUUM INTO %Q", tmp);
	int rc;

	if (!q)
		return -ENOMEM;
	rc = sqlite3_exec(db, q, NULL, NULL, NULL);
	sqlite3_free(q);
	return ffm_store_err(db, rc);
}

/* The copy's mode, its owner's ACL, on disk; then checked to be a rollback-mode file. */
static int seal(int dfd, const char *name, uint32_t uid, bool *acl)
{
	unsigned char h[20];
	int fd, err = 0;

	fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (fchmod(fd, COPY_MODE) < 0 || fsync(fd) < 0)
		err = -errno;
	else if (pread(fd, h, sizeof(h), 0) != (ssize_t)sizeof(h) || h[18] != 1 || h[19] != 1)
		err = -EBADMSG; /* not a rollback-journal database: readers could not open it */
	if (!err && uid)
		*acl = grant_user(fd, COPY_MODE, uid, 4) == 0;
	close(fd);
	return err;
}

int ffm_store__publish(const char *live, const char *root, uint32_t *owner)
{
	static unsigned seq;
	char owner_dir[16], name[NAME_MAX + 1], tmp[NAME_MAX + 1], tmp_path[PATH_MAX + 2 * NAME_MAX];
	const char *base = strrchr(live ? live : "", '/');
	int rootfd = -1, donefd = -1, dfd = -1, err;
	sqlite3 *db = NULL;
	uint32_t uid = 0;
	bool acl = false, reach = false;

	if (!live || !root || !owner)
		return -EINVAL;
	base = base ? base + 1 : live;
	if (snprintf(name, sizeof(name), "%s", base) >= (int)sizeof(name) ||
	    snprintf(tmp, sizeof(tmp), ".%.200s.%d.%u.tmp", base, (int)getpid(),
		     __atomic_fetch_add(&seq, 1, __ATOMIC_RELAXED)) >= (int)sizeof(tmp))
		return -ENAMETOOLONG;
	err = ffm_store_err(NULL, sqlite3_open_v2(live, &db, SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX,
						  NULL));
	if (!err) {
		sqlite3_busy_timeout(db, 5000);
		err = owner_of(db, &uid);
	}
	if (err)
		goto out;
	rootfd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (rootfd < 0) {
		err = -errno;
		goto out;
	}
	if ((donefd = done_dir(rootfd, uid, &reach)) < 0) {
		err = donefd;
		goto out;
	}
	snprintf(owner_dir, sizeof(owner_dir), "%u", uid);
	if ((dfd = subdir(donefd, owner_dir, OWNER_DIR_MODE)) < 0) {
		err = dfd;
		goto out;
	}
	/* VACUUM INTO takes a path: through /proc/self/fd, the directory already opened. */
	snprintf(tmp_path, sizeof(tmp_path), "/proc/self/fd/%d/%s", dfd, tmp);
	unlinkat(dfd, tmp, 0);
	err = snapshot(db, tmp_path);
	if (!err)
		err = seal(dfd, tmp, uid, &acl);
	if (!err && uid && (!acl || !reach))
		err = -ENOTSUP;
	if (!err || err == -ENOTSUP) {
		/* The owner's way to their directory: an ACL too (the copy alone is no use). */
		if (uid && grant_user(dfd, OWNER_DIR_MODE, uid, 5) < 0)
			err = -ENOTSUP;
		if (renameat(dfd, tmp, dfd, name) < 0)
			err = -errno;
		else
			fsync(dfd);
	}
out:
	if (dfd >= 0) {
		unlinkat(dfd, tmp, 0);
		close(dfd);
	}
	if (donefd >= 0)
		close(donefd);
	if (rootfd >= 0)
		close(rootfd);
	sqlite3_close_v2(db);
	*owner = uid;
	return err;
}
