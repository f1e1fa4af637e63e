/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include "cli/client.h"
#include "cli/ffmctl.h"
#include "common/util.h"

struct reply_buf {
	struct ffm_reply r;
	char buf[FFM_PROTO_MAX_RESPONSE + 1];
};

struct ffm_reply *ffm_reply__free(struct ffm_reply *r)
{
	/* r is the first member of its reply_buf. */
	free(r);
	return NULL;
}

/* "FFM/<version> <status> <message>\n<body>" -> reply fields (in place). */
static int parse_reply(struct reply_buf *rb, size_t n)
{
	char *nl, *end;
	unsigned ver;
	long st;
	int off = 0;

	rb->buf[n] = 0;
	if (memchr(rb->buf, 0, n))
		return -EPROTO;
	nl = strchr(rb->buf, '\n');
	if (!nl)
		return -EPROTO;
	*nl = 0;
	if (sscanf(rb->buf, "FFM/%u %n", &ver, &off) != 1 || !off || ver != FFM_PROTO_VERSION)
		return -EPROTO;
	errno = 0;
	st = strtol(rb->buf + off, &end, 10);
	if (errno || end == rb->buf + off || st < 0 || st > 4095 || (*end && *end != ' '))
		return -EPROTO;
	rb->r.status = (int)st;
	rb->r.message = *end ? end + 1 : "";
	rb->r.body = nl + 1;
	rb->r.body_len = n - (size_t)(nl + 1 - rb->buf);
	return 0;
}

int ffm_client__call(const char *runtime_dir, enum ffm_verb verb, const struct ffm_proto_arg *args,
		     size_t nargs, int timeout_ms, struct ffm_reply **ret)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	char req[FFM_PROTO_MAX_REQUEST + 1];
	struct reply_buf *rb = NULL;
	uint64_t deadline = ffm_now_ns() + (uint64_t)timeout_ms * 1000000, left;
	struct timeval tv;
	int fd = -1, len, err;
	ssize_t n;

	*ret = NULL;
	len = ffm_proto_format(req, sizeof(req), verb, args, nargs);
	if (len < 0)
		return len;
	if ((size_t)snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/%s", runtime_dir,
			     FFM_PROTO_SOCKET) >= sizeof(sa.sun_path))
		return -ENAMETOOLONG;
	fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	/* connect() and send() on an AF_UNIX socket block at most the send timeout (a full
	 * listen backlog, a full socket buffer). */
	tv.tv_sec = timeout_ms / 1000;
	tv.tv_usec = (timeout_ms % 1000) * 1000;
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		err = errno == EAGAIN || errno == EINPROGRESS ? -ETIMEDOUT : -errno;
		goto out;
	}
	n = send(fd, req, (size_t)len, MSG_NOSIGNAL);
	if (n != len) {
		err = n < 0 && errno != EAGAIN ? -errno : -ETIMEDOUT;
		goto out;
	}
	rb = malloc(sizeof(*rb));
	if (!rb) {
		err = -ENOMEM;
		goto out;
	}
	/* The answer within what is left of the timeout (+1 µs: a zero timeval means none). */
	left = ffm_now_ns();
	left = left < deadline ? deadline - left : 0;
	tv = (struct timeval){ .tv_sec = left / 1000000000, .tv_usec = left % 1000000000 / 1000 + 1 };
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	/* MSG_TRUNC: n is the message's real length, so an oversized answer is detected rather
	 * than silently cut. */
	n = recv(fd, rb->buf, FFM_PROTO_MAX_RESPONSE, MSG_TRUNC);
	if (n < 0) {
		err = errno == EAGAIN ? -ETIMEDOUT : -errno;
		goto out;
	}
	if (n == 0) {
		/* ffmd closed without answering: it does so only for requests it cannot read. */
		err = -ECONNRESET;
		goto out;
	}
	if ((size_t)n > FFM_PROTO_MAX_RESPONSE) {
		err = -EMSGSIZE;
		goto out;
	}
	err = parse_reply(rb, (size_t)n);
	if (!err) {
		*ret = &rb->r;
		rb = NULL;
	}
out:
	free(rb);
	close(fd);
	return err;
}

const char *ffm_client__strerror(int err, const char *runtime_dir, char *buf, size_t len)
{
	switch (err) {
	case -ENOENT:
	case -ECONNREFUSED:
		snprintf(buf, len, "ffmd is not running (%s %s/%s; start it with "
			 "'systemctl start ffmd', or pass --runtime-dir)",
			 err == -ENOENT ? "no socket at" : "nobody listens on", runtime_dir,
			 FFM_PROTO_SOCKET);
		break;
	case -EACCES:
		snprintf(buf, len, "cannot open %s/%s: permission denied", runtime_dir,
			 FFM_PROTO_SOCKET);
		break;
	case -ETIMEDOUT:
		snprintf(buf, len, "ffmd did not answer in time on %s/%s (busy or hung? see "
			 "'journalctl -u ffmd'; --timeout raises the limit)", runtime_dir,
			 FFM_PROTO_SOCKET);
		break;
	case -EPROTO:
		snprintf(buf, len, "the answer on %s/%s is not an FFM/%d response (ffmd and ffmctl "
			 "of different versions?)", runtime_dir, FFM_PROTO_SOCKET, FFM_PROTO_VERSION);
		break;
	case -EMSGSIZE:
		snprintf(buf, len, "ffmd's answer is longer than the protocol allows (%u bytes)",
			 FFM_PROTO_MAX_RESPONSE);
		break;
	case -ECONNRESET:
		snprintf(buf, len, "ffmd closed the connection without answering");
		break;
	case -E2BIG:
		snprintf(buf, len, "request longer than %d bytes (too many or too long arguments)",
			 FFM_PROTO_MAX_REQUEST);
		break;
	case -EINVAL:
		snprintf(buf, len, "an argument cannot be sent (control characters in a value, or "
			 "longer than %d bytes)", FFM_PROTO_MAX_VALUE);
		break;
	case -ENAMETOOLONG:
		snprintf(buf, len, "runtime directory path too long for a socket: %s", runtime_dir);
		break;
	default:
		snprintf(buf, len, "talking to ffmd on %s/%s failed: %s", runtime_dir,
			 FFM_PROTO_SOCKET, strerror(-err));
	}
	return buf;
}

struct ffm_reply *ffmctl_call(const char *verb, enum ffm_verb v, const struct ffm_proto_arg *args,
			      size_t nargs)
{
	struct ffm_reply *rep = NULL;
	char why[512];
	int err = ffm_client__call(ffmctl_g.runtime_dir, v, args, nargs, ffmctl_g.timeout_ms, &rep);

	if (err < 0) {
		ffmctl_err(verb, "%s", ffm_client__strerror(err, ffmctl_g.runtime_dir, why, sizeof(why)));
		return NULL;
	}
	if (rep->status) {
		ffmctl_err(verb, "ffmd refused: %s (%s)", rep->message, strerror(rep->status));
		return ffm_reply__free(rep);
	}
	return rep;
}
