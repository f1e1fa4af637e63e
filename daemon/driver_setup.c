/* SPDX-License-Identifier: MIT */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/statvfs.h>
#include <sys/vfs.h>
#include <unistd.h>

#define LOOP_MAJOR 7 /* Documentation/admin-guide/devices.txt */
#define NBD_MAJOR 43

#include "daemon/config.h"
#include "daemon/driver_setup.h"
#include "store/ffm_store.h"
#include "symbols/ffm_calibrate.h"
#include "symbols/ffm_driver.h"
#include "symbols/ffm_node_model.h"

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

/* trusted_driver_dirs: each directory as it was when ffmd (or ffmctl) started, by identity. */
static struct trusted_dir {
	dev_t dev;
	ino_t ino;
} trusted_dirs[FFM_MAX_TRUSTED_DIRS];
static int ntrusted_dirs;

/* A trusted directory: root's, writable by nobody else, not on FUSE. */
static bool dir_ok(int fd, struct stat *st)
{
	struct statfs sf;

	return fstat(fd, st) == 0 && fstatfs(fd, &sf) == 0 && S_ISDIR(st->st_mode) &&
	       st->st_uid == 0 && !(st->st_mode & (S_IWGRP | S_IWOTH)) &&
	       (uint32_t)sf.f_type != FUSE_SUPER_MAGIC;
}

int ffm_driver_trust_dirs(const char *list, char *why, size_t why_len)
{
	char buf[FFM_TRUSTED_DIRS_MAX], *save = NULL;

	ntrusted_dirs = 0;
	if (why_len)
		why[0] = 0;
	snprintf(buf, sizeof(buf), "%s", list ? list : "");
	for (char *dir = strtok_r(buf, ": \t,", &save); dir; dir = strtok_r(NULL, ": \t,", &save)) {
		int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		struct stat st;

		if (ntrusted_dirs == FFM_MAX_TRUSTED_DIRS) {
			snprintf(why, why_len, "more than %d trusted_driver_dirs", FFM_MAX_TRUSTED_DIRS);
			return -E2BIG;
		}
		if (fd < 0 || !dir_ok(fd, &st)) {
			int err = fd < 0 ? -errno : -EPERM;

			if (fd < 0)
				snprintf(why, why_len, "trusted_driver_dirs: %s: %s", dir, strerror(-err));
			else
				snprintf(why, why_len, "trusted_driver_dirs: %s must be a directory of root's "
					 "that no one else may write, not on FUSE (it is uid %u's, mode %03o)",
					 dir, (unsigned)st.st_uid, (unsigned)(st.st_mode & 0777));
			if (fd >= 0)
				close(fd);
			ntrusted_dirs = 0;
			return err;
		}
		trusted_dirs[ntrusted_dirs++] = (struct trusted_dir){ st.st_dev, st.st_ino };
		close(fd);
	}
	return 0;
}

int ffm_driver_trust_config(const char *config_path, char *why, size_t why_len)
{
	static struct ffmd_config cfg; /* a megabyte of rules: not on the stack */
	int err;

	if (!config_path)
		config_path = FFMD_DEFAULT_CONFIG;
	if (access(config_path, F_OK) < 0)
		return ffm_driver_trust_dirs(NULL, why, why_len);
	if ((err = ffmd_config_load(&cfg, config_path, why, why_len)) < 0)
		return err;
	return ffm_driver_trust_dirs(cfg.trusted_driver_dirs, why, why_len);
}

/* Whether the directory @dir holds @st itself (not a link to it) and is a trusted directory. */
static bool in_trusted_dir(const char *dir, const char *base, const struct stat *st)
{
	struct stat ds, fs;
	bool found = false;
	int fd;

	if (!ntrusted_dirs || !*base)
		return false;
	if ((fd = open(*dir ? dir : "/", O_PATH | O_DIRECTORY | O_CLOEXEC)) < 0)
		return false;
	if (fstat(fd, &ds) == 0 && ds.st_uid == 0 && !(ds.st_mode & (S_IWGRP | S_IWOTH)) &&
	    fstatat(fd, base, &fs, AT_SYMLINK_NOFOLLOW) == 0 && fs.st_dev == st->st_dev &&
	    fs.st_ino == st->st_ino)
		for (int i = 0; i < ntrusted_dirs && !found; i++)
			found = trusted_dirs[i].dev == ds.st_dev && trusted_dirs[i].ino == ds.st_ino;
	close(fd);
	return found;
}

/* Whether the open file @fd (opened as @path) lies in one of trusted_driver_dirs: by the path
 * it was opened by, or by the kernel's name of the open file. */
static bool file_in_trusted_dir(int fd, const char *path, const struct stat *st)
{
	char buf[PATH_MAX], self[64], *slash;
	ssize_t n;

	for (int pass = 0; pass < 2; pass++) {
		if (pass == 0) {
			snprintf(buf, sizeof(buf), "%s", path);
		} else {
			snprintf(self, sizeof(self), "/proc/self/fd/%d", fd);
			if ((n = readlink(self, buf, sizeof(buf) - 1)) <= 0)
				return false;
			buf[n] = 0;
		}
		if (!(slash = strrchr(buf, '/')))
			continue;
		*slash = 0;
		if (in_trusted_dir(buf, slash + 1, st))
			return true;
	}
	return false;
}

/* The mount point of the open file @fd as ffmd sees it, in @buf ("" when not found). */
static void mount_point(int fd, char *buf, size_t len)
{
	char line[PATH_MAX + 256];
	struct statx stx;
	FILE *f;

	buf[0] = 0;
	if (statx(fd, "", AT_EMPTY_PATH, STATX_MNT_ID, &stx) < 0 || !(stx.stx_mask & STATX_MNT_ID) ||
	    !(f = fopen("/proc/self/mountinfo", "re")))
		return;
	while (fgets(line, sizeof(line), f)) {
		unsigned long long id;
		char mp[PATH_MAX];

		if (sscanf(line, "%llu %*u %*s %*s %4095s", &id, mp) == 2 && id == stx.stx_mnt_id) {
			if (strlen(mp) < len) /* octal escapes (\040) left as they are */
				strcpy(buf, mp);
			break;
		}
	}
	fclose(f);
}

/*
 * Whether the open file @fd (opened as @path) is trusted (driver_setup.h); @why says why not.
 * The file system must be one root vouches for: owner and mode inside a file system its user
 * built (an image on a loop device that a setuid container runtime mounted for them; FUSE)
 * say nothing. A file in one of trusted_driver_dirs is exempt from that (not from owner and mode).
 */
static bool file_trusted(int fd, const char *path, char *why, size_t why_len)
{
	char mp[256];
	struct statvfs sv;
	struct statfs sf;
	struct stat st;

	if (why_len)
		why[0] = 0;
	if (fstat(fd, &st) < 0 || fstatfs(fd, &sf) < 0 || fstatvfs(fd, &sv) < 0) {
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
	if (file_in_trusted_dir(fd, path, &st))
		return true;
	/* A FUSE file system's server (any user, through fusermount) says who owns its files
	 * and may change their bytes at will. */
	if ((uint32_t)sf.f_type == FUSE_SUPER_MAGIC) {
		snprintf(why, why_len, "on a FUSE file system, whose owners its server chooses");
		return false;
	}
	/* An image a user built, mounted for them by a setuid container runtime, sits on a loop
	 * (or network block) device. A nosuid mount alone is not one: the NVIDIA container
	 * toolkit bind-mounts the node's own driver nosuid into every GPU container. */
	if (major(st.st_dev) == LOOP_MAJOR || major(st.st_dev) == NBD_MAJOR) {
		mount_point(fd, mp, sizeof(mp));
		snprintf(why, why_len, "on a file system image%s%.120s%s (a %s device%s), whose owners "
			 "its builder chose", mp[0] ? " (" : "", mp, mp[0] ? ")" : "",
			 major(st.st_dev) == LOOP_MAJOR ? "loop" : "network block",
			 sv.f_flag & ST_NOSUID ? ", mounted nosuid" : "");
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
	*trusted = file_trusted(fd, path, why, why_len);
	return fd;
}

/* The one node model of @cal as JSON text, NULL when it has none (or no memory: the model only
 * refines prices, a run goes on without it). */
static char *node_model_json(const struct ffm_calibration *cal)
{
	const struct ffm_node_model *nm = ffm_calibration__node_model(cal, NULL);
	json_t *j = nm ? ffm_node_model__to_json(nm) : NULL;
	char *txt = j ? json_dumps(j, JSON_COMPACT) : NULL;

	json_decref(j);
	return txt;
}

int ffm_driver_ready(const char *path, const char *state_dir, unsigned flags,
		     struct ffm_ready_driver *out, char *why, size_t why_len)
{
	struct ffm_calibration *cal = NULL;
	char probe[PATH_MAX] = "", fdpath[64], untrusted[256] = "", cache[PATH_MAX];
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
	if (err < 0 || !ffm_calibration__verified(cal) ||
	    ((flags & FFM_READY_NODE_MODEL) && !ffm_calibration__node_model(cal, NULL))) {
		/* No cache, a bad file, or an unverified result: calibrate (again), which runs
		 * the file; for a caller that asks for the node model, also a cache without one. */
		cal = ffm_calibration__free(cal);
		if (!out->trusted && !(flags & FFM_READY_RUN_UNTRUSTED)) {
			snprintf(why, why_len, "not calibrated: the file is %s, and ffm runs only root's "
				 "files on file systems root trusts (no verified calibration of build-id "
				 "%.40s is cached; copy it into a root-owned directory of the node's own file "
				 "systems, or of trusted_driver_dirs, and calibrate the copy: "
				 "ffmctl calibrate --driver COPY)",
				 untrusted, ffm_driver__build_id(out->drv));
			err = -EPERM;
			goto fail;
		}
		if (ffm_calib_probe_path(probe, sizeof(probe)) < 0) {
			snprintf(why, why_len,
				 "the calibration program ffm-calib-probe was not found (set "
				 "FFM_CALIB_PROG)");
			err = -ENOENT;
			goto fail;
		}
		/* The wait function only, unless asked: a job's process is held meanwhile, and its
		 * job may be using the GPU the node model would time (ffmctl calibrate measures
		 * it, and `ffmctl profile` before its program starts). A model that cannot be
		 * measured leaves the calibration as it is (node_model_error says why). */
		err = ffm_calibrate(&(struct ffm_calibrate_opts){ .sz = sizeof(struct ffm_calibrate_opts),
				    .driver_path = fdpath, .display_path = path, .probe_path = probe,
				    .cache_dir = out->trusted && cache[0] ? cache : NULL,
				    .force = true,
				    .skip_node_model = !(flags & FFM_READY_NODE_MODEL) }, &cal);
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
	out->node_model = node_model_json(cal);
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
	free(d->node_model);
	d->node_model = NULL;
}
