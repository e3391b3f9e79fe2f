/* SPDX-License-Identifier: Apache-2.0 */
/* Files of an integration test: its temporary directory, the logs and
 * audit files the processes write, and polling them with a deadline. */
#ifndef IB_IT_FILES_H
#define IB_IT_FILES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Creates a fresh private directory "<TMPDIR>/ibus-it-XXXXXX" into `out`
 * (PATH_MAX bytes). Returns false on failure. */
bool it_tmpdir_create(char *out, size_t cap);

/* "<dir>/<name>" into out; false (and out truncated) if it does not fit. */
bool it_join(char *out, size_t cap, const char *dir, const char *name);

/* Removes `dir` and everything below it (no symlinks followed). */
void it_tmpdir_remove(const char *dir);

/* Reads a whole file into a NUL-terminated malloc'd buffer (the caller
 * frees it); `*len` (may be NULL) gets its size. NULL if it cannot be read;
 * a missing file is not an error here, just NULL. */
char *it_file_read(size_t *len, const char *path);

/* Writes `len` bytes to `path` (created 0600, truncated). */
bool it_file_write(const char *path, const void *data, size_t len);

/* Number of complete ('\n'-terminated) lines; 0 for a missing file. */
size_t it_file_lines(const char *path);

/* Polls until `path` has at least `n` complete lines or timeout_ms passes;
 * returns the last count seen. */
size_t it_wait_lines(const char *path, size_t n, int64_t timeout_ms);

/* True if the file contains `needle`. */
bool it_file_contains(const char *path, const char *needle);

/* Splits a file into its complete lines. `*lines` is a malloc'd array of
 * malloc'd strings without '\n'; free with it_lines_free. Returns the count
 * (0 and NULL for a missing or empty file). */
size_t it_file_read_lines(char ***lines, const char *path);
void it_lines_free(char **lines, size_t n);

/* The n-th space-separated field of a line (0-based) copied into out;
 * false if the line has fewer fields. */
bool it_field(char *out, size_t cap, const char *line, unsigned n);

/* Prints the last `max_lines` lines of every *.err and *.out file in `dir`
 * to stderr, for the diagnosis of a failed test. */
void it_dump_logs(const char *dir, size_t max_lines);

#endif
