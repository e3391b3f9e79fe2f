/* SPDX-License-Identifier: Apache-2.0 */
/* The kv: recorder's connection and bucket: connecting (its own
 * connection from url=, or the host's), binding to the bucket and checking
 * its settings, creating it only when asked, and the admin walks over its
 * keys (stats, list). */
#include "kv_bucket.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "redact.h"

#define NS_PER_MS 1000000LL

/* Most servers a url= list may name. */
#define KV_URLS_MAX 16

/* Options for url= and creds=. nats.c 3.4.1's natsOptions_SetURL takes one
 * URL only (a list fails every connect), so a comma-separated list is
 * split and given as the server list. */
static natsStatus own_options(natsOptions **out, const ib__recorder_config *cfg)
{
    char urls[sizeof(cfg->kv_url)];
    const char *servers[KV_URLS_MAX];
    int count = 0;
    snprintf(urls, sizeof(urls), "%s", cfg->kv_url);
    for (char *save = NULL, *u = strtok_r(urls, ",", &save); u != NULL && count < KV_URLS_MAX;
         u = strtok_r(NULL, ",", &save))
        if (*u != '\0')
            servers[count++] = u;
    natsStatus s = natsOptions_Create(out);
    if (s == NATS_OK)
        s = natsOptions_SetServers(*out, servers, count);
    if (s == NATS_OK && cfg->kv_creds[0] != '\0')
        s = natsOptions_SetUserCredentialsFromFiles(*out, cfg->kv_creds, NULL);
    if (s == NATS_OK)
        s = natsOptions_SetMaxReconnect(*out, -1);
    return s;
}

ib_status ib__kv_connect(kv_recorder *k, const ib__recorder_config *cfg, ib_error *err)
{
    natsStatus s = NATS_OK;
    if (cfg->kv_url[0] != '\0') {
        natsOptions *o = NULL;
        s = own_options(&o, cfg);
        if (s == NATS_OK)
            s = natsConnection_Connect(&k->nc, o);
        natsOptions_Destroy(o);
        if (s != NATS_OK) {
            char shown[IB_REDACT_MAX];
            return ib_error_set(err, IB_ERR_NATS, "recorder kv:%s: cannot connect to url=%s: %s",
                                k->bucket, ib_redact_url(shown, sizeof(shown), cfg->kv_url),
                                natsStatus_GetText(s));
        }
        k->own_nc = true;
    } else if (cfg->nats_connection != NULL) {
        k->nc = cfg->nats_connection;
    } else {
        return ib_error_set(err, IB_ERR_CONFIG,
                            "recorder kv:%s: no NATS connection: give the markers' server as "
                            "url= in the URI, or open it where the host passes its connection",
                            k->bucket);
    }
    snprintf(k->api_prefix, sizeof(k->api_prefix), "%s", cfg->kv_api_prefix);
    if (ib_js_api_is_default(k->api_prefix))
        k->put_prefix[0] = '\0';
    else
        snprintf(k->put_prefix, sizeof(k->put_prefix), "%s.", k->api_prefix);
    jsOptions jo;
    jsOptions_Init(&jo);
    jo.Wait = k->wait_ms;
    jo.Prefix = k->api_prefix;
    s = natsConnection_JetStream(&k->js, k->nc, &jo);
    return s == NATS_OK ? IB_OK : ib__kv_fail(k, err, s, "JetStream context");
}

void ib__kv_disconnect(kv_recorder *k)
{
    if (k->acks != NULL)
        natsSubscription_Unsubscribe(k->acks);
    natsSubscription_Destroy(k->acks);
    k->acks = NULL;
    kvStore_Destroy(k->kv);
    jsCtx_Destroy(k->js);
    if (k->own_nc) {
        natsConnection_Close(k->nc);
        natsConnection_Destroy(k->nc);
    }
    k->kv = NULL;
    k->js = NULL;
    k->nc = NULL;
}

static ib_status create_bucket(kv_recorder *k, const ib__recorder_config *cfg, ib_error *err)
{
    kvConfig kc;
    kvConfig_Init(&kc);
    kc.Bucket = k->bucket;
    kc.History = 1;
    /* nats.c 3.4.1 takes (and reports) the TTL in nanoseconds. */
    kc.TTL = cfg->kv_ttl_ms > 0 ? cfg->kv_ttl_ms * NS_PER_MS : 0;
    kc.MaxBytes = cfg->kv_max_bytes > 0 ? cfg->kv_max_bytes : -1;
    kc.Replicas = cfg->kv_replicas > 0 ? cfg->kv_replicas : 1;
    kc.StorageType = js_FileStorage;
    natsStatus s = js_CreateKeyValue(&k->kv, k->js, &kc);
    return s == NATS_OK ? IB_OK : ib__kv_fail(k, err, s, "cannot create the bucket");
}

/* The bucket's settings against what the URI asks for. */
static ib_status check_settings(kv_recorder *k, const ib__recorder_config *cfg, ib_error *err)
{
    kvStatus *sts = NULL;
    natsStatus s = kvStore_Status(&sts, k->kv);
    if (s != NATS_OK)
        return ib__kv_fail(k, err, s, "cannot read the bucket's settings");
    int64_t ttl = kvStatus_TTL(sts) / NS_PER_MS, replicas = kvStatus_Replicas(sts);
    int64_t history = kvStatus_History(sts);
    kvStatus_Destroy(sts);
    if (cfg->kv_replicas > 0 && replicas != cfg->kv_replicas)
        return ib_error_set(err, IB_ERR_CONFIG,
                            "recorder kv:%s: the bucket has %lld replicas, the URI asks for %d",
                            k->bucket, (long long)replicas, cfg->kv_replicas);
    if (cfg->kv_ttl_ms >= 0 && ttl != cfg->kv_ttl_ms)
        return ib_error_set(err, IB_ERR_CONFIG,
                            "recorder kv:%s: the bucket's TTL is %lld ms, the URI asks for %lld ms",
                            k->bucket, (long long)ttl, (long long)cfg->kv_ttl_ms);
    if (history != 1)
        return ib_error_set(err, IB_ERR_CONFIG,
                            "recorder kv:%s: the bucket keeps a history of %lld values per key; "
                            "markers need 1 (every extra value costs memory on every replica)",
                            k->bucket, (long long)history);
    if (cfg->kv_min_ttl_ms > 0 && ttl > 0 && ttl < cfg->kv_min_ttl_ms)
        return ib_error_set(err, IB_ERR_CONFIG,
                            "recorder kv:%s: the bucket's TTL of %lld ms is shorter than the "
                            "redelivery horizon of %lld ms (min_ttl): markers would expire while "
                            "their events can still be redelivered",
                            k->bucket, (long long)ttl, (long long)cfg->kv_min_ttl_ms);
    return IB_OK;
}

ib_status ib__kv_bind(kv_recorder *k, const ib__recorder_config *cfg, ib_error *err)
{
    if (cfg->kv_min_ttl_ms > 0 && cfg->kv_ttl_ms > 0 && cfg->kv_ttl_ms < cfg->kv_min_ttl_ms)
        return ib_error_set(err, IB_ERR_CONFIG,
                            "recorder kv:%s: ttl %lld ms is shorter than the redelivery horizon "
                            "of %lld ms (min_ttl)",
                            k->bucket, (long long)cfg->kv_ttl_ms, (long long)cfg->kv_min_ttl_ms);
    natsStatus s = js_KeyValue(&k->kv, k->js, k->bucket);
    ib_status st = IB_OK;
    if (s == NATS_NOT_FOUND && !cfg->kv_create)
        return ib_error_set(err, IB_ERR_CONFIG,
                            "recorder kv:%s: the bucket does not exist in the JetStream of %s "
                            "(create it, add create=1 to the URI to let the recorder create it, "
                            "or name the JetStream domain it is in with domain=)",
                            k->bucket, k->api_prefix);
    if (s == NATS_NOT_FOUND)
        st = create_bucket(k, cfg, err);
    else if (s != NATS_OK)
        st = ib__kv_fail(k, err, s, "cannot bind to the bucket");
    return st == IB_OK ? check_settings(k, cfg, err) : st;
}

/* --- walks over the keys (stats, list) --------------------------------------- */

/* One key of the bucket, split: type 'd' or 'c', the hex consumer, the
 * id, and for 'c' the epoch. Pointers into a copy the caller frees. */
typedef struct kv_key {
    char type;
    const char *hex, *id;
    uint32_t epoch;
    int64_t ts; /* d: when marked */
} kv_key;

static bool split_key(kv_key *out, char *key)
{
    if ((key[0] != 'd' && key[0] != 'c') || key[1] != '.')
        return false;
    out->type = key[0];
    out->hex = key + 2;
    char *dot = strchr(key + 2, '.');
    if (dot == NULL)
        return false;
    *dot = '\0';
    out->id = dot + 1;
    out->epoch = 0;
    out->ts = 0;
    if (out->type == 'c') {
        dot = strchr(dot + 1, '.');
        if (dot == NULL)
            return false;
        *dot = '\0';
        out->epoch = (uint32_t)strtoul(dot + 1, NULL, 10);
    }
    return true;
}

static void unhex(char *out, const char *hex)
{
    size_t n = 0;
    for (; hex[0] != '\0' && hex[1] != '\0' && n < IB_CONSUMER_MAX; hex += 2) {
        unsigned v = 0;
        sscanf(hex, "%2x", &v);
        out[n++] = (char)v;
    }
    out[n] = '\0';
}

typedef struct key_walk {
    kvKeysList list;
    kv_key *keys;
    size_t n;
} key_walk;

static void walk_free(key_walk *w)
{
    kvKeysList_Destroy(&w->list);
    free(w->keys);
}

/* Every live key of the bucket, split. An empty bucket is no error. */
static ib_status walk_keys(kv_recorder *k, key_walk *w, ib_error *err)
{
    memset(w, 0, sizeof(*w));
    natsStatus s = kvStore_Keys(&w->list, k->kv, NULL);
    if (s == NATS_NOT_FOUND)
        return IB_OK;
    if (s != NATS_OK)
        return ib__kv_fail(k, err, s, "cannot list the keys");
    w->keys = calloc((size_t)w->list.Count + 1, sizeof(*w->keys));
    if (w->keys == NULL) {
        walk_free(w);
        return ib_error_set(err, IB_ERR_NOMEM, "recorder kv:%s: no memory to list keys", k->bucket);
    }
    for (int i = 0; i < w->list.Count; i++)
        if (split_key(&w->keys[w->n], w->list.Keys[i]))
            w->n++;
    return IB_OK;
}

/* Orders by consumer, id, type ('c' before 'd'), then epoch. */
static int cmp_key(const void *a, const void *b)
{
    const kv_key *x = a, *y = b;
    int c = strcmp(x->hex, y->hex);
    if (c == 0)
        c = strcmp(x->id, y->id);
    if (c == 0)
        c = (x->type > y->type) - (x->type < y->type);
    if (c == 0)
        c = (x->epoch > y->epoch) - (x->epoch < y->epoch);
    return c;
}

static ib_status read_ts(kv_recorder *k, kv_key *key, ib_error *err)
{
    char subject[KV_SUBJECT_MAX];
    kv_read rd;
    ib__kv_subject_hex(k, subject, 'd', key->hex, key->id, 0);
    ib_status st = ib__kv_read_last(k, &rd, subject, err);
    key->ts = st == IB_OK && rd.found ? strtoll(rd.value, NULL, 10) : 0;
    return st;
}

/* The state written in the claim epoch `key`: its attempts, lease end
 * (unix ms) and holder ("" when released); all zero when it is gone. */
static ib_status read_claim(kv_recorder *k, const kv_key *key, kv_head *c, ib_error *err)
{
    char subject[KV_SUBJECT_MAX];
    kv_read rd;
    ib__kv_subject_hex(k, subject, 'c', key->hex, key->id, key->epoch);
    ib_status st = ib__kv_read_last(k, &rd, subject, err);
    memset(c, 0, sizeof(*c));
    if (st == IB_OK && rd.found)
        ib__kv_parse_claim(c, rd.value);
    return st;
}

static void count_marker(ib_recorder_stats *stats, const kv_key *key, const char **last_hex)
{
    stats->markers++;
    if (*last_hex == NULL || strcmp(*last_hex, key->hex) != 0)
        stats->consumers++;
    *last_hex = key->hex;
    if (stats->oldest_ts_ms == 0 || key->ts < stats->oldest_ts_ms)
        stats->oldest_ts_ms = key->ts;
    if (key->ts > stats->newest_ts_ms)
        stats->newest_ts_ms = key->ts;
}

/* Walks every key and reads every marker: a diagnostic for `ibus markers
 * stats`, costly on a large bucket. */
ib_status ib__kv_stats(ib_recorder *r, ib_recorder_stats *stats, ib_error *err)
{
    kv_recorder *k = kv_of(r);
    key_walk w;
    ib_status st = walk_keys(k, &w, err);
    if (st != IB_OK)
        return st;
    qsort(w.keys, w.n, sizeof(*w.keys), cmp_key);
    const char *last_hex = NULL;
    for (size_t i = 0; i < w.n && st == IB_OK; i++) {
        kv_key *key = &w.keys[i];
        const kv_key *next = i + 1 < w.n ? &w.keys[i + 1] : NULL;
        bool same_id =
            next != NULL && strcmp(next->hex, key->hex) == 0 && strcmp(next->id, key->id) == 0;
        kv_head claim = {0};
        if (key->type == 'd' && (st = read_ts(k, key, err)) == IB_OK)
            count_marker(stats, key, &last_hex);
        /* 'c' sorts before 'd': the highest epoch is the last 'c' of its
         * id, and the id is done when a 'd' follows it. */
        else if (key->type == 'c' && !same_id)
            st = read_claim(k, key, &claim, err);
        stats->claims += claim.owner[0] != '\0';
    }
    jsStreamInfo *si = NULL;
    jsErrCode jerr = 0;
    if (st == IB_OK && js_GetStreamInfo(&si, k->js, k->stream, NULL, &jerr) == NATS_OK) {
        stats->storage_bytes = si->State.Bytes;
        jsStreamInfo_Destroy(si);
    }
    walk_free(&w);
    return st;
}

ib_status ib__kv_attempt_stats(ib_recorder *r, ib_attempt_stats *out, uint32_t max_attempts,
                               ib_error *err)
{
    kv_recorder *k = kv_of(r);
    key_walk w;
    ib_status st = walk_keys(k, &w, err);
    if (st != IB_OK)
        return st;
    qsort(w.keys, w.n, sizeof(*w.keys), cmp_key);
    for (size_t i = 0; i < w.n && st == IB_OK; i++) {
        const kv_key *key = &w.keys[i];
        const kv_key *next = i + 1 < w.n ? &w.keys[i + 1] : NULL;
        bool same_id =
            next != NULL && strcmp(next->hex, key->hex) == 0 && strcmp(next->id, key->id) == 0;
        kv_head claim;
        /* as in stats: the last 'c' of an id is its highest epoch, and a
         * 'd' after it means done */
        if (key->type != 'c' || same_id || (st = read_claim(k, key, &claim, err)) != IB_OK)
            continue;
        out->attempted += claim.attempts > 0;
        out->exhausted += claim.attempts >= max_attempts;
    }
    walk_free(&w);
    return st;
}

/* Counts one key of the walk in its consumer's summary: a marker, or the
 * newest claim epoch of an id that is not done. */
static ib_status summarize_key(kv_recorder *k, ib__summary_list *l, kv_key *key, bool newest_claim,
                               int64_t now, uint32_t max_attempts, ib_error *err)
{
    char name[IB_CONSUMER_MAX + 1];
    kv_head c = {0};
    ib_status st = IB_OK;
    if (key->type == 'd')
        st = read_ts(k, key, err);
    else if (newest_claim)
        st = read_claim(k, key, &c, err);
    else
        return IB_OK;
    if (st != IB_OK || (key->type == 'c' && c.owner[0] == '\0' && c.attempts == 0))
        return st;
    unhex(name, key->hex);
    ib__consumer_summary *s = ib__summary_entry(l, name, strlen(name));
    if (s == NULL)
        return ib_error_set(err, IB_ERR_NOMEM, "recorder kv:%s: out of memory", k->bucket);
    if (key->type == 'd')
        ib__summary_marker(s, key->ts);
    if (key->type == 'c' && c.owner[0] != '\0')
        ib__summary_claim(s, c.end - now, c.owner);
    if (key->type == 'c' && c.attempts > 0)
        ib__summary_attempts(s, c.attempts, max_attempts);
    return IB_OK;
}

ib_status ib__kv_summarize(ib_recorder *r, ib__consumer_summary **out, size_t *n,
                           uint32_t max_attempts, ib_error *err)
{
    kv_recorder *k = kv_of(r);
    ib__summary_list l = {0};
    key_walk w;
    ib_status st = walk_keys(k, &w, err);
    if (st != IB_OK)
        return st;
    qsort(w.keys, w.n, sizeof(*w.keys), cmp_key);
    int64_t now = r->now_ms(); /* lease ends are wall clock */
    for (size_t i = 0; i < w.n && st == IB_OK; i++) {
        const kv_key *next = i + 1 < w.n ? &w.keys[i + 1] : NULL;
        /* as in stats: the last 'c' of an id is its newest epoch, and a
         * 'd' after it means done */
        bool same_id = next != NULL && strcmp(next->hex, w.keys[i].hex) == 0 &&
                       strcmp(next->id, w.keys[i].id) == 0;
        st = summarize_key(k, &l, &w.keys[i], !same_id, now, max_attempts, err);
    }
    walk_free(&w);
    if (st != IB_OK) {
        ib__consumer_summaries_free(l.v, l.n);
        return st;
    }
    ib__summary_take(&l, out, n);
    return IB_OK;
}

static int cmp_newest(const void *a, const void *b)
{
    const kv_key *x = a, *y = b;
    return (x->ts < y->ts) - (x->ts > y->ts);
}

/* Every marker of `consumer` (NULL = all), read and sorted newest first:
 * like stats, a walk over the whole bucket. */
ib_status ib__kv_list(ib_recorder *r, const char *consumer, size_t limit, ib_marker_visit_fn visit,
                      void *ctx, ib_error *err)
{
    kv_recorder *k = kv_of(r);
    key_walk w;
    char hex[2 * IB_CONSUMER_MAX + 1] = "";
    if (consumer != NULL)
        ib__kv_consumer_hex(hex, consumer);
    ib_status st = walk_keys(k, &w, err);
    if (st != IB_OK)
        return st;
    size_t m = 0;
    for (size_t i = 0; i < w.n && st == IB_OK; i++) {
        if (w.keys[i].type != 'd' || (consumer != NULL && strcmp(w.keys[i].hex, hex) != 0))
            continue;
        st = read_ts(k, &w.keys[i], err);
        w.keys[m++] = w.keys[i];
    }
    qsort(w.keys, m, sizeof(*w.keys), cmp_newest);
    char name[IB_CONSUMER_MAX + 1];
    for (size_t i = 0; i < m && st == IB_OK && (limit == 0 || i < limit); i++) {
        unhex(name, w.keys[i].hex);
        ib_marker_info info = {name, w.keys[i].id, w.keys[i].ts};
        if (visit(ctx, &info) != 0)
            break;
    }
    walk_free(&w);
    return st;
}
