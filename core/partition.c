/* SPDX-License-Identifier: Apache-2.0 */
/* FNV-1a-32 partitions (partition.h): the server's mapping function. */
#include "partition.h"

#include <stdio.h>
#include <string.h>

#include "utf8.h"

#define FNV32_OFFSET 2166136261u
#define FNV32_PRIME 16777619u

uint32_t ib_partition_hash_more(uint32_t hash, const void *more, size_t len)
{
    const unsigned char *p = more;
    for (size_t i = 0; i < len; i++) {
        hash ^= p[i];
        hash *= FNV32_PRIME;
    }
    return hash;
}

uint32_t ib_partition_hash(const void *key, size_t len)
{
    return ib_partition_hash_more(FNV32_OFFSET, key, len);
}

uint32_t ib_partition_of(uint32_t hash, uint32_t n)
{
    return n == 0 ? 0 : hash % n;
}

/* Why `key` cannot be a partition key (NULL: it can), into `why`. */
static const char *key_fault(const char *key, char *why, size_t cap)
{
    size_t len = strlen(key);
    if (len == 0)
        return "a partition key cannot be empty";
    if (len > IB_PARTITION_KEY_MAX) {
        snprintf(why, cap, "a partition key is at most %u bytes (this one has %zu)",
                 IB_PARTITION_KEY_MAX, len);
        return why;
    }
    if (!ib__utf8_valid(key, len))
        return "a partition key must be valid UTF-8";
    for (size_t i = 0; i < len; i++) {
        unsigned char b = (unsigned char)key[i];
        if (b <= 0x20 || b == 0x7f || b == '.' || b == '*' || b == '>') {
            /* the key is not shown: it may hold control characters */
            snprintf(why, cap,
                     "a partition key is one subject token, but byte %zu of this one is 0x%02x "
                     "(no '.', '*', '>', space or control character)",
                     i + 1, b);
            return why;
        }
    }
    return NULL;
}

ib_status ib_partition_key_check(const char *key, ib_error *err)
{
    char why[160];
    const char *fault = key_fault(key, why, sizeof(why));
    return fault == NULL ? IB_OK : ib_error_set(err, IB_ERR_INVALID_ARG, "%s", fault);
}

ib_status ib_partition_subject(char *out, size_t cap, const char *base, const char *key, uint32_t n,
                               ib_error *err)
{
    if (cap > 0)
        out[0] = '\0';
    if (n < 1 || n > IB_PARTITIONS_MAX)
        return ib_error_set(err, IB_ERR_INVALID_ARG, "partitions: %u is not in 1..%u", n,
                            IB_PARTITIONS_MAX);
    ib_status st = ib_partition_key_check(key, err);
    if (st != IB_OK)
        return st;
    uint32_t p = ib_partition_of(ib_partition_hash(key, strlen(key)), n);
    int w = snprintf(out, cap, "%s.%u.%s", base, p, key);
    if (w < 0 || (size_t)w >= cap) {
        if (cap > 0)
            out[0] = '\0';
        return ib_error_set(err, IB_ERR_INVALID_ARG, "the partition subject under %s is too long",
                            base);
    }
    return IB_OK;
}

ib_partition_place ib_partition_subject_read(const char *subject, const char *base, uint32_t n,
                                             uint32_t *partition, uint32_t *belongs)
{
    size_t blen = strlen(base);
    if (n < 1 || n > IB_PARTITIONS_MAX || strncmp(subject, base, blen) != 0 || subject[blen] != '.')
        return IB_PARTITION_NOT_OURS;
    const char *p = subject + blen + 1;
    uint32_t part = 0;
    size_t digits = 0;
    for (; *p >= '0' && *p <= '9' && digits < 5; p++, digits++)
        part = part * 10 + (uint32_t)(*p - '0');
    /* one decimal token below n, written as ib_partition_subject writes it */
    if (digits == 0 || *p != '.' || part >= n || (digits > 1 && subject[blen + 1] == '0'))
        return IB_PARTITION_NOT_OURS;
    const char *key = p + 1;
    char why[160];
    if (key_fault(key, why, sizeof(why)) != NULL)
        return IB_PARTITION_NOT_OURS;
    *partition = part;
    *belongs = ib_partition_of(ib_partition_hash(key, strlen(key)), n);
    return *belongs == part ? IB_PARTITION_IN_PLACE : IB_PARTITION_MISPLACED;
}
