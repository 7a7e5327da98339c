/*
 * test_watch.c -- the TCP transport's watchdog (transport/watch.c) and the
 * sign of life it carries (transport/live.c).
 *
 * The watchdog gets one end of a socketpair per "peer"; the test plays the
 * peers at the other ends, writing beats with counters of its choosing: a
 * peer that beats with a moving counter is never judged, one that goes
 * silent or whose counter stops (not resting) is, within the window and
 * not before, naming the rank and its host; a resting counter and a peer
 * that said goodbye are no verdict.  The watchdog's own beats carry this
 * process's counter.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "common.h"
#include "transport/live.h"
#include "transport/watch.h"
#include "wire/frame.h"

#define WINDOW_MS 400

static void sleep_ms(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

typedef struct {
  hvd_alarm alarm;
  hvd_watch *w;
  int mine[2]; /* the test's ends, one per peer */
} rig;

/* A watchdog of rank 3 over two peers, ranks 2 and 4 on hosts h2, h4. */
static void rig_start(rig *g, int window_ms) {
  int theirs[2], sv[2];
  for (int i = 0; i < 2; i++) {
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    g->mine[i] = sv[0];
    theirs[i] = sv[1];
  }
  assert_int_equal(hvd__alarm_init(&g->alarm), 0);
  const int peers[2] = {2, 4};
  const char *hosts[2] = {"h2", "h4"};
  hvd_watch_config cfg = {.rank = 3, .n = 2, .fds = theirs, .peers = peers, .hosts = hosts,
                          .window_ms = window_ms, .alarm = &g->alarm};
  assert_int_equal(hvd__watch_start(&cfg, &g->w), 0);
  assert_int_equal(theirs[0], -1); /* taken over */
}

static void rig_stop(rig *g) {
  hvd__watch_stop(g->w);
  for (int i = 0; i < 2; i++) close(g->mine[i]);
  hvd__alarm_close(&g->alarm);
}

static void send_frame(int fd, uint32_t tag, const uint64_t *value) {
  uint8_t buf[HVD_FRAME_HDR_LEN + 8];
  hvd__frame_encode(&(hvd_frame){.type = HVD_FRAME_DATA, .tag = tag, .len = value ? 8 : 0}, buf);
  hvd_writer wr = {.buf = buf + HVD_FRAME_HDR_LEN, .cap = 8};
  if (value) hvd__put_u64(&wr, *value);
  size_t n = HVD_FRAME_HDR_LEN + wr.len;
  assert_int_equal(write(fd, buf, n), (ssize_t)n);
}

static void beat(int fd, uint64_t value) { send_frame(fd, HVD_WATCH_TAG_BEAT, &value); }

/* Both peers beat for `ms`: peer i's counter moves unless frozen[i]. */
static void play(rig *g, int ms, const int frozen[2], const int silent[2]) {
  static uint64_t n = 1;
  for (int t = 0; t < ms; t += 50, n++) {
    for (int i = 0; i < 2; i++)
      if (!silent[i]) beat(g->mine[i], frozen[i] ? 7 : n);
    sleep_ms(50);
  }
}

static void test_beating_peers_are_never_judged(void **state) {
  (void)state;
  rig g;
  rig_start(&g, WINDOW_MS);
  play(&g, 3 * WINDOW_MS, (int[]){0, 0}, (int[]){0, 0});
  assert_false(hvd__alarm_raised(&g.alarm));
  rig_stop(&g);
}

static void test_silent_peer_is_named_with_its_host(void **state) {
  (void)state;
  rig g;
  rig_start(&g, WINDOW_MS);
  play(&g, 3 * WINDOW_MS, (int[]){0, 0}, (int[]){0, 1});
  assert_true(hvd__alarm_raised(&g.alarm));
  assert_int_equal(g.alarm.lost, 4);
  assert_non_null(strstr(g.alarm.why, "rank 4 on host h4 gave no sign of life"));
  rig_stop(&g);
}

static void test_frozen_counter_is_named(void **state) {
  (void)state;
  rig g;
  rig_start(&g, WINDOW_MS);
  play(&g, WINDOW_MS / 2, (int[]){0, 0}, (int[]){0, 0});
  assert_false(hvd__alarm_raised(&g.alarm)); /* not before the window */
  play(&g, 3 * WINDOW_MS, (int[]){1, 0}, (int[]){0, 0});
  assert_true(hvd__alarm_raised(&g.alarm));
  assert_int_equal(g.alarm.lost, 2);
  assert_non_null(strstr(g.alarm.why, "rank 2 on host h2 is running but its engine has not moved"));
  rig_stop(&g);
}

/* Resting (no engine, as before hvd_init's end or after shutdown) and a
 * goodbye are no verdict; neither is liveness switched off (window 0). */
static void test_resting_bye_and_off_are_no_verdict(void **state) {
  (void)state;
  rig g;
  rig_start(&g, WINDOW_MS);
  send_frame(g.mine[1], HVD_WATCH_TAG_BYE, NULL);
  for (int t = 0; t < 3 * WINDOW_MS; t += 50) {
    beat(g.mine[0], HVD_LIVE_RESTING | 5);
    sleep_ms(50);
  }
  assert_false(hvd__alarm_raised(&g.alarm));
  rig_stop(&g);
  rig_start(&g, 0);
  sleep_ms(3 * WINDOW_MS);
  assert_false(hvd__alarm_raised(&g.alarm));
  rig_stop(&g);
}

/* What the watchdog sends: beats carrying this process's counter, and a
 * goodbye when it stops. */
static void test_beats_carry_the_counter_then_bye(void **state) {
  (void)state;
  rig g;
  hvd__live_active(1);
  for (int i = 0; i < 5; i++) hvd__live_beat();
  uint64_t v = hvd__live_value();
  assert_int_equal(v & HVD_LIVE_RESTING, 0);
  rig_start(&g, WINDOW_MS);
  uint8_t buf[HVD_FRAME_HDR_LEN + 8];
  struct pollfd p = {.fd = g.mine[0], .events = POLLIN};
  assert_int_equal(poll(&p, 1, 5000), 1);
  assert_int_equal(read(g.mine[0], buf, sizeof buf), (ssize_t)sizeof buf);
  hvd_frame f;
  assert_int_equal(hvd__frame_decode(buf, &f), 0);
  assert_int_equal(f.tag, HVD_WATCH_TAG_BEAT);
  hvd_reader r = {.buf = buf + HVD_FRAME_HDR_LEN, .len = 8};
  assert_int_equal(hvd__get_u64(&r), v);
  hvd__watch_stop(g.w);
  /* whatever beats came meanwhile, the last frame is a goodbye, then the end */
  uint8_t last[HVD_FRAME_HDR_LEN];
  ssize_t k, total = 0;
  while ((k = read(g.mine[0], buf, HVD_FRAME_HDR_LEN)) > 0) {
    if (k == HVD_FRAME_HDR_LEN) memcpy(last, buf, sizeof last);
    assert_int_equal(hvd__frame_decode(buf, &f), 0);
    if (f.len) assert_int_equal(read(g.mine[0], buf, 8), 8);
    total += k;
  }
  assert_true(total > 0);
  assert_int_equal(hvd__frame_decode(last, &f), 0);
  assert_int_equal(f.tag, HVD_WATCH_TAG_BYE);
  for (int i = 0; i < 2; i++) close(g.mine[i]);
  hvd__alarm_close(&g.alarm);
  hvd__live_active(0);
  assert_true(hvd__live_value() & HVD_LIVE_RESTING);
}

/* A word published (shared memory's) follows the counter. */
static void test_published_word_follows(void **state) {
  (void)state;
  _Atomic uint64_t word = 0;
  assert_int_equal(hvd__live_publish(&word), 0);
  hvd__live_beat();
  assert_int_equal(atomic_load(&word), hvd__live_value());
  hvd__live_unpublish(&word);
  hvd__live_beat();
  assert_int_not_equal(atomic_load(&word), hvd__live_value());
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_beating_peers_are_never_judged),
      cmocka_unit_test(test_silent_peer_is_named_with_its_host),
      cmocka_unit_test(test_frozen_counter_is_named),
      cmocka_unit_test(test_resting_bye_and_off_are_no_verdict),
      cmocka_unit_test(test_beats_carry_the_counter_then_bye),
      cmocka_unit_test(test_published_word_follows),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
