/* SPDX-License-Identifier: MIT */
/*
 * The properties every ffm_proto_parse() result must have, shared by the libFuzzer target
 * (fuzz_proto.c, `make fuzz`) and the corpus replay under `make test` (test_proto_corpus.c):
 *   - it returns 0 or one of the documented -errno values, and sets a reason on failure;
 *   - on success: a known verb, version FFM_PROTO_VERSION, at most FFM_PROTO_MAX_ARGS
 *     arguments whose names are [a-z_]{1,31} and whose values hold no control character and
 *     are at most FFM_PROTO_MAX_VALUE bytes, and every value lies inside the request's copy;
 *   - formatting the parsed request and parsing it again gives the same request (what ffmctl
 *     sends is what ffmd understood).
 * Returns NULL when all hold, else what broke.
 */
#ifndef FFM_PROTO_CHECK_H
#define FFM_PROTO_CHECK_H

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/proto.h"

static inline const char *proto_check(const void *data, size_t len, int *ret)
{
	static struct ffm_request req, again;
	static char buf[FFM_PROTO_MAX_REQUEST + 1];
	const char *why = NULL;
	int r, n;

	r = ffm_proto_parse(data, len, &req, &why);
	*ret = r;
	if (r) {
		if (r != -E2BIG && r != -EPROTO && r != -EOPNOTSUPP && r != -EINVAL && r != -ENOSPC)
			return "undocumented error code";
		return why && *why ? NULL : "failure without a reason";
	}
	if (req.version != FFM_PROTO_VERSION || !ffm_verb_name(req.verb))
		return "accepted a bad version or verb";
	if (req.nargs > FFM_PROTO_MAX_ARGS)
		return "too many arguments accepted";
	for (uint32_t i = 0; i < req.nargs; i++) {
		const char *v = req.args[i].value;
		size_t nl = strlen(req.args[i].name), vl;

		if (!nl || nl > FFM_PROTO_MAX_NAME || strspn(req.args[i].name,
							    "abcdefghijklmnopqrstuvwxyz_") != nl)
			return "bad argument name accepted";
		if (v < req.buf || v > req.buf + len)
			return "value outside the request";
		vl = strlen(v);
		if (vl > FFM_PROTO_MAX_VALUE)
			return "overlong value accepted";
		for (size_t k = 0; k < vl; k++)
			if ((unsigned char)v[k] < 0x20 || v[k] == 0x7f)
				return "control character in a value";
	}
	n = ffm_proto_format(buf, sizeof(buf), req.verb, req.args, req.nargs);
	if (n < 0)
		return "a parsed request cannot be formatted again";
	if (ffm_proto_parse(buf, (size_t)n, &again, &why))
		return "the formatted request does not parse";
	if (again.verb != req.verb || again.nargs != req.nargs)
		return "round trip changed verb or argument count";
	for (uint32_t i = 0; i < req.nargs; i++)
		if (strcmp(again.args[i].name, req.args[i].name) ||
		    strcmp(again.args[i].value, req.args[i].value))
			return "round trip changed an argument";
	return NULL;
}

#endif
