// xla.cc -- the part of hvd.tensorflow's XLA support that C cannot write.
//
// With HOROVOD_ENABLE_XLA_OPS=1 (Horovod's knob) in the environment when
// hvd.tensorflow is imported, HorovodAllreduce, HorovodAllgather
// and HorovodBroadcast compile inside tf.function(jit_compile=True) on the
// CPU: each becomes an XLA custom call of a C handler (xla.c).  This is
// _hvd_tf_xla.so, loaded by hvd.tensorflow only under that knob.  TensorFlow
// has no C API for either step: an op's XLA translation is a C++
// XlaOpKernel registered with XlaOpRegistrar, and XLA's FFI API, through
// which xla.c registers its handlers, is handed out only by the C++
// function xla::ffi::GetXlaFfiApi().  Everything else is C.  Without the
// knob this library is not loaded and XLA refuses the ops, as with Horovod.
#include <cstdlib>
#include <cstring>
#include <string>

#include "hvd_tf.h"
#include "tensorflow/compiler/tf2xla/xla_op_kernel.h"
#include "tensorflow/compiler/tf2xla/xla_op_registry.h"
#include "xla/hlo/builder/xla_builder.h"

// xla/ffi/ffi_api.h declares it, but includes MLIR and LLVM headers the
// TensorFlow wheel does not ship; libtensorflow_framework exports it.  The
// API is opaque here (hvd_tf.h): only xla.c, in C, reads it.
namespace xla::ffi {
const XLA_FFI_Api* GetXlaFfiApi();
}  // namespace xla::ffi

namespace {

using tensorflow::OpKernelConstruction;
using tensorflow::XlaOpKernelContext;

// One collective: its custom call's target and attributes, from the op's.
class HvdXlaOp : public tensorflow::XlaOpKernel {
 public:
  HvdXlaOp(OpKernelConstruction* c, const char* target) : XlaOpKernel(c), target_(target) {
    OP_REQUIRES_OK(c, c->GetAttr("process_set_id", &set_));
    bool ignore_scope = false;
    OP_REQUIRES_OK(c, c->GetAttr("ignore_name_scope", &ignore_scope));
    name_ = c->def().name();
    if (ignore_scope && name_.rfind('/') != std::string::npos)
      name_ = name_.substr(name_.rfind('/') + 1);
    attrs_ = "process_set = " + std::to_string(set_) + " : i64";
    if (c->HasAttr("reduce_op")) {
      int64_t op = 0;
      float pre = 1, post = 1;
      OP_REQUIRES_OK(c, c->GetAttr("reduce_op", &op));
      OP_REQUIRES_OK(c, c->GetAttr("prescale_factor", &pre));
      OP_REQUIRES_OK(c, c->GetAttr("postscale_factor", &post));
      attrs_ += ", op = " + std::to_string(op) + " : i64, prescale = " + Float(pre) +
                " : f64, postscale = " + Float(post) + " : f64";
    }
    if (c->HasAttr("root_rank")) {
      int64_t root = 0;
      OP_REQUIRES_OK(c, c->GetAttr("root_rank", &root));
      attrs_ += ", root = " + std::to_string(root) + " : i64";
    }
  }

  void Compile(XlaOpKernelContext* ctx) override {
    xla::XlaBuilder* b = ctx->builder();
    auto in_shape = b->GetShape(ctx->Input(0));
    OP_REQUIRES_OK(ctx, in_shape.status());
    xla::Shape out = *in_shape;
    if (std::strcmp(target_, "hvd_tf_xla_allgather") == 0) {
      // Every rank gathers the same shape under XLA: n times the rows.
      int n = hvd_tf_set_size(static_cast<int>(set_));
      OP_REQUIRES(ctx, n > 0,
                  absl::FailedPreconditionError("HorovodAllgather (XLA): the size of process "
                                                "set " + std::to_string(set_) +
                                                " is not known (is hvd initialized?)"));
      if (out.dimensions().empty()) out = xla::ShapeUtil::MakeShape(out.element_type(), {1});
      out.set_dimensions(0, out.dimensions(0) * n);
    }
    std::string padded = name_;
    padded.resize(name_.size() + 1, '\0');  // NUL-terminated, as xla.c reads it
    std::vector<uint8_t> bytes(padded.begin(), padded.end());
    xla::XlaOp name = xla::ConstantR1<uint8_t>(b, bytes);
    xla::XlaOp call = xla::CustomCall(
        b, target_, {name, ctx->Input(0)}, out, "{" + attrs_ + "}", /*has_side_effect=*/true,
        /*output_operand_aliasing=*/{}, /*literal=*/nullptr, xla::CustomCallSchedule::SCHEDULE_NONE,
        xla::CustomCallApiVersion::API_VERSION_TYPED_FFI);
    ctx->SetOutput(0, call);
  }

 private:
  // A float as an MLIR attribute reads it back: enough digits, a '.'.
  static std::string Float(float v) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.9e", static_cast<double>(v));
    return buf;
  }

  const char* target_;
  int64_t set_ = 0;
  std::string name_, attrs_;
};

template <const char* kTarget>
class Kernel : public HvdXlaOp {
 public:
  explicit Kernel(OpKernelConstruction* c) : HvdXlaOp(c, kTarget) {}
};

constexpr char kAllreduce[] = "hvd_tf_xla_allreduce";
constexpr char kAllgather[] = "hvd_tf_xla_allgather";
constexpr char kBroadcast[] = "hvd_tf_xla_broadcast";

template <typename K>
void Register(const char* op) {
  static std::vector<tensorflow::XlaOpRegistrar*> keep;  // alive as long as the library
  keep.push_back(new tensorflow::XlaOpRegistrar(
      tensorflow::XlaOpRegistrationBuilder::Name(op)
          .Device(tensorflow::DEVICE_CPU_XLA_JIT)
          .Build([](OpKernelConstruction* c) -> tensorflow::OpKernel* { return new K(c); })));
}

}  // namespace

// What hvd.tensorflow calls (ctypes) when HOROVOD_ENABLE_XLA_OPS=1, after
// making TensorFlow's libraries global and before any function is
// compiled (XLA takes its kernels from the registry when it first
// compiles).
extern "C" {

// The TensorFlow this library was built against: its C++ ABI is that
// one's, so hvd.tensorflow refuses to use it under another.
__attribute__((visibility("default"))) const char* hvd_tf_xla_built_for(void) {
  return HVD_TF_VERSION;
}

// Keeps hvd._C's table, registers the handlers with XLA's FFI and the
// three XlaOpKernels; 0, or -1 (a table this library does not serve, or
// XLA refused a handler: xla.c says which on stderr).
__attribute__((visibility("default"))) int hvd_tf_xla_load(const void* capi_table) {
  static int done = 0;
  if (done) return 0;
  if (hvd_tf_use_capi(capi_table) != 0 || hvd_tf_xla_register(xla::ffi::GetXlaFfiApi()) != 0)
    return -1;
  Register<Kernel<kAllreduce>>("HorovodAllreduce");
  Register<Kernel<kAllgather>>("HorovodAllgather");
  Register<Kernel<kBroadcast>>("HorovodBroadcast");
  done = 1;
  return 0;
}

}  // extern "C"
