/* SPDX-License-Identifier: MIT */
/*
 * The Python processes of one job run (the recorder's): which of its processes run a CPython
 * build ffm can walk, and their frame decoders.
 *
 * A process is looked at when it joins and at its first stack (early walks, below), and at
 * each of its stack records until its state is settled (a fork of a walked process takes its
 * parent's build at once). One whose build is known
 * (symbols/ffm_python.h) and whose layout checks out
 * against the live process gets its entry in the collector's pyprocs map: from then on BPF
 * walks its Python frames at every probe. Events before that (a process's first driver calls,
 * where the interpreter is not initialized yet or libpython was not mapped at exec) have no
 * Python frames. A build that cannot be walked is logged once and named by
 * ffm_pytrack__unsupported().
 *
 * Looking for a build opens the files the process maps (as its user, each within a deadline:
 * symbols/useropen.h), and the check and the frames read its memory: ffm_pytrack__frames is
 * not for ffmd's loop. The recorder calls it from the unwinder's worker thread with the new
 * stack (daemon/unwinder.h), while the run's later records wait: one caller at a time, never
 * two threads at once (nothing here locks).
 */
#ifndef FFM_PYTRACK_H
#define FFM_PYTRACK_H

#include <stdbool.h>
#include <stdint.h>

struct ffm_collector;
struct ffm_py_decoder;
struct ffm_pytrack;

/* @col borrowed, NULL: nothing is put into BPF (tests, replays); @proc_root NULL = "/proc". */
int ffm_pytrack__new(struct ffm_collector *col, const char *proc_root, struct ffm_pytrack **ret);
struct ffm_pytrack *ffm_pytrack__free(struct ffm_pytrack *t);

/*
 * CPU samples (stage 2): from now on each thread of a walked process that calls the driver
 * (ffm_pytrack__on_thread, at its call records) gets a task-clock sampler at @hz (0: none),
 * closed when its process exits. The samples (FFM_REC_SAMPLE) say which Python line the thread
 * runs and whether it is inside a driver call: what a framework spends around a host read.
 */
#define FFM_PYTRACK_SAMPLE_HZ 1999 /* prime: no lockstep with a loop's period */
void ffm_pytrack__sample_threads(struct ffm_pytrack *t, unsigned hz);
void ffm_pytrack__on_thread(struct ffm_pytrack *t, uint32_t tgid, uint32_t tid);

/* A process joined (@ptgid: its parent for a fork, else 0). On the loop: opens nothing. */
void ffm_pytrack__on_proc(struct ffm_pytrack *t, uint32_t tgid, uint32_t ptgid);
/*
 * Early walks: BPF walks a process's Python frames only once its pyprocs entry is in, and the
 * stacks that settle a process wait in order behind every stack of the run before them (the
 * first stacks of a process load the unwind tables of its libraries: seconds, at times), while
 * its driver calls go on. ffm_pytrack__walk_early (on the loop, at a process's join, whose
 * record is of @joined_ns; @ptgid: the parent it forked from, or 0) asks a thread of the
 * pytrack's own to find and check its build and put its entry in now, looking again for a
 * moment while its interpreter starts (one walk per process at a time: one that fails is asked
 * again if the process exec'd meanwhile); ffm_pytrack__take_early (on the loop, when the
 * unwinder's worker is not using this pytrack) installs what a walk found if its check came
 * after the join of the image the process runs now. A walk that fails changes nothing: the
 * stacks look as before.
 */
void ffm_pytrack__walk_early(struct ffm_pytrack *t, uint32_t tgid, uint32_t ptgid,
			     uint64_t joined_ns);
uint64_t ffm_pytrack__take_early(struct ffm_pytrack *t); /* the walks' time, ns */
void ffm_pytrack__on_exit(struct ffm_pytrack *t, uint32_t tgid);
/* A code record (sent before the stack records whose frames run it): the process's decoder
 * takes the copy, so those frames decode even if the interpreter frees the object meanwhile. */
struct ffm_rec_pycode;
void ffm_pytrack__code(struct ffm_pytrack *t, const struct ffm_rec_pycode *rec);
/*
 * At a stack record: settle the process's state if it is not, then decode the record's Python
 * frames (innermost first) into @py (room for @max). Returns their count. The frames' strings
 * live as long as the process's decoder (until the next call for this process's exit, exec
 * or code records).
 */
struct ffm_rec_stack;
struct ffm_store_frame;
int ffm_pytrack__frames(struct ffm_pytrack *t, const struct ffm_rec_stack *s,
			struct ffm_store_frame *py, int max);
/* Put the @np Python frames @py among the @n native frames of @frames (innermost first, room
 * for @max): where the innermost frame of the interpreter's eval loop is, else after the
 * last. Returns the new count. */
int ffm_pytrack__insert(struct ffm_store_frame *frames, int n, int max,
			const struct ffm_store_frame *py, int np);
/* The first build of this run that could not be walked ("3.10.13 ..."), NULL if none. */
const char *ffm_pytrack__unsupported(const struct ffm_pytrack *t);

#endif
