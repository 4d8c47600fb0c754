// Damaging stores on purpose, by name, for corruption tests.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace steppe::test {

// Flips one byte at `offset` of `file`.
void flip_byte(const std::string& file, std::uint64_t offset);

// Logical pages of the store's main file that look like pages of
// {long value; T* next} nodes with values in [0, max_value). Opening the
// store writable first checkpoints, so the images sit in the main file.
std::vector<std::uint64_t> node_pages(const std::string& store, long max_value);

// Flips a byte inside each of the given logical pages of the main file.
void damage_pages(const std::string& store, const std::vector<std::uint64_t>& pages);

}  // namespace steppe::test
