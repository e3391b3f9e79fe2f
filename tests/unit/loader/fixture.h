/* SPDX-License-Identifier: Apache-2.0 */
/* Shared helpers of the plugin loader tests: a private directory to stage
 * plugin files in (so their modes and owners are the test's choice, not the
 * build tree's), and a fake host API table. */
#ifndef IB_PLUGIN_FIXTURE_H
#define IB_PLUGIN_FIXTURE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "infinity_bus/plugin.h"

/* Creates a fresh 0700 directory; returns its path (owned by the fixture). */
const char *fx_dir(void);
/* Copies `file` of directory `from` into fx_dir() (or fx_dir()/sub when sub
 * is non-NULL, created 0700) with `mode`; returns a malloc'd path. */
char *fx_stage(const char *from, const char *file, const char *sub, mode_t mode);
/* Writes `text` into fx_dir()/name; returns a malloc'd path. */
char *fx_write(const char *name, const char *text);
/* Reads a whole file into a malloc'd string ("" if missing). */
char *fx_read(const char *path);
/* Removes fx_dir() and everything in it. */
void fx_cleanup(void);

/* Returns a malloc'd string built like printf. */
char *fx_fmt(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* The fake host API: log lines go to fx_log (last line), publish records
 * its request and answers fx_publish_result. */
extern const ib_host_api fx_host;
extern char fx_log[512];
extern int fx_publish_result;
extern int fx_publish_calls;
/* Copies of the last request publish() received. */
extern char fx_published_type[64], fx_published_id[33], fx_published_payload[256];
extern char fx_published_header[128]; /* "key=value" of its first header */

struct ib_dispatch;
struct ib_delivery;
struct ib_event;
/* Builds an event of `type` with a fresh uuid4 id and `payload`, stores it
 * in `*ev` (free with ib_event_free) and runs it through `d` as delivery
 * number `delivery_count` of stream sequence 7 on subject "events.test".
 * Aborts the test on any error. */
void fx_run_event(struct ib_dispatch *d, struct ib_delivery *dl, struct ib_event **ev,
                  const char *type, const char *payload, uint64_t delivery_count);
/* Runs the already built `ev` again, as delivery `delivery_count`. */
void fx_rerun_event(struct ib_dispatch *d, struct ib_delivery *dl, const struct ib_event *ev,
                    uint64_t delivery_count);

#endif
