// A per-key table of exact counts for the ps tasks (string -> int64), and its commit: a
// step's counts added and its pieces marked done in one kernel, under the table's lock.
//
// Why not TensorFlow's tables: a commit looks all of a step's keys up, then inserts them
// all, most of them in the table already. MutableHashTable's node map took a third of a
// statistics job's CPU doing so; DenseHashTable grows as if every key inserted were new,
// so a float feature's 557,000 bucket keys made it 2M buckets, 96 MB while it grew.
// Here a key is hashed once per commit, its bytes kept in blocks (a slot is a view and a
// count), and the table grows by the keys that are new only.
//
// Tf2MapreduceKeyCountTable: the table, a lookup table resource: TensorFlow's lookup,
//   insert, export, import and size ops work on it.
// Tf2MapreduceKeyCountCommit: adds `deltas` to keys unless the pieces' done markers (the
//   first `markers` keys) are in the table; all of them or none must be. The keys come
//   as their bytes end to end and their lengths: a string tensor travels from a worker
//   as a protobuf string per key, which took the ps 60 MB a commit of a float
//   feature's buckets to parse (measured); bytes travel as one block.

#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/string_view.h"
#include "tensorflow/core/framework/common_shape_fns.h"
#include "tensorflow/core/framework/lookup_interface.h"
#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/resource_mgr.h"
#include "tensorflow/core/framework/shape_inference.h"
#include "tensorflow/core/kernels/lookup_table_op.h"
#include "tensorflow/core/platform/mutex.h"

namespace tf2_mapreduce {

using tensorflow::DataType;
using tensorflow::OpKernel;
using tensorflow::OpKernelConstruction;
using tensorflow::OpKernelContext;
using tensorflow::Tensor;
using tensorflow::TensorShape;
using tensorflow::tstring;

REGISTER_OP("Tf2MapreduceKeyCountTable")
    .Output("table_handle: resource")
    .Attr("container: string = ''")
    .Attr("shared_name: string = ''")
    .Attr("use_node_name_sharing: bool = false")
    .Attr("key_dtype: {string} = DT_STRING")
    .Attr("value_dtype: {int64} = DT_INT64")
    .SetIsStateful()
    .SetShapeFn(tensorflow::shape_inference::ScalarShape)
    .Doc(R"doc(
A table of int64 counts by string key (missing keys count 0), named `shared_name` in
its task's resource manager.
)doc");

REGISTER_OP("Tf2MapreduceKeyCountCommit")
    .Input("table_handle: resource")
    .Input("key_bytes: uint8")
    .Input("key_lengths: int32")
    .Input("deltas: int64")
    .Input("markers: int64")
    .Output("applied: bool")
    .SetIsStateful()
    .SetShapeFn(tensorflow::shape_inference::ScalarShape)
    .Doc(R"doc(
Adds `deltas` to the counts of the keys (`key_bytes` end to end, `key_lengths` long;
vectors of one length) in one step under the table's lock, unless the first `markers` keys (done markers) are in the table already:
then it changes nothing. `applied` says which. Fails, changing nothing, if some of them
are in it and some not.
)doc");

class KeyCountTable : public tensorflow::lookup::LookupInterface {
 public:
  KeyCountTable(OpKernelContext*, OpKernel*) {}

  size_t size() const override {
    tensorflow::tf_shared_lock lock(mu_);
    return counts_.size();
  }

  absl::Status Find(OpKernelContext*, const Tensor& keys, Tensor* values, const Tensor& default_value) override {
    const auto key_values = keys.flat<tstring>();
    auto out = values->flat<int64_t>();
    const auto defaults = default_value.flat<int64_t>();
    const bool one_default = defaults.size() != out.size();
    tensorflow::tf_shared_lock lock(mu_);
    for (int64_t i = 0; i < key_values.size(); ++i) {
      const auto found = counts_.find(absl::string_view(key_values(i)));
      out(i) = found != counts_.end() ? found->second : defaults(one_default ? 0 : i);
    }
    return absl::OkStatus();
  }

  absl::Status Insert(OpKernelContext*, const Tensor& keys, const Tensor& values) override {
    tensorflow::mutex_lock lock(mu_);
    Put(keys, values);
    return absl::OkStatus();
  }

  absl::Status Remove(OpKernelContext*, const Tensor& keys) override {
    // A removed key's bytes stay in their block until the table is emptied by an import.
    const auto key_values = keys.flat<tstring>();
    tensorflow::mutex_lock lock(mu_);
    for (int64_t i = 0; i < key_values.size(); ++i) counts_.erase(absl::string_view(key_values(i)));
    return absl::OkStatus();
  }

  absl::Status ImportValues(OpKernelContext*, const Tensor& keys, const Tensor& values) override {
    tensorflow::mutex_lock lock(mu_);
    counts_ = Map();
    blocks_.clear();
    block_left_ = 0;
    Put(keys, values);
    return absl::OkStatus();
  }

  absl::Status ExportValues(OpKernelContext* context) override {
    tensorflow::tf_shared_lock lock(mu_);
    const int64_t n = counts_.size();
    Tensor* keys;
    Tensor* values;
    TF_RETURN_IF_ERROR(context->allocate_output("keys", TensorShape({n}), &keys));
    TF_RETURN_IF_ERROR(context->allocate_output("values", TensorShape({n}), &values));
    auto key_values = keys->flat<tstring>();
    auto value_values = values->flat<int64_t>();
    int64_t i = 0;
    for (const auto& [key, count] : counts_) {
      key_values(i).assign(key.data(), key.size());
      value_values(i) = count;
      ++i;
    }
    return absl::OkStatus();
  }

  // The commit's work (Tf2MapreduceKeyCountCommit says what it does): whole or nothing.
  absl::Status Commit(const Tensor& key_bytes, const Tensor& key_lengths, const Tensor& deltas, int64_t markers,
                      bool* applied) {
    const char* bytes = reinterpret_cast<const char*>(key_bytes.flat<uint8_t>().data());
    const auto lengths = key_lengths.flat<int32_t>();
    const auto delta_values = deltas.flat<int64_t>();
    const int64_t n = lengths.size();
    // Checked whole before anything is read (views of the keys would hold 16 bytes a
    // key more: the keys are walked by their lengths instead).
    int64_t total = 0;
    bool valid = delta_values.size() == n && markers >= 0 && markers <= n;
    for (int64_t i = 0; valid && i < n; ++i) {
      valid = lengths(i) >= 0;
      total += lengths(i);
    }
    if (!valid || total != key_bytes.NumElements()) {
      return absl::InvalidArgumentError("tf2_mapreduce: a commit's keys, deltas and markers do not match");
    }
    tensorflow::mutex_lock lock(mu_);
    int64_t done = 0;
    const char* key = bytes;
    for (int64_t i = 0; i < markers; key += lengths(i++)) {
      const auto found = counts_.find(absl::string_view(key, lengths(i)));
      done += found != counts_.end() && found->second > 0;
    }
    if (done != 0 && done != markers) {
      // The text failures.COMMITTED_IN_PART matches.
      return absl::InvalidArgumentError("tf2_mapreduce: a step's pieces were committed in part");
    }
    *applied = done == 0;
    if (*applied) {
      key = bytes;
      for (int64_t i = 0; i < n; key += lengths(i++)) Count(absl::string_view(key, lengths(i))) += delta_values(i);
    }
    return absl::OkStatus();
  }

  DataType key_dtype() const override { return tensorflow::DT_STRING; }
  DataType value_dtype() const override { return tensorflow::DT_INT64; }
  TensorShape key_shape() const final { return TensorShape(); }
  TensorShape value_shape() const override { return TensorShape(); }

  int64_t MemoryUsed() const override {
    tensorflow::tf_shared_lock lock(mu_);
    return sizeof(*this) + counts_.capacity() * (sizeof(Map::value_type) + 1) + blocks_.size() * kBlock;
  }

 private:
  using Map = absl::flat_hash_map<absl::string_view, int64_t>;
  static constexpr size_t kBlock = 1 << 20;  // bytes of keys a block holds

  void Put(const Tensor& keys, const Tensor& values) TF_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    const auto key_values = keys.flat<tstring>();
    const auto value_values = values.flat<int64_t>();
    for (int64_t i = 0; i < key_values.size(); ++i) Count(absl::string_view(key_values(i))) = value_values(i);
  }

  // The count of `key`, a new one (0) kept in the table if it has none.
  int64_t& Count(absl::string_view key) TF_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    auto found = counts_.find(key);
    if (found == counts_.end()) found = counts_.emplace(Keep(key), 0).first;
    return found->second;
  }

  // A copy of `key` in this table's blocks, which live as long as the table's contents.
  absl::string_view Keep(absl::string_view key) TF_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (key.empty()) return absl::string_view();
    if (key.size() > block_left_) {
      const size_t size = key.size() > kBlock / 16 ? key.size() : kBlock;
      blocks_.emplace_back(new char[size]);
      block_next_ = blocks_.back().get();
      block_left_ = size;
    }
    std::memcpy(block_next_, key.data(), key.size());
    const absl::string_view kept(block_next_, key.size());
    block_next_ += key.size();
    block_left_ -= key.size();
    return kept;
  }

  mutable tensorflow::mutex mu_;
  Map counts_ TF_GUARDED_BY(mu_);
  std::vector<std::unique_ptr<char[]>> blocks_ TF_GUARDED_BY(mu_);
  char* block_next_ TF_GUARDED_BY(mu_) = nullptr;
  size_t block_left_ TF_GUARDED_BY(mu_) = 0;
};

REGISTER_KERNEL_BUILDER(Name("Tf2MapreduceKeyCountTable").Device(tensorflow::DEVICE_CPU),
                        tensorflow::LookupTableOp<KeyCountTable, tstring, int64_t>);

class KeyCountCommitOp : public OpKernel {
 public:
  explicit KeyCountCommitOp(OpKernelConstruction* context) : OpKernel(context) {}

  void Compute(OpKernelContext* context) override {
    tensorflow::lookup::LookupInterface* table;
    OP_REQUIRES_OK(context, tensorflow::LookupResource(context, tensorflow::HandleFromInput(context, 0), &table));
    tensorflow::core::ScopedUnref unref(table);
    auto* counts = dynamic_cast<KeyCountTable*>(table);
    OP_REQUIRES(context, counts != nullptr,
                absl::InvalidArgumentError("tf2_mapreduce: a commit's table is not a Tf2MapreduceKeyCountTable"));
    bool applied = false;
    OP_REQUIRES_OK(context, counts->Commit(context->input(1), context->input(2), context->input(3),
                                           context->input(4).scalar<int64_t>()(), &applied));
    Tensor* out;
    OP_REQUIRES_OK(context, context->allocate_output(0, TensorShape({}), &out));
    out->scalar<bool>()() = applied;
  }
};

REGISTER_KERNEL_BUILDER(Name("Tf2MapreduceKeyCountCommit").Device(tensorflow::DEVICE_CPU), KeyCountCommitOp);

}  // namespace tf2_mapreduce
