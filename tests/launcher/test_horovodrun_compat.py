"""hvdrun as a horovodrun user meets it (issue 29), end to end: the flags
whose meaning shows only in a running job (timestamps on the output,
--config-file reaching the ranks, its unknown keys warned about,
--binding-args reaching mpirun), the one-line refusal of a flag with no
meaning here, the one-line warning of one that changes nothing here, the
library options' flags running a job, and the messages of
things that go wrong: a discovery script that cannot be run, a program
that cannot be run in an elastic job, a signal to an elastic hvdrun, an
unresolvable host in the first listing.  Every flag against the parser
alone: tests/unit/test_options.c.  Jobs are `sh -c` or `true` on
localhost, a few seconds in all."""
import os
import re
import signal
import subprocess
import time

LIMIT = 60


def run(hvdrun, args, env=None, cwd=None):
    return subprocess.run([hvdrun] + args, env=env, cwd=cwd, stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=LIMIT)


def script(path, text, mode=0o755):
    path.write_text(text)
    path.chmod(mode)
    return str(path)


# ---- flags ----

STAMP = r"(Mon|Tue|Wed|Thu|Fri|Sat|Sun) [A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d \d{4}"


def test_output_prefixed_with_timestamp(hvdrun):
    for flag in ["--prefix-output-with-timestamp", "-prefix-timestamp"]:
        p = run(hvdrun, ["-np", "2", flag, "sh", "-c", "echo out; echo err >&2"])
        assert p.returncode == 0, p.stderr
        for stream, text in [("stdout", p.stdout), ("stderr", p.stderr)]:
            lines = sorted(text.splitlines())
            assert len(lines) == 2, text
            for rank, line in enumerate(lines):
                assert re.fullmatch(r"%s\[%d\]<%s>:%s" % (STAMP, rank, stream, stream[3:]),
                                    line), line


def test_refused_flag_says_so_in_one_line(hvdrun):
    p = run(hvdrun, ["-np", "1", "--jsrun", "true"])
    assert p.returncode == 2
    assert p.stdout == ""
    assert p.stderr.startswith("hvdrun: --jsrun has no meaning here: "), p.stderr
    assert p.stderr.count("\n") == 1, p.stderr


def test_config_file_reaches_the_ranks_and_flags_override_it(hvdrun, tmp_path):
    cfg = tmp_path / "horovod.yaml"
    cfg.write_text("params:\n  fusion_threshold_mb: 4\n  cycle_time_ms: 3.5\n"
                   "stall_check:\n  enabled: false\nlogging:\n  level: info\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("HOROVOD_")}
    p = run(hvdrun, ["-np", "2", "--config-file", str(cfg), "--log-level", "error", "sh", "-c",
                     'echo "$HOROVOD_FUSION_THRESHOLD $HOROVOD_CYCLE_TIME '
                     '$HOROVOD_STALL_CHECK_DISABLE $HOROVOD_LOG_LEVEL"'], env=env)
    assert p.returncode == 0, p.stderr
    assert sorted(p.stdout.splitlines()) == ["[0]<stdout>:4194304 3.5 1 ERROR",
                                             "[1]<stdout>:4194304 3.5 1 ERROR"]


def test_horovodrun_config_runs_unchanged(hvdrun, tmp_path):
    """A horovodrun file with keys hvdrun does not know and the three
    library options that once stopped the job: the unknown ones are named
    in a warning, mpi_threads_disable warns that it changes nothing, the
    rest reach the ranks, and the job runs."""
    cfg = tmp_path / "horovod.yaml"
    cfg.write_text("params:\n  hierarchical_allgather: true\n  fusion_treshold_mb: 4\n"
                   "library_options:\n  thread_affinity: 0\n  mpi_threads_disable: true\n"
                   "elastic:\n  reset_limit: 3\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("HOROVOD_")}
    p = run(hvdrun, ["-np", "2", "--config-file", str(cfg), "sh", "-c",
                     'echo "$HOROVOD_HIERARCHICAL_ALLGATHER $HOROVOD_THREAD_AFFINITY"'], env=env)
    assert p.returncode == 0, p.stderr
    assert sorted(p.stdout.splitlines()) == ["[0]<stdout>:1 0", "[1]<stdout>:1 0"]
    # What the file holds is read first, then applied.
    assert p.stderr.splitlines() == [
        "hvdrun: warning: %s: line 3: unknown key 'params.fusion_treshold_mb' ignored" % cfg,
        "hvdrun: warning: %s: line 7: unknown section 'elastic' ignored" % cfg,
        "hvdrun: warning: %s: line 6: library_options.mpi_threads_disable: "
        "--mpi-threads-disable changes nothing here: hvd initialises MPI with threads (it needs "
        "them only for HOROVOD_CPU_OPERATIONS=mpi); a program that wants MPI without threads "
        "calls MPI_Init itself, and hvd then leaves MPI alone after hvd_init" % cfg], p.stderr


def test_library_option_flags_run_a_job(hvdrun):
    """--hierarchical-allgather, --mpi-threads-disable and --thread-affinity
    run a job unchanged (their effects: tests/mpi test_hierarchical
    allgather, test_affinity); only --mpi-threads-disable says a word."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("HOROVOD_")}
    p = run(hvdrun, ["-np", "2", "--hierarchical-allgather", "--mpi-threads-disable",
                     "--thread-affinity", "0,0", "sh", "-c",
                     'echo "$HOROVOD_HIERARCHICAL_ALLGATHER $HOROVOD_THREAD_AFFINITY"'], env=env)
    assert p.returncode == 0, p.stderr
    assert sorted(p.stdout.splitlines()) == ["[0]<stdout>:1 0,0", "[1]<stdout>:1 0,0"]
    assert p.stderr.startswith("hvdrun: warning: --mpi-threads-disable changes nothing here: ")
    assert p.stderr.count("\n") == 1, p.stderr


def test_binding_args_and_timestamps_reach_mpirun(hvdrun, tmp_path):
    # A stand-in mpirun that prints what it was given.
    script(tmp_path / "mpirun", '#!/bin/sh\necho "$@"\n')
    env = dict(os.environ, PATH="%s:%s" % (tmp_path, os.environ["PATH"]))
    p = run(hvdrun, ["-np", "2", "--mpi", "--binding-args", "--bind-to core --map-by socket",
                     "-prefix-timestamp", "prog"], env=env)
    assert p.returncode == 0, p.stderr
    assert "--tag-output --timestamp-output --bind-to core --map-by socket -np 2" in p.stdout
    assert "none" not in p.stdout.split()
    p = run(hvdrun, ["-np", "2", "--mpi", "prog"], env=env)
    assert "--tag-output --bind-to none --map-by slot -np 2" in p.stdout, p.stdout


# ---- messages ----

def test_discovery_script_that_cannot_be_run(hvdrun, tmp_path):
    cases = [("/nonexistent", "No such file or directory"),
             (script(tmp_path / "d.sh", "#!/bin/sh\necho localhost:1\n", 0o644),
              "Permission denied")]
    for path, why in cases:
        p = run(hvdrun, ["-np", "1", "--host-discovery-script", path, "true"])
        assert p.returncode == 2, p.stderr
        assert ("hvdrun: the host discovery script '%s': cannot be run: %s\n" % (path, why)
                == p.stderr), p.stderr
        assert "exited with code" not in p.stderr


def test_elastic_program_that_cannot_be_run(hvdrun, tmp_path):
    started = time.monotonic()
    p = run(hvdrun, ["-np", "2", "--min-np", "1", "-H", "localhost:2", "/nonexistent"])
    assert p.returncode == 127, p.stderr
    assert "cannot run '/nonexistent' on localhost: No such file or directory" in p.stderr
    assert "elastic: stopping the job: the program cannot be run" in p.stderr
    assert time.monotonic() - started < LIMIT / 2  # not --elastic-timeout's 600 s


def test_elastic_program_that_never_joins_and_exits_0(hvdrun):
    p = run(hvdrun, ["-np", "1", "--min-np", "1", "-H", "localhost:1", "true"])
    assert p.returncode == 0, p.stderr
    p = run(hvdrun, ["-np", "2", "--min-np", "1", "-H", "localhost:2", "sh", "-c", "echo ran"])
    assert p.returncode == 0, p.stderr
    assert sorted(p.stdout.splitlines()) == ["[0]<stdout>:ran", "[1]<stdout>:ran"]  # once each


def test_signal_to_an_elastic_hvdrun_is_named(hvdrun):
    for sig in [signal.SIGTERM, signal.SIGINT]:
        p = subprocess.Popen([hvdrun, "-np", "2", "--min-np", "2", "-H", "localhost:2",
                              "sh", "-c", "echo up; exec sleep 60"],
                             stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
        assert p.stdout.readline().endswith("up\n")
        p.send_signal(sig)
        out, err = p.communicate(timeout=LIMIT)
        assert p.returncode == 128 + sig, err
        assert ("hvdrun: elastic: stopping the job: hvdrun got signal %d (%s)"
                % (sig, signal.strsignal(sig))) in err, err
        assert "held the job's state" not in err


def test_unresolvable_host_in_the_first_listing(hvdrun, tmp_path):
    d = script(tmp_path / "d.sh", "#!/bin/sh\necho localhost:1\necho nosuch.invalid:1\n")
    p = run(hvdrun, ["-np", "1", "--min-np", "1", "--host-discovery-script", d, "true"])
    assert p.returncode == 0, p.stderr
    assert ("hvdrun: warning: the host discovery script '%s' lists nosuch.invalid: " % d
            in p.stderr), p.stderr
    p = run(hvdrun, ["-np", "2", "--min-np", "2", "--host-discovery-script", d, "true"])
    assert p.returncode == 2, p.stderr
    assert ("hvdrun: the host discovery script '%s': the hosts that can be reached have 1 "
            "slots, fewer than --min-np 2\n" % d) in p.stderr, p.stderr
