/* SPDX-License-Identifier: MIT */
/*
 * The node model: what the GPU and its driver charge for the work a fix changes, measured by
 * the calibration probe (symbols/calib/ffm-calib-probe.c, command MEASURE) right after the wait
 * function is found, and cached in the driver's calibration file (symbols/ffm_calibrate.h).
 *
 *  - copy time of one synchronous copy per direction (H2D, D2H), host memory kind (pageable,
 *    pinned, managed) and size (a few sizes from 4 KiB to 64 MiB; in between, interpolated
 *    linearly; beyond the largest, the last segment's slope); the pageable copy's staging cost
 *    is the part a pinned buffer removes: pageable time - pinned time;
 *  - the cost of migrating managed pages: to the device (a device write after the host
 *    read the pages) and back to the host (the host's reads after a device write: its
 *    faults), per page of the measured page size, and how many pages each of those faults
 *    brings back;
 *  - the wait's exit latency by wait length (20 us .. 5 ms) and schedule mode (spin, yield,
 *    blocking sync): host time of "launch a kernel of length L, wait for it" minus the
 *    kernel's event-timed length. Each figure also holds the launch's submission, the same at
 *    every point, so only differences between two points are used (stages/ffm_price.h).
 *
 * A model is keyed by the GPU it was measured on (ffm_node_model.gpu: name, compute capability
 * and memory size, as the driver reports device 0) and applied to nothing else: the same
 * driver build on another GPU model has other speeds. It lives in the per-node cache file of
 * the driver build (drivers/<build-id>.json of the node's state directory), one entry per GPU
 * key, with FFM_NODE_MODEL_VERSION; an entry of another version is measured again.
 * Pure functions over plain structs; no I/O.
 */
#ifndef FFM_NODE_MODEL_H
#define FFM_NODE_MODEL_H

#include <jansson.h>
#include <stdint.h>

#define FFM_NODE_MODEL_VERSION 1
#define FFM_NM_MAX_POINTS 8

enum ffm_mem_kind { FFM_MEM_PAGEABLE, FFM_MEM_PINNED, FFM_MEM_MANAGED, FFM_MEM_KINDS };
enum ffm_copy_dir { FFM_COPY_H2D, FFM_COPY_D2H, FFM_COPY_DIRS };
enum ffm_sched_mode { FFM_SCHED_SPIN, FFM_SCHED_YIELD, FFM_SCHED_BLOCKING, FFM_SCHED_MODES };

struct ffm_node_model {
	int version;
	char gpu[160]; /* "NAME sm_XY MEM_MiB": the key; the model applies to this GPU only */
	int nsizes;    /* copy sizes measured, ascending */
	uint64_t size[FFM_NM_MAX_POINTS];
	double copy_ns[FFM_COPY_DIRS][FFM_MEM_KINDS][FFM_NM_MAX_POINTS]; /* < 0: not measured */
	uint64_t page_size;     /* of the migration figures; 0: migration not measured */
	double to_device_ns_per_page, to_host_ns_per_page;
	/* Pages the host gets back per page fault after a device write (the driver's fault
	 * read-ahead: about 20 on the H200, 1 on the simulated driver), counted in the to_host
	 * measurement; 0: not counted (a model cached before, or no page-fault counter), taken
	 * as 1. */
	double host_pages_per_fault;
	int nwaits; /* wait lengths measured, ascending */
	uint64_t wait_ns[FFM_NM_MAX_POINTS];
	double exit_ns[FFM_SCHED_MODES][FFM_NM_MAX_POINTS]; /* NAN: not measured */
	double seconds; /* how long the measuring took */
};

const char *ffm_mem_kind_name(enum ffm_mem_kind k);     /* "pageable", "pinned", "managed" */
const char *ffm_copy_dir_name(enum ffm_copy_dir d);     /* "h2d", "d2h" */
const char *ffm_sched_mode_name(enum ffm_sched_mode m); /* "spin", "yield", "blocking" */
/* The enum value of a name above; -1 when unknown. */
int ffm_mem_kind_of(const char *s);
int ffm_copy_dir_of(const char *s);
int ffm_sched_mode_of(const char *s);

/* An empty model (nothing measured) of the current version. */
void ffm_node_model__init(struct ffm_node_model *nm);

/*
 * Read one line of the probe's MEASURE answer into @nm:
 *   GPU <key...>                       COPY <dir> <kind> <bytes> <ns>
 *   MIGRATE <to_device|to_host> <page_size> <pages> <ns>
 *   FAULTS to_host <pages> <faults>    (the faults of that to_host measurement)
 *   EXIT <mode> <wait_ns> <ns>         MEASURED <seconds>
 * Returns 1 for MEASURED (the end), 0 for a line taken, -EINVAL for anything else (a size or
 * length out of order, more points than FFM_NM_MAX_POINTS, a negative or absurd figure).
 */
int ffm_node_model__parse_line(struct ffm_node_model *nm, const char *line);
/* 0 when @nm has every copy, migration and exit figure, else -ENODATA. */
int ffm_node_model__complete(const struct ffm_node_model *nm);

/* Time of one copy of @bytes; < 0 when the model has no figure for it. */
double ffm_node_model__copy_ns(const struct ffm_node_model *nm, enum ffm_copy_dir dir,
			       enum ffm_mem_kind kind, uint64_t bytes);
/* The pageable copy's staging cost (pageable - pinned, at least 0); < 0: no figures. */
double ffm_node_model__staging_ns(const struct ffm_node_model *nm, enum ffm_copy_dir dir,
				  uint64_t bytes);
/* Exit latency of a wait of @wait_ns in @mode, interpolated in log(length) and clamped to the
 * measured range; -1 when the mode was not measured (a measured figure may be slightly
 * negative: timer granularity). */
double ffm_node_model__exit_ns(const struct ffm_node_model *nm, enum ffm_sched_mode mode,
			       uint64_t wait_ns);

/* JSON (docs/schema/calibrate.schema.json, "node_models" items) both ways; from_json gives
 * -EINVAL for a malformed object and -ESTALE for another version. */
json_t *ffm_node_model__to_json(const struct ffm_node_model *nm);
int ffm_node_model__from_json(const json_t *v, struct ffm_node_model *nm);

#endif
