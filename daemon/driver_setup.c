/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "daemon/driver_setup.h"
#include "symbols/ffm_calibrate.h"
#include "symbols/ffm_driver.h"

#ifndef FFM_LIBEXECDIR
#define FFM_LIBEXECDIR "/usr/local/libexec/ffm"
#endif

/* The calibration program: $FFM_CALIB_PROG, beside our own executable (a build tree or an
 * install's bin), or the libexec directory. */
int ffm_calib_probe_path(char *buf, size_t len)
{
	const char *env = getenv("FFM_CALIB_PROG");
	char self[PATH_MAX];
	ssize_t n;

	if (env && *env) {
		snprintf(buf, len, "%s", env);
		return access(buf, X_OK) ? -errno : 0;
	}
	n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (n > 0) {
		char *slash;

		self[n] = 0;
		slash = strrchr(self, '/');
		if (slash) {
			*slash = 0;
			snprintf(buf, len, "%s/ffm-calib-probe", self);
			if (access(buf, X_OK) == 0)
				return 0;
			snprintf(buf, len, "%s/../libexec/ffm/ffm-calib-probe", self);
			if (access(buf, X_OK) == 0)
				return 0;
		}
	}
	snprintf(buf, len, "%s/ffm-calib-probe", FFM_LIBEXECDIR);
	return access(buf, X_OK) ? -ENOENT : 0;
}

int ffm_driver_ready(const char *path, const char *state_dir, struct ffm_ready_driver *out,
		     char *why, size_t why_len)
{
	struct ffm_calibration *cal = NULL;
	char probe[PATH_MAX] = "";
	int err;

	memset(out, 0, sizeof(*out));
	if (why_len)
		why[0] = 0;
	err = ffm_driver__open(path, NULL, &out->drv);
	if (err < 0) {
		snprintf(why, why_len, "%s", err == -ENOEXEC ? "not an ELF shared object" :
					     err == -ENODATA ? "no dynamic symbol table" : strerror(-err));
		return err;
	}
	err = ffm_calibration__load_cached(state_dir, ffm_driver__build_id(out->drv), &cal);
	if (err < 0 || !ffm_calibration__verified(cal)) {
		/* No cache, a bad file, or an unverified result: calibrate (again). */
		cal = ffm_calibration__free(cal);
		if (ffm_calib_probe_path(probe, sizeof(probe)) < 0) {
			snprintf(why, why_len, "the calibration program ffm-calib-probe was not found (set FFM_CALIB_PROG)");
			err = -ENOENT;
			goto fail;
		}
		err = ffm_calibrate(&(struct ffm_calibrate_opts){ .sz = sizeof(struct ffm_calibrate_opts),
				    .driver_path = path, .probe_path = probe, .state_dir = state_dir,
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
	return 0;
fail:
	ffm_calibration__free(cal);
	out->drv = ffm_driver__free(out->drv);
	return err;
}

void ffm_ready_driver__release(struct ffm_ready_driver *d)
{
	d->drv = ffm_driver__free(d->drv);
}
