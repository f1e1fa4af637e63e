/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "daemon/driver_setup.h"
#include "store/ffm_store.h"
#include "symbols/ffm_calibrate.h"
#include "symbols/ffm_driver.h"

#ifndef FFM_LIBEXECDIR
#define FFM_LIBEXECDIR "/usr/local/libexec/ffm"
#endif

int ffm_calib_probe_path(char *buf, size_t len)
{
	const char *env = getenv("FFM_CALIB_PROG");
	char self[PATH_MAX], *slash;
	ssize_t n;

	if (env && *env) {
		snprintf(buf, len, "%s", env);
		return access(buf, X_OK) ? -errno : 0;
	}
	n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	self[n > 0 ? n : 0] = 0;
	if ((slash = strrchr(self, '/')))
		*slash = 0;
	for (int i = 0; slash && i < 2; i++)
		if (snprintf(buf, len, "%s%s/ffm-calib-probe", self, i ? "/../libexec/ffm" : "") <
			    (int)len && access(buf, X_OK) == 0)
			return 0;
	snprintf(buf, len, "%s/ffm-calib-probe", FFM_LIBEXECDIR);
	return access(buf, X_OK) ? -ENOENT : 0;
}

#ifndef FUSE_SUPER_MAGIC
#define FUSE_SUPER_MAGIC 0x65735546
#endif

/* Whether the open file @fd is trusted (driver_setup.h); @why says why not. */
static bool file_trusted(int fd, char *why, size_t why_len)
{
	struct statfs sf;
	struct stat st;

	if (why_len)
		why[0] = 0;
	if (fstat(fd, &st) < 0 || fstatfs(fd, &sf) < 0) {
		snprintf(why, why_len, "cannot stat it: %s", strerror(errno));
		return false;
	}
	if (st.st_uid != 0) {
		snprintf(why, why_len, "owned by uid %u, not root", (unsigned)st.st_uid);
		return false;
	}
	if (st.st_mode & (S_IWGRP | S_IWOTH)) {
		snprintf(why, why_len, "writable by %s", st.st_mode & S_IWOTH ? "anyone" : "its group");
		return false;
	}
	/* A FUSE file system's server (any user, through fusermount) says who owns its files
	 * and may change their bytes at will. */
	if ((uint32_t)sf.f_type == FUSE_SUPER_MAGIC) {
		snprintf(why, why_len, "on a FUSE file system");
		return false;
	}
	return true;
}

int ffm_driver_file_open(const char *path, bool *trusted, char *why, size_t why_len)
{
	int fd = ffm_open_regular(path);

	*trusted = false;
	if (fd < 0) {
		snprintf(why, why_len, "%s", fd == -EINVAL ? "not a regular file" : strerror(-fd));
		return fd;
	}
	*trusted = file_trusted(fd, why, why_len);
	return fd;
}

int ffm_driver_ready(const char *path, const char *state_dir, unsigned flags,
		     struct ffm_ready_driver *out, char *why, size_t why_len)
{
	struct ffm_calibration *cal = NULL;
	char probe[PATH_MAX] = "", fdpath[64], untrusted[128] = "", cache[PATH_MAX];
	int err, fd;

	memset(out, 0, sizeof(*out));
	if (why_len)
		why[0] = 0;
	/* the calibrations are cached in drivers/ of the state directory */
	if (ffm_state_path(state_dir, FFM_STATE_DRIVERS, NULL, cache, sizeof(cache)) < 0)
		cache[0] = 0;
	fd = ffm_driver_file_open(path, &out->trusted, untrusted, sizeof(untrusted));
	if (fd < 0) {
		snprintf(why, why_len, "%s", untrusted);
		return fd;
	}
	/* Everything below reads and runs this open file, whatever @path names by then. */
	snprintf(fdpath, sizeof(fdpath), "/proc/%d/fd/%d", (int)getpid(), fd);
	err = ffm_driver__open(fdpath, &(struct ffm_driver_opts){ .sz = sizeof(struct ffm_driver_opts),
			       .display_path = path }, &out->drv);
	if (err < 0) {
		snprintf(why, why_len, "%s", err == -ENOEXEC ? "not an ELF shared object" :
					     err == -ENODATA ? "no dynamic symbol table" : strerror(-err));
		goto fail;
	}
	err = ffm_calibration__load_cached(cache[0] ? cache : NULL, ffm_driver__build_id(out->drv),
					   &cal);
	if (err < 0 || !ffm_calibration__verified(cal)) {
		/* No cache, a bad file, or an unverified result: calibrate (again), which runs
		 * the file. */
		cal = ffm_calibration__free(cal);
		if (!out->trusted && !(flags & FFM_READY_RUN_UNTRUSTED)) {
			snprintf(why, why_len, "not calibrated: the file is %s, and ffm runs only root's "
				 "files (no verified calibration of build-id %.40s is cached; calibrate a "
				 "root-owned copy of it with ffmctl calibrate --driver COPY)",
				 untrusted, ffm_driver__build_id(out->drv));
			err = -EPERM;
			goto fail;
		}
		if (ffm_calib_probe_path(probe, sizeof(probe)) < 0) {
			snprintf(why, why_len, "the calibration program ffm-calib-probe was not found (set FFM_CALIB_PROG)");
			err = -ENOENT;
			goto fail;
		}
		err = ffm_calibrate(&(struct ffm_calibrate_opts){ .sz = sizeof(struct ffm_calibrate_opts),
				    .driver_path = fdpath, .display_path = path, .probe_path = probe,
				    .cache_dir = out->trusted && cache[0] ? cache : NULL,
				    .force = true }, &cal);
		if (err < 0) {
			snprintf(why, why_len, "wait-function calibration failed: %s", strerror(-err));
			goto fail;
		}
		out->calibrated_now = true;
	}
	if (!ffm_calibration__verified(cal)) {
		snprintf(why, why_len, "the wait function could not be verified: %s",
			 ffm_calibration__reason(cal));
		err = -EPROTO;
		goto fail;
	}
	out->wait_off = ffm_calibration__wait_offset(cal);
	out->wait_size = ffm_calibration__wait_size(cal);
	out->calib_seconds = ffm_calibration__seconds(cal);
	ffm_calibration__free(cal);
	close(fd);
	return 0;
fail:
	ffm_calibration__free(cal);
	out->drv = ffm_driver__free(out->drv);
	close(fd);
	return err;
}

void ffm_ready_driver__release(struct ffm_ready_driver *d)
{
	d->drv = ffm_driver__free(d->drv);
}
