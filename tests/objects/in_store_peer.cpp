// The other half of InStore.ReadsAStoreACopyingProgramMade: the same types,
// by name and layout, declared with ref<T> as a program using placement::copy
// declares them (objects_in_store_test.cpp declares them with oid<T>).
#include <steppe/objects.hpp>

#include <string>

#include "objects/in_store_peer.hpp"

namespace so = steppe::objects;

namespace {
struct Tree {
    std::int64_t value;
    so::ref<Tree> left;
    so::ref<Tree> right;
};

so::ref<Tree> grow(so::store& s, int depth, std::int64_t& next) {
    if (depth == 0) return {};
    so::ref<Tree> t = s.make<Tree>();
    t.mut()->value = next++;
    so::ref<Tree> l = grow(s, depth - 1, next);
    so::ref<Tree> r = grow(s, depth - 1, next);
    t.mut()->left = l;
    t.mut()->right = r;
    return t;
}

std::int64_t sum(so::ref<Tree> t) { return t ? t->value + sum(t->left) + sum(t->right) : 0; }
}  // namespace

namespace steppe::test {
void build_tree_by_copy(const std::string& path, int depth) {
    so::options o;
    o.durable = false;
    auto s = so::store::open(path, o);
    std::int64_t next = 1;
    s.set_root("tree", grow(s, depth, next));
    s.commit();
}

std::int64_t sum_tree_by_copy(const std::string& path) {
    so::options o;
    o.durable = false;
    auto s = so::store::open(path, o);
    return sum(s.find_root<Tree>("tree"));
}
}  // namespace steppe::test
