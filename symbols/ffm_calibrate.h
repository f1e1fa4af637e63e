/* SPDX-License-Identifier: MIT */
/*
 * Wait-function calibration. libcuda is stripped, and the internal function through which
 * every synchronizing call waits is found automatically:
 *
 *  1. The calibration program (ffm-calib-probe) dlopens the driver and blocks in each
 *     synchronizing call (cuCtxSynchronize, cuStreamSynchronize, cuEventSynchronize, cuMemcpyDtoH,
 *     cuMemFree, cuMemcpyDtoHAsync to pageable memory) on a kernel that never finishes, under
 *     each schedule mode (spin, yield, blocking-sync).
 *  2. While it is blocked, the waiting thread's stack is sampled a few times with libdwfl
 *     (ptrace); each pc inside libcuda is mapped to its function by the FDE covering it (true
 *     entry = FDE initial location), and the innermost libcuda function common to every
 *     sampled stack of every call and mode is the candidate.
 *  3. The candidate is verified with an entry-only uprobe counter (never a return probe on an
 *     unverified address): each synchronizing call must hit it, each non-synchronizing call
 *     (cuLaunchKernel, cuDriverGetVersion, cuMemcpyHtoDAsync from pinned memory, cuEventRecord)
 *     must not.
 *
 * The result with its evidence is cached as <cache_dir>/<build-id>.json (written atomically;
 * the caller picks the directory: ffmd's is drivers/ of its state directory, see
 * store/ffm_store.h); a cached result is used only for the same build-id, and one that failed
 * verification is kept as "verified": false and never used as if verified.
 * Functions return 0 or -errno and never print.
 */
#ifndef FFM_CALIBRATE_H
#define FFM_CALIBRATE_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct ffm_calibration;

struct ffm_calibrate_opts {
	size_t sz;
	const char *driver_path; /* the libcuda to calibrate (required) */
	const char *probe_path;  /* the ffm-calib-probe program (required unless cached) */
	const char *cache_dir;   /* directory of cached results; NULL: no cache */
	bool force;              /* calibrate even when a verified cached result exists */
	/* NULL-terminated; NULL = spin, yield, blocking. Must hold "blocking" and one polling
	 * mode (spin, yield, auto), else -EINVAL: polling alone also finds the poll helper. */
	const char *const *modes;
	int samples;             /* stacks sampled per blocked call; 0 = 3 */
	int timeout_ms;          /* longest wait for one reply of the probe; 0 = 10000 */
	/* The driver's name for people and the cache (NULL: driver_path), when driver_path is a
	 * /proc/PID/fd/N link to a file opened and checked once (daemon/driver_setup.h). */
	const char *display_path;
	bool skip_node_model; /* find the wait function only; a cached result without a model
				 is then used as is */
};

/*
 * Calibrate (or load the cached result). A result that could not be verified is returned
 * with 0 and __verified() false (and cached as such); an error that leaves no result (the
 * driver cannot be opened, the probe does not start, no common function found) is -errno:
 * -ENOENT, -ENOEXEC, -ETIMEDOUT, -ESRCH (probe died), -EPROTO (probe said ERROR),
 * -ENODATA (no common wait function).
 */
int ffm_calibrate(const struct ffm_calibrate_opts *opts, struct ffm_calibration **ret);

/* The cached result for @build_id: -ENOENT when there is none, -EINVAL for a bad file. */
int ffm_calibration__load_cached(const char *cache_dir, const char *build_id,
				 struct ffm_calibration **ret);
/* Write <cache_dir>/<build-id>.json atomically (creating the directories). */
int ffm_calibration__save(const struct ffm_calibration *c, const char *cache_dir);
/* The result as one JSON object (malloc'd, no trailing newline). */
int ffm_calibration__to_json(const struct ffm_calibration *c, char **json);
struct ffm_calibration *ffm_calibration__free(struct ffm_calibration *c);

const char *ffm_calibration__build_id(const struct ffm_calibration *c);
const char *ffm_calibration__driver_path(const struct ffm_calibration *c);
const char *ffm_calibration__driver_version(const struct ffm_calibration *c);
bool ffm_calibration__verified(const struct ffm_calibration *c);
bool ffm_calibration__from_cache(const struct ffm_calibration *c);
uint64_t ffm_calibration__wait_offset(const struct ffm_calibration *c); /* file offset of entry */
uint64_t ffm_calibration__wait_size(const struct ffm_calibration *c);
double ffm_calibration__seconds(const struct ffm_calibration *c);
/* Why verification failed ("" when verified). */
const char *ffm_calibration__reason(const struct ffm_calibration *c);
/* The evidence: an array of the stacks sampled ({"kind": "stack", "call", "mode", "frames",
 * "libcuda_functions"}) and of the calls counted ({"kind": "count", "call", "mode",
 * "synchronizing", "hits", "ok"}); NULL when there is none (a cache file without it). */
const json_t *ffm_calibration__evidence(const struct ffm_calibration *c);

struct ffm_node_model;
/* The node models kept with this driver build, one per GPU key (maybe none). */
const struct ffm_node_model *ffm_calibration__node_models(const struct ffm_calibration *c,
							  size_t *n);
/* The model of GPU key @gpu; with @gpu NULL, the one model when there is exactly one (the
 * caller does not know its GPU and the node has one kind); else NULL. */
const struct ffm_node_model *ffm_calibration__node_model(const struct ffm_calibration *c,
							 const char *gpu);
/* Why the last calibration measured no node model ("" when it did or was not asked). */
const char *ffm_calibration__node_model_error(const struct ffm_calibration *c);

#endif
