"""The framework versions each binding serves, checked when it is imported.

The wheel carries one build of hvd.tensorflow's op library and of hvd.jax's
XLA FFI library, and they bind to whatever TensorFlow / jaxlib the user
has when `import hvd.tensorflow` / `import hvd.jax` loads them.  Within
the ranges below that binding holds (the C API symbols they call exist,
the FFI version they report is accepted: docs/install.md says why each
range ends where it does, and scripts/wheel-matrix.sh tests both ends).
Outside them a library could fail to load with an undefined symbol or
worse, so each binding calls require() first, before any library of
ours is loaded: a framework that is missing or outside the range is an
ImportError that names the version found and the range served.
"""
import ctypes
import importlib
import os
import re

# binding -> (module, the framework's name, pip's name, oldest, newest).
# A version is served when oldest <= it and its first len(newest) numbers
# are <= newest: (2, 21) serves 2.21.x, (2,) every 2.x.
RANGES = {
    "hvd.torch": ("torch", "PyTorch", "torch", (1, 13), (2,)),
    "hvd.tensorflow": ("tensorflow", "TensorFlow", "tensorflow-cpu", (2, 16), (2, 21)),
    "hvd.keras": ("tensorflow", "TensorFlow", "tensorflow-cpu", (2, 16), (2, 21)),
    "hvd.jax": ("jax", "JAX", "jax", (0, 4, 38), (0, 10)),
    "hvd.mxnet": ("mxnet", "MXNet", "mxnet", (1, 9), (1, 9)),
}


def parse(version):
    """The leading numbers of a version string: "2.16.1rc0+cpu" -> (2, 16, 1)."""
    m = re.match(r"(\d+)(?:\.(\d+))?(?:\.(\d+))?", version)
    return tuple(int(g) for g in m.groups() if g is not None) if m else ()


def served(version, oldest, newest):
    v = parse(version)
    return bool(v) and v >= oldest and v[:len(newest)] <= newest


def span(oldest, newest):
    """A range as people read it: "2.16 to 2.21", "1.13 to 2.x"."""
    last = ".".join(map(str, newest)) + (".x" if len(newest) == 1 else "")
    return "%s to %s" % (".".join(map(str, oldest)), last)


def _pip_spec(pip_name, oldest, newest):
    upper = newest[:-1] + (newest[-1] + 1,)
    return "'%s>=%s,<%s'" % (pip_name, ".".join(map(str, oldest)), ".".join(map(str, upper)))


def require(binding):
    """Imports the framework `binding` serves and returns it; ImportError,
    naming what is missing or the version found and the range served,
    when it is not installed or outside that range."""
    module, name, pip_name, oldest, newest = RANGES[binding]
    try:
        fw = importlib.import_module(module)
    except ModuleNotFoundError as e:
        if e.name != module:
            raise  # the framework is there but broken: its own words
        raise ImportError("%s needs %s %s, which is not installed here: pip install %s"
                          % (binding, name, span(oldest, newest),
                             _pip_spec(pip_name, oldest, newest)), name=module) from None
    version = str(getattr(fw, "__version__", ""))
    if not served(version, oldest, newest):
        raise ImportError("%s serves %s %s; this is %s %s (%s): pip install %s"
                          % (binding, name, span(oldest, newest), name, version or "?",
                             getattr(fw, "__file__", module), _pip_spec(pip_name, oldest, newest)),
                          name=module)
    return fw


def load_error(binding, fw, path, error):
    """The ImportError for a library of `binding` that did not load into the
    framework module fw, though require() accepted its version: the library
    and the framework's own words, never a crash later."""
    _, name, _, oldest, newest = RANGES[binding]
    return ImportError("%s: %s does not load into %s %s (hvd serves %s): %s"
                       % (binding, path, name, getattr(fw, "__version__", "?"),
                          span(oldest, newest), error))


def share_symbols(binding, fw, path):
    """Makes the framework library at path, which importing fw loaded, lend
    its symbols to the libraries loaded after it (RTLD_GLOBAL): the
    binding's library is linked without it (one library for every version
    served, and a wheel that depends on no library it must not bundle) and
    binds to its C API when loaded."""
    try:
        ctypes.CDLL(path, mode=os.RTLD_GLOBAL | os.RTLD_NOLOAD)
    except OSError as e:
        raise load_error(binding, fw, path, e) from None
