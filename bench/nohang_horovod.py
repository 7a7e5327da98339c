#!/usr/bin/env python3
"""The Horovod peer for bench/nohang-times: tests/nohang's hvd.torch
program (tests/nohang/frameworks.py) run with real Horovod's horovod.torch
(horovod==0.28.1, Gloo, CPU; bench/horovod-venv.sh builds it) instead of
hvd.torch, under Horovod's own launcher (horovodrun --gloo).

    python nohang_horovod.py desync|frozen

desync: even ranks wait in allreduce 'grad.a', odd ranks in 'grad.b';
frozen: every rank loops on an allreduce 'step' and the last stops itself
(SIGSTOP) at the 20th.  Each rank prints tests/nohang's line, "rank R:
ended EXCEPTION after T s: MESSAGE", if its call ever raises.
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests",
                                "nohang"))
from frameworks import torch_program  # noqa: E402  (tests/nohang's program)

import horovod.torch  # noqa: E402

if __name__ == "__main__":
    sys.exit(torch_program([sys.argv[1]], 0, hvd=horovod.torch))
