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

int ffm_resolve_libcuda(const char *ld_library_path, const char *root, const char *cwd, char *out,
			size_t len)
{
	struct ffm_driver_find_opts fo = { .sz = sizeof(fo), .root = root };
	struct ffm_driver_list *l = NULL;
	bool in_root = root && strcmp(root, "/");
	int err;

	if (ld_library_path) {
		char *dup = strdup(ld_library_path), *save = NULL;

		if (!dup)
			return -ENOMEM;
		for (char *d = strtok_r(dup, ":;", &save); d; d = strtok_r(NULL, ":;", &save)) {
			char p[PATH_MAX];
			struct stat st;

			/* The loader takes a relative entry relative to the process's cwd. */
			if (*d == '/')
				snprintf(p, sizeof(p), "%s%s/libcuda.so.1", in_root ? root : "", d);
			else
				snprintf(p, sizeof(p), "%s/%s/libcuda.so.1", cwd ? cwd : ".", d);
			/* A regular file only: a FIFO or a directory by that name is no library
			 * (and opening a FIFO would block). */
			if (stat(p, &st) == 0 && S_ISREG(st.st_mode) && access(p, R_OK) == 0) {
				snprintf(out, len, "%s", p);
				free(dup);
				return 0;
			}
		}
		free(dup);
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

int ffm_resolve_libcuda_pid(pid_t pid, const char *proc_root, char *out, size_t len)
{
	char path[PATH_MAX], root[PATH_MAX], cwd[PATH_MAX], buf[65536];
	const char *llp = NULL;
	ssize_t n;
	int fd;

	if (!proc_root)
		proc_root = "/proc";
	snprintf(path, sizeof(path), "%s/%d/environ", proc_root, pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
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
	return ffm_resolve_libcuda(llp, root, cwd, out, len);
}
