/* Runs a command against a fresh nats-server: the outer fixture of the kv:
 * recorder tests (the contract suite on kv, test_kv).
 *
 *   it_kv_server COMMAND [ARG...]
 *
 * Starts one JetStream server on a free loopback port with its store in a
 * new temporary directory, exports its URL as IB_KV_URL, runs the command,
 * then stops the server by its PID and removes the directory. Exits with
 * the command's status (125 when the server cannot start). A cluster run
 * is another fixture exporting the same variables (IB_KV_URL with every
 * node, IB_KV_REPLICAS), so the tests themselves need no change. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "it_files.h"
#include "it_server.h"

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: it_kv_server COMMAND [ARG...]\n");
        return 2;
    }
    char dir[PATH_MAX];
    if (!it_tmpdir_create(dir, sizeof(dir))) {
        fprintf(stderr, "it_kv_server: cannot make a temporary directory\n");
        return 125;
    }
    it_server s;
    if (!it_server_start(&s, dir, NULL)) {
        it_tmpdir_remove(dir);
        return 125;
    }
    setenv("IB_KV_URL", s.url, 1);
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        execv(argv[1], argv + 1);
        perror("it_kv_server: exec");
        _exit(127);
    }
    int status = 0;
    while (pid > 0 && waitpid(pid, &status, 0) < 0)
        ;
    it_server_free(&s);
    it_tmpdir_remove(dir);
    if (pid < 0)
        return 125;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}
