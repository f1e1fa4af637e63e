/* SPDX-License-Identifier: MIT */
/*
 * Pricing a fix: the wall time saved when a fix changes the *work* of a problem's calls, not
 * only its wait, priced with the node model (symbols/ffm_node_model.h). Pure functions over
 * plain structs, table-tested in tests/stages/test_price.c; docs/ACCURACY.md ("Pricing a fix")
 * says where each input comes from in the store and how each rule was checked.
 *
 * The rules, per call (every result is for all @calls of the problem's call site):
 *  (a) delete:       the call's own time (recorded, else modeled) + the migration of managed
 *                    pages it causes (modeled, when its recorded time cannot hold it) + the
 *                    host's page faults that follow (stage 4's count, else every page when the
 *                    host touches the pages again)
 *  (b) pin:          a pageable copy made from/to pinned memory: the staging cost, the copy's
 *                    modeled time at the pageable speed minus at the pinned speed
 *  (c) reuse:        a buffer reused: (a) for every call of the set but one allocation and one
 *                    free (the buffer that stays)
 *  (d) move a wait:  the wait gets shorter by the host work it is moved past (stage 4's
 *                    first-use delay), and its exit latency changes with its length and mode:
 *                    (old - new) + exit(old) - exit(new)
 *  (e) required read: a read whose value the next GPU step may need prices 0 in the headline;
 *                    conditionally, reading it every N iterations saves (a) for (1 - 1/N) of
 *                    the calls ("if the value used at LINE can wait ...").
 * Functions return 0 or -EINVAL (bad input: the field is named by ffm_price.why) or -ENODATA
 * (the model lacks a figure the rule needs: the caller falls back to pricing the wait).
 */
#ifndef FFM_PRICE_H
#define FFM_PRICE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "symbols/ffm_node_model.h"

enum ffm_price_kind {
	FFM_PRICE_COPY,   /* a host<->device copy (dir, mem: its host side) */
	FFM_PRICE_MEMSET, /* mem FFM_MEM_MANAGED: of managed memory; any other: device memory */
	FFM_PRICE_ALLOC,
	FFM_PRICE_FREE,
	FFM_PRICE_SYNC,   /* an explicit sync (stream, event, context) */
	FFM_PRICE_KINDS
};

struct ffm_price_call {
	enum ffm_price_kind kind;
	enum ffm_copy_dir dir;
	enum ffm_mem_kind mem;
	uint64_t bytes;
	uint64_t calls;     /* how many times the call site ran */
	double call_ns;     /* mean recorded host time of one call (stage 2); < 0: not recorded */
	double wait_ns;     /* mean wait inside it (stage 1/2); 0: it did not wait */
	enum ffm_sched_mode mode;
	bool host_touched_before; /* managed: the host touched the pages last (device use migrates) */
	bool host_touches_after;  /* managed: the host touches the pages after the call */
	int64_t host_faults;      /* stage 4: host page faults per call after it; < 0: not counted */
};

struct ffm_price_wait {
	uint64_t calls;
	double wait_ns;  /* mean length of the wait now (stage 1/2) */
	double moved_ns; /* host work the wait is moved past (stage 4's first-use delay) */
	enum ffm_sched_mode mode;
};

struct ffm_price {
	double saved_ns;       /* the headline: what the fix saves, over all calls */
	double conditional_ns; /* (e): what reading every_n-th time would save; 0 otherwise */
	uint32_t every_n;
	/* parts of saved_ns (or of conditional_ns for (e)), over all calls */
	double own_ns, migrate_ns, fault_ns, staging_ns, overlap_ns, exit_ns;
	bool modeled;    /* some part came from the node model rather than the record */
	const char *why; /* the bad field or the missing figure when not 0 */
};

int ffm_price__delete(const struct ffm_node_model *nm, const struct ffm_price_call *c,
		      struct ffm_price *out);
int ffm_price__pin(const struct ffm_node_model *nm, const struct ffm_price_call *c,
		   struct ffm_price *out);
int ffm_price__reuse(const struct ffm_node_model *nm, const struct ffm_price_call *calls,
		     size_t n, struct ffm_price *out);
int ffm_price__move_wait(const struct ffm_node_model *nm, const struct ffm_price_wait *w,
			 struct ffm_price *out);
int ffm_price__required_read(const struct ffm_node_model *nm, const struct ffm_price_call *c,
			     uint32_t every_n, struct ffm_price *out);

/* "if the value used at LINE can wait, reading it every N iterations saves X.XXX s" */
int ffm_price__conditional_text(char *buf, size_t len, const char *use_line,
				const struct ffm_price *p);

#endif
