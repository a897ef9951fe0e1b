// Reading a tf.train.Example's feature map from the protobuf wire format (example_wire.h).

#include "example_wire.h"

namespace tf2_mapreduce {
namespace {

class Wire {
 public:
  Wire(absl::string_view data)
      : p_(reinterpret_cast<const uint8_t*>(data.data())), end_(p_ + data.size()) {}

  bool done() const { return p_ == end_; }

  bool Varint(uint64_t* value) {
    uint64_t result = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (p_ == end_) return false;
      const uint8_t byte = *p_++;
      result |= static_cast<uint64_t>(byte & 0x7f) << shift;
      if (!(byte & 0x80)) {
        *value = result;
        return true;
      }
    }
    return false;
  }

  bool Bytes(absl::string_view* value) {
    uint64_t size;
    if (!Varint(&size) || size > static_cast<uint64_t>(end_ - p_)) return false;
    *value = absl::string_view(reinterpret_cast<const char*>(p_), size);
    p_ += size;
    return true;
  }

  bool Fixed32(uint32_t* value) {
    if (end_ - p_ < 4) return false;
    *value = static_cast<uint32_t>(p_[0]) | static_cast<uint32_t>(p_[1]) << 8 |
             static_cast<uint32_t>(p_[2]) << 16 | static_cast<uint32_t>(p_[3]) << 24;
    p_ += 4;
    return true;
  }

  // Passes over a field of an unknown number: what protobuf's parser keeps aside.
  bool Skip(int wire_type) {
    uint64_t ignored;
    absl::string_view bytes;
    switch (wire_type) {
      case 0: return Varint(&ignored);
      case 1:
        if (end_ - p_ < 8) return false;
        p_ += 8;
        return true;
      case 2: return Bytes(&bytes);
      case 5:
        if (end_ - p_ < 4) return false;
        p_ += 4;
        return true;
      default: return false;  // groups (3, 4) are in no message of tf.train.Example
    }
  }

 private:
  const uint8_t* p_;
  const uint8_t* end_;
};

// Reads a field's tag: its number and wire type.
bool Tag(Wire* wire, uint64_t* number, int* wire_type) {
  uint64_t tag;
  if (!wire->Varint(&tag) || (tag >> 3) == 0) return false;
  *number = tag >> 3;
  *wire_type = static_cast<int>(tag & 7);
  return true;
}

// Calls `field(number, wire_type, &wire)` for each field of message `data` whose number
// `known(number)` accepts (the others are passed over): it reads the field, or returns
// false for a malformed one. False if the message is malformed.
template <typename Known, typename Field>
bool ForEachField(absl::string_view data, Known known, Field field) {
  Wire wire(data);
  while (!wire.done()) {
    uint64_t number;
    int type;
    if (!Tag(&wire, &number, &type)) return false;
    if (!known(number)) {
      if (!wire.Skip(type)) return false;
    } else if (!field(number, type, &wire)) {
      return false;
    }
  }
  return true;
}

// A length-delimited field (a message, bytes or a packed list): its bytes.
bool Delimited(int wire_type, Wire* wire, absl::string_view* bytes) { return wire_type == 2 && wire->Bytes(bytes); }

bool ParseList(absl::string_view data, int kind, Feature* feature) {
  return ForEachField(data, [](uint64_t number) { return number == 1; }, [&](uint64_t, int type, Wire* wire) {
    absl::string_view packed;
    if (kind == 1) {
      absl::string_view value;
      if (!Delimited(type, wire, &value)) return false;
      feature->bytes.push_back(value);
    } else if (kind == 2 && type == 5) {
      uint32_t bits;
      if (!wire->Fixed32(&bits)) return false;
      feature->floats.push_back(bits);
    } else if (kind == 2) {
      if (!Delimited(type, wire, &packed) || packed.size() % 4 != 0) return false;
      Wire values(packed);
      uint32_t bits;
      while (!values.done() && values.Fixed32(&bits)) feature->floats.push_back(bits);
    } else if (type == 0) {
      uint64_t value;
      if (!wire->Varint(&value)) return false;
      feature->ints.push_back(static_cast<int64_t>(value));
    } else {
      if (!Delimited(type, wire, &packed)) return false;
      Wire values(packed);
      uint64_t value;
      while (!values.done()) {
        if (!values.Varint(&value)) return false;
        feature->ints.push_back(static_cast<int64_t>(value));
      }
    }
    return true;
  });
}

bool ParseFeature(absl::string_view data, Feature* feature) {
  return ForEachField(
      data, [](uint64_t number) { return number >= 1 && number <= 3; },
      [&](uint64_t number, int type, Wire* wire) {
        absl::string_view list;
        if (!Delimited(type, wire, &list)) return false;
        feature->Become(static_cast<int>(number));
        return ParseList(list, feature->kind, feature);
      });
}

// A map entry: its key (the last one given) and its value (every one merged).
bool ParseEntry(absl::string_view data, Entry* entry) {
  return ForEachField(
      data, [](uint64_t number) { return number == 1 || number == 2; },
      [&](uint64_t number, int type, Wire* wire) {
        if (number == 1) return Delimited(type, wire, &entry->name);
        absl::string_view value;
        return Delimited(type, wire, &value) && ParseFeature(value, &entry->feature);
      });
}

}  // namespace

bool ParseExample(absl::string_view data, Entries* entries) {
  const auto first = [](uint64_t number) { return number == 1; };
  return ForEachField(data, first, [&](uint64_t, int type, Wire* wire) {
    absl::string_view features;
    return Delimited(type, wire, &features) &&
           ForEachField(features, first, [&](uint64_t, int entry_type, Wire* fields) {
             absl::string_view entry;
             if (!Delimited(entry_type, fields, &entry)) return false;
             return ParseEntry(entry, entries->Add());
           });
  });
}

}  // namespace tf2_mapreduce
