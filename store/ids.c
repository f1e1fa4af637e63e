/* SPDX-License-Identifier: MIT */
/*
 * The store's stable ids (ffm_store.h, "ids"): the values a writer derives from names and
 * frames so that runs recorded by different processes, daemon instances and versions of ffm
 * agree. Stores on disk hold them: never change a value.
 */
#include "store/ffm_store.h"

uint32_t ffm_store_api_id(const char *base)
{
	uint32_t h = 2166136261u; /* FNV-1a 32 */

	for (; *base; base++)
		h = (h ^ (uint8_t)*base) * 16777619u;
	h &= 0x7fffffff;
	return h ? h : 1;
}

static uint64_t mix64(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdULL;
	x ^= x >> 33;
	return x;
}

/* One frame folded into the stack hash: FNV-1a 64 over the identity's bytes, then the offset,
 * then a mix. */
static uint64_t frame_hash(uint64_t h, const char *id, uint64_t off)
{
	for (; id && *id; id++)
		h = (h ^ (uint8_t)*id) * 0x100000001b3ULL;
	h ^= off;
	h *= 0x100000001b3ULL;
	return mix64(h);
}

uint64_t ffm_store_stack_hash(const struct ffm_store_frame *frames, size_t n)
{
	uint64_t h = 0xcbf29ce484222325ULL;

	for (size_t i = 0; i < n; i++)
		h = frame_hash(h, frames[i].build_id ? frames[i].build_id : frames[i].module,
			       frames[i].offset);
	return h ? h : 1;
}
