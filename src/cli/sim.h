/*
 * sim.h: what the CLI adds to the simulator (sim/sim.h): the fleet model
 * (fleet.c), which `sluice simulate --nodes` runs.
 */
#ifndef SLUICE_CLI_SIM_H
#define SLUICE_CLI_SIM_H

#include "cli/cli.h"
#include "sim/sim.h"

/* The most nodes a fleet may have (--nodes), and the most the sync
 * strategy's central table holds (SL_QUOTA_NODES_MAX). */
#define SIM_FLEET_NODES_MAX 1024

/* How a fleet shares the traffic and the limit. */
typedef struct sim_fleet {
    int nodes;
    const char *strategy;  /* central, sync, split, route */
    int64_t sync_ns;       /* sync: the interval between a node's syncs */
    /* The share of the requests each node gets (a smooth weighted
     * round-robin; every weight 1 when weights is NULL); route ignores it:
     * a key's owner takes all its requests. */
    const int64_t *weights;
    /* From this time on, node k's requests go to node k + 1 (mod nodes):
     * traffic that moves. 0: never. */
    int64_t shift_at_ns;
} sim_fleet;

/*
 * The fleet: runs `alg` over the traffic as f->nodes nodes sharing the limit
 * by f->strategy, the requests spread over the nodes by f->weights. Fills
 * *r (name "STRATEGY"). Returns 0, or -1 with errbuf.
 */
int sim_fleet_run(const sim_setup *s, sl_algorithm alg, const sim_fleet *f, sim_result *r,
                  char *errbuf, size_t errcap);

#endif
