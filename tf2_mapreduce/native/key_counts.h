// Keys with their counts as an op's two outputs, shared by the ops that output counted
// keys (example_features.cc, merge_counts.cc, sorted_entries.cc).

#ifndef TF2_MAPREDUCE_NATIVE_KEY_COUNTS_H_
#define TF2_MAPREDUCE_NATIVE_KEY_COUNTS_H_

#include <cstdint>

#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/shape_inference.h"

namespace tf2_mapreduce {

// The shapes of an op's two outputs of keys and counts: vectors of a length known once run.
inline absl::Status VectorOutputs(tensorflow::shape_inference::InferenceContext* c) {
  c->set_output(0, c->Vector(c->UnknownDim()));
  c->set_output(1, c->Vector(c->UnknownDim()));
  return absl::OkStatus();
}

// Outputs 0 and 1 of `context`: `size` keys and their counts, those that
// `for_each(emit)` passes to `emit(key, count)` (a key: anything with data() and size()).
template <typename ForEach>
void OutputKeyCounts(tensorflow::OpKernelContext* context, int64_t size, ForEach for_each) {
  tensorflow::Tensor* keys = nullptr;
  tensorflow::Tensor* numbers = nullptr;
  OP_REQUIRES_OK(context, context->allocate_output(0, tensorflow::TensorShape({size}), &keys));
  OP_REQUIRES_OK(context, context->allocate_output(1, tensorflow::TensorShape({size}), &numbers));
  auto key_out = keys->flat<tensorflow::tstring>();
  auto count_out = numbers->flat<int64_t>();
  int64_t k = 0;
  for_each([&](const auto& key, int64_t count) {
    key_out(k).assign(key.data(), key.size());
    count_out(k++) = count;
  });
}

// The same, of each key of `counts` (a map from a string or string view to its count),
// in the map's order.
template <typename Map>
void OutputKeyCounts(tensorflow::OpKernelContext* context, const Map& counts) {
  OutputKeyCounts(context, static_cast<int64_t>(counts.size()), [&](auto emit) {
    for (const auto& [key, count] : counts) emit(key, count);
  });
}

}  // namespace tf2_mapreduce

#endif  // TF2_MAPREDUCE_NATIVE_KEY_COUNTS_H_
