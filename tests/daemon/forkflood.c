// SPDX-License-Identifier: MIT
/*
 * A fork flood (tests/daemon/test_sec_forks.sh): forks N children that stay alive, prints
 * "FORKED <n>" once they are all there, and ends them all when its standard input closes (or
 * after 120 s). The children wait on a pipe that only the parent holds open for writing, and
 * die with it.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 100, made = 0, p[2];
	char c;

	if (pipe(p) < 0)
		return 1;
	for (; made < n; made++) {
		pid_t pid = fork();

		if (pid < 0)
			break;
		if (pid == 0) {
			prctl(PR_SET_PDEATHSIG, SIGKILL);
			close(p[1]);
			while (read(p[0], &c, 1) > 0)
				;
			_exit(0);
		}
	}
	close(p[0]);
	printf("FORKED %d\n", made);
	fflush(stdout);
	alarm(120);
	while (read(0, &c, 1) > 0)
		;
	close(p[1]);
	while (wait(NULL) > 0)
		;
	return made == n ? 0 : 1;
}
