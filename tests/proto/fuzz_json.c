/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target for ffmctl's JSON reader (cli/json.c), which reads ffmd's status answer.
 * Built by `make fuzz`; the property is: never read out of bounds, leak or crash, and a value
 * accepted once is accepted with surrounding whitespace too.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cli/json.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct ffm_json *v = NULL;
	const char *err;
	size_t off;
	char *padded;

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
