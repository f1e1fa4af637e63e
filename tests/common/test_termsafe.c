/* SPDX-License-Identifier: MIT */
/*
 * Control characters on the way to a terminal (common/termsafe.h): a name a job's user chose
 * must not retitle, clear or reprogram the terminal of whoever reads the report.
 */
#include <string.h>
#include <unistd.h>

#include "common/ffm_json.h"
#include "common/termsafe.h"
#include "tests/testutil.h"

static const char *esc(const char *s)
{
	static char buf[256];

	return ffm_termsafe_str(s, buf, sizeof(buf));
}

TEST(c0_controls_escaped_newline_and_tab_kept)
{
	ASSERT_STREQ(esc("a\033]2;owned\007b"), "a\\x1b]2;owned\\x07b");
	ASSERT_STREQ(esc("\033[2J\r\b"), "\\x1b[2J\\x0d\\x08");
	ASSERT_STREQ(esc("line\n\tnext"), "line\n\tnext");
	ASSERT_STREQ(esc(NULL), "");
}

TEST(c1_controls_escaped_utf8_kept)
{
	/* U+009B (CSI) as UTF-8, and as the lone 8-bit byte some terminals obey. */
	ASSERT_STREQ(esc("x\xc2\x9b" "2Jy"), "x\\u009b2Jy");
	ASSERT_STREQ(esc("x\x9b" "2J"), "x\\x9b2J");
	/* Other text passes: é (c3 a9), U+00A0 (c2 a0), € (e2 82 ac), 😀 (f0 9f 98 80). */
	ASSERT_STREQ(esc("caf\xc3\xa9 \xc2\xa0\xe2\x82\xac\xf0\x9f\x98\x80"),
		     "caf\xc3\xa9 \xc2\xa0\xe2\x82\xac\xf0\x9f\x98\x80");
	/* A lead byte at the end is kept as it came; DEL passes. */
	ASSERT_STREQ(esc("z\xc2"), "z\xc2");
	ASSERT_STREQ(esc("a\x7f"), "a\x7f");
}

TEST(cut_at_an_escape_boundary)
{
	char small[6];

	ASSERT_STREQ(ffm_termsafe_str("ab\033cd", small, sizeof(small)), "ab");
	ASSERT_STREQ(ffm_termsafe_str("abc", small, 1), "");
}

/* The stream: the same escapes across writes that split a sequence, JSON kept valid. */
TEST(stream_escapes_across_writes_and_keeps_json_valid)
{
	int p[2];
	char out[512] = "";
	ssize_t n;
	FILE *f;
	json_t *v;
	json_error_t je;

	ASSERT_OK(pipe(p));
	f = ffm_termsafe_stream(p[1], _IONBF);
	ASSERT(f != NULL);
	fputs("a\xc2", f);
	fputs("\x9b" "b\033c\n", f);
	v = json_pack("{s:s}", "name", "n\033\xc2\x9bm\x7f");
	ASSERT(v != NULL);
	ASSERT_OK(ffm_json_print(f, v));
	fclose(f);
	close(p[1]);
	n = read(p[0], out, sizeof(out) - 1);
	close(p[0]);
	ASSERT(n > 0);
	out[n] = '\0';
	ASSERT(strchr(out, '\033') == NULL);
	ASSERT(strstr(out, "a\\u009bb\\x1bc\n") == out);
	/* The JSON line parses back to the very same string. */
	v = json_loads(strchr(out, '\n') + 1, 0, &je);
	ASSERT_MSG(v != NULL, "not JSON: %s", je.text);
	ASSERT_STREQ(json_string_value(json_object_get(v, "name")), "n\033\xc2\x9bm\x7f");
	json_decref(v);
}

TEST_MAIN()
