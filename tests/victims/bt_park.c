// SPDX-License-Identifier: MIT
/*
 * bt_park: a thread held inside the unwinder's call of backtrace().
 *
 * Usage: bt_park
 *
 * A worker thread calls backtrace() nonstop.  On a line "park" on stdin,
 * the main thread signals it until its SIGUSR1 handler finds it
 * interrupted inside libgcc_s's unwinder, in a call begun after the
 * request (the walk in progress, between two calls of the per-frame
 * callback glibc's backtrace() gave it), and
 * the handler then waits there: "parked".  "release" lets it go on, and
 * once it has completed more calls, "released N" (its calls so far).
 * What the daemon must not do meanwhile: take away code the parked call
 * will still call (guard --backtraces=segment, then unguard).
 */
#include <execinfo.h>
#include <link.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <ucontext.h>

static uintptr_t gcc_lo, gcc_hi;            /* libgcc_s's code */
static volatile sig_atomic_t parking, parked, release;
static atomic_ulong calls, park_after;

static int find_libgcc(struct dl_phdr_info *info, size_t size, void *data)
{
	(void)size, (void)data;
	if (!strstr(info->dlpi_name, "libgcc_s"))
		return 0;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];

		if (ph->p_type == PT_LOAD && (ph->p_flags & PF_X)) {
			gcc_lo = info->dlpi_addr + ph->p_vaddr;
			gcc_hi = gcc_lo + ph->p_memsz;
			return 1;
		}
	}
	return 0;
}

static void on_usr1(int sig, siginfo_t *si, void *uc)
{
	const struct timespec tick = { 0, 1000000 };
#ifdef __x86_64__
	uintptr_t pc = (uintptr_t)((ucontext_t *)uc)->uc_mcontext.gregs[REG_RIP];
#else
	uintptr_t pc = (uintptr_t)((ucontext_t *)uc)->uc_mcontext.pc;
#endif

	(void)sig, (void)si;
	/*
	 * Only in a call that began after "park" was asked for (one completed
	 * since): a call the daemon's last guard stopped midway, descheduled
	 * since, would still hold what backtrace() named before that guard.
	 */
	if (!parking || atomic_load(&calls) < park_after || pc < gcc_lo || pc >= gcc_hi)
		return;
	parking = 0;
	parked = 1;
	while (!release)
		nanosleep(&tick, NULL);
}

static void *worker(void *arg)
{
	void *frames[64];

	(void)arg;
	for (;;) {
		backtrace(frames, 64);
		atomic_fetch_add(&calls, 1);
	}
	return NULL;
}

int main(void)
{
	const struct timespec gap = { 0, 100000 };
	struct sigaction sa = { .sa_sigaction = on_usr1, .sa_flags = SA_SIGINFO | SA_RESTART };
	void *frames[8];
	char line[64];
	pthread_t t;

	backtrace(frames, 8);   /* glibc loads libgcc_s on the first call */
	dl_iterate_phdr(find_libgcc, NULL);
	if (!gcc_lo || sigaction(SIGUSR1, &sa, NULL) != 0 ||
	    pthread_create(&t, NULL, worker, NULL) != 0)
		return 1;
	printf("ready\n");
	fflush(stdout);
	while (fgets(line, sizeof(line), stdin)) {
		if (!strcmp(line, "park\n")) {
			atomic_store(&park_after, atomic_load(&calls) + 1);
			parking = 1;
			while (!parked) {
				pthread_kill(t, SIGUSR1);
				nanosleep(&gap, NULL);
			}
			printf("parked\n");
		} else if (!strcmp(line, "release\n")) {
			unsigned long before = atomic_load(&calls);

			release = 1;
			while (atomic_load(&calls) < before + 1000)
				nanosleep(&gap, NULL);
			printf("released %lu\n", atomic_load(&calls));
		}
		fflush(stdout);
	}
	return 0;
}
