/* The partial file hash of shournal: XXH64 (seed 0) over up to `reads`
 * chunks of `chunk` bytes sampled at offsets size/reads * i (contiguous when
 * that step is not larger than a chunk), stopping at the first short read.
 * Bit-compatible with shournal 3.3 and with shournal/capture/hashing.py; the
 * vectors of tests/unit/test_hashing.py are checked against this code by
 * tests/unit/test_native_hash.py.
 *
 * Computed by the holder (shournal_holder.c) right when an event is read, so
 * the hash describes the file as the command left it, not as a later
 * command line may have changed it.  Streaming, so any `reads` works with
 * one chunk-sized buffer.  libc only. */
#ifndef SHOURNAL_HASH_H
#define SHOURNAL_HASH_H

#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

#define SHOURNAL_P1 0x9E3779B185EBCA87ULL
#define SHOURNAL_P2 0xC2B2AE3D27D4EB4FULL
#define SHOURNAL_P3 0x165667B19E3779F9ULL
#define SHOURNAL_P4 0x85EBCA77C2B2AE63ULL
#define SHOURNAL_P5 0x27D4EB2F165667C5ULL

struct shournal_xxh64 {
    uint64_t v[4];
    uint64_t total;
    uint8_t mem[32];
    uint32_t memsize;
};

static inline uint64_t shournal_rotl(uint64_t x, int r)
{
    return (x << r) | (x >> (64 - r));
}

static inline uint64_t shournal_rd64(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
    return v; /* little-endian hosts only (x86-64, arm64), as the original */
}

static inline uint32_t shournal_rd32(const uint8_t *p)
{
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}

static inline uint64_t shournal_round(uint64_t acc, uint64_t input)
{
    acc += input * SHOURNAL_P2;
    acc = shournal_rotl(acc, 31);
    return acc * SHOURNAL_P1;
}

static inline uint64_t shournal_merge(uint64_t acc, uint64_t val)
{
    acc ^= shournal_round(0, val);
    return acc * SHOURNAL_P1 + SHOURNAL_P4;
}

static inline void shournal_xxh64_init(struct shournal_xxh64 *s)
{
    memset(s, 0, sizeof *s);
    s->v[0] = SHOURNAL_P1 + SHOURNAL_P2;
    s->v[1] = SHOURNAL_P2;
    s->v[2] = 0;
    s->v[3] = (uint64_t)0 - SHOURNAL_P1;
}

static inline void shournal_xxh64_update(struct shournal_xxh64 *s, const uint8_t *p, size_t len)
{
    const uint8_t *end = p + len;

    s->total += len;
    if (s->memsize + len < 32) {
        memcpy(s->mem + s->memsize, p, len);
        s->memsize += (uint32_t)len;
        return;
    }
    if (s->memsize) {
        size_t fill = 32 - s->memsize;
        memcpy(s->mem + s->memsize, p, fill);
        for (int i = 0; i < 4; i++)
            s->v[i] = shournal_round(s->v[i], shournal_rd64(s->mem + 8 * i));
        p += fill;
        s->memsize = 0;
    }
    while (end - p >= 32) {
        for (int i = 0; i < 4; i++)
            s->v[i] = shournal_round(s->v[i], shournal_rd64(p + 8 * i));
        p += 32;
    }
    if (p < end) {
        memcpy(s->mem, p, (size_t)(end - p));
        s->memsize = (uint32_t)(end - p);
    }
}

static inline uint64_t shournal_xxh64_digest(const struct shournal_xxh64 *s)
{
    const uint8_t *p = s->mem, *end = s->mem + s->memsize;
    uint64_t h;

    if (s->total >= 32) {
        h = shournal_rotl(s->v[0], 1) + shournal_rotl(s->v[1], 7) + shournal_rotl(s->v[2], 12) +
            shournal_rotl(s->v[3], 18);
        for (int i = 0; i < 4; i++)
            h = shournal_merge(h, s->v[i]);
    } else {
        h = s->v[2] + SHOURNAL_P5; /* v[2] is the seed, 0 */
    }
    h += s->total;
    while (end - p >= 8) {
        h ^= shournal_round(0, shournal_rd64(p));
        h = shournal_rotl(h, 27) * SHOURNAL_P1 + SHOURNAL_P4;
        p += 8;
    }
    if (end - p >= 4) {
        h ^= (uint64_t)shournal_rd32(p) * SHOURNAL_P1;
        h = shournal_rotl(h, 23) * SHOURNAL_P2 + SHOURNAL_P3;
        p += 4;
    }
    while (p < end) {
        h ^= (*p) * SHOURNAL_P5;
        h = shournal_rotl(h, 11) * SHOURNAL_P1;
        p++;
    }
    h ^= h >> 33;
    h *= SHOURNAL_P2;
    h ^= h >> 29;
    h *= SHOURNAL_P3;
    h ^= h >> 32;
    return h;
}

/* Partial hash of the open file `fd` whose fstat size is `size`, using
 * `buf` (at least `chunk` bytes).  Returns 1 and sets *out, 0 when nothing
 * was read (empty file: no hash, like the original), -1 on a read error.
 * pread: the file offset is untouched. */
static inline int shournal_partial_hash(int fd, uint64_t size, uint32_t chunk, uint32_t reads,
                                        uint8_t *buf, uint64_t *out)
{
    struct shournal_xxh64 s;
    uint64_t step = size / reads, off = 0;
    ssize_t n;

    if (step <= chunk)
        step = chunk;
    shournal_xxh64_init(&s);
    for (uint32_t i = 0; i < reads; i++) {
        do
            n = pread(fd, buf, chunk, (off_t)off);
        while (n < 0 && errno == EINTR);
        if (n < 0)
            return -1;
        shournal_xxh64_update(&s, buf, (size_t)n);
        if ((size_t)n < chunk)
            break;
        off += step;
    }
    if (s.total == 0)
        return 0;
    *out = shournal_xxh64_digest(&s);
    return 1;
}

#endif
