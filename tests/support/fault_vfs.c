/* SPDX-License-Identifier: Apache-2.0 */
/* Fault injection into SQLite (fault_vfs.h): the counters, the allocator
 * wrapper, the shim VFS and the spec parser. */
#include "fault_vfs.h"

#include <limits.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sqlite3.h>

/* --- the counters ------------------------------------------------------- */

/* One kind's counter and its armed fault. Calls are numbered from 1; the
 * calls numbered [from, until) fail with rc. from 0 = disarmed. */
typedef struct fault_slot {
    _Atomic uint64_t calls;
    _Atomic uint64_t fired;
    _Atomic uint64_t from;
    _Atomic uint64_t until;
    _Atomic int rc;
} fault_slot;

static fault_slot slots[FAULT_KINDS];

static const char *const kind_names[FAULT_KINDS] = {
    "write", "sync", "read", "lock", "shmlock", "shmmap", "alloc",
};
static const char *const code_names[FAULT_CODES] = {"full", "ioerr", "busy", "nomem"};
/* The SQLITE_IOERR_* a kind fails with for "ioerr". */
static const int ioerr_codes[FAULT_KINDS] = {
    SQLITE_IOERR_WRITE,
    SQLITE_IOERR_FSYNC,
    SQLITE_IOERR_READ,
    SQLITE_IOERR_LOCK,
    SQLITE_IOERR_SHMLOCK,
    SQLITE_IOERR_SHMMAP,
    0,
};

/* Counts one call of `kind`: SQLITE_OK to let it through, else the code
 * it must fail with. */
static int fault_due(fault_kind kind)
{
    fault_slot *s = &slots[kind];
    uint64_t n = atomic_fetch_add(&s->calls, 1) + 1;
    uint64_t from = atomic_load(&s->from);
    if (from == 0 || n < from || n >= atomic_load(&s->until))
        return SQLITE_OK;
    atomic_fetch_add(&s->fired, 1);
    return atomic_load(&s->rc);
}

int fault_vfs_result(fault_kind kind, fault_code code)
{
    if ((unsigned)kind >= FAULT_KINDS || (unsigned)code >= FAULT_CODES)
        return 0;
    if ((kind == FAULT_ALLOC) != (code == FAULT_NOMEM))
        return 0;
    switch (code) {
    case FAULT_FULL:
        return SQLITE_FULL;
    case FAULT_IOERR:
        return ioerr_codes[kind];
    case FAULT_BUSY:
        return kind == FAULT_LOCK || kind == FAULT_SHMLOCK ? SQLITE_BUSY : 0;
    default:
        return SQLITE_NOMEM;
    }
}

int fault_vfs_arm(const fault_spec *f)
{
    int rc = f != NULL ? fault_vfs_result(f->kind, f->code) : 0;
    if (rc == 0 || f->nth == 0)
        return -1;
    fault_slot *s = &slots[f->kind];
    atomic_store(&s->from, 0);
    uint64_t from = atomic_load(&s->calls) + f->nth;
    atomic_store(&s->rc, rc);
    atomic_store(&s->until, f->count == 0 ? UINT64_MAX : from + f->count);
    atomic_store(&s->from, from);
    return 0;
}

void fault_vfs_disarm(void)
{
    for (int k = 0; k < FAULT_KINDS; k++)
        atomic_store(&slots[k].from, 0);
}

uint64_t fault_vfs_calls(fault_kind kind)
{
    return (unsigned)kind < FAULT_KINDS ? atomic_load(&slots[kind].calls) : 0;
}

uint64_t fault_vfs_fired(fault_kind kind)
{
    return (unsigned)kind < FAULT_KINDS ? atomic_load(&slots[kind].fired) : 0;
}

uint64_t fault_vfs_fired_total(void)
{
    uint64_t n = 0;
    for (int k = 0; k < FAULT_KINDS; k++)
        n += atomic_load(&slots[k].fired);
    return n;
}

const char *fault_kind_name(fault_kind kind)
{
    return (unsigned)kind < FAULT_KINDS ? kind_names[kind] : "?";
}

const char *fault_code_name(fault_code code)
{
    return (unsigned)code < FAULT_CODES ? code_names[code] : "?";
}

/* --- the allocator -------------------------------------------------------- */

/* SQLite's own default allocator, which the wrapper hands every call to. */
static sqlite3_mem_methods base_mem;

static void *fault_malloc(int n)
{
    return fault_due(FAULT_ALLOC) != SQLITE_OK ? NULL : base_mem.xMalloc(n);
}

static void *fault_realloc(void *p, int n)
{
    return fault_due(FAULT_ALLOC) != SQLITE_OK ? NULL : base_mem.xRealloc(p, n);
}

static void fault_free(void *p)
{
    base_mem.xFree(p);
}

static int fault_size(void *p)
{
    return base_mem.xSize(p);
}

static int fault_roundup(int n)
{
    return base_mem.xRoundup(n);
}

static int fault_mem_init(void *app)
{
    (void)app;
    return base_mem.xInit(base_mem.pAppData);
}

static void fault_mem_shutdown(void *app)
{
    (void)app;
    base_mem.xShutdown(base_mem.pAppData);
}

static const sqlite3_mem_methods fault_mem = {
    fault_malloc,  fault_free,     fault_realloc,      fault_size,
    fault_roundup, fault_mem_init, fault_mem_shutdown, NULL,
};

/* --- the files ---------------------------------------------------------- */

/* A file of the shim: the real file (the parent VFS's) lies right after
 * it, in the same allocation (szOsFile covers both). */
typedef struct fault_file {
    sqlite3_file base;
    sqlite3_file *real;
} fault_file;

#define REAL(f) (((fault_file *)(f))->real)
#define REAL_CALL(f, method, ...) REAL(f)->pMethods->method(REAL(f), __VA_ARGS__)

static int file_close(sqlite3_file *f)
{
    return REAL(f)->pMethods->xClose(REAL(f));
}

static int file_read(sqlite3_file *f, void *buf, int amt, sqlite3_int64 off)
{
    int rc = fault_due(FAULT_READ);
    return rc != SQLITE_OK ? rc : REAL_CALL(f, xRead, buf, amt, off);
}

static int file_write(sqlite3_file *f, const void *buf, int amt, sqlite3_int64 off)
{
    int rc = fault_due(FAULT_WRITE);
    return rc != SQLITE_OK ? rc : REAL_CALL(f, xWrite, buf, amt, off);
}

static int file_truncate(sqlite3_file *f, sqlite3_int64 size)
{
    return REAL_CALL(f, xTruncate, size);
}

static int file_sync(sqlite3_file *f, int flags)
{
    int rc = fault_due(FAULT_SYNC);
    return rc != SQLITE_OK ? rc : REAL_CALL(f, xSync, flags);
}

static int file_size(sqlite3_file *f, sqlite3_int64 *size)
{
    return REAL_CALL(f, xFileSize, size);
}

static int file_lock(sqlite3_file *f, int level)
{
    int rc = fault_due(FAULT_LOCK);
    return rc != SQLITE_OK ? rc : REAL_CALL(f, xLock, level);
}

static int file_unlock(sqlite3_file *f, int level)
{
    return REAL_CALL(f, xUnlock, level);
}

static int file_check_reserved(sqlite3_file *f, int *out)
{
    return REAL_CALL(f, xCheckReservedLock, out);
}

static int file_control(sqlite3_file *f, int op, void *arg)
{
    return REAL_CALL(f, xFileControl, op, arg);
}

static int file_sector_size(sqlite3_file *f)
{
    return REAL(f)->pMethods->xSectorSize(REAL(f));
}

static int file_device(sqlite3_file *f)
{
    return REAL(f)->pMethods->xDeviceCharacteristics(REAL(f));
}

static int file_shm_map(sqlite3_file *f, int page, int size, int extend, void volatile **out)
{
    int rc = fault_due(FAULT_SHMMAP);
    return rc != SQLITE_OK ? rc : REAL_CALL(f, xShmMap, page, size, extend, out);
}

/* Only a lock taken can fail: SQLite cannot handle a failed unlock, and
 * no real file system refuses one. */
static int file_shm_lock(sqlite3_file *f, int offset, int n, int flags)
{
    int rc = (flags & SQLITE_SHM_LOCK) != 0 ? fault_due(FAULT_SHMLOCK) : SQLITE_OK;
    return rc != SQLITE_OK ? rc : REAL_CALL(f, xShmLock, offset, n, flags);
}

static void file_shm_barrier(sqlite3_file *f)
{
    REAL(f)->pMethods->xShmBarrier(REAL(f));
}

static int file_shm_unmap(sqlite3_file *f, int delete_flag)
{
    return REAL_CALL(f, xShmUnmap, delete_flag);
}

static int file_fetch(sqlite3_file *f, sqlite3_int64 off, int amt, void **out)
{
    return REAL_CALL(f, xFetch, off, amt, out);
}

static int file_unfetch(sqlite3_file *f, sqlite3_int64 off, void *p)
{
    return REAL_CALL(f, xUnfetch, off, p);
}

static const sqlite3_io_methods fault_io = {
    3,
    file_close,
    file_read,
    file_write,
    file_truncate,
    file_sync,
    file_size,
    file_lock,
    file_unlock,
    file_check_reserved,
    file_control,
    file_sector_size,
    file_device,
    file_shm_map,
    file_shm_lock,
    file_shm_barrier,
    file_shm_unmap,
    file_fetch,
    file_unfetch,
};

/* --- the VFS ---------------------------------------------------------------- */

/* The VFS the shim forwards to: the default one at install time. */
static sqlite3_vfs *parent;

static int vfs_open(sqlite3_vfs *vfs, const char *name, sqlite3_file *f, int flags, int *out_flags)
{
    (void)vfs;
    fault_file *ff = (fault_file *)f;
    ff->real = (sqlite3_file *)(ff + 1);
    ff->real->pMethods = NULL;
    int rc = parent->xOpen(parent, name, ff->real, flags, out_flags);
    /* The shim forwards every method of version 3 (unix has them all); a
     * parent with fewer is refused rather than half wrapped. */
    if (rc == SQLITE_OK && ff->real->pMethods != NULL && ff->real->pMethods->iVersion < 3) {
        ff->real->pMethods->xClose(ff->real);
        ff->real->pMethods = NULL;
        rc = SQLITE_CANTOPEN;
    }
    /* SQLite closes a file whose pMethods is set, even after a failed
     * open: ours is set exactly when the real one is. */
    ff->base.pMethods = ff->real->pMethods != NULL ? &fault_io : NULL;
    return rc;
}

static int vfs_delete(sqlite3_vfs *vfs, const char *name, int sync_dir)
{
    (void)vfs;
    return parent->xDelete(parent, name, sync_dir);
}

static int vfs_access(sqlite3_vfs *vfs, const char *name, int flags, int *out)
{
    (void)vfs;
    return parent->xAccess(parent, name, flags, out);
}

static int vfs_full_pathname(sqlite3_vfs *vfs, const char *name, int n, char *out)
{
    (void)vfs;
    return parent->xFullPathname(parent, name, n, out);
}

static void *vfs_dl_open(sqlite3_vfs *vfs, const char *path)
{
    (void)vfs;
    return parent->xDlOpen(parent, path);
}

static void vfs_dl_error(sqlite3_vfs *vfs, int n, char *msg)
{
    (void)vfs;
    parent->xDlError(parent, n, msg);
}

static void (*vfs_dl_sym(sqlite3_vfs *vfs, void *h, const char *sym))(void)
{
    (void)vfs;
    return parent->xDlSym(parent, h, sym);
}

static void vfs_dl_close(sqlite3_vfs *vfs, void *h)
{
    (void)vfs;
    parent->xDlClose(parent, h);
}

static int vfs_randomness(sqlite3_vfs *vfs, int n, char *out)
{
    (void)vfs;
    return parent->xRandomness(parent, n, out);
}

static int vfs_sleep(sqlite3_vfs *vfs, int us)
{
    (void)vfs;
    return parent->xSleep(parent, us);
}

static int vfs_current_time(sqlite3_vfs *vfs, double *out)
{
    (void)vfs;
    return parent->xCurrentTime(parent, out);
}

static int vfs_last_error(sqlite3_vfs *vfs, int n, char *out)
{
    (void)vfs;
    return parent->xGetLastError != NULL ? parent->xGetLastError(parent, n, out) : 0;
}

static int vfs_current_time64(sqlite3_vfs *vfs, sqlite3_int64 *out)
{
    (void)vfs;
    if (parent->iVersion >= 2 && parent->xCurrentTimeInt64 != NULL)
        return parent->xCurrentTimeInt64(parent, out);
    double day = 0;
    int rc = parent->xCurrentTime(parent, &day);
    *out = (sqlite3_int64)(day * 86400000.0);
    return rc;
}

/* Filled in by fault_vfs_install from the parent: szOsFile, mxPathname. */
static sqlite3_vfs fault_vfs = {
    .iVersion = 2,
    .zName = FAULT_VFS_NAME,
    .xOpen = vfs_open,
    .xDelete = vfs_delete,
    .xAccess = vfs_access,
    .xFullPathname = vfs_full_pathname,
    .xDlOpen = vfs_dl_open,
    .xDlError = vfs_dl_error,
    .xDlSym = vfs_dl_sym,
    .xDlClose = vfs_dl_close,
    .xRandomness = vfs_randomness,
    .xSleep = vfs_sleep,
    .xCurrentTime = vfs_current_time,
    .xGetLastError = vfs_last_error,
    .xCurrentTimeInt64 = vfs_current_time64,
};

/* --- the spec text ------------------------------------------------------ */

static int say(char *why, size_t why_len, const char *fmt, ...)
{
    if (why != NULL && why_len > 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(why, why_len, fmt, ap);
        va_end(ap);
    }
    return -1;
}

static int name_index(const char *const *names, int n, const char *word, size_t len)
{
    for (int i = 0; i < n; i++)
        if (strlen(names[i]) == len && strncmp(names[i], word, len) == 0)
            return i;
    return -1;
}

/* A decimal number of the whole field [p, end): 0 or more, below 2^31. */
static bool parse_number(unsigned *out, const char *p, const char *end)
{
    unsigned long v = 0;
    if (p == end)
        return false;
    for (; p < end; p++) {
        if (*p < '0' || *p > '9')
            return false;
        v = v * 10 + (unsigned long)(*p - '0');
        if (v > INT_MAX)
            return false;
    }
    *out = (unsigned)v;
    return true;
}

/* The fields of one FAULT, [p, end), split at ':' into at most 5. */
static size_t split_fields(const char *p, const char *end, const char *start[5],
                           const char *stop[5])
{
    size_t n = 0;
    while (n < 5) {
        const char *colon = memchr(p, ':', (size_t)(end - p));
        start[n] = p;
        stop[n] = colon != NULL ? colon : end;
        n++;
        if (colon == NULL)
            break;
        p = colon + 1;
    }
    return n;
}

static int parse_one(fault_spec *f, const char *p, const char *end, char *why, size_t why_len)
{
    const char *s[5], *e[5];
    int len = (int)(end - p);
    size_t n = split_fields(p, end, s, e);
    if (n < 3 || n > 4)
        return say(why, why_len, "fault \"%.*s\": want KIND:N:CODE[:COUNT]", len, p);
    int kind = name_index(kind_names, FAULT_KINDS, s[0], (size_t)(e[0] - s[0]));
    if (kind < 0)
        return say(why, why_len,
                   "fault \"%.*s\": unknown kind (write, sync, read, lock, shmlock, shmmap, "
                   "alloc)",
                   len, p);
    if (!parse_number(&f->nth, s[1], e[1]) || f->nth == 0)
        return say(why, why_len, "fault \"%.*s\": N must be a number from 1", len, p);
    int code = name_index(code_names, FAULT_CODES, s[2], (size_t)(e[2] - s[2]));
    if (code < 0)
        return say(why, why_len, "fault \"%.*s\": unknown code (full, ioerr, busy, nomem)", len, p);
    f->count = 1;
    if (n == 4 && !parse_number(&f->count, s[3], e[3]))
        return say(why, why_len, "fault \"%.*s\": COUNT must be a number (0 = no end)", len, p);
    f->kind = (fault_kind)kind;
    f->code = (fault_code)code;
    if (fault_vfs_result(f->kind, f->code) == 0)
        return say(why, why_len, "fault \"%.*s\": %s cannot fail with %s", len, p, kind_names[kind],
                   code_names[code]);
    return 0;
}

int fault_vfs_parse(fault_spec *out, size_t cap, size_t *n, const char *text, char *why,
                    size_t why_len)
{
    *n = 0;
    if (text == NULL || text[0] == '\0' || strcmp(text, "none") == 0)
        return 0;
    const char *p = text;
    for (;;) {
        const char *comma = strchr(p, ',');
        const char *end = comma != NULL ? comma : p + strlen(p);
        if (*n == cap)
            return say(why, why_len, "fault spec: more than %zu faults", cap);
        if (parse_one(&out[*n], p, end, why, why_len) != 0)
            return -1;
        (*n)++;
        if (comma == NULL)
            return 0;
        p = comma + 1;
    }
}

int fault_vfs_arm_text(const char *text, char *why, size_t why_len)
{
    fault_spec faults[FAULT_SPEC_MAX];
    size_t n = 0;
    if (fault_vfs_parse(faults, FAULT_SPEC_MAX, &n, text, why, why_len) != 0)
        return -1;
    for (size_t i = 0; i < n; i++)
        fault_vfs_arm(&faults[i]);
    return 0;
}

/* --- the install -------------------------------------------------------- */

/* Learns SQLite's default allocator and puts the wrapper in front of it.
 * SQLite fills in its default only when it initialises, and takes a new
 * allocator only while not initialised: hence initialise, shut down, swap. */
static int wrap_allocator(char *why, size_t why_len)
{
    int rc = sqlite3_initialize();
    if (rc == SQLITE_OK)
        rc = sqlite3_shutdown();
    if (rc == SQLITE_OK)
        rc = sqlite3_config(SQLITE_CONFIG_GETMALLOC, &base_mem);
    if (rc == SQLITE_OK && base_mem.xMalloc == NULL)
        rc = SQLITE_ERROR;
    if (rc == SQLITE_OK)
        rc = sqlite3_config(SQLITE_CONFIG_MALLOC, &fault_mem);
    if (rc == SQLITE_OK)
        rc = sqlite3_initialize();
    if (rc != SQLITE_OK)
        return say(why, why_len,
                   "fault VFS: cannot wrap SQLite's allocator (%s): install it before any other "
                   "use of SQLite in the process",
                   sqlite3_errstr(rc));
    return 0;
}

int fault_vfs_install(char *why, size_t why_len)
{
    if (parent != NULL)
        return 0;
    if (wrap_allocator(why, why_len) != 0)
        return -1;
    sqlite3_vfs *base = sqlite3_vfs_find(NULL);
    if (base == NULL)
        return say(why, why_len, "fault VFS: SQLite has no default VFS");
    fault_vfs.szOsFile = (int)sizeof(fault_file) + base->szOsFile;
    fault_vfs.mxPathname = base->mxPathname;
    parent = base;
    int rc = sqlite3_vfs_register(&fault_vfs, 1);
    if (rc != SQLITE_OK) {
        parent = NULL;
        return say(why, why_len, "fault VFS: cannot register: %s", sqlite3_errstr(rc));
    }
    char reason[256];
    if (fault_vfs_arm_text(getenv(FAULT_VFS_ENV), reason, sizeof(reason)) != 0)
        return say(why, why_len, "%s: %s", FAULT_VFS_ENV, reason);
    return 0;
}
