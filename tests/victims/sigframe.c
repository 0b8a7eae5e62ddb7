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
 *   park N   the worker thread takes a signal; its frame says it was
 *            interrupted N bytes into backtrace(), in whichever bytes it
 *            holds then (the original, or a guard's): the instructions
 *            before N are run on the frame's registers and stack, one by
 *            one (step() knows glibc's prologue and btguard's stubs), and
 *            the handler parks; prints "parked SEQ" once there.  The test
 *            picks N: strictly inside the bytes a write would change (it
 *            must be refused), or at their first byte or past them (the
 *            thread runs whatever it finds there cleanly)
 *   release  the handler returns: the thread resumes at the saved PC,
 *            finishes the call, and prints "resumed SEQ FRAMES" with what
 *            a fresh backtrace() returns
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

static bool opt_altstack, opt_nested, opt_zero_rbp;
static atomic_int park_seq, release_seq;
static atomic_int park_at;                /* bytes into backtrace() the frame says */
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

static const uint8_t *entry(void)
{
	return (const uint8_t *)(uintptr_t)&backtrace;
}

static uint64_t canary(void)
{
	uint64_t v;

	__asm__ volatile("mov %%fs:0x28, %0" : "=r"(v));
	return v;
}

/* The register of a ModRM reg or rm field (3 bits) with its REX bit. */
static greg_t *reg_of(greg_t *g, unsigned r)
{
	static const int map[16] = { REG_RAX, REG_RCX, REG_RDX, REG_RBX, REG_RSP, REG_RBP,
				     REG_RSI, REG_RDI, REG_R8, REG_R9, REG_R10, REG_R11,
				     REG_R12, REG_R13, REG_R14, REG_R15 };
	return &g[map[r & 15]];
}

static void unsupported(const uint8_t *p)
{
	say("unsupported backtrace() prologue at +%d (0x%02x)\n", (int)(p - entry()), p[0]);
	_exit(4);
}

/*
 * Runs one instruction of the prologue or of a stub at p on the context g
 * (its stack the fake one): its length.  Just what glibc's backtrace()
 * begins with and what btguard writes there.
 */
static size_t step(greg_t *g, const uint8_t *p)
{
	size_t pre = 0, rex = 0;
	uint64_t *sp;

	if (!memcmp(p, endbr64, sizeof(endbr64)))
		return sizeof(endbr64);
	if (p[0] == 0x64 || p[0] == 0x65)
		pre = 1;                                /* a segment prefix */
	if ((p[pre] & 0xf0) == 0x40)
		rex = p[pre++];
	sp = (uint64_t *)(uintptr_t)g[REG_RSP];
	switch (p[pre]) {
	case 0x50 ... 0x57:                             /* push */
		sp[-1] = (uint64_t)*reg_of(g, (p[pre] & 7) | (rex & 1 ? 8 : 0));
		g[REG_RSP] -= 8;
		return pre + 1;
	case 0x58 ... 0x5f:                             /* pop */
		*reg_of(g, (p[pre] & 7) | (rex & 1 ? 8 : 0)) = (greg_t)sp[0];
		g[REG_RSP] += 8;
		return pre + 1;
	case 0x89:                                      /* mov %reg,%reg */
		if ((p[pre + 1] & 0xc0) != 0xc0)
			unsupported(p);
		{
			uint64_t v = (uint64_t)*reg_of(g, (p[pre + 1] >> 3 & 7) | (rex & 4 ? 8 : 0));

			*reg_of(g, (p[pre + 1] & 7) | (rex & 1 ? 8 : 0)) =
				(greg_t)(rex & 8 ? v : (uint32_t)v);
		}
		return pre + 2;
	case 0x83:                                      /* sub/add $imm8,%rsp */
		if (p[pre + 1] == 0xec)
			g[REG_RSP] -= p[pre + 2];
		else if (p[pre + 1] == 0xc4)
			g[REG_RSP] += p[pre + 2];
		else
			unsupported(p);
		return pre + 3;
	case 0x31:                                      /* xor %eax,%eax */
		if (p[pre + 1] != 0xc0)
			unsupported(p);
		g[REG_RAX] = 0;
		return pre + 2;
	case 0x8b:
		if (pre && (p[pre + 1] & 0xc7) == 0x04 && p[pre + 2] == 0x25) {
			/* mov %fs:0x28,%reg: the stack protector's canary */
			*reg_of(g, (p[pre + 1] >> 3 & 7) | (rex & 4 ? 8 : 0)) = (greg_t)canary();
			return pre + 7;
		}
		if ((p[pre + 1] & 0xc7) == 0x45) {              /* mov disp8(%rbp),%reg */
			int8_t d = (int8_t)p[pre + 2];

			*reg_of(g, (p[pre + 1] >> 3 & 7) | (rex & 4 ? 8 : 0)) =
				(greg_t)*(uint64_t *)(uintptr_t)(g[REG_RBP] + d);
			return pre + 3;
		}
		unsupported(p);
		break;
	case 0xc9:                                      /* leave */
		g[REG_RSP] = g[REG_RBP];
		sp = (uint64_t *)(uintptr_t)g[REG_RSP];
		g[REG_RBP] = (greg_t)sp[0];
		g[REG_RSP] += 8;
		return pre + 1;
	}
	unsupported(p);
	return 0;
}

/*
 * Makes uc say the thread was interrupted park_at bytes into backtrace(),
 * in whichever bytes it holds now, in a call from landing on fake_stack:
 * the instructions before run here, one by one.  park_at must be an
 * instruction boundary of those bytes (the test works it out).
 */
void fake_interrupt(void *ucv)
{
	ucontext_t *uc = ucv;
	greg_t *g = uc->uc_mcontext.gregs;
	const uint8_t *s = entry();
	uintptr_t base = ((uintptr_t)fake_stack + sizeof(fake_stack) - 256) & ~(uintptr_t)15;
	size_t done = 0, at = (size_t)atomic_load(&park_at);

	/* The call's return address; backtrace(buf, 0) returns without unwinding. */
	*(uintptr_t *)(base - 8) = (uintptr_t)landing;
	g[REG_RSP] = (greg_t)(base - 8);
	g[REG_RDI] = (greg_t)(uintptr_t)fake_stack;
	g[REG_RSI] = 0;
	while (done < at)
		done += step(g, s + done);
	if (done != at) {
		say("+%d is not an instruction boundary (+%d)\n", (int)at, (int)done);
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
		int at;

		if (sscanf(line, "park %d", &at) == 1 && at >= 0 && at < 64) {
			atomic_store(&park_at, at);
			atomic_fetch_add(&park_seq, 1);
			sem_post(park_sem);
		} else if (!strcmp(line, "release\n")) {
			atomic_fetch_add(&release_seq, 1);
		}
	}
	return 0;
}
