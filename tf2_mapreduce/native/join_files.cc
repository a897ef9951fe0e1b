// Joining a writing job's committed piece files into one shard of its output, on a worker,
// through TensorFlow's file systems (local disks, gs:// and the others).
//
// Tf2MapreduceJoinFiles: a head, the files of `paths` one after the other, a tail, written
// as a new file in `temporary_dir` under a name of this run's own, checked to be the size
// the coordinator expects, then renamed to `target`. What the shard holds is decided by the coordinator (the pieces, their order,
// the GZIP header and trailer: outputs/sinks/shards.py); a worker only copies. Run at least
// once, as ClusterCoordinator runs a closure: a run again writes another temporary file
// and puts the same bytes in place, so `target` is whole whichever run renamed it last.
// At most one chunk of a piece file is held at once.

#include <algorithm>
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
    .Input("size: int64")
    .Input("temporary_dir: string")
    .Input("target: string")
    .Output("bytes: int64")
    .SetIsStateful()
    .SetShapeFn([](tensorflow::shape_inference::InferenceContext* c) {
      c->set_output(0, c->Scalar());
      return absl::OkStatus();
    })
    .Doc(R"doc(
Writes `head`, the files of `paths` (1-D) in order, and `tail` as the file `target`, which
must be `size` bytes: written in `temporary_dir` first (removed if the join fails), then
renamed. Returns the bytes written. A file of `paths` not found fails with NOT_FOUND, its
message naming it after kPieceGone; an error of the storage is an outage
(storage_status.h), a file read short of its size too; any other names the target and the
cause.
)doc");

namespace {

// Bytes of a piece file read and appended at a time: what the op holds.
constexpr size_t kJoinChunk = 4 << 20;
// How a piece file that is gone is said (outputs/sinks/shards.py matches it).
constexpr char kPieceGone[] = "tf2_mapreduce: piece file gone: ";

// As WriteFailed (storage_status.h): an outage is waited out, any other error fails the job
// naming the shard; and a piece file not found is said to be gone. `path`: the file
// `doing` was done to.
absl::Status JoinFailed(absl::Status status, const std::string& path, const char* doing, const std::string& target) {
  if (status.ok()) return status;
  if (IsOutage(status)) return FromStorage(status, path, doing);
  const bool reading = std::string(doing) == "reading";
  if (absl::IsNotFound(status) && reading) return absl::NotFoundError(std::string(kPieceGone) + path + ": not found");
  return CannotWrite(target, (reading ? "reading " + path + ": " : std::string()) + std::string(status.message()));
}

// Appends the file `path` to `out`, a chunk of `buffer` at a time. Its size is asked first:
// on gs:// a read cut short then says so, where past the client's stat cache it would look
// like the file's end (storage_status.h, CutShort).
absl::Status AppendFile(tensorflow::Env* env, const std::string& path, tensorflow::WritableFile* out,
                        const std::string& temporary, const std::string& target, std::string* buffer,
                        int64_t* written) {
  uint64_t size = 0;
  TF_RETURN_IF_ERROR(JoinFailed(env->GetFileSize(path, &size), path, "reading", target));
  std::unique_ptr<tensorflow::RandomAccessFile> file;
  TF_RETURN_IF_ERROR(JoinFailed(env->NewRandomAccessFile(path, &file), path, "reading", target));
  uint64_t offset = 0;
  while (offset < size) {
    absl::string_view read;
    const size_t want = std::min<uint64_t>(buffer->size(), size - offset);
    const absl::Status status = file->Read(offset, want, &read, &(*buffer)[0]);
    if (!status.ok() && !absl::IsOutOfRange(status)) return JoinFailed(status, path, "reading", target);
    if (read.empty()) return CutShort(path, offset, size);
    TF_RETURN_IF_ERROR(JoinFailed(out->Append(read), temporary, "writing", target));
    offset += read.size();
    *written += read.size();
  }
  return absl::OkStatus();
}

absl::Status Join(tensorflow::Env* env, const tensorflow::Tensor& paths, const std::string& head,
                  const std::string& tail, int64_t size, const std::string& temporary, const std::string& target,
                  std::unique_ptr<tensorflow::WritableFile>* out) {
  TF_RETURN_IF_ERROR(JoinFailed(env->NewWritableFile(temporary, out), temporary, "writing", target));
  TF_RETURN_IF_ERROR(JoinFailed((*out)->Append(head), temporary, "writing", target));
  int64_t written = head.size();
  std::string buffer(kJoinChunk, '\0');
  const auto files = paths.flat<tensorflow::tstring>();
  for (int64_t i = 0; i < files.size(); ++i) {
    TF_RETURN_IF_ERROR(AppendFile(env, std::string(files(i)), out->get(), temporary, target, &buffer, &written));
  }
  TF_RETURN_IF_ERROR(JoinFailed((*out)->Append(tail), temporary, "writing", target));
  written += tail.size();
  if (written != size) {
    return CannotWrite(target, std::to_string(size) + " bytes were committed, " + std::to_string(written) +
                                   " found in its pieces' files");
  }
  // gs:// uploads the object at its close: an outage there is waited out and the join run again.
  TF_RETURN_IF_ERROR(JoinFailed((*out)->Close(), temporary, "writing", target));
  out->reset();
  return JoinFailed(env->RenameFile(temporary, target), target, "writing", target);
}

}  // namespace

class JoinFilesOp : public tensorflow::OpKernel {
 public:
  explicit JoinFilesOp(tensorflow::OpKernelConstruction* context) : OpKernel(context) {}

  void Compute(tensorflow::OpKernelContext* context) override {
    const std::string head(context->input(1).scalar<tensorflow::tstring>()());
    const std::string tail(context->input(2).scalar<tensorflow::tstring>()());
    const int64_t size = context->input(3).scalar<int64_t>()();
    const std::string directory(context->input(4).scalar<tensorflow::tstring>()());
    const std::string target(context->input(5).scalar<tensorflow::tstring>()());
    tensorflow::Env* env = context->env();
    const std::string temporary = directory + "/join-" + std::to_string(tensorflow::random::New64()) + ".tmp";
    std::unique_ptr<tensorflow::WritableFile> out;
    const absl::Status status = Join(env, context->input(0), head, tail, size, temporary, target, &out);
    if (!status.ok()) {
      // Closed first (gs:// uploads what it holds then), so that nothing is left of it.
      out.reset();
      env->DeleteFile(temporary).IgnoreError();
    }
    OP_REQUIRES_OK(context, status);
    tensorflow::Tensor* output = nullptr;
    OP_REQUIRES_OK(context, context->allocate_output(0, tensorflow::TensorShape({}), &output));
    output->scalar<int64_t>()() = size;
  }
};

REGISTER_KERNEL_BUILDER(Name("Tf2MapreduceJoinFiles").Device(tensorflow::DEVICE_CPU), JoinFilesOp);

}  // namespace tf2_mapreduce
