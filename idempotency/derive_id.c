/* SPDX-License-Identifier: Apache-2.0 */
/* ib_event_id_derive (idempotency.h): name-based uuid8 ids from keys.
 * SHA-256 comes from OpenSSL's libcrypto, which the build needs anyway. */
#include <infinity_bus/idempotency.h>

#include <string.h>

#include <openssl/evp.h>

#include "error.h"
#include "uuid.h"

/* SHA-256 of the namespace's 16 bytes followed by the key. */
static bool digest_of(uint8_t out[32], const uint8_t ns[16], const void *key, size_t len)
{
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    unsigned int n = 0;
    bool ok = ctx != NULL && EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) == 1 &&
              EVP_DigestUpdate(ctx, ns, 16) == 1 &&
              (len == 0 || EVP_DigestUpdate(ctx, key, len) == 1) &&
              EVP_DigestFinal_ex(ctx, out, &n) == 1 && n == 32;
    EVP_MD_CTX_free(ctx);
    return ok;
}

ib_status ib_event_id_derive(char out[IB_EVENT_ID_SIZE], const char *namespace_id, const void *key,
                             size_t len, ib_error *err)
{
    char ns[IB_ID_BUF_SIZE];
    uint8_t ns_bytes[16], digest[32];
    if (out == NULL)
        return ib_error_set(err, IB_ERR_INVALID_ARG, "derive id: no output buffer");
    out[0] = '\0';
    if (key == NULL && len > 0)
        return ib_error_set(err, IB_ERR_INVALID_ARG, "derive id: NULL key of %zu bytes", len);
    ib_id_reason why =
        namespace_id != NULL
            ? ib_id_normalise(ns, namespace_id, strlen(namespace_id), IB_ID_ANY_VERSION)
            : IB_ID_EMPTY;
    if (why != IB_ID_VALID)
        return ib_error_set(err, IB_ERR_INVALID_ID, "derive id: namespace: %s",
                            ib_id_reason_str(why));
    ib_id_pack(ns_bytes, ns);
    if (!digest_of(digest, ns_bytes, key, len))
        return ib_error_set(err, IB_ERR_NOMEM, "derive id: SHA-256 failed (out of memory?)");
    digest[6] = (uint8_t)((digest[6] & 0x0f) | 0x80); /* version 8 */
    digest[8] = (uint8_t)((digest[8] & 0x3f) | 0x80); /* variant 10 */
    ib_id_unpack(out, digest);
    return IB_OK;
}
