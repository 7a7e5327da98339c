// error.cc -- the one piece of hvd.mxnet's library that C cannot write.
//
// MXNet's asynchronous operations complete through
// engine::CallbackOnComplete, whose function takes a const dmlc::Error*:
// NULL for success, else the error MXNet attaches to the operation's
// outputs and rethrows to whoever reads them (MXNetError in Python, with
// the error's message).  dmlc::Error is a C++ class (a std::runtime_error),
// so a failure is made here; the callback itself is three pointers that C
// calls (hvd_mx.h).  Nothing else of MXNet's C++ is used.
#include <dmlc/logging.h>

extern "C" {
#include "hvd_mx.h"
}

extern "C" void hvd_mx_fail_engine_op(const hvd_mx_on_complete *done, const char *msg) {
  static const dmlc::Error no_memory("hvd.mxnet: out of memory making an error's message");
  dmlc::Error *error = nullptr;
  try {
    error = new dmlc::Error(msg);
  } catch (const std::bad_alloc &) {
  }
  // MXNet copies the error (make_exception_ptr) before the call returns.
  done->callback(done->engine, done->param, error ? error : &no_memory);
  delete error;
}
