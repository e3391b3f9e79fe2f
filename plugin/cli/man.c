/* SPDX-License-Identifier: Apache-2.0 */
/* ibus(1) in roff (man.h). The sections a command table cannot fill are
 * the tables and paragraphs below; everything about commands, options and
 * their variables is read from the commands' description data. */
#include "man.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

/* A tagged paragraph: .TP with the tag in bold. */
typedef struct man_entry {
    const char *tag;
    const char *text;
} man_entry;

/* One command with the option table it builds, for the page. */
typedef struct man_cmd {
    const ib_cmd_desc *d;
    ib_opt opts[IB_CMD_MAX_OPTIONS];
    size_t n;
    void *targets; /* what the table's targets point into; never read */
} man_cmd;

static const char *const description[] = {
    "ibus consumes protobuf events from a NATS JetStream stream through a durable pull "
    "consumer, runs the handlers of plugins loaded at run time (shared objects built against "
    "the infinity-bus plugin ABI) and records a marker per consumer identity and event id, so "
    "that JetStream's at-least-once redelivery runs each handler's side effects once.",
    "A message is acked only once every handler subscribed to its type has succeeded or had "
    "already handled it, and their markers are durable. A handler's RETRY brings the event back "
    "after a delay; an event that cannot be handled (not an Event, a malformed id, a handler's "
    "REJECT, the last allowed attempt) is published to the dead-letter subject with headers "
    "giving the reason, and only then terminated.",
    "An outage is not poison. When a handler's calls fail together (its downstream is down), "
    "its circuit opens: the handler is not run, its events wait without spending attempts and "
    "are never dead-lettered for the outage, and one probe at a growing interval (1s, doubling "
    "to --circuit-probe-max) lets them through once the downstream is back; when every "
    "handler's circuit is open ibus run stops pulling. A single event that fails while others "
    "succeed is still dead-lettered after --max-deliver attempts, its Ibus-Error naming the last "
    "failure. A handler call running past --handler-timeout fails /healthz (and stops the "
    "systemd watchdog's pings) so that the supervisor restarts the process.",
    "Markers live in a recorder chosen by URI: memory: (inside the process), sqlite:PATH (a file "
    "shared by the processes of one host) or kv:BUCKET (a replicated JetStream key-value "
    "bucket, for many hosts).",
    "A JetStream other than the connected server's own, such as a leaf node's seen from its hub, "
    "is reached with --js-domain NAME (its API answers under $JS.NAME.API), or under the API "
    "prefix an account import gives with --js-api-prefix; every command takes them. A kv: "
    "bucket opened on the command's connection is reached the same way, unless its URI names "
    "its own with domain=NAME or api_prefix=PREFIX (a kv: URI with url= uses its server's own "
    "JetStream unless it says so).",
    "Each command takes its options as flags and as IB_* environment variables (see "
    "ENVIRONMENT); ibus COMMAND --help prints the same options as this page.",
};

/* Variables read outside the option tables (the loader's getenv). */
static const man_entry extra_environment[] = {
    {"IB_PLUGIN_CONFIG_<NAME>",
     "ibus run: the configuration string of the plugin named NAME (upper case; characters other "
     "than letters and digits become _), when no --plugin-config NAME=STRING gives one."},
    {"NOTIFY_SOCKET, WATCHDOG_USEC, WATCHDOG_PID",
     "ibus run: set by systemd for a unit with WatchdogSec=. ibus run then sends WATCHDOG=1 to "
     "NOTIFY_SOCKET every half WATCHDOG_USEC (when WATCHDOG_PID, if set, is its own), and stops "
     "while a handler call is past --handler-timeout, so systemd restarts the stuck process."},
    {"IB_TEST_DLQ_KILL_BEFORE_DELETE",
     "ibus dlq replay --purge: when set (tests only), the process kills itself with SIGKILL "
     "after the first replay is acked and before its dead letter is deleted, to show that "
     "nothing is lost there."},
    {"IB_TEST_KILL_BEFORE_END_ATTEMPTS",
     "ibus run: when set (tests only), the process kills itself with SIGKILL after its first "
     "dead letter's publish is acked and before the event's attempts are ended and the "
     "original is terminated, to show that a replay still runs the handler afterwards."},
    {"IB_TEST_FORWARD_KILL_AFTER",
     "ibus forward: when set to N (tests only), the process kills itself with SIGKILL once its "
     "Nth forward is acknowledged and before its source message is acked, to show that the "
     "forward repeated after the restart is stored once."},
};

static const man_entry exit_status[] = {
    {"0", "Success. ibus run: stopped by SIGTERM or SIGINT after draining, or --idle-exit passed "
          "without a message and every event it nak'ed for a retry is marked. ibus forward: "
          "stopped by SIGTERM, SIGINT or --idle-exit after finishing its batch."},
    {"1", "A runtime failure: NATS cannot be reached or the connection closed for good, the "
          "durable consumer was deleted and did not come back, the recorder cannot be opened or "
          "fails, or a publish was not acknowledged. ibus run: also JetStream refusing the stream "
          "or consumer as asked (overlapping subjects, another configuration under that name, no "
          "permission: said at once with JetStream's text), no connection within "
          "--connect-timeout (or --idle-exit), or SIGTERM or SIGINT before the consumer was "
          "bound, or --idle-exit ended a run that leaves events unmarked (retries it asked for "
          "had not come back; they are redelivered to the next run). ibus forward: also no "
          "connection within --connect-timeout, or SIGTERM or SIGINT before it started "
          "pulling. ibus status: attention "
          "needed (its attention list says what, each with the "
          "option that fixes it)."},
    {"2", "Bad configuration or usage; the message names the option and the reason. Restarting "
          "cannot fix it (the systemd unit sets RestartPreventExitStatus=2). ibus forward: also "
          "a target that no stream captures whole, or that is in the stream forwarded and read "
          "by its durable."},
    {"3", "ibus markers lookup: the consumer has not marked the event (a quiet no, as grep "
          "gives one)."},
};

static const man_entry signals[] = {
    {"SIGTERM, SIGINT",
     "ibus run stops fetching, lets the handlers in flight finish (for at most --drain-timeout), "
     "makes their markers durable, acks, drains the connection and exits 0 (1 when it came "
     "before the consumer was bound). ibus forward finishes the batch in hand (each forward "
     "acknowledged, then its source acked), naks what it pulled and did not start, flushes and "
     "exits 0. The other commands end at once."},
    {"SIGKILL", "ibus run ends without draining. Nothing acked is unmarked: at most the handlers "
                "that were running and those finished within --commit-interval run again when "
                "their events are redelivered."},
    {"SIGPIPE", "Ignored by ibus run: a closed socket is an error to handle, not a reason to die."},
};

static const char *const see_also[][2] = {
    {"sqlite3", "1"},
    {"systemctl", "1"},
    {"systemd.service", "5"},
    {"systemd.exec", "5"},
};

void ib_roff_escape(FILE *out, const char *text)
{
    bool line_start = true;
    for (const char *p = text; *p != '\0'; p++) {
        if (line_start && (*p == '.' || *p == '\''))
            fputs("\\&", out);
        line_start = *p == '\n';
        if (*p == '\\')
            fputs("\\e", out);
        else if (*p == '-')
            fputs("\\-", out);
        else
            fputc(*p, out);
    }
}

/* `text` in font `font` (B or I), back to roman after it. */
static void write_font(FILE *out, char font, const char *text)
{
    fprintf(out, "\\f%c", font);
    ib_roff_escape(out, text);
    fputs("\\fR", out);
}

static void write_entries(FILE *out, const char *section, const man_entry *e, size_t n)
{
    if (section != NULL)
        fprintf(out, ".SH %s\n", section);
    for (size_t i = 0; i < n; i++) {
        fputs(".TP\n", out);
        write_font(out, 'B', e[i].tag);
        fputc('\n', out);
        ib_roff_escape(out, e[i].text);
        fputc('\n', out);
    }
}

/* Writes `ms` in the largest unit that divides it (90000 -> 90s, 86400000
 * -> 1d), the way the options accept durations. */
static void write_duration(FILE *out, int64_t ms)
{
    static const struct {
        int64_t ms;
        const char *unit;
    } units[] = {{86400000, "d"}, {3600000, "h"}, {60000, "m"}, {1000, "s"}};
    for (size_t i = 0; i < sizeof(units) / sizeof(units[0]) && ms != 0; i++) {
        if (ms % units[i].ms == 0) {
            fprintf(out, "%lld%s", (long long)(ms / units[i].ms), units[i].unit);
            return;
        }
    }
    if (ms == 0)
        fputs("0", out);
    else
        fprintf(out, "%lldms", (long long)ms);
}

/* One option: flag and metavar as the tag; help, variable, default and
 * bounds as the paragraph. */
static void write_option(FILE *out, const ib_opt *o)
{
    char env[128];
    const char *metavar = ib_opt_metavar(o);
    fputs(".TP\n\\fB\\-\\-", out);
    ib_roff_escape(out, o->name);
    fputs("\\fR", out);
    if (metavar != NULL) {
        fputc(' ', out);
        write_font(out, 'I', metavar);
    }
    fputc('\n', out);
    ib_roff_escape(out, o->help);
    fputs(o->kind == IB_OPT_LIST ? "; repeatable.\n" : ".\n", out);
    fputs("Environment: ", out);
    write_font(out, 'B', ib_opt_env_name(env, sizeof(env), o->name));
    if (o->def != NULL) {
        fputs("; default: ", out);
        write_font(out, 'B', o->def);
    }
    if ((o->kind == IB_OPT_INT || o->kind == IB_OPT_DURATION) && (o->min != 0 || o->max != 0)) {
        fputs("; range: ", out);
        if (o->kind == IB_OPT_INT) {
            fprintf(out, "%lld..%lld", (long long)o->min, (long long)o->max);
        } else {
            write_duration(out, o->min);
            fputs("..", out);
            write_duration(out, o->max);
        }
    }
    fputs(".\n", out);
}

static void write_command(FILE *out, const man_cmd *c)
{
    const ib_cmd_desc *d = c->d;
    fputs(".SS ibus ", out);
    ib_roff_escape(out, d->name);
    fputc('\n', out);
    ib_roff_escape(out, d->description);
    fputc('\n', out);
    if (d->nactions > 0)
        fputs(".PP\nActions:\n", out);
    for (size_t i = 0; i < d->nactions; i++) {
        const ib_cmd_action *a = &d->actions[i];
        fputs(".TP\n", out);
        write_font(out, 'B', a->name);
        if (a->args != NULL) {
            fputc(' ', out);
            write_font(out, 'I', a->args);
        }
        fputc('\n', out);
        ib_roff_escape(out, a->help);
        fputs(".\n", out);
    }
    if (c->n > 0)
        fputs(".PP\nOptions:\n", out);
    for (size_t i = 0; i < c->n; i++)
        write_option(out, &c->opts[i]);
}

static void free_tables(man_cmd *cmds, size_t n)
{
    for (size_t i = 0; cmds != NULL && i < n; i++)
        free(cmds[i].targets);
    free(cmds);
}

/* Builds every command's option table. NULL when out of memory. */
static man_cmd *build_tables(const ib_man_page *p)
{
    man_cmd *cmds = calloc(p->ncmds > 0 ? p->ncmds : 1, sizeof(*cmds));
    for (size_t i = 0; cmds != NULL && i < p->ncmds; i++) {
        const ib_cmd_desc *d = p->cmds[i];
        cmds[i].d = d;
        if (d->options == NULL)
            continue;
        cmds[i].targets = calloc(1, d->targets_size > 0 ? d->targets_size : 1);
        if (cmds[i].targets == NULL) {
            free_tables(cmds, p->ncmds);
            return NULL;
        }
        cmds[i].n = d->options(cmds[i].opts, cmds[i].targets);
    }
    return cmds;
}

/* The option of command `c` whose variable is `env`, or NULL. */
static const ib_opt *option_with_env(const man_cmd *c, const char *env)
{
    char name[128];
    for (size_t j = 0; j < c->n; j++)
        if (strcmp(ib_opt_env_name(name, sizeof(name), c->opts[j].name), env) == 0)
            return &c->opts[j];
    return NULL;
}

/* One entry per variable, at the first command that has it, naming every
 * command whose option reads it. */
static void write_environment(FILE *out, const man_cmd *cmds, size_t n)
{
    char env[128];
    fputs(".SH ENVIRONMENT\n", out);
    ib_roff_escape(out, "Each option --NAME can also come from the variable IB_NAME (upper case, "
                        "- becomes _), in every command that has the option. Defaults apply "
                        "first, then the environment, then flags: flags win. A repeatable option "
                        "takes a comma-separated list, and a flag 1, true, yes or 0, false, no.");
    fputc('\n', out);
    for (size_t i = 0; i < n; i++) {
        for (size_t j = 0; j < cmds[i].n; j++) {
            ib_opt_env_name(env, sizeof(env), cmds[i].opts[j].name);
            bool seen = false;
            for (size_t k = 0; k < i && !seen; k++)
                seen = option_with_env(&cmds[k], env) != NULL;
            if (seen || option_with_env(&cmds[i], env) != &cmds[i].opts[j])
                continue;
            fputs(".TP\n", out);
            write_font(out, 'B', env);
            fputs("\n\\fB\\-\\-", out);
            ib_roff_escape(out, cmds[i].opts[j].name);
            fputs("\\fR of", out);
            for (size_t k = i; k < n; k++)
                if (option_with_env(&cmds[k], env) != NULL) {
                    fputs(k > i ? ", ibus " : " ibus ", out);
                    ib_roff_escape(out, cmds[k].d->name);
                }
            fputs(".\n", out);
        }
    }
    write_entries(out, NULL, extra_environment,
                  sizeof(extra_environment) / sizeof(extra_environment[0]));
}

/* A quoted argument of .TH: a date or a version, whose '-' are hyphens,
 * not the minus signs ib_roff_escape makes of them. */
static void write_th_field(FILE *out, const char *prefix, const char *text)
{
    fprintf(out, " \"%s", prefix);
    for (const char *c = text; *c != '\0'; c++) {
        if (*c == '\\')
            fputs("\\e", out);
        else if (*c == '"')
            fputs("\\(dq", out);
        else
            fputc(*c, out);
    }
    fputc('"', out);
}

static void write_head(FILE *out, const ib_man_page *p)
{
    fputs(".\\\" ibus(1), written by `ibus help --man` from the commands' option tables:\n"
          ".\\\" change those, not this file.\n.TH IBUS 1",
          out);
    write_th_field(out, "", p->date);
    write_th_field(out, "infinity-bus ", p->version);
    /* No hyphenation, ragged right: an IB_* name or an option split over
     * two lines cannot be searched for or copied. */
    fputs(" \"User Commands\"\n.nh\n.ad l\n"
          ".SH NAME\nibus \\- idempotent consumer for NATS JetStream\n.SH SYNOPSIS\n",
          out);
    for (size_t i = 0; i < p->ncmds; i++) {
        fputs(i > 0 ? ".br\n.B ibus " : ".B ibus ", out);
        ib_roff_escape(out, p->cmds[i]->name);
        fputc('\n', out);
        if (p->cmds[i]->synopsis[0] != '\0') {
            ib_roff_escape(out, p->cmds[i]->synopsis);
            fputc('\n', out);
        }
    }
    fputs(".SH DESCRIPTION\n", out);
    for (size_t i = 0; i < sizeof(description) / sizeof(description[0]); i++) {
        fputs(i > 0 ? ".PP\n" : "", out);
        ib_roff_escape(out, description[i]);
        fputc('\n', out);
    }
}

static void write_files(FILE *out, const ib_man_page *p)
{
    char plugins[512];
    snprintf(plugins, sizeof(plugins), "%s/*.so", p->plugin_dir);
    const man_entry files[] = {
        {"processed.db",
         "The default marker file (--recorder sqlite:processed.db), in the working directory, "
         "with its -wal and -shm files beside it. Created with mode 0600; keep it on a local "
         "file system, never on NFS."},
        {plugins,
         "The example handler plugins of this install (audit, flaky, relay, ledger, http), "
         "for --plugin."},
        {"ibus@.service", "The systemd unit template: instance NAME runs ibus run, sandboxed and "
                          "as an unprivileged user, with the settings of "
                          "/etc/infinity-bus/NAME.env."},
        {"/etc/infinity-bus/<instance>.env",
         "One instance's IB_* settings, one VARIABLE=value per line; mode 0600 and owned by "
         "root, since it may hold credentials."},
        {"/var/lib/infinity-bus", "The unit's state and working directory: its marker files "
                                  "(IB_RECORDER=sqlite:/var/lib/infinity-bus/<instance>.db)."},
    };
    write_entries(out, "FILES", files, sizeof(files) / sizeof(files[0]));
}

/* Each example: what it does, then the command line, unfilled. */
static void write_examples(FILE *out, const ib_man_page *p)
{
    char run[600];
    snprintf(run, sizeof(run),
             "ibus run --create --stream EVENTS --durable orders \\\n"
             "    --stream-max-age 30d --retention 30d \\\n"
             "    --plugin %s/audit.so \\\n"
             "    --http 127.0.0.1:9090",
             p->plugin_dir);
    char check[300];
    snprintf(check, sizeof(check), "ibus run --check --durable orders --plugin %s/audit.so",
             p->plugin_dir);
    const man_entry examples[] = {
        {run, "Consume the stream EVENTS with the audit plugin, creating the stream (keeping "
              "messages 30 days) and the durable consumer on first start, pruning markers "
              "older than 30 days, and serve health and metrics on loopback:"},
        {check, "Check the options and the plugins and print each handler, its event types "
                "and its consumer identity, without connecting to NATS (exit 0 or 2):"},
        {"ibus publish --type order.created '{\"n\":1}' '{\"n\":2}'",
         "Publish two events of type order.created:"},
        {"ibus publish --type order.created --count 10000 --duplicates 0.1",
         "Publish 10000 generated events, a tenth of them twice with the same id:"},
        {"ibus markers --consumer orders/audit/audit lookup 4a1f6cbb0c0e4c3a9d1e8e5a2b7c6d10",
         "Whether the audit handler has handled an event (exit 3 when not):"},
        {"ibus markers --older-than 30d --stream EVENTS --durable orders prune",
         "Prune markers older than 30 days, once the age is checked against the stream's "
         "MaxAge and the consumer's redelivery settings:"},
        {"ibus status --stream EVENTS --durable orders --recorder sqlite:processed.db",
         "The durable at a glance: backlog, ack pending, waiting pulls, each consumer "
         "identity's markers and claims, dead letters by reason, and what needs attention "
         "(exit 1) with the option that fixes it:"},
        {"ibus publish --type order.created --traceparent new '{\"n\":1}'",
         "Publish an event that starts a W3C trace: the summary line prints its traceparent, "
         "and the log lines of every ibus run that handles it name its trace_id:"},
        {"systemctl enable --now ibus@orders",
         "Run ibus run as the systemd instance orders, set up by /etc/infinity-bus/orders.env:"},
    };
    fputs(".SH EXAMPLES\n", out);
    for (size_t i = 0; i < sizeof(examples) / sizeof(examples[0]); i++) {
        fputs(i > 0 ? ".PP\n" : "", out);
        ib_roff_escape(out, examples[i].text);
        fputs("\n.PP\n.RS 4\n.nf\n", out);
        ib_roff_escape(out, examples[i].tag);
        fputs("\n.fi\n.RE\n", out);
    }
}

static void write_see_also(FILE *out)
{
    fputs(".SH SEE ALSO\n", out);
    for (size_t i = 0; i < sizeof(see_also) / sizeof(see_also[0]); i++)
        fprintf(out, ".BR %s (%s)%s\n", see_also[i][0], see_also[i][1],
                i + 1 < sizeof(see_also) / sizeof(see_also[0]) ? "," : "");
    fputs(".PP\n", out);
    ib_roff_escape(out, "docs/operations.md, docs/troubleshooting.md and deploy/README.md of "
                        "infinity-bus (installed under share/doc/infinity-bus): metrics, "
                        "retention, messages and their fixes, alerts and deployment; "
                        "docs/outages.md: the circuits, --handler-timeout and how long an "
                        "outage each setting rides out.");
    fputc('\n', out);
}

int ib_man_write(FILE *out, const ib_man_page *page)
{
    man_cmd *cmds = build_tables(page);
    if (cmds == NULL) {
        errno = ENOMEM;
        return -1;
    }
    write_head(out, page);
    fputs(".SH COMMANDS\n", out);
    for (size_t i = 0; i < page->ncmds; i++)
        write_command(out, &cmds[i]);
    write_environment(out, cmds, page->ncmds);
    write_entries(out, "EXIT STATUS", exit_status, sizeof(exit_status) / sizeof(exit_status[0]));
    write_entries(out, "SIGNALS", signals, sizeof(signals) / sizeof(signals[0]));
    write_files(out, page);
    write_examples(out, page);
    write_see_also(out);
    free_tables(cmds, page->ncmds);
    return fflush(out) == 0 && ferror(out) == 0 ? 0 : -1;
}
