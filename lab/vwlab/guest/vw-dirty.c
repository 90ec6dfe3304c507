/* vw-dirty: a guest workload that keeps writing memory, for measuring live
 * migration (the pages a migration must send again).
 *
 *     vw-dirty MIB PAGES_PER_SECOND [sparse|dense|random]
 *
 * Holds a working set of MIB MiB and writes PAGES_PER_SECOND of its pages
 * a second, in 100 slices a second, page after page round the set:
 *   sparse  a heap of records (64 B each: an id, a counter, a 16-byte key
 *           and five words from a small vocabulary: zlib at level 1 packs
 *           a page to about 45%, as it does much of a real guest's memory);
 *           a write bumps one record's counter (8 bytes), so most of the
 *           page is unchanged and page deltas (QEMU's xbzrle) send little
 *           of it again
 *   dense   the same heap, every record of the page rewritten (new
 *           counters throughout the page)
 *   random  pages of pseudo-random bytes, each write rewriting the whole
 *           page: nothing a delta or a compressor can save (a worst case)
 * Prints its counters to the console once a minute.
 *
 * Static, no dependencies: it runs from a busybox initramfs.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#define PAGE 4096

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: vw-dirty MIB PAGES_PER_SECOND "
                "[sparse|dense|random]\n");
        return 2;
    }
    size_t mib = strtoul(argv[1], NULL, 10);
    unsigned long rate = strtoul(argv[2], NULL, 10);
    const char *mode = argc > 3 ? argv[3] : "sparse";
    int dense = strcmp(mode, "dense") == 0;
    int random = strcmp(mode, "random") == 0;
    if (!dense && !random && strcmp(mode, "sparse") != 0) {
        fprintf(stderr, "vw-dirty: mode is sparse, dense or random\n");
        return 2;
    }
    size_t pages = mib * 256;
    if (!pages || !rate) {
        fprintf(stderr, "vw-dirty: MIB and PAGES_PER_SECOND must be > 0\n");
        return 2;
    }
    unsigned char *set = mmap(NULL, pages * PAGE, PROT_READ | PROT_WRITE,
                              MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
    if (set == MAP_FAILED) {
        perror("vw-dirty: mmap");
        return 1;
    }
    /* Every page non-zero and distinct first: QEMU sends zero pages as a
     * flag, and a set of zero pages would not cost what a real one does. */
    static const char *words[] = {"alpha ", "bravo ", "delta ", "order ",
                                  "state ", "route ", "value ", "index "};
    uint64_t x = 0x9e3779b97f4a7c15ULL;
    for (size_t p = 0; p < pages; p++)
        for (size_t r = 0; r < PAGE / 64; r++) {
            unsigned char *rec = set + p * PAGE + r * 64;
            x ^= x << 13; x ^= x >> 7; x ^= x << 17;
            if (random) {
                for (size_t i = 0; i < 64; i += 8) {
                    x ^= x << 13; x ^= x >> 7; x ^= x << 17;
                    memcpy(rec + i, &x, 8);
                }
                continue;
            }
            uint64_t id = p * (PAGE / 64) + r, zero = 0, key2;
            memcpy(rec, &id, 8);
            memcpy(rec + 8, &zero, 8);
            memcpy(rec + 16, &x, 8);            /* a 16-byte key */
            key2 = x * 0x2545f4914f6cdd1dULL;
            memcpy(rec + 24, &key2, 8);
            for (size_t w = 0; w < 5; w++)
                memcpy(rec + 32 + w * 6, words[(x >> (3 * w + 7)) & 7], 6);
            memcpy(rec + 62, "  ", 2);
        }
    printf("vw-dirty: %zu MiB, %lu pages/s, %s\n", mib, rate, mode);
    fflush(stdout);
    struct timespec next;
    clock_gettime(CLOCK_MONOTONIC, &next);
    size_t at = 0;
    uint64_t written = 0, tick = 0;
    unsigned long per_slice = rate / 100 ? rate / 100 : 1;
    for (;;) {
        for (unsigned long k = 0; k < per_slice; k++, written++) {
            unsigned char *pg = set + at * PAGE;
            if (random) {
                for (size_t i = 0; i < PAGE; i += 8) {
                    x ^= x << 13; x ^= x >> 7; x ^= x << 17;
                    memcpy(pg + i, &x, 8);
                }
            } else if (dense) {
                for (size_t r = 0; r < PAGE / 64; r++)
                    memcpy(pg + r * 64 + 8, &written, 8);
            } else {
                memcpy(pg + (written % (PAGE / 64)) * 64 + 8, &written, 8);
            }
            at = (at + 1) % pages;
        }
        next.tv_nsec += 10000000L;
        while (next.tv_nsec >= 1000000000L) {
            next.tv_nsec -= 1000000000L;
            next.tv_sec++;
        }
        clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &next, NULL);
        if (++tick % 6000 == 0) {
            printf("vw-dirty: %llu pages written\n", (unsigned long long)written);
            fflush(stdout);
        }
    }
}
