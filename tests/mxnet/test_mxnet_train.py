"""hvd.mxnet's training pieces: DistributedTrainer and DistributedOptimizer
average the ranks' gradients before the update (checked against the
update computed from every rank's own gradient), with fp16 compression,
gradient_predivide_factor, num_groups and two trainers told apart by their
prefixes; broadcast_parameters of NDArrays, of a ParameterDict and of
parameters whose initialisation is deferred to the first forward."""
import mxnet as mx
import numpy as np
import pytest
from mxnet import autograd, gluon
from rank_data import rank_input

import hvd.mxnet as hvd

LR = 0.1
BATCH = 8


def make_net(prefix="net_"):
    """A small MLP, initialised differently on every rank, then made alike."""
    mx.random.seed(1234 + hvd.rank())
    net = gluon.nn.HybridSequential(prefix=prefix)
    with net.name_scope():
        net.add(gluon.nn.Dense(6, in_units=4, activation="relu"))
        net.add(gluon.nn.Dense(2, in_units=6))
    net.initialize(mx.init.Xavier())
    hvd.broadcast_parameters(net.collect_params(), root_rank=0, prefix=prefix)
    return net


def backward(net, seed):
    """One batch of this rank's data through net; its gradients, copied."""
    x = mx.nd.array(rank_input((BATCH, 4), np.float32, hvd.rank(), seed))
    y = mx.nd.array(rank_input((BATCH, 2), np.float32, hvd.rank(), seed + 1))
    with autograd.record():
        loss = ((net(x) - y) ** 2).sum()
    loss.backward()
    params = [p for _, p in sorted(net.collect_params().items())]
    return params, [p.data().asnumpy() for p in params], [p.grad().asnumpy() for p in params]


def expected(weights, grads):
    """SGD's update by the mean over the ranks of each rank's gradient."""
    out = []
    for w, g in zip(weights, grads):
        every = hvd.allgather(mx.nd.array(g[None])).asnumpy()
        out.append(w - LR * every.mean(0) / BATCH)
    return out


def check_step(trainer_of, seed, tol=1e-5):
    net = make_net()
    trainer = trainer_of(net)
    params, weights, grads = backward(net, seed)
    if hvd.size() > 1:  # the ranks' own gradients differ: averaging matters
        assert not np.allclose(hvd.allgather(mx.nd.array(grads[0][None])).asnumpy(), grads[0])
    trainer.step(BATCH)
    for p, want in zip(params, expected(weights, grads)):
        assert np.allclose(p.data().asnumpy(), want, rtol=tol, atol=tol), p.name


@pytest.mark.parametrize("kw", [{}, {"gradient_predivide_factor": 2.0}, {"num_groups": 2},
                                {"compression": hvd.Compression.fp16}],
                         ids=["plain", "predivide", "groups", "fp16"])
def test_distributed_trainer_averages_gradients(kw):
    tol = 2e-3 if "compression" in kw else 1e-5
    check_step(lambda net: hvd.DistributedTrainer(net.collect_params(), "sgd",
                                                  {"learning_rate": LR}, **kw), seed=60, tol=tol)


@pytest.mark.parametrize("kw", [{}, {"num_groups": 2}, {"gradient_predivide_factor": 4.0}],
                         ids=["plain", "groups", "predivide"])
def test_distributed_optimizer_averages_gradients(kw):
    def trainer_of(net):
        opt = hvd.DistributedOptimizer(mx.optimizer.SGD(learning_rate=LR), **kw)
        return gluon.Trainer(net.collect_params(), opt, kvstore=None)
    check_step(trainer_of, seed=61)


def test_two_trainers_with_their_own_prefixes():
    nets = [make_net("a_"), make_net("b_")]
    trainers = [hvd.DistributedTrainer(n.collect_params(), "sgd", {"learning_rate": LR},
                                       prefix=p) for n, p in zip(nets, ["a_", "b_"])]
    for net, trainer in zip(nets, trainers):
        params, weights, grads = backward(net, seed=62)
        trainer.step(BATCH)
        for p, want in zip(params, expected(weights, grads)):
            assert np.allclose(p.data().asnumpy(), want, atol=1e-5)


def test_trainer_unwraps_a_distributed_optimizer():
    net = make_net()
    with pytest.warns(UserWarning, match="unwrapped it for you"):
        hvd.DistributedTrainer(net.collect_params(),
                               hvd.DistributedOptimizer(mx.optimizer.SGD(learning_rate=LR)))


def all_alike(arrays):
    """True when every rank holds the same values."""
    for a in arrays:
        every = hvd.allgather(mx.nd.array(a.asnumpy()[None])).asnumpy()
        if not all(np.array_equal(every[0], e) for e in every):
            return False
    return True


def test_broadcast_parameters_of_ndarrays_and_parameter_dicts():
    arrays = {"b": mx.nd.array(rank_input((3,), np.float32, hvd.rank(), 70)),
              "a": mx.nd.array(rank_input((2, 2), np.int64, hvd.rank(), 71), dtype="int64")}
    hvd.broadcast_parameters(arrays, root_rank=0, prefix="nd.")
    assert np.array_equal(arrays["b"].asnumpy(), rank_input((3,), np.float32, 0, 70))
    assert np.array_equal(arrays["a"].asnumpy(), rank_input((2, 2), np.int64, 0, 71))
    net = make_net("pd_")
    assert all_alike([p.data() for _, p in sorted(net.collect_params().items())])
    with pytest.raises(ValueError, match="invalid params"):
        hvd.broadcast_parameters([mx.nd.ones(1)])


def test_broadcast_parameters_deferred_initialisation():
    """Conv2D without in_channels learns its shape at the first forward:
    broadcast_parameters broadcasts it then (Horovod's
    test_horovod_broadcast_deferred_init_parameters)."""
    mx.random.seed(hvd.rank())
    layer = gluon.nn.Conv2D(10, 2, prefix="deferred_")
    layer.initialize()
    hvd.broadcast_parameters(layer.collect_params(), root_rank=0, prefix="deferred.")
    layer(mx.nd.ones((5, 4, 10, 10)))
    params = [p.data() for _, p in sorted(layer.collect_params().items())]
    assert all_alike(params)
    # Without the broadcast the ranks' weights would differ.
    mx.random.seed(hvd.rank())
    other = gluon.nn.Conv2D(10, 2, prefix="other_")
    other.initialize()
    other(mx.nd.ones((5, 4, 10, 10)))
    if hvd.size() > 1:
        assert not all_alike([other.weight.data()])


def in_mkldnn_layout(a):
    """True when MXNet keeps a in MKL-DNN's internal layout (DLPack refuses it)."""
    import ctypes
    from mxnet.base import _LIB
    a.wait_to_read()
    h = ctypes.c_void_p()
    if _LIB.MXNDArrayToDLPack(a.handle, ctypes.byref(h)) != 0:
        return True
    _LIB.MXNDArrayCallDLPackDeleter(h)
    return False


def test_mkldnn_layout_parameters_and_outputs():
    """A convolution's output, and often its weight after an inference
    forward, are in MKL-DNN's layout: broadcast_parameters puts weights
    back in the default layout; a collective on such an output fails
    saying what to do (reading it on MXNet's engine thread would wait for
    itself)."""
    mx.random.seed(hvd.rank())
    net = gluon.nn.Conv2D(16, 3, in_channels=3, prefix="mkl_")
    net.initialize()
    weight = net.weight.data()
    out = net(mx.nd.ones((1, 3, 16, 16)))
    # Whether MXNet reorders the weight varies from run to run; the output
    # always is here.  Every rank learns every rank's answer, so that all
    # make the same calls.
    layouts = hvd.allgather(mx.nd.array([[in_mkldnn_layout(weight), in_mkldnn_layout(out)]],
                                        dtype="int32")).asnumpy()
    hvd.broadcast_parameters(net.collect_params(), root_rank=0, prefix="mkl.")
    assert all_alike([net.weight.data()])
    if not layouts[:, 1].all():
        pytest.skip("MXNet left a convolution's output in the default layout: %s" % layouts)
    with pytest.raises(mx.base.MXNetError, match="MKL-DNN's internal layout.*x.copy()"):
        hvd.allreduce(out, name="mkl.out").wait_to_read()
    summed = hvd.allreduce(out.copy(), op=hvd.Sum, name="mkl.copy")
    assert summed.shape == out.shape
