/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target for ffmctl's JSON reader (cli/json.c), which reads ffmd's status answer.
 * Built by `make fuzz`; the property is: never read out of bounds, leak or crash, and a value
 * accepted once is accepted with surrounding whitespace too. Also the writer: the input's bytes
 * (to the first NUL) written as a JSON string always parse back.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/json.h"

/* Whatever the bytes, ffm_json_write_str's output is JSON that this reader accepts. */
static void check_writer(const uint8_t *data, size_t size)
{
	char *in = strndup((const char *)data, size), *out = NULL;
	struct ffm_json *v = NULL;
	size_t len = 0;
	FILE *f;

	if (!in)
		return;
	f = open_memstream(&out, &len);
	if (f) {
		ffm_json_write_str(f, in);
		fclose(f);
		if (ffm_json__parse(out, len, &v, NULL, NULL) < 0 || !ffm_json_str(v, NULL))
			abort();
		ffm_json__free(v);
	}
	free(out);
	free(in);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct ffm_json *v = NULL;
	const char *err;
	size_t off;
	char *padded;

	check_writer(data, size);
	if (ffm_json__parse((const char *)data, size, &v, &err, &off) < 0) {
		if (off > size)
			abort();
		return 0;
	}
	/* Walk it: every accessor on every node. */
	for (size_t i = 0; i < ffm_json_len(v); i++) {
		const struct ffm_json *c = ffm_json_at(v, i);

		(void)ffm_json_str(c, NULL);
		(void)ffm_json_num(c, 0);
		(void)ffm_json_get(v, ffm_json_key(c));
	}
	ffm_json__free(v);
	padded = malloc(size + 2);
	if (!padded)
		return 0;
	padded[0] = ' ';
	memcpy(padded + 1, data, size);
	padded[size + 1] = '\n';
	if (ffm_json__parse(padded, size + 2, &v, &err, &off) < 0)
		abort();
	ffm_json__free(v);
	free(padded);
	return 0;
}
