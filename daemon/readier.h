/* SPDX-License-Identifier: MIT */
/*
 * Drivers made ready off ffmd's loop. Making a driver file ready (daemon/driver_setup.h) opens
 * and parses it and, for a build-id not calibrated yet, calibrates it: one to a few seconds in
 * which the loop must go on reading the ring buffer and answering the socket. One worker thread
 * takes the requests in order; the loop learns of finished ones through an eventfd it polls,
 * and takes each result once. The processes waiting for a driver stay held meanwhile (their
 * holds are the loop's business, not this file's).
 */
#ifndef FFM_READIER_H
#define FFM_READIER_H

#include <stdint.h>

#include "daemon/driver_setup.h"

struct ffm_readier;

struct ffm_readier_result {
	uint64_t cookie;              /* the submitter's, as given */
	int err;                      /* 0: @rd is ready (and now the taker's) */
	struct ffm_ready_driver rd;
	char why[512];
};

int ffm_readier__new(const char *state_dir, struct ffm_readier **ret);
/* Readable (EPOLLIN) while results wait to be taken. */
int ffm_readier__fd(const struct ffm_readier *r);
/* Queue @path; -ENOSPC when the queue is full. */
int ffm_readier__submit(struct ffm_readier *r, const char *path, uint64_t cookie);
/* Take one finished result: 0, or -EAGAIN when none is waiting. */
int ffm_readier__take(struct ffm_readier *r, struct ffm_readier_result *out);
/* Stops the worker after its current request; results not taken are released. */
struct ffm_readier *ffm_readier__free(struct ffm_readier *r);

#endif
