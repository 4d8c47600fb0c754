// Golden output of the steppe tool, with paths and ids masked.
#include <gtest/gtest.h>
#include <steppe/steppe.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "storage/storage.hpp"
#include "support/cli.hpp"
#include "support/damage.hpp"
#include "support/temp_dir.hpp"

namespace cli {
struct Node {
    long value;
    Node* next;
};
}  // namespace cli

using steppe::test::mask;
using steppe::test::run_cli;

namespace {

class CliTest : public ::testing::Test {
protected:
    steppe::test::temp_dir dir;
    std::string path = dir.path("s.db");

    // 1,000 nodes in one commit, checkpointed into the main file at close.
    void make_store() { make_store({}); }
    // The same with the commit left in the log.
    void make_store_keeping_log() { make_store(keep_log()); }
    static steppe::open_options keep_log() { return {.checkpoint_on_close = false}; }
    void make_store(const steppe::open_options& o) {
        auto s = steppe::store::open(path, o);
        auto* head = s.root<cli::Node*>("list");
        for (long i = 0; i < 1000; ++i) *head = s.make<cli::Node>(cli::Node{i, *head});
        *s.root<long>("count") = 1000;
        s.commit();
    }
    std::string masked(const std::string& out) {
        auto st = steppe::storage::storage::open(path, {.read_only = true});
        return mask(mask(out, path, "STORE"), st->describe().store_id, "ID");
    }
};

TEST_F(CliTest, InfoShowsFormatSizesAndLogState) {
    make_store_keeping_log();
    auto r = run_cli("info " + path);
    EXPECT_EQ(r.exit_code, 0);
    EXPECT_EQ(masked(r.out),
              "store        STORE\n"
              "engine       pages\n"
              "format       version 2, page size 4096\n"
              "store id     ID\n"
              "pages        10 (0.0 MiB)\n"
              "main file    12288 bytes\n"
              "log          STORE-wal: 1048576 bytes, generation 1, 17880 bytes in use\n"
              "log state    1 commits (9 distinct pages) not yet checkpointed\n"
              "last commit  1\n"
              "commit mark  commit 1 known durable\n");
}

TEST_F(CliTest, InfoAfterACleanCloseShowsAnEmptyLog) {
    make_store();
    auto r = run_cli("info " + path);
    EXPECT_EQ(r.exit_code, 0);
    EXPECT_EQ(masked(r.out),
              "store        STORE\n"
              "engine       pages\n"
              "format       version 2, page size 4096\n"
              "store id     ID\n"
              "pages        10 (0.0 MiB)\n"
              "main file    61440 bytes\n"
              "log          STORE-wal: 1048576 bytes, generation 2, 0 bytes in use\n"
              "log state    0 commits (0 distinct pages) not yet checkpointed\n"
              "last commit  1\n"
              "commit mark  commit 1 known durable\n");
}

// One root a line, each told from the others and from its type: a name
// that is not printable ASCII with single spaces is printed quoted, with C
// escapes.
TEST_F(CliTest, RootNamesThatAreNotPlainAsciiArePrintedQuotedWithEscapes) {
    {
        auto s = steppe::store::open(path);
        *s.root<long>("two\nlines") = 1;
        *s.root<long>(" padded ") = 2;
        *s.root<long>(std::string_view("nul\0byte", 8)) = 3;
        *s.root<long>("plain name") = 4;
        *s.root<long>("a                        unsigned") = 5;  // would read as root "a" of "unsigned long"
        *s.root<unsigned long>("a") = 6;
        *s.root<long>("del\x7f") = 7;
        *s.root<long>("gr\xc3\xb6\xc3\x9f\xe2\x80\xa8" "e") = 8;  // UTF-8, with a line separator
        *s.root<long>("tab\there \"q\" back\\slash") = 9;
        s.commit();
    }
    auto r = run_cli("roots " + path);
    EXPECT_EQ(r.exit_code, 0);
    EXPECT_EQ(r.out,
              "\" padded \"               long\n"
              "a                        unsigned long\n"
              "\"a                        unsigned\" long\n"
              "\"del\\x7f\"                long\n"
              "\"gr\\xc3\\xb6\\xc3\\x9f\\xe2\\x80\\xa8e\" long\n"
              "\"nul\\x00byte\"            long\n"
              "plain name               long\n"
              "\"tab\\there \\\"q\\\" back\\\\slash\" long\n"
              "\"two\\nlines\"             long\n");
}

TEST_F(CliTest, RootsAndStats) {
    make_store();
    auto r = run_cli("roots " + path);
    EXPECT_EQ(r.exit_code, 0);
    EXPECT_EQ(r.out,
              "count                    long\n"
              "list                     cli::Node*\n");
    r = run_cli("stats " + path);
    EXPECT_EQ(r.exit_code, 0);
    EXPECT_EQ(r.out,
              "pages        10 (0 free)\n"
              "type                                         size      objects      pages\n"
              "cli::Node*                                      8            1          1\n"
              "cli::Node                                      16         1000          4\n"
              "long                                            8            1          1\n"
              "(faults, resident, written, evicted, spilled and prefetched pages are counted per process: run a\n"
              " program with STEPPE_STATS=1 to have them printed when it closes the store, or call store::stats())\n");
}

TEST_F(CliTest, CheckOfAHealthyStoreExitsZero) {
    make_store();
    auto r = run_cli("check " + path);
    EXPECT_EQ(r.exit_code, 0) << r.out;
    EXPECT_EQ(masked(r.out), "STORE: 0 findings in 10 pages and the log\n");
}

TEST_F(CliTest, CheckNamesEveryDamagedPage) {
    make_store();
    auto victims = steppe::test::node_pages(path, 1000);
    ASSERT_GE(victims.size(), 3u);  // the page holding the list's tail (next == null) is not recognised
    steppe::test::damage_pages(path, {victims[0], victims[2]});
    auto r = run_cli("check " + path);
    EXPECT_EQ(r.exit_code, 1);
    auto line = [&](std::uint64_t p) {
        return "STORE: page " + std::to_string(p) + " (file offset " +
               std::to_string(steppe::storage::physical_page(p) * 4096) + ") fails its checksum\n";
    };
    EXPECT_EQ(masked(r.out), line(victims[0]) + line(victims[2]) + "STORE: 2 findings in 10 pages and the log\n");
}

TEST_F(CliTest, CheckOfAnUnopenableStoreIsAFinding) {
    make_store();
    steppe::test::node_pages(path, 1000);  // checkpoint: the header slots are both written
    for (std::uint64_t offset : {0u, 4096u}) {
        std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
        f.seekp(offset);
        f.write("garbage!", 8);
    }
    auto r = run_cli("check " + path);
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.out.find("neither header slot (pages 0 and 1) holds a header, but page 2 holds this store's commit "
                         "mark: the header is damaged"),
              std::string::npos)
        << r.out;
}

// Commits 2 and 3 in the log (the writable open checkpointed commit 1); a
// byte of commit 2's frames damaged. Open refuses; check names it; recover
// keeps commit 1.
TEST_F(CliTest, DamagedLogIsNamedByCheckAndSalvagedByRecover) {
    make_store();
    {
        auto s = steppe::store::open(path, keep_log());
        *s.root<long>("count") = 2000;
        s.commit();
        *s.root<long>("count") = 3000;
        s.commit();
    }
    std::uint64_t second_commit_start = 4096;
    steppe::test::flip_byte(path + "-wal", second_commit_start + 20);  // its first frame's header
    try {
        steppe::store::open(path);
        FAIL() << "a damaged log before later commits opened";
    } catch (const steppe::error& e) {
        EXPECT_EQ(e.code(), steppe::errc::corrupt);
        EXPECT_NE(std::string(e.what()).find("Commits 2 to 3 were durable"), std::string::npos) << e.what();
    }
    auto r = run_cli("check " + path);
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.out.find("corrupt: " + path + "-wal: the log is damaged at byte " + std::to_string(second_commit_start)),
              std::string::npos)
        << r.out;
    r = run_cli("recover " + path);
    EXPECT_EQ(r.exit_code, 0) << r.out;
    EXPECT_NE(r.out.find("Salvaged: the store now holds commit 1"), std::string::npos) << r.out;
    EXPECT_TRUE(std::filesystem::exists(path + "-wal.damaged"));
    r = run_cli("check " + path);
    EXPECT_EQ(r.exit_code, 0) << r.out;
    auto s = steppe::store::open(path);
    EXPECT_EQ(*s.root<long>("count"), 1000);
    r = run_cli("recover " + dir.path("none.db"));
    EXPECT_EQ(r.exit_code, 2);
}

TEST_F(CliTest, SalvageOptionOpensAtTheLastIntactCommit) {
    make_store();
    {
        auto s = steppe::store::open(path, keep_log());
        *s.root<long>("count") = 2000;
        s.commit();
    }
    steppe::test::flip_byte(path + "-wal", 4096 + 100);  // commit 2's first frame
    steppe::open_options o;
    o.salvage_damaged_log = true;
    auto s = steppe::store::open(path, o);
    EXPECT_NE(s.salvage_report().find("Commits 2 to 2"), std::string::npos) << s.salvage_report();
    EXPECT_EQ(*s.find_root<long>("count"), 1000);
    EXPECT_TRUE(s.check().empty());
}

TEST_F(CliTest, CheckpointCopiesTheLogIntoTheMainFile) {
    make_store_keeping_log();
    auto r = run_cli("checkpoint " + path);
    EXPECT_EQ(r.exit_code, 0) << r.out;
    EXPECT_EQ(masked(r.out), "STORE: checkpointed: the main file alone holds the store (10 pages)\n");
    r = run_cli("info " + path);
    EXPECT_NE(r.out.find("log state    0 commits (0 distinct pages) not yet checkpointed\n"), std::string::npos)
        << r.out;
    EXPECT_NE(r.out.find("last commit  1\n"), std::string::npos) << r.out;
    r = run_cli("check " + path);
    EXPECT_EQ(r.exit_code, 0) << r.out;
    EXPECT_EQ(run_cli("checkpoint " + path).exit_code, 0) << "an empty log: nothing to do, and no error";
}

TEST_F(CliTest, CheckpointOfAStoreOpenElsewhereExitsTwo) {
    make_store_keeping_log();
    int opened[2], release[2];
    ASSERT_EQ(::pipe(opened), 0);
    ASSERT_EQ(::pipe(release), 0);
    pid_t holder = ::fork();
    ASSERT_GE(holder, 0);
    if (holder == 0) {
        ::close(opened[0]);
        ::close(release[1]);
        {
            auto s = steppe::store::open(path);
            char c = 1;
            if (::write(opened[1], &c, 1) != 1 || ::read(release[0], &c, 1) < 0) ::_exit(1);
        }
        ::_exit(0);
    }
    ::close(opened[1]);
    ::close(release[0]);
    char c;
    ASSERT_EQ(::read(opened[0], &c, 1), 1) << "the holder could not open the store";
    auto r = run_cli("checkpoint " + path);
    ::close(release[1]);
    int status = 0;
    ::waitpid(holder, &status, 0);
    EXPECT_EQ(status, 0);
    EXPECT_EQ(r.exit_code, 2) << r.out;
    EXPECT_NE(r.out.find("(locked)"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find(std::to_string(holder)), std::string::npos) << "names the holder: " << r.out;
    EXPECT_NE(r.out.find("a program has the store open"), std::string::npos) << r.out;
    EXPECT_EQ(run_cli("check " + path).exit_code, 0);
}

TEST_F(CliTest, CompactCollectSaysWhatItKeptAndFreedByType) {
    make_store();
    {
        auto s = steppe::store::open(path);
        s.remove_root("count");
        s.commit();
    }
    auto r = run_cli("compact --collect " + path);
    EXPECT_EQ(r.exit_code, 0) << r.out;
    EXPECT_NE(r.out.find("kept         1000 objects        16000 bytes  cli::Node\n"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("freed           1 objects           16 bytes  long\n"), std::string::npos) << r.out;
    EXPECT_NE(mask(r.out, path, "STORE").find("STORE: compacted and collected: "), std::string::npos) << r.out;
    EXPECT_EQ(run_cli("check " + path).exit_code, 0);
    EXPECT_EQ(run_cli("compact --collect").exit_code, 2) << "no store: usage";
    EXPECT_EQ(run_cli("compact --all " + path).exit_code, 2) << "an unknown option: usage";
}

TEST_F(CliTest, CheckpointOfAMissingStoreExitsTwoAndCreatesNoStore) {
    auto r = run_cli("checkpoint " + path);
    EXPECT_EQ(r.exit_code, 2) << r.out;
    EXPECT_NE(r.out.find("does not exist"), std::string::npos) << r.out;
    EXPECT_FALSE(std::filesystem::exists(path));
    EXPECT_FALSE(std::filesystem::exists(path + "-wal"));
}

TEST_F(CliTest, MissingStoreAndBadUsageExitTwo) {
    EXPECT_EQ(run_cli("info " + dir.path("none.db")).exit_code, 2);
    EXPECT_EQ(run_cli("frobnicate").exit_code, 2);
}

}  // namespace
