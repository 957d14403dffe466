/* SPDX-License-Identifier: MIT */
/*
 * The machine's memcmp bandwidth, for ci/self-bench.sh: best of 5 passes
 * comparing two equal buffers of each size given (bytes), each pass
 * 256 MB of compared target bytes; prints "<size> <GB/s>" per size. The
 * last byte of one buffer changes per call so no call can be elided.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
	volatile int sink = 0;

	for (int k = 1; k < argc; k++) {
		size_t n = strtoull(argv[k], NULL, 0);
		char *a = malloc(n), *b = malloc(n);
		double best = 0;

		if (!a || !b || n == 0)
			return 1;
		memset(a, 7, n);
		memset(b, 7, n);
		for (int rep = 0; rep < 5; rep++) {
			size_t calls = ((size_t)256 << 20) / n + 1;
			double t = now();

			for (size_t i = 0; i < calls; i++) {
				b[n - 1] = (char)i;
				sink += memcmp(a, b, n) > 0;
			}
			t = now() - t;
			if ((double)n * calls / t / 1e9 > best)
				best = (double)n * calls / t / 1e9;
		}
		printf("%zu %.2f\n", n, best);
		free(a);
		free(b);
	}
	return 0;
}
