/*
 * libFuzzer target: the bounds-checked readers of transport/wire.c.
 *
 * Input: byte 0 = number of opcode bytes k (mod 32), then k opcode bytes,
 * then the buffer the readers consume. The opcodes are applied in a cycle
 * (at most 512 reads) so that a short script walks a long buffer. An opcode's
 * low 2 bits pick the reader (u32, u64, bytes, str); for str the next 3 bits
 * pick the destination size from max_sizes[].
 *
 * Invariants checked after every read:
 *   - pos <= len, and pos only moves forward by exactly what was read;
 *   - once failed, the buffer stays failed and pos never moves again;
 *   - a value read is the little-endian bytes at the old position (0 on failure);
 *   - a bytes view lies inside the buffer, right after its u64 length;
 *   - a string is NUL-terminated, shorter than max, NUL-free and equal to the
 *     wire bytes; on failure it is "".
 * The string destination is a heap block of exactly max bytes, so ASan sees
 * any write past it.
 */
#include "transport/wire.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(cond)                                                                   \
    do {                                                                              \
        if (!(cond)) {                                                                \
            fprintf(stderr, "fuzz_wire: %s:%d: check failed: %s\n", __FILE__, __LINE__, \
                    #cond);                                                           \
            abort();                                                                  \
        }                                                                             \
    } while (0)

static const size_t max_sizes[8] = {1, 2, 3, 8, 64, 96, 512, 4096};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    size_t nops = data[0] % 32;
    if (nops == 0)
        nops = 1;
    if (nops > size - 1)
        nops = size - 1;
    const uint8_t *ops = data + 1;
    const char *buf = (const char *)data + 1 + nops;
    size_t len = size - 1 - nops;
    static const uint8_t default_op = 0; /* no opcode bytes: read u32s */
    if (nops == 0) {
        ops = &default_op;
        nops = 1;
    }

    adag_rbuf_t b = {buf, len, 0, 0};
    for (size_t i = 0; i < 512; i++) {
        uint8_t op = ops[i % nops];
        size_t pos = b.pos;
        int was_failed = b.failed;
        switch (op & 3) {
        case 0: {
            uint32_t v = adag__rbuf_u32(&b), want = 0;
            if (!b.failed) {
                CHECK(b.pos == pos + 4);
                memcpy(&want, buf + pos, 4);
            }
            CHECK(v == want);
            break;
        }
        case 1: {
            uint64_t v = adag__rbuf_u64(&b), want = 0;
            if (!b.failed) {
                CHECK(b.pos == pos + 8);
                memcpy(&want, buf + pos, 8);
            }
            CHECK(v == want);
            break;
        }
        case 2: {
            size_t n = 12345;
            const char *p = adag__rbuf_bytes(&b, &n);
            if (b.failed) {
                CHECK(p == NULL && n == 0);
            } else {
                uint64_t want;
                memcpy(&want, buf + pos, 8);
                CHECK(n == want);
                CHECK(p == buf + pos + 8);
                CHECK(n <= len && p + n <= buf + len);
                CHECK(b.pos == pos + 8 + n);
            }
            break;
        }
        default: {
            size_t max = max_sizes[(op >> 2) & 7];
            char *out = malloc(max);
            CHECK(out);
            memset(out, 'x', max);
            adag__rbuf_str(&b, out, max);
            size_t n = strnlen(out, max);
            CHECK(n < max); /* NUL-terminated inside out */
            if (b.failed) {
                CHECK(n == 0);
            } else {
                uint64_t want;
                memcpy(&want, buf + pos, 8);
                CHECK(n == want);
                CHECK(b.pos == pos + 8 + n);
                CHECK(memcmp(out, buf + pos + 8, n) == 0);
            }
            free(out);
            break;
        }
        }
        CHECK(b.pos <= b.len && b.len == len && b.data == buf);
        CHECK(b.pos >= pos);
        if (was_failed)
            CHECK(b.failed && b.pos == pos);
        if (b.failed && was_failed)
            break; /* nothing more can change */
    }
    return 0;
}
