// Keys with their counts as an op's two outputs, shared by the ops that count keys in a
// hash table (example_features.cc, merge_counts.cc).

#ifndef TF2_MAPREDUCE_NATIVE_KEY_COUNTS_H_
#define TF2_MAPREDUCE_NATIVE_KEY_COUNTS_H_

#include <cstdint>

#include "tensorflow/core/framework/op_kernel.h"

namespace tf2_mapreduce {

// Outputs 0 and 1 of `context`: each key of `counts` (a map from a string or string view
// to its int64 count) and its count, in the map's order.
template <typename Map>
void OutputKeyCounts(tensorflow::OpKernelContext* context, const Map& counts) {
  tensorflow::Tensor* keys = nullptr;
  tensorflow::Tensor* numbers = nullptr;
  const int64_t size = static_cast<int64_t>(counts.size());
  OP_REQUIRES_OK(context, context->allocate_output(0, tensorflow::TensorShape({size}), &keys));
  OP_REQUIRES_OK(context, context->allocate_output(1, tensorflow::TensorShape({size}), &numbers));
  auto key_out = keys->flat<tensorflow::tstring>();
  auto count_out = numbers->flat<int64_t>();
  int64_t k = 0;
  for (const auto& [key, count] : counts) {
    key_out(k).assign(key.data(), key.size());
    count_out(k) = count;
    ++k;
  }
}

}  // namespace tf2_mapreduce

#endif  // TF2_MAPREDUCE_NATIVE_KEY_COUNTS_H_
