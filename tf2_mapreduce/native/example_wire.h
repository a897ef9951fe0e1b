// The feature map of a serialized tf.train.Example, read from the protobuf wire format
// with the merges of protobuf's own parser, without making the message: the values stay
// views of the record's bytes (example_features.cc counts them).
#ifndef TF2_MAPREDUCE_NATIVE_EXAMPLE_WIRE_H_
#define TF2_MAPREDUCE_NATIVE_EXAMPLE_WIRE_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/strings/string_view.h"

namespace tf2_mapreduce {

// A Feature as protobuf's parser leaves it: the list field seen last sets the kind (a
// oneof), and the same list field seen again appends to it (a message merge).
struct Feature {
  int kind = 0;
  std::vector<absl::string_view> bytes;
  std::vector<uint32_t> floats;  // IEEE bits
  std::vector<int64_t> ints;

  void Become(int new_kind) {
    if (kind == new_kind) return;
    kind = new_kind;
    bytes.clear();
    floats.clear();
    ints.clear();
  }
  size_t size() const { return bytes.size() + floats.size() + ints.size(); }
};

struct Entry {
  absl::string_view name;
  Feature feature;
};

// The entries of one Example at a time, their lists kept from one record to the next: a
// record then costs no allocation (the lists' growth was a third of the time, measured).
class Entries {
 public:
  void Clear() { used_ = 0; }

  Entry* Add() {
    if (used_ == entries_.size()) entries_.emplace_back();
    Entry* entry = &entries_[used_++];
    entry->name = {};
    entry->feature.Become(0);
    return entry;
  }

  size_t size() const { return used_; }
  Entry& operator[](size_t i) { return entries_[i]; }

 private:
  std::vector<Entry> entries_;
  size_t used_ = 0;
};

// The entries of an Example's feature map into `entries` (cleared first by the caller),
// in the order met; every `features` field adds its entries (a message merge). False if
// the record is not a well-formed Example.
bool ParseExample(absl::string_view data, Entries* entries);

}  // namespace tf2_mapreduce

#endif  // TF2_MAPREDUCE_NATIVE_EXAMPLE_WIRE_H_
