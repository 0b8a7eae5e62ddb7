// SPDX-License-Identifier: MIT
/*
 * Unit tests for the scan worker (scanwork.c), scanning this process's
 * own memory: a word inside a span is found and named, a clean range is
 * read whole, an unreadable one is an error, verdicts come back in the
 * order submitted however many there are (small ones read together, each
 * keeping its own verdict, an unreadable one among them named alone), and
 * a batch given up while the
 * worker is still on it is freed by the worker and never shared with the
 * next one.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "scanwork.h"

#define WORDS 8192

static const struct stackcheck_span span = { .lo = 0x7f0000001000, .hi = 0x7f0000001008 };

static void in_ms(struct timespec *ts, long ms)
{
	clock_gettime(CLOCK_MONOTONIC, ts);
	ts->tv_sec += ms / 1000;
	ts->tv_nsec += (ms % 1000) * 1000000L;
	if (ts->tv_nsec >= 1000000000L) {
		ts->tv_nsec -= 1000000000L;
		ts->tv_sec++;
	}
}

static struct scanwork_batch *begin(void)
{
	struct scanwork_batch *b = NULL;
	struct timespec end;

	/* An earlier test's abandoned batch may still be on the worker. */
	in_ms(&end, 30000);
	for (;;) {
		int r = scanwork_begin(&span, 1, &b);
		struct timespec now;

		if (r == 0)
			return b;
		assert_int_equal(r, -EAGAIN);
		clock_gettime(CLOCK_MONOTONIC, &now);
		assert_true(now.tv_sec < end.tv_sec);
		usleep(1000);
	}
}

static void finish(struct scanwork_batch *b)
{
	struct timespec by;

	in_ms(&by, 10000);
	assert_int_equal(scanwork_wait(b, &by), 0);
}

/* One scan of [lo, hi) of this process, in a batch of its own: its verdict. */
static struct scanwork_job scan_alone(uintptr_t lo, uintptr_t hi)
{
	struct scanwork_batch *b = begin();
	struct scanwork_job job;

	assert_true(scanwork_submit(b, getpid(), lo, hi));
	finish(b);
	assert_int_equal(scanwork_count(b), 1);
	job = *scanwork_job(b, 0);
	scanwork_end(b);
	return job;
}

static void a_word_inside_a_span_is_found(void **state)
{
	uint64_t *words = calloc(WORDS, sizeof(*words));
	struct scanwork_job job;
	(void)state;

	assert_non_null(words);
	words[5000] = span.lo + 3;
	words[6000] = span.lo;   /* the span's first byte is where a call starts, not inside */
	job = scan_alone((uintptr_t)words, (uintptr_t)(words + WORDS));
	assert_int_equal(job.r, 1);
	assert_int_equal(job.pc, span.lo + 3);
	assert_int_equal(job.tid, getpid());
	free(words);
}

static void a_clean_range_is_read_whole(void **state)
{
	uint64_t *words = calloc(WORDS, sizeof(*words));
	struct scanwork_job job;
	(void)state;

	assert_non_null(words);
	words[100] = span.lo;
	words[101] = span.hi;
	/* Unaligned bounds: the scan starts at the word holding lo. */
	job = scan_alone((uintptr_t)words + 3, (uintptr_t)(words + WORDS));
	assert_int_equal(job.r, 0);
	assert_int_equal(job.bytes, WORDS * sizeof(uint64_t));
	/* A tail short of a word holds no address: left out, and the scan ends. */
	job = scan_alone((uintptr_t)words, (uintptr_t)(words + 16) + 5);
	assert_int_equal(job.r, 0);
	assert_int_equal(job.bytes, 16 * sizeof(uint64_t));
	free(words);
}

static void an_unreadable_range_is_an_error(void **state)
{
	long page = sysconf(_SC_PAGESIZE);
	void *p = mmap(NULL, (size_t)page, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	(void)state;

	assert_true(p != MAP_FAILED);
	assert_int_equal(scan_alone((uintptr_t)p, (uintptr_t)p + (uintptr_t)page).r, -EFAULT);
	munmap(p, (size_t)page);
}

static void verdicts_come_back_in_order(void **state)
{
	uint64_t *words = calloc(WORDS, sizeof(*words));
	struct scanwork_batch *b;
	size_t n;
	(void)state;

	assert_non_null(words);
	words[WORDS - 1] = span.lo + 1;
	b = begin();   /* more than a block of jobs: the batch grows */
	for (size_t i = 0; i < 300; i++) {
		/* Every third range reaches the word at the end. */
		uintptr_t hi = (uintptr_t)(words + (i % 3 == 0 ? WORDS : WORDS - 1));

		assert_true(scanwork_submit(b, getpid(), (uintptr_t)(words + i), hi));
	}
	finish(b);
	n = scanwork_count(b);
	assert_int_equal(n, 300);
	for (size_t i = 0; i < n; i++) {
		assert_int_equal(scanwork_job(b, i)->lo, (uintptr_t)(words + i));
		assert_int_equal(scanwork_job(b, i)->r, i % 3 == 0 ? 1 : 0);
	}
	scanwork_end(b);
	free(words);
}

static void small_scans_read_together_keep_their_own_verdicts(void **state)
{
	enum { JOBS = 100, JOB_WORDS = 64 };
	long page = sysconf(_SC_PAGESIZE);
	size_t len = JOBS * JOB_WORDS * sizeof(uint64_t) + (size_t)page;
	uint64_t *words = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	uint64_t *hole = mmap(NULL, (size_t)page, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	struct scanwork_batch *b;
	size_t n;
	(void)state;

	assert_true(words != MAP_FAILED && hole != MAP_FAILED);
	/* Neighbouring ranges, hits on their edges: a slice off by one job names the wrong one. */
	words[7 * JOB_WORDS] = span.lo + 1;                      /* job 7's first word */
	words[8 * JOB_WORDS - 1] = span.lo + 2;                  /* job 7's last word too */
	words[40 * JOB_WORDS - 1] = span.lo + 4;                 /* job 39's last word */
	words[41 * JOB_WORDS] = span.lo + 5;                     /* job 41's first word */
	b = begin();
	for (size_t i = 0; i < JOBS; i++) {
		uintptr_t lo = (uintptr_t)(words + i * JOB_WORDS), hi = lo + JOB_WORDS * sizeof(uint64_t);

		if (i == 20)
			lo = (uintptr_t)hole, hi = lo + (uintptr_t)page;   /* unreadable, mid-run */
		if (i == 60)
			hi -= 3;                           /* not whole words: alone, the tail left out */
		assert_true(scanwork_submit(b, getpid(), lo, hi));
	}
	finish(b);
	n = scanwork_count(b);
	assert_int_equal(n, JOBS);
	for (size_t i = 0; i < n; i++) {
		const struct scanwork_job *j = scanwork_job(b, i);
		int want = i == 20 ? -EFAULT : (i == 7 || i == 39 || i == 41);

		assert_int_equal(j->tid, getpid());
		assert_int_equal(j->r, want);
		if (want == 0)
			assert_int_equal(j->bytes, (i == 60 ? JOB_WORDS - 1 : JOB_WORDS) * sizeof(uint64_t));
	}
	assert_int_equal(scanwork_job(b, 7)->pc, span.lo + 1);
	assert_int_equal(scanwork_job(b, 39)->pc, span.lo + 4);
	assert_int_equal(scanwork_job(b, 41)->pc, span.lo + 5);
	scanwork_end(b);
	munmap(words, len);
	munmap(hole, (size_t)page);
}

static void an_abandoned_batch_is_finished_alone(void **state)
{
	size_t len = (size_t)64 << 20;
	uint64_t *words = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	struct scanwork_batch *b;
	(void)state;

	assert_true(words != MAP_FAILED);
	b = begin();
	for (int i = 0; i < 8; i++)
		assert_true(scanwork_submit(b, getpid(), (uintptr_t)words, (uintptr_t)words + len));
	scanwork_end(b);   /* given up at once: the worker frees it (ASan checks) */
	/* The next batch starts only once the worker is done with that one. */
	b = begin();
	assert_true(scanwork_submit(b, getpid(), (uintptr_t)words, (uintptr_t)(words + 16)));
	finish(b);
	assert_int_equal(scanwork_count(b), 1);
	assert_int_equal(scanwork_job(b, 0)->r, 0);
	scanwork_end(b);
	munmap(words, len);
}

/*
 * Fewer jobs than wake the worker, given up at once while it sleeps: it is
 * woken for them all the same.  Left asleep, it would hold the batch for
 * ever, and begin() below would never get another.
 */
static void a_small_abandoned_batch_is_finished_too(void **state)
{
	uint64_t *words = calloc(WORDS, sizeof(*words));
	struct scanwork_batch *b;
	(void)state;

	assert_non_null(words);
	b = begin();
	scanwork_end(b);
	usleep(20000);   /* the worker is asleep by now */
	b = begin();
	assert_true(scanwork_submit(b, getpid(), (uintptr_t)words, (uintptr_t)(words + WORDS)));
	scanwork_end(b);
	b = begin();
	scanwork_end(b);
	free(words);
}

/*
 * The queue takes no lock, so races are the risk: batches of every size,
 * waited for, given up at once, or given up at a deadline that has
 * passed, one after another while the worker is still on the last, with
 * each waited-for verdict checked against the words planted.  ASan sees a
 * job read after its batch is freed; `make tsan' runs this under
 * ThreadSanitizer too.
 */
static void batches_race_the_worker(void **state)
{
	enum { ROUNDS = 300, RANGE_WORDS = 32 };
	uint64_t *words = calloc(WORDS, sizeof(*words));
	unsigned seed = 1;
	(void)state;

	assert_non_null(words);
	for (size_t i = 0; i < WORDS; i += 97)
		words[i] = span.lo + 1;
	for (int round = 0; round < ROUNDS; round++) {
		struct scanwork_batch *b = begin();
		size_t n = (size_t)rand_r(&seed) % 600;
		int how = rand_r(&seed) % 3;
		struct timespec by;

		for (size_t i = 0; i < n; i++) {
			size_t at = (i * 31) % (WORDS - RANGE_WORDS);

			assert_true(scanwork_submit(b, getpid(), (uintptr_t)(words + at),
						    (uintptr_t)(words + at + RANGE_WORDS)));
		}
		if (how == 0) {
			finish(b);
			assert_int_equal(scanwork_count(b), n);
			for (size_t i = 0; i < n; i++) {
				size_t at = (i * 31) % (WORDS - RANGE_WORDS);
				bool planted = false;

				for (size_t w = at; w < at + RANGE_WORDS; w++)
					planted = planted || w % 97 == 0;
				assert_int_equal(scanwork_job(b, i)->r, planted ? 1 : 0);
			}
		} else if (how == 1) {
			clock_gettime(CLOCK_MONOTONIC, &by);
			scanwork_wait(b, &by);
		}
		scanwork_end(b);
	}
	free(words);
}

static void a_wait_ends_at_its_deadline(void **state)
{
	/*
	 * 16 x 32 MiB: far more than a deadline of now lets it finish, and
	 * little enough that the worker, under ThreadSanitizer too, finishes
	 * it well inside begin()'s wait (16 x 256 MiB took over 10 s there).
	 */
	size_t len = (size_t)32 << 20;
	uint64_t *words = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	struct scanwork_batch *b;
	struct timespec by;
	(void)state;

	assert_true(words != MAP_FAILED);
	b = begin();
	/* Half a GiB of reading: a deadline now cannot see it done. */
	for (int i = 0; i < 16; i++)
		assert_true(scanwork_submit(b, getpid(), (uintptr_t)words, (uintptr_t)words + len));
	clock_gettime(CLOCK_MONOTONIC, &by);
	assert_int_equal(scanwork_wait(b, &by), -ETIMEDOUT);
	scanwork_end(b);
	/* The worker finishes it alone, and the next batch waits for that. */
	b = begin();
	scanwork_end(b);
	munmap(words, len);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(a_word_inside_a_span_is_found),
		cmocka_unit_test(a_clean_range_is_read_whole),
		cmocka_unit_test(an_unreadable_range_is_an_error),
		cmocka_unit_test(verdicts_come_back_in_order),
		cmocka_unit_test(small_scans_read_together_keep_their_own_verdicts),
		cmocka_unit_test(an_abandoned_batch_is_finished_alone),
		cmocka_unit_test(a_wait_ends_at_its_deadline),
		cmocka_unit_test(a_small_abandoned_batch_is_finished_too),
		cmocka_unit_test(batches_race_the_worker),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
