/* SPDX-License-Identifier: Apache-2.0 */
/* infinity-bus plugin ABI: the only header a handler plugin needs.
 *
 * A plugin is a shared object that exports one function, ib_plugin_entry(),
 * returning a pointer to a constant ib_plugin_desc. The host loads it with
 * dlopen(RTLD_NOW | RTLD_LOCAL), calls ib_plugin_entry() and checks the
 * descriptor (magic, size, ABI major, handler list) before it calls any other
 * plugin code; then it calls init(), registers the handlers, and calls fini()
 * at shutdown after the last handler call has returned. Keep ELF
 * constructors (__attribute__((constructor)), C++ static initialisers) free
 * of work: they run inside dlopen, before the host has checked anything.
 *
 * Build a plugin with hidden visibility so that ib_plugin_entry is its only
 * exported symbol, and link nothing of infinity-bus:
 *
 *     cc -shared -fPIC -fvisibility=hidden \
 *        $(pkg-config --cflags infinity-bus-plugin) -o hello.so hello.c
 *
 * Compatibility rules:
 *   - IB_ABI_MAJOR changes when an existing field or signature changes; the
 *     host refuses a plugin built for another major.
 *   - IB_ABI_MINOR changes when fields are appended to a struct. Every
 *     versioned struct records its size, so each side reads only what the
 *     other provided: a host reads an older plugin's descriptor up to its
 *     `size` (missing fields count as NULL/0) and ignores what a newer
 *     plugin appended; a plugin checks ib_host_api.size (IB_HOST_API_HAS)
 *     and ib_raw_event.size (IB_RAW_EVENT_HAS) before it reads a slot newer
 *     than the host it runs in.
 *   - Fill the structs with designated initializers (.name = ...): a field
 *     appended later then quietly starts as 0, where a positional
 *     initializer draws -Wmissing-field-initializers once the plugin is
 *     rebuilt against a newer header.
 *
 * Minimal plugin:
 *
 *     static ib_verdict hello(void *state, const uint8_t *payload, size_t len,
 *                             ib_bus_proxy *bus, const ib_raw_event *ev)
 *     { return IB_HANDLER_OK; }
 *     static const char *const types[] = {"greeting.sent", NULL};
 *     static const ib_handler_desc handlers[] = {
 *         {.name = "hello", .event_types = types, .handle = hello}};
 *     static const ib_plugin_desc desc = {
 *         IB_PLUGIN_DESC_HEADER, .name = "hello", .version = "1.0.0",
 *         .handlers = handlers, .handler_count = 1};
 *     IB_PLUGIN_EXPORT const ib_plugin_desc *ib_plugin_entry(void) { return &desc; }
 */
#ifndef INFINITY_BUS_PLUGIN_H
#define INFINITY_BUS_PLUGIN_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define IB_PLUGIN_MAGIC 0x49427573u /* "IBus" */
#define IB_ABI_MAJOR 1
/* 1.1 appended ib_plugin_desc.description; 1.2 appended ib_handler_desc.flags
 * (IB_HANDLER_TRANSACTIONAL) and ib_host_api.transaction_db; 1.3 appended
 * ib_host_api.verdict_detail and ib_host_api.http_request, the event
 * type IB_EVENT_TYPE_ANY, ib_raw_event.message/message_len and the handler
 * flag IB_HANDLER_TYPES_AFTER_INIT; 1.4 appended ib_raw_event.traceparent
 * and ib_raw_event.tracestate (W3C Trace Context); 1.5 appended
 * ib_host_api.flags (IB_HOST_CHECKING: the host only checks the
 * configuration). */
#define IB_ABI_MINOR 5

#if defined(__GNUC__)
#define IB_PLUGIN_EXPORT __attribute__((visibility("default")))
#define IB_PLUGIN_PRINTF(fmt, args) __attribute__((format(printf, fmt, args)))
#else
#define IB_PLUGIN_EXPORT
#define IB_PLUGIN_PRINTF(fmt, args)
#endif

/* Limits the host enforces on names (see ib_handler_desc, ib_plugin_desc). */
#define IB_EVENT_TYPES_MAX 256   /* event types one handler lists, at most */
#define IB_PLUGIN_NAME_MAX 64    /* plugin and handler names: [A-Za-z0-9._-], 1..64 bytes */
#define IB_EVENT_TYPE_MAX 255    /* event types: 1..255 bytes, no whitespace or control bytes */
#define IB_PLUGIN_ERRBUF_MIN 256 /* init()'s errbuf is at least this large */

/* Size of a buffer for an event id as the host writes one (publish's
 * id_out, derive_id's out): 32 lowercase hex digits and a NUL. */
#define IB_EVENT_ID_BUF_SIZE 33

/* What a handler says about one event. */
typedef enum ib_verdict {
    IB_HANDLER_OK = 0, /* done: the host marks it processed and acks when all handlers are done */
    IB_HANDLER_RETRY = 1,  /* transient failure: not marked, redelivered after a back-off */
    IB_HANDLER_REJECT = 2, /* permanent failure: not marked, dead-lettered with reason "rejected" */
} ib_verdict;

typedef enum ib_log_level {
    IB_LOG_DEBUG = 0,
    IB_LOG_INFO = 1,
    IB_LOG_WARN = 2,
    IB_LOG_ERROR = 3,
} ib_log_level;

/* One event header (Event.headers map entry). Strings are NUL-terminated UTF-8. */
typedef struct ib_header {
    const char *key;
    const char *value;
} ib_header;

/* The decoded event and its delivery facts, as the host hands it to a
 * handler. Read-only. BORROWED: the struct and every string and array it
 * points to are valid only during the handle() call; copy what you need to
 * keep. Read it through the accessors below. Fields appended after ABI
 * 1.0 are read through accessors that check `size` (IB_RAW_EVENT_HAS) and
 * answer NULL/0 on an older host. */
typedef struct ib_raw_event {
    uint32_t size;          /* sizeof(ib_raw_event) as the host built it */
    const char *id;         /* normalised: 32 lowercase hex */
    const char *type;       /* non-empty */
    const uint8_t *payload; /* same bytes as handle()'s payload argument; may be NULL if empty */
    size_t payload_len;
    int64_t created_at_ms; /* producer clock, unix ms; 0 = unknown */
    const char *source;    /* "" when the producer gave none */
    const ib_header *headers;
    size_t header_count;
    /* delivery facts */
    const char *subject;     /* NATS subject the event was published on; "" if unknown */
    uint64_t stream_seq;     /* JetStream stream sequence; 0 outside JetStream */
    uint64_t delivery_count; /* 1 on the first delivery */
    const char *consumer;    /* consumer identity of the handler being called */
    /* ABI 1.3 */
    const uint8_t *message; /* the message's data as delivered: the encoded Event the
                               fields above were decoded from, unknown fields and field
                               order kept; NULL when the host has none (see
                               ib_raw_event_message) */
    size_t message_len;
    /* ABI 1.4 */
    const char *traceparent; /* W3C traceparent of this delivery; NULL when the event
                                carries no trace (see ib_raw_event_traceparent) */
    const char *tracestate;  /* its W3C tracestate; NULL when none */
} ib_raw_event;

#define IB_RAW_EVENT_HAS(ev, field)                                                                \
    ((ev)->size >= offsetof(ib_raw_event, field) + sizeof((ev)->field))

static inline const char *ib_raw_event_id(const ib_raw_event *ev)
{
    return ev->id;
}
static inline const char *ib_raw_event_type(const ib_raw_event *ev)
{
    return ev->type;
}
/* Returns the payload and stores its length in *len (if len is non-NULL). */
static inline const uint8_t *ib_raw_event_payload(const ib_raw_event *ev, size_t *len)
{
    if (len != NULL)
        *len = ev->payload_len;
    return ev->payload;
}
static inline int64_t ib_raw_event_created_at_ms(const ib_raw_event *ev)
{
    return ev->created_at_ms;
}
static inline const char *ib_raw_event_source(const ib_raw_event *ev)
{
    return ev->source;
}
static inline size_t ib_raw_event_header_count(const ib_raw_event *ev)
{
    return ev->header_count;
}
/* Returns the value of the header named `key`, or NULL when absent. */
static inline const char *ib_raw_event_header(const ib_raw_event *ev, const char *key)
{
    for (size_t i = 0; i < ev->header_count; i++) {
        const char *a = ev->headers[i].key, *b = key;
        while (*a != '\0' && *a == *b) {
            a++;
            b++;
        }
        if (*a == *b)
            return ev->headers[i].value;
    }
    return NULL;
}
/* Returns header number `i` (0-based), or NULL past the end. */
static inline const ib_header *ib_raw_event_header_at(const ib_raw_event *ev, size_t i)
{
    return i < ev->header_count ? &ev->headers[i] : NULL;
}
static inline const char *ib_raw_event_subject(const ib_raw_event *ev)
{
    return ev->subject;
}
static inline uint64_t ib_raw_event_stream_seq(const ib_raw_event *ev)
{
    return ev->stream_seq;
}
static inline uint64_t ib_raw_event_delivery_count(const ib_raw_event *ev)
{
    return ev->delivery_count;
}
static inline const char *ib_raw_event_consumer(const ib_raw_event *ev)
{
    return ev->consumer;
}
/* ABI 1.3: returns the message's bytes as delivered (the encoded Event,
 * byte for byte as the producer sent it) and stores their length in *len
 * (if non-NULL); NULL and 0 on a host before 1.3, or when the host
 * dispatched an event it did not receive as a message. BORROWED, like the
 * rest of the event. */
static inline const uint8_t *ib_raw_event_message(const ib_raw_event *ev, size_t *len)
{
    int has = IB_RAW_EVENT_HAS(ev, message_len) && ev->message != NULL;
    if (len != NULL)
        *len = has ? ev->message_len : 0;
    return has ? ev->message : NULL;
}
/* ABI 1.4: the W3C Trace Context of this delivery, as the host continues
 * the event's trace: "00-<trace id>-<span id>-<flags>", where the trace id
 * and flags are those the event arrived with (a `traceparent` NATS header,
 * else a `traceparent` header of the Event) and the span id is the host's
 * own for this delivery, the one its log lines name as span_id. Send it on
 * (an outgoing request's traceparent header, the parent of your own spans)
 * and the trace goes on through your handler; events published through
 * the bus proxy carry it already. NULL when the event has no valid
 * traceparent (and the host was not asked to start traces), and on a host
 * before 1.4. BORROWED, like the rest of the event. */
static inline const char *ib_raw_event_traceparent(const ib_raw_event *ev)
{
    return IB_RAW_EVENT_HAS(ev, traceparent) ? ev->traceparent : NULL;
}
/* ABI 1.4: the tracestate that goes with ib_raw_event_traceparent(), its
 * list members joined by ","; NULL when there is none, when the one the
 * event carried was malformed (dropped, per the W3C rules), and on a host
 * before 1.4. */
static inline const char *ib_raw_event_tracestate(const ib_raw_event *ev)
{
    return IB_RAW_EVENT_HAS(ev, tracestate) ? ev->tracestate : NULL;
}

/* Opaque handle through which a handler publishes new events; BORROWED,
 * valid only during the handle() call it was passed to. Use it with
 * ib_host_api.publish (and, in a transactional handler, transaction_db). */
typedef struct ib_bus_proxy ib_bus_proxy;

/* SQLite's connection type, for ib_host_api.transaction_db. Declared, not
 * included: a plugin that uses the slot includes <sqlite3.h> itself. */
struct sqlite3;

/* A new event for ib_host_api.publish(). Every pointer is BORROWED for the
 * publish() call only; the host copies what it sends. */
typedef struct ib_publish_request {
    uint32_t size;       /* sizeof(ib_publish_request) as the plugin built it; at least
                            IB_PUBLISH_REQUEST_SIZE_1_0, or publish() refuses it */
    const char *subject; /* NULL: the host's default subject for `type` */
    const char *type;    /* required */
    const void *payload;
    size_t payload_len;
    const char *id; /* NULL: a fresh uuid4; else kept (a republish keeps its dedup key) */
    const ib_header *headers;
    size_t header_count;
} ib_publish_request;

/* Size of an ABI 1.0 publish request: the smallest the host accepts. */
#define IB_PUBLISH_REQUEST_SIZE_1_0 (offsetof(ib_publish_request, header_count) + sizeof(size_t))

/* Services the host offers a plugin. Passed to init(); BORROWED, valid until
 * fini() returns, so a plugin may keep the pointer in its state. Slots are
 * only ever appended: check `size` (with IB_HOST_API_HAS) before using a
 * slot newer than ABI 1.0. Every slot may be called from any thread. */
typedef struct ib_host_api {
    uint32_t size; /* sizeof(ib_host_api) as the host built it */
    uint16_t abi_major;
    uint16_t abi_minor;
    /* Logs one line through the host's logger (text or JSON), tagged with
     * `plugin` (pass your plugin's name). Never log payload bytes you would
     * not want in logs. */
    void (*log)(ib_log_level level, const char *plugin, const char *fmt, ...)
        IB_PLUGIN_PRINTF(3, 4);
    /* Publishes an event through `bus` (the proxy handle() received; only
     * during that call) and waits for JetStream's ack. Returns 0 on success
     * and, if `id_out` (IB_EVENT_ID_BUF_SIZE bytes) is non-NULL, writes the
     * id used into it. Returns a negative value on failure (id_out then
     * holds ""): the event may not have been stored, so return
     * IB_HANDLER_RETRY; a retried publish with the same `id` is dropped by
     * JetStream's duplicate window. A request whose `size` is below
     * IB_PUBLISH_REQUEST_SIZE_1_0 is refused (logged, nothing published).
     * From ABI 1.4 the event continues the trace of the event being
     * handled (ib_raw_event_traceparent): the host adds its traceparent and
     * tracestate as headers of the new Event (and of its NATS message),
     * unless `headers` names a traceparent of its own. */
    int (*publish)(ib_bus_proxy *bus, const ib_publish_request *req,
                   char id_out[IB_EVENT_ID_BUF_SIZE]);
    /* Writes into `out` (IB_EVENT_ID_BUF_SIZE bytes) a deterministic
     * uuid4-shaped id derived from a parent id and a name, the same in every
     * process and host version, for derived events that must keep a stable
     * dedup key across replays. */
    void (*derive_id)(char out[IB_EVENT_ID_BUF_SIZE], const char *parent_id, const char *name);
    /* ABI 1.2 */
    /* During a call of a transactional handler (IB_HANDLER_TRANSACTIONAL),
     * returns the marker file's SQLite connection, inside a savepoint of
     * the write transaction that will also write this handler's marker for
     * the event; NULL in any other call (a handler that is not
     * transactional, or a `bus` from another call). BORROWED: valid only
     * during the handle() call that received `bus`.
     *
     * What the verdict does to the handler's writes: OK keeps them, and
     * they commit together with the marker (a crash leaves both or
     * neither); RETRY and REJECT roll them back to the savepoint, so none
     * survives.
     *
     * The handler must not COMMIT, ROLLBACK or RELEASE the host's
     * savepoint, write the host's own tables (processed_*), ATTACH a file
     * or change a PRAGMA: the host refuses those statements with
     * SQLITE_AUTH (answer RETRY or REJECT then). Savepoints of its own,
     * nested inside the host's, are fine. Transactional handlers run one
     * at a time on the writer's connection while it holds the file's write
     * lock: every process sharing the file waits, so keep the work short.
     *
     * The plugin links the system's shared libsqlite3 (the one the host
     * uses), never a static or bundled copy: two copies of SQLite in one
     * process break each other's POSIX locks and corrupt the file.
     *
     * Events the handler publishes through `bus` during the call are not
     * sent yet: they are staged in an outbox table of the same transaction
     * and sent after it commits (with Nats-Msg-Id = the event id), so
     * publish() returns 0 once staged and the id it reports is final; on
     * RETRY or REJECT they vanish with the other writes. */
    struct sqlite3 *(*transaction_db)(ib_bus_proxy *bus);
    /* ABI 1.3 */
    /* Adds detail to the verdict the calling handler is about to return.
     * Call it from inside handle(), on the thread that runs it, with the
     * `bus` that call received; elsewhere it does nothing.
     *   retry_after_ms: with RETRY, how long the event should wait before
     *     it comes back, e.g. from an HTTP Retry-After header. The host
     *     clamps it to its nak delay bounds (1 ms .. its maximum back-off,
     *     ibus run --retry-max-delay); a negative value keeps the host's
     *     own back-off. Ignored with OK and REJECT.
     *   reason: with REJECT, a one-line reason the dead letter carries in
     *     its Ibus-Error header (copied; cut at IB_VERDICT_REASON_MAX bytes,
     *     line breaks become spaces). With RETRY, what failed: the host
     *     names the last one in the Ibus-Error of a "max-deliver" dead
     *     letter ("max-deliver after 5 attempts; last: <reason>") and in
     *     the log line of a handler's circuit that opens (older 1.3 hosts
     *     ignore it, which is harmless). NULL keeps the host's own
     *     text. Never put secrets or payload bytes you would not log in it.
     * The last call before handle() returns wins. */
    void (*verdict_detail)(ib_bus_proxy *bus, int64_t retry_after_ms, const char *reason);
    /* Counts one HTTP request the calling handler made, from inside
     * handle() (as verdict_detail): `status` is the response's status code
     * (100..599), or IB_HTTP_TIMEOUT / IB_HTTP_ERROR when no response came;
     * `seconds` is the request's duration. The host counts it in
     * ibus_http_requests_total{consumer,code} and observes it in the
     * histogram ibus_http_request_seconds{consumer}. */
    void (*http_request)(ib_bus_proxy *bus, int status, double seconds);
    /* ABI 1.5 */
    /* What the host is doing with the plugin, IB_HOST_* bits; 0 in a real
     * run. With IB_HOST_CHECKING (ibus run --check) the host only checks
     * the configuration: init() validates its configuration as it would
     * for a run and says what is wrong, but leaves nothing behind: it
     * creates or changes no file, opens no connection and starts no
     * thread that outlives it. No handler is called; fini() follows.
     * Read it with ib_host_api_checking(), which answers 0 on an older
     * host (which never checks without running). */
    uint32_t flags;
} ib_host_api;

/* ib_host_api.flags (ABI 1.5): the host only checks, see there. */
#define IB_HOST_CHECKING 0x1u

/* Longest reason verdict_detail keeps (ABI 1.3), in bytes. */
#define IB_VERDICT_REASON_MAX 255
/* http_request statuses for a request that got no response (ABI 1.3). */
#define IB_HTTP_TIMEOUT (-1) /* code="timeout" */
#define IB_HTTP_ERROR (-2)   /* code="error": connection refused, TLS failure, ... */

#define IB_HOST_API_HAS(api, field)                                                                \
    ((api)->size >= offsetof(ib_host_api, field) + sizeof((api)->field))

/* Non-zero when `api` says the host only checks the configuration
 * (IB_HOST_CHECKING, ABI 1.5); 0 on a host before 1.5. */
static inline int ib_host_api_checking(const ib_host_api *api)
{
    return IB_HOST_API_HAS(api, flags) && (api->flags & IB_HOST_CHECKING) != 0;
}

/* Handles one event. `state` is what init() returned (NULL without init).
 * `payload`/`payload_len`, `bus` and `ev` are BORROWED for the call. May run
 * on several threads at once when the host runs handlers concurrently: keep
 * `state` thread-safe. Must not longjmp out, call exit() or unload itself.
 * Idempotence is the host's job: a handler that returned OK for an event
 * is not called again for it under the same consumer identity. */
typedef ib_verdict (*ib_handle_fn)(void *state, const uint8_t *payload, size_t payload_len,
                                   ib_bus_proxy *bus, const ib_raw_event *ev);

/* ib_handler_desc.flags (ABI 1.2). A host refuses, at load, a handler with
 * a bit it does not know. */
/* The handler runs inside the marker file's transaction and reaches it
 * through ib_host_api.transaction_db (see there). Needs the sqlite:
 * recorder: with any other the host refuses to start. */
#define IB_HANDLER_TRANSACTIONAL 0x1u
/* The handler's event types come from the plugin's configuration (ABI
 * 1.3): `event_types` points at an array (non-NULL at load, e.g. a static
 * array of IB_EVENT_TYPES_MAX + 1 pointers) that init() fills in, with the
 * same rules as a static list. The host checks the list after init()
 * returns (refusing the plugin, after its fini(), if it breaks a rule) and
 * subscribes the handler to exactly those types; it never reads the array
 * before init(). The array and its strings must then stay unchanged until
 * fini(). A host before 1.3 refuses such a plugin at load (unknown flag). */
#define IB_HANDLER_TYPES_AFTER_INIT 0x2u

/* The event type that matches every type (ABI 1.3): a handler that lists
 * it receives every event, whatever its type, in registration order among
 * the other handlers of that type. A host before 1.3 reads it as the
 * literal type "*", so such a handler needs a host of ABI 1.3 or later. */
#define IB_EVENT_TYPE_ANY "*"

/* One handler. `name` is unique within the plugin ([A-Za-z0-9._-],
 * 1..IB_PLUGIN_NAME_MAX bytes). `event_types` is a NULL-terminated list of
 * at least one distinct event type (1..IB_EVENT_TYPE_MAX bytes, no
 * whitespace or control bytes, matched exactly; the one wildcard is
 * IB_EVENT_TYPE_ANY, "*", which matches every type), at most
 * IB_EVENT_TYPES_MAX. The host checks the list at load, or after init()
 * with IB_HANDLER_TYPES_AFTER_INIT. All pointers
 * must stay valid while the plugin is loaded (static storage is the norm).
 * The host reads `handler_size` bytes per entry (see ib_plugin_desc): the
 * flags of a plugin built before 1.2 read as 0. */
typedef struct ib_handler_desc {
    const char *name;
    const char *const *event_types;
    ib_handle_fn handle;
    /* ABI 1.2 */
    uint32_t flags; /* IB_HANDLER_* bits; 0 = an ordinary handler */
} ib_handler_desc;

/* Size of an ABI 1.0 (and 1.1) handler entry: the smallest stride the host
 * accepts. */
#define IB_HANDLER_DESC_SIZE_1_0 (offsetof(ib_handler_desc, handle) + sizeof(ib_handle_fn))
/* The smallest stride that carries `flags`. */
#define IB_HANDLER_DESC_SIZE_1_2 (offsetof(ib_handler_desc, flags) + sizeof(uint32_t))

/* Called once, after the checks pass and before any handler runs.
 * `config` is the plugin's configuration string (never NULL; "" when none
 * was given), BORROWED for the call. `api` is BORROWED until fini() returns.
 * On success returns 0 and may set *state (passed to every handle() and to
 * fini()). On failure returns non-zero and writes a one-line reason into
 * errbuf (errlen >= IB_PLUGIN_ERRBUF_MIN bytes; NUL-terminated); the host
 * then reports "plugin <file>: init failed: <reason>", unloads the plugin
 * and does not call fini(), so free what you allocated before returning. */
typedef int (*ib_plugin_init_fn)(void **state, const ib_host_api *api, const char *config,
                                 char *errbuf, size_t errlen);
/* Called once at shutdown after every handler call has returned and before
 * the library is unloaded; frees `state`. Only called if init succeeded
 * (or the plugin has no init). */
typedef void (*ib_plugin_fini_fn)(void *state);

/* The plugin descriptor. Fill the first five fields with
 * IB_PLUGIN_DESC_HEADER. The first five fields keep their offsets in every
 * ABI version, so any host can tell what it is looking at. */
typedef struct ib_plugin_desc {
    uint32_t magic;         /* IB_PLUGIN_MAGIC */
    uint32_t size;          /* sizeof(ib_plugin_desc) as the plugin built it */
    uint16_t abi_major;     /* IB_ABI_MAJOR */
    uint16_t abi_minor;     /* IB_ABI_MINOR */
    uint32_t handler_size;  /* sizeof(ib_handler_desc): stride of `handlers` */
    const char *name;       /* [A-Za-z0-9._-], 1..IB_PLUGIN_NAME_MAX bytes; part of consumer ids */
    const char *version;    /* printable, no spaces, 1..64 bytes, e.g. "1.2.0" */
    ib_plugin_init_fn init; /* optional */
    ib_plugin_fini_fn fini; /* optional */
    const ib_handler_desc *handlers;
    size_t handler_count; /* at least 1 */
    /* ABI 1.1 */
    const char *description; /* optional one-line description */
} ib_plugin_desc;

/* Size of an ABI 1.0 descriptor: the smallest the host accepts. */
#define IB_PLUGIN_DESC_SIZE_1_0 offsetof(ib_plugin_desc, description)

#define IB_PLUGIN_DESC_HEADER                                                                      \
    .magic = IB_PLUGIN_MAGIC, .size = sizeof(ib_plugin_desc), .abi_major = IB_ABI_MAJOR,           \
    .abi_minor = IB_ABI_MINOR, .handler_size = sizeof(ib_handler_desc)

/* The one symbol a plugin exports (functions, not data, are looked up).
 * Called once, right after dlopen; must do nothing but return a pointer to
 * a descriptor with static storage duration, which the host never writes
 * through and reads while the plugin is loaded. Declared here with default
 * visibility so the definition is exported even under -fvisibility=hidden. */
typedef const ib_plugin_desc *(*ib_plugin_entry_fn)(void);
#define IB_PLUGIN_ENTRY_SYMBOL "ib_plugin_entry"
IB_PLUGIN_EXPORT const ib_plugin_desc *ib_plugin_entry(void);

#ifdef __cplusplus
}
#endif

#endif
