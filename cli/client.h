/* SPDX-License-Identifier: MIT */
/*
 * ffmctl's side of the control protocol (daemon/proto.h): one connection per request to
 * <runtime_dir>/ffmd.sock (SOCK_SEQPACKET), one request out, one response back, bounded by a
 * timeout. The verbs that talk to ffmd (job start/end, status) use only this.
 *
 * Errors are -errno: -ENOENT / -ECONNREFUSED (ffmd is not running: no socket, or a stale one),
 * -EACCES (the socket may not be opened), -ETIMEDOUT (ffmd did not answer in time), -EPROTO
 * (the answer is not a protocol response), -EMSGSIZE (it was longer than the protocol allows).
 * ffm_client__strerror() turns them into a sentence that says what to do.
 */
#ifndef FFM_CLIENT_H
#define FFM_CLIENT_H

#include <stddef.h>

#include "daemon/proto.h"

struct ffm_reply {
	int status;	     /* 0 ok, else the positive errno ffmd answered with */
	const char *message; /* the status line's text ("pong", "permission denied: ...") */
	const char *body;    /* verb-specific, NUL-terminated, "" when empty */
	size_t body_len;
};

/*
 * Send @verb with @args to ffmd under @runtime_dir and wait up to @timeout_ms for its answer.
 * *ret is allocated (free with ffm_reply__free) when 0 is returned, also when ffmd refused the
 * request (ret->status != 0): only transport and format failures return -errno.
 */
int ffm_client__call(const char *runtime_dir, enum ffm_verb verb, const struct ffm_proto_arg *args,
		     size_t nargs, int timeout_ms, struct ffm_reply **ret);
struct ffm_reply *ffm_reply__free(struct ffm_reply *r);

/* A sentence for a transport error of ffm_client__call, naming the socket and a remedy. */
const char *ffm_client__strerror(int err, const char *runtime_dir, char *buf, size_t len);

/* ffm_client__call with ffmctl's --runtime-dir and --timeout: the reply, or NULL when there is
 * none or ffmd refused, having said so as @verb's error. */
struct ffm_reply *ffmctl_call(const char *verb, enum ffm_verb v, const struct ffm_proto_arg *args,
			      size_t nargs);

#endif
