// SPDX-License-Identifier: MIT
/*
 * Stack scans on a second thread (scanwork.h).
 *
 * Why a thread: with 1,024 threads to stop, the scans of their stacks
 * took a fifth of the pause, all of it on the one thread that also seizes
 * and collects the stops, while the other cores waited.  A scan is a
 * plain read of the target's memory (process_vm_readv) and a comparison,
 * so it may run anywhere; ptrace requests, which only the tracer may make,
 * stay on the main thread.
 *
 * What keeps it simple: the worker touches nothing but the batch, which
 * holds copies of everything it needs.  The main thread fills the batch
 * while it stops the world, the worker empties it, and when the main
 * thread comes to wait it takes the jobs the worker has not started yet (a
 * few large stacks are then scanned two at a time).  A batch whose caller
 * stopped waiting (a deadline, an error) is left to the worker, which
 * frees it when its last scan is done; until then no new batch starts, so
 * a worker held up in a read (a page that must come from swap) never has
 * two batches, and the attempts meanwhile scan on their own.  The worker
 * blocks every signal: SIGALRM, SIGCHLD and the rest are the main
 * thread's.
 *
 * Why queueing takes no lock: the main thread queues a scan for every
 * stopped thread, hundreds in a pause, and each time it had to wait for
 * the lock the worker held it slept and was woken - a few of those per
 * pause cost more than all the queueing.  So a job, once queued, never
 * moves or changes until it is claimed (the jobs live in blocks that are
 * never reallocated), the count of queued jobs is published with a
 * release store, and either thread claims the next jobs with a
 * compare-and-swap.  The lock guards the rest: results, `done', the
 * batch's lifetime, and the sleeping and waking.  The worker claims under
 * the lock and holds claimed jobs until it stores them, so `done' cannot
 * reach `n' - and the caller cannot free the batch - while the worker
 * still looks at it.  The caller wakes the worker only when it said it is
 * going to sleep (worker_idle, stored before the worker looks for work a
 * last time, as the caller stores `n' before it reads the flag: one of the
 * two sees the other's store).
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

#include "log.h"
#include "scanwork.h"

#define CHUNK_WORDS 8192
#define WAKE_AFTER 8    /* queued scans that wake the worker */
#define BATCH_JOBS 16   /* scans read with one system call, at most */
#define BLOCK_JOBS 256
#define MAX_BLOCKS 64   /* 16,384 scans a batch; past that the caller scans */
#define CHUNK_BYTES (CHUNK_WORDS * sizeof(uint64_t))

struct scanwork_batch {
	struct stackcheck_span spans[SCANWORK_MAX_SPANS];
	size_t nspans;
	struct scanwork_job *blocks[MAX_BLOCKS];  /* filled before n counts them */
	_Atomic size_t n;     /* queued; stored by the caller only */
	_Atomic size_t next;  /* the first job not claimed yet */
	size_t done;          /* finished; under the lock */
	bool abandoned;       /* the caller is gone: the worker frees it; under the lock */
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t work = PTHREAD_COND_INITIALIZER;   /* the worker may have jobs */
static pthread_cond_t finished;   /* a job was done; on CLOCK_MONOTONIC, as deadlines are */
static struct scanwork_batch *current;   /* the one batch, or NULL; under the lock */
static bool caller_waiting;              /* in scanwork_wait(); under the lock */
static atomic_bool worker_idle;          /* asleep or about to be: wake it to get help */
static uint64_t *worker_chunk;
static bool started, failed;

static struct scanwork_job *job_at(const struct scanwork_batch *b, size_t i)
{
	return &b->blocks[i / BLOCK_JOBS][i % BLOCK_JOBS];
}

static void batch_free(struct scanwork_batch *b)
{
	for (size_t i = 0; i < MAX_BLOCKS; i++)
		free(b->blocks[i]);
	free(b);
}

/* One scan, outside the lock: reads the range in chunks, stops at a hit. */
static void scan(const struct scanwork_batch *b, struct scanwork_job *j, uint64_t *chunk)
{
	j->bytes = 0;
	j->r = stackcheck_scan_memory(j->tid, j->lo & ~(uint64_t)7, j->hi, chunk, CHUNK_WORDS,
				      b->spans, b->nspans, NULL, NULL, &j->bytes, &j->pc, NULL);
}

static size_t job_bytes(const struct scanwork_job *j)
{
	return (size_t)(j->hi - (j->lo & ~(uint64_t)7));
}

/*
 * Several small scans with one read: a process_vm_readv() per stack cost
 * about as much as the copy of its few live pages, and a pause holds
 * hundreds of them.  Every job of a batch reads the one address space the
 * attempt holds (the target's threads and the processes sharing its
 * memory), so the first job's task serves for all.  The read stops at the
 * first range it cannot read; that job and those after it are scanned
 * alone, which says which one failed.
 */
static void scan_many(const struct scanwork_batch *b, struct scanwork_job *jobs, size_t k,
		      uint64_t *chunk)
{
	struct iovec local = { .iov_base = chunk }, remote[BATCH_JOBS] = { { 0 } };
	size_t off = 0, i;
	ssize_t n;

	for (i = 0; i < k; i++) {
		remote[i].iov_base = (void *)(uintptr_t)(jobs[i].lo & ~(uint64_t)7);
		remote[i].iov_len = job_bytes(&jobs[i]);
		local.iov_len += remote[i].iov_len;
	}
	n = process_vm_readv(jobs[0].tid, &local, 1, remote, k, 0);
	for (i = 0; i < k && n >= 0 && off + remote[i].iov_len <= (size_t)n; i++) {
		const uint64_t *words = chunk + off / sizeof(uint64_t);

		jobs[i].bytes = remote[i].iov_len;
		jobs[i].r = stackcheck_scan_words(words, remote[i].iov_len / sizeof(uint64_t),
						  b->spans, b->nspans, &jobs[i].pc, NULL) ? 1 : 0;
		off += remote[i].iov_len;
	}
	for (; i < k; i++)
		scan(b, &jobs[i], chunk);
}

/*
 * Claims the batch's next jobs - as many small ones as fit one chunk, or
 * one large one - and copies them to jobs: how many, 0 if none.  A queued
 * job's tid, lo and hi never change, so they are read before the claim is
 * certain.
 */
static size_t claim(struct scanwork_batch *b, struct scanwork_job *jobs, size_t *ret_first)
{
	size_t n = atomic_load_explicit(&b->n, memory_order_acquire);
	size_t first = atomic_load_explicit(&b->next, memory_order_relaxed);
	size_t k;

	do {
		size_t bytes = 0;

		for (k = 0; first + k < n && k < BATCH_JOBS; k++) {
			size_t len = job_bytes(job_at(b, first + k));
			/* Large (read in chunks), or not whole words (the next would not be aligned). */
			bool alone = len > CHUNK_BYTES || len % sizeof(uint64_t);

			if (k > 0 && (alone || bytes + len > CHUNK_BYTES))
				break;
			bytes += len;
			if (alone) {
				k++;
				break;
			}
		}
		if (k == 0)
			return 0;
	} while (!atomic_compare_exchange_weak_explicit(&b->next, &first, first + k,
							memory_order_relaxed, memory_order_relaxed));
	for (size_t i = 0; i < k; i++) {
		const struct scanwork_job *j = job_at(b, first + i);

		jobs[i] = (struct scanwork_job){ .tid = j->tid, .lo = j->lo, .hi = j->hi };
	}
	*ret_first = first;
	return k;
}

static void scan_claimed(const struct scanwork_batch *b, struct scanwork_job *jobs, size_t k,
			 uint64_t *chunk)
{
	if (k == 1)
		scan(b, &jobs[0], chunk);
	else
		scan_many(b, jobs, k, chunk);
}

/*
 * Under the lock: the verdicts of claimed jobs, back in their places.
 * Only the verdicts: the other thread may be reading tid, lo and hi of the
 * same jobs for a claim that is about to fail.
 */
static void store_claimed(struct scanwork_batch *b, const struct scanwork_job *jobs, size_t k,
			  size_t first)
{
	for (size_t i = 0; i < k; i++) {
		struct scanwork_job *j = job_at(b, first + i);

		j->r = jobs[i].r;
		j->pc = jobs[i].pc;
		j->bytes = jobs[i].bytes;
	}
	b->done += k;
}

static bool has_jobs(const struct scanwork_batch *b)
{
	return atomic_load(&b->next) < atomic_load(&b->n);
}

static void *worker(void *arg)
{
	struct scanwork_job jobs[BATCH_JOBS];

	(void)arg;
	pthread_mutex_lock(&lock);
	for (;;) {
		struct scanwork_batch *b = current;
		size_t first, k = b ? claim(b, jobs, &first) : 0;

		if (k > 0) {
			/* b lives on: its done stays short of n until these are stored. */
			pthread_mutex_unlock(&lock);
			scan_claimed(b, jobs, k, worker_chunk);
			pthread_mutex_lock(&lock);
			store_claimed(b, jobs, k, first);
			if (b->abandoned && b->done == atomic_load(&b->n)) {
				current = NULL;
				batch_free(b);
			} else if (caller_waiting) {
				pthread_cond_broadcast(&finished);
			}
			continue;
		}
		/* Going to sleep: say so, then look once more (see the top). */
		atomic_store(&worker_idle, true);
		if (b && has_jobs(b)) {
			atomic_store(&worker_idle, false);
			continue;
		}
		pthread_cond_wait(&work, &lock);
	}
	return NULL;
}

/* Wakes the worker if it sleeps (or is about to); nothing otherwise. */
static void wake_worker(void)
{
	if (!atomic_exchange(&worker_idle, false))
		return;
	pthread_mutex_lock(&lock);
	pthread_cond_signal(&work);
	pthread_mutex_unlock(&lock);
}

/* Starts the worker once, with every signal blocked; false if it cannot run. */
static bool worker_running(void)
{
	pthread_condattr_t ca;
	sigset_t all, old;
	pthread_t t;
	int r;

	if (started || failed)
		return started;
	worker_chunk = malloc(CHUNK_BYTES);
	if (!worker_chunk || pthread_condattr_init(&ca) != 0 ||
	    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC) != 0 || pthread_cond_init(&finished, &ca) != 0) {
		failed = true;
		return false;
	}
	pthread_condattr_destroy(&ca);
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	r = pthread_create(&t, NULL, worker, NULL);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (r != 0) {
		failed = true;
		log_msg(LOG_WARNING, "cannot start the stack scan thread (%s); stacks are scanned on the main thread",
			strerror(r));
		return false;
	}
	pthread_detach(t);
	started = true;
	return true;
}

int scanwork_begin(const struct stackcheck_span *spans, size_t nspans, struct scanwork_batch **ret)
{
	struct scanwork_batch *b;

	if (nspans > sizeof(b->spans) / sizeof(b->spans[0]) || !worker_running())
		return -EAGAIN;
	b = calloc(1, sizeof(*b));
	if (!b)
		return -ENOMEM;
	b->blocks[0] = calloc(BLOCK_JOBS, sizeof(*b->blocks[0]));
	if (!b->blocks[0]) {
		free(b);
		return -ENOMEM;
	}
	memcpy(b->spans, spans, nspans * sizeof(*spans));
	b->nspans = nspans;
	pthread_mutex_lock(&lock);
	if (current) {
		/* The worker is still on an abandoned batch. */
		pthread_mutex_unlock(&lock);
		batch_free(b);
		return -EAGAIN;
	}
	current = b;
	pthread_mutex_unlock(&lock);
	*ret = b;
	return 0;
}

bool scanwork_submit(struct scanwork_batch *b, pid_t tid, uint64_t lo, uint64_t hi)
{
	size_t i = atomic_load_explicit(&b->n, memory_order_relaxed);   /* ours alone */
	struct scanwork_job **block = &b->blocks[i / BLOCK_JOBS];

	if (i / BLOCK_JOBS >= MAX_BLOCKS)
		return false;
	if (!*block && !(*block = calloc(BLOCK_JOBS, sizeof(**block))))
		return false;
	(*block)[i % BLOCK_JOBS] = (struct scanwork_job){ .tid = tid, .lo = lo, .hi = hi };
	/* Sequentially consistent, as the read of worker_idle after it (see the top). */
	atomic_store(&b->n, i + 1);
	/* A wake-up is a system call: one per few scans, and one in scanwork_wait(). */
	if (i + 1 - atomic_load(&b->next) >= WAKE_AFTER)
		wake_worker();
	return true;
}

static bool before(const struct timespec *deadline)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	return now.tv_sec < deadline->tv_sec ||
	       (now.tv_sec == deadline->tv_sec && now.tv_nsec < deadline->tv_nsec);
}

int scanwork_wait(struct scanwork_batch *b, const struct timespec *deadline)
{
	/* The caller's own buffer: it scans beside the worker rather than wait. */
	static uint64_t *chunk;
	struct scanwork_job jobs[BATCH_JOBS];
	size_t first, k, n = atomic_load(&b->n);
	int r = 0;

	if (!chunk)
		chunk = malloc(CHUNK_BYTES);
	if (has_jobs(b))
		wake_worker();
	while (chunk && before(deadline) && (k = claim(b, jobs, &first)) > 0) {
		scan_claimed(b, jobs, k, chunk);
		pthread_mutex_lock(&lock);
		store_claimed(b, jobs, k, first);
		pthread_mutex_unlock(&lock);
	}
	pthread_mutex_lock(&lock);
	caller_waiting = true;
	while (b->done < n)
		if (pthread_cond_timedwait(&finished, &lock, deadline) == ETIMEDOUT && b->done < n) {
			r = -ETIMEDOUT;
			break;
		}
	caller_waiting = false;
	pthread_mutex_unlock(&lock);
	return r;
}

size_t scanwork_count(const struct scanwork_batch *b)
{
	return atomic_load(&b->n);
}

const struct scanwork_job *scanwork_job(const struct scanwork_batch *b, size_t i)
{
	return job_at(b, i);
}

void scanwork_end(struct scanwork_batch *b)
{
	bool left = false;

	if (!b)
		return;
	pthread_mutex_lock(&lock);
	if (b->done == atomic_load(&b->n)) {
		if (current == b)
			current = NULL;
		batch_free(b);
	} else {
		/* The worker frees it after its last scan: wake it for the
		 * jobs nobody claimed, or it would sleep on them, and every
		 * later batch would be refused. */
		b->abandoned = true;
		left = has_jobs(b);
	}
	pthread_mutex_unlock(&lock);
	if (left)
		wake_worker();
}
