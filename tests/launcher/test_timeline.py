"""HOROVOD_TIMELINE: rank 0 writes Chrome trace-event JSON of what happened
to each tensor -- one row (pid) per tensor named by a process_name
metadata event; begin/end phases NEGOTIATE_<OP>, MEMCPY_IN_FUSION_BUFFER
(for inputs copied into place), the collective (ALLREDUCE, whose "B" event
says how many tensors and bytes it fused); an instant event as each rank reports
a tensor ready; with HOROVOD_TIMELINE_MARK_CYCLES=1, a mark per cycle.

The job is tests/mpi/engine_timeline.c: per step a burst of 50 small
allreduces, a broadcast and an allgather.  The file must parse as JSON
once the job has ended.
"""
import json
import os
import re
import subprocess

import pytest

LIMIT = 60
STEPS = 5
SMALL = ["tl.small.%d" % k for k in range(50)]


def start_job(hvdrun, program, np, spec, steps=STEPS, **extra):
    """Runs the job with HOROVOD_TIMELINE=spec; returns its stderr."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("HOROVOD_")}
    env.update(HOROVOD_GLOO_TIMEOUT_SECONDS="30", HOROVOD_TIMELINE=str(spec), **extra)
    p = subprocess.run([hvdrun, "-np", str(np), program, str(steps)], env=env,
                       stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=LIMIT)
    assert p.returncode == 0, p.stdout + p.stderr
    assert p.stdout.count(": OK") == np, p.stdout + p.stderr
    return p.stderr


def load(path):
    with open(path) as f:
        events = json.load(f)  # the whole file, after shutdown, is valid JSON
    assert isinstance(events, list) and events, "empty timeline"
    return events


def run_job(hvdrun, program, np, path, mark_cycles):
    extra = {"HOROVOD_TIMELINE_MARK_CYCLES": "1"} if mark_cycles else {}
    start_job(hvdrun, program, np, path, **extra)
    return load(path)


def hvd_meta(events, name):
    """The args of hvd's own metadata events called name (pid 0)."""
    return [e["args"] for e in events if e.get("ph") == "M" and e.get("name") == name]


def rows(events):
    """{tensor name: pid} from the process_name metadata events."""
    named = {}
    for e in events:
        if e.get("ph") == "M" and e.get("name") == "process_name":
            name = e["args"]["name"]
            assert named.get(name, e["pid"]) == e["pid"], "%s has two rows" % name
            named[name] = e["pid"]
    assert len(set(named.values())) == len(named), "two tensors share a row"
    return named


def row_events(events, pid):
    return [e for e in events if e.get("pid") == pid and e.get("ph") != "M"]


def phases(evs):
    """The row's B/E pairs as (name, begin event, end event), in order;
    asserts that they balance and never end before they begin."""
    stack, done = [], []
    for e in evs:
        assert isinstance(e.get("ts"), (int, float)), e
        if e["ph"] == "B":
            stack.append(e)
        elif e["ph"] == "E":
            assert stack, "an E without its B at ts %s" % e["ts"]
            b = stack.pop()
            assert e["ts"] >= b["ts"], "%s ends before it begins" % b["name"]
            done.append((b["name"], b, e))
    assert not stack, "unterminated phases: %s" % [b["name"] for b in stack]
    done.sort(key=lambda d: (d[1]["ts"], d[2]["ts"]))
    return done


def ops(done, negotiate):
    """Splits a row's phases into one list per operation, each starting at
    its NEGOTIATE_<OP> phase."""
    runs = []
    for name, b, e in done:
        if name == negotiate:
            runs.append([])
        assert runs, "%s before any %s" % (name, negotiate)
        runs[-1].append((name, b, e))
    return runs


def check_allreduce_row(name, done):
    """Per step: NEGOTIATE_ALLREDUCE, then MEMCPY_IN_FUSION_BUFFER when the
    tensor is reduced out of place (odd tl.small.<k>: its input is copied
    into place) unless it rode the fast path's exchange (its ALLREDUCE
    says "rode": its input went there), then ALLREDUCE.  Fused or not, tensors are reduced where
    they lie, so nothing is copied out.  Returns the ALLREDUCE B events."""
    runs = ops(done, "NEGOTIATE_ALLREDUCE")
    assert len(runs) == STEPS, "%s: %d negotiations for %d steps" % (name, len(runs), STEPS)
    collectives = []
    for run in runs:
        names = [n for n, _, _ in run]
        assert names.count("ALLREDUCE") == 1, "%s: %s" % (name, names)
        ar = [b for n, b, _ in run if n == "ALLREDUCE"][0]
        collectives.append(ar)
        args = ar.get("args", {})
        assert args.get("tensors", 0) >= 1 and args.get("bytes", 0) > 0, ar
        out_of_place = int(name.rsplit(".", 1)[1]) % 2 == 1 and not args.get("rode")
        want = ["NEGOTIATE_ALLREDUCE"] + (["MEMCPY_IN_FUSION_BUFFER"] if out_of_place else [])
        assert names == want + ["ALLREDUCE"], "%s: %s" % (name, names)
    return collectives


def check_other_row(name, done, op):
    runs = ops(done, "NEGOTIATE_" + op)
    assert len(runs) == STEPS, "%s: %d negotiations for %d steps" % (name, len(runs), STEPS)
    for run in runs:
        assert [n for n, _, _ in run].count(op) == 1, "%s: %s" % (name, run)


def ready_ranks(evs):
    """Rank numbers named by a row's instant events."""
    found = set()
    for e in evs:
        if e["ph"] in ("i", "I"):
            found.update(int(n) for n in re.findall(r"\d+", e.get("name", "")))
    return found


def cycle_marks(events):
    return [e for e in events if e.get("ph") in ("i", "I") and "cycle" in e.get("name", "").lower()]


@pytest.mark.parametrize("np,mark_cycles", [(2, True), (4, True), (2, False)])
def test_timeline(hvdrun, test_program, tmp_path, np, mark_cycles):
    events = run_job(hvdrun, test_program("engine_timeline"), np, tmp_path / "timeline.json",
                     mark_cycles)
    for e in events:
        assert e.get("ph") in ("B", "E", "i", "I", "M", "X"), e
    named = rows(events)
    missing = [t for t in SMALL + ["tl.bcast", "tl.gather"] if t not in named]
    assert not missing, "no row for %s; rows: %s" % (missing, sorted(named))

    collectives = []
    for t in SMALL:
        evs = row_events(events, named[t])
        collectives += check_allreduce_row(t, phases(evs))
        assert set(range(np)) <= ready_ranks(evs), \
            "%s: instant events name ranks %s, not every rank of %d" % (t, ready_ranks(evs), np)
    check_other_row("tl.bcast", phases(row_events(events, named["tl.bcast"])), "BROADCAST")
    check_other_row("tl.gather", phases(row_events(events, named["tl.gather"])), "ALLGATHER")

    # The bursts were fused: some ALLREDUCE carried several tensors.
    fused = [c["args"]["tensors"] for c in collectives if c["args"]["tensors"] > 1]
    assert fused, "no ALLREDUCE fused more than one tensor in %d bursts" % STEPS

    # The job's settings, once; rank 0 wrote this file; it ended on purpose.
    job = hvd_meta(events, "hvd_job")
    assert len(job) == 1 and job[0]["rank"] == 0 and job[0]["size"] == np, job
    assert job[0]["fusion_threshold"] == 128 * 1024 * 1024, job
    assert len(hvd_meta(events, "hvd_end")) == 1 and not hvd_meta(events, "hvd_truncated")
    assert {c["args"]["dtype"] for c in collectives} == {"float32"}

    marks = cycle_marks(events)
    if mark_cycles:
        assert len(marks) >= STEPS, "%d cycle marks" % len(marks)
    else:
        assert not marks, "cycle marks without HOROVOD_TIMELINE_MARK_CYCLES: %s" % marks[:3]


def waits(events):
    """The WAIT events of the row named "waits": an application thread
    blocked in hvd_wait, from ts for dur microseconds."""
    pid = rows(events).get("waits")
    return [e for e in events if e.get("pid") == pid and e.get("ph") == "X"] if pid else []


@pytest.mark.parametrize("form", ["directory", "percent-r"])
def test_every_rank_writes_its_own(hvdrun, test_program, tmp_path, form):
    """HOROVOD_TIMELINE=DIR/ or a path with %r: each rank writes a complete
    timeline of its own, saying whose it is, with its waits."""
    np = 3
    if form == "directory":
        spec = str(tmp_path / "tl") + "/"  # made by the ranks
        paths = [tmp_path / "tl" / ("rank.%d.json" % r) for r in range(np)]
    else:
        spec = str(tmp_path / "tl.%r.json")
        paths = [tmp_path / ("tl.%d.json" % r) for r in range(np)]
    start_job(hvdrun, test_program("engine_timeline"), np, spec)
    assert sorted(os.listdir(paths[0].parent)) == sorted(p.name for p in paths)
    for r, path in enumerate(paths):
        events = load(path)
        job = hvd_meta(events, "hvd_job")
        assert len(job) == 1 and job[0]["rank"] == r and job[0]["size"] == np, (path, job)
        assert hvd_meta(events, "hvd_end"), "%s did not end on purpose" % path
        named = rows(events)
        assert all(t in named for t in SMALL), "%s lacks tensors" % path
        for t in SMALL[:3]:
            check_allreduce_row(t, phases(row_events(events, named[t])))
        blocked = waits(events)
        assert blocked and all(w["name"] == "WAIT" and w["dur"] >= 0 for w in blocked), path


def test_bound_ends_each_file(hvdrun, test_program, tmp_path):
    """HOROVOD_TIMELINE_MAX_MB=1: every rank's file stops at 1 MiB as
    complete JSON that says it was cut, with a warning; the job goes on."""
    np = 2
    err = start_job(hvdrun, test_program("engine_timeline"), np, str(tmp_path) + "/", steps=80,
                    HOROVOD_TIMELINE_MAX_MB="1")
    assert err.count("reached its bound of 1048576 bytes") == np, err
    for r in range(np):
        path = tmp_path / ("rank.%d.json" % r)
        assert 512 * 1024 < path.stat().st_size <= 1024 * 1024
        events = load(path)
        cut = hvd_meta(events, "hvd_truncated")
        assert len(cut) == 1 and cut[0]["max_bytes"] == 1024 * 1024, cut
        assert not hvd_meta(events, "hvd_end")
