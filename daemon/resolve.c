/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <stdbool.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "daemon/resolve.h"
#include "symbols/ffm_driver.h"
#include "symbols/useropen.h"

/*
 * Whether <dir>/libcuda.so.1 is a regular file @u may read: opened as @u (symbols/useropen.h:
 * no FIFO or device opened, no link followed that @u could not follow, a deadline), an
 * absolute @dir inside @rootfd as the root (AT_FDCWD: ours), a relative one from @cwd.
 */
static bool loadable(const struct ffm_user *u, int rootfd, const char *root, const char *cwd,
		     const char *dir, char *p, size_t len)
{
	int fd;

	/* The loader takes a relative entry relative to the process's cwd. */
	if (*dir != '/') {
		snprintf(p, len, "%s/%s/libcuda.so.1", cwd ? cwd : ".", dir);
		fd = ffm_user_open(u, AT_FDCWD, p, FFM_UOPEN_MAGICLINKS, NULL);
	} else if (rootfd != AT_FDCWD) {
		snprintf(p, len, "%s/libcuda.so.1", dir);
		fd = ffm_user_open(u, rootfd, p, FFM_UOPEN_IN_ROOT, NULL);
		snprintf(p, len, "%s%s/libcuda.so.1", root, dir);
	} else {
		snprintf(p, len, "%s/libcuda.so.1", dir);
		fd = ffm_user_open(u, AT_FDCWD, p, 0, NULL);
	}
	if (fd < 0)
		return false;
	close(fd);
	return true;
}

/* The first LD_LIBRARY_PATH entry with a libcuda.so.1 @u may load: 0, or -ENOENT. */
static int from_ld_library_path(const char *llp, const struct ffm_user *u, const char *root,
				const char *cwd, char *out, size_t len)
{
	bool in_root = root && strcmp(root, "/");
	int rootfd = AT_FDCWD, err = -ENOENT;
	char *dup = strdup(llp), *save = NULL;

	if (!dup)
		return -ENOMEM;
	/* The root is ffm's own path (/proc/PID/root): opened here, looked in as @u. */
	if (in_root && (rootfd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC)) < 0) {
		err = -errno;
		free(dup);
		return err;
	}
	for (char *d = strtok_r(dup, ":;", &save); d && err; d = strtok_r(NULL, ":;", &save)) {
		char p[PATH_MAX];

		if (loadable(u, rootfd, root, cwd, d, p, sizeof(p))) {
			snprintf(out, len, "%s", p);
			err = 0;
		}
	}
	if (rootfd >= 0)
		close(rootfd);
	free(dup);
	return err;
}

/* As ffm_resolve_libcuda, LD_LIBRARY_PATH's entries looked at as @u. */
static int resolve(const char *ld_library_path, const struct ffm_user *u, const char *root,
		   const char *cwd, char *out, size_t len)
{
	struct ffm_driver_find_opts fo = { .sz = sizeof(fo), .root = root };
	struct ffm_driver_list *l = NULL;
	int err;

	if (ld_library_path) {
		err = from_ld_library_path(ld_library_path, u, root, cwd, out, len);
		if (err != -ENOENT)
			return err;
	}
	err = ffm_driver_find_system(&fo, &l);
	if (err < 0)
		return err;
	if (!l->n) {
		ffm_driver_list__free(l);
		return -ENOENT;
	}
	snprintf(out, len, "%s", l->locs[0].open_path ? l->locs[0].open_path : l->locs[0].path);
	ffm_driver_list__free(l);
	return 0;
}

int ffm_resolve_libcuda(const char *ld_library_path, const char *root, const char *cwd, char *out,
			size_t len)
{
	/* The caller's own: root's rights for root, a user's own otherwise. */
	return resolve(ld_library_path, &ffm_user_root, root, cwd, out, len);
}

int ffm_resolve_libcuda_pid(pid_t pid, const char *proc_root, char *out, size_t len)
{
	char path[PATH_MAX], root[PATH_MAX], cwd[PATH_MAX], buf[65536];
	const char *llp = NULL;
	struct ffm_user u;
	ssize_t n;
	int fd;

	if (!proc_root)
		proc_root = "/proc";
	/* The process's environment as its user may read it (a setuid program's is not: its
	 * loader ignores LD_LIBRARY_PATH too); nobody's rights when its user is not known. */
	ffm_user_of_pid(proc_root, pid, &u);
	snprintf(path, sizeof(path), "%s/%d/environ", proc_root, pid);
	fd = ffm_user_open(&u, AT_FDCWD, path, FFM_UOPEN_MAGICLINKS, NULL);
	if (fd < 0)
		return fd;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n < 0)
		return -errno;
	buf[n] = 0;
	for (char *p = buf; p < buf + n; p += strlen(p) + 1)
		if (!strncmp(p, "LD_LIBRARY_PATH=", 16))
			llp = p + 16;
	snprintf(root, sizeof(root), "%s/%d/root", proc_root, pid);
	snprintf(cwd, sizeof(cwd), "%s/%d/cwd", proc_root, pid);
	return resolve(llp, &u, root, cwd, out, len);
}
