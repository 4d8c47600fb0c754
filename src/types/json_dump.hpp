// An object's bytes as JSON, field by field, from the store's own layouts
// (`steppe dump`, both engines). Scalars are decoded from the fingerprint
// their field records (integer, unsigned, float, bool, enum, of their size);
// nested structs and bases through the catalog entry with their
// fingerprint; arrays element by element; pointer and reference words by
// the caller, which also follows them. What cannot be decoded is hex.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

#include "types/types.hpp"

namespace steppe::types {

// The JSON value of a stored pointer or reference word (a string naming its
// target, or null), given by the engine.
using word_to_json = std::function<std::string(std::uint64_t word)>;

// `count` elements of catalog type `type` at `bytes`: an object, or an array
// of them if count != 1.
std::string object_json(const catalog& c, catalog::index type, std::uint64_t count, const std::byte* bytes,
                        const word_to_json& word);

// s as a JSON string literal.
std::string json_string(const std::string& s);

}  // namespace steppe::types
