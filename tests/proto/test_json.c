/* SPDX-License-Identifier: MIT */
/*
 * common/ffm_json.h, the one way ffm reads and writes JSON (through jansson): the reader of
 * ffmd's answers (values, escapes, what must be refused with a reason, the depth bound, input
 * without a NUL), the accessors' defaults, strings from any bytes (U+FFFD for what is not
 * UTF-8), the streaming string writer, and the numbers as the outputs print them.
 */
#include <math.h>

#include "common/ffm_json.h"
#include "tests/testutil.h"

static json_t *parse(const char *s)
{
	json_error_t err;

	return ffm_json_parse(s, strlen(s), &err);
}

TEST(values_and_accessors)
{
	json_t *v = parse(" {\"a\": [1, -2.5e3, true, null, \"x\"], \"b\": {\"c\": false},"
			  " \"d\": 0} ");
	json_t *a = json_object_get(v, "a");

	ASSERT(json_is_object(v));
	ASSERT_EQ(json_object_size(v), 3);
	ASSERT_EQ(json_array_size(a), 5);
	ASSERT(ffm_json_num(json_array_get(a, 0), 0) == 1.0); /* an integer is a number too */
	ASSERT(ffm_json_num(json_array_get(a, 1), 0) == -2500.0);
	ASSERT(ffm_json_bool(json_array_get(a, 2), false));
	ASSERT(json_is_null(json_array_get(a, 3)));
	ASSERT_STREQ(ffm_json_str(json_array_get(a, 4), NULL), "x");
	ASSERT(!ffm_json_bool(json_object_get(json_object_get(v, "b"), "c"), true));
	/* Wrong types and absent members give the defaults. */
	ASSERT_STREQ(ffm_json_str(json_object_get(v, "d"), "dflt"), "dflt");
	ASSERT(ffm_json_num(json_array_get(a, 4), 7) == 7);
	ASSERT(ffm_json_bool(json_array_get(a, 0), true));
	ASSERT(json_object_get(v, "zz") == NULL);
	ASSERT(json_array_get(a, 5) == NULL);
	ASSERT(ffm_json_num(NULL, 7) == 7);
	ASSERT_STREQ(ffm_json_str(json_object_get(NULL, "x"), "n"), "n");
	json_decref(v);
}

TEST(string_escapes)
{
	json_t *v = parse("\"q\\\"b\\\\s\\/n\\n\\t\\u00e9\\u2713\\ud83d\\ude00\"");

	ASSERT(v);
	/* é, ✓, U+1F600 as a surrogate pair. */
	ASSERT_STREQ(ffm_json_str(v, NULL), "q\"b\\s/n\n\t\xc3\xa9\xe2\x9c\x93\xf0\x9f\x98\x80");
	json_decref(v);
}

TEST(refused_inputs)
{
	static const char *const bad[] = {
		"", " ", "{", "[1,]", "{\"a\":1,}", "{\"a\" 1}", "{a:1}", "01", "1.", ".5", "-", "1e",
		"+1", "tru", "nul", "\"abc", "\"\\x\"", "\"\\u12\"", "\"a\nb\"", "[1] 2", "{}{}",
		"'a'", "NaN", "[\"\\ud800\\u00\"]",
		"\"\\udc00\"",	       /* a lone surrogate */
		"\"a\\u0000b\"",       /* NUL: C strings could not hold it */
		"\"\xff\"",	       /* not UTF-8 */
		"1e400",	       /* not a double */
		"99999999999999999999", /* not an int64 */
	};

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		json_error_t err = { .position = 99999 };
		json_t *v = ffm_json_parse(bad[i], strlen(bad[i]), &err);

		ASSERT_MSG(v == NULL, "accepted '%s'", bad[i]);
		ASSERT_MSG(err.text[0] && err.position >= 0 &&
				   (size_t)err.position <= strlen(bad[i]),
			   "'%s': reason '%s' at %d", bad[i], err.text, err.position);
	}
	/* The reason is optional. */
	ASSERT(ffm_json_parse("{", 1, NULL) == NULL);
}

TEST(length_bounds_the_input)
{
	/* Only @len bytes are read: no NUL needed, what follows is not looked at. */
	static const char text[] = "{\"a\":1}garbage";
	json_t *v = ffm_json_parse(text, 7, NULL);

	ASSERT(v);
	ASSERT(ffm_json_num(json_object_get(v, "a"), 0) == 1);
	json_decref(v);
	ASSERT(ffm_json_parse(text, 6, NULL) == NULL);
}

TEST(depth_is_bounded)
{
	size_t n = JSON_PARSER_MAX_DEPTH + 1;
	char *deep = malloc(2 * n);
	json_error_t err;
	json_t *v;

	ASSERT(deep);
	for (size_t i = 0; i < n; i++) {
		deep[i] = '[';
		deep[2 * n - 1 - i] = ']';
	}
	ASSERT(ffm_json_parse(deep, 2 * n, &err) == NULL);
	ASSERT_MSG(strstr(err.text, "depth"), "reason: %s", err.text);
	/* One level less is fine. */
	v = ffm_json_parse(deep + 1, 2 * n - 2, &err);
	ASSERT_MSG(v, "refused: %s", err.text);
	json_decref(v);
	free(deep);
}

/* What the streaming writer makes of @s, as a malloc'd string. */
static char *written(const char *s)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	ASSERT(f);
	ASSERT_OK(ffm_json_write_str(f, s));
	ASSERT(fclose(f) == 0);
	return buf;
}

TEST(writer_reads_back)
{
	const char *s = "tab\there \"quoted\" back\\slash \x01 del\x7f caf\xc3\xa9";
	char *buf = written(s);
	json_t *v = parse(buf);

	ASSERT_MSG(v, "writer output does not parse: %s", buf);
	ASSERT_STREQ(ffm_json_str(v, NULL), s);
	json_decref(v);
	free(buf);
	buf = written(NULL);
	ASSERT_STREQ(buf, "\"\"");
	free(buf);
}

/*
 * @s is well-formed UTF-8. Decodes, then checks the code point (shortest form, no surrogate,
 * at most U+10FFFF): another way than the sanitiser's, so that the two check each other.
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

#define R "\xef\xbf\xbd" /* U+FFFD in UTF-8 */

TEST(non_utf8_becomes_replacement)
{
	/* Bytes that are not UTF-8 each become U+FFFD; well-formed text around them stays. */
	static const struct {
		const char *in, *out;
	} cases[] = {
		{ "\xff\xfe", R R },
		{ "id-\xff-\x80", "id-" R "-" R },
		{ "\xc0\xaf", R R },		     /* overlong '/' */
		{ "\xe0\x80\xaf", R R R },	     /* overlong, 3 bytes */
		{ "\xed\xa0\x80", R R R },	     /* surrogate U+D800 */
		{ "\xf4\x90\x80\x80", R R R R },     /* above U+10FFFF */
		{ "\xf5\x80", R R },
		{ "a\xe2\x82", "a" R R },	     /* cut short at the end */
		{ "\xe2\x82" "a", R R "a" },	     /* ... and before ASCII */
		{ "\xc3\xa9\xc3", "\xc3\xa9" R },
		/* Well-formed, at the edges of the ranges: as they are. */
		{ "\xc2\x80 \xe0\xa0\x80 \xed\x9f\xbf \xee\x80\x80 \xef\xbf\xbf",
		  "\xc2\x80 \xe0\xa0\x80 \xed\x9f\xbf \xee\x80\x80 \xef\xbf\xbf" },
		{ "\xf0\x90\x80\x80 \xf0\x9f\x98\x80 \xf4\x8f\xbf\xbf",
		  "\xf0\x90\x80\x80 \xf0\x9f\x98\x80 \xf4\x8f\xbf\xbf" },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char *clean = ffm_utf8_sanitize(cases[i].in), *out = written(cases[i].in);
		json_t *str = ffm_json_string(cases[i].in), *v = parse(out);

		ASSERT_MSG(!strcmp(clean, cases[i].out), "case %zu: %s, want %s", i, clean,
			   cases[i].out);
		ASSERT_EQ(ffm_utf8_valid(cases[i].in), !strcmp(cases[i].in, cases[i].out));
		ASSERT(ffm_utf8_valid(clean) && valid_utf8(clean));
		ASSERT_STREQ(ffm_json_str(str, NULL), cases[i].out);
		ASSERT_MSG(v, "case %zu: writer output does not parse: %s", i, out);
		ASSERT_STREQ(ffm_json_str(v, NULL), cases[i].out);
		json_decref(v);
		json_decref(str);
		free(out);
		free(clean);
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
		json_t *v;
		char *out;

		for (size_t i = 0; i < n - 1; i++) {
			/* Mostly high bytes, where the UTF-8 cases are; never NUL. */
			int r = rand_r(&seed);

			in[i] = (char)(r & 1 ? 0x80 + (r >> 1) % 0x80 : 1 + (r >> 1) % 0x7f);
		}
		in[n - 1] = 0;
		out = written(in);
		ASSERT_MSG(valid_utf8(out), "round %d: output not UTF-8", round);
		ASSERT_EQ(ffm_utf8_valid(in), valid_utf8(in));
		v = parse(out);
		ASSERT_MSG(v, "round %d: output does not parse: %s", round, out);
		if (valid_utf8(in))
			ASSERT_STREQ(ffm_json_str(v, NULL), in);
		json_decref(v);
		free(out);
	}
}

TEST(writer_never_truncates)
{
	/* 4.5 MiB of text that needs every kind of escape, and of bytes that are not text: all of
	 * it is written (no buffer in the writer to run out of). */
	size_t n = 9 << 19; /* whole copies of the 9-byte pattern */
	char *s = malloc(n + 1), *out;
	json_t *v;
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
	json_decref(v);
	free(out);
	for (size_t i = 0; i < n; i++)
		s[i] = (char)(0x80 + i % 0x80);
	out = written(s);
	v = parse(out);
	back = ffm_json_str(v, NULL);
	ASSERT(back);
	ASSERT_EQ(strlen(back), 3 * n); /* each byte one U+FFFD, 3 bytes in UTF-8 */
	json_decref(v);
	free(out);
	free(s);
}

/* @v dumped as every output dumps it (NULL-safe, releases @v), compared with @want. */
static void dumps_as(json_t *v, const char *want)
{
	char *s = v ? json_dumps(v, FFM_JSON_FLAGS | JSON_ENCODE_ANY) : NULL;

	ASSERT_MSG(s && !strcmp(s, want), "dumped %s, want %s", s ? s : "(nothing)", want);
	free(s);
	json_decref(v);
}

TEST(numbers_as_printed)
{
	/* Rounded to the places the outputs had, printed as that decimal; reals stay reals. */
	dumps_as(ffm_json_fixed(0.1, 9), "0.1");
	dumps_as(ffm_json_fixed(0.1234567894, 9), "0.123456789");
	dumps_as(ffm_json_fixed(123456.123456789, 9), "123456.123456789");
	dumps_as(ffm_json_fixed(100.0 / 3, 4), "33.3333");
	dumps_as(ffm_json_fixed(2, 9), "2.0");
	dumps_as(ffm_json_fixed(0, 3), "0.0");
	dumps_as(ffm_json_fixed(1e300, 9), "1e300");
	/* Not a number JSON can hold: null, never "nan". */
	dumps_as(ffm_json_fixed(NAN, 9), "null");
	dumps_as(ffm_json_fixed(-INFINITY, 9), "null");
	dumps_as(ffm_json_u64(0), "0");
	dumps_as(ffm_json_u64(INT64_MAX), "9223372036854775807");
	dumps_as(ffm_json_u64(UINT64_MAX), "1.84467440737096e19");
	/* Compact, members in the order they were set. */
	dumps_as(json_pack("{s:i,s:i,s:[i,i],s:o}", "z", 1, "a", 2, "m", 3, 4, "s",
			   ffm_json_string("\xff")),
		 "{\"z\":1,\"a\":2,\"m\":[3,4],\"s\":\"" R "\"}");
}

TEST(chains_end_in_null_when_one_step_fails)
{
	json_t *a = ffm_json_append(json_array(), json_integer(1));

	ASSERT(a);
	a = ffm_json_append(a, NULL); /* a value that could not be made */
	ASSERT(a == NULL);
	a = ffm_json_append(a, json_integer(2)); /* and it stays NULL, the value released */
	ASSERT(a == NULL);
	ASSERT(ffm_json_set(json_object(), "k", NULL) == NULL);
	ASSERT(ffm_json_set(NULL, "k", json_integer(1)) == NULL);
	ASSERT_EQ(ffm_json_print(stdout, NULL), -ENOMEM);
}

TEST_MAIN()
