// SPDX-License-Identifier: MIT
/*
 * sigframe: a thread held in a signal handler while the PC saved in its
 * signal frame lies inside backtrace()'s first bytes - the moment at which
 * writing the stub (or the original bytes back) crashes the thread when
 * the handler returns.
 *
 * Usage: sigframe [--altstack] [--nested] [--zero-rbp]
 *
 * Commands on stdin, one per line:
 *   park     the worker thread takes a signal; its frame says it was
 *            interrupted strictly inside the bytes the guard changes: the
 *            stub follows the function's first instruction ("push %rbp" or
 *            "push %r15"), so the saved PC is after the *second* one (the
 *            original's "mov %rsp,%rbp" or "push %r14", or the guarded
 *            form's "pop"; an older btguard's stub at the entry: after its
 *            "xor %eax,%eax"), and the handler parks;
 *            prints "parked N" once there
 *   park-first  the same, but interrupted right after the first
 *            instruction, which the stub keeps: the PC is at the first byte
 *            of the change, where a thread runs the new bytes cleanly
 *   release  the handler returns: the thread resumes at the saved PC,
 *            finishes the call, and prints "resumed N FRAMES" with what a
 *            fresh backtrace() returns
 *
 * The parking handler is written in assembly without unwind tables (CFI),
 * so a stack walk from it cannot find its way to the signal frame:
 *   --zero-rbp  it also zeroes %rbp, so libunwind's frame-pointer fallback
 *               takes the walk as complete;
 *   --nested    the frame with the PC comes from a first signal, whose
 *               (ordinary) handler raises a second one that parks;
 *   --altstack  the parking handler runs on a sigaltstack (SA_ONSTACK).
 * Built a second time with -fno-omit-frame-pointer as sigframe_fp.
 *
 * The emulated interruption runs on a stack of its own (fake_stack) and
 * returns to a landing pad that siglongjmp()s back to the worker's loop.
 */
#include <errno.h>
#include <execinfo.h>
#include <pthread.h>
#include <semaphore.h>
#include <setjmp.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

static const uint8_t endbr64[4] = { 0xf3, 0x0f, 0x1e, 0xfa };
static const uint8_t stub[3] = { 0x31, 0xc0, 0xc3 };  /* xor %eax,%eax; ret */
static const uint8_t push_r15[2] = { 0x41, 0x57 };
static const uint8_t push_rbp[1] = { 0x55 };

static bool opt_altstack, opt_nested, opt_zero_rbp;
static atomic_int park_seq, release_seq;
static atomic_bool park_after_first;      /* park-first: the PC right after the first instruction */
static sigjmp_buf back_to_loop;
static _Alignas(16) uint8_t fake_stack[1 << 16];
static pid_t worker_tid;
static sem_t *park_sem;

void park_body(void);
void park_handler_plain(int sig, siginfo_t *si, void *uc);
void park_handler_zero_rbp(int sig, siginfo_t *si, void *uc);
void landing(void);
void fake_interrupt(void *uc);
void landing_c(void);

/*
 * The parking handlers: no .cfi directives, so no unwind info.  The plain
 * one keeps %rbp as the interrupted code had it (a frame-pointer walk then
 * skips the signal frame); the other zeroes it.  Both fake the interrupted
 * context (unless nested: the first handler did), then park.
 */
__asm__(
	".text\n"
	".globl park_handler_plain\n"
	".type park_handler_plain,@function\n"
	"park_handler_plain:\n"
	"	sub $8, %rsp\n"
	"	mov %rdx, %rdi\n"
	"	call fake_interrupt_if_direct\n"
	"	call park_body\n"
	"	add $8, %rsp\n"
	"	ret\n"
	".size park_handler_plain, .-park_handler_plain\n"
	".globl park_handler_zero_rbp\n"
	".type park_handler_zero_rbp,@function\n"
	"park_handler_zero_rbp:\n"
	"	push %rbp\n"
	"	xor %ebp, %ebp\n"
	"	mov %rdx, %rdi\n"
	"	call fake_interrupt_if_direct\n"
	"	call park_body\n"
	"	pop %rbp\n"
	"	ret\n"
	".size park_handler_zero_rbp, .-park_handler_zero_rbp\n"
	/* Entered by "ret" with %rsp 16-aligned: realign for a C call. */
	".globl landing\n"
	".type landing,@function\n"
	"landing:\n"
	"	and $-16, %rsp\n"
	"	call landing_c\n"
	"	ud2\n"
	".size landing, .-landing\n");

static void say(const char *fmt, int a, int b)
{
	char line[64];
	int n = snprintf(line, sizeof(line), fmt, a, b);

	if (write(1, line, (size_t)n) != n)
		_exit(3);
}

static const uint8_t *site(void)
{
	const uint8_t *f = (const uint8_t *)(uintptr_t)&backtrace;

	return memcmp(f, endbr64, sizeof(endbr64)) ? f : f + sizeof(endbr64);
}

/*
 * Makes uc say the thread was interrupted after the first instruction of
 * the site, in whichever bytes the site holds now, on fake_stack, in a
 * call that will return to landing.
 */
void fake_interrupt(void *ucv)
{
	ucontext_t *uc = ucv;
	greg_t *g = uc->uc_mcontext.gregs;
	const uint8_t *s = site();
	uintptr_t base = ((uintptr_t)fake_stack + sizeof(fake_stack) - 256) & ~(uintptr_t)15;
	size_t done;

	/* The call's return address. */
	*(uintptr_t *)(base - 8) = (uintptr_t)landing;
	g[REG_RSP] = (greg_t)(base - 8);
	if (!memcmp(s, stub, sizeof(stub))) {
		/* After "xor %eax,%eax": the next instruction is the stub's ret. */
		g[REG_RAX] = 0;
		done = 2;
	} else if (!memcmp(s, push_rbp, sizeof(push_rbp)) || !memcmp(s, push_r15, sizeof(push_r15))) {
		bool rbp = s[0] == push_rbp[0];
		size_t first = rbp ? 1 : 2;
		const uint8_t *next = s + first;

		/* The first push: the register it saved below the return address. */
		*(uintptr_t *)(base - 16) = (uintptr_t)g[rbp ? REG_RBP : REG_R15];
		g[REG_RSP] = (greg_t)(base - 16);
		g[REG_RDI] = (greg_t)(uintptr_t)fake_stack;
		g[REG_RSI] = 0;  /* backtrace(buf, 0): returns without unwinding */
		if (atomic_load(&park_after_first)) {
			done = first;
		} else if (rbp ? next[0] == 0x5d : next[0] == 0x41 && next[1] == 0x5f) {
			/* Guarded: its pop ran too; the stub's xor is next. */
			g[REG_RSP] = (greg_t)(base - 8);
			done = first + (rbp ? 1 : 2);
		} else if (next[0] == 0x48 && next[1] == 0x89 && next[2] == 0xe5) {
			/* mov %rsp,%rbp */
			g[REG_RBP] = g[REG_RSP];
			done = first + 3;
		} else if (next[0] == 0x41 && (next[1] & 0xf8) == 0x50) {
			/* push %r8-%r15 */
			*(uintptr_t *)(base - 24) = (uintptr_t)g[REG_R8 + (next[1] & 7)];
			g[REG_RSP] = (greg_t)(base - 24);
			done = first + 2;
		} else {
			say("unsupported backtrace() prologue\n", 0, 0);
			_exit(4);
		}
	} else {
		say("unsupported backtrace() prologue\n", 0, 0);
		_exit(4);
	}
	g[REG_RIP] = (greg_t)(uintptr_t)(s + done);
}

void fake_interrupt_if_direct(void *uc);
void fake_interrupt_if_direct(void *uc)
{
	if (!opt_nested)
		fake_interrupt(uc);
}

/* Parks until the test says release. */
void park_body(void)
{
	int seq = atomic_load(&park_seq);
	struct timespec ms = { 0, 1000000 };

	say("parked %d\n", seq, 0);
	while (atomic_load(&release_seq) < seq)
		nanosleep(&ms, NULL);
}

/* --nested: the first signal's handler (with unwind info) fakes, then raises the parking one. */
static void first_handler(int sig, siginfo_t *si, void *uc)
{
	(void)sig;
	(void)si;
	fake_interrupt(uc);
	syscall(SYS_tgkill, getpid(), worker_tid, SIGUSR2);
}

void landing_c(void)
{
	siglongjmp(back_to_loop, 1);
}

static void install(int sig, void (*fn)(int, siginfo_t *, void *), bool onstack)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = fn;
	sa.sa_flags = SA_SIGINFO | (onstack ? SA_ONSTACK : 0);
	sigemptyset(&sa.sa_mask);
	if (sigaction(sig, &sa, NULL) < 0) {
		perror("sigaction");
		exit(2);
	}
}

static void *worker(void *arg)
{
	void (*park)(int, siginfo_t *, void *) = opt_zero_rbp ? park_handler_zero_rbp : park_handler_plain;
	void *frames[64];

	(void)arg;
	worker_tid = (pid_t)syscall(SYS_gettid);
	if (opt_altstack) {
		stack_t ss = { .ss_sp = malloc(1 << 16), .ss_size = 1 << 16 };

		if (!ss.ss_sp || sigaltstack(&ss, NULL) < 0) {
			perror("sigaltstack");
			exit(2);
		}
	}
	install(SIGUSR2, park, opt_altstack);
	if (opt_nested)
		install(SIGUSR1, first_handler, false);
	say("ready\n", 0, 0);
	for (;;) {
		while (sem_wait(park_sem) < 0 && errno == EINTR)
			;
		if (sigsetjmp(back_to_loop, 1) == 0) {
			syscall(SYS_tgkill, getpid(), worker_tid, opt_nested ? SIGUSR1 : SIGUSR2);
			say("not faked\n", 0, 0);  /* the handler must not return here */
			_exit(5);
		}
		say("resumed %d %d\n", atomic_load(&park_seq), backtrace(frames, 64));
	}
	return NULL;
}

int main(int argc, char **argv)
{
	static sem_t sem;
	pthread_t t;
	char line[64];

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--altstack"))
			opt_altstack = true;
		else if (!strcmp(argv[i], "--nested"))
			opt_nested = true;
		else if (!strcmp(argv[i], "--zero-rbp"))
			opt_zero_rbp = true;
		else {
			fprintf(stderr, "usage: sigframe [--altstack] [--nested] [--zero-rbp]\n");
			return 2;
		}
	}
	park_sem = &sem;
	sem_init(park_sem, 0, 0);
	if (pthread_create(&t, NULL, worker, NULL) != 0)
		return 2;
	while (fgets(line, sizeof(line), stdin)) {
		if (!strcmp(line, "park\n") || !strcmp(line, "park-first\n")) {
			atomic_store(&park_after_first, line[4] == '-');
			atomic_fetch_add(&park_seq, 1);
			sem_post(park_sem);
		} else if (!strcmp(line, "release\n")) {
			atomic_fetch_add(&release_seq, 1);
		}
	}
	return 0;
}
