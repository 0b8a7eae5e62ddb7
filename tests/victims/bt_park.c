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
 *
 * On aarch64, "park callee" holds it one call deeper instead: interrupted
 * in libc, in a function the code after libc's own in its last page
 * (where the segment walk's goes) called and that has not called on yet
 * (x30 still returns there): glibc's per-frame helper, called by the walk.
 * With Debian 13's glibc that helper is pac-ret, its saved x30 signed,
 * its CFI one that Debian 12's libunwind cannot step through unaided.
 */
#include <execinfo.h>
#include <stdbool.h>
#include <link.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <ucontext.h>

static uintptr_t gcc_lo, gcc_hi;            /* libgcc_s's code */
static uintptr_t libc_lo, libc_hi;          /* libc's */
static volatile sig_atomic_t parking, parked, release, callee;
static volatile uintptr_t parked_pc, parked_lr;
static atomic_ulong calls, park_after;

/* The code of the object whose name holds data: its executable segment. */
static int find_code(struct dl_phdr_info *info, size_t size, void *data)
{
	const char *name = data;

	(void)size;
	if (!strstr(info->dlpi_name, name))
		return 0;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];

		if (ph->p_type == PT_LOAD && (ph->p_flags & PF_X)) {
			uintptr_t lo = info->dlpi_addr + ph->p_vaddr;

			if (!strcmp(name, "libgcc_s"))
				gcc_lo = lo, gcc_hi = lo + ph->p_memsz;
			else
				libc_lo = lo, libc_hi = lo + ph->p_memsz;
			return 1;
		}
	}
	return 0;
}

/* Where the thread is: a frame of the unwinder, or (callee) one the walk's code called. */
static bool where_wanted(const ucontext_t *uc)
{
#ifdef __x86_64__
	uintptr_t pc = (uintptr_t)uc->uc_mcontext.gregs[REG_RIP];

	return !callee && pc >= gcc_lo && pc < gcc_hi;
#else
	uintptr_t pc = (uintptr_t)uc->uc_mcontext.pc;
	/* x30 may be signed (pac-ret): user addresses are 48 bits. */
	uintptr_t lr = (uintptr_t)uc->uc_mcontext.regs[30] & (((uintptr_t)1 << 48) - 1);
	/* The walk's code: after libc's own, in the rest of its last page. */
	uintptr_t page_end = (libc_hi + 4095) & ~(uintptr_t)4095;

	parked_pc = pc, parked_lr = lr;
	if (callee)
		return pc >= libc_lo && pc < libc_hi && lr >= libc_hi && lr < page_end;
	return pc >= gcc_lo && pc < gcc_hi;
#endif
}

static void on_usr1(int sig, siginfo_t *si, void *uc)
{
	const struct timespec tick = { 0, 1000000 };

	(void)sig, (void)si;
	/*
	 * Only in a call that began after "park" was asked for (one completed
	 * since): a call the daemon's last guard stopped midway, descheduled
	 * since, would still hold what backtrace() named before that guard.
	 */
	if (!parking || atomic_load(&calls) < park_after || !where_wanted(uc))
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
	dl_iterate_phdr(find_code, "libgcc_s");
	dl_iterate_phdr(find_code, "libc.so.6");
	if (!gcc_lo || !libc_lo || sigaction(SIGUSR1, &sa, NULL) != 0 ||
	    pthread_create(&t, NULL, worker, NULL) != 0)
		return 1;
	printf("ready\n");
	fflush(stdout);
	while (fgets(line, sizeof(line), stdin)) {
		if (!strcmp(line, "park\n") || !strcmp(line, "park callee\n")) {
			callee = !strcmp(line, "park callee\n");
#ifdef __x86_64__
			if (callee) {
				printf("unsupported\n");   /* no link register to tell by */
				fflush(stdout);
				continue;
			}
#endif
			parked = release = 0;   /* parked and released again */
			atomic_store(&park_after, atomic_load(&calls) + 1);
			parking = 1;
			while (!parked) {
				pthread_kill(t, SIGUSR1);
				nanosleep(&gap, NULL);
			}
			printf("parked\n");
			fprintf(stderr, "parked at pc %#lx, x30 %#lx; libc's code %#lx-%#lx\n",
				(unsigned long)parked_pc, (unsigned long)parked_lr,
				(unsigned long)libc_lo, (unsigned long)libc_hi);
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
