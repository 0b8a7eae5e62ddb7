/* SPDX-License-Identifier: MIT */
/*
 * x86-64: the guard stub and the landing pads it must keep, as bytes.
 * Pure data with no system headers, so stub.c (and its unit test) builds
 * for any CPU's table on any host.
 */
#ifndef BTGUARD_ARCH_STUB_H
#define BTGUARD_ARCH_STUB_H

/*
 * The guard: "xor eax,eax; ret".  backtrace() returns int in eax; zero
 * frames is a valid answer that every caller (torch's c10::get_backtrace
 * among them) handles.  Three bytes fit in one ptrace word anywhere.
 */
#define ARCH_STUB_BYTES  { 0x31, 0xc0, 0xc3 }
#define ARCH_STUB_LEN    3u

/*
 * With IBT (-fcf-protection), an indirect call must land on endbr64; keep
 * it and put the stub right after it so the function stays a valid target.
 * ARCH_LANDING_PADS lists every pad accepted as a first instruction, each
 * as { pad, CPU feature its stub needs (none), the stub after it }.
 */
#define ARCH_LANDING_PAD_LEN 4u
#define ARCH_LANDING_PADS    { { { 0xf3, 0x0f, 0x1e, 0xfa }, 0, ARCH_STUB_BYTES } /* endbr64 */ }

/* The unit PTRACE_PEEKTEXT / POKETEXT move, in bytes. */
#define ARCH_WORD_LEN    8u

#endif
