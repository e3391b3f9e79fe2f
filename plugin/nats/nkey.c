/* SPDX-License-Identifier: Apache-2.0 */
#include "nkey.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

#include <openssl/evp.h>

#define PREFIX_SEED (18u << 3) /* 'S' */
#define PREFIX_USER (20u << 3) /* 'U' */
#define SEED_RAW_LEN 36        /* 2 prefix bytes, 32 seed bytes, 2 crc bytes */
#define PUB_RAW_LEN 35         /* 1 prefix byte, 32 key bytes, 2 crc bytes */
#define SEED_TEXT_LEN 58

static const char b32_alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";

/* CRC-16/XMODEM (polynomial 0x1021, initial 0), as NKeys checksum keys. */
static uint16_t crc16(const uint8_t *p, size_t n)
{
    uint16_t crc = 0;
    for (size_t i = 0; i < n; i++) {
        crc ^= (uint16_t)((uint16_t)p[i] << 8);
        for (int b = 0; b < 8; b++)
            crc = (crc & 0x8000u) ? (uint16_t)((crc << 1) ^ 0x1021u) : (uint16_t)(crc << 1);
    }
    return crc;
}

static void b32_encode(char *out, const uint8_t *in, size_t n)
{
    uint32_t acc = 0;
    int bits = 0;
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        acc = (acc << 8) | in[i];
        bits += 8;
        while (bits >= 5) {
            out[o++] = b32_alphabet[(acc >> (bits - 5)) & 31u];
            bits -= 5;
        }
    }
    if (bits > 0)
        out[o++] = b32_alphabet[(acc << (5 - bits)) & 31u];
    out[o] = '\0';
}

/* Decodes exactly `n` characters; returns the byte count or -1. */
static int b32_decode(uint8_t *out, size_t cap, const char *in, size_t n)
{
    uint32_t acc = 0;
    int bits = 0;
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        const char *hit = memchr(b32_alphabet, in[i], 32);
        if (in[i] == '\0' || hit == NULL)
            return -1;
        acc = (acc << 5) | (uint32_t)(hit - b32_alphabet);
        bits += 5;
        if (bits >= 8) {
            if (o == cap)
                return -1;
            out[o++] = (uint8_t)(acc >> (bits - 8));
            bits -= 8;
        }
    }
    return (int)o;
}

ib_status ib_nkey_public_from_seed(char out[IB_NKEY_PUBLIC_LEN + 1], const char *seed, size_t len,
                                   ib_error *err)
{
    uint8_t raw[SEED_RAW_LEN + 2];
    uint8_t pub[PUB_RAW_LEN];
    size_t publen = 32;
    ib_status st = IB_OK;

    out[0] = '\0';
    if (len != SEED_TEXT_LEN || b32_decode(raw, sizeof(raw), seed, len) != SEED_RAW_LEN)
        return ib_error_set(err, IB_ERR_CONFIG, "nkey seed: not a 58-character base32 seed");
    uint16_t want = (uint16_t)(raw[34] | (raw[35] << 8));
    if (crc16(raw, 34) != want)
        return ib_error_set(err, IB_ERR_CONFIG, "nkey seed: checksum mismatch");
    unsigned type = ((raw[0] & 7u) << 5) | ((raw[1] & 248u) >> 3);
    if ((raw[0] & 248u) != PREFIX_SEED || type != PREFIX_USER)
        return ib_error_set(err, IB_ERR_CONFIG, "nkey seed: not a user seed (must start with SU)");

    EVP_PKEY *key = EVP_PKEY_new_raw_private_key(EVP_PKEY_ED25519, NULL, raw + 2, 32);
    if (key == NULL)
        return ib_error_set(err, IB_ERR_CONFIG, "nkey seed: not a valid ed25519 seed");
    pub[0] = (uint8_t)PREFIX_USER;
    if (EVP_PKEY_get_raw_public_key(key, pub + 1, &publen) != 1 || publen != 32) {
        st = ib_error_set(err, IB_ERR_CONFIG, "nkey seed: cannot derive the public key");
        goto out;
    }
    uint16_t crc = crc16(pub, 33);
    pub[33] = (uint8_t)(crc & 0xffu);
    pub[34] = (uint8_t)(crc >> 8);
    b32_encode(out, pub, sizeof(pub));
out:
    EVP_PKEY_free(key);
    OPENSSL_cleanse(raw, sizeof(raw));
    return st;
}

ib_status ib_nkey_public_from_seed_file(char out[IB_NKEY_PUBLIC_LEN + 1], const char *seed_file,
                                        ib_error *err)
{
    char buf[4096];
    FILE *f = fopen(seed_file, "r");
    if (f == NULL)
        return ib_error_set(err, IB_ERR_IO, "nkey seed file %s: cannot be read", seed_file);
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    /* A seed file may hold comments or a creds-style block: take the first
     * word that starts with "SU". */
    for (char *p = buf; (p = strstr(p, "SU")) != NULL; p++) {
        if (p != buf && !isspace((unsigned char)p[-1]))
            continue;
        size_t len = 0;
        while (p[len] != '\0' && !isspace((unsigned char)p[len]))
            len++;
        ib_error inner;
        ib_status st = ib_nkey_public_from_seed(out, p, len, &inner);
        OPENSSL_cleanse(buf, sizeof(buf));
        if (st != IB_OK)
            ib_error_set(err, st, "nkey seed file %s: %s", seed_file, inner.msg);
        return st;
    }
    OPENSSL_cleanse(buf, sizeof(buf));
    return ib_error_set(err, IB_ERR_CONFIG, "nkey seed file %s: no user seed (SU...) found",
                        seed_file);
}

void ib_nkey_encode_user_seed(char out[59], const uint8_t raw_seed[32])
{
    uint8_t raw[SEED_RAW_LEN];
    raw[0] = (uint8_t)(PREFIX_SEED | (PREFIX_USER >> 5));
    raw[1] = (uint8_t)((PREFIX_USER & 31u) << 3);
    memcpy(raw + 2, raw_seed, 32);
    uint16_t crc = crc16(raw, 34);
    raw[34] = (uint8_t)(crc & 0xffu);
    raw[35] = (uint8_t)(crc >> 8);
    b32_encode(out, raw, sizeof(raw));
}
