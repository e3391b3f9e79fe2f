/* The ibus subcommands. Each takes the arguments after its name (argv[0]
 * is the subcommand) and returns the process exit status: 0 success, 1
 * runtime failure, 2 bad configuration or usage. */
#ifndef IB_CLI_COMMANDS_H
#define IB_CLI_COMMANDS_H

int ib_cmd_run(int argc, char **argv);
int ib_cmd_publish(int argc, char **argv);
int ib_cmd_markers(int argc, char **argv);
int ib_cmd_version(int argc, char **argv);

#endif
