#!/usr/bin/env python3
"""examples/mxnet/synthetic_benchmark.py's model and loop, trained by MXNet's
own distributed kvstore (--kvstore, default dist_sync) instead of hvd: a
worker of a ps-lite job that bench/mxnet-kvstore starts with a scheduler
and servers (DMLC_ROLE=worker and the other DMLC_* variables set).  It
prints the example's lines, "Total img/sec on N CPU(s): ..." among them,
from the kvstore's rank 0.
"""
import ctypes
import importlib.util
import os

import mxnet as mx
import numpy as np
from mxnet import gluon
from mxnet.base import _LIB, check_call

_EXAMPLE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples", "mxnet",
                        "synthetic_benchmark.py")
_spec = importlib.util.spec_from_file_location("synthetic_benchmark", _EXAMPLE)
example = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(example)


def main():
    example.parser.add_argument("--kvstore", default="dist_sync", help="MXNet's kvstore type")
    args = example.parser.parse_args()
    kv = mx.kv.create(args.kvstore)
    mx.random.seed(kv.rank)
    np.random.seed(kv.rank)
    net = example.model(args)
    # The kvstore cannot read weights that the model's first forward left
    # in MKL-DNN's layout (MXNet 1.9's own failure: "We can't generate
    # TBlob for MKLDNN data"); hvd.mxnet's broadcast_parameters puts them
    # back in the default layout, and so does this.
    for p in net.collect_params().values():
        p.data().wait_to_read()
        check_call(_LIB.MXNDArrayGetData(p.data().handle, ctypes.byref(ctypes.c_void_p())))
    # The kvstore starts every worker from the values worker 0 pushes first.
    trainer = gluon.Trainer(net.collect_params(), "sgd",
                            {"learning_rate": 0.01 * kv.num_workers, "momentum": 0.9},
                            kvstore=kv)
    example.benchmark(net, trainer, args, kv.rank, kv.num_workers)


if __name__ == "__main__":
    main()
