/* SPDX-License-Identifier: MIT */
/* The content hash of stage 3 (bpf/ffm_hash.h, daemon/hash.c): fixed values, streaming in any
 * piece sizes equals one call, every length and every single-bit change gives another value. */
#include "daemon/hash.h"
#include "tests/testutil.h"

static void fill(uint8_t *b, size_t n, uint64_t seed)
{
	for (size_t i = 0; i < n; i++) {
		seed = seed * 6364136223846793005ull + 1442695040888963407ull;
		b[i] = (uint8_t)(seed >> 56);
	}
}

/* Reference: blocks written out by hand from the header, zero padding of the last block. */
static uint64_t reference(const uint8_t *p, size_t n)
{
	struct ffm_hash_state s;
	size_t off = 0;

	ffm_hash_init(&s);
	while (off < n) {
		uint8_t blk[32] = { 0 };
		uint64_t w[4];

		memcpy(blk, p + off, n - off < 32 ? n - off : 32);
		memcpy(w, blk, 32);
		ffm_hash_block(&s, w[0], w[1], w[2], w[3]);
		off += 32;
	}
	return ffm_hash_final(&s, n);
}

TEST(matches_the_header_definition)
{
	uint8_t b[1000];

	fill(b, sizeof(b), 1);
	for (size_t n = 0; n <= sizeof(b); n += (n < 70 ? 1 : 37))
		ASSERT_MSG(ffm_hash64(b, n) == reference(b, n), "length %zu", n);
}

TEST(known_values)
{
	/* Pinned so that a change of the function (and a BPF side that would no longer agree
	 * with stored hashes of earlier runs) is noticed. */
	uint8_t b[64];

	for (int i = 0; i < 64; i++)
		b[i] = (uint8_t)i;
	ASSERT(ffm_hash64(b, 0) == 0xdf84e4a65e2de9ffull);
	ASSERT(ffm_hash64(b, 1) == 0xc87d38c9ec52408cull);
	ASSERT(ffm_hash64(b, 64) == 0x044b5798bc26afedull);
}

TEST(streaming_equals_one_call)
{
	static uint8_t b[100000];
	size_t pieces[] = { 1, 3, 31, 32, 33, 64, 4095, 4096, 32768, 99999 };

	fill(b, sizeof(b), 7);
	uint64_t want = ffm_hash64(b, sizeof(b));
	for (size_t k = 0; k < sizeof(pieces) / sizeof(pieces[0]); k++) {
		struct ffm_hasher h;
		size_t off = 0;

		ffm_hasher__init(&h);
		while (off < sizeof(b)) {
			size_t n = pieces[k] < sizeof(b) - off ? pieces[k] : sizeof(b) - off;

			ffm_hasher__update(&h, b + off, n);
			off += n;
		}
		ASSERT_MSG(ffm_hasher__final(&h) == want, "pieces of %zu", pieces[k]);
	}
}

TEST(length_and_padding_matter)
{
	uint8_t b[64] = { 0 };

	/* Zero padding must not make a message equal to its zero-extended self. */
	for (size_t n = 0; n < 64; n++)
		ASSERT_MSG(ffm_hash64(b, n) != ffm_hash64(b, n + 1), "zeros %zu vs %zu", n, n + 1);
}

TEST(every_bit_flip_changes_the_hash)
{
	uint8_t b[256];
	uint64_t base;
	int diffbits = 0, n = 0;

	fill(b, sizeof(b), 3);
	base = ffm_hash64(b, sizeof(b));
	for (size_t i = 0; i < sizeof(b); i++)
		for (int bit = 0; bit < 8; bit++) {
			b[i] ^= 1u << bit;
			uint64_t h = ffm_hash64(b, sizeof(b));

			b[i] ^= 1u << bit;
			ASSERT_MSG(h != base, "flip of byte %zu bit %d", i, bit);
			diffbits += __builtin_popcountll(h ^ base);
			n++;
		}
	/* Avalanche: on average about half of the 64 output bits change (32 +- a few). */
	ASSERT_MSG(diffbits / n >= 28 && diffbits / n <= 36, "mean changed bits %d", diffbits / n);
}

static int cmp64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

TEST(no_collisions_among_many_small_inputs)
{
	enum { N = 1 << 20 };
	uint64_t *h = malloc(N * sizeof(*h));

	ASSERT(h);
	for (uint32_t i = 0; i < N; i++)
		h[i] = ffm_hash64(&i, sizeof(i));
	qsort(h, N, sizeof(*h), cmp64);
	for (int i = 1; i < N; i++)
		ASSERT_MSG(h[i] != h[i - 1], "a collision among %d 4-byte inputs", N);
	free(h);
}

TEST_MAIN()
