/* bench.c: placeholder replaced below */
#include "cli/cli.h"
int cmd_bench(int argc, char **argv)
{
    return CLI_EXIT_USAGE;
}
