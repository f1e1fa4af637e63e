/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "daemon/proto.h"

static const struct {
	const char *name;
	enum ffm_verb verb;
} verbs[] = {
	{ "job-start", FFM_VERB_JOB_START },
	{ "job-end", FFM_VERB_JOB_END },
	{ "status", FFM_VERB_STATUS },
	{ "ping", FFM_VERB_PING },
};

const char *ffm_verb_name(enum ffm_verb v)
{
	for (size_t i = 0; i < sizeof(verbs) / sizeof(verbs[0]); i++)
		if (verbs[i].verb == v)
			return verbs[i].name;
	return NULL;
}

/* @n bytes of [a-z_] (followed by a byte outside the set: '=' or the NUL). */
static int valid_name(const char *s, size_t n)
{
	return n && n <= FFM_PROTO_MAX_NAME && strspn(s, "abcdefghijklmnopqrstuvwxyz_") == n;
}

static int valid_value(const char *s, size_t n)
{
	if (n > FFM_PROTO_MAX_VALUE)
		return 0;
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];

		/* Printable ASCII and any UTF-8 byte; no control characters, no DEL. */
		if (c < 0x20 || c == 0x7f)
			return 0;
	}
	return 1;
}

int ffm_proto_parse(const void *msg, size_t len, struct ffm_request *req, const char **err)
{
	char *p, *end, *nl;
	unsigned ver;
	int n = 0;

	*err = "";
	memset(req, 0, offsetof(struct ffm_request, buf));
	if (len > FFM_PROTO_MAX_REQUEST) {
		*err = "request too long";
		return -E2BIG;
	}
	if (memchr(msg, 0, len)) {
		*err = "NUL byte in request";
		return -EPROTO;
	}
	memcpy(req->buf, msg, len);
	req->buf[len] = 0;
	p = req->buf;
	end = req->buf + len;

	nl = memchr(p, '\n', end - p);
	if (!nl) {
		*err = "first line not terminated";
		return -EPROTO;
	}
	*nl = 0;
	/* Exactly "FFM/<digits> <verb>": sscanf's %u would also take a sign, blanks and
	 * overflowing numbers, reading e.g. "FFM/4294967297" or "FFM/-4294967295" as version 1. */
	if (strncmp(p, "FFM/", 4) || p[4] < '0' || p[4] > '9') {
		*err = "request does not start with FFM/<version>";
		return -EPROTO;
	}
	ver = 0;
	for (n = 4; p[n] >= '0' && p[n] <= '9'; n++)
		ver = ver > 99999 ? 100000 : ver * 10 + (unsigned)(p[n] - '0');
	if (p[n] != ' ') {
		*err = "request does not start with FFM/<version> <verb>";
		return -EPROTO;
	}
	n++;
	if (ver != FFM_PROTO_VERSION) {
		*err = "unsupported protocol version";
		return -EPROTO;
	}
	req->version = ver;
	for (size_t i = 0; i < sizeof(verbs) / sizeof(verbs[0]); i++)
		if (!strcmp(p + n, verbs[i].name))
			req->verb = verbs[i].verb;
	if (!req->verb) {
		*err = "unknown verb";
		return -EOPNOTSUPP;
	}
	p = nl + 1;
	while (p < end) {
		char *eq;

		nl = memchr(p, '\n', end - p);
		if (!nl) {
			*err = "argument line not terminated";
			return -EINVAL;
		}
		*nl = 0;
		eq = strchr(p, '=');
		if (!eq || !valid_name(p, eq - p) || !valid_value(eq + 1, nl - eq - 1)) {
			*err = "malformed argument line (want name=value)";
			return -EINVAL;
		}
		if (req->nargs == FFM_PROTO_MAX_ARGS) {
			*err = "too many arguments";
			return -ENOSPC;
		}
		memcpy(req->args[req->nargs].name, p, eq - p);
		req->args[req->nargs].name[eq - p] = 0;
		req->args[req->nargs].value = eq + 1;
		req->nargs++;
		p = nl + 1;
	}
	return 0;
}

const char *ffm_proto_arg(const struct ffm_request *req, const char *name)
{
	for (uint32_t i = 0; i < req->nargs; i++)
		if (!strcmp(req->args[i].name, name))
			return req->args[i].value;
	return NULL;
}

int ffm_proto_format(char *buf, size_t len, enum ffm_verb verb, const struct ffm_proto_arg *args,
		     size_t nargs)
{
	const char *v = ffm_verb_name(verb);
	size_t off;
	int n;

	if (!v || nargs > FFM_PROTO_MAX_ARGS)
		return -EINVAL;
	n = snprintf(buf, len, "FFM/%d %s\n", FFM_PROTO_VERSION, v);
	if (n < 0 || (size_t)n >= len)
		return -E2BIG;
	off = n;
	for (size_t i = 0; i < nargs; i++) {
		size_t nl = strlen(args[i].name), vl = strlen(args[i].value);

		if (!valid_name(args[i].name, nl) || !valid_value(args[i].value, vl))
			return -EINVAL;
		n = snprintf(buf + off, len - off, "%s=%s\n", args[i].name, args[i].value);
		if (n < 0 || (size_t)n >= len - off)
			return -E2BIG;
		off += n;
	}
	return off > FFM_PROTO_MAX_REQUEST ? -E2BIG : (int)off;
}
