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
 * holds copies of everything it needs, under one mutex.  The main thread
 * fills the batch while it stops the world, the worker empties it, and
 * when the main thread comes to wait it takes the jobs the worker has not
 * started yet (a few large stacks are then scanned two at a time).  A batch whose
 * caller stopped waiting (a deadline, an error) is left to the worker,
 * which frees it when its last scan is done; until then no new batch
 * starts, so a worker held up in a read (a page that must come from swap)
 * never has two batches, and the attempts meanwhile scan on their own.
 * The worker blocks every signal: SIGALRM, SIGCHLD and the rest are the
 * main thread's.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

#include "log.h"
#include "scanwork.h"

#define CHUNK_WORDS 8192
#define WAKE_AFTER 8   /* queued scans that wake the worker */
#define BATCH_JOBS 16  /* scans read with one system call, at most */
#define CHUNK_BYTES (CHUNK_WORDS * sizeof(uint64_t))

struct scanwork_batch {
	struct stackcheck_span spans[SCANWORK_MAX_SPANS];
	size_t nspans;
	struct scanwork_job *jobs;
	size_t cap, n;        /* n queued */
	size_t next;          /* the next one the worker takes */
	size_t done;          /* finished */
	bool abandoned;       /* the caller is gone: the worker frees it */
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t work = PTHREAD_COND_INITIALIZER;   /* a job was queued */
static pthread_cond_t finished;   /* a job was done; on CLOCK_MONOTONIC, as deadlines are */
static struct scanwork_batch *current;   /* the one batch, or NULL */
static bool started, failed;

static void batch_free(struct scanwork_batch *b)
{
	free(b->jobs);
	free(b);
}

/* One scan, outside the lock: reads the range in chunks, stops at a hit. */
static void scan(const struct scanwork_batch *b, struct scanwork_job *j, uint64_t *chunk)
{
	j->bytes = 0;
	j->r = stackcheck_scan_memory(j->tid, j->lo & ~(uint64_t)7, j->hi, chunk, CHUNK_WORDS,
				      b->spans, b->nspans, NULL, NULL, &j->bytes, &j->pc);
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
	struct iovec local = { .iov_base = chunk }, remote[BATCH_JOBS];
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
						  b->spans, b->nspans, &jobs[i].pc) ? 1 : 0;
		off += remote[i].iov_len;
	}
	for (; i < k; i++)
		scan(b, &jobs[i], chunk);
}

/*
 * Takes the batch's next jobs under the lock - as many small ones as fit
 * one chunk, or one large one - scans them outside, stores them: false if
 * none.
 */
static bool scan_next(struct scanwork_batch *b, uint64_t *chunk)
{
	struct scanwork_job jobs[BATCH_JOBS];
	size_t first = b->next, k = 0, bytes = 0;

	while (first + k < b->n && k < BATCH_JOBS) {
		size_t len = job_bytes(&b->jobs[first + k]);
		/* Large (read in chunks), or not whole words (the next would not be aligned). */
		bool alone = len > CHUNK_BYTES || len % sizeof(uint64_t);

		if (k > 0 && (alone || bytes + len > CHUNK_BYTES))
			break;
		bytes += len;
		k++;
		if (alone)
			break;
	}
	if (k == 0)
		return false;
	memcpy(jobs, &b->jobs[first], k * sizeof(*jobs));
	b->next += k;
	pthread_mutex_unlock(&lock);
	if (k == 1)
		scan(b, &jobs[0], chunk);
	else
		scan_many(b, jobs, k, chunk);
	pthread_mutex_lock(&lock);
	memcpy(&b->jobs[first], jobs, k * sizeof(*jobs));
	b->done += k;
	return true;
}

static void *worker(void *arg)
{
	uint64_t *chunk = malloc(CHUNK_WORDS * sizeof(uint64_t));

	(void)arg;
	pthread_mutex_lock(&lock);
	for (;;) {
		struct scanwork_batch *b = current;

		if (!b || b->next == b->n) {
			pthread_cond_wait(&work, &lock);
			continue;
		}
		if (chunk) {
			scan_next(b, chunk);
		} else {
			b->jobs[b->next++].r = -ENOMEM;
			b->done++;
		}
		if (b->abandoned && b->done == b->n) {
			current = NULL;
			batch_free(b);
		}
		pthread_cond_broadcast(&finished);
	}
	return NULL;
}

/* Starts the worker once, with every signal blocked; false if it cannot run. */
static bool worker_running(void)
{
	sigset_t all, old;
	pthread_t t;
	int r;

	if (started || failed)
		return started;
	pthread_condattr_t ca;

	if (pthread_condattr_init(&ca) != 0 || pthread_condattr_setclock(&ca, CLOCK_MONOTONIC) != 0 ||
	    pthread_cond_init(&finished, &ca) != 0) {
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

int scanwork_begin(const struct stackcheck_span *spans, size_t nspans, size_t cap,
		   struct scanwork_batch **ret)
{
	struct scanwork_batch *b;

	*ret = NULL;
	if (nspans > sizeof(b->spans) / sizeof(b->spans[0]) || cap == 0 || !worker_running())
		return -EAGAIN;
	b = calloc(1, sizeof(*b));
	if (!b)
		return -ENOMEM;
	b->jobs = calloc(cap, sizeof(*b->jobs));
	if (!b->jobs) {
		free(b);
		return -ENOMEM;
	}
	memcpy(b->spans, spans, nspans * sizeof(*spans));
	b->nspans = nspans;
	b->cap = cap;
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
	bool queued = false;

	pthread_mutex_lock(&lock);
	if (b->n == b->cap) {
		/* Under the lock: the worker holds no pointer into jobs outside it. */
		struct scanwork_job *v = reallocarray(b->jobs, b->cap * 2, sizeof(*v));

		if (v) {
			b->jobs = v;
			b->cap *= 2;
		}
	}
	if (b->n < b->cap) {
		b->jobs[b->n] = (struct scanwork_job){ .tid = tid, .lo = lo, .hi = hi };
		b->n++;
		queued = true;
		/* A wake-up is a system call: one per few scans, and one in scanwork_wait(). */
		if (b->n - b->next >= WAKE_AFTER)
			pthread_cond_signal(&work);
	}
	pthread_mutex_unlock(&lock);
	return queued;
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
	int r = 0;

	if (!chunk)
		chunk = malloc(CHUNK_WORDS * sizeof(uint64_t));
	pthread_mutex_lock(&lock);
	if (b->next < b->n)
		pthread_cond_signal(&work);
	while (chunk && before(deadline) && scan_next(b, chunk))
		;
	while (b->done < b->n)
		if (pthread_cond_timedwait(&finished, &lock, deadline) == ETIMEDOUT && b->done < b->n) {
			r = -ETIMEDOUT;
			break;
		}
	pthread_mutex_unlock(&lock);
	return r;
}

const struct scanwork_job *scanwork_jobs(const struct scanwork_batch *b, size_t *ret_n)
{
	*ret_n = b->n;
	return b->jobs;
}

void scanwork_end(struct scanwork_batch *b)
{
	if (!b)
		return;
	pthread_mutex_lock(&lock);
	if (b->done == b->n) {
		if (current == b)
			current = NULL;
		batch_free(b);
	} else {
		b->abandoned = true;   /* the worker frees it after its last scan */
	}
	pthread_mutex_unlock(&lock);
}
