// A program using placement::copy on the tree type the in-store tests read
// (in_store_peer.cpp).
#pragma once

#include <cstdint>
#include <string>

namespace steppe::test {
// A full binary tree of `depth` levels, values 1.. in pre-order, as root "tree".
void build_tree_by_copy(const std::string& path, int depth);
std::int64_t sum_tree_by_copy(const std::string& path);
}  // namespace steppe::test
