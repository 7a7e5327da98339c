/*
 * launch_tree.h -- the shape of the launch tree: which host's agent
 * starts which other host's session.
 *
 * hvdrun alone starting an ssh session to every host costs it a process
 * and four pipes per host, and the hosts' sshd handshakes all come from
 * one machine.  Beyond `fanout` hosts hvdrun starts sessions to at most
 * `fanout` of them, and the agent on each starts sessions to at most
 * `fanout` more, and so on: hosts h are started in ceil(log_fanout(h + 1))
 * sequential steps or fewer, and no process runs more than `fanout`
 * sessions.  The bytes of a session started by an agent travel through
 * the agents above it (agent_proto.h: SPAWN, TO, FROM), so hvdrun still
 * speaks to every agent itself.  Open MPI's rsh launcher and SLURM's
 * daemons spread their start the same way.
 */
#ifndef HVDRUN_LAUNCH_TREE_H
#define HVDRUN_LAUNCH_TREE_H

/* The most sessions one process starts: --launch-fanout's default. */
#define LAUNCH_FANOUT_DEFAULT 8

/* Fills parent[0..n) for n hosts in order: parent[i] is the index of the
 * host whose agent starts host i's session, or -1 for hvdrun itself.
 * Every parent comes before its children; fanout <= 0 (or n <= fanout)
 * makes every parent -1. */
void launch_tree(int n, int fanout, int *parent);

/* The number of sequential steps the tree takes: 1 for hosts hvdrun
 * starts itself, one more per agent on the way. */
int launch_tree_depth(int n, const int *parent);

#endif /* HVDRUN_LAUNCH_TREE_H */
