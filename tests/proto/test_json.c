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

TEST_MAIN()
