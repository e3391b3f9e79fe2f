/* SPDX-License-Identifier: Apache-2.0 */
/* Option values that become NATS names, subjects or header text, checked
 * before anything uses them: a control byte or a space in a subject would
 * end its protocol token, a '.' in a durable name would name another API
 * subject, a CR/LF in a consumer identity would start a header line of its
 * own (the http plugin sends it as Ibus-Consumer). Each check prints
 * "ibus CMD: --OPTION 'VALUE': why" to stderr (control bytes shown as
 * \xNN) and returns -1, or returns 0. A NULL value is an option not given:
 * 0. */
#ifndef IB_CLI_INPUT_CHECK_H
#define IB_CLI_INPUT_CHECK_H

/* `value`, or NULL when it is NULL or "": for options whose empty value
 * means "not given". */
const char *ib_cli_given(const char *value);

/* A stream or durable name (ib_nats_name_problem). */
int ib_cli_check_name(const char *cmd, const char *option, const char *value);

/* A subject, with IB_SUBJECT_* flags (ib_nats_subject_problem). */
int ib_cli_check_subject(const char *cmd, const char *option, const char *value, unsigned flags);

/* A comma-separated list of filter subjects (--stream-subjects). */
int ib_cli_check_subject_list(const char *cmd, const char *option, const char *list);

/* Text that reaches a header or a consumer identity: no control byte. */
int ib_cli_check_text(const char *cmd, const char *option, const char *value);

#endif
