"""hvdrun end to end: the ranks' environment, output forwarding, exit
statuses, tearing the job down on a failure or a signal, the command line,
and a rendezvous that strangers cannot disturb.

Most ranks are `sh -c SCRIPT`: a shell sees its environment directly.
Every subprocess call has a timeout, so a bug fails a test instead of
hanging the suite.
"""
import os
import re
import select
import signal
import socket
import subprocess
import time

import pytest

LIMIT = 30  # seconds: no single hvdrun run here should come near it


def run(hvdrun, args, env=None, timeout=LIMIT):
    return subprocess.run([hvdrun] + args, env=env, stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=timeout)


def sh(hvdrun, np, script, extra=(), env=None, timeout=LIMIT):
    return run(hvdrun, list(extra) + ["-np", str(np), "sh", "-c", script], env=env,
               timeout=timeout)


def by_rank(text, stream="stdout"):
    """{rank: [line, ...]} from hvdrun's prefixed output; every line must be prefixed."""
    lines = {}
    for line in text.splitlines():
        m = re.fullmatch(r"\[(\d+)\]<%s>:(.*)" % stream, line)
        assert m, "unprefixed or foreign line: %r" % line[:200]
        lines.setdefault(int(m.group(1)), []).append(m.group(2))
    return lines


def alive(pid):
    """True while pid is a process that is not a zombie."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False


def assert_all_gone(pids, within=2.0):
    end = time.monotonic() + within
    while any(alive(p) for p in pids) and time.monotonic() < end:
        time.sleep(0.05)
    assert not [p for p in pids if alive(p)], "left behind: %s" % pids


def env_without(*names, **extra):
    env = {k: v for k, v in os.environ.items() if k not in names}
    env.update(extra)
    return env


# ---- the ranks' environment ----

ENV_SCRIPT = ('echo "R=$HOROVOD_RANK S=$HOROVOD_SIZE LR=$HOROVOD_LOCAL_RANK '
              'LS=$HOROVOD_LOCAL_SIZE CR=$HOROVOD_CROSS_RANK CS=$HOROVOD_CROSS_SIZE '
              'H=$HOROVOD_HOSTNAME A=$HOROVOD_GLOO_RENDEZVOUS_ADDR '
              'P=$HOROVOD_GLOO_RENDEZVOUS_PORT K=$_HOROVOD_SECRET_KEY '
              'T=$HOROVOD_START_TIMEOUT IN=$(wc -c)"')


def rank_env(hvdrun, np, **env):
    # A stale job's variables in hvdrun's own environment must not leak through.
    p = sh(hvdrun, np, ENV_SCRIPT,
           env=env_without("HOROVOD_START_TIMEOUT", HOROVOD_RANK="77", HOROVOD_SIZE="99",
                           **env))
    assert p.returncode == 0, p.stderr
    seen = by_rank(p.stdout)
    assert sorted(seen) == list(range(np))
    return {r: dict(kv.split("=", 1) for kv in lines[0].split()) for r, lines in seen.items()}


@pytest.mark.parametrize("np", [1, 2, 4])
def test_each_rank_sees_its_environment(hvdrun, np):
    envs = rank_env(hvdrun, np)
    for r, e in envs.items():
        assert e["R"] == e["LR"] == str(r)
        assert e["S"] == e["LS"] == str(np)
        assert (e["CR"], e["CS"]) == ("0", "1")
        assert e["H"] == socket.gethostname()
        assert e["A"] == "127.0.0.1"
        assert 1 <= int(e["P"]) <= 65535
        assert re.fullmatch(r"[A-Za-z0-9+/]{43}=", e["K"]), e["K"]
        assert e["T"] == "30"  # Horovod's default start timeout
        assert e["IN"] == "0"  # stdin is /dev/null
    assert len({(e["P"], e["K"]) for e in envs.values()}) == 1  # one job, one rendezvous


def test_each_job_has_its_own_secret(hvdrun):
    assert rank_env(hvdrun, 1)[0]["K"] != rank_env(hvdrun, 1)[0]["K"]


def test_flags_reach_the_ranks(hvdrun):
    p = sh(hvdrun, 2, 'echo "$HOROVOD_START_TIMEOUT $HOROVOD_GLOO_TIMEOUT_SECONDS '
                      '$HOROVOD_LOG_LEVEL $HOROVOD_LOG_HIDE_TIME"',
           extra=["--start-timeout", "7", "--gloo-timeout-seconds=9", "--log-level", "debug",
                  "--log-hide-timestamp"])
    assert p.returncode == 0, p.stderr
    assert by_rank(p.stdout) == {0: ["7 9 DEBUG 1"], 1: ["7 9 DEBUG 1"]}


# Each engine flag, a value for it, and what every rank's variable holds then.
ENGINE_FLAGS = [
    (["--fusion-threshold-mb", "32"], "HOROVOD_FUSION_THRESHOLD", "33554432"),
    (["--fusion-threshold-mb=0"], "HOROVOD_FUSION_THRESHOLD", "0"),
    (["--fusion-threshold-mb", "1048576"], "HOROVOD_FUSION_THRESHOLD", str(1 << 40)),
    (["--cycle-time-ms", "0.5"], "HOROVOD_CYCLE_TIME", "0.5"),
    (["--cycle-time-ms", "3.5"], "HOROVOD_CYCLE_TIME", "3.5"),
    (["--cycle-time-ms=10000"], "HOROVOD_CYCLE_TIME", "10000"),
    (["--cache-capacity", "0"], "HOROVOD_CACHE_CAPACITY", "0"),
    (["--cache-capacity", "007"], "HOROVOD_CACHE_CAPACITY", "7"),
    (["--timeline-filename", "/tmp/a dir/t l.json"], "HOROVOD_TIMELINE", "/tmp/a dir/t l.json"),
    (["--timeline-filename=" + "d/" * 300 + "t.json"], "HOROVOD_TIMELINE",
     "d/" * 300 + "t.json"),
    (["--timeline-mark-cycles"], "HOROVOD_TIMELINE_MARK_CYCLES", "1"),
    (["--no-stall-check"], "HOROVOD_STALL_CHECK_DISABLE", "1"),
    (["--hierarchical-allreduce"], "HOROVOD_HIERARCHICAL_ALLREDUCE", "1"),
    (["--stall-check-warning-time-seconds", "5"], "HOROVOD_STALL_CHECK_TIME_SECONDS", "5"),
    (["--stall-check-shutdown-time-seconds", "0"], "HOROVOD_STALL_SHUTDOWN_TIME_SECONDS", "0"),
    (["--stall-check-shutdown-time-seconds", "86400"], "HOROVOD_STALL_SHUTDOWN_TIME_SECONDS",
     "86400"),
    (["--network-interface", "lo,eth9"], "HOROVOD_GLOO_IFACE", "lo,eth9"),
    (["--autotune"], "HOROVOD_AUTOTUNE", "1"),
    (["--autotune-log-file", "/tmp/tune.csv"], "HOROVOD_AUTOTUNE_LOG", "/tmp/tune.csv"),
    (["--autotune-warmup-samples", "0"], "HOROVOD_AUTOTUNE_WARMUP_SAMPLES", "0"),
    (["--autotune-steps-per-sample", "5"], "HOROVOD_AUTOTUNE_STEPS_PER_SAMPLE", "5"),
    (["--autotune-bayes-opt-max-samples", "64"], "HOROVOD_AUTOTUNE_BAYES_OPT_MAX_SAMPLES", "64"),
    (["--autotune-gaussian-process-noise", "0.2"], "HOROVOD_AUTOTUNE_GAUSSIAN_PROCESS_NOISE",
     "0.2"),
    (["--autotune-retune-drop=0.5"], "HOROVOD_AUTOTUNE_RETUNE_DROP", "0.5"),
]


@pytest.mark.parametrize("flag,var,want", ENGINE_FLAGS)
def test_engine_flags_reach_the_ranks(hvdrun, flag, var, want):
    # The flag wins over a value in hvdrun's own environment.
    p = sh(hvdrun, 2, 'echo "<$%s>"' % var, extra=flag, env=env_without(**{var: "stale"}))
    assert p.returncode == 0, p.stderr
    assert by_rank(p.stdout) == {0: ["<%s>" % want], 1: ["<%s>" % want]}


def test_engine_flags_together_and_repeated(hvdrun):
    names = ["HOROVOD_FUSION_THRESHOLD", "HOROVOD_CYCLE_TIME", "HOROVOD_CACHE_CAPACITY",
             "HOROVOD_TIMELINE", "HOROVOD_TIMELINE_MARK_CYCLES", "HOROVOD_STALL_CHECK_DISABLE",
             "HOROVOD_STALL_CHECK_TIME_SECONDS", "HOROVOD_STALL_SHUTDOWN_TIME_SECONDS"]
    p = sh(hvdrun, 2, "echo " + " ".join("$" + n for n in names),
           extra=["--fusion-threshold-mb", "1", "--fusion-threshold-mb", "2",  # the last wins
                  "--cycle-time-ms", "2.25", "--cache-capacity", "100", "--timeline-filename",
                  "t.json", "--timeline-mark-cycles", "--no-stall-check",
                  "--stall-check-warning-time-seconds", "30",
                  "--stall-check-shutdown-time-seconds", "90"])
    assert p.returncode == 0, p.stderr
    line = "2097152 2.25 100 t.json 1 1 30 90"
    assert by_rank(p.stdout) == {0: [line], 1: [line]}


def test_user_engine_variables_pass_through_without_the_flags(hvdrun):
    p = sh(hvdrun, 1, 'echo "$HOROVOD_FUSION_THRESHOLD $HOROVOD_CYCLE_TIME $HOROVOD_TIMELINE"',
           env=env_without(HOROVOD_FUSION_THRESHOLD="123", HOROVOD_CYCLE_TIME="7",
                           HOROVOD_TIMELINE="mine.json"))
    assert by_rank(p.stdout) == {0: ["123 7 mine.json"]}, p.stderr


def test_no_engine_variables_without_the_flags(hvdrun):
    names = [var for _, var, _ in ENGINE_FLAGS]
    p = sh(hvdrun, 1, "env", env=env_without(*names))
    assert p.returncode == 0, p.stderr
    seen = {line.split("=", 1)[0] for line in by_rank(p.stdout)[0]}
    assert not seen & set(names)


def test_user_start_timeout_kept_without_the_flag(hvdrun):
    p = sh(hvdrun, 1, 'echo "$HOROVOD_START_TIMEOUT"',
           env=env_without(HOROVOD_START_TIMEOUT="12"))
    assert by_rank(p.stdout) == {0: ["12"]}, p.stderr
    p = sh(hvdrun, 1, 'echo "$HOROVOD_START_TIMEOUT"', extra=["--start-timeout", "7"],
           env=env_without(HOROVOD_START_TIMEOUT="12"))
    assert by_rank(p.stdout) == {0: ["7"]}, p.stderr


def test_options_stop_at_the_program(hvdrun):
    p = run(hvdrun, ["-np", "1", "sh", "-c", 'echo "$*"', "x", "-np", "--verbose"])
    assert by_rank(p.stdout) == {0: ["-np --verbose"]}, p.stderr
    p = run(hvdrun, ["-np", "1", "--", "sh", "-c", "echo ok"])
    assert by_rank(p.stdout) == {0: ["ok"]}, p.stderr


# ---- output ----

# Each output test runs with the ranks here and on "another host" (over
# fake_ssh, as in test_remote.py): one line splitter serves both.
WHERE = ["here", "remote"]


def where_args(where, np, fake_ssh):
    if where == "here":
        return []
    return ["-H", "127.0.0.2:%d" % np, "--ssh-command", fake_ssh]


@pytest.mark.parametrize("where", WHERE)
def test_output_is_prefixed_and_never_mixed_within_a_line(hvdrun, fake_ssh, where):
    # 4 ranks x 2000 lines of ~300 bytes each on stdout, 200 on stderr, at once.
    script = ("awk -v r=$HOROVOD_RANK 'BEGIN { s = sprintf(\"%300s\", \"\"); gsub(/ /, r, s);"
              " for (i = 0; i < 2000; i++) print r, i, s;"
              " for (i = 0; i < 200; i++) print r, i, s > \"/dev/stderr\" }'")
    p = sh(hvdrun, 4, script, extra=where_args(where, 4, fake_ssh))
    assert p.returncode == 0, p.stderr[-2000:]
    for stream, count in (("stdout", 2000), ("stderr", 200)):
        seen = by_rank(getattr(p, stream), stream)
        assert sorted(seen) == [0, 1, 2, 3]
        for r, lines in seen.items():
            assert lines == ["%d %d %s" % (r, i, str(r) * 300) for i in range(count)]


@pytest.mark.parametrize("where", WHERE)
def test_stdout_and_stderr_into_one_pipe_never_mix(hvdrun, fake_ssh, where):
    # 2>&1: both of hvdrun's streams share one pipe, and lines longer than
    # a pipe's atomic write still come out whole.
    script = ("awk -v r=$HOROVOD_RANK 'BEGIN { s = sprintf(\"%5000s\", \"\"); gsub(/ /, r, s);"
              " for (i = 0; i < 300; i++) { print r, i, s; print r, i, s > \"/dev/stderr\" } }'")
    p = subprocess.run([hvdrun, "-np", "3"] + where_args(where, 3, fake_ssh) +
                       ["sh", "-c", script], stdin=subprocess.DEVNULL,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                       timeout=LIMIT)
    assert p.returncode == 0
    counts = {}
    for line in p.stdout.splitlines():
        m = re.fullmatch(r"\[(\d)\]<(stdout|stderr)>:(\d) (\d+) (\d{5000})", line)
        assert m and m.group(1) == m.group(3) and set(m.group(5)) == {m.group(1)}, line[:100]
        counts[m.group(1, 2)] = counts.get(m.group(1, 2), 0) + 1
    assert counts == {(str(r), s): 300 for r in range(3) for s in ("stdout", "stderr")}


@pytest.mark.parametrize("where", WHERE)
def test_partial_last_line_is_flushed(hvdrun, fake_ssh, where):
    p = sh(hvdrun, 2, "printf 'first\\nno newline'; printf 'err tail' >&2",
           extra=where_args(where, 2, fake_ssh))
    assert p.returncode == 0
    assert by_rank(p.stdout) == {0: ["first", "no newline"], 1: ["first", "no newline"]}
    assert p.stdout.endswith("\n")
    assert by_rank(p.stderr, "stderr") == {0: ["err tail"], 1: ["err tail"]}


@pytest.mark.parametrize("where", WHERE)
def test_very_long_lines_are_split(hvdrun, fake_ssh, where):
    p = sh(hvdrun, 1, "head -c 200000 /dev/zero | tr '\\0' y; echo; echo after",
           extra=where_args(where, 1, fake_ssh))
    assert p.returncode == 0, p.stderr
    pieces = by_rank(p.stdout)[0]
    assert pieces[-1] == "after"
    assert "".join(pieces[:-1]) == "y" * 200000
    assert len(pieces) > 2 and all(len(x) <= 65536 for x in pieces)


# ---- exit statuses and tearing down ----

SLEEPER = 'echo "pid $$"; sleep 1000 & echo "pid $!"; wait'


def pids_in(text):
    return [int(x) for x in re.findall(r"<stdout>:pid (\d+)", text)]


def test_failing_rank_ends_the_job_with_its_code(hvdrun):
    script = 'if [ $HOROVOD_RANK = 1 ]; then sleep 0.3; exit 3; fi; ' + SLEEPER
    t0 = time.monotonic()
    p = sh(hvdrun, 3, script)
    elapsed = time.monotonic() - t0
    assert p.returncode == 3, p.stderr
    assert re.search(r"hvdrun: rank 1 \(pid \d+\) exited with code 3", p.stderr), p.stderr
    assert elapsed < 5.3, elapsed  # the failure came 0.3 s in; hvdrun needs < 5 s after
    pids = pids_in(p.stdout)
    assert len(pids) == 4  # two sleeper ranks: the shell and its sleep
    assert_all_gone(pids)


def test_rank_killed_by_a_signal(hvdrun):
    p = sh(hvdrun, 2, 'if [ $HOROVOD_RANK = 1 ]; then kill -9 $$; fi; ' + SLEEPER)
    assert p.returncode == 128 + 9, p.stderr
    assert re.search(r"hvdrun: rank 1 \(pid \d+\) was killed by signal 9 \(Killed\)",
                     p.stderr), p.stderr
    assert_all_gone(pids_in(p.stdout))


def test_a_signal_death_reported_after_an_error_exit_is_named_too(hvdrun):
    # The killed rank is the cause, the error exit its consequence, but the
    # error's news came first (as a remote agent's report can come late):
    # hvdrun names both, and the job ends with the signal's code.
    script = ('if [ $HOROVOD_RANK = 0 ]; then exit 1; fi; '
              'if [ $HOROVOD_RANK = 1 ]; then sleep 0.3; kill -9 $$; fi; ' + SLEEPER)
    p = sh(hvdrun, 3, script)
    assert p.returncode == 128 + 9, p.stderr
    assert re.search(r"hvdrun: rank 0 \(pid \d+\) exited with code 1", p.stderr), p.stderr
    assert re.search(r"hvdrun: rank 1 \(pid \d+\) was killed by signal 9 \(Killed\)",
                     p.stderr), p.stderr
    assert_all_gone(pids_in(p.stdout))


def test_error_exits_after_a_signal_death_keep_its_code(hvdrun):
    script = ('if [ $HOROVOD_RANK = 0 ]; then kill -9 $$; fi; '
              'if [ $HOROVOD_RANK = 1 ]; then sleep 0.3; exit 1; fi; ' + SLEEPER)
    p = sh(hvdrun, 3, script)
    assert p.returncode == 128 + 9, p.stderr
    assert "exited with code 1" not in p.stderr, p.stderr


def test_a_rank_that_finishes_early_does_not_stop_the_others(hvdrun):
    p = sh(hvdrun, 2, 'if [ $HOROVOD_RANK = 1 ]; then sleep 0.5; echo late; fi')
    assert p.returncode == 0, p.stderr
    assert by_rank(p.stdout) == {1: ["late"]}


@pytest.mark.parametrize("where", WHERE)
def test_leftover_process_holding_the_output_is_stopped(hvdrun, fake_ssh, where):
    # The rank exits 0 but leaves a child that keeps its stdout open.
    t0 = time.monotonic()
    p = sh(hvdrun, 1, 'sleep 1000 & echo "pid $!"', extra=where_args(where, 1, fake_ssh))
    assert p.returncode == 0, p.stderr
    assert time.monotonic() - t0 < 5
    assert_all_gone(pids_in(p.stdout))


def test_nonexistent_program(hvdrun):
    p = run(hvdrun, ["-np", "2", "/nonexistent/prog"])
    assert p.returncode == 127
    assert "hvdrun: cannot run '/nonexistent/prog': No such file or directory" in p.stderr
    assert p.stderr.count("cannot run") == 1, p.stderr  # said once, not per rank


def test_program_not_executable(hvdrun, tmp_path):
    prog = tmp_path / "data.txt"
    prog.write_text("not a program\n")
    p = run(hvdrun, ["-np", "1", str(prog)])
    assert p.returncode == 127
    assert "cannot run '%s': Permission denied" % prog in p.stderr


def test_verbose_says_what_it_does(hvdrun):
    p = sh(hvdrun, 2, "true", extra=["--verbose"])
    assert p.returncode == 0
    assert re.search(r"hvdrun: rendezvous listening on 127\.0\.0\.1:\d+", p.stderr)
    assert len(re.findall(r"hvdrun: started rank \d \(pid \d+\)", p.stderr)) == 2
    assert len(re.findall(r"hvdrun: rank \d \(pid \d+\) exited with code 0", p.stderr)) == 2


# ---- signals to hvdrun ----

def start(hvdrun, np, script):
    return subprocess.Popen([hvdrun, "-np", str(np), "sh", "-c", script],
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)


def read_pids(p, count, timeout=10):
    """Reads hvdrun's stdout until `count` pids were announced."""
    buf, end = b"", time.monotonic() + timeout
    while len(pids_in(buf.decode())) < count:
        left = end - time.monotonic()
        assert left > 0, "ranks did not start: %r" % buf
        if select.select([p.stdout], [], [], left)[0]:
            chunk = os.read(p.stdout.fileno(), 65536)
            assert chunk, "hvdrun closed its output early: %r" % buf
            buf += chunk
    return pids_in(buf.decode())


def stop_job(p, pids):
    if p.poll() is None:
        p.kill()
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    p.communicate(timeout=LIMIT)


def signal_job(hvdrun, script, sigs, within):
    """Starts 2 ranks, sends hvdrun `sigs` 0.2 s apart; returns the status
    once everything it started is gone, in under `within` seconds."""
    p = start(hvdrun, 2, script)
    pids = []
    try:
        pids = read_pids(p, 4)
        t0 = time.monotonic()
        for i, sig in enumerate(sigs):
            if i:
                time.sleep(0.2)
            p.send_signal(sig)
        rc = p.wait(timeout=LIMIT)
        assert time.monotonic() - t0 < within
        assert_all_gone(pids, within=0.5)
        return rc
    finally:
        stop_job(p, pids)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_signal_stops_the_whole_job(hvdrun, sig):
    assert signal_job(hvdrun, SLEEPER, [sig], within=1.5) == 128 + sig


def test_ranks_ignoring_sigterm_are_killed(hvdrun):
    script = "trap '' TERM; " + SLEEPER
    assert signal_job(hvdrun, script, [signal.SIGINT], within=4) == 128 + signal.SIGINT


def test_second_sigint_kills_at_once(hvdrun):
    script = "trap '' TERM; " + SLEEPER
    assert signal_job(hvdrun, script, [signal.SIGINT] * 2, within=1.2) == 128 + signal.SIGINT


def start_unread(hvdrun, np, script, err_path):
    """hvdrun running `script` on np ranks with nobody reading its stdout;
    its stderr goes to err_path."""
    with open(err_path, "w") as err:
        return subprocess.Popen([hvdrun, "-np", str(np), "sh", "-c", script],
                                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=err)


def wait_for_text(path, done, timeout=10):
    """path's text once done(text) holds, or as it is after timeout."""
    end = time.monotonic() + timeout
    text = path.read_text()
    while not done(text) and time.monotonic() < end:
        time.sleep(0.05)
        text = path.read_text()
    return text


def stderr_pids(text):
    return [int(x) for x in re.findall(r"<stderr>:pid (\d+)", text)]


def test_stuck_reader_does_not_block_signals(hvdrun, tmp_path):
    # Nobody reads hvdrun's stdout while the ranks flood it: hvdrun must
    # still answer SIGTERM, and stop the ranks blocked on their pipes.
    err_path = tmp_path / "stderr"
    p = start_unread(hvdrun, 2, 'echo "pid $$" >&2; exec yes 0123456789abcdef', err_path)
    pids = []
    try:
        text = wait_for_text(err_path, lambda t: len(stderr_pids(t)) >= 2)
        pids = stderr_pids(text)
        assert len(pids) == 2, text
        time.sleep(0.5)  # every pipe on the way is full by now
        t0 = time.monotonic()
        p.send_signal(signal.SIGTERM)
        assert p.wait(timeout=LIMIT) == 128 + signal.SIGTERM
        assert time.monotonic() - t0 < 4
        assert_all_gone(pids, within=0.5)
    finally:
        stop_job(p, pids)


def test_stderr_flows_while_stdout_is_stuck(hvdrun, tmp_path):
    # Nobody reads hvdrun's stdout and a rank floods it: what the rank
    # says on stderr (its errors) still comes through.
    err_path = tmp_path / "stderr"
    p = start_unread(hvdrun, 1, 'yes 0123456789abcdef & sleep 2; echo "late words" >&2; wait',
                     err_path)
    try:
        text = wait_for_text(err_path, lambda t: "late words" in t)
        assert "[0]<stderr>:late words" in text
        p.send_signal(signal.SIGTERM)
        assert p.wait(timeout=LIMIT) == 128 + signal.SIGTERM
    finally:
        stop_job(p, [])


def test_reader_that_goes_away_early(hvdrun):
    # `hvdrun ... | head -1`: the rest of the output is dropped, the job
    # still ends normally.
    p = subprocess.Popen([hvdrun, "-np", "2", "sh", "-c", "seq 200000"],
                         stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE)
    try:
        assert p.stdout.readline().startswith(b"[")
        p.stdout.close()
        assert p.wait(timeout=LIMIT) == 0, p.stderr.read()
    finally:
        stop_job(p, [])


def test_ranks_do_not_outlive_a_killed_hvdrun(hvdrun):
    p = start(hvdrun, 2, 'echo "pid $$"; exec sleep 1000')
    pids = []
    try:
        pids = read_pids(p, 2)
        p.kill()  # SIGKILL: hvdrun gets no chance to clean up itself
        p.wait(timeout=LIMIT)
        assert_all_gone(pids)
    finally:
        stop_job(p, pids)


# ---- hosts ----

def test_other_hosts_are_started_over_ssh(hvdrun, tmp_path):
    # Not refused any more: a host that is not this machine gets its ranks
    # over ssh (test_remote.py), here an ssh that cannot reach it.
    fail = tmp_path / "ssh"
    fail.write_text("#!/bin/sh\necho 'ssh: Could not resolve hostname gpu-node-7' >&2\nexit 255\n")
    fail.chmod(0o755)
    p = run(hvdrun, ["-np", "2", "-H", "localhost:1,127.0.0.2:1", "--ssh-command", str(fail),
                     "true"])
    assert p.returncode == 255
    assert ("hvdrun: host '127.0.0.2': cannot start its ranks: ssh exited with code 255: "
            "ssh: Could not resolve hostname gpu-node-7\n") in p.stderr


def test_too_few_slots(hvdrun):
    p = run(hvdrun, ["-np", "4", "-H", "localhost:2", "true"])
    assert p.returncode == 2
    assert "hvdrun: -np 4 needs 4 slots, but -H gives only 2" in p.stderr


@pytest.mark.parametrize("hosts", ["localhost:2,127.0.0.1:1,::1:1",
                                   socket.gethostname() + ":4", "[::1]:4"])
def test_local_hosts_are_accepted(hvdrun, hosts):
    p = run(hvdrun, ["-np", "4", "-H", hosts, "true"])
    assert p.returncode == 0, p.stderr


# Each -H name is a host, even when several name this machine: the ranks
# are placed host by host, and only the first np slots are used.  A name
# given twice (in any case) is one host with the slots added up, at its
# first place.
@pytest.mark.parametrize("hosts,np,want", [
    ("localhost:2,127.0.0.1:2", 4, ["0 2 0 2", "1 2 0 2", "0 2 1 2", "1 2 1 2"]),
    ("localhost:3,127.0.0.1:1", 4, ["0 3 0 2", "1 3 0 1", "2 3 0 1", "0 1 1 2"]),
    ("localhost:2,127.0.0.1:4,localhost:2", 3, ["0 3 0 1", "1 3 0 1", "2 3 0 1"]),
    ("localhost:1,127.0.0.1:1,LOCALHOST:1", 3, ["0 2 0 2", "1 2 0 1", "0 1 1 2"]),
    ("localhost:8", 3, ["0 3 0 1", "1 3 0 1", "2 3 0 1"]),
])
def test_hosts_place_the_ranks(hvdrun, hosts, np, want):
    p = sh(hvdrun, np, 'echo "$HOROVOD_LOCAL_RANK $HOROVOD_LOCAL_SIZE $HOROVOD_CROSS_RANK '
                       '$HOROVOD_CROSS_SIZE $HOROVOD_SIZE"', extra=["-H", hosts])
    assert p.returncode == 0, p.stderr
    assert by_rank(p.stdout) == {r: [w + " %d" % np] for r, w in enumerate(want)}


def test_hostfile_places_the_ranks(hvdrun, tmp_path):
    hostfile = tmp_path / "hosts"
    hostfile.write_text("localhost slots=1\n127.0.0.1 slots=2\n")
    p = run(hvdrun, ["--hostfile", str(hostfile), "-np", "3", "sh", "-c",
                     'echo "$HOROVOD_LOCAL_RANK $HOROVOD_LOCAL_SIZE $HOROVOD_CROSS_RANK '
                     '$HOROVOD_CROSS_SIZE"'])
    assert p.returncode == 0, p.stderr
    assert by_rank(p.stdout) == {0: ["0 1 0 2"], 1: ["0 2 1 2"], 2: ["1 2 0 1"]}


def test_hostfile_with_enough_slots(hvdrun, tmp_path):
    hostfile = tmp_path / "hosts"
    hostfile.write_text("localhost slots=2  # comment\n\n127.0.0.1 slots=2\n")
    p = run(hvdrun, ["-np", "4", "--hostfile", str(hostfile), "true"])
    assert p.returncode == 0, p.stderr


def test_hostfile_one_line_per_slot(hvdrun, tmp_path):
    # An MPI machinefile: a host once per slot is one host; no slots= is one.
    hostfile = tmp_path / "machines"
    hostfile.write_text("# machines\nlocalhost\n  127.0.0.1   # second\nlocalhost\n\n")
    p = run(hvdrun, ["--hostfile", str(hostfile), "-np", "3", "sh", "-c",
                     'echo "$HOROVOD_HOSTNAME $HOROVOD_LOCAL_RANK $HOROVOD_LOCAL_SIZE"'])
    assert p.returncode == 0, p.stderr
    assert by_rank(p.stdout) == {0: ["localhost 0 2"], 1: ["localhost 1 2"],
                                 2: ["127.0.0.1 0 1"]}


@pytest.mark.parametrize("lines,bad,why", [
    ("localhost slots=2\nh2 slot=2\n", 2, "expected 'host slots=N'"),
    ("# c\n\nlocalhost slots=2 extra\n", 3, "expected 'host slots=N'"),
    ("localhost slots=0\n", 1, "host 'localhost' has slots '0': expected a number in 1..1000000"),
    ("localhost slots=x\n", 1, "host 'localhost' has slots 'x'"),
    ("localhost\n-oProxyCommand=x slots=1\n", 2, "bad host name '-oProxyCommand=x'"),
])
def test_bad_hostfile_lines_name_file_and_line(hvdrun, tmp_path, lines, bad, why):
    hostfile = tmp_path / "hosts"
    hostfile.write_text(lines)
    p = run(hvdrun, ["--hostfile", str(hostfile), "-np", "1", "true"])
    assert p.returncode == 2
    assert p.stderr.startswith("hvdrun: %s:%d: %s" % (hostfile, bad, why)), p.stderr


# ---- the command line ----

@pytest.mark.parametrize("args", [
    [], ["--bogus", "true"], ["-np"], ["-np", "abc", "true"], ["-np", "0", "true"],
    ["-np", "4097", "true"], ["-np", "2x", "true"], ["-np", "-1", "true"],
    ["-np", " 2", "true"], ["-np", "2"], ["true"],
    ["-np", "1", "--start-timeout", "soon", "true"], ["-np", "1", "--start-timeout", "0", "true"],
    ["-np", "1", "--gloo-timeout-seconds", "99999999999999999999", "true"],
    ["-np", "1", "--log-level", "LOUD", "true"], ["-np", "1", "--verbose=yes", "true"],
    ["-np", "1", "-H", "localhost:x", "true"], ["-np", "1", "-H", "localhost:1,", "true"],
    ["-np", "1", "-H", "h:1", "--hostfile", "f", "true"],
    ["-np", "1", "--hostfile", "/nonexistent/hostfile", "true"],
    ["-np", "1", "-H", "[::1:1", "true"], ["-np", "1", "-H", "-oProxyCommand=x:1", "true"],
    ["-np", "1", "-p", "0", "true"], ["-np", "1", "--ssh-port", "65536", "true"],
    ["-np", "1", "-p", "22x", "true"], ["-np", "1", "-i", "", "true"],
    ["-np", "1", "--ssh-command", " ", "true"], ["-np", "1", "--output-filename=", "true"],
    ["-np", "1", "--network-interface", "", "true"],
    ["-np", "1", "--network-interface", "eth0,,eth1", "true"],
    ["-np", "1", "--network-interface", "a_name_longer_than_15", "true"],
    ["-np", "2", "-H", "localhost:1,nosuch.invalid:1", "true"],
])
def test_usage_errors(hvdrun, args):
    p = run(hvdrun, args)
    assert p.returncode == 2, (args, p.stderr)
    assert p.stderr.startswith("hvdrun: "), p.stderr
    assert p.stdout == ""


@pytest.mark.parametrize("flag,value,accepted", [
    ("--fusion-threshold-mb", "-1", "a whole number in 0..1048576"),
    ("--fusion-threshold-mb", "1048577", "a whole number in 0..1048576"),
    ("--fusion-threshold-mb", "1.5", "a whole number in 0..1048576"),
    ("--fusion-threshold-mb", "lots", "a whole number in 0..1048576"),
    ("--fusion-threshold-mb", "99999999999999999999999", "a whole number in 0..1048576"),
    ("--cycle-time-ms", "-0.5", "a number like 2.5 in 0..10000"),
    ("--cycle-time-ms", "+1", "a number like 2.5 in 0..10000"),
    ("--cycle-time-ms", "1e3", "a number like 2.5 in 0..10000"),
    ("--cycle-time-ms", "1.2.3", "a number like 2.5 in 0..10000"),
    ("--cycle-time-ms", ".", "a number like 2.5 in 0..10000"),
    ("--cycle-time-ms", "", "a number like 2.5 in 0..10000"),
    ("--cycle-time-ms", "inf", "a number like 2.5 in 0..10000"),
    ("--cycle-time-ms", "0x10", "a number like 2.5 in 0..10000"),
    ("--cycle-time-ms", " 1", "a number like 2.5 in 0..10000"),
    ("--cycle-time-ms", "10000.5", "a number like 2.5 in 0..10000"),
    ("--cache-capacity", "-1", "a whole number in 0..1048576"),
    ("--cache-capacity", "1048577", "a whole number in 0..1048576"),
    ("--cache-capacity", "1e3", "a whole number in 0..1048576"),
    ("--stall-check-warning-time-seconds", "0", "a whole number of seconds in 1..86400"),
    ("--stall-check-warning-time-seconds", "86401", "a whole number of seconds in 1..86400"),
    ("--stall-check-warning-time-seconds", "2.5", "a whole number of seconds in 1..86400"),
    ("--stall-check-shutdown-time-seconds", "-1", "a whole number of seconds in 0..86400"),
    ("--stall-check-shutdown-time-seconds", "never", "a whole number of seconds in 0..86400"),
    ("--start-timeout", "0", "a whole number of seconds in 1..86400"),
    ("--autotune-steps-per-sample", "0", "a whole number in 1..1000"),
    ("--autotune-bayes-opt-max-samples", "65", "a whole number in 1..64"),
    ("--autotune-retune-drop", "1.5", "a number like 2.5 in 0..1"),
])
def test_bad_engine_values_are_refused(hvdrun, flag, value, accepted):
    for args in ([flag, value], [flag + "=" + value]):
        p = run(hvdrun, ["-np", "1"] + args + ["true"])
        assert p.returncode == 2, (args, p.stderr)
        assert p.stderr.startswith("hvdrun: %s needs %s, not '%s'\n" % (flag, accepted, value)), \
            p.stderr
        assert p.stdout == ""


def test_bad_start_timeout_in_the_environment(hvdrun):
    p = run(hvdrun, ["-np", "1", "true"], env=env_without(HOROVOD_START_TIMEOUT="soon"))
    assert p.returncode == 2
    assert p.stderr.startswith("hvdrun: HOROVOD_START_TIMEOUT must be a whole number of seconds "
                               "in 1..86400, not 'soon'\n"), p.stderr


def test_empty_timeline_path_is_refused(hvdrun):
    p = run(hvdrun, ["-np", "1", "--timeline-filename=", "true"])
    assert p.returncode == 2
    assert p.stderr.startswith("hvdrun: --timeline-filename needs a path"), p.stderr


@pytest.mark.parametrize("flag", ["--timeline-mark-cycles", "--no-stall-check",
                                  "--log-hide-timestamp"])
def test_switches_take_no_value(hvdrun, flag):
    p = run(hvdrun, ["-np", "1", flag + "=1", "true"])
    assert p.returncode == 2
    assert p.stderr.startswith("hvdrun: %s takes no value\n" % flag), p.stderr
    # A word after a switch is the program, not the switch's value.
    p = run(hvdrun, ["-np", "1", flag, "sh", "-c", "echo ran"])
    assert by_rank(p.stdout) == {0: ["ran"]}, p.stderr


def test_value_flags_need_a_value(hvdrun):
    p = run(hvdrun, ["-np", "1", "true", "--cycle-time-ms"])  # after the program: its argument
    assert p.returncode == 0, p.stderr
    p = run(hvdrun, ["-np", "1", "--cycle-time-ms"])
    assert p.returncode == 2
    assert "hvdrun: --cycle-time-ms needs a value" in p.stderr


def test_unknown_flag_prints_usage(hvdrun):
    p = run(hvdrun, ["--frobnicate", "-np", "2", "true"])
    assert "hvdrun: unknown flag '--frobnicate'" in p.stderr
    assert "usage: hvdrun -np N" in p.stderr


def test_help_lists_every_flag(hvdrun):
    p = run(hvdrun, ["--help"])
    assert p.returncode == 0
    for flag in ["-np", "--num-proc", "-H", "--hosts", "--hostfile", "-p", "--ssh-port", "-i",
                 "--ssh-identity-file", "--ssh-command", "--output-filename", "--verbose",
                 "--version", "--help"]:
        assert re.search(r"^  .*%s\b" % re.escape(flag), p.stdout, re.M), flag
    assert "--agent" not in p.stdout  # hvdrun's own, for ssh
    # A flag that sets a variable names it on its line.
    for flag, var in [("--start-timeout", "HOROVOD_START_TIMEOUT"),
                      ("--gloo-timeout-seconds", "HOROVOD_GLOO_TIMEOUT_SECONDS"),
                      ("--log-level", "HOROVOD_LOG_LEVEL"),
                      ("--log-hide-timestamp", "HOROVOD_LOG_HIDE_TIME")] + \
            [(args[0].split("=")[0], var) for args, var, _ in ENGINE_FLAGS]:
        assert re.search(r"^  %s\b.*\(%s\b" % (re.escape(flag), var), p.stdout, re.M), flag
    assert "(HOROVOD_FUSION_THRESHOLD = MB * 1048576, 0..1048576)" in p.stdout
    assert "(HOROVOD_CYCLE_TIME, 0..10000)" in p.stdout
    assert "(HOROVOD_STALL_CHECK_DISABLE=1)" in p.stdout
    assert run(hvdrun, ["-h"]).stdout == p.stdout


def test_version(hvdrun):
    for flag in ["-v", "--version"]:
        p = run(hvdrun, [flag])
        assert p.returncode == 0
        assert re.fullmatch(r"hvdrun \(hvd\) \d+\.\d+\.\d+\n", p.stdout)


# ---- the rendezvous under attack ----

@pytest.mark.parametrize("np", [2, 4])
def test_rendezvous_survives_strangers(hvdrun, test_program, np):
    prog = test_program("rdzv_attack")
    p = run(hvdrun, ["-np", str(np), prog],
            env=dict(os.environ, HOROVOD_START_TIMEOUT="20", HOROVOD_GLOO_TIMEOUT_SECONDS="10"))
    assert p.returncode == 0, p.stdout + p.stderr
    ok = {r for r, lines in by_rank(p.stdout).items() if "rdzv_attack OK" in lines}
    assert ok == set(range(np)), p.stdout + p.stderr


def built_with(build_dir, option):
    """An ON/OFF option from the build's CMakeCache.txt."""
    with open(os.path.join(build_dir, "CMakeCache.txt")) as f:
        for line in f:
            if line.startswith(option + ":"):
                return line.strip().rsplit("=", 1)[1].upper() in ("ON", "1", "TRUE", "YES")
    return False


def built_config(build_dir, name):
    """A fact of the build's generated hvd_build_config.h (CMake resolves
    options such as HVD_WITH_CUDA=AUTO there, not in its cache)."""
    with open(os.path.join(build_dir, "generated", "hvd_build_config.h")) as f:
        for line in f:
            if line.startswith("#define %s " % name):
                return line.split()[2] == "1"
    raise AssertionError("%s is not in hvd_build_config.h" % name)


@pytest.mark.parametrize("flag", ["--check-build", "-cb"])
def test_check_build_in_horovodruns_layout(hvdrun, build_dir, flag):
    """horovodrun --check-build's lines, in its order: PyTorch when hvd._C
    was built here, TensorFlow and Keras when hvd.tensorflow's op library
    was (Keras after horovodrun's three, then JAX when hvd.jax's library was), MXNet when hvd.mxnet's library was, MPI when the build has it, Gloo
    (hvd's own controller and operations) always, NCCL and CUDA when the
    build has them (the engine's NCCL and staged paths: docs/gpu.md), and
    whether a job under plain mpirun forms through MPI or needs a secret;
    nothing else; no job is started."""
    torch = any(n.startswith("_C") for n in os.listdir(os.path.join(build_dir, "python", "hvd"))) \
        if os.path.isdir(os.path.join(build_dir, "python", "hvd")) else False
    mpi = built_with(build_dir, "HVD_WITH_MPI")
    nccl = built_config(build_dir, "HVD_BUILT_NCCL")
    cuda = built_config(build_dir, "HVD_BUILT_CUDA")
    tf = os.path.isdir(os.path.join(build_dir, "python", "hvd", "tensorflow")) and any(
        n.startswith("_hvd_tf_ops") for n in os.listdir(os.path.join(build_dir, "python", "hvd",
                                                                   "tensorflow")))
    jax_dir = os.path.join(build_dir, "python", "hvd", "jax")
    jax = os.path.isdir(jax_dir) and "_hvd_jax.so" in os.listdir(jax_dir)
    assert jax == bool(built_config(build_dir, "HVD_BUILT_JAX"))
    mx_dir = os.path.join(build_dir, "python", "hvd", "mxnet")
    mx = os.path.isdir(mx_dir) and any(n.startswith("_hvd_mx") for n in os.listdir(mx_dir))
    assert mx == bool(built_config(build_dir, "HVD_BUILT_MXNET"))

    def mark(have):
        return "[X]" if have else "[ ]"

    want = ["hvd v%s:" % version(hvdrun), "",
            "Available Frameworks:",
            "    %s TensorFlow" % mark(tf), "    %s PyTorch" % mark(torch), "    %s MXNet" % mark(mx),
            "    %s Keras" % mark(tf and built_config(build_dir, "HVD_BUILT_KERAS")),
            "    %s JAX" % mark(jax), "",
            "Available Controllers:",
            "    %s MPI" % mark(mpi), "    [X] Gloo", "",
            "Available Tensor Operations:",
            "    %s NCCL" % mark(nccl), "    [ ] DDL", "    [ ] CCL", "    %s MPI" % mark(mpi),
            "    [X] Gloo", "",
            "Available Devices:",
            "    %s CUDA" % mark(cuda), "",
            "Under mpirun:",
            "    [X] the job forms through MPI: no _HOROVOD_SECRET_KEY needed" if mpi else
            "    [ ] the job forms through MPI (this build has no MPI: the binary wheel never has, "
            "a source build has with libopenmpi-dev): pass a _HOROVOD_SECRET_KEY with mpirun -x"]
    p = run(hvdrun, [flag])
    assert p.returncode == 0 and p.stderr == "", p.stderr
    assert p.stdout.splitlines() == want, p.stdout
    # Like --version, it answers before anything else is checked or started.
    assert run(hvdrun, ["-np", "2", flag, "sh", "-c", "echo ran"]).stdout.splitlines() == want


def version(hvdrun):
    return run(hvdrun, ["--version"]).stdout.split()[-1]
