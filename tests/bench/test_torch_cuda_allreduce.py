"""bench/torch-cuda-allreduce (the GPU benchmark) on CPU tensors, --cpu:
the same code paths as on the GPU (hvd's allreduce and gloo's alternating
under hvdrun at np 2; the np 1 ceilings with gloo standing in for NCCL),
tiny sizes.  Checks that it runs and prints its tables with a number in
every cell; no timing is asserted.  Without --cpu and without a GPU it
skips (exit 77) saying why."""
import os
import re
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
DRIVER = os.path.join(ROOT, "bench", "torch-cuda-allreduce")
BUILD = os.path.abspath(os.environ.get("HVD_BUILD_DIR", os.path.join(ROOT, "build")))
NUM = r"\d+\.\d+"


def driver(*args, **env):
    full = dict(os.environ, PY=sys.executable, NPS="2", **env)
    full.pop("HVD_TEST_EXPECT_GPU", None)
    return subprocess.run([DRIVER, *args, BUILD], capture_output=True, text=True,
                          env=full, timeout=300)


def rows(text, cells):
    return [l for l in text.splitlines()
            if re.fullmatch(r"\| \d+ KiB" + r" \| [^|]+" * (cells - 1) + r" \|", l)]


def test_cpu_run_prints_both_tables():
    out = driver("--cpu")
    assert out.returncode == 0, out.stdout + out.stderr
    text = out.stdout
    assert re.search(r"^np 1, CPU tensors \(--cpu.*HOROVOD_GPU_OPERATIONS=NCCL", text, re.M), text
    assert re.search(r"^np 2, CPU tensors \(--cpu.*HOROVOD_GPU_OPERATIONS=GLOO", text, re.M), text
    assert ("| size | copy (ms) | copy (GB/s) | via host (GB/s) | torch gloo (GB/s) "
            "| hvd NCCL (GB/s) | torch gloo/copy | hvd NCCL/copy |") in text
    assert "| size | hvd (ms) | gloo (ms) | hvd busbw (GB/s) | gloo busbw (GB/s) | hvd/gloo |" in text
    ceil = rows(text, 8)
    staged = rows(text, 6)
    assert [r.split("|")[1].strip() for r in ceil] == ["4 KiB", "16 KiB"], text
    assert [r.split("|")[1].strip() for r in staged] == ["4 KiB", "16 KiB"], text
    for r in ceil + staged:  # every path ran: a number in each cell
        for c in r.strip("|").split("|")[1:]:
            assert re.fullmatch(NUM, c.strip()), r
    assert len(re.findall(r"^load average \(1, 5, 15 min\): [\d. ]+ before, [\d. ]+ after$",
                          text, re.M)) == 2, text


def test_without_a_gpu_skips_saying_why():
    pytest.importorskip("torch")
    import torch
    if torch.cuda.is_available():
        pytest.skip("a CUDA device is here")
    out = driver()
    assert out.returncode == 77, out.stdout + out.stderr
    assert "sees no CUDA device" in out.stderr
    assert "skipped (--cpu runs it on CPU tensors)" in out.stderr


@pytest.fixture
def b():
    sys.path.insert(0, os.path.join(ROOT, "bench"))
    try:
        import torch_cuda_allreduce
        yield torch_cuda_allreduce
    finally:
        sys.path.remove(os.path.join(ROOT, "bench"))


class FakeHvd:
    """Rank 0 of a job whose other ranks' outcomes of the checks (the
    dicts Bench.agree gathers) are `others`; their times are rank 0's."""
    def __init__(self, others=()):
        self.others = list(others)

    def rank(self):
        return 0

    def size(self):
        return 1 + len(self.others)

    def allgather_object(self, obj):
        return [obj] + (self.others if isinstance(obj, dict) else [obj] * len(self.others))


def test_refusal_becomes_a_cell(b):
    """hvd's clean refusal of a path (HOROVOD_GPU_OPERATIONS=NCCL today)
    is the cell 'not supported yet', any other error its first line."""
    msg = ("allreduce 'x': HOROVOD_GPU_OPERATIONS=NCCL: the NCCL path is not supported yet "
           "(unset it, ...)\nmore")
    assert b.why_not(RuntimeError(msg)) == "not supported yet"
    assert b.why_not(RuntimeError("boom\nsecond line")) == "failed: boom"
    assert b.ratio("not supported yet", 1.0) == "-"
    assert b.ratio(0.5, 1.0) == "2.00"


def test_a_refused_column_is_skipped_and_the_others_timed(b):
    import torch
    bench = b.Bench(FakeHvd(), torch.device("cpu"), reps=3)
    ran = []

    def refuse():
        raise RuntimeError("allreduce 'x': HOROVOD_GPU_OPERATIONS=NCCL: the NCCL path is "
                           "not supported yet")
    out = bench.run(4096, {"copy": (lambda: None, lambda: ran.append("copy")),
                           "hvd": (refuse, lambda: ran.append("hvd"))}, lambda: None)
    assert out["hvd"] == "not supported yet"
    assert isinstance(out["copy"], float) and out["copy"] >= 0
    assert ran == ["copy"] * 3


def test_a_column_failed_on_another_rank_runs_nowhere(b):
    """Every rank agrees on what runs: rank 0's check passed, another
    rank's failed, so rank 0 does not time it either (it would wait alone)."""
    import torch
    other = {"gloo": "failed: wrong result", "hvd": None}
    bench = b.Bench(FakeHvd([other]), torch.device("cpu"), reps=2)
    ran = []
    out = bench.run(4096, {"hvd": (lambda: None, lambda: ran.append("hvd")),
                           "gloo": (lambda: None, lambda: ran.append("gloo"))}, lambda: None)
    assert out["gloo"] == "failed: wrong result"
    assert ran == ["hvd", "hvd"]
