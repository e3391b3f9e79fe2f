/* SPDX-License-Identifier: Apache-2.0 */
/* The randomized model test: a seed decides every call the workers make,
 * every fault injected into them, every kill -9, SIGSTOP and seed
 * statement of the parent; the model checks every answer
 * (model_check.h). Timing is the machine's, so two runs of one seed make
 * the same choices but interleave differently. */
#ifndef IB_MODEL_RANDOM_H
#define IB_MODEL_RANDOM_H

#include <stdio.h>

#include "model_session.h"

/* One run of cfg->seed. Returns 0 once it ran (its violations are in
 * `fig`), or -1 with `why` when it could not start. */
int model_run_random(const model_config *cfg, model_figures *fig, char *why, size_t why_len);

/* Adds `one` run's figures to `sum`. */
void model_figures_add(model_figures *sum, const model_figures *one);

/* The figures, as the long run reports them. */
void model_figures_print(FILE *out, const model_figures *f);

#endif
