/* SPDX-License-Identifier: Apache-2.0 */
/* A strict reader of the Prometheus text format 0.0.4, for tests: it checks
 * the structure (HELP/TYPE before samples, one TYPE per family, cumulative
 * histogram buckets ending in +Inf equal to _count, no duplicate series)
 * and lets a test read a sample's value back. */
#ifndef IB_TEST_PROM_TEXT_H
#define IB_TEST_PROM_TEXT_H

#include <stddef.h>

typedef struct prom_sample {
    char name[96];
    char labels[640]; /* raw text between the braces, "" when none */
    double value;
} prom_sample;

typedef struct prom_text {
    prom_sample *samples;
    size_t count;
} prom_text;

/* Parses `text` (len bytes). Returns 0 when well-formed; otherwise -1 with a
 * reason (and the offending line) in `why`. Free with prom_text_free,
 * also after an error. */
int prom_text_parse(prom_text *out, const char *text, size_t len, char *why, size_t why_len);
void prom_text_free(prom_text *p);

/* Value of the sample `name` with exactly the label text `labels` ("" for
 * none, e.g. "reason=\"decode\""), or -1 when absent. */
double prom_text_value(const prom_text *p, const char *name, const char *labels);

#endif
