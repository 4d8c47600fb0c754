// Golden output of `steppe info` and `steppe check`, with paths and ids masked.
#include <gtest/gtest.h>

#include <fstream>

#include "storage/storage.hpp"
#include "support/cli.hpp"
#include "support/store_model.hpp"
#include "support/temp_dir.hpp"

using namespace steppe;
using steppe::test::mask;
using steppe::test::run_cli;

namespace {

class CliTest : public ::testing::Test {
protected:
    test::temp_dir dir;
    std::string path = dir.path("s.db");
    std::string store_id;

    void make_store(bool checkpoint) {
        auto s = storage::storage::open(path);
        test::workload::run(*s, 1, 5);
        if (checkpoint) s->checkpoint();
        store_id = s->describe().store_id;
    }
    std::string masked(const std::string& out) { return mask(mask(out, path, "STORE"), store_id, "ID"); }
};

TEST_F(CliTest, InfoShowsFormatSizesAndLogState) {
    make_store(false);
    auto r = run_cli("info " + path);
    EXPECT_EQ(r.exit_code, 0);
    EXPECT_EQ(masked(r.out),
              "store        STORE\n"
              "format       version 1, page size 4096\n"
              "store id     ID\n"
              "pages        49 (0.2 MiB)\n"
              "main file    8192 bytes\n"
              "log          STORE-wal: 67616 bytes, generation 1, 63520 bytes in use\n"
              "log state    5 commits (15 distinct pages) not yet checkpointed\n"
              "last commit  5\n");
}

TEST_F(CliTest, CheckOfAHealthyStoreExitsZero) {
    make_store(true);
    auto r = run_cli("check " + path);
    EXPECT_EQ(r.exit_code, 0) << r.out;
    EXPECT_EQ(masked(r.out), "STORE: 0 findings in 49 pages and the log\n");
}

TEST_F(CliTest, CheckNamesEveryDamagedPage) {
    make_store(true);
    for (std::uint64_t page : {8u, 15u}) {
        std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
        f.seekp(static_cast<std::streamoff>(storage::physical_page(page) * storage::page_size + 9));
        f.put('!');
    }
    auto r = run_cli("check " + path);
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_EQ(masked(r.out),
              "corrupt: STORE: page 8 (file offset 49152) fails its checksum\n"
              "corrupt: STORE: page 15 (file offset 77824) fails its checksum\n"
              "STORE: 2 findings in 49 pages and the log\n");
}

TEST_F(CliTest, CheckOfAnUnopenableStoreIsAFinding) {
    make_store(true);
    std::ofstream(path, std::ios::in | std::ios::out | std::ios::binary).write("garbage!", 8);
    std::ofstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(4096);
    f.write("garbage!", 8);
    f.close();
    auto r = run_cli("check " + path);
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.out.find("not a steppe store"), std::string::npos) << r.out;
}

TEST_F(CliTest, MissingStoreAndBadUsageExitTwo) {
    EXPECT_EQ(run_cli("info " + dir.path("none.db")).exit_code, 2);
    EXPECT_EQ(run_cli("frobnicate").exit_code, 2);
}

}  // namespace
