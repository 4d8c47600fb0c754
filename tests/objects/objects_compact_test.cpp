// Compaction of object-engine stores (steppe::compact, `steppe compact`;
// docs/guarantees.md "Compaction"), once per scheme: a store of a tree, a
// list and an index array sharing objects, three quarters unlinked and
// committed; compacted with and without collect, every object the roots
// reach walked and compared with a model, check() clean, reopened in a fresh
// process, the roots and counts right, the files shrunk. Then compaction
// killed at random instants (SIGKILL) and a power loss at each of its I/O
// calls (tests/support/power_loss.hpp): the store is the old one or the new
// one, each verified whole.
#include <gtest/gtest.h>
#include <signal.h>
#include <steppe/objects.hpp>
#include <steppe/steppe.hpp>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/open_internal.hpp"
#include "objects/object_format.hpp"
#include "storage/storage.hpp"
#include "support/cli.hpp"
#include "support/expect_error.hpp"
#include "support/power_loss.hpp"
#include "support/temp_dir.hpp"

namespace so = steppe::objects;
namespace fs = std::filesystem;
using steppe::errc;

namespace {

struct Item {
    std::int64_t id;
    char name[24];
    so::ref<Item> next;
};
struct TreeNode {
    std::int64_t key;
    so::ref<TreeNode> left, right;
    so::ref<Item> item;
};
struct Bag {
    std::int64_t count;
    so::ref<Item> head;
    so::ref<so::array<so::ref<Item>>> index;
};

constexpr std::int64_t tree_depth = 9;  // 511 nodes, keys in order 0..510
constexpr std::int64_t items = 1000;

so::options opts() {
    so::options o;
    o.durable = false;
    o.segment_objects = 32;
    return o;
}

so::ref<TreeNode> make_tree(so::store& s, std::int64_t first, std::int64_t depth,
                            const std::vector<so::ref<Item>>& by_id) {
    if (depth == 0) return {};
    const std::int64_t half = (std::int64_t{1} << (depth - 1)) - 1;
    so::ref<TreeNode> left = make_tree(s, first, depth - 1, by_id);
    so::ref<TreeNode> right = make_tree(s, first + half + 1, depth - 1, by_id);
    const std::int64_t key = first + half;
    return s.make<TreeNode>(key, left, right, by_id[static_cast<std::size_t>(key % items)]);
}

// The store as built: the tree (root "tree"), the items list (root "bag",
// with an index of every item) and a root "spare" to an item. Then the
// tree's left half and its right-left quarter are unlinked, the list keeps
// every fifth item, the index is replaced by one of those: about 80 % of the
// objects unreachable, committed.
void build(const std::string& path) {
    auto s = so::store::open(path, opts());
    std::vector<so::ref<Item>> by_id;
    so::ref<Item> head;
    for (std::int64_t i = 0; i < items; ++i) by_id.push_back(s.make<Item>());
    for (std::int64_t i = items - 1; i >= 0; --i) {
        Item* it = by_id[static_cast<std::size_t>(i)].mut();
        it->id = i;
        std::snprintf(it->name, sizeof it->name, "item %lld", static_cast<long long>(i));
        it->next = head;
        head = by_id[static_cast<std::size_t>(i)];
    }
    auto index = s.make_array<so::ref<Item>>(static_cast<std::size_t>(items));
    for (std::int64_t i = 0; i < items; ++i) (*index.mut())[static_cast<std::size_t>(i)] = by_id[static_cast<std::size_t>(i)];
    auto bag = s.root<Bag>("bag");
    bag.mut()->count = items;
    bag.mut()->head = head;
    bag.mut()->index = index;
    s.set_root("tree", make_tree(s, 0, tree_depth, by_id));
    s.set_root("spare", by_id[7]);
    s.commit();

    auto tree = s.find_root<TreeNode>("tree");
    tree.mut()->left = nullptr;
    tree->right.mut()->left = nullptr;
    std::vector<so::ref<Item>> kept;
    for (so::ref<Item> p = bag->head; p; p = p->next)
        if (p->id % 5 == 0) kept.push_back(p);
    for (std::size_t i = 0; i < kept.size(); ++i) kept[i].mut()->next = i + 1 < kept.size() ? kept[i + 1] : so::ref<Item>();
    auto small = s.make_array<so::ref<Item>>(kept.size());
    for (std::size_t i = 0; i < kept.size(); ++i) (*small.mut())[i] = kept[i];
    bag.mut()->count = static_cast<std::int64_t>(kept.size());
    bag.mut()->index = small;
    s.commit();
    s.close();
}

// The keys the tree keeps after build: its root, the right-right quarter.
std::vector<std::int64_t> model_tree_keys() {
    std::vector<std::int64_t> keys;
    const std::int64_t half = (std::int64_t{1} << (tree_depth - 1)) - 1;  // 255
    keys.push_back(half);                                            // the root, 255
    const std::int64_t right = half + 1, rhalf = (std::int64_t{1} << (tree_depth - 2)) - 1;
    keys.push_back(right + rhalf);                                   // the right child
    for (std::int64_t k = right + rhalf + 1; k < right + 2 * rhalf + 1; ++k) keys.push_back(k);
    std::sort(keys.begin(), keys.end());
    return keys;
}

void walk_tree(const so::ref<TreeNode>& n, std::vector<std::int64_t>& keys) {
    if (!n) return;
    walk_tree(n->left, keys);
    keys.push_back(n->key);
    ASSERT_TRUE(n->item);
    ASSERT_EQ(n->item->id, n->key % items);
    walk_tree(n->right, keys);
}

// Everything the roots reach, compared with the model.
void verify(so::store& s) {
    auto bag = s.find_root<Bag>("bag");
    ASSERT_TRUE(bag);
    ASSERT_EQ(bag->count, items / 5);
    std::int64_t n = 0;
    for (so::ref<Item> p = bag->head; p; p = p->next, ++n) {
        ASSERT_EQ(p->id, n * 5);
        ASSERT_EQ(std::string(p->name), "item " + std::to_string(n * 5));
        ASSERT_EQ((*bag->index)[static_cast<std::size_t>(n)], p);
    }
    ASSERT_EQ(n, items / 5);
    ASSERT_EQ(bag->index->size(), static_cast<std::size_t>(items / 5));
    std::vector<std::int64_t> keys;
    walk_tree(s.find_root<TreeNode>("tree"), keys);
    ASSERT_EQ(keys, model_tree_keys());
    auto spare = s.find_root<Item>("spare");
    ASSERT_TRUE(spare);
    ASSERT_EQ(spare->id, 7);
    ASSERT_EQ(std::string(spare->name), "item 7");
    std::vector<std::string> names;
    for (const auto& r : s.roots()) names.push_back(r.name);
    std::sort(names.begin(), names.end());
    ASSERT_EQ(names, (std::vector<std::string>{"bag", "spare", "tree"}));
}

// Opened as the objects are copied into memory and as they are used in
// their segments' pages (placement::in_place).
void verify_path(const std::string& path, const std::string& what) {
    SCOPED_TRACE(what);
    for (so::placement place : {so::placement::copy, so::placement::in_place}) {
        so::options o = opts();
        o.place = place;
        auto s = so::store::open(path, o);
        EXPECT_EQ(s.check(), std::vector<std::string>{});
        verify(s);
    }
}

// The items the roots reach after build: every fifth (the list, relinked),
// those the tree's nodes and the spare root name, and from each of those its
// `next` as it was left (an item not relinked still names the one after it).
std::uint64_t model_items() {
    std::vector<bool> reached(items);
    std::vector<std::int64_t> todo;
    for (std::int64_t i = 0; i < items; i += 5) todo.push_back(i);
    for (std::int64_t k : model_tree_keys()) todo.push_back(k % items);
    todo.push_back(7);
    while (!todo.empty()) {
        std::int64_t i = todo.back();
        todo.pop_back();
        if (i >= items || reached[static_cast<std::size_t>(i)]) continue;
        reached[static_cast<std::size_t>(i)] = true;
        todo.push_back(i % 5 == 0 ? i + 5 : i + 1);
    }
    return static_cast<std::uint64_t>(std::count(reached.begin(), reached.end(), true));
}

so::format::object_meta meta_of(const std::string& path) {
    auto files = steppe::storage::storage::open(path, {.create = false, .read_only = true});
    so::format::object_meta m;
    std::memcpy(&m, files->meta().data(), sizeof m);
    return m;
}

std::uint64_t page_count(const std::string& path) {
    return steppe::storage::storage::open(path, {.create = false, .read_only = true})->page_count();
}

std::uint64_t file_bytes(const std::string& path) {
    std::uint64_t n = fs::file_size(path);
    if (fs::exists(path + "-wal")) n += fs::file_size(path + "-wal");
    return n;
}

void copy_store(const std::string& from, const std::string& to) {
    steppe::test::remove_store_files(to);
    for (const char* suffix : {"", "-wal"})
        if (fs::exists(from + suffix)) fs::copy_file(from + suffix, to + suffix);
}

const steppe::compact_report::by_type* find(const std::vector<steppe::compact_report::by_type>& v,
                                            const std::string& suffix) {
    for (const auto& t : v)
        if (t.type.size() >= suffix.size() && t.type.compare(t.type.size() - suffix.size(), suffix.size(), suffix) == 0)
            return &t;
    return nullptr;
}

class ObjectsCompact : public ::testing::Test {
protected:
    steppe::test::temp_dir dir;
    const std::string original = dir.path("original.ods"), path = dir.path("s.ods");
};

TEST_F(ObjectsCompact, CollectFreesWhatNoRootReachesAndShrinksTheFiles) {
    build(original);
    copy_store(original, path);
    const so::format::object_meta before = meta_of(path);
    const std::uint64_t bytes_before = file_bytes(path);
    steppe::compact_report r = steppe::compact(path, {.collect = true});
    const so::format::object_meta after = meta_of(path);
    std::printf("objects %llu -> %llu, segments %llu -> %llu, pages %llu -> %llu, bytes %llu -> %llu\n",
                static_cast<unsigned long long>(before.objects), static_cast<unsigned long long>(after.objects),
                static_cast<unsigned long long>(before.segments), static_cast<unsigned long long>(after.segments),
                static_cast<unsigned long long>(r.pages_before), static_cast<unsigned long long>(r.pages_after),
                static_cast<unsigned long long>(r.bytes_before), static_cast<unsigned long long>(r.bytes_after));
    EXPECT_EQ(after.detection, before.detection);
    EXPECT_EQ(after.barrier, before.barrier);
    EXPECT_EQ(after.segment_objects, before.segment_objects);
    // Kept: the bag, the new index, the items reached, 1 + 1 + 127 tree nodes.
    const std::uint64_t tree_kept = model_tree_keys().size();
    const std::uint64_t kept = 1 + 1 + model_items() + tree_kept;
    EXPECT_EQ(after.objects, kept);
    EXPECT_LT(r.pages_after, r.pages_before / 2);
    EXPECT_LT(r.bytes_after, bytes_before / 2);
    EXPECT_EQ(r.bytes_after, file_bytes(path));
    EXPECT_EQ(steppe::test::compaction_leftovers(path), std::vector<std::string>{});
    const auto* freed_items = find(r.freed, "Item");
    const auto* freed_nodes = find(r.freed, "TreeNode");
    ASSERT_TRUE(freed_items && freed_nodes);
    EXPECT_EQ(freed_items->objects, static_cast<std::uint64_t>(items) - model_items());
    EXPECT_EQ(freed_nodes->objects, 511u - tree_kept);
    EXPECT_GT(freed_nodes->bytes, freed_nodes->objects * sizeof(TreeNode) - 1);
    const auto* kept_nodes = find(r.kept, "TreeNode");
    ASSERT_TRUE(kept_nodes);
    EXPECT_EQ(kept_nodes->objects, tree_kept);
    std::uint64_t kept_total = 0, freed_total = 0;
    for (const auto& t : r.kept) kept_total += t.objects;
    for (const auto& t : r.freed) freed_total += t.objects;
    EXPECT_EQ(kept_total, kept);
    EXPECT_EQ(kept_total + freed_total, before.objects);
    verify_path(path, "after collect");

    // A fresh process opens it, walks it, changes it and commits.
    EXPECT_TRUE(steppe::test::through_in_child([&] {
        auto s = so::store::open(path, opts());
        verify(s);
        if (::testing::Test::HasFailure() || !s.check().empty()) throw std::runtime_error("the walk failed");
        s.find_root<Item>("spare").mut()->id = 7;  // unchanged value, written
        s.make<Item>();
        auto bag = s.find_root<Bag>("bag");
        bag.mut()->count = bag->count;
        s.commit();
    }));
    verify_path(path, "after a commit in another process");

    // Compacting again changes nothing but frees nothing.
    steppe::compact_report again = steppe::compact(path, {.collect = true});
    EXPECT_TRUE(again.freed.empty());
    EXPECT_EQ(again.pages_after, r.pages_after);
    verify_path(path, "compacted twice");
}

TEST_F(ObjectsCompact, WithoutCollectEveryObjectIsKeptAndEveryReferenceForwarded) {
    build(original);
    copy_store(original, path);
    const so::format::object_meta before = meta_of(path);
    steppe::compact_report r = steppe::compact(path);
    EXPECT_TRUE(r.freed.empty());
    EXPECT_EQ(meta_of(path).objects, before.objects);
    EXPECT_LE(r.pages_after, r.pages_before);
    std::uint64_t kept_total = 0;
    for (const auto& t : r.kept) kept_total += t.objects;
    EXPECT_EQ(kept_total, before.objects);
    verify_path(path, "after compact");
    // The unreachable objects are still there: a collect now frees them.
    steppe::compact_report c = steppe::compact(path, {.collect = true});
    ASSERT_TRUE(find(c.freed, "Item"));
    EXPECT_EQ(find(c.freed, "Item")->objects, static_cast<std::uint64_t>(items) - model_items());
    verify_path(path, "after compact, then collect");
}

TEST_F(ObjectsCompact, TheCliCompactsAndReports) {
    build(path);
    steppe::test::cli_result out = steppe::test::run_cli("compact --collect " + path);
    EXPECT_EQ(out.exit_code, 0) << out.out;
    EXPECT_NE(out.out.find("Item"), std::string::npos) << out.out;
    verify_path(path, "after steppe compact --collect");
}

TEST_F(ObjectsCompact, AHeldStoreIsLockedAndAnEmptyStoreCompacts) {
    build(path);
    {
        auto s = so::store::open(path, opts());
        EXPECT_ERROR(errc::locked, "", steppe::compact(path));
    }
    {
        so::options ro = opts();
        ro.read_only = true;
        auto reader = so::store::open(path, ro);
        EXPECT_ERROR(errc::locked, "", steppe::compact(path));
    }
    verify_path(path, "after the refusals");
    const std::string empty = dir.path("empty.ods");
    {
        auto s = so::store::open(empty, opts());
        s.commit();
    }
    steppe::compact_report r = steppe::compact(empty, {.collect = true});
    EXPECT_TRUE(r.kept.empty());
    auto s = so::store::open(empty, opts());
    EXPECT_EQ(s.check(), std::vector<std::string>{});
    EXPECT_TRUE(s.roots().empty());
}

// The new store is written a few MiB of segments at a time: a store of
// several such batches, with one array larger than a batch (a segment of its
// own), comes out whole, every reference forwarded across batches; and with
// a budget of a few MiB, the old store's segments past it are read again
// when copied, to the same result.
TEST_F(ObjectsCompact, AStoreOfManyWriteBatchesComesOutWholeWhateverTheBudget) {
    constexpr std::int64_t many = 200'000;  // ~13 MiB of segments
    {
        auto s = so::store::open(path, opts());
        auto index = s.make_array<so::ref<Item>>(static_cast<std::size_t>(many));
        auto big = s.make_array<so::ref<Item>>(std::size_t{1} << 20);  // 8 MiB: a segment larger than a batch
        so::ref<Item> head;
        for (std::int64_t i = many - 1; i >= 0; --i) {
            so::ref<Item> item = s.make<Item>();
            item.mut()->id = i;
            item.mut()->next = head;
            head = item;
            (*index.mut())[static_cast<std::size_t>(i)] = head;
        }
        for (std::size_t k = 0; k < big->size(); ++k) (*big.mut())[k] = (*index)[k % many];
        auto bag = s.root<Bag>("bag");
        bag.mut()->count = many;
        bag.mut()->head = head;
        bag.mut()->index = index;
        s.root<Bag>("big").mut()->index = big;
        s.make<Item>().mut()->id = -1;  // reached by nothing: collected
        s.commit();
    }
    for (auto [collect, budget] : {std::pair{false, std::uint64_t{0}}, std::pair{true, std::uint64_t{0}},
                                   std::pair{false, std::uint64_t{3} << 20}, std::pair{true, std::uint64_t{3} << 20}}) {
        SCOPED_TRACE("collect " + std::to_string(collect) + ", budget " + std::to_string(budget));
        steppe::compact(path, {.collect = collect, .resident_budget = budget});
        auto s = so::store::open(path, opts());
        auto bag = s.find_root<Bag>("bag");
        std::int64_t i = 0;
        for (so::ref<Item> p = bag->head; p; p = p->next, ++i) ASSERT_EQ(p->id, i);
        EXPECT_EQ(i, many);
        for (std::int64_t k = 0; k < many; k += 997) EXPECT_EQ((*bag->index)[static_cast<std::size_t>(k)]->id, k);
        auto big = s.find_root<Bag>("big")->index;
        for (std::size_t k = 0; k < big->size(); k += 4099)
            ASSERT_EQ((*big)[k]->id, static_cast<std::int64_t>(k % many));
        EXPECT_EQ(s.check(), std::vector<std::string>{});
    }
}

pid_t start_compaction(const std::string& path) {
    return steppe::test::fork_running([&] { steppe::compact(path, {.collect = true}); });
}

TEST_F(ObjectsCompact, AKillAtAnyInstantLeavesTheOldStoreOrTheNewOne) {
    build(original);
    const std::uint64_t old_pages = page_count(original);
    copy_store(original, path);
    auto started = std::chrono::steady_clock::now();
    int status = 0;
    ::waitpid(start_compaction(path), &status, 0);
    const auto span =
        std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - started).count();
    ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    const std::uint64_t new_pages = page_count(path);
    ASSERT_LT(new_pages, old_pages);
    const char* kills_env = std::getenv("STEPPE_COMPACT_KILLS");
    const int kills = kills_env ? std::atoi(kills_env) : 12;
    int olds = 0, news = 0;
    steppe::test::kill_at_random_instants(
        kills, span, [&] { copy_store(original, path); }, [&] { return start_compaction(path); },
        [&](int i) {
            const std::uint64_t pages = page_count(path);
            EXPECT_TRUE(pages == old_pages || pages == new_pages) << "kill " << i << ": " << pages;
            (pages == old_pages ? olds : news)++;
            verify_path(path, "kill " + std::to_string(i));
        });
    std::printf("%d kills over %lld us: %d left the old store, %d the new one\n", kills,
                static_cast<long long>(span), olds, news);
    ::waitpid(start_compaction(path), &status, 0);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "the survivor compacts";
    EXPECT_EQ(page_count(path), new_pages);
    verify_path(path, "the survivor compacted");
}

TEST_F(ObjectsCompact, APowerLossAtEveryIoCallLeavesTheOldStoreOrTheNewOne) {
    build(original);
    const std::uint64_t old_pages = page_count(original);
    copy_store(original, path);
    steppe::compact(path, {.collect = true});
    const std::uint64_t new_pages = page_count(path);
    long calls = steppe::test::power_loss_at_each_call(
        [&] { copy_store(original, path); },
        [&](steppe::test::fault_env& io) { steppe::detail::compact_with_env(path, {.collect = true}, &io); },
        [&](const std::string& what, bool through) {
            const std::uint64_t pages = page_count(path);
            EXPECT_TRUE(pages == old_pages || pages == new_pages) << what << ": " << pages;
            if (through) {
                EXPECT_EQ(pages, new_pages) << what;
            }
            verify_path(path, what);
        });
    EXPECT_GE(calls, 0);
    if (calls >= 0) std::printf("a power loss at each of the %ld I/O calls of a compaction\n", calls);
}

}  // namespace
