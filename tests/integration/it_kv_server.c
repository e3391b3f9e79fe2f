/* SPDX-License-Identifier: Apache-2.0 */
/* Runs a command against a fresh nats-server or 3-node cluster: the outer
 * fixture of the kv: recorder's contract suite.
 *
 *   it_kv_server [--cluster] COMMAND [ARG...]
 *
 * Starts one JetStream server (or, with --cluster, three clustered nodes)
 * on loopback with free ports and stores in a new temporary directory,
 * exports the URL (every node's, comma-separated) as IB_KV_URL and the
 * replicas a bucket should have as IB_KV_REPLICAS (1 or 3), runs the
 * command, then stops the servers by PID and removes the directory. Exits
 * with the command's status (125 when the servers cannot start). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "it_cluster.h"
#include "it_files.h"
#include "it_server.h"

#define CLUSTER_READY_MS 60000

typedef struct servers {
    bool cluster;
    it_server one;
    it_cluster three;
} servers;

/* Starts the servers and exports where they are. */
static bool start(servers *s, const char *dir)
{
    if (!s->cluster) {
        if (!it_server_start(&s->one, dir, NULL))
            return false;
        setenv("IB_KV_URL", s->one.url, 1);
        setenv("IB_KV_REPLICAS", "1", 1);
        return true;
    }
    if (!it_cluster_start(&s->three, dir, CLUSTER_READY_MS)) {
        it_cluster_free(&s->three);
        return false;
    }
    setenv("IB_KV_URL", it_cluster_urls(&s->three), 1);
    setenv("IB_KV_REPLICAS", "3", 1);
    return true;
}

static int run(char **argv)
{
    int status = 0;
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        execv(argv[0], argv);
        perror("it_kv_server: exec");
        _exit(127);
    }
    while (pid > 0 && waitpid(pid, &status, 0) < 0)
        ;
    if (pid < 0)
        return 125;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

int main(int argc, char **argv)
{
    servers s;
    memset(&s, 0, sizeof(s));
    int first = 1;
    if (argc > 1 && strcmp(argv[1], "--cluster") == 0) {
        s.cluster = true;
        first = 2;
    }
    if (argc <= first) {
        fprintf(stderr, "usage: it_kv_server [--cluster] COMMAND [ARG...]\n");
        return 2;
    }
    char dir[PATH_MAX];
    if (!it_tmpdir_create(dir, sizeof(dir))) {
        fprintf(stderr, "it_kv_server: cannot make a temporary directory\n");
        return 125;
    }
    int code = 125;
    if (start(&s, dir)) {
        code = run(argv + first);
        if (s.cluster)
            it_cluster_free(&s.three);
        else
            it_server_free(&s.one);
    }
    it_tmpdir_remove(dir);
    return code;
}
