"""Functions the launch-from-Python suites (tests/runner, tests/ray,
tests/spark) run on their ranks, and what to expect of them.  The ranks
cannot import this file: each suite registers it with cloudpickle (and
Ray's and Spark's copies) to travel by value, as a notebook's code does."""
import os


def collectives(scale):
    """Rank r contributes [r * scale, r + 1]: sums, gathers and a broadcast
    every rank can compute alone, and what the rank sees of its job."""
    import torch
    import hvd.torch as ht

    ht.init()
    r, n = ht.rank(), ht.size()
    x = torch.tensor([r * scale, r + 1.0], dtype=torch.float64)
    summed = ht.allreduce(x, op=ht.Sum, name="sum").tolist()
    gathered = ht.allgather(torch.tensor([[r]]), name="gather").flatten().tolist()
    root = ht.broadcast(torch.tensor([r + 10]), root_rank=n - 1, name="bcast").tolist()
    out = dict(rank=r, size=n, local_rank=ht.local_rank(), summed=summed, gathered=gathered,
               root=root, env=os.environ.get("HVD_TEST_VALUE"))
    ht.shutdown()
    return out


def expected(n, scale, env):
    """collectives(scale)'s values on a job of n ranks on one host."""
    return [dict(rank=r, size=n, local_rank=r,
                 summed=[scale * sum(range(n)), float(sum(range(1, n + 1)))],
                 gathered=list(range(n)), root=[n - 1 + 10], env=env) for r in range(n)]


def pid_alive(pid):
    """True while pid runs (a zombie counts as gone)."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().split()[2] != "Z"
    except OSError:
        return False


EXAMPLES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples",
                        "torch")
FASHION = "/usr/share/datasets/fashion-mnist"


def fashion_mnist_example(data_dir):
    """examples/torch/fashion_mnist.py as a module (its main() is what the
    Spark and Ray versions run on their ranks) and the quick arguments the
    plain example's test uses, or None without Debian's data set."""
    import importlib
    import sys

    if not os.path.exists(os.path.join(FASHION, "train-images-idx3-ubyte.gz")):
        return None, None
    sys.path.insert(0, os.path.abspath(EXAMPLES))
    try:
        example = importlib.import_module("fashion_mnist")
    finally:
        sys.path.pop(0)
    return example, ["--epochs", "1", "--train-limit", "6000", "--test-limit", "1000",
                     "--lr", "0.05", "--batch-size", "32", "--data-dir", data_dir]
