/* SPDX-License-Identifier: MIT */
/*
 * A driver file made ready for probing: opened (build-id, exported offsets) and its internal
 * wait function known from a verified calibration (cached per build-id in the state
 * directory, calibrated on first use). An unverified result is never used.
 *
 * Which files are run (docs/SECURITY.md). Calibrating runs the file: ffm-calib-probe loads it
 * with the caller's privileges. A file is *trusted* when it is a regular file owned by root,
 * writable by nobody else, on a file system root vouches for: not FUSE (its server chooses the
 * owners) and not mounted nosuid (a user's file system image that root mounted for them, as a
 * setuid container runtime does: its owners and modes are whatever its builder chose), unless
 * the file lies in one of the directories of trusted_driver_dirs (ffmd.conf: root's
 * directories, writable by nobody else, known by identity from the start on, so a mount over
 * one is not it). Only a trusted file is calibrated; any other (a copy in a user's directory,
 * a user's container) is never run: it is used only if a verified calibration of its build-id
 * is cached, which only trusted files write. The file is opened once, checked on the open
 * file and handed to the calibration as that file (/proc/PID/fd/N), so a path swapped between the
 * check and the run changes nothing. Opening never blocks (a FIFO by the driver's name is refused).
 */
#ifndef FFM_DRIVER_SETUP_H
#define FFM_DRIVER_SETUP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct ffm_driver;

struct ffm_ready_driver {
	struct ffm_driver *drv;
	uint64_t wait_off, wait_size;
	bool calibrated_now; /* false: taken from the cache */
	bool trusted;        /* see above */
	double calib_seconds;
	char *node_model;    /* the cached node model of its GPU as JSON (malloc'ed), NULL: none */
};

enum ffm_ready_flags {
	/* Calibrate an untrusted file too: `ffmctl profile`, whose application loads that very
	 * file with the same privileges anyway. */
	FFM_READY_RUN_UNTRUSTED = 1u << 0,
	/* Measure the node model (symbols/ffm_node_model.h) where the cache has none: `ffmctl
	 * profile`, which runs before its program starts, so nothing of its own uses the GPU and
	 * no process is held meanwhile (ffmd never does: docs/ACCURACY.md, "Who measures"). */
	FFM_READY_NODE_MODEL = 1u << 1,
};

/* -errno; @why gets a short human reason on failure. */
int ffm_driver_ready(const char *path, const char *state_dir, unsigned flags,
		     struct ffm_ready_driver *out, char *why, size_t why_len);
void ffm_ready_driver__release(struct ffm_ready_driver *d);

/*
 * Open the driver file @path once (never blocking, regular files only) and say whether it is
 * trusted: returns the fd, or -errno with @why set. @why says why an untrusted file is not
 * trusted ("" for a trusted one).
 */
int ffm_driver_file_open(const char *path, bool *trusted, char *why, size_t why_len);

/*
 * The allow-list of trusted driver directories (":", "," or blank separated; NULL or "" none),
 * replacing the previous one: each must be root's, writable by nobody else and not on FUSE
 * (-EPERM, -errno with @why). ffm_driver_trust_config: that of the config file @config_path
 * (NULL: the default one, none when it does not exist), as ffmctl calibrate takes it.
 */
int ffm_driver_trust_dirs(const char *list, char *why, size_t why_len);
int ffm_driver_trust_config(const char *config_path, char *why, size_t why_len);

/* The calibration program (ffm-calib-probe): $FFM_CALIB_PROG, beside our own executable (a build
 * tree or an install's bin), or the libexec directory; -ENOENT when not found. */
int ffm_calib_probe_path(char *buf, size_t len);

#endif
