"""Reading an elastic job's output (tests/mpi/elastic_worker.c's lines and
hvdrun's) and checking what every elastic test checks: the job finished,
every job's ranks agreed bit for bit after each recovery, no committed
step was lost, and nothing was left behind.  Shared by tests/launcher and
tests/cluster."""
import os
import re
import subprocess
import time

LINE = re.compile(r"\[(\d+)\]<stdout>:(.*)")


class Run:
    """What one elastic job printed."""

    def __init__(self, stdout, stderr, returncode):
        self.stdout, self.stderr, self.returncode = stdout, stderr, returncode
        self.lines = []  # (worker, text), in order
        for line in stdout.splitlines():
            m = LINE.fullmatch(line)
            if m:
                self.lines.append((int(m.group(1)), m.group(2)))
        self.jobs = [(int(m.group(1)), int(m.group(2))) for m in re.finditer(
            r"hvdrun: elastic: job (\d+) formed with (\d+) workers", stderr)]

    def __str__(self):
        return "exit %s\n--- stdout\n%s\n--- stderr\n%s" % (
            self.returncode, self.stdout[-6000:], self.stderr[-6000:])

    def parsed(self, pattern):
        return [(w, m) for w, t in self.lines for m in [re.fullmatch(pattern, t)] if m]


def check(run, steps, final_size=None):
    """The common checks; returns the sizes of the jobs that formed."""
    assert run.returncode == 0, str(run)
    done = run.parsed(r"done steps (\d+) size (\d+) digest (\w+)")
    assert done, str(run)
    assert {int(m.group(1)) for _, m in done} == {steps}, str(run)
    sizes = {int(m.group(2)) for _, m in done}
    assert len(sizes) == 1, str(run)
    size = sizes.pop()
    assert len(done) == size, "%d workers finished a job of %d:\n%s" % (len(done), size, run)
    if final_size is not None:
        assert size == final_size, "the last job had %d workers, not %d:\n%s" % (
            size, final_size, run)
    assert len({m.group(3) for _, m in done}) == 1, "the final parameters differ:\n%s" % run
    # After each recovery every rank holds the same parameters, and the
    # step it resumes from is at or past the last commit before it.
    last_commit = 0
    recovered = {}
    for _, text in run.lines:
        m = re.fullmatch(r"commit (\d+) digest \w+", text)
        if m:
            last_commit = max(last_commit, int(m.group(1)))
        m = re.fullmatch(r"recovered (\d+) step (\d+) digest (\w+)", text)
        if m:
            # Keyed by the step, not the job number: a worker that joins
            # late counts its jobs from 1, and training is deterministic
            # for any size, so every recovery to one step holds one state.
            recovered.setdefault(int(m.group(2)), set()).add(m.group(3))
            assert int(m.group(2)) >= last_commit, (
                "job %s resumed from step %s, below the last commit %d:\n%s"
                % (m.group(1), m.group(2), last_commit, run))
    for step, seen in recovered.items():
        assert len(seen) == 1, "ranks recovered different states %s at step %d:\n%s" % (
            seen, step, run)
    return [n for _, n in run.jobs]


def leftovers(program, segments_before, wait=10.0):
    """Processes of `program` still alive, and new hvd segments in
    /dev/shm, after waiting up to `wait` seconds for them to go."""
    end = time.monotonic() + wait
    while True:
        alive = subprocess.run(["pgrep", "-f", program], capture_output=True,
                               text=True).stdout.split()
        segments = set(shm_segments()) - segments_before
        if (not alive and not segments) or time.monotonic() > end:
            return alive, segments
        time.sleep(0.1)


def shm_segments():
    try:
        return {n for n in os.listdir("/dev/shm") if n.startswith("hvd")}
    except OSError:
        return set()
