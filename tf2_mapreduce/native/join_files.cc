// Joining a writing job's committed piece files into one shard of its output, on a worker,
// through TensorFlow's file systems (local disks, gs:// and the others).
//
// Tf2MapreduceJoinFiles: a head, the files of `paths` one after the other, a tail, written
// as a new file in `temporary_dir` under a name of this run's own, then renamed to
// `target`. What the shard holds is decided by the coordinator (the pieces, their order,
// the GZIP header and trailer: outputs/sinks/shards.py); a worker only copies. Run at least
// once, as ClusterCoordinator runs a closure: a run again writes another temporary file
// and puts the same bytes in place, so `target` is whole whichever run renamed it last.
// At most one chunk of a piece file is held at once.

#include <memory>
#include <string>

#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/shape_inference.h"
#include "tensorflow/core/platform/env.h"
#include "tensorflow/core/platform/file_system.h"
#include "tensorflow/core/platform/random.h"
#include "storage_status.h"

namespace tf2_mapreduce {

REGISTER_OP("Tf2MapreduceJoinFiles")
    .Input("paths: string")
    .Input("head: string")
    .Input("tail: string")
    .Input("temporary_dir: string")
    .Input("target: string")
    .Output("bytes: int64")
    .SetIsStateful()
    .SetShapeFn([](tensorflow::shape_inference::InferenceContext* c) {
      c->set_output(0, c->Scalar());
      return absl::OkStatus();
    })
    .Doc(R"doc(
Writes `head`, the files of `paths` (1-D) in order, and `tail` as the file `target`:
written in `temporary_dir` first, then renamed. Returns the bytes written. A file of
`paths` not found fails with NOT_FOUND, its message naming it after kPieceGone; an error
of the storage is an outage (storage_status.h); any other names the path and the cause.
)doc");

namespace {

// Bytes of a piece file read and appended at a time: what the op holds.
constexpr size_t kJoinChunk = 4 << 20;
// How a piece file that is gone is said (outputs/sinks/shards.py matches it).
constexpr char kPieceGone[] = "tf2_mapreduce: piece file gone: ";

// Worded as Tf2MapreduceWriteRecords's (failures.py): an outage is waited out, any other
// error fails the job naming the path.
absl::Status JoinFailed(absl::Status status, const std::string& path, const char* doing) {
  if (status.ok()) return status;
  if (IsOutage(status)) return FromStorage(status, path, doing);
  if (absl::IsNotFound(status) && std::string(doing) == "reading") {
    return absl::NotFoundError(std::string(kPieceGone) + path + ": not found");
  }
  return absl::FailedPreconditionError("tf2_mapreduce: cannot write output " + path + ": " +
                                       std::string(status.message()));
}

// Appends the file `path` to `out` (the file `temporary`), a chunk of `buffer` at a time.
absl::Status AppendFile(tensorflow::Env* env, const std::string& path, tensorflow::WritableFile* out,
                    const std::string& temporary, std::string* buffer, int64_t* written) {
  std::unique_ptr<tensorflow::RandomAccessFile> file;
  TF_RETURN_IF_ERROR(JoinFailed(env->NewRandomAccessFile(path, &file), path, "reading"));
  uint64_t offset = 0;
  while (true) {
    absl::string_view read;
    const absl::Status status = file->Read(offset, buffer->size(), &read, &(*buffer)[0]);
    if (!status.ok() && !absl::IsOutOfRange(status)) return JoinFailed(status, path, "reading");
    if (!read.empty()) TF_RETURN_IF_ERROR(JoinFailed(out->Append(read), temporary, "writing"));
    offset += read.size();
    *written += read.size();
    // Short of a chunk only at the file's end (OUT_OF_RANGE); the sizes are checked by the caller.
    if (read.size() < buffer->size()) return absl::OkStatus();
  }
}

}  // namespace

class JoinFilesOp : public tensorflow::OpKernel {
 public:
  explicit JoinFilesOp(tensorflow::OpKernelConstruction* context) : OpKernel(context) {}

  void Compute(tensorflow::OpKernelContext* context) override {
    const auto paths = context->input(0).flat<tensorflow::tstring>();
    const std::string head(context->input(1).scalar<tensorflow::tstring>()());
    const std::string tail(context->input(2).scalar<tensorflow::tstring>()());
    const std::string directory(context->input(3).scalar<tensorflow::tstring>()());
    const std::string target(context->input(4).scalar<tensorflow::tstring>()());
    tensorflow::Env* env = context->env();
    const std::string temporary = directory + "/join-" + std::to_string(tensorflow::random::New64()) + ".tmp";
    std::unique_ptr<tensorflow::WritableFile> out;
    OP_REQUIRES_OK(context, JoinFailed(env->NewWritableFile(temporary, &out), temporary, "writing"));
    OP_REQUIRES_OK(context, JoinFailed(out->Append(head), temporary, "writing"));
    int64_t written = head.size();
    std::string buffer(kJoinChunk, '\0');
    for (int64_t i = 0; i < paths.size(); ++i) {
      OP_REQUIRES_OK(context, AppendFile(env, std::string(paths(i)), out.get(), temporary, &buffer, &written));
    }
    OP_REQUIRES_OK(context, JoinFailed(out->Append(tail), temporary, "writing"));
    written += tail.size();
    // gs:// uploads the object at its close: an outage there is waited out and the join run again.
    OP_REQUIRES_OK(context, JoinFailed(out->Close(), temporary, "writing"));
    OP_REQUIRES_OK(context, JoinFailed(env->RenameFile(temporary, target), target, "writing"));
    tensorflow::Tensor* output = nullptr;
    OP_REQUIRES_OK(context, context->allocate_output(0, tensorflow::TensorShape({}), &output));
    output->scalar<int64_t>()() = written;
  }
};

REGISTER_KERNEL_BUILDER(Name("Tf2MapreduceJoinFiles").Device(tensorflow::DEVICE_CPU), JoinFilesOp);

}  // namespace tf2_mapreduce
