/* SPDX-License-Identifier: MIT */
/*
 * cli/json.c, the reader ffmctl uses for ffmd's status answer (compiled in here: it belongs to
 * ffmctl, not to a library): values, escapes, what must be refused, the depth bound, and that
 * the writer's output reads back.
 */
#include "cli/json.c"
#include "tests/testutil.h"

static struct ffm_json *parse(const char *s)
{
	struct ffm_json *v = NULL;
	const char *err = NULL;
	size_t off = 0;

	if (ffm_json__parse(s, strlen(s), &v, &err, &off) < 0)
		return NULL;
	return v;
}

TEST(values_and_accessors)
{
	struct ffm_json *v = parse(" {\"a\": [1, -2.5e3, true, null, \"x\"], \"b\": {\"c\": false},"
				   " \"d\": 0} ");

	ASSERT(v);
	ASSERT_EQ(ffm_json_type(v), FFM_JSON_OBJECT);
	ASSERT_EQ(ffm_json_len(v), 3);
	ASSERT_EQ(ffm_json_len(ffm_json_get(v, "a")), 5);
	ASSERT(ffm_json_num(ffm_json_at(ffm_json_get(v, "a"), 1), 0) == -2500.0);
	ASSERT(ffm_json_bool(ffm_json_at(ffm_json_get(v, "a"), 2), false));
	ASSERT_EQ(ffm_json_type(ffm_json_at(ffm_json_get(v, "a"), 3)), FFM_JSON_NULL);
	ASSERT_STREQ(ffm_json_str(ffm_json_at(ffm_json_get(v, "a"), 4), NULL), "x");
	ASSERT(!ffm_json_bool(ffm_json_get(ffm_json_get(v, "b"), "c"), true));
	ASSERT_STREQ(ffm_json_key(ffm_json_at(v, 2)), "d");
	/* Wrong types and absent members give the defaults. */
	ASSERT_STREQ(ffm_json_str(ffm_json_get(v, "d"), "dflt"), "dflt");
	ASSERT(ffm_json_get(v, "zz") == NULL);
	ASSERT(ffm_json_at(ffm_json_get(v, "a"), 5) == NULL);
	ASSERT(ffm_json_num(NULL, 7) == 7);
	ffm_json__free(v);
}

TEST(string_escapes)
{
	struct ffm_json *v = parse("\"q\\\"b\\\\s\\/n\\n\\u00e9\\u2713\\ud83d\\ude00\\udc00\"");

	ASSERT(v);
	/* é, ✓, U+1F600 as a surrogate pair, a lone low surrogate as U+FFFD. */
	ASSERT_STREQ(ffm_json_str(v, NULL), "q\"b\\s/n\n\xc3\xa9\xe2\x9c\x93\xf0\x9f\x98\x80\xef\xbf\xbd");
	ffm_json__free(v);
}

TEST(refused_inputs)
{
	static const char *const bad[] = {
		"", " ", "{", "[1,]", "{\"a\":1,}", "{\"a\" 1}", "{a:1}", "01", "1.", ".5", "-", "1e",
		"+1", "tru", "nul", "\"abc", "\"\\x\"", "\"\\u12\"", "\"a\nb\"", "[1] 2", "{}{}",
		"'a'", "NaN", "[\"\\ud800\\u00\"]",
	};

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct ffm_json *v = NULL;
		const char *err = NULL;
		size_t off = 99999;

		ASSERT_MSG(ffm_json__parse(bad[i], strlen(bad[i]), &v, &err, &off) == -EINVAL,
			   "accepted '%s'", bad[i]);
		ASSERT(v == NULL && err && *err && off <= strlen(bad[i]));
	}
}

TEST(depth_is_bounded)
{
	char deep[2 * (FFM_JSON_MAX_DEPTH + 2) + 1];
	struct ffm_json *v = NULL;
	const char *err;
	size_t off, n = FFM_JSON_MAX_DEPTH + 2;

	for (size_t i = 0; i < n; i++) {
		deep[i] = '[';
		deep[n + i] = ']';
	}
	ASSERT_EQ(ffm_json__parse(deep, 2 * n, &v, &err, &off), -EINVAL);
	ASSERT_STREQ(err, "nested too deeply");
	/* One level less is fine. */
	ASSERT_EQ(ffm_json__parse(deep + 2, 2 * n - 4, &v, &err, &off), 0);
	ffm_json__free(v);
}

TEST(writer_reads_back)
{
	const char *s = "tab\there \"quoted\" back\\slash \x01 del\x7f caf\xc3\xa9";
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	struct ffm_json *v;

	ASSERT(f);
	ffm_json_write_str(f, s);
	fclose(f);
	v = parse(buf);
	ASSERT_MSG(v, "writer output does not parse: %s", buf);
	ASSERT_STREQ(ffm_json_str(v, NULL), s);
	ffm_json__free(v);
	free(buf);
}

/* What the writer makes of @s, as a malloc'd string. */
static char *written(const char *s)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	ASSERT(f);
	ffm_json_write_str(f, s);
	ASSERT(fclose(f) == 0);
	return buf;
}

/*
 * @s is well-formed UTF-8. Decodes, then checks the code point (shortest form, no surrogate,
 * at most U+10FFFF): another way than the writer's, so that the two check each other.
 */
static int valid_utf8(const char *s)
{
	const unsigned char *p = (const unsigned char *)s;

	while (*p) {
		static const uint32_t min[4] = { 0, 0x80, 0x800, 0x10000 };
		uint32_t cp;
		int n;

		if (*p < 0x80) {
			p++;
			continue;
		}
		if ((*p & 0xe0) == 0xc0)
			n = 1, cp = *p & 0x1f;
		else if ((*p & 0xf0) == 0xe0)
			n = 2, cp = *p & 0x0f;
		else if ((*p & 0xf8) == 0xf0)
			n = 3, cp = *p & 0x07;
		else
			return 0;
		for (int i = 1; i <= n; i++) {
			if ((p[i] & 0xc0) != 0x80)
				return 0;
			cp = cp << 6 | (p[i] & 0x3f);
		}
		if (cp < min[n] || cp > 0x10ffff || (cp >= 0xd800 && cp < 0xe000))
			return 0;
		p += n + 1;
	}
	return 1;
}

TEST(writer_non_utf8_becomes_replacement)
{
	/* Bytes that are not UTF-8 each become U+FFFD; well-formed text around them stays. */
	static const struct {
		const char *in, *out;
	} cases[] = {
		{ "\xff\xfe", "\"\\ufffd\\ufffd\"" },
		{ "id-\xff-\x80", "\"id-\\ufffd-\\ufffd\"" },
		{ "\xc0\xaf", "\"\\ufffd\\ufffd\"" },             /* overlong '/' */
		{ "\xe0\x80\xaf", "\"\\ufffd\\ufffd\\ufffd\"" },   /* overlong, 3 bytes */
		{ "\xed\xa0\x80", "\"\\ufffd\\ufffd\\ufffd\"" },   /* surrogate U+D800 */
		{ "\xf4\x90\x80\x80", "\"\\ufffd\\ufffd\\ufffd\\ufffd\"" }, /* above U+10FFFF */
		{ "\xf5\x80", "\"\\ufffd\\ufffd\"" },
		{ "a\xe2\x82", "\"a\\ufffd\\ufffd\"" },           /* cut short at the end */
		{ "\xe2\x82" "a", "\"\\ufffd\\ufffda\"" },       /* ... and before ASCII */
		{ "\xc3\xa9\xc3", "\"\xc3\xa9\\ufffd\"" },
		/* Well-formed, at the edges of the ranges: as they are. */
		{ "\xc2\x80 \xe0\xa0\x80 \xed\x9f\xbf \xee\x80\x80 \xef\xbf\xbf",
		  "\"\xc2\x80 \xe0\xa0\x80 \xed\x9f\xbf \xee\x80\x80 \xef\xbf\xbf\"" },
		{ "\xf0\x90\x80\x80 \xf0\x9f\x98\x80 \xf4\x8f\xbf\xbf",
		  "\"\xf0\x90\x80\x80 \xf0\x9f\x98\x80 \xf4\x8f\xbf\xbf\"" },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char *out = written(cases[i].in);
		struct ffm_json *v = parse(out);

		ASSERT_MSG(!strcmp(out, cases[i].out), "case %zu: wrote %s, want %s", i, out,
			   cases[i].out);
		ASSERT_MSG(v && valid_utf8(ffm_json_str(v, "")), "case %zu: %s", i, out);
		ffm_json__free(v);
		free(out);
	}
}

TEST(writer_output_is_utf8_for_any_bytes)
{
	/* Random byte strings (fixed seed): the output is well-formed UTF-8, parses, and a
	 * well-formed input reads back unchanged. */
	char in[64];
	unsigned seed = 12345;

	for (int round = 0; round < 20000; round++) {
		size_t n = 1 + (size_t)(rand_r(&seed) % (sizeof(in) - 1));
		struct ffm_json *v;
		char *out;

		for (size_t i = 0; i < n - 1; i++) {
			/* Mostly high bytes, where the UTF-8 cases are; never NUL. */
			int r = rand_r(&seed);

			in[i] = (char)(r & 1 ? 0x80 + (r >> 1) % 0x80 : 1 + (r >> 1) % 0x7f);
		}
		in[n - 1] = 0;
		out = written(in);
		ASSERT_MSG(valid_utf8(out), "round %d: output not UTF-8", round);
		v = parse(out);
		ASSERT_MSG(v, "round %d: output does not parse: %s", round, out);
		if (valid_utf8(in))
			ASSERT_STREQ(ffm_json_str(v, NULL), in);
		ffm_json__free(v);
		free(out);
	}
}

TEST(writer_never_truncates)
{
	/* 4.5 MiB of text that needs every kind of escape, and of bytes that are not text: all of
	 * it is written (no buffer in the writer to run out of). */
	size_t n = 9 << 19; /* whole copies of the 9-byte pattern */
	char *s = malloc(n + 1), *out;
	struct ffm_json *v;
	const char *back;

	ASSERT(s);
	for (size_t i = 0; i < n; i++)
		s[i] = "ab\"\\\n\x01\xc3\xa9/"[i % 9];
	s[n] = 0;
	out = written(s);
	v = parse(out);
	ASSERT(v);
	ASSERT_EQ(strlen(ffm_json_str(v, "")), n);
	ASSERT_STREQ(ffm_json_str(v, ""), s);
	ffm_json__free(v);
	free(out);
	for (size_t i = 0; i < n; i++)
		s[i] = (char)(0x80 + i % 0x80);
	out = written(s);
	v = parse(out);
	back = ffm_json_str(v, NULL);
	ASSERT(back);
	ASSERT_EQ(strlen(back), 3 * n); /* each byte one U+FFFD, 3 bytes in UTF-8 */
	ffm_json__free(v);
	free(out);
	free(s);
}

TEST_MAIN()
