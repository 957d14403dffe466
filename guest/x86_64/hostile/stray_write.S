/* SPDX-License-Identifier: MIT */
/*
 * Hostile guest for `hypclear selftest --hostile`:
 * a correct memset plus one byte written 8 MiB past the end.
 *
 * void *hostile_stray_write(void *dst, int c, size_t n)   (memset arguments; the
 * host may pass other addresses, see crates/check/src/hostile.rs)
 *
 * Algorithm: rep stosb over [dst, dst + n), then stores the fill byte
 * at dst + n + 8 MiB (far outside the guards); returns dst.
 */
#include "linkage.h"
#include "hypclear_abi.h"

SYM_FUNC_START_SELFTEST(hostile_stray_write)
	mov	%rdi, %r9
	lea	0x800000(%rdi,%rdx), %r10
	mov	%esi, %eax
	mov	%rdx, %rcx
	rep stosb
	notb	%al
	movb	%al, (%r10)
	mov	%r9, %rax
	ret
SYM_FUNC_END(hostile_stray_write)
