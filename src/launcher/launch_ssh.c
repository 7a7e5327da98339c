/*
 * launch_ssh.c -- the backend that runs a host's ranks over ssh
 * (launch.h, launch_session.h): one session per host,
 *
 *   <ssh-command> -T -o BatchMode=yes -o ConnectTimeout=S [-p P] [-i F] HOST
 *       'exec /path/of/hvdrun --agent'
 *
 * BatchMode: ssh never asks for a password and refuses an unknown host
 * key rather than asking.
 */
#include <stdio.h>
#include <string.h>

#include "common.h"
#include "launch_session.h"

#define ARGV_FIXED 11 /* our arguments after the --ssh-command words */

/* s in single quotes for the remote shell: ' becomes '\''. */
static void shell_quote(const char *s, char *out, size_t cap) {
  size_t n = 0;
  out[n++] = '\'';
  for (; *s && n + 5 < cap; s++) {
    if (*s == '\'') {
      memcpy(out + n, "'\\''", 4);
      n += 4;
    } else {
      out[n++] = *s;
    }
  }
  out[n++] = '\'';
  out[n] = '\0';
}

static const char *ssh_program(const launch_host *h) { return h->ctx->opt->ssh_command; }

/* argv = the --ssh-command words, then ours. */
static int ssh_build(const launch_host *h, session_cmd *c) {
  const hvdrun_options *o = h->ctx->opt;
  char quoted[2 * PATH_MAX + 8];
  int n = session_words(c, o->ssh_command, ARGV_FIXED);
  if (n < 0) return -1;
  shell_quote(c->self, quoted, sizeof quoted);
  snprintf(c->what, sizeof c->what, "exec %s --agent", quoted);
  snprintf(c->buf[0], sizeof c->buf[0], "ConnectTimeout=%d", o->start_timeout);
  snprintf(c->buf[1], sizeof c->buf[1], "%d", o->ssh_port);
  char *fixed[] = {"-T", "-o", "BatchMode=yes", "-o", c->buf[0]};
  for (size_t i = 0; i < HVD__ARRAY_LEN(fixed); i++) c->argv[n++] = fixed[i];
  if (o->ssh_port) {
    c->argv[n++] = "-p";
    c->argv[n++] = c->buf[1];
  }
  if (o->ssh_identity) {
    c->argv[n++] = "-i";
    c->argv[n++] = (char *)o->ssh_identity;
  }
  c->argv[n++] = h->spec->name;
  c->argv[n++] = c->what;
  return 0;
}

static const session_kind ssh_kind = {"ssh", ssh_program, ssh_build};

static int ssh_start(launch_host *h) { return session_start(h, &ssh_kind); }

const launch_backend launch_ssh = SESSION_BACKEND("ssh", ssh_start);
