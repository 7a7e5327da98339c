"""Ranks of an hvd.torch job made to fall out of step on purpose, as a
Horovod test whose check fails on one rank leaves them
(tests/launcher/test_engine_stall.py runs it):

  out_of_step.py scale   rank 0 waits in the scaled allreduce 'scale.check';
                         the others went on to the next test's 'next.test'
  out_of_step.py join    rank 0 waits in hvd.join(); the others went on
                         without joining (busy for 20 s, then an allreduce)

Each rank prints "rank R: ERROR <type>: <message>" for the error that
ends its wait (or its next call), "rank R: DONE" if there was none, and
exits 1 on an error, as an uncaught exception would.
"""
import sys
import time

import torch

import hvd.torch as hvd


def main(mode):
    hvd.init()
    me = hvd.rank()
    try:
        if mode == "scale":
            if me == 0:
                hvd.allreduce(torch.ones(5), op=hvd.Sum, postscale_factor=0.1, name="scale.check")
            else:
                hvd.allreduce(torch.ones(3), op=hvd.Sum, name="next.test")
        elif me == 0:
            hvd.join()
        else:
            time.sleep(20)
            hvd.allreduce(torch.ones(3), op=hvd.Sum, name="after.sleep")
    except Exception as e:  # noqa: BLE001 -- reported, then the rank fails
        print("rank %d: ERROR %s: %s" % (me, type(e).__name__, e), flush=True)
        return 1
    print("rank %d: DONE" % me, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
