// Reading inputs through TensorFlow's file systems (local disks, gs:// and the others).
//
// Tf2MapreduceReadRange: bytes [start, end) of a file, read at their offset through
// TensorFlow's RandomAccessFile (pread on local disks, ranged reads on gs://), so a piece
// costs the same wherever in the file it starts. FixedLengthRecordDataset, which could
// do it otherwise, reads through everything before the range (docs/runtime.md).
//
// Tf2MapreduceReadFiles: whole files, a batch in one op. One tf.io.read_file per file in
// a tf.map_fn loop costs tens of microseconds a file in the loop's own ops (measured),
// more than reading a small file. Files on remote storage are read several at once:
// each read waits on the network, and TensorFlow's gs:// client sleeps between its
// retries, so one read's back-off must hold up no other.
//
// Tf2MapreduceFileSizes: the size of each file now. A file read as a stream (compressed,
// or TFRecord) is never held whole, so its length read cannot be compared with its size
// when listed; its size now can, and TensorFlow has no op for it.

#include <algorithm>
#include <atomic>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "tensorflow/core/framework/common_shape_fns.h"
#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/shape_inference.h"
#include "tensorflow/core/platform/env.h"
#include "tensorflow/core/platform/file_system.h"
#include "storage_status.h"

namespace tf2_mapreduce {

using tensorflow::OpKernel;
using tensorflow::OpKernelConstruction;
using tensorflow::OpKernelContext;
using tensorflow::Tensor;
using tensorflow::TensorShape;
using tensorflow::tstring;

namespace {

// Reads `length` bytes of the file at `path` from `offset` into `contents`; the caller
// took its size just before. Fewer bytes are a response cut short (an outage), or a file
// that shrank in between, which the map step's size check finds when it is tried again.
absl::Status ReadAt(tensorflow::Env* env, const std::string& path, int64_t offset, size_t length,
                    tstring* contents) {
  std::unique_ptr<tensorflow::RandomAccessFile> file;
  TF_RETURN_IF_ERROR(tf2_mapreduce::FromStorage(env->NewRandomAccessFile(path, &file), path));
  contents->resize_uninitialized(length);
  absl::string_view read;
  absl::Status status = file->Read(static_cast<tensorflow::uint64>(offset), length, &read, &(*contents)[0]);
  if (!status.ok() && !absl::IsOutOfRange(status)) return tf2_mapreduce::FromStorage(status, path);
  if (read.data() != contents->data()) {  // some file systems return their own buffer
    std::memmove(&(*contents)[0], read.data(), read.size());
  }
  contents->resize(read.size());
  if (read.size() < length) return tf2_mapreduce::CutShort(path, offset + read.size(), offset + length);
  return absl::OkStatus();
}

}  // namespace

REGISTER_OP("Tf2MapreduceReadRange")
    .Input("path: string")
    .Input("start: int64")
    .Input("end: int64")
    .Input("size: int64")
    .Output("contents: string")
    .SetShapeFn(tensorflow::shape_inference::ScalarShape)
    .Doc(R"doc(
Bytes [start, end) of the file at `path`, which must be `size` bytes long: a file of
another size is an InvalidArgument error that names it, since it is not the file that
was listed.
)doc");

class ReadRangeOp : public OpKernel {
 public:
  explicit ReadRangeOp(OpKernelConstruction* context) : OpKernel(context) {}

  void Compute(OpKernelContext* context) override {
    const std::string path(context->input(0).scalar<tstring>()());
    const int64_t start = context->input(1).scalar<int64_t>()();
    const int64_t end = context->input(2).scalar<int64_t>()();
    const int64_t size = context->input(3).scalar<int64_t>()();
    OP_REQUIRES(context, 0 <= start && start <= end && end <= size,
                absl::InvalidArgumentError("byte range [" + std::to_string(start) + ", " + std::to_string(end) +
                                           ") is not within the " + std::to_string(size) + " bytes of \"" + path +
                                           "\""));
    tensorflow::uint64 actual = 0;
    OP_REQUIRES_OK(context, tf2_mapreduce::FromStorage(context->env()->GetFileSize(path, &actual), path));
    OP_REQUIRES(context, static_cast<int64_t>(actual) == size, Changed(path, size, actual));
    Tensor* output = nullptr;
    OP_REQUIRES_OK(context, context->allocate_output(0, TensorShape({}), &output));
    tstring& contents = output->scalar<tstring>()();
    const size_t length = static_cast<size_t>(end - start);
    OP_REQUIRES_OK(context, ReadAt(context->env(), path, start, length, &contents));
    OP_REQUIRES(context, contents.size() == length, Changed(path, size, start + contents.size()));
  }

 private:
  // Worded for failures.py, which reads the path back out of TF's error text.
  static absl::Status Changed(const std::string& path, int64_t listed, tensorflow::uint64 now) {
    return absl::InvalidArgumentError("input file \"" + path + "\" changed size: " + std::to_string(listed) +
                                      " bytes when listed, " + std::to_string(now) + " now");
  }
};

REGISTER_KERNEL_BUILDER(Name("Tf2MapreduceReadRange").Device(tensorflow::DEVICE_CPU), ReadRangeOp);

REGISTER_OP("Tf2MapreduceReadFiles")
    .Input("paths: string")
    .Output("contents: string")
    .SetShapeFn(tensorflow::shape_inference::UnchangedShape)
    .Doc(R"doc(
The whole contents of each file in `paths`, as tf.io.read_file reads one, with the same
errors (a file that cannot be read fails the op, named in the message).
)doc");

class ReadFilesOp : public OpKernel {
 public:
  explicit ReadFilesOp(OpKernelConstruction* context) : OpKernel(context) {}

  void Compute(OpKernelContext* context) override {
    const Tensor& paths = context->input(0);
    Tensor* output = nullptr;
    OP_REQUIRES_OK(context, context->allocate_output(0, paths.shape(), &output));
    const auto path = paths.flat<tstring>();
    auto contents = output->flat<tstring>();
    const int64_t count = path.size();
    std::vector<absl::Status> statuses(count);
    std::atomic<int64_t> next{0};
    tensorflow::Env* env = context->env();
    auto read = [&]() {
      for (int64_t i; (i = next++) < count;) statuses[i] = ReadWhole(env, std::string(path(i)), &contents(i));
    };
    int64_t remote = 0;
    for (int64_t i = 0; i < count; ++i) remote += IsRemote(path(i));
    // Local files one at a time: a disk gains little from more, and they are read fast.
    std::vector<std::thread> readers;
    for (int64_t t = 1; t < std::min(remote, kRemoteReadsInFlight); ++t) readers.emplace_back(read);
    read();
    for (std::thread& reader : readers) reader.join();
    for (int64_t i = 0; i < count; ++i) OP_REQUIRES_OK(context, statuses[i]);  // the first file in order fails it
  }

 private:
  // Remote reads in flight at once in one op: enough that a few reads in a back-off
  // leave the rest going; a step's files are held whole in any case.
  static constexpr int64_t kRemoteReadsInFlight = 8;

  static bool IsRemote(const tstring& path) {
    const absl::string_view name(path.data(), path.size());
    const size_t scheme = name.find("://");
    return scheme != absl::string_view::npos && name.substr(0, scheme) != "file";
  }

  // As TensorFlow's ReadFile kernel reads a file: its size, then that many bytes. A
  // file that shrank in between is returned as it now is; the map step compares every
  // length with the size listed.
  static absl::Status ReadWhole(tensorflow::Env* env, const std::string& path, tstring* contents) {
    tensorflow::uint64 size = 0;
    TF_RETURN_IF_ERROR(tf2_mapreduce::FromStorage(env->GetFileSize(path, &size), path));
    return ReadAt(env, path, 0, size, contents);
  }
};

REGISTER_KERNEL_BUILDER(Name("Tf2MapreduceReadFiles").Device(tensorflow::DEVICE_CPU), ReadFilesOp);

REGISTER_OP("Tf2MapreduceFileSizes")
    .Input("paths: string")
    .Output("sizes: int64")
    .SetShapeFn(tensorflow::shape_inference::UnchangedShape)
    .Doc(R"doc(
The size in bytes of each file in `paths` now; a file that cannot be found fails the op,
named in the message.
)doc");

class FileSizesOp : public OpKernel {
 public:
  explicit FileSizesOp(OpKernelConstruction* context) : OpKernel(context) {}

  void Compute(OpKernelContext* context) override {
    const Tensor& paths = context->input(0);
    Tensor* output = nullptr;
    OP_REQUIRES_OK(context, context->allocate_output(0, paths.shape(), &output));
    const auto path = paths.flat<tstring>();
    auto sizes = output->flat<int64_t>();
    for (int64_t i = 0; i < path.size(); ++i) {
      tensorflow::uint64 size = 0;
      const std::string name(path(i));
      OP_REQUIRES_OK(context, tf2_mapreduce::FromStorage(context->env()->GetFileSize(name, &size), name));
      sizes(i) = static_cast<int64_t>(size);
    }
  }
};

REGISTER_KERNEL_BUILDER(Name("Tf2MapreduceFileSizes").Device(tensorflow::DEVICE_CPU), FileSizesOp);

}  // namespace tf2_mapreduce
