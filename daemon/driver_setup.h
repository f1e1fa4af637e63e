/* SPDX-License-Identifier: MIT */
/*
 * A driver file made ready for probing: opened (build-id, exported offsets) and its internal
 * wait function known from a verified calibration (cached per build-id in the state
 * directory, calibrated on first use). An unverified result is never used.
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
	double calib_seconds;
};

/* -errno; *why gets a short human reason on failure (static string or in @why_buf). */
int ffm_driver_ready(const char *path, const char *state_dir, struct ffm_ready_driver *out,
		     char *why_buf, size_t why_len);
void ffm_ready_driver__release(struct ffm_ready_driver *d);

/* Path of the calibration program (ffm-calib-probe); -ENOENT when not found. */
int ffm_calib_probe_path(char *buf, size_t len);

#endif
