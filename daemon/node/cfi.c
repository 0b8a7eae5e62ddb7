// SPDX-License-Identifier: MIT
/*
 * .eh_frame's records, decoded only as far as finding one instruction
 * needs: the search table of .eh_frame_hdr, a CIE's augmentation (for the
 * FDE's pointer encoding and where the programs start), and every
 * instruction's operands (so an operand byte is never taken for an
 * opcode).  The bytes come from a target and are treated as hostile:
 * every read is bounded by its record, every count by a maximum.
 */
#include <errno.h>
#include <stdbool.h>
#include <string.h>

#include "cfi.h"

/* DWARF's pointer encodings (the low nibble: the format). */
#define PE_OMIT    0xffu
#define PE_ABSPTR  0x00u
#define PE_ULEB    0x01u
#define PE_UDATA2  0x02u
#define PE_UDATA4  0x03u
#define PE_UDATA8  0x04u
#define PE_SLEB    0x09u
#define PE_SDATA2  0x0au
#define PE_SDATA4  0x0bu
#define PE_SDATA8  0x0cu

/* A bounded read position in one record or program. */
struct cur {
	const uint8_t *p;
	size_t len, at;
};

static int skip(struct cur *c, size_t n)
{
	if (n > c->len - c->at)
		return -EINVAL;
	c->at += n;
	return 0;
}

static int byte(struct cur *c, uint8_t *ret)
{
	if (c->at >= c->len)
		return -EINVAL;
	*ret = c->p[c->at++];
	return 0;
}

/* An unsigned LEB128 (a signed one has the same length): at most 10 bytes. */
static int leb(struct cur *c, uint64_t *ret)
{
	uint64_t v = 0;

	for (unsigned shift = 0; shift < 70; shift += 7) {
		uint8_t b;

		if (byte(c, &b) < 0)
			return -EINVAL;
		if (shift < 64)
			v |= (uint64_t)(b & 0x7fu) << shift;
		if (!(b & 0x80u)) {
			*ret = v;
			return 0;
		}
	}
	return -EINVAL;
}

static int skip_leb(struct cur *c)
{
	uint64_t v;

	return leb(c, &v);
}

/* A pointer of encoding enc: its bytes skipped. */
static int skip_pointer(struct cur *c, uint8_t enc)
{
	if (enc == PE_OMIT)
		return 0;
	switch (enc & 0x0fu) {
	case PE_ABSPTR: case PE_UDATA8: case PE_SDATA8: return skip(c, 8);
	case PE_UDATA4: case PE_SDATA4: return skip(c, 4);
	case PE_UDATA2: case PE_SDATA2: return skip(c, 2);
	case PE_ULEB: case PE_SLEB: return skip_leb(c);
	default: return -EINVAL;
	}
}

/* Operands of each opcode of the extended range (0x00-0x3f), in LEB128s and fixed bytes. */
static int skip_operands(struct cur *c, uint8_t op, uint8_t fde_enc)
{
	uint64_t n;

	switch (op) {
	case 0x00: case 0x0a: case 0x0b:       /* nop, remember_state, restore_state */
	case 0x2d:                             /* GNU_window_save / AARCH64_negate_ra_state */
		return 0;
	case 0x01:                             /* set_loc */
		return skip_pointer(c, fde_enc & 0x0fu);
	case 0x02: return skip(c, 1);          /* advance_loc1 */
	case 0x03: return skip(c, 2);          /* advance_loc2 */
	case 0x04: return skip(c, 4);          /* advance_loc4 */
	case 0x06: case 0x07: case 0x08:       /* restore_extended, undefined, same_value */
	case 0x0d: case 0x0e: case 0x13:       /* def_cfa_register, def_cfa_offset(_sf) */
	case 0x2e:                             /* GNU_args_size */
		return skip_leb(c);
	case 0x05: case 0x09: case 0x0c:       /* offset_extended, register, def_cfa */
	case 0x11: case 0x12: case 0x14:       /* offset_extended_sf, def_cfa_sf, val_offset */
	case 0x15: case 0x2f:                  /* val_offset_sf, GNU_negative_offset_extended */
		return skip_leb(c) < 0 ? -EINVAL : skip_leb(c);
	case 0x0f:                             /* def_cfa_expression: a block */
		return leb(c, &n) < 0 || n > c->len ? -EINVAL : skip(c, (size_t)n);
	case 0x10: case 0x16:                  /* expression, val_expression: register, block */
		if (skip_leb(c) < 0 || leb(c, &n) < 0 || n > c->len)
			return -EINVAL;
		return skip(c, (size_t)n);
	default:
		return -EINVAL;
	}
}

int cfi_program_find_op(const uint8_t *prog, size_t len, uint8_t fde_enc, uint8_t op,
			size_t *out, size_t max, size_t *ret_n)
{
	struct cur c = { .p = prog, .len = len };
	size_t n = 0;

	while (c.at < c.len) {
		size_t at = c.at;
		uint8_t b = prog[c.at++];

		if (b & 0xc0u) {                       /* advance_loc, restore: none; offset: one */
			if ((b & 0xc0u) == 0x80u && skip_leb(&c) < 0)
				return -EINVAL;
			continue;
		}
		if (b == op) {
			if (n == max)
				return -E2BIG;
			out[n++] = at;
		}
		if (skip_operands(&c, b, fde_enc) < 0)
			return -EINVAL;
	}
	*ret_n = n;
	return 0;
}

/*
 * Reads the whole record at addr (its 4-byte length first; the 64-bit
 * form and the terminator are refused) into buf: its length with the
 * length field in *ret_len.
 */
static int read_record(cfi_read_fn *read, void *ctx, uint64_t addr, uint8_t buf[CFI_RECORD_MAX],
		       size_t *ret_len)
{
	uint32_t len;

	if (read(ctx, addr, &len, sizeof(len)) < 0)
		return -EFAULT;
	if (len < 4 || len > CFI_RECORD_MAX - 4)
		return -EINVAL;
	if (read(ctx, addr, buf, 4 + (size_t)len) < 0)
		return -EFAULT;
	*ret_len = 4 + (size_t)len;
	return 0;
}

struct cie {
	size_t insns;          /* where its initial instructions start */
	uint8_t fde_enc;       /* 'R' (absptr without one) */
	bool sized;            /* 'z': an FDE carries its augmentation's length */
};

static int parse_cie(const uint8_t *rec, size_t len, struct cie *ret)
{
	struct cur c = { .p = rec, .len = len, .at = 8 };
	const char *aug;
	size_t aug_len;
	uint8_t version, b;
	uint64_t n;

	memset(ret, 0, sizeof(*ret));
	if (len < 9 || memcmp(rec + 4, "\0\0\0\0", 4) || byte(&c, &version) < 0 ||
	    (version != 1 && version != 3))
		return -EINVAL;
	aug = (const char *)rec + c.at;
	aug_len = strnlen(aug, len - c.at);
	if (skip(&c, aug_len + 1) < 0)
		return -EINVAL;
	if (skip_leb(&c) < 0 || skip_leb(&c) < 0)        /* code and data alignment */
		return -EINVAL;
	if (version == 1 ? byte(&c, &b) < 0 : skip_leb(&c) < 0)   /* return address column */
		return -EINVAL;
	if (aug_len == 0) {
		ret->insns = c.at;
		return 0;
	}
	if (aug[0] != 'z' || leb(&c, &n) < 0 || n > c.len - c.at)
		return -EINVAL;
	ret->sized = true;
	ret->insns = c.at + (size_t)n;
	c.len = ret->insns;        /* the augmentation's data, bounded by its length */
	for (size_t i = 1; i < aug_len; i++) {
		switch (aug[i]) {
		case 'R':
			if (byte(&c, &ret->fde_enc) < 0)
				return -EINVAL;
			break;
		case 'P':
			if (byte(&c, &b) < 0 || skip_pointer(&c, b) < 0)
				return -EINVAL;
			break;
		case 'L':
			if (skip(&c, 1) < 0)
				return -EINVAL;
			break;
		case 'S': case 'B': case 'G':   /* signal frame, B key, tagged stack: no data */
			break;
		default:
			return -EINVAL;
		}
	}
	return 0;
}

int cfi_find_op(cfi_read_fn *read, void *ctx, uint64_t fde, uint8_t op, uint64_t *out,
		size_t max, size_t *ret_n)
{
	uint8_t rec[CFI_RECORD_MAX];
	size_t len, n = 0, found, offs[64];
	uint32_t cie_ptr;
	uint64_t cie_addr, insns_at;
	struct cie cie;
	struct cur c;
	int r;

	/* The CIE first: it says how the FDE is encoded. */
	if ((r = read_record(read, ctx, fde, rec, &len)) < 0)
		return r;
	memcpy(&cie_ptr, rec + 4, sizeof(cie_ptr));
	if (cie_ptr == 0 || cie_ptr > fde + 4)
		return -EINVAL;
	cie_addr = fde + 4 - cie_ptr;
	if ((r = read_record(read, ctx, cie_addr, rec, &len)) < 0 ||
	    (r = parse_cie(rec, len, &cie)) < 0)
		return r < 0 ? r : -EINVAL;
	for (int which = 0; which < 2; which++) {
		if (which == 0) {
			insns_at = cie.insns;
		} else {
			if ((r = read_record(read, ctx, fde, rec, &len)) < 0)
				return r;
			c = (struct cur){ .p = rec, .len = len, .at = 8 };
			/* pc_begin and pc_range, then the augmentation's data. */
			if (skip_pointer(&c, cie.fde_enc) < 0 || skip_pointer(&c, cie.fde_enc & 0x0fu) < 0)
				return -EINVAL;
			if (cie.sized) {
				uint64_t aug;

				if (leb(&c, &aug) < 0 || aug > c.len || skip(&c, (size_t)aug) < 0)
					return -EINVAL;
			}
			insns_at = c.at;
		}
		r = cfi_program_find_op(rec + insns_at, len - insns_at, cie.fde_enc, op, offs,
					sizeof(offs) / sizeof(offs[0]), &found);
		if (r < 0)
			return r;
		if (found > max - n)
			return -E2BIG;
		for (size_t i = 0; i < found; i++)
			out[n++] = (which == 0 ? cie_addr : fde) + insns_at + offs[i];
	}
	*ret_n = n;
	return 0;
}

int cfi_fde_for(cfi_read_fn *read, void *ctx, uint64_t hdr, uint64_t table, uint64_t count,
		uint64_t ip, uint64_t *ret_fde)
{
	uint64_t lo = 0, hi = count;
	int32_t pair[2];
	bool found = false;

	/* The last pair whose start is not above ip. */
	while (lo < hi) {
		uint64_t mid = lo + (hi - lo) / 2;

		if (read(ctx, table + 8 * mid, pair, sizeof(pair)) < 0)
			return -EFAULT;
		if (hdr + (uint64_t)(int64_t)pair[0] <= ip) {
			found = true;
			*ret_fde = hdr + (uint64_t)(int64_t)pair[1];
			lo = mid + 1;
		} else {
			hi = mid;
		}
	}
	return found ? 0 : -ENOENT;
}
