// done.cc -- the one piece of hvd.tensorflow's ops that C cannot write.
//
// TensorFlow's C API starts an asynchronous kernel with
// compute_async_func(kernel, ctx, done), where done points at
// AsyncOpKernel::ComputeAsync's own parameter, a std::function<void()>
// that lives only until ComputeAsync returns.  A collective completes
// later, on hvd's engine thread, so the callback must outlive the call:
// it is moved here into one of our own.  TF_RunAsyncOpKernelDoneCallback
// reads the pointer as the same std::function; nothing else of
// TensorFlow's C++ is used.
#include <functional>
#include <new>

using Done = std::function<void()>;

extern "C" {

// Takes TensorFlow's done (valid during compute_async_func) and returns a
// callback that stays valid until hvd_tf_run_done(), or NULL without memory.
void *hvd_tf_keep_done(void *done) {
  return new (std::nothrow) Done(std::move(*static_cast<Done *>(done)));
}

// Runs and frees a callback from hvd_tf_keep_done().
void hvd_tf_run_done(void *kept) {
  Done *f = static_cast<Done *>(kept);
  (*f)();
  delete f;
}

}  // extern "C"
