/* SPDX-License-Identifier: MIT */
/*
 * The store's stable ids (ffm_store.h, "ids"): the values a writer derives from names and
 * frames so that runs recorded by different processes, daemon instances and versions of ffm
 * agree. Stores on disk hold them: never change a value.
 */
#include "bpf/ffm_hash.h"
#include "store/ffm_store.h"

uint32_t ffm_store_api_id(const char *base)
{
	uint32_t h = FFM_FNV1A32_INIT;

	for (; *base; base++)
		h = ffm_fnv1a32_byte(h, (uint8_t)*base);
	h &= 0x7fffffff;
	return h ? h : 1;
}

/* One frame folded into the stack hash: FNV-1a 64 over the identity's bytes, then the offset,
 * then a mix. */
static uint64_t frame_hash(uint64_t h, const char *id, uint64_t off)
{
	for (; id && *id; id++)
		h = ffm_fnv1a_byte(h, (uint8_t)*id);
	h ^= off;
	h *= FFM_FNV1A_PRIME;
	return ffm_mix64_half(h);
}

uint64_t ffm_store_stack_hash(const struct ffm_store_frame *frames, size_t n)
{
	uint64_t h = FFM_FNV1A_INIT;

	for (size_t i = 0; i < n; i++) {
		h = frame_hash(h, frames[i].build_id ? frames[i].build_id : frames[i].module,
			       frames[i].offset);
		if (frames[i].inlined) /* a stack without inlined frames keeps its old hash */
			h = ffm_mix64_half((h ^ frames[i].inlined) * FFM_FNV1A_PRIME);
	}
	return h ? h : 1;
}
