"""What hvd needs to know of a Keras optimizer and its variables,
whichever Keras made them (Keras 3, tf-keras 2's optimizer or its legacy
OptimizerV2); imports no Keras itself."""
import tensorflow as tf


def optimizer_variables(opt):
    """An optimizer's variables: a property in Keras 3 and tf-keras's
    optimizer, a method in tf-keras's legacy OptimizerV2."""
    vs = opt.variables
    return list(vs() if callable(vs) else vs)


def optimizer_built(opt):
    """Whether the optimizer has made its slots (Keras 3: built; tf-keras:
    _built; a legacy OptimizerV2 makes them, and its iteration count, at
    its first step)."""
    if hasattr(opt, "built"):
        return bool(opt.built)
    if hasattr(opt, "build"):
        return bool(getattr(opt, "_built", False))
    return bool(optimizer_variables(opt))


def build_optimizer(opt, variables):
    """Makes the optimizer's slots now (Keras 3 and tf-keras optimizers;
    a legacy OptimizerV2 through its _create_all_weights)."""
    if optimizer_built(opt):
        return
    if hasattr(opt, "build"):
        opt.build(variables)
    elif hasattr(opt, "_create_all_weights"):
        opt._create_all_weights(variables)


def as_tf_variable(v):
    """The tf.Variable of a Keras 3 Variable (its .value), or v itself when
    it is one already (tf-keras 2's; a tf.Variable's .value is a method)."""
    return v if isinstance(v, tf.Variable) else getattr(v, "value", v)
