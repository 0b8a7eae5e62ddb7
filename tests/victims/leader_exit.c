// SPDX-License-Identifier: MIT
/*
 * leader_exit: bt_loop whose main thread leaves with pthread_exit() once
 * everything runs.  The process lives on in its other threads, but its
 * leader is a zombie: /proc/PID/status says "Z", and /proc/PID/maps, mem
 * and root read empty or fail, since they go through the leader's own
 * (released) memory and file system references.
 *
 * Usage: as bt_loop.
 */
#include <pthread.h>

/* bt_loop's main ends in pause(); ours ends the main thread instead. */
#define pause leader_exit_instead_of_pause
#define main bt_loop_main
#include "bt_loop.c"
#undef main
#undef pause

int leader_exit_instead_of_pause(void)
{
	pthread_exit(NULL);
}

int main(int argc, char **argv)
{
	return bt_loop_main(argc, argv);
}
