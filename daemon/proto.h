/* SPDX-License-Identifier: MIT */
/*
 * The control protocol between ffmctl and ffmd, defined here and only here.
 *
 * Transport: an AF_UNIX SOCK_SEQPACKET socket, <runtime_dir>/ffmd.sock. A connection carries
 * one request message and gets one response message. Message boundaries are kept by the
 * socket type, so a request is never read half: there is no partial or slow-drip request,
 * only a connection that sends nothing, which ffmd closes after FFM_PROTO_TIMEOUT_MS. The
 * peer's uid/gid come from SO_PEERCRED, never from the message.
 *
 * Request (text, at most FFM_PROTO_MAX_REQUEST bytes, UTF-8 or ASCII, no NUL):
 *     FFM/<version> <verb>\n
 *     <name>=<value>\n          (0..FFM_PROTO_MAX_ARGS lines; names [a-z_]{1,31};
 *     ...                         values printable, no newline, at most FFM_PROTO_MAX_VALUE)
 * Response (text, at most FFM_PROTO_MAX_RESPONSE bytes):
 *     FFM/<version> <status> <message>\n     status: 0 ok, else a positive errno number
 *     <body>                                 verb-specific (JSON for data)
 *
 * Verbs (version 1):
 *     job-start   job=ID [key=K] [stage=1..4] selector...   selectors: cgroup=PATH pid=N
 *                 uid=N exe=PATH (each may repeat; at least one)          root/admin only
 *     job-end     job=ID                                                  root/admin only
 *     status      (body: JSON, see ffmctl status --json)                  anyone; a user
 *                                                                         sees their jobs
 *     ping        (body empty)
 *
 * Changes:
 *     1  first version
 */
#ifndef FFM_PROTO_H
#define FFM_PROTO_H

#include <stddef.h>
#include <stdint.h>

#define FFM_PROTO_VERSION 1
#define FFM_PROTO_SOCKET "ffmd.sock"
#define FFM_PROTO_MAX_REQUEST 4096
#define FFM_PROTO_MAX_RESPONSE (1u << 20)
#define FFM_PROTO_MAX_ARGS 64
#define FFM_PROTO_MAX_NAME 31
#define FFM_PROTO_MAX_VALUE 1024
#define FFM_PROTO_TIMEOUT_MS 2000

enum ffm_verb {
	FFM_VERB_JOB_START = 1,
	FFM_VERB_JOB_END,
	FFM_VERB_STATUS,
	FFM_VERB_PING,
};

struct ffm_proto_arg {
	char name[FFM_PROTO_MAX_NAME + 1];
	const char *value; /* points into the request's own copy, NUL-terminated */
};

struct ffm_request {
	uint32_t version;
	enum ffm_verb verb;
	uint32_t nargs;
	struct ffm_proto_arg args[FFM_PROTO_MAX_ARGS];
	char buf[FFM_PROTO_MAX_REQUEST + 1]; /* the values live here */
};

/*
 * Parse one request message. Returns 0, or -errno with a reason in @err (static string):
 * -E2BIG (too long), -EPROTO (bad first line or version), -EOPNOTSUPP (unknown verb),
 * -EINVAL (bad argument line), -ENOSPC (too many arguments).
 */
int ffm_proto_parse(const void *msg, size_t len, struct ffm_request *req, const char **err);
/* The value of argument @name (first occurrence), or NULL. */
const char *ffm_proto_arg(const struct ffm_request *req, const char *name);
/* Format a request into @buf; returns its length or -E2BIG/-EINVAL. */
int ffm_proto_format(char *buf, size_t len, enum ffm_verb verb, const struct ffm_proto_arg *args,
		     size_t nargs);
const char *ffm_verb_name(enum ffm_verb v);

#endif
