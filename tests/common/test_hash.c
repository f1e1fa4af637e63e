/* SPDX-License-Identifier: MIT */
/*
 * ffm's hash functions (bpf/ffm_hash.h) and its one hash table (common/oatab.h).
 *
 * The fixed values below are stored on disk or compared across runs and nodes: job keys, API
 * ids, stack keys, key file names (and the analysis's call-site keys, tests/analysis). They were
 * taken from the code as it was before the hash functions were gathered in one header; a change
 * here means existing stores no longer read the same.
 */
#include "bpf/ffm_hash.h"
#include "common/oatab.h"
#include "daemon/jobrun.h"
#include "store/ffm_store.h"
#include "tests/testutil.h"

TEST(fnv1a_reference_vectors)
{
	/* The FNV-1a 64 and 32 test vectors of the algorithm's authors. */
	ASSERT_EQ(ffm_fnv1a(FFM_FNV1A_INIT, "", 0), 0xcbf29ce484222325ULL);
	ASSERT_EQ(ffm_fnv1a(FFM_FNV1A_INIT, "a", 1), 0xaf63dc4c8601ec8cULL);
	ASSERT_EQ(ffm_fnv1a(FFM_FNV1A_INIT, "foobar", 6), 0x85944171f73967e8ULL);
	ASSERT_EQ(ffm_fnv1a32_byte(FFM_FNV1A32_INIT, 'a'), 0xe40c292cu);
	/* Chained = one call over the concatenation. */
	ASSERT_EQ(ffm_fnv1a(ffm_fnv1a(FFM_FNV1A_INIT, "foo", 3), "bar", 3),
		  ffm_fnv1a(FFM_FNV1A_INIT, "foobar", 6));
}

TEST(mixers_fixed_values)
{
	ASSERT_EQ(ffm_mix64(0), 0ULL);
	ASSERT_EQ(ffm_mix64(1), 0xb456bcfc34c2cb2cULL); /* MurmurHash3 fmix64(1) */
	ASSERT_EQ(ffm_mix64_half(1), 0xff51afd7ed558ccdULL ^ (0xff51afd7ed558ccdULL >> 33));
	ASSERT_EQ(ffm_hash_pair(1, 0), ffm_mix64_half(1));
}

TEST(job_keys_are_stable)
{
	char buf[64];
	char *argv[] = { "app", "-x", "1", NULL };

	ffm_job_key(1000, "/opt/app", argv, buf, sizeof(buf));
	ASSERT_STREQ(buf, "f712d959a0beda02");
	ffm_job_key_exec(1000, "app", 0x1234, buf, sizeof(buf));
	ASSERT_STREQ(buf, "e853f476388b8803");
	ASSERT_EQ(ffm_args_hash(argv), 0x49edcd10d784deeaULL);
	/* The BPF side hashes the argument block ("app\0-x\01\0") the same way. */
	ASSERT_EQ(ffm_args_block_hash("app\0-x\0001\0", 9), 0x49edcd10d784deeaULL);
}

TEST(api_ids_and_stack_keys_are_stable)
{
	struct ffm_store_frame f[] = {
		{ .build_id = "c0dac0da", .module = "/usr/lib/libcuda.so.1", .offset = 0x22bb00 },
		{ .module = "/opt/app", .offset = 0x1234 }, /* no build-id: the module path */
	};

	ASSERT_EQ(ffm_store_api_id("cuCtxSynchronize"), 0x5db3625cu);
	ASSERT_EQ(ffm_store_api_id("cuMemcpyHtoD"), 0x2025e90bu);
	ASSERT_EQ(ffm_store_stack_hash(f, 2), 0xfab8bb4b881ab4dcULL);
}

TEST(key_file_names_are_stable)
{
	char key[301], buf[1024];

	memset(key, 'x', 300);
	key[300] = 0;
	ASSERT_OK(ffm_store__key_file_name(key, buf, sizeof(buf)));
	ASSERT(strlen(buf) == 160 + 1 + 16 + 3);
	ASSERT_STREQ(buf + 160, "~e78ddf9f1ba85555.db");
	ASSERT_OK(ffm_store__key_file_name("nightly/cfd run", buf, sizeof(buf)));
	ASSERT_STREQ(buf, "nightly%2fcfd%20run.db");
}

struct ent {
	struct oa_key k;
	int v;
};

TEST(table_insert_find_grow_iterate)
{
	struct oatab t = OATAB_INIT(struct ent);
	size_t seen = 0;

	ASSERT(!oatab_find(&t, 1, 2, false));
	ASSERT(!oatab_get(&t, 1, 2));
	ASSERT(!oatab_find(&t, 0, 0, true)); /* (0, 0) marks empty slots */
	for (int i = 1; i <= 1000; i++) {
		struct ent *e = oatab_find(&t, (uint64_t)i, (uint64_t)i * 7, true);

		ASSERT(e && e->v == 0);
		e->v = i;
	}
	ASSERT_EQ(t.n, 1000u);
	ASSERT(t.cap >= 2000 && !(t.cap & (t.cap - 1)));
	for (int i = 1; i <= 1000; i++) {
		struct ent *e = oatab_get(&t, (uint64_t)i, (uint64_t)i * 7);

		ASSERT(e && e->v == i);
		ASSERT(oatab_find(&t, (uint64_t)i, (uint64_t)i * 7, true) == (void *)e);
	}
	ASSERT(!oatab_get(&t, 1, 8));
	for (size_t i = 0; i < t.cap; i++)
		seen += oatab_slot(&t, i) != NULL;
	ASSERT_EQ(seen, 1000u);
	oatab_free(&t);
	ASSERT(!t.e && !t.cap && !t.n);
}

TEST(table_u32_maps_take_any_key)
{
	struct oatab t = OATAB_U32_INIT;
	bool ins;

	ASSERT_EQ(oatab_get_u32(&t, 0), UINT32_MAX);
	ASSERT_OK(oatab_put_u32(&t, 0, 5)); /* key 0 is a key like any other */
	ASSERT_OK(oatab_put_u32(&t, UINT64_MAX, 6));
	ASSERT_EQ(oatab_get_u32(&t, 0), 5u);
	ASSERT_EQ(oatab_get_u32(&t, UINT64_MAX), 6u);
	ASSERT_OK(oatab_put_u32(&t, 0, 7));
	ASSERT_EQ(oatab_get_u32(&t, 0), 7u);
	ASSERT_EQ(oatab_get_or_put_u32(&t, 0, 9, &ins), 7u);
	ASSERT(!ins);
	ASSERT_EQ(oatab_get_or_put_u32(&t, 42, 9, &ins), 9u);
	ASSERT(ins);
	ASSERT_EQ(t.n, 3u);
	ASSERT_OK(oatab_reserve(&t, 5000));
	ASSERT(t.cap >= 10000);
	ASSERT_EQ(oatab_get_u32(&t, 42), 9u); /* kept through the resize */
	oatab_free(&t);
}

TEST_MAIN()
