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

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "storage/backup.hpp"
#include "storage/bulk_writer.hpp"
#include "storage/storage.hpp"
#include "support/cli.hpp"
#include "support/expect_error.hpp"
#include "support/fault_env.hpp"
#include "support/filled_commits.hpp"
#include "support/power_loss.hpp"
#include "support/temp_dir.hpp"

using namespace steppe;

namespace {

constexpr std::uint64_t kPages = 300;

void commit_all(storage::storage& s, std::uint8_t txn) { test::commit_filled(s, txn, kPages); }

// "" if every page holds the meta's commit byte, else what differs.
std::string torn(const std::string& path, std::uint64_t pages = kPages) {
    storage::options o;
    o.read_only = true;
    o.create = false;
    auto s = storage::storage::open(path, o);
    std::byte txn = s->meta()[0];
    if (s->page_count() != pages) return "holds " + std::to_string(s->page_count()) + " pages";
    std::vector<std::byte> page(storage::page_size);
    for (std::uint64_t p = 0; p < pages; ++p) {
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

// A dangling symlink is a name in the way like any file: at DEST the backup
// replaced it, and beside a DEST-wal it wrote a copy whose first writable
// open failed "File exists" (a tester's finding). Both are `exists` now,
// before anything is written, and the symlink is left as it was.
TEST_F(Backup, ADanglingSymlinkAtTheDestinationOrItsLogIsInTheWay) {
    {
        auto s = store::open(src);
        s.set_root("n", s.make<Node>(Node{42, nullptr}));
        s.commit();
    }
    for (const std::string& link : {dest, dest + "-wal"}) {
        SCOPED_TRACE(link);
        std::filesystem::create_symlink(dir.path("nowhere"), link);
        EXPECT_ERROR(errc::exists, link, storage::backup(src, dest));
        EXPECT_TRUE(std::filesystem::is_symlink(link));
        EXPECT_FALSE(std::filesystem::exists(dir.path("nowhere")));
        std::filesystem::remove(link);
    }
    EXPECT_ERROR(errc::invalid_argument, "no file named", storage::backup(src, ""));
    storage::backup(src, dest);
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

// A store over three checksum groups, so that its copy is written in
// several runs: two commits of every page.
constexpr std::uint64_t kGroupPages = 2500;
void fill_groups(const std::string& path) {
    auto s = storage::storage::open(path);
    for (std::uint8_t t = 1; t < 3; ++t) test::commit_filled(*s, t, kGroupPages);
}

// The files in `dir` whose names start with `prefix`.
std::vector<std::string> files_named(const std::string& dir, const std::string& prefix) {
    std::vector<std::string> names;
    for (const auto& e : std::filesystem::directory_iterator(dir)) {
        std::string name = e.path().filename().string();
        if (name.rfind(prefix, 0) == 0) names.push_back(name);
    }
    return names;
}

// A fault at every I/O call of a backup in turn (the source's open, the
// bulk write of the copy: create, page runs, checksum slots, header, sync;
// the rename, the directory sync, the copy's open and check): a failure
// before the rename leaves nothing under the destination's name and no
// temporary file, one after it (the directory sync, the check) a whole
// copy; the source stays as it was; the run that gets through leaves a
// whole copy.
TEST_F(Backup, AFailureAtEveryIoCallLeavesNoCopyAndTheSourceIntact) {
    fill_groups(src);
    long n = 1, renamed_at = 0;
    for (;; ++n) {
        test::fault_env io;
        io.fail_after(n, n % 2 ? ENOSPC : EIO);
        bool through = false;
        try {
            storage::backup(src, dest, &io);
            through = true;
        } catch (const error&) {
        }
        const std::string when = (through ? "through with a failure at call " : "failure at call ") + std::to_string(n);
        ASSERT_EQ(torn(src, kGroupPages), "") << when;
        const std::vector<std::string> made = files_named(dir.dir().string(), "copy.db");
        if (!std::filesystem::exists(dest)) {
            ASSERT_FALSE(through) << when;
            ASSERT_EQ(renamed_at, 0) << when << ": a failure after the rename left no copy";
            EXPECT_EQ(made, std::vector<std::string>{}) << when;
            continue;
        }
        if (!through && renamed_at == 0) renamed_at = n;
        EXPECT_EQ(made, std::vector<std::string>{"copy.db"}) << when;
        EXPECT_EQ(torn(dest, kGroupPages), "") << when;
        EXPECT_EQ(storage::storage::open(dest, {.create = false, .read_only = true})->check(),
                  std::vector<std::string>{})
            << when;
        std::filesystem::remove(dest);
        // A failure the backup may shrug off lets it through: go on until
        // the run reached no failure.
        if (through && io.calls() <= n) break;
    }
    EXPECT_GT(renamed_at, 3) << "the bulk write's calls came before the rename";
    std::printf("a failure at each of the %ld I/O calls of a backup (the copy renamed at call %ld)\n", n - 1,
                renamed_at);
}

// A power loss at every I/O call of a backup (in a child process): the
// destination is absent or a whole copy, the source as it was.
TEST_F(Backup, APowerLossAtEveryIoCallLeavesNoCopyOrAWholeOne) {
    fill_groups(src);
    long calls = test::power_loss_at_each_call(
        [&] {
            for (const std::string& name : files_named(dir.dir().string(), "copy.db")) std::filesystem::remove(dir.path(name));
        },
        [&](test::fault_env& io) { storage::backup(src, dest, &io); },
        [&](const std::string& what, bool through) {
            ASSERT_EQ(torn(src, kGroupPages), "") << what;
            if (through) {
                ASSERT_TRUE(std::filesystem::exists(dest)) << what;
            }
            if (std::filesystem::exists(dest)) {
                EXPECT_EQ(torn(dest, kGroupPages), "") << what;
                auto copy = storage::storage::open(dest, {.create = false, .read_only = true});
                EXPECT_EQ(copy->check(), std::vector<std::string>{}) << what;
            }
        });
    EXPECT_GT(calls, 0);
}

// The bulk writer alone: pages given out of order, one given twice, holes
// inside a group and whole groups left out. The file opens without a log,
// checks clean, holds the last image of each page and zeros elsewhere, the
// meta and one commit; written to afterwards as any store, it reopens the same.
TEST(BulkWriter, AFileWrittenInOnePassIsAStoreThatTakesCommitsAfterwards) {
    test::temp_dir dir;
    const std::string path = dir.path("bulk.db");
    std::map<storage::page_no, std::uint8_t> expected;
    std::vector<std::vector<std::byte>> buffers;
    auto image = [&](storage::page_no p, std::uint8_t v) {
        buffers.emplace_back(storage::page_size, std::byte{v});
        std::memcpy(buffers.back().data(), &p, sizeof p);
        expected[p] = v;
        return storage::page_image{p, buffers.back().data()};
    };
    auto verify = [&](const std::string& when, std::uint64_t pages, const storage::meta_bytes& meta) {
        auto s = storage::storage::open(path, {.create = false, .read_only = true});
        EXPECT_EQ(s->check(), std::vector<std::string>{}) << when;
        ASSERT_EQ(s->page_count(), pages) << when;
        EXPECT_EQ(s->meta(), meta) << when;
        std::vector<std::byte> page(storage::page_size);
        for (storage::page_no p = 0; p < pages; ++p) {
            s->read_page(p, page.data());
            auto it = expected.find(p);
            std::byte fill = it == expected.end() ? std::byte{0} : std::byte{it->second};
            std::size_t from = it == expected.end() ? 0 : sizeof p;
            ASSERT_TRUE(std::all_of(page.begin() + static_cast<long>(from), page.end(), [&](std::byte b) { return b == fill; }))
                << when << ": page " << p;
            if (it != expected.end()) {
                storage::page_no named = 0;
                std::memcpy(&named, page.data(), sizeof named);
                ASSERT_EQ(named, p) << when;
            }
        }
    };
    storage::meta_bytes meta{};
    meta[0] = std::byte{42};
    meta[storage::meta_size - 1] = std::byte{7};
    {
        storage::bulk_writer w(path, storage::posix_env(), 0600);
        std::vector<storage::page_image> first;
        for (storage::page_no p : {3000, 0, 5, 6, 1019, 1020, 1021, 7, 2041})
            first.push_back(image(p, static_cast<std::uint8_t>(1 + p % 200)));
        w.write(first);
        std::vector<storage::page_image> again = {image(5, 99), image(1020, 98)};  // the later image counts
        w.write(again);
        w.finish(meta);
        EXPECT_EQ(w.page_count(), 3001u);
    }
    EXPECT_EQ(std::filesystem::file_size(path),
              (storage::physical_page(3000) + 1) * storage::page_size) << "the last page ends the file";
    EXPECT_FALSE(std::filesystem::exists(path + "-wal")) << "one main file";
    verify("bulk-written", 3001, meta);
    {
        auto s = storage::storage::open(path, {.create = false, .read_only = true});
        EXPECT_EQ(s->txn_seq(), 1u);
        EXPECT_EQ(s->describe().header_seq, 1u);
    }
    storage::meta_bytes later = meta;
    later[1] = std::byte{1};
    {
        auto s = storage::storage::open(path, {.create = false});
        std::vector<storage::page_image> more = {image(5, 11), image(4000, 12), image(1, 13)};
        s->commit(more, later);
        s->checkpoint();
        std::vector<storage::page_image> last = {image(1021, 14)};
        s->commit(last, later);
    }
    verify("written to afterwards", 4001, later);
    {
        auto s = storage::storage::open(path, {.create = false});
        EXPECT_EQ(s->txn_seq(), 3u);
    }
    verify("reopened", 4001, later);
}

}  // namespace
