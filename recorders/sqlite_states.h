/* The JSON text of a journal row's states (schema version 4): written by
 * the recorder, read back by its catch-up, and by SQLite's own JSON
 * functions in the views. One state is
 *     ["<32 hex digits>",<done 0|1>,<ts>,<fp>,"<owner>",<expires_ms>,<attempts>]
 * with integers in decimal (fp as a signed 64-bit number), and a row is a
 * JSON array of them, in the order they were put. */
#ifndef IB_SQLITE_STATES_H
#define IB_SQLITE_STATES_H

#include <stddef.h>

#include "sqlite_tail.h"

/* Bytes ib__sq_state_encode writes at most: an owner of IB_OWNER_MAX
 * bytes each escaped to six, seven numbers of up to 20 characters, the
 * id and the punctuation. */
#define IB__SQ_STATE_TEXT_MAX (64 + 6 * IB_OWNER_MAX + 7 * 21)

/* Writes one state as JSON into `out` (IB__SQ_STATE_TEXT_MAX bytes, not
 * NUL-terminated) and returns its length. `event_id` is a normalised id;
 * ts and fp are written as 0 unless `st->done`. */
size_t ib__sq_state_encode(char *out, const char *event_id, const sq_state *st);

/* Called for each state of a row, in order: `index` counts from 0,
 * `st->id` holds the packed id. Nonzero stops the walk. */
typedef int (*ib__sq_state_visit)(void *ctx, size_t index, const sq_state *st);

/* Parses a row's states (`text`, `len` bytes, no NUL needed) and calls
 * `visit` for each. Strict: only what ib__sq_state_encode writes, in an
 * array, with optional JSON whitespace between tokens. Returns 0 when
 * the whole text was read, -1 when it is malformed (the states before the
 * fault were visited), or the visitor's nonzero result. */
int ib__sq_states_parse(const char *text, size_t len, ib__sq_state_visit visit, void *ctx);

#endif
