/* SPDX-License-Identifier: MIT */
/* Hostile guests for `hypclear selftest --hostile` (guest/aarch64/hostile/); not in the alias table. */
