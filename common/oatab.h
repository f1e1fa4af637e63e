/* SPDX-License-Identifier: MIT */
/*
 * A small open-addressing hash table for the daemon's per-run bookkeeping (stack keys, processes,
 * threads, transfer contents): fixed-size entries that begin with a two-word key, linear
 * probing, doubling at half load, no deletion (the tables live as long as one run).
 *
 * Every entry type starts with `struct oa_key`; a key of (0, 0) marks an empty slot, so callers
 * never insert that key. Pointers returned stay valid until the next insert (which may grow the
 * table and move the entries).
 */
#ifndef FFM_OATAB_H
#define FFM_OATAB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct oa_key {
	uint64_t a, b;
};

struct oatab {
	void *e;
	size_t n, cap;
	size_t esz; /* sizeof the entry type */
};

#define OATAB_INIT(type) ((struct oatab){ .esz = sizeof(type) })

/* The entry with key (a, b); with @insert, a new zeroed one (key set) when absent. NULL when
 * absent and not inserting, on an out-of-memory insert, or for the key (0, 0). */
void *oatab_find(struct oatab *t, uint64_t a, uint64_t b, bool insert);
/* Slot @i (0 <= i < t->cap) if it holds an entry, else NULL: for iterating. */
void *oatab_slot(const struct oatab *t, size_t i);
void oatab_free(struct oatab *t);

#endif
