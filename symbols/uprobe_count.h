/* SPDX-License-Identifier: MIT */
/*
 * Counting uprobes through the perf "uprobe" PMU: no BPF program, just a kernel counter of how
 * often an instruction at a file offset was executed (entry probe) or a function returned
 * (return probe). Used to verify a wait-function candidate during calibration and by the tests
 * that check the simulated driver's contract.
 *
 * A return probe must only be placed at a function's true entry: anywhere else the kernel
 * overwrites a word on the traced thread's stack that is not a return address (docs/DESIGN.md).
 */
#ifndef FFM_UPROBE_COUNT_H
#define FFM_UPROBE_COUNT_H

#include <stdbool.h>
#include <stdint.h>
#include <linux/capability.h>
#include <sys/types.h>

#include "common/caps.h"

struct ffm_uprobe_counter;

/* What opening a counter needs (common/caps.h mask): the kernel's uprobe PMU refuses
 * perf_event_open without CAP_SYS_ADMIN, CAP_PERFMON and CAP_BPF or not (Linux 6.18). */
#define FFM_UPROBE_COUNTER_CAPS FFM_CAP(CAP_SYS_ADMIN)

/*
 * Count executions of the instruction at file offset @offset of @path.
 * @pid: the process to count in; -1 counts in every process on every CPU (one event per CPU).
 * For this process (getpid()), its threads count, also those created later (inherit). For
 * another process, the threads it has at open time count, not later ones: an inherited uprobe
 * event is re-created at clone() from a pointer into the opener's memory, which breaks
 * pthread_create() in a foreign process.
 * Returns 0 or -errno (-EACCES/-EPERM without FFM_UPROBE_COUNTER_CAPS, -ENOENT for a missing
 * file, -EINVAL for an offset the kernel rejects).
 */
int ffm_uprobe_counter__open(const char *path, uint64_t offset, bool retprobe, pid_t pid,
			     struct ffm_uprobe_counter **ret);
/* Hits so far (>= 0) or -errno. */
int64_t ffm_uprobe_counter__read(struct ffm_uprobe_counter *c);
/* Start again from zero. */
int ffm_uprobe_counter__reset(struct ffm_uprobe_counter *c);
struct ffm_uprobe_counter *ffm_uprobe_counter__free(struct ffm_uprobe_counter *c);

#endif
