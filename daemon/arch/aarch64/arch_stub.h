/* SPDX-License-Identifier: MIT */
/*
 * aarch64: the guard stub and the landing pads it must keep, as bytes
 * (A64 instructions are 32-bit little-endian words).  Pure data with no
 * system headers, so stub.c (and its unit test) builds for this table on
 * any host.
 */
#ifndef BTGUARD_ARCH_STUB_H
#define BTGUARD_ARCH_STUB_H

/*
 * The guard: "mov w0, #0; ret" (0x52800000, 0xd65f03c0).  backtrace()
 * returns int in w0; zero frames is a valid answer.  ret branches to x30,
 * which the caller's bl set, so the stub needs no stack and no frame.
 *
 * The two instructions travel in one ptrace word that starts at the stub,
 * so a target sees both or neither.  When the stub starts at an address
 * that is 4 mod 8 (an entry 8-aligned with a landing pad before the stub,
 * or an entry 4 mod 8 without one), that word is not 8-aligned.  We accept
 * this rather than split the stub over two aligned words, which would let
 * a failed second write leave "mov w0, #0" followed by the original code:
 *  - PTRACE_POKETEXT takes any address on arm64 (the kernel copies the
 *    bytes into the page and does the I-cache maintenance itself);
 *  - every thread is stopped while we write, so no thread can fetch a
 *    half-written pair (ARM ARM "concurrent modification and execution"
 *    only concerns running threads);
 *  - the word lies inside the one executable mapping that holds the
 *    function (sites.c bounds it by the segment), so even across a page
 *    boundary both pages belong to the same mapping, and the write is
 *    verified and undone if it does not read back (patch.c).
 * Moving the word to entry-4 to align it would carry only "mov w0, #0",
 * with "ret" in the next word: that is the split we avoid.
 */
#define ARCH_PLAIN_STUB  { 0x00, 0x00, 0x80, 0x52, 0xc0, 0x03, 0x5f, 0xd6 }
#define ARCH_STUB_BYTES  ARCH_PLAIN_STUB
#define ARCH_STUB_LEN    8u

/*
 * Landing pads kept as the first instruction, the stub right after.  With
 * BTI (-mbranch-protection=bti or standard) a function reached by an
 * indirect branch, as every PLT call (br x16/x17) is, must begin with a
 * compatible landing pad or the caller takes SIGILL (tried: overwriting the
 * pad kills a target whose library is mapped PROT_BTI); so the pad stays.
 *  - bti c (and the other BTI forms): a pure landing pad, the plain stub.
 *  - paciasp / pacibsp (pac-ret; also implicit BTI c landing pads): the
 *    kept pad *runs* and signs x30 in place, inserting a PAC into its top
 *    bits.  A plain "ret" would then branch to a non-canonical address and
 *    fault (tried under qemu -cpu max: the target dies), so after these
 *    pads the stub returns with "retaa" / "retab", which authenticates x30
 *    against the same SP (unchanged: the stub touches neither SP nor x30)
 *    and strips the PAC.  Nothing else is
 *    needed for PAC: the stub never stores, reloads or re-signs x30.
 *    retaa/retab exist only with FEAT_PAuth (HWCAP_PACA); without it
 *    paciasp is a NOP hint and the plain stub is right, so these entries
 *    name the CPU feature their stub needs (arch_cpu_features()).  With
 *    the key disabled by prctl, paciasp and retaa both pass x30 through.
 * Each entry: { pad, feature its stub needs, stub with that feature }.
 */
#define ARCH_FEATURE_PAUTH 1u

#define ARCH_LANDING_PAD_LEN 4u
#define ARCH_LANDING_PADS { \
	{ { 0x5f, 0x24, 0x03, 0xd5 }, 0, ARCH_PLAIN_STUB },       /* bti c */   \
	{ { 0x1f, 0x24, 0x03, 0xd5 }, 0, ARCH_PLAIN_STUB },       /* bti */     \
	{ { 0x9f, 0x24, 0x03, 0xd5 }, 0, ARCH_PLAIN_STUB },       /* bti j */   \
	{ { 0xdf, 0x24, 0x03, 0xd5 }, 0, ARCH_PLAIN_STUB },       /* bti jc */  \
	{ { 0x3f, 0x23, 0x03, 0xd5 }, ARCH_FEATURE_PAUTH,                       \
	  { 0x00, 0x00, 0x80, 0x52, 0xff, 0x0b, 0x5f, 0xd6 } },   /* paciasp: mov w0, #0; retaa */ \
	{ { 0x7f, 0x23, 0x03, 0xd5 }, ARCH_FEATURE_PAUTH,                       \
	  { 0x00, 0x00, 0x80, 0x52, 0xff, 0x0f, 0x5f, 0xd6 } },   /* pacibsp: mov w0, #0; retab */ \
}

/* The unit PTRACE_PEEKTEXT / POKETEXT move, in bytes. */
#define ARCH_WORD_LEN    8u

#endif
