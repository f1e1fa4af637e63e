/* SPDX-License-Identifier: MIT */
/*
 * Stacks unwound and symbolized off ffmd's loop. Unwinding a stack record opens the files the
 * process maps and the debug files they name (.gnu_debuglink, build ids): files a job's user
 * controls, opened as that user with a deadline (symbols/useropen.h), but each open may still
 * take that deadline, and the loop must go on reading the ring buffer and answering the socket
 * meanwhile. One worker thread (daemon/worker.h) takes the requests in order and is the only
 * user of the symbolizer it was given; the loop learns of finished ones through an eventfd and
 * runs each request's callback (ffm_unwinder__take). The submitter keeps what the request
 * borrows (the address space, the stack copy) untouched until its callback has run: the
 * recorder holds its job's later records back meanwhile (daemon/recorder.c).
 */
#ifndef FFM_UNWINDER_H
#define FFM_UNWINDER_H

#include <stddef.h>

#include "symbols/ffm_stack.h"

#define FFM_UNWIND_MAX_FRAMES 128

struct ffm_unwinder;

struct ffm_unwind_req {
	/* in: set by the submitter */
	void (*done)(struct ffm_unwind_req *req); /* on the loop; frees the request */
	void *owner;
	/* NULL, or run first, on the same thread as the unwinding (the Python frames of the stack,
	 * daemon/recorder.c: opens and reads of the process's files and memory, off the loop too) */
	void (*pre)(struct ffm_unwind_req *req);
	struct ffm_addr_space *as;      /* borrowed until done; NULL: nothing to unwind */
	struct ffm_stack_snapshot snap; /* .stack borrowed until done */
	/* The frames when unwinding finds none (process gone, no CFI): what BPF saw. */
	int npcs;
	uint64_t pcs[FFM_UNWIND_MAX_FRAMES];
	/* out */
	int n;                          /* frames, unwound or else from pcs */
	uint64_t ns;                    /* the time unwinding and symbolizing took */
	uint64_t pre_ns;                /* the time @pre took */
	struct ffm_frame frames[FFM_UNWIND_MAX_FRAMES];
	const struct ffm_sym *syms[FFM_UNWIND_MAX_FRAMES]; /* NULL: not symbolized */
};

/* Run req->pre, then unwind (else take req->pcs) and symbolize @req in the calling thread (the
 * only user of @sym meanwhile). */
void ffm_unwind_run(struct ffm_symbolizer *sym, struct ffm_unwind_req *req);

/* At most @cap requests queued, running or done and not taken. */
int ffm_unwinder__new(struct ffm_symbolizer *sym, size_t cap, struct ffm_unwinder **ret);
/* Readable (EPOLLIN) while finished requests wait for their callback. */
int ffm_unwinder__fd(const struct ffm_unwinder *u);
/* Queue @req (malloc'd; on failure it is freed, its callback not run): 0 or -ENOSPC. */
int ffm_unwinder__submit(struct ffm_unwinder *u, struct ffm_unwind_req *req);
/* Run the callback of each finished request. */
void ffm_unwinder__take(struct ffm_unwinder *u);
/* Wait for the next request to finish and run its callback: 0, or -ENOENT when none is
 * queued or running. Blocks its caller (a run's end waiting for its last stacks). */
int ffm_unwinder__wait(struct ffm_unwinder *u);
/* Stops the worker after its current request (every submitter must be done by then). */
struct ffm_unwinder *ffm_unwinder__free(struct ffm_unwinder *u);

#endif
