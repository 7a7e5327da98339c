/*
 * format.c -- times and sizes as people read them.
 */
#include <stdio.h>

#include "report.h"

char *rp_fmt_time(double us, char *buf, size_t cap) {
  if (us < 0) us = 0;
  if (us < 1000) snprintf(buf, cap, "%.0f us", us);
  else if (us < 1e6) snprintf(buf, cap, "%.*f ms", us < 1e4 ? 2 : 1, us / 1e3);
  else snprintf(buf, cap, "%.2f s", us / 1e6);
  return buf;
}

char *rp_fmt_bytes(double bytes, char *buf, size_t cap) {
  static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  if (bytes < 0) bytes = 0;
  while (bytes >= 1024 && u < 4) bytes /= 1024, u++;
  if (u == 0) snprintf(buf, cap, "%.0f B", bytes);
  else snprintf(buf, cap, "%.*f %s", bytes < 10 ? 1 : 0, bytes, units[u]);
  return buf;
}
