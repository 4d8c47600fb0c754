// placement::in_store (Moss 1990's in-store access): objects used in their
// segments' buffers through oid<T>, by the pointer interface (peek, poke) and
// the call interface (read, write). Built with every scheme (CMakeLists.txt):
// in-store access does not depend on it.
#include <gtest/gtest.h>
#include <steppe/objects.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "objects/in_store_peer.hpp"
#include "support/expect_error.hpp"
#include "support/temp_dir.hpp"
#include "third_throws.hpp"

namespace so = steppe::objects;
using steppe::errc;


namespace {

// The tree in_store_peer.cpp makes with ref<Tree> fields, as in-store access
// declares it.
struct Tree {
    std::int64_t value;
    so::oid<Tree> left;
    so::oid<Tree> right;
};
struct Linked {  // declared with ref<T>: refused in store
    std::int64_t value;
    so::ref<Linked> next;
};
struct Bag {
    std::int64_t count;
    so::oid<so::array<so::oid<Tree>>> items;
};

class InStore : public ::testing::Test {
protected:
    so::options opts(std::uint64_t budget = 0) const {
        so::options o;
        o.durable = false;
        o.place = so::placement::in_store;
        o.segment_objects = 32;
        o.resident_budget = budget;
        return o;
    }
    so::store open(std::uint64_t budget = 0) { return so::store::open(path, opts(budget)); }

    // A full tree of `depth` levels made in store, values 1.. in pre-order.
    static so::oid<Tree> grow(so::store& s, int depth, std::int64_t& next) {
        if (depth == 0) return {};
        so::oid<Tree> t = s.create<Tree>();
        s.poke(t)->value = next++;
        so::oid<Tree> l = grow(s, depth - 1, next);
        so::oid<Tree> r = grow(s, depth - 1, next);
        Tree* at = s.poke(t);  // one access per pointer: creating others may move the buffer
        at->left = l;
        at->right = r;
        return t;
    }
    // Pointer interface: a pointer per access, references read as oids.
    static std::int64_t sum_by_pointer(so::store& s, so::oid<Tree> t) {
        if (!t) return 0;
        const Tree* p = s.peek(t);
        std::int64_t v = p->value;
        so::oid<Tree> l = p->left, r = s.peek(t)->right;
        return v + sum_by_pointer(s, l) + sum_by_pointer(s, r);
    }
    // Call interface: each object copied out whole.
    static std::int64_t sum_by_call(so::store& s, so::oid<Tree> t) {
        if (!t) return 0;
        Tree copy = s.read(t);
        return copy.value + sum_by_call(s, copy.left) + sum_by_call(s, copy.right);
    }
    static std::int64_t expected_sum(int depth) {
        std::int64_t n = (std::int64_t{1} << depth) - 1;
        return n * (n + 1) / 2;
    }

    steppe::test::temp_dir dir;
    std::string path = dir.path("tree.ods");
};

TEST_F(InStore, ObjectsMadeInStoreAreReadBackByBothInterfacesAfterReopen) {
    {
        auto s = open();
        std::int64_t next = 1;
        s.set_stored_root("tree", grow(s, 10, next));
        s.commit();
        EXPECT_EQ(s.stats().new_objects, 1023u);
        EXPECT_GE(s.stats().segments_written, 1023u / 32);
    }
    auto s = open();
    so::oid<Tree> root = s.find_stored_root<Tree>("tree");
    ASSERT_TRUE(root);
    EXPECT_EQ(sum_by_pointer(s, root), expected_sum(10));
    EXPECT_EQ(sum_by_call(s, root), expected_sum(10));
    EXPECT_GT(s.stats().segment_faults, 0u);
    EXPECT_TRUE(s.check().empty()) << s.check()[0];
}

TEST_F(InStore, ReadsAStoreACopyingProgramMadeAndTheOtherWayRound) {
    steppe::test::build_tree_by_copy(path, 9);
    {
        auto s = open();
        so::oid<Tree> root = s.find_stored_root<Tree>("tree");
        EXPECT_EQ(sum_by_pointer(s, root), expected_sum(9));
        s.write(root, Tree{1000, s.read(root).left, s.read(root).right});  // the call interface writes
        s.commit();
    }
    EXPECT_EQ(steppe::test::sum_tree_by_copy(path), expected_sum(9) - 1 + 1000);
}

TEST_F(InStore, PokedWritesPersistAndRollbackForgetsWritesAndCreations) {
    so::oid<Tree> root;
    {
        auto s = open();
        std::int64_t next = 1;
        root = grow(s, 6, next);
        s.set_stored_root("tree", root);
        s.commit();
        s.poke(root)->value = 500;
        so::oid<Tree> extra = s.create<Tree>(Tree{7, {}, {}});
        s.poke(s.peek(root)->left)->left = extra;
        s.rollback();
        EXPECT_EQ(s.peek(root)->value, 1);
        EXPECT_EQ(sum_by_pointer(s, root), expected_sum(6));
        s.poke(root)->value = 100;
        s.commit();
    }
    auto s = open();
    EXPECT_EQ(s.read(s.find_stored_root<Tree>("tree")).value, 100);
    EXPECT_EQ(sum_by_call(s, root), expected_sum(6) - 1 + 100);
    EXPECT_TRUE(s.check().empty()) << s.check()[0];
}

TEST_F(InStore, ArraysOfIdentifiersByIndex) {
    {
        auto s = open();
        auto bag = s.create<Bag>();
        auto items = s.create_array<so::oid<Tree>>(100);
        for (std::size_t i = 0; i < 100; ++i) s.write(items, i, s.create<Tree>(Tree{std::int64_t(i), {}, {}}));
        s.poke(bag)->items = items;
        s.poke(bag)->count = 100;
        s.set_stored_root("bag", bag);
        s.commit();
    }
    auto s = open();
    auto bag = s.find_stored_root<Bag>("bag");
    auto items = s.peek(bag)->items;
    ASSERT_EQ(s.size(items), 100u);
    EXPECT_EQ(s.peek(items)->size(), 100u);
    std::int64_t sum = 0;
    for (std::size_t i = 0; i < 100; ++i) sum += s.read(s.read(items, i)).value;
    EXPECT_EQ(sum, 99 * 100 / 2);
    EXPECT_EQ(s.peek(s.peek(items)->operator[](42))->value, 42);
    EXPECT_ERROR(errc::invalid_argument, "index 100", s.read(items, 100));
    EXPECT_TRUE(s.check().empty()) << s.check()[0];
}

using steppe::test::ThirdThrows;

// An object created in store is persistent at the next commit whether or not
// anything refers to it: one whose constructor threw leaves its segment.
TEST_F(InStore, AThrowingConstructorInCreateArrayLeavesNothingInTheStore) {
    {
        auto s = open();
        so::oid<Tree> kept = s.create<Tree>();
        for (int round = 0; round < 3; ++round) {
            ThirdThrows::made = 0;
            EXPECT_THROW(s.create_array<ThirdThrows>(50), std::runtime_error);
        }
        s.set_stored_root("tree", kept);
        s.commit();
        EXPECT_EQ(s.stats().new_objects, 1u);
        ThirdThrows::made = 0;
        EXPECT_THROW(s.create_array<ThirdThrows>(50), std::runtime_error);  // alone in a new segment
        s.commit();
        EXPECT_EQ(s.stats().new_objects, 1u);
        EXPECT_TRUE(s.check().empty());
    }
    auto s = open();
    EXPECT_TRUE(s.find_stored_root<Tree>("tree"));
    EXPECT_TRUE(s.check().empty());
}

TEST_F(InStore, MisuseIsAClearError) {
    {
        auto s = open();
        std::int64_t next = 1;
        s.set_stored_root("tree", grow(s, 3, next));
        s.commit();
        EXPECT_ERROR(errc::invalid_argument, "declare it as steppe::objects::oid<T>", s.create<Linked>());
        EXPECT_ERROR(errc::unsupported, "placement::in_store", s.make<Tree>());
        EXPECT_ERROR(errc::unsupported, "placement::in_store", s.find_root<Tree>("tree"));
        EXPECT_ERROR(errc::type_mismatch, "holds a", s.find_stored_root<Bag>("tree"));
        so::oid<Tree> root = s.find_stored_root<Tree>("tree");
        EXPECT_EQ(s.peek(s.peek(root)->left)->value, 2);
        so::oid<Tree> none;
        EXPECT_ERROR(errc::invalid_argument, "null oid", s.peek(none));
    }
    so::options copy;
    copy.durable = false;
    auto s = so::store::open(path, copy);
    EXPECT_ERROR(errc::unsupported, "placement::in_store", s.find_stored_root<Tree>("tree"));
    EXPECT_ERROR(errc::invalid_argument, "declare it as steppe::objects::ref<T>", s.make<Tree>());
}

// A type's identity is checked at every access: an oid that names an object
// of another type, made up, or past the store's segments is an error, not a
// misread.
TEST_F(InStore, AnOidOfTheWrongTypeOrOfNoObjectIsRefused) {
    so::oid<Bag> bag;
    {
        auto s = open();
        std::int64_t next = 1;
        so::oid<Tree> t = grow(s, 2, next);
        s.set_stored_root("tree", t);
        bag = s.create<Bag>();
        s.set_stored_root("bag", bag);
        s.commit();
    }
    auto s = open();
    so::oid<Tree> t = s.find_stored_root<Tree>("tree");
    // A Bag's identifier, put where a Tree's is (as a damaged or crafted store would).
    Tree forged = s.read(t);
    std::memcpy(static_cast<void*>(&forged.left), &bag, sizeof bag);
    s.write(t, forged);
    EXPECT_ERROR(errc::type_mismatch, "is a", s.peek(s.peek(t)->left));
    so::oid<Tree> far;
    std::uint64_t past = std::uint64_t{1} << 40;
    std::memcpy(static_cast<void*>(&far), &past, sizeof past);
    EXPECT_ERROR(errc::invalid_argument, "no object", s.peek(far));
}

TEST_F(InStore, ASmallBudgetKeepsFewSegmentsAndReadsEverythingRight) {
    {
        auto s = open();
        std::int64_t next = 1;
        s.set_stored_root("tree", grow(s, 12, next));
        s.commit();
    }
    auto s = open(64 << 10);
    so::oid<Tree> root = s.find_stored_root<Tree>("tree");
    EXPECT_EQ(sum_by_pointer(s, root), expected_sum(12));
    EXPECT_EQ(sum_by_call(s, root), expected_sum(12));
    EXPECT_GT(s.stats().evicted_objects, 0u);
    EXPECT_GT(s.stats().segment_faults, 2 * (4095u / 32));  // segments were read again
}

// kill -9 while committing in-store changes in a loop: the store holds a
// whole commit, its tree's sum one of the committed ones.
TEST_F(InStore, KilledWhileCommittingLeavesAWholeCommit) {
    {
        auto s = open();
        std::int64_t next = 1;
        s.set_stored_root("tree", grow(s, 8, next));
        s.commit();
    }
    int committed[2];
    ASSERT_EQ(::pipe(committed), 0);
    pid_t child = ::fork();
    if (child == 0) {
        auto o = opts();
        o.durable = true;
        auto s = so::store::open(path, o);
        so::oid<Tree> root = s.find_stored_root<Tree>("tree");
        for (std::int64_t round = 1;; ++round) {  // every node + 1 each round
            std::vector<so::oid<Tree>> todo{root};
            while (!todo.empty()) {
                so::oid<Tree> t = todo.back();
                todo.pop_back();
                Tree* p = s.poke(t);
                p->value += 1;
                if (p->left) todo.push_back(p->left);
                if (p->right) todo.push_back(p->right);
            }
            s.commit();
            (void)!::write(committed[1], "c", 1);
        }
    }
    char c;
    for (int i = 0; i < 3; ++i) ASSERT_EQ(::read(committed[0], &c, 1), 1);
    ::usleep(20000);
    ::kill(child, SIGKILL);
    int status = 0;
    ::waitpid(child, &status, 0);
    auto s = open();
    std::int64_t sum = sum_by_call(s, s.find_stored_root<Tree>("tree"));
    EXPECT_EQ((sum - expected_sum(8)) % 255, 0) << "a commit was torn: sum " << sum;
    EXPECT_GE(sum, expected_sum(8) + 3 * 255) << "a returned commit was lost";
    EXPECT_TRUE(s.check().empty()) << s.check()[0];
}

}  // namespace
