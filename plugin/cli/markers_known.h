/* ibus markers: a --consumer the recorder has never heard of is an error,
 * not a quiet "not processed". */
#ifndef IB_CLI_MARKERS_KNOWN_H
#define IB_CLI_MARKERS_KNOWN_H

#include "recorder.h"

/* Returns 0 when `r` holds at least one marker of `consumer`, of another
 * handler of the same <durable>/<plugin> (everything up to the last '/':
 * a handler that only ever rejected has no markers), or no marker at all
 * (nothing to compare with). Otherwise prints, for `ibus markers ACTION` on `uri`, that the
 * identity is unknown and which identities the recorder knows (the first 16), and returns 2; a
 * recorder error is printed and gives 1 (2 for a kind that cannot list). Walks every marker only
 * when the identity is unknown. */
int ib_cli_markers_identity_check(ib_recorder *r, const char *uri, const char *action,
                                  const char *consumer);

#endif
