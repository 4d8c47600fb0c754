// Backup (storage/backup.hpp, store::backup, `steppe backup`): a copy of the
// last commit as one self-contained main file, taken while a writer in
// another process goes on committing; never a partial copy under the
// destination's name.
#include <gtest/gtest.h>
#include <signal.h>
#include <steppe/objects.hpp>
#include <steppe/steppe.hpp>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "storage/backup.hpp"
#include "storage/storage.hpp"
#include "support/cli.hpp"
#include "support/expect_error.hpp"
#include "support/filled_commits.hpp"
#include "support/temp_dir.hpp"

using namespace steppe;

namespace {

constexpr std::uint64_t kPages = 300;

void commit_all(storage::storage& s, std::uint8_t txn) { test::commit_filled(s, txn, kPages); }

// "" if every page holds the meta's commit byte, else what differs.
std::string torn(const std::string& path) {
    storage::options o;
    o.read_only = true;
    o.create = false;
    auto s = storage::storage::open(path, o);
    std::byte txn = s->meta()[0];
    if (s->page_count() != kPages) return "holds " + std::to_string(s->page_count()) + " pages";
    std::vector<std::byte> page(storage::page_size);
    for (std::uint64_t p = 0; p < kPages; ++p) {
        s->read_page(p, page.data());
        for (std::byte b : page)
            if (b != txn)
                return "page " + std::to_string(p) + " holds commit " + std::to_string(int(b)) + ", the meta " +
                       std::to_string(int(txn));
    }
    return "";
}

struct Node {
    long value;
    Node* next;
};

class Backup : public ::testing::Test {
protected:
    test::temp_dir dir;
    std::string src = dir.path("src.db"), dest = dir.path("copy.db");
};

TEST_F(Backup, WhileAnotherProcessCommitsEveryCopyIsOneWholeCommit) {
    { commit_all(*storage::storage::open(src), 1); }
    int ready[2];
    ASSERT_EQ(::pipe(ready), 0);
    pid_t writer = ::fork();
    if (writer == 0) {
        auto s = storage::storage::open(src);
        for (std::uint8_t txn = 2;; txn = static_cast<std::uint8_t>(txn == 250 ? 2 : txn + 1)) {
            commit_all(*s, txn);
            if (txn == 3) (void)!::write(ready[1], "r", 1);
        }
    }
    char c;
    ASSERT_EQ(::read(ready[0], &c, 1), 1);
    for (int i = 0; i < 5; ++i) {
        std::string copy = dir.path("copy" + std::to_string(i) + ".db");
        storage::backup_result r = storage::backup(src, copy);
        EXPECT_EQ(r.pages, kPages);
        EXPECT_EQ(torn(copy), "") << "backup " << i << " of commit " << r.txn;
        EXPECT_FALSE(std::filesystem::exists(copy + "-wal")) << "the copy is one main file";
    }
    ::kill(writer, SIGKILL);
    ::waitpid(writer, nullptr, 0);
}

TEST_F(Backup, AStoreBacksItselfUpAtItsLastCommit) {
    {
        auto s = store::open(src);
        Node* head = nullptr;
        for (long i = 0; i < 2000; ++i) head = s.make<Node>(Node{i, head});
        s.set_root("list", head);
        s.commit();
        head->value = -1;  // not committed: not in the backup
        s.backup(dest);
        EXPECT_EQ(test::error_of([&] { s.backup(dest); }).code(), errc::exists);
        s.rollback();
    }
    EXPECT_FALSE(std::filesystem::exists(dest + "-wal"));
    auto s = store::open(dest);
    long expect = 1999, n = 0;
    for (Node* p = s.find_root<Node>("list"); p; p = p->next, --expect, ++n) ASSERT_EQ(p->value, expect);
    EXPECT_EQ(n, 2000);
    EXPECT_TRUE(s.check().empty());
}

struct Item {
    std::int64_t value;
    objects::ref<Item> next;
};

TEST_F(Backup, AnObjectStoreBacksUpToo) {
    {
        objects::options o;
        o.durable = false;
        auto s = objects::store::open(src, o);
        auto first = s.root<Item>("first");
        first.mut()->value = 7;
        first.mut()->next = s.make<Item>(Item{8, {}});
        s.commit();
        s.backup(dest);
    }
    auto s = objects::store::open(dest);
    auto first = s.find_root<Item>("first");
    EXPECT_EQ(first->value, 7);
    EXPECT_EQ(first->next->value, 8);
    EXPECT_TRUE(s.check().empty());
}

TEST_F(Backup, TheCommandLineCopiesAStoreAProgramHolds) {
    auto s = store::open(src);
    Node* n = s.make<Node>(Node{42, nullptr});
    s.set_root("n", n);
    s.commit();
    test::cli_result r = test::run_cli("backup " + src + " " + dest);
    ASSERT_EQ(r.exit_code, 0) << r.out;
    EXPECT_CONTAINS(r.out, "checked");
    test::cli_result again = test::run_cli("backup " + src + " " + dest);
    EXPECT_EQ(again.exit_code, 2);
    EXPECT_CONTAINS(again.out, "exists already");
    EXPECT_EQ(test::run_cli("check " + dest).exit_code, 0);
}

// A backup killed at any point leaves nothing under the destination's name
// (the copy is renamed into place only once whole and durable).
TEST_F(Backup, KilledMidwayLeavesNoPartialCopy) {
    {
        auto s = storage::storage::open(src);
        for (std::uint8_t t = 1; t < 6; ++t) commit_all(*s, t);
    }
    for (int delay_us : {0, 2000, 5000, 20000, 50000}) {
        std::string copy = dir.path("k" + std::to_string(delay_us) + ".db");
        pid_t p = ::fork();
        if (p == 0) {
            storage::backup(src, copy);
            ::_exit(0);
        }
        ::usleep(static_cast<useconds_t>(delay_us));
        ::kill(p, SIGKILL);
        int status = 0;
        ::waitpid(p, &status, 0);
        if (std::filesystem::exists(copy)) {
            EXPECT_EQ(torn(copy), "") << "after " << delay_us << " µs";
        }
    }
}

}  // namespace
