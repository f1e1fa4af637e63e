/* SPDX-License-Identifier: MIT */
/*
 * The open-addressing hash table of ffm, the one every library uses (the daemon's per-run
 * bookkeeping, the symbolizer's cache, the model's chains and groups, the analysis's maps):
 * fixed-size entries that begin with a two-word key, linear probing, doubling at half load, no
 * deletion (the tables live as long as one run, one report, one graph).
 *
 * Why common/: the lowest floor of the build, with no dependency but the hash functions of
 * bpf/ffm_hash.h, so that symbols/, stages/, store/, analysis/, daemon/ and cli/ can all use it
 * without one of them reaching up to another.
 *
 * Every entry type starts with `struct oa_key`; a key of (0, 0) marks an empty slot, so callers
 * never insert that key. Pointers returned stay valid until the next insert (which may grow the
 * table and move the entries). Lookups without insert (oatab_get) do not write: several threads
 * may look up at once while no one inserts.
 *
 * A map from any 64-bit key (0 included) to a 32-bit value is an oatab of struct oa_u32 used
 * through oatab_get_u32 / oatab_put_u32, which store the key as (key, 1).
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
/* The entry with key (a, b), or NULL. */
void *oatab_get(const struct oatab *t, uint64_t a, uint64_t b);
/* Room for @n entries in all without growing. 0 or -ENOMEM. */
int oatab_reserve(struct oatab *t, size_t n);
/* Slot @i (0 <= i < t->cap) if it holds an entry, else NULL: for iterating. */
void *oatab_slot(const struct oatab *t, size_t i);
void oatab_free(struct oatab *t);

/* u64 -> u32 maps. */
struct oa_u32 {
	struct oa_key k;
	uint32_t v;
};

#define OATAB_U32_INIT OATAB_INIT(struct oa_u32)

/* The value of @key, or UINT32_MAX when absent. */
uint32_t oatab_get_u32(const struct oatab *t, uint64_t key);
/* Set (insert or replace) the value of @key. 0 or -ENOMEM. */
int oatab_put_u32(struct oatab *t, uint64_t key, uint32_t v);
/* The value of @key; when absent, @v is inserted and returned (*inserted = true). UINT32_MAX:
 * out of memory. */
uint32_t oatab_get_or_put_u32(struct oatab *t, uint64_t key, uint32_t v, bool *inserted);

#endif
