/* ib_event_id_derive (idempotency.h): name-based uuid8 ids from keys. */
#include <infinity_bus/idempotency.h>

#include <string.h>

#include "error.h"
#include "sha256.h"
#include "uuid.h"

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
    ib__sha256 s;
    ib__sha256_init(&s);
    ib__sha256_update(&s, ns_bytes, sizeof(ns_bytes));
    ib__sha256_update(&s, key, len);
    ib__sha256_final(&s, digest);
    digest[6] = (uint8_t)((digest[6] & 0x0f) | 0x80); /* version 8 */
    digest[8] = (uint8_t)((digest[8] & 0x3f) | 0x80); /* variant 10 */
    ib_id_unpack(out, digest);
    return IB_OK;
}
