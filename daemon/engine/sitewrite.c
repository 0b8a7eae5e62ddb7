// SPDX-License-Identifier: MIT
/*
 * The writer: patch.c's step 4g, and exec.c's whole write at an exec.
 * Each site's bytes that differ from what the stopped world's read found
 * (site_write_plan(), sites.c, built once) go in with one ptrace word (a
 * breakpoint on the byte a guard inside an instruction keeps: a second;
 * aarch64's 12-byte fallback: one pwrite, ptrace.c), are read back, and on any
 * failure every site written is put back as it was.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "log.h"
#include "proto.h"
#include "ptrace.h"
#include "sites.h"
#include "sitewrite.h"
#include "walk.h"

/*
 * Writes want[lo, hi) over a site whose bytes are now[] through tid, and
 * reads them back: 0, or why not.  Up to a word is one PTRACE_POKETEXT (of
 * the word from lo, or ending at the context's end, its other bytes as they
 * are); a longer range (aarch64's fallback undo and stub) is one ptrace_poke_bytes(),
 * so a daemon killed meanwhile never leaves part of it.  now[] is updated.
 */
static int write_range(pid_t tid, const struct site *s, uint8_t *now, const uint8_t *want,
		       size_t lo, size_t hi)
{
	size_t at = lo;
	int r;

	if (lo == hi)
		return 0;
	if (hi - lo <= ARCH_WORD_LEN && s->ctx_len >= ARCH_WORD_LEN) {
		uint8_t word[ARCH_WORD_LEN];
		uint64_t w;

		if (at + ARCH_WORD_LEN > s->ctx_len)
			at = s->ctx_len - ARCH_WORD_LEN;
		memcpy(word, now + at, ARCH_WORD_LEN);
		memcpy(word + (lo - at), want + lo, hi - lo);
		memcpy(&w, word, sizeof(w));
		r = ptrace_poke_word(tid, s->addr + at, w);
	} else {
		r = ptrace_poke_bytes(tid, s->addr + lo, want + lo, hi - lo);
	}
	memcpy(now + lo, want + lo, hi - lo);
	/* Read back word by word, none past the context (stub_plan() made it a word at least). */
	for (size_t k = lo; r == 0 && k < hi; k += ARCH_WORD_LEN) {
		uint8_t got[ARCH_WORD_LEN];
		uint64_t w;

		at = k + ARCH_WORD_LEN > s->ctx_len ? s->ctx_len - ARCH_WORD_LEN : k;
		r = ptrace_peek_word(tid, s->addr + at, &w);
		memcpy(got, &w, sizeof(got));
		for (size_t j = k; r == 0 && j < k + ARCH_WORD_LEN && j < hi; j++)
			if (got[j - at] != want[j])
				r = -BTG_ERR_VERIFY;
	}
	return r;
}

/*
 * Writes the entry of s to its guarded (or original) form (guarded false
 * and back true: puts back what s->mem held, over the same bytes) through
 * tid, verifying it.  The bytes past the kept ones first, then a kept one
 * a breakpoint sits on: where the guard lies inside an instruction, each
 * of the four mixes is safe (SECURITY.md), so two words never leave a
 * crash behind.
 */
static int write_entry(pid_t tid, const struct site *s, bool guarded, bool back)
{
	uint8_t now[SITE_CTX_LEN];
	struct site_write w;
	int r;

	site_write_plan(s, guarded, &w);
	if (back) {
		memcpy(now, w.want, s->ctx_len);
		memcpy(w.want, s->mem, s->ctx_len);
	} else {
		memcpy(now, s->mem, s->ctx_len);
	}
	r = write_range(tid, s, now, w.want, w.lo, w.hi);
	if (r == 0)
		r = write_range(tid, s, now, w.want, w.kept_lo, w.kept_hi);
	return r;
}

/*
 * The words of [addr, addr + len) (addr 8-aligned, len whole words) where
 * want differs from was, poked and read back: the walk's code.
 */
static int write_words(pid_t tid, uint64_t addr, const uint8_t *was, const uint8_t *want,
		       size_t len)
{
	for (size_t k = 0; k < len; k += ARCH_WORD_LEN) {
		uint64_t w, got;
		int r;

		if (!memcmp(was + k, want + k, ARCH_WORD_LEN))
			continue;
		memcpy(&w, want + k, sizeof(w));
		r = ptrace_poke_word(tid, addr + k, w);
		if (r == 0)
			r = ptrace_peek_word(tid, addr + k, &got);
		if (r == 0 && got != w)
			r = -BTG_ERR_VERIFY;
		if (r < 0)
			return r;
	}
	return 0;
}

/*
 * want[0, n) over the bytes at addr (n < a word: the bytes in backtrace()
 * that name the walk), in one word whose other bytes are read first and
 * kept, then read back.
 */
static int write_short(pid_t tid, uint64_t addr, const uint8_t *want, size_t n)
{
	uint8_t word[ARCH_WORD_LEN];
	uint64_t w, got;
	int r = ptrace_peek_word(tid, addr, &w);

	if (r < 0)
		return r;
	memcpy(word, &w, sizeof(word));
	if (!memcmp(word, want, n))
		return 0;
	memcpy(word, want, n);
	memcpy(&w, word, sizeof(w));
	r = ptrace_poke_word(tid, addr, w);
	if (r == 0)
		r = ptrace_peek_word(tid, addr, &got);
	return r == 0 && got != w ? -BTG_ERR_VERIFY : r;
}

/*
 * The walk of s to ours (or the file's; back: what s->walk's *_mem held,
 * over the same bytes).  The order keeps every moment crash-free: the
 * code is whole before the bytes in backtrace() name it; taking it away,
 * those bytes name glibc's helper again in one write, and the code goes
 * in a later one, once no thread can still call it (walk.h).
 */
static int write_walk(pid_t tid, const struct site *s, bool ours, bool back)
{
	const struct site_walk *w = &s->walk;
	uint8_t code[WALK_CODE_MAX];
	bool draining = !ours && walk_draining(s);
	int r = 0;

	if (!w->planned)
		return 0;
	memset(code, 0, sizeof(code));
	if (ours)
		memcpy(code, w->code_ours, w->code_len);
	if (back) {
		if (ours || draining)
			r = write_short(tid, w->call, w->call_mem, ARCH_WALK_CALL_LEN);
		if (r == 0 && !draining)
			r = write_words(tid, w->code, code, w->code_mem, w->code_len);
		return r;
	}
	if (ours) {
		r = write_words(tid, w->code, w->code_mem, code, w->code_len);
		return r ? r : write_short(tid, w->call, w->call_ours, ARCH_WALK_CALL_LEN);
	}
	if (draining)
		return write_short(tid, w->call, w->call_orig, ARCH_WALK_CALL_LEN);
	return write_words(tid, w->code, w->code_mem, code, w->code_len);
}

/* What s's walk holds after a write to form (write_walk()), as if read again. */
static void walk_written(struct site *s, enum site_form form)
{
	struct site_walk *w = &s->walk;

	if (!w->planned)
		return;
	if (form == SITE_FORM_WALK) {
		memcpy(w->call_mem, w->call_ours, ARCH_WALK_CALL_LEN);
		memcpy(w->code_mem, w->code_ours, w->code_len);
	} else if (walk_draining(s)) {
		memcpy(w->call_mem, w->call_orig, ARCH_WALK_CALL_LEN);
	} else {
		memset(w->code_mem, 0, w->code_len);
	}
	walk_classify(s);
}

/*
 * s to form (back: as the stopped world's read found it, after a write to
 * form).  What guards is written before what it replaces goes: to the
 * walk, the walk then the entry back; to the stub or the file's, the
 * entry then the walk.  So a daemon stopped between the two leaves the
 * process guarded by either, or both.
 */
static int write_site(pid_t tid, const struct site *s, enum site_form form, bool back)
{
	bool walk = form == SITE_FORM_WALK, stub = form == SITE_FORM_STUB;
	int r;

	if (walk != back) {
		r = write_walk(tid, s, walk, back);
		return r ? r : write_entry(tid, s, stub, back);
	}
	r = write_entry(tid, s, stub, back);
	return r ? r : write_walk(tid, s, walk, back);
}

int sitewrite_all(pid_t pid, pid_t tid, struct site_list *sites, bool guard, bool walk,
		  char *why, size_t why_len)
{
	int r = 0;
	size_t i;

	for (i = 0; i < sites->n; i++) {
		struct site *s = &sites->v[i];

		if (!site_wants_write(site_form(guard, walk, s), s))
			continue;
		r = write_site(tid, s, site_form(guard, walk, s), false);
		if (r == -ESRCH)  /* the thread we write through was killed while held */
			r = -BTG_ERR_GONE;
		if (r < 0) {
			snprintf(why, why_len, "writing %s at 0x%" PRIx64 ": %s", s->object,
				 site_change_lo(s), proto_strerror(r));
			break;
		}
	}
	if (r == 0) {
		/* What the sites hold now, should the target die before the re-read. */
		for (i = 0; i < sites->n; i++) {
			struct site *s = &sites->v[i];

			enum site_form form = site_form(guard, walk, s);

			if (!site_wants_write(form, s))
				continue;
			s->state = guard ? PROTO_SITE_GUARDED : PROTO_SITE_ORIGINAL;
			s->entry_state = form == SITE_FORM_STUB ? PROTO_SITE_GUARDED :
								  PROTO_SITE_ORIGINAL;
			walk_written(s, form);
		}
		return 0;
	}
	/*
	 * Undo in reverse, the failing site included (its poke may have landed
	 * before the read-back failed or differed): the process must end up
	 * fully as it was, each site's bytes as the stopped world's read found
	 * them.  Writing them again where nothing landed is harmless.
	 * An undo that fails is a broken promise: keep undoing the others, and
	 * say so loudly.
	 */
	for (size_t j = i + 1; j-- > 0;) {
		struct site *s = &sites->v[j];
		/* The states still say what was planned. */
		bool wrote = site_wants_write(site_form(guard, walk, s), s);
		int u;

		if (!wrote)
			continue;
		u = write_site(tid, s, site_form(guard, walk, s), true);
		/* Killed meanwhile: its memory went with it, nothing is left half-patched. */
		if (u == -ESRCH)
			continue;
		if (u < 0 && r != -BTG_ERR_INTERNAL) {
			size_t len = strlen(why);

			snprintf(why + len, why_len - len, "; restoring %s at 0x%" PRIx64 " failed too: %s",
				 s->object, site_change_lo(s), proto_strerror(u));
			log_msg(LOG_CRIT, "process %d left with %s at 0x%" PRIx64 " neither original nor guarded",
				pid, s->object, site_change_lo(s));
			r = -BTG_ERR_INTERNAL;
		}
	}
	return r;
}
