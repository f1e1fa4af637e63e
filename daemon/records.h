/* SPDX-License-Identifier: MIT */
/*
 * Which part handles which record type: the one table of them (daemon/records.c). The
 * collector checks a record's size with it; ffmd's core (daemon/server.c, on_record) asks it
 * what a record means for the drivers, the holds and the sampler before its job's run gets it;
 * the recorder (daemon/recorder.c) asks it which of its handlers stores it. A new record type
 * is one row there (and its handler); nothing else switches on FFM_REC_*.
 */
#ifndef FFM_RECORDS_H
#define FFM_RECORDS_H

#include <stddef.h>
#include <stdint.h>

#include "bpf/ffm.h"

/* What ffmd's core does with a record before (or instead of) its job's run (server.c). */
enum ffm_rec_core {
	FFM_CORE_RUN = 0,     /* only its job's run */
	FFM_CORE_DRIVER,      /* a driver mapped (drivers.c, the holds): for no job */
	FFM_CORE_SAMPLER,     /* a context release (adaptive.c): for no job */
	FFM_CORE_EXEC,        /* a process joined: a rule's job made, its driver looked up */
	FFM_CORE_FORK,        /* a process forked: a stopped child held (holds.c), its driver */
	FFM_CORE_EXIT,        /* a process left: its sampler's span, its links, a rule job's end */
	FFM_CORE_WAIT,        /* a wait: the sampler's too (adaptive.c) */
};

/* Which of the recorder's handlers stores it (FFM_STORE_NONE: none). */
enum ffm_rec_store {
	FFM_STORE_NONE = 0,
	FFM_STORE_WAIT,
	FFM_STORE_CALL,
	FFM_STORE_STACK,
	FFM_STORE_PROC,   /* exec, fork, exit: the process table */
	FFM_STORE_XFER,   /* memtrace: a transfer's hash */
	FFM_STORE_RANGE,  /* memtrace: a DtoH copy's destination */
	FFM_STORE_HIT,    /* memtrace: a watchpoint hit */
	FFM_STORE_FAULT,  /* memtrace: a page fault in managed memory (stage 4) */
	FFM_STORE_SAMPLE,
	FFM_STORE_FUNC,
	FFM_STORE_PYCODE,
};

struct ffm_rec_kind {
	size_t size; /* its struct's: a shorter record is not read */
	enum ffm_rec_core core;
	enum ffm_rec_store store;
};

/* Record type @type's row, NULL for a type this build does not know. */
const struct ffm_rec_kind *ffm_rec_kind(uint32_t type);

#endif
