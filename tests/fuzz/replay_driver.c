/* SPDX-License-Identifier: Apache-2.0 */
/* Replay driver for fuzz targets when libFuzzer is not used.
 *
 * Usage: <target> CORPUS_DIR [ITERATIONS]
 *
 * Runs LLVMFuzzerTestOneInput on every file of CORPUS_DIR (in name order),
 * then on ITERATIONS deterministic mutations of them (xorshift PRNG with a
 * fixed seed: bit flips, byte sets, truncations, insertions, deletions,
 * duplications and splices of two corpus files), and prints one summary
 * line. Every input is passed in a heap block of exactly its size, so
 * ASan and valgrind see any read past its end. The same seed gives the same
 * inputs on every machine, so a failure in CI reproduces locally.
 *
 * Environment: IB_UNDER_VALGRIND divides the iterations by 50 (at least
 * 200 remain); IB_FUZZ_ITERATIONS and IB_FUZZ_SEED override the count and
 * the seed (e.g. to explore further by hand). */
#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define DEFAULT_ITERATIONS 10000ul
#define DEFAULT_SEED 0x1b873593cafef00dull
#define MAX_FILE (4u * 1024u * 1024u) /* larger corpus files are cut here */
#define MIN_MUTANT_CAP 4096u

typedef struct seed_file {
    char *name;
    uint8_t *data;
    size_t len;
} seed_file;

typedef struct corpus {
    seed_file *files;
    size_t count;
    size_t largest;
} corpus;

static uint64_t rng_state;

static uint64_t rng_next(void)
{
    uint64_t x = rng_state;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    rng_state = x;
    return x * 0x2545f4914f6cdd1dull;
}

/* Uniform enough in [0, n) for mutation choices; n must be > 0. */
static size_t rng_below(size_t n)
{
    return (size_t)(rng_next() % n);
}

static int cmp_names(const void *a, const void *b)
{
    return strcmp(((const seed_file *)a)->name, ((const seed_file *)b)->name);
}

static int read_file(seed_file *out, const char *dir, const char *name)
{
    char path[4096];
    FILE *f;
    size_t cap = 4096;
    uint8_t *data;

    snprintf(path, sizeof(path), "%s/%s", dir, name);
    f = fopen(path, "rb");
    if (f == NULL) {
        fprintf(stderr, "replay: cannot open %s: %s\n", path, strerror(errno));
        return -1;
    }
    data = malloc(cap);
    out->len = 0;
    while (data != NULL) {
        size_t got = fread(data + out->len, 1, cap - out->len, f);
        out->len += got;
        if (got == 0 || out->len >= MAX_FILE)
            break;
        if (out->len == cap) {
            uint8_t *bigger = realloc(data, cap * 2);
            if (bigger == NULL) {
                free(data);
                data = NULL;
                break;
            }
            data = bigger;
            cap *= 2;
        }
    }
    fclose(f);
    if (data == NULL) {
        fprintf(stderr, "replay: out of memory reading %s\n", path);
        return -1;
    }
    if (out->len > MAX_FILE)
        out->len = MAX_FILE;
    out->data = data;
    out->name = strdup(name);
    return out->name != NULL ? 0 : -1;
}

static int load_corpus(corpus *c, const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    size_t cap = 0;

    memset(c, 0, sizeof(*c));
    if (d == NULL) {
        fprintf(stderr, "replay: cannot open corpus %s: %s\n", dir, strerror(errno));
        return -1;
    }
    while ((e = readdir(d)) != NULL) {
        char path[4096];
        struct stat st;
        if (e->d_name[0] == '.')
            continue;
        snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
        if (stat(path, &st) != 0 || !S_ISREG(st.st_mode))
            continue;
        if (c->count == cap) {
            size_t ncap = cap ? cap * 2 : 16;
            seed_file *nf = realloc(c->files, ncap * sizeof(*nf));
            if (nf == NULL)
                goto fail;
            c->files = nf;
            cap = ncap;
        }
        if (read_file(&c->files[c->count], dir, e->d_name) != 0)
            goto fail;
        if (c->files[c->count].len > c->largest)
            c->largest = c->files[c->count].len;
        c->count++;
    }
    closedir(d);
    if (c->count > 0)
        qsort(c->files, c->count, sizeof(*c->files), cmp_names);
    return 0;

fail:
    closedir(d);
    return -1;
}

static void free_corpus(corpus *c)
{
    for (size_t i = 0; i < c->count; i++) {
        free(c->files[i].name);
        free(c->files[i].data);
    }
    free(c->files);
}

/* Runs the target on an exact-size copy. */
static void run_one(const uint8_t *data, size_t len)
{
    uint8_t *copy = malloc(len > 0 ? len : 1);
    if (copy == NULL) {
        fprintf(stderr, "replay: out of memory\n");
        exit(2);
    }
    if (len > 0)
        memcpy(copy, data, len);
    LLVMFuzzerTestOneInput(copy, len);
    free(copy);
}

/* Bytes that tend to matter to binary parsers: zero, small counts,
 * varint continuation edges and protobuf keys of low fields. */
static const uint8_t interesting[] = {0x00, 0x01, 0x02, 0x07, 0x08, 0x0a, 0x12, 0x1a,
                                      0x20, 0x2a, 0x32, 0x7f, 0x80, 0x81, 0xc0, 0xff};

/* Applies one random mutation to buf[0..*len) (capacity cap). */
static void mutate(uint8_t *buf, size_t *len, size_t cap, const corpus *c)
{
    size_t n = *len;
    size_t pos;
    size_t k;

    switch (rng_below(9)) {
    case 0: /* flip one bit */
        if (n > 0) {
            pos = rng_below(n);
            buf[pos] ^= (uint8_t)(1u << rng_below(8));
        }
        break;
    case 1: /* set a random byte */
        if (n > 0)
            buf[rng_below(n)] = (uint8_t)rng_next();
        break;
    case 2: /* set an interesting byte */
        if (n > 0)
            buf[rng_below(n)] = interesting[rng_below(sizeof(interesting))];
        break;
    case 3: /* truncate */
        *len = n > 0 ? rng_below(n) : 0;
        break;
    case 4: /* insert 1..8 random bytes */
        k = 1 + rng_below(8);
        if (n + k <= cap) {
            pos = rng_below(n + 1);
            memmove(buf + pos + k, buf + pos, n - pos);
            for (size_t i = 0; i < k; i++)
                buf[pos + i] = (uint8_t)rng_next();
            *len = n + k;
        }
        break;
    case 5: /* delete a range */
        if (n > 0) {
            pos = rng_below(n);
            k = 1 + rng_below(n - pos);
            memmove(buf + pos, buf + pos + k, n - pos - k);
            *len = n - k;
        }
        break;
    case 6: /* copy up to 64 bytes of the input to another position */
        if (n > 0) {
            uint8_t tmp[64];
            size_t from = rng_below(n);
            k = 1 + rng_below(n - from < sizeof(tmp) ? n - from : sizeof(tmp));
            if (n + k > cap)
                break;
            memcpy(tmp, buf + from, k);
            pos = rng_below(n + 1);
            memmove(buf + pos + k, buf + pos, n - pos);
            memcpy(buf + pos, tmp, k);
            *len = n + k;
        }
        break;
    case 7: /* splice: our prefix, another file's suffix */
        if (c->count > 0) {
            const seed_file *o = &c->files[rng_below(c->count)];
            size_t keep = n > 0 ? rng_below(n + 1) : 0;
            size_t from = o->len > 0 ? rng_below(o->len + 1) : 0;
            size_t take = o->len - from;
            if (keep + take > cap)
                take = cap - keep;
            memcpy(buf + keep, o->data + from, take);
            *len = keep + take;
        }
        break;
    default: /* overwrite with a long varint (all continuation bits) */
        if (n > 0) {
            pos = rng_below(n);
            k = 1 + rng_below(11);
            for (size_t i = 0; i < k && pos + i < n; i++)
                buf[pos + i] = 0xff;
        }
        break;
    }
}

static unsigned long env_ulong(const char *name, unsigned long fallback)
{
    const char *v = getenv(name);
    char *end;
    unsigned long x;
    if (v == NULL || *v == '\0')
        return fallback;
    errno = 0;
    x = strtoul(v, &end, 0);
    return errno == 0 && *end == '\0' ? x : fallback;
}

int main(int argc, char **argv)
{
    corpus c;
    unsigned long iterations = DEFAULT_ITERATIONS;
    unsigned long long seed = env_ulong("IB_FUZZ_SEED", DEFAULT_SEED);
    size_t cap;
    size_t largest_run = 0;
    uint8_t *buf;

    if (argc < 2 || argc > 3) {
        fprintf(stderr, "usage: %s CORPUS_DIR [ITERATIONS]\n", argv[0]);
        return 2;
    }
    if (argc == 3)
        iterations = strtoul(argv[2], NULL, 10);
    iterations = env_ulong("IB_FUZZ_ITERATIONS", iterations);
    if (getenv("IB_UNDER_VALGRIND") != NULL) {
        iterations /= 50;
        if (iterations < 200)
            iterations = 200;
    }
    if (load_corpus(&c, argv[1]) != 0)
        return 2;

    for (size_t i = 0; i < c.count; i++) {
        run_one(c.files[i].data, c.files[i].len);
        if (c.files[i].len > largest_run)
            largest_run = c.files[i].len;
    }

    cap = c.largest * 2 > MIN_MUTANT_CAP ? c.largest * 2 : MIN_MUTANT_CAP;
    buf = malloc(cap);
    if (buf == NULL) {
        free_corpus(&c);
        return 2;
    }
    rng_state = seed != 0 ? seed : DEFAULT_SEED;
    for (unsigned long it = 0; it < iterations; it++) {
        size_t len = 0;
        unsigned rounds = 1 + (unsigned)rng_below(4);
        if (c.count > 0) {
            const seed_file *s = &c.files[rng_below(c.count)];
            len = s->len;
            memcpy(buf, s->data, len);
        }
        for (unsigned r = 0; r < rounds; r++)
            mutate(buf, &len, cap, &c);
        run_one(buf, len);
        if (len > largest_run)
            largest_run = len;
    }
    printf("replay %s: %zu corpus files, %lu mutated inputs (seed %#llx), largest input %zu "
           "bytes: no crash\n",
           argv[1], c.count, iterations, seed, largest_run);
    free(buf);
    free_corpus(&c);
    return 0;
}
