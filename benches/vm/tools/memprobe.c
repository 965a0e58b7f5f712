// SPDX-License-Identifier: GPL-2.0
/*
 * memprobe: how fast this (virtual) CPU copies and fills memory, by method,
 * 4 KiB and 256 KiB at a time.  The VM benchmark runs it once per boot:
 * under QEMU TCG `rep movsb` and `rep stosb` are emulated a byte at a time,
 * so which instruction a memcpy or memset picks decides the speed of every
 * user-space data path (a read of zeroes is a memset).
 *
 *   memprobe           one line per method and size: "memprobe METHOD BYTES MB/s"
 */
#include <immintrin.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define ARENA (4u << 20)
#define TOTAL (64u << 20)

/* a copy from src to dst, or a fill of dst with zeroes (src unused) */
typedef void (*copy_fn)(void *dst, const void *src, size_t n);

static double now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec / 1e9;
}

static void copy_glibc(void *dst, const void *src, size_t n)
{
	memcpy(dst, src, n);
}

static void copy_movsb(void *dst, const void *src, size_t n)
{
	asm volatile("rep movsb" : "+D"(dst), "+S"(src), "+c"(n) : : "memory");
}

static void copy_movsq(void *dst, const void *src, size_t n)
{
	n /= 8;
	asm volatile("rep movsq" : "+D"(dst), "+S"(src), "+c"(n) : : "memory");
}

static void copy_sse2(void *dst, const void *src, size_t n)
{
	__m128i *d = dst;
	const __m128i *s = src;
	size_t i;

	for (i = 0; i < n / 16; i++)
		_mm_storeu_si128(d + i, _mm_loadu_si128(s + i));
}

static void fill_glibc(void *dst, const void *src, size_t n)
{
	(void)src;
	memset(dst, 0, n);
}

static void fill_stosb(void *dst, const void *src, size_t n)
{
	(void)src;
	asm volatile("rep stosb" : "+D"(dst), "+c"(n) : "a"(0) : "memory");
}

/* not turned into a memset call by the compiler */
__attribute__((optimize("no-tree-loop-distribute-patterns")))
static void fill_sse2(void *dst, const void *src, size_t n)
{
	__m128i *d = dst;
	size_t i;

	(void)src;
	for (i = 0; i < n / 16; i++)
		_mm_storeu_si128(d + i, _mm_setzero_si128());
}

static void copy_u64(void *dst, const void *src, size_t n)
{
	uint64_t *d = dst;
	const uint64_t *s = src;
	size_t i;

	for (i = 0; i < n / 8; i++)
		d[i] = s[i];
}

int main(void)
{
	static const struct {
		const char *name;
		copy_fn fn;
	} methods[] = {
		{ "glibc-memcpy", copy_glibc },
		{ "rep-movsb", copy_movsb },
		{ "rep-movsq", copy_movsq },
		{ "sse2-loop", copy_sse2 },
		{ "u64-loop", copy_u64 },
		{ "glibc-memset", fill_glibc },
		{ "rep-stosb", fill_stosb },
		{ "sse2-fill", fill_sse2 },
	};
	static const size_t sizes[] = { 4096, 256 << 10 };
	char *src = aligned_alloc(4096, ARENA), *dst = aligned_alloc(4096, ARENA);
	size_t m, s, done;

	if (!src || !dst)
		return 1;
	memset(src, 1, ARENA);
	memset(dst, 2, ARENA);
	for (s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
		for (m = 0; m < sizeof(methods) / sizeof(methods[0]); m++) {
			size_t n = sizes[s];
			double t = now();

			for (done = 0; done < TOTAL; done += n)
				methods[m].fn(dst + done % ARENA,
					      src + (done * 7) % ARENA, n);
			t = now() - t;
			printf("memprobe %s %zu %.0f\n", methods[m].name, n,
			       TOTAL / t / 1e6);
		}
	}
	return 0;
}
