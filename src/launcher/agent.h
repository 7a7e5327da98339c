/*
 * agent.h -- hvdrun on another host: `hvdrun --agent`, which ssh starts
 * there, runs that host's ranks for the hvdrun that started it.
 *
 * It reads its part of the job from stdin and reports on stdout, in the
 * frames of agent_proto.h: it says HELLO at once, starts the ranks the
 * JOB lists (as hvdrun starts local ranks: own process groups, dying with
 * the agent, stdin /dev/null) in hvdrun's working directory, with the
 * environment sshd gave it overlaid by the job's, forwards their output
 * and exits, delivers hvdrun's signals, and pings every second.  When
 * hvdrun is gone (stdin at its end, a write that fails, no word for 4 s)
 * or the agent itself is told to stop, it stops the ranks: SIGTERM, and
 * SIGKILL 2 s later.
 */
#ifndef HVDRUN_AGENT_H
#define HVDRUN_AGENT_H

/* Runs the agent on stdin/stdout; returns its exit status: 0 when every
 * rank ran and everything was reported, else 1. */
int agent_main(void);

#endif /* HVDRUN_AGENT_H */
