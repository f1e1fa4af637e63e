/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target for ffm's JSON reader (common/ffm_json.h over jansson), which reads ffmd's
 * answers in ffmctl. Built by `make fuzz`; the properties: never read out of bounds, leak or
 * crash; refused input comes with a reason and a position inside it; a value accepted once is
 * accepted with surrounding whitespace too, and dumps to text that parses back (to an equal
 * value with all 17 digits of its reals; ffm's outputs print 15). Also the writers: the input's bytes (to the first NUL) as a string value, sanitised
 * and written by the streaming writer, always parse back to the same string.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/ffm_json.h"

static void check_writer(const uint8_t *data, size_t size)
{
	char *in = strndup((const char *)data, size), *out = NULL;
	json_t *str, *v;
	size_t len = 0;
	FILE *f;

	if (!in)
		return;
	str = ffm_json_string(in);
	f = open_memstream(&out, &len);
	if (str && f) {
		ffm_json_write_str(f, in);
		fclose(f);
		v = ffm_json_parse(out, len, NULL);
		if (!v || strcmp(ffm_json_str(v, ""), json_string_value(str)))
			abort();
		json_decref(v);
	} else if (f) {
		fclose(f);
	}
	json_decref(str);
	free(out);
	free(in);
}

/* @v dumped with @flags parses back; to an equal value if @equal. */
static void check_dump(const json_t *v, size_t flags, bool equal)
{
	char *text = json_dumps(v, flags | JSON_ENCODE_ANY);
	json_t *back;

	if (!text)
		return;
	back = ffm_json_parse(text, strlen(text), NULL);
	if (!back || (equal && !json_equal(v, back)))
		abort();
	json_decref(back);
	free(text);
}

/* Every accessor on every node, down to @depth. */
static void walk(json_t *v, int depth)
{
	const char *key;
	json_t *c;
	size_t i;

	(void)ffm_json_str(v, NULL);
	(void)ffm_json_num(v, 0);
	(void)ffm_json_bool(v, false);
	if (depth > 32)
		return;
	json_array_foreach(v, i, c)
		walk(c, depth + 1);
	json_object_foreach(v, key, c) {
		if (json_object_get(v, key) != c)
			abort();
		walk(c, depth + 1);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	json_error_t err;
	char *padded;
	json_t *v;

	check_writer(data, size);
	v = ffm_json_parse((const char *)data, size, &err);
	if (!v) {
		if (!err.text[0] || err.position < 0 || (size_t)err.position > size)
			abort();
		return 0;
	}
	walk(v, 0);
	check_dump(v, FFM_JSON_FLAGS, false);
	check_dump(v, JSON_COMPACT, true);
	json_decref(v);
	padded = malloc(size + 2);
	if (!padded)
		return 0;
	padded[0] = ' ';
	memcpy(padded + 1, data, size);
	padded[size + 1] = '\n';
	v = ffm_json_parse(padded, size + 2, &err);
	if (!v)
		abort();
	json_decref(v);
	free(padded);
	return 0;
}
