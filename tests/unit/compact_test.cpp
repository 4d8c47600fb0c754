// steppe::compact and `steppe compact`: after 80 % of a store is deleted the
// files shrink, everything the roots reach is intact (values, interior
// pointers, containers, virtual calls, also after the CLI, which lacks the
// program's classes, compacted it), --collect frees exactly what no root
// reaches, the store keeps working, and a store in use is refused.
#include <gtest/gtest.h>
#include <steppe/objects.hpp>
#include <steppe/steppe.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <filesystem>
#include <fstream>

#include "heap/heap.hpp"
#include "storage/storage.hpp"
#include "support/cli.hpp"
#include "support/compact_model.hpp"
#include "support/expect_error.hpp"
#include "support/temp_dir.hpp"

namespace {

using compact_model::fingerprint;

class CompactTest : public ::testing::Test {
protected:
    steppe::test::temp_dir dir;
    std::string path = dir.path("s.db");

    std::uint64_t files_bytes() const {
        std::uint64_t n = std::filesystem::file_size(path);
        if (std::filesystem::exists(path + "-wal")) n += std::filesystem::file_size(path + "-wal");
        return n;
    }
    std::vector<std::string> check() {
        auto s = steppe::store::open(path, {.create = false});
        return s.check();
    }
    static const steppe::compact_report::by_type* find(const std::vector<steppe::compact_report::by_type>& types,
                                                      const std::string& part) {
        for (const auto& t : types)
            if (t.type.find(part) != std::string::npos) return &t;
        return nullptr;
    }
};

TEST_F(CompactTest, ShrinksTheFilesAndKeepsEverySurvivingObjectAndPointer) {
    compact_model::build(path, 3000);
    const std::string before = fingerprint(path);
    ASSERT_NE(before.find("INSIDE"), 0u);
    ASSERT_EQ(before.find("INSIDE-BROKEN"), std::string::npos);
    const std::uint64_t bytes = files_bytes();
    steppe::compact_report r = steppe::compact(path);
    EXPECT_EQ(r.bytes_before, bytes);
    EXPECT_EQ(r.bytes_after, files_bytes());
    EXPECT_FALSE(std::filesystem::exists(path + "-wal")) << "the new store is one main file";
    EXPECT_LT(r.bytes_after * 2, r.bytes_before) << "80 % deleted: the files shrink to well under half";
    EXPECT_LT(r.pages_after * 2, r.pages_before);
    EXPECT_TRUE(r.freed.empty()) << "without collect every allocated object is kept";
    EXPECT_EQ(fingerprint(path), before);
    EXPECT_EQ(check(), std::vector<std::string>{});
}

// A compaction removes the file an earlier, killed compaction of this store
// left, and nothing else: a backup the user named NAME.compact (a tester's
// finding: it was removed as a leftover) is kept, while a leftover named as
// this store's compactions name their new file goes.
TEST_F(CompactTest, RemovesOnlyWhatAnEarlierCompactionOfThisStoreLeft) {
    compact_model::build(path, 300);
    const std::string before = fingerprint(path);
    steppe::store::open(path, {.create = false}).backup(path + ".compact");
    const std::string id =
        steppe::storage::storage::open(path, {.create = false, .read_only = true})->describe().store_id;
    const std::string leftover = path + ".compact-" + id;
    std::filesystem::copy_file(path, leftover);  // as a compaction killed before its rename leaves it
    steppe::compact(path);
    EXPECT_EQ(steppe::test::compaction_leftovers(path), std::vector<std::string>{path + ".compact"});
    EXPECT_EQ(fingerprint(path + ".compact"), before) << "the backup is whole";
    EXPECT_EQ(fingerprint(path), before);
}

// A store with a second name (a hard link): compaction put the new file
// under one name and the other kept the old store, so two stores went on
// under one history (a tester's finding). Refused, nothing changed.
TEST_F(CompactTest, AStoreWithAHardLinkIsRefusedAndUnchanged) {
    compact_model::build(path, 300);
    const std::string before = fingerprint(path);
    std::filesystem::create_hard_link(path, dir.path("other-name.db"));
    const auto bytes = files_bytes();
    EXPECT_ERROR(steppe::errc::unsupported, "names (hard links)", steppe::compact(path));
    EXPECT_EQ(files_bytes(), bytes);
    EXPECT_EQ(std::filesystem::hard_link_count(path), 2u);
    EXPECT_EQ(fingerprint(path), before);
    std::filesystem::remove(dir.path("other-name.db"));
    steppe::compact(path);
    EXPECT_EQ(fingerprint(path), before);
}

// The new pages go out a batch at a time as the copy completes them, pages
// of different size classes and large objects interleaved: a store whose
// compacted pages span several batches keeps everything, with and without
// collect.
TEST_F(CompactTest, AStoreOfManyWriteBatchesKeepsEverything) {
    compact_model::build(path, 80000);
    const std::string before = fingerprint(path);
    steppe::compact_report r = steppe::compact(path);
    EXPECT_GT(r.pages_after, 3 * 1024u) << "the test needs a new store of several 4 MiB batches";
    EXPECT_EQ(fingerprint(path), before);
    EXPECT_EQ(check(), std::vector<std::string>{});
    steppe::compact(path, {.collect = true});
    EXPECT_EQ(fingerprint(path), before);
    EXPECT_EQ(check(), std::vector<std::string>{});
}

TEST_F(CompactTest, TheStoreKeepsWorkingAfterwards) {
    compact_model::build(path, 1000);
    steppe::compact(path);
    {
        auto s = steppe::store::open(path, {.create = false});
        auto* c = s.find_root<compact_model::Catalogue>("catalogue");
        ASSERT_NE(c, nullptr);
        for (long i = 5000; i < 5200; ++i) {
            c->newest = compact_model::make_item(s, i * 5, c->newest);
            c->items.push_back(c->newest);
            c->index[steppe::string(compact_model::item_name(i * 5))] = i * 5;
        }
        s.commit();
    }
    const std::string grown = fingerprint(path);
    EXPECT_NE(grown.find(compact_model::item_name(25995)), std::string::npos);
    EXPECT_EQ(check(), std::vector<std::string>{});
    steppe::compact(path);  // and again: a compacted store compacts to the same
    EXPECT_EQ(fingerprint(path), grown);
    EXPECT_EQ(check(), std::vector<std::string>{});
}

TEST_F(CompactTest, CollectFreesExactlyWhatNoRootReachesByType) {
    compact_model::build(path, 1000, 300);
    const std::string before = fingerprint(path);
    steppe::compact_report r = steppe::compact(path, {.collect = true});
    const auto* junk = find(r.freed, "Junk");
    ASSERT_NE(junk, nullptr);
    EXPECT_EQ(junk->objects, 300u);
    const std::uint32_t chunk = steppe::heap::class_size(steppe::heap::size_class_for(sizeof(compact_model::Junk)));
    EXPECT_EQ(junk->bytes, 300u * chunk);
    EXPECT_EQ(find(r.kept, "Junk"), nullptr);
    ASSERT_EQ(r.freed.size(), 2u) << "nothing else was unreachable";
    EXPECT_EQ(r.freed[1].type, "compact_model::Junk*") << "the removed root's own cell";
    EXPECT_EQ(r.freed[1].objects, 1u);
    const auto* items = find(r.kept, "compact_model::Item");
    ASSERT_NE(items, nullptr);
    EXPECT_EQ(items->objects, 200u - 20u) << "each fifth of 1000 survives; 20 of those are Heavy";
    EXPECT_EQ(find(r.kept, "Heavy")->objects, 20u);
    EXPECT_EQ(fingerprint(path), before);
    EXPECT_EQ(check(), std::vector<std::string>{});
}

TEST_F(CompactTest, WithoutCollectTheUnreachableIsKept) {
    compact_model::build(path, 100, 50);
    steppe::compact_report r = steppe::compact(path);
    ASSERT_NE(find(r.kept, "Junk"), nullptr);
    EXPECT_EQ(find(r.kept, "Junk")->objects, 50u);
    EXPECT_TRUE(r.freed.empty());
}

// Built by this program, compacted by the CLI (stand-ins for the classes it
// lacks), opened here again: the virtual calls reach this program's classes.
TEST_F(CompactTest, TheCliCompactsAndVirtualCallsWorkAfterwards) {
    compact_model::build(path, 1000, 10);
    const std::string before = fingerprint(path);
    auto r = steppe::test::run_cli("compact --collect " + path);
    EXPECT_EQ(r.exit_code, 0) << r.out;
    EXPECT_NE(r.out.find("freed          10 objects"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find(": compacted and collected: "), std::string::npos) << r.out;
    EXPECT_EQ(fingerprint(path), before);  // weight() is virtual: Heavy's doubles
    EXPECT_NE(before.find(":w11,"), std::string::npos) << "item 5 is a Heavy: 2 * 5 + 1";
    EXPECT_EQ(steppe::test::run_cli("check " + path).exit_code, 0);
}

TEST_F(CompactTest, RefusesAStoreAProgramHolds) {
    compact_model::build(path, 100);
    const std::string opened = dir.path("opened");
    pid_t holder = ::fork();
    ASSERT_GE(holder, 0);
    if (holder == 0) {  // holds the store until killed
        auto s = steppe::store::open(path);
        std::ofstream(opened) << "open";
        for (;;) ::pause();
    }
    while (!std::filesystem::exists(opened)) ::usleep(1000);
    EXPECT_ERROR(steppe::errc::locked, std::to_string(holder), steppe::compact(path));
    auto r = steppe::test::run_cli("compact " + path);
    EXPECT_EQ(r.exit_code, 2) << r.out;
    EXPECT_NE(r.out.find("(locked)"), std::string::npos) << r.out;
    ::kill(holder, SIGKILL);
    ::waitpid(holder, nullptr, 0);
    EXPECT_EQ(check(), std::vector<std::string>{});
}

TEST_F(CompactTest, RefusesAStoreAReaderHolds) {
    compact_model::build(path, 100);
    auto reader = steppe::store::open(path, {.read_only = true});
    EXPECT_ERROR(steppe::errc::locked, "", steppe::compact(path));
}

// The object engine's own pass (tests/objects/objects_compact_test.cpp has
// its tests); here: the library and the CLI route such a store to it.
TEST_F(CompactTest, ObjectEngineStoresAreCompactedByTheirEngine) {
    {
        auto s = steppe::objects::store::open(path);
        s.commit();
    }
    steppe::compact(path);
    auto r = steppe::test::run_cli("compact " + path);
    EXPECT_EQ(r.exit_code, 0) << r.out;
    EXPECT_NE(r.out.find("compacted"), std::string::npos) << r.out;
    auto s = steppe::objects::store::open(path);
    EXPECT_EQ(s.check(), std::vector<std::string>{});
}

struct ByAddress {
    steppe::map<compact_model::Junk*, long> order;
    STEPPE_FIELDS(order)
};

// Its order is by persistent address, which compaction changes.
TEST_F(CompactTest, RefusesAStoreOrderedByPersistentAddress) {
    {
        auto s = steppe::store::open(path);
        auto* by = s.root<ByAddress>("by");
        by->order[s.make<compact_model::Junk>()] = 1;
        s.commit();
    }
    EXPECT_ERROR(steppe::errc::unsupported, "persistent_less", steppe::compact(path));
    EXPECT_EQ(check(), std::vector<std::string>{});
    EXPECT_EQ(steppe::test::compaction_leftovers(path), std::vector<std::string>{});
}

TEST_F(CompactTest, AMissingStoreIsNotFound) {
    EXPECT_ERROR(steppe::errc::not_found, "s.db", steppe::compact(path));
    EXPECT_FALSE(std::filesystem::exists(path));
}

}  // namespace
