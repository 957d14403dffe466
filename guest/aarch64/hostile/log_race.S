/* SPDX-License-Identifier: MIT */
/*
 * Hostile guest for `hypclear selftest --hostile`:
 * two vCPUs log at once while each scribbles over the other's log buffer.
 *
 * void *hostile_log_race(void *peer_log_buf, unsigned long rounds, size_t)
 * (the host passes the other vCPU's MB_LOG_BUF address and the number of
 * logs, see crates/check/src/hostile.rs)
 *
 * Algorithm, `rounds` times: fill the own log buffer with 128 x U+00E9
 * (valid UTF-8, 0xc3 0xa9), then overwrite the peer's first 256 bytes
 * eight times with 0x80 0x1b (a lone continuation byte and ESC) while the
 * host may be copying the peer's log out, then ring HC_LOG with 256
 * bytes. What the host prints of either log may be torn: it must still be
 * valid, sanitized UTF-8 on one bounded line. Returns 0.
 * x9 = mailbox (TPIDRRO_EL0), x16 = doorbell, x17 = hypercall number.
 */
#include "linkage.h"
#include "hypclear_abi.h"
#include "ring.h"

#define RACE_LEN 256

SYM_FUNC_START_SELFTEST(hostile_log_race)
	mrs	x9, tpidrro_el0
	add	x10, x9, #MB_LOG_BUF
	mov	x8, x1
	cbz	x8, 9f
	mov	w12, #0xc3
	mov	w13, #0xa9
	mov	w14, #0x80
	mov	w15, #0x1b
1:	mov	x11, #0
2:	strb	w12, [x10, x11]
	add	x11, x11, #1
	strb	w13, [x10, x11]
	add	x11, x11, #1
	cmp	x11, #RACE_LEN
	b.lo	2b
	mov	x11, #RACE_LEN
	str	x11, [x9, #MB_LOG_LEN]
	mov	x7, #8
3:	mov	x11, #0
4:	strb	w14, [x0, x11]
	add	x11, x11, #1
	strb	w15, [x0, x11]
	add	x11, x11, #1
	cmp	x11, #RACE_LEN
	b.lo	4b
	subs	x7, x7, #1
	b.ne	3b
	dsb	ish
	ldr	x16, =DOORBELL_GPA
	ldr	x17, =HC_LOG
	RING	x17
	subs	x8, x8, #1
	b.ne	1b
9:	mov	x0, #0
	ret
	.ltorg
SYM_FUNC_END(hostile_log_race)
