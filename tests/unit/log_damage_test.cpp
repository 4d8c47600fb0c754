// Damage to the log, exhaustively on a small store: commits 1-3 checkpointed
// into the main file, commits 4-7 in the log. Every frame gets a flipped byte
// in its header, its payload and (commit frames) its meta, and a sector of
// random bytes over its start; the log is cut at every frame boundary and
// inside every frame; it is emptied, cut to its header and replaced by random
// bytes. After each, a reopen must give
//   - the last commit, exactly (the damage hit nothing in use), or
//   - errc::corrupt naming the log, the byte offset and the lost commits,
// and never an older commit silently (invariant 4 in storage.hpp). `steppe
// check` must name every corrupt case, and a salvaging open (`steppe
// recover`) must then give the newest commit before the damage, exactly,
// with the damaged log kept aside and a report of what was lost.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <functional>
#include <fstream>
#include <random>
#include <vector>

#include "storage/storage.hpp"
#include "storage/wal_format.hpp"
#include "common/crc32c.hpp"
#include "support/cli.hpp"
#include "support/fault_env.hpp"
#include "support/store_model.hpp"
#include "support/temp_dir.hpp"

using namespace steppe;
using namespace steppe::storage;
using steppe::test::workload;

namespace {

constexpr std::uint64_t checkpointed = 3, last = 7;

struct frame_at {
    std::uint64_t offset, size, txn;
    frame_kind kind;
};

struct damage {
    std::string what;
    std::uint64_t offset;  // the first byte it changes (or the cut)
    std::uint64_t txn;     // the commit whose frame it hits (last + 1: none)
    std::function<void(std::vector<char>&)> apply;
};

std::vector<char> read(const std::string& file) {
    std::ifstream f(file, std::ios::binary);
    return {std::istreambuf_iterator<char>(f), {}};
}
void write(const std::string& file, const std::vector<char>& bytes) {
    std::ofstream f(file, std::ios::binary | std::ios::trunc);
    f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

class LogDamage : public ::testing::Test {
protected:
    test::temp_dir dir;
    std::string pristine = dir.path("pristine.db"), path = dir.path("s.db");
    std::vector<char> main_bytes, wal_bytes;
    std::vector<frame_at> frames;

    void SetUp() override {
        {
            options o;
            o.durable = false;  // the logic, not the disk: power loss is power_loss_test's
            auto s = storage::storage::open(pristine, o);
            workload::run(*s, 1, checkpointed);
            s->checkpoint();
            workload::run(*s, checkpointed + 1, last);
        }
        main_bytes = read(pristine);
        wal_bytes = read(pristine + "-wal");
        for (std::uint64_t off = wal_frames_offset;;) {
            frame_header h;
            std::memcpy(&h, wal_bytes.data() + off, sizeof h);
            if (h.magic != frame_magic || h.txn > last) break;
            std::uint64_t size = sizeof h + payload_size(h);
            frames.push_back({off, size, h.txn, h.kind});
            off += size;
        }
        ASSERT_EQ(frames.back().txn, last);
        ASSERT_EQ(frames.back().kind, frame_kind::commit);
    }

    void lay_out(const std::vector<char>& wal) {
        for (auto& e : std::filesystem::directory_iterator(dir.dir()))
            if (e.path().filename().string().rfind("s.db", 0) == 0) std::filesystem::remove(e.path());
        write(path, main_bytes);
        write(path + "-wal", wal);
    }

    std::vector<damage> every_damage() const {
        std::vector<damage> all;
        std::mt19937_64 rng(42);
        auto flip_at = [](std::uint64_t at) { return [at](std::vector<char>& w) { w[at] ^= 0x21; }; };
        for (std::size_t i = 0; i < frames.size(); ++i) {
            const frame_at& f = frames[i];
            std::string name = "frame " + std::to_string(i) + " (commit " + std::to_string(f.txn) +
                               (f.kind == frame_kind::commit ? ", commit record)" : ", page frame)");
            for (std::uint64_t field : {0, 8, 16, 24, 32, 40, 44})
                all.push_back({name + ": header byte " + std::to_string(field), f.offset + field, f.txn,
                               flip_at(f.offset + field)});
            all.push_back({name + ": first payload byte", f.offset + 48, f.txn, flip_at(f.offset + 48)});
            all.push_back({name + ": last payload byte", f.offset + f.size - 1, f.txn, flip_at(f.offset + f.size - 1)});
            std::uint64_t seed = rng();
            all.push_back({name + ": a sector of random bytes over its start", f.offset, f.txn,
                           [at = f.offset, seed](std::vector<char>& w) {
                               std::mt19937_64 r(seed);
                               for (std::uint64_t j = at; j < at + 512 && j < w.size(); ++j) w[j] = static_cast<char>(r());
                           }});
            for (std::uint64_t cut : {f.offset, f.offset + 20, f.offset + 48 + 100, f.offset + f.size - 1})
                all.push_back({name + ": log cut at byte " + std::to_string(cut), cut, f.txn,
                               [cut](std::vector<char>& w) { w.resize(cut); }});
        }
        std::uint64_t first = frames.front().txn;
        all.push_back({"log emptied", 0, first, [](std::vector<char>& w) { w.clear(); }});
        all.push_back({"log cut to its header", wal_frames_offset, first,
                       [](std::vector<char>& w) { w.resize(wal_frames_offset); }});
        all.push_back({"log replaced by random bytes", 0, first, [](std::vector<char>& w) {
                           std::mt19937_64 r(7);
                           for (auto& c : w) c = static_cast<char>(r());
                       }});
        return all;
    }
};

// Opens read-only: the last commit exactly, or corrupt naming the damage.
// Returns the corrupt message ("" if it opened).
std::string reopen_judged(const std::string& path, const damage& d) {
    options ro;
    ro.read_only = true;
    try {
        auto s = storage::storage::open(path, ro);
        EXPECT_EQ(workload::committed_txn(*s), last) << d.what << ": an older commit was served silently";
        EXPECT_EQ(workload::verify(*s), "") << d.what;
        return "";
    } catch (const error& e) {
        std::string m = e.what();
        EXPECT_EQ(e.code(), errc::corrupt) << d.what << ": " << m;
        EXPECT_NE(m.find(path + "-wal"), std::string::npos) << d.what << ": " << m;
        EXPECT_NE(m.find("damaged at byte "), std::string::npos) << d.what << ": " << m;
        EXPECT_NE(m.find(" to " + std::to_string(last) + " were durable"), std::string::npos) << d.what << ": " << m;
        return m;
    }
}

TEST_F(LogDamage, EveryFrameAndEveryCutIsTheLastCommitOrNamedCorrupt) {
    int corrupt = 0, intact = 0;
    for (const damage& d : every_damage()) {
        SCOPED_TRACE(d.what);
        std::vector<char> wal = wal_bytes;
        d.apply(wal);
        lay_out(wal);
        std::string message = reopen_judged(path, d);
        if (message.empty()) {
            ++intact;
            continue;
        }
        ++corrupt;
        // The damage is named where it is: replay stops at or before it.
        std::uint64_t named = std::stoull(message.substr(message.find("damaged at byte ") + 16));
        EXPECT_LE(named, std::max(d.offset, wal_frames_offset)) << message;
        // steppe check names it too.
        auto r = test::run_cli("check " + path);
        EXPECT_EQ(r.exit_code, 1) << r.out;
        EXPECT_NE(r.out.find("damaged at byte "), std::string::npos) << r.out;

        // Salvage keeps every commit before the damaged one, exactly.
        options o;
        o.salvage = true;
        o.durable = false;
        {
            auto s = storage::storage::open(path, o);
            EXPECT_EQ(workload::committed_txn(*s), d.txn - 1);
            EXPECT_EQ(workload::verify(*s), "");
            const std::string& report = s->salvage_report();
            EXPECT_NE(report.find("Commits " + std::to_string(d.txn) + " to " + std::to_string(last)), std::string::npos)
                << report;
            EXPECT_NE(report.find(path + "-wal.damaged"), std::string::npos) << report;
        }
        EXPECT_EQ(read(path + "-wal.damaged"), wal) << "the damaged log is kept as it was";
        auto s = storage::storage::open(path, {.durable = false});
        EXPECT_TRUE(s->salvage_report().empty());
        EXPECT_EQ(workload::committed_txn(*s), d.txn - 1);
        EXPECT_TRUE(s->check().empty());
        workload::run(*s, d.txn, last);  // and the store goes on
        s.reset();
        s = storage::storage::open(path, {.read_only = true});
        EXPECT_EQ(workload::committed_txn(*s), last);
        EXPECT_EQ(workload::verify(*s), "");
    }
    EXPECT_GT(corrupt, 100);
    std::printf("%d damaged logs named corrupt and salvaged, %d damaged where nothing in use was hit\n", corrupt, intact);
}

// A crash (then a power loss: unsynced writes kept, lost, or torn) before any
// I/O call of a salvage leaves the damaged store as it was, still refused as
// corrupt, or the salvaged one: never a third state.
TEST_F(LogDamage, ACrashDuringSalvageLeavesTheDamagedOrTheSalvagedStore) {
    const frame_at& victim = frames[frames.size() / 2];
    std::vector<char> damaged = wal_bytes;
    damaged[victim.offset + 20] ^= 0x21;
    const test::loss modes[] = {test::loss::keep_all, test::loss::drop_all, test::loss::random_subset, test::loss::torn};
    long crash_points = 0;
    for (long crash_at = 0;; ++crash_at) {
        bool crashed = false;
        for (test::loss mode : modes) {
            SCOPED_TRACE("crash before I/O call " + std::to_string(crash_at) + ", loss " + std::to_string(int(mode)));
            lay_out(damaged);
            test::fault_env env;
            env.crash_after(crash_at);
            options o;
            o.salvage = true;
            o.io = &env;
            try {
                storage::storage::open(path, o);
            } catch (const test::simulated_crash&) {
                crashed = true;
                env.power_loss(mode, static_cast<std::uint64_t>(crash_at));
            }
            try {
                auto s = storage::storage::open(path, {.read_only = true});
                EXPECT_EQ(workload::committed_txn(*s), victim.txn - 1);
                EXPECT_EQ(workload::verify(*s), "");
            } catch (const error& e) {
                EXPECT_EQ(e.code(), errc::corrupt) << e.what();
                EXPECT_NE(std::string(e.what()).find("damaged at byte " + std::to_string(victim.offset)),
                          std::string::npos)
                    << e.what();
            }
            if (!crashed) break;
        }
        if (!crashed) break;
        ++crash_points;
    }
    EXPECT_GT(crash_points, 5);
    std::printf("salvage crashed at %ld I/O calls, 4 loss patterns each\n", crash_points);
}

// If a power loss took the commit mark's last write, the log alone must still
// show damage before a later commit; only the last commit's own frames may
// then pass for the torn tail of a commit in flight.
TEST_F(LogDamage, WithoutTheMarkLaterCommitsStillProveEarlierOnes) {
    // Roll the mark back to what the checkpoint wrote: commit 3, log empty.
    commit_mark m;
    std::memcpy(&m, main_bytes.data() + commit_mark_page * page_size, sizeof m);
    ASSERT_EQ(m.txn, last);
    m.txn = checkpointed;
    m.log_end = wal_frames_offset;
    m.crc = common::crc32c(0, &m, offsetof(commit_mark, crc));
    std::memcpy(main_bytes.data() + commit_mark_page * page_size, &m, sizeof m);

    int corrupt = 0, torn = 0;
    for (const damage& d : every_damage()) {
        if (d.what.find("cut") != std::string::npos || d.what.find("log ") == 0) continue;  // truncation: the mark's job
        SCOPED_TRACE(d.what);
        std::vector<char> wal = wal_bytes;
        d.apply(wal);
        lay_out(wal);
        options ro;
        ro.read_only = true;
        try {
            auto r = storage::storage::open(path, ro);
            std::uint64_t txn = workload::committed_txn(*r);
            EXPECT_EQ(workload::verify(*r), "");
            if (txn != last) {
                EXPECT_EQ(d.txn, last) << "only the last commit may be dropped, and only without the mark";
                EXPECT_EQ(txn, last - 1);
                ++torn;
            }
        } catch (const error& e) {
            EXPECT_EQ(e.code(), errc::corrupt);
            EXPECT_LT(d.txn, last) << e.what();
            ++corrupt;
        }
    }
    EXPECT_GT(corrupt, 50);
    std::printf("without the mark: %d named corrupt, %d taken for a torn last commit\n", corrupt, torn);
}


// The log is read to its end in pieces (examine_tail reads
// tail_scan_piece_bytes at a time from where replay stopped): evidence of durable commits must be found
// wherever it lies, in a frame across two pieces or in the last few bytes of
// the log past a piece. Each commit changes a few bytes of one page (a small
// difference frame of varying length, then the commit record), so frames
// fall across piece boundaries. Commit 2's frame is damaged, the mark rolled
// back, and the log cut after commit j for every j whose first frame lies
// near a boundary: the open must name commits 2 to j - 1 as durable, by the
// byte where commit j's first frame starts, and commit j as lost too (its
// frames show it was written, not that it was durable).
TEST(LogDamageLongLog, EvidenceIsFoundAnywhereInALongLog) {
    test::temp_dir dir;
    const std::string path = dir.path("s.db");
    constexpr std::uint64_t piece = tail_scan_piece_bytes, last_txn = 6000;
    {
        options o;
        o.durable = false;
        auto s = storage::storage::open(path, o);
        std::vector<std::byte> page(page_size);
        for (std::uint64_t t = 1; t <= last_txn; ++t) {
            std::memcpy(page.data(), &t, sizeof t);
            std::memset(page.data() + 100, static_cast<int>(t), t % 64);
            meta_bytes meta{};
            std::memcpy(meta.data(), &t, sizeof t);
            const page_image image{1, page.data()};
            s->commit({&image, 1}, meta);
            if (t == 1) s->checkpoint();
        }
    }
    std::vector<char> main_bytes = read(path), wal_bytes = read(path + "-wal");
    commit_mark m;
    std::memcpy(&m, main_bytes.data() + commit_mark_page * page_size, sizeof m);
    ASSERT_EQ(m.txn, last_txn);
    m.txn = 1;
    m.log_end = wal_frames_offset;
    m.crc = common::crc32c(0, &m, offsetof(commit_mark, crc));
    std::memcpy(main_bytes.data() + commit_mark_page * page_size, &m, sizeof m);
    write(path, main_bytes);

    std::vector<std::uint64_t> first_frame(last_txn + 1, 0), end_of(last_txn + 1, 0);
    // Where the first frame of each commit lies from where replay stops
    // (the damaged frame, the log's first).
    std::vector<std::uint64_t> into_piece(last_txn + 1, 0);
    std::vector<bool> across(last_txn + 1, false);  // its checksummed bytes span two pieces
    for (std::uint64_t off = wal_frames_offset; off + sizeof(frame_header) <= wal_bytes.size();) {
        frame_header h;
        std::memcpy(&h, wal_bytes.data() + off, sizeof h);
        if (h.magic != frame_magic || h.txn > last_txn) break;
        if (!first_frame[h.txn]) {
            const std::uint64_t from = off - wal_frames_offset;
            first_frame[h.txn] = off;
            into_piece[h.txn] = from % piece;
            across[h.txn] = from / piece != (from + sizeof h + covered_payload(h) - 1) / piece;
        }
        off += sizeof h + payload_size(h);
        end_of[h.txn] = off;
    }
    ASSERT_GT(end_of[last_txn], 4 * piece) << "commit more to lengthen the log";
    ASSERT_EQ(first_frame[2], wal_frames_offset);
    wal_bytes[first_frame[2]] ^= 0x21;

    int crossing = 0;
    for (std::uint64_t j = 4; j <= last_txn; ++j) {
        if (into_piece[j] >= 8192 && into_piece[j] < piece - 8192) continue;
        crossing += across[j];
        SCOPED_TRACE("log cut after commit " + std::to_string(j));
        write(path + "-wal", {wal_bytes.begin(), wal_bytes.begin() + static_cast<std::ptrdiff_t>(end_of[j])});
        std::filesystem::remove(path + "-shm");
        options ro;
        ro.read_only = true;
        try {
            storage::storage::open(path, ro);
            ADD_FAILURE() << "opened over durable commits it cannot read";
        } catch (const error& e) {
            const std::string msg = e.what();
            EXPECT_EQ(e.code(), errc::corrupt) << msg;
            EXPECT_NE(msg.find("Commits 2 to " + std::to_string(j - 1) + " were durable"), std::string::npos) << msg;
            EXPECT_NE(msg.find(", nor can commit " + std::to_string(j) + ", whose frames follow (nothing shows "
                                                                         "whether it was durable)"),
                      std::string::npos)
                << msg;
            EXPECT_NE(msg.find("an intact frame of commit " + std::to_string(j) + " follows at log byte " +
                               std::to_string(first_frame[j]) + ","),
                      std::string::npos)
                << msg;
        }
    }
    EXPECT_GT(crossing, 2) << "too few commits start with a frame across a piece boundary: lengthen the log";
}

}  // namespace
