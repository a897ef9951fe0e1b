// Encoding a batch of features as tf.train.Example records, in a graph: TensorFlow parses
// Examples in graphs but has no op that makes them, and a job that writes transformed
// examples makes them on the workers, in its map step.
//
// Tf2MapreduceEncodeExamples: each feature given as its values and row splits (example i
// holds values [splits[i], splits[i+1])), int64, float or bytes; every example is encoded
// with its features in name order, each present (an empty list where it has no value), in
// protobuf's wire format, packed as protobuf packs them. The same features give the same
// bytes.

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/shape_inference.h"

namespace tf2_mapreduce {

using tensorflow::OpInputList;
using tensorflow::OpKernel;
using tensorflow::OpKernelConstruction;
using tensorflow::OpKernelContext;
using tensorflow::Tensor;
using tensorflow::TensorShape;
using tensorflow::tstring;

REGISTER_OP("Tf2MapreduceEncodeExamples")
    .Input("batch: int64")
    .Input("int_values: num_int * int64")
    .Input("int_splits: num_int * int64")
    .Input("float_values: num_float * float")
    .Input("float_splits: num_float * int64")
    .Input("bytes_values: num_bytes * string")
    .Input("bytes_splits: num_bytes * int64")
    .Attr("num_int: int >= 0")
    .Attr("num_float: int >= 0")
    .Attr("num_bytes: int >= 0")
    .Attr("int_names: list(string)")
    .Attr("float_names: list(string)")
    .Attr("bytes_names: list(string)")
    .Output("examples: string")
    .SetShapeFn([](tensorflow::shape_inference::InferenceContext* c) {
      c->set_output(0, c->Vector(c->UnknownDim()));
      return absl::OkStatus();
    })
    .Doc(R"doc(
`batch` tf.train.Example records: feature k of each kind holds, in example i, its values
[splits[i], splits[i+1]); splits has batch + 1 elements, from 0 to its values' length.
)doc");

namespace {

enum Kind { kBytes = 1, kFloat = 2, kInt = 3 };  // Feature's field numbers

void Varint(uint64_t value, std::string* out) {
  while (value >= 0x80) {
    out->push_back(static_cast<char>((value & 0x7f) | 0x80));
    value >>= 7;
  }
  out->push_back(static_cast<char>(value));
}

// A length-delimited field: its tag, its length, its bytes.
void Field(int number, const std::string& bytes, std::string* out) {
  Varint((static_cast<uint64_t>(number) << 3) | 2, out);
  Varint(bytes.size(), out);
  out->append(bytes);
}

struct Column {
  std::string name;
  Kind kind;
  const Tensor* values;
  const Tensor* splits;
};

}  // namespace

class EncodeExamplesOp : public OpKernel {
 public:
  explicit EncodeExamplesOp(OpKernelConstruction* context) : OpKernel(context) {
    OP_REQUIRES_OK(context, context->GetAttr("int_names", &names_[0]));
    OP_REQUIRES_OK(context, context->GetAttr("float_names", &names_[1]));
    OP_REQUIRES_OK(context, context->GetAttr("bytes_names", &names_[2]));
  }

  void Compute(OpKernelContext* context) override {
    const int64_t batch = context->input(0).scalar<int64_t>()();
    std::vector<Column> columns;
    const char* kinds[3][2] = {{"int_values", "int_splits"}, {"float_values", "float_splits"},
                               {"bytes_values", "bytes_splits"}};
    const Kind kind_of[3] = {kInt, kFloat, kBytes};
    for (int k = 0; k < 3; ++k) {
      OpInputList values, splits;
      OP_REQUIRES_OK(context, context->input_list(kinds[k][0], &values));
      OP_REQUIRES_OK(context, context->input_list(kinds[k][1], &splits));
      OP_REQUIRES(context, static_cast<size_t>(values.size()) == names_[k].size(),
                  absl::InvalidArgumentError("a name per feature is needed"));
      for (int i = 0; i < values.size(); ++i) {
        const auto split = splits[i].flat<int64_t>();
        OP_REQUIRES(context, split.size() == batch + 1 && split(0) == 0 && split(batch) == values[i].NumElements(),
                    absl::InvalidArgumentError("feature " + names_[k][i] + ": row splits do not fit its values"));
        for (int64_t e = 0; e < batch; ++e) {
          OP_REQUIRES(context, split(e) <= split(e + 1),
                      absl::InvalidArgumentError("feature " + names_[k][i] + ": row splits decrease"));
        }
        columns.push_back({names_[k][i], kind_of[k], &values[i], &splits[i]});
      }
    }
    std::sort(columns.begin(), columns.end(), [](const Column& a, const Column& b) { return a.name < b.name; });
    for (size_t i = 1; i < columns.size(); ++i) {
      OP_REQUIRES(context, columns[i].name != columns[i - 1].name,
                  absl::InvalidArgumentError("feature " + columns[i].name + " given twice"));
    }
    Tensor* output = nullptr;
    OP_REQUIRES_OK(context, context->allocate_output(0, TensorShape({batch}), &output));
    auto examples = output->flat<tstring>();
    std::string features, entry, feature, list, key;
    for (int64_t e = 0; e < batch; ++e) {
      features.clear();
      for (const Column& column : columns) {
        const auto split = column.splits->flat<int64_t>();
        List(column, split(e), split(e + 1), &list);
        feature.clear();
        Field(column.kind, list, &feature);
        entry.clear();
        Field(1, column.name, &entry);
        Field(2, feature, &entry);
        Field(1, entry, &features);
      }
      std::string example;
      Field(1, features, &example);
      examples(e) = example;
    }
  }

 private:
  // A BytesList, FloatList or Int64List of the column's values [begin, end): numbers packed.
  static void List(const Column& column, int64_t begin, int64_t end, std::string* out) {
    out->clear();
    if (begin == end) return;
    if (column.kind == kBytes) {
      const auto values = column.values->flat<tstring>();
      for (int64_t i = begin; i < end; ++i) Field(1, std::string(values(i)), out);
      return;
    }
    std::string packed;
    if (column.kind == kFloat) {
      const auto values = column.values->flat<float>();
      packed.resize(4 * (end - begin));
      for (int64_t i = begin; i < end; ++i) {
        uint32_t bits;
        std::memcpy(&bits, &values(i), 4);
        for (int b = 0; b < 4; ++b) packed[4 * (i - begin) + b] = static_cast<char>((bits >> (8 * b)) & 0xff);
      }
    } else {
      const auto values = column.values->flat<int64_t>();
      for (int64_t i = begin; i < end; ++i) Varint(static_cast<uint64_t>(values(i)), &packed);
    }
    Field(1, packed, out);
  }

  std::vector<std::string> names_[3];
};

REGISTER_KERNEL_BUILDER(Name("Tf2MapreduceEncodeExamples").Device(tensorflow::DEVICE_CPU), EncodeExamplesOp);

}  // namespace tf2_mapreduce
