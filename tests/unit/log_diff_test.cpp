// Sub-page differences in the log (storage/page_diff.hpp, wal_format.hpp):
// the codec's rules, and a store whose log holds differences read back,
// replayed, checkpointed, over a main-file page a torn checkpoint left
// half written, and over damage that must not pass silently.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <random>
#include <vector>

#include "storage/checksum.hpp"
#include "storage/page_diff.hpp"
#include "storage/storage.hpp"
#include "storage/wal_format.hpp"
#include "support/damage.hpp"
#include "support/temp_dir.hpp"

using namespace steppe;
using namespace steppe::storage;

namespace {

using page_bytes = std::vector<std::byte>;

page_bytes random_page(std::mt19937_64& rng) {
    page_bytes p(page_size);
    for (std::size_t i = 0; i < page_size; i += 8) {
        const std::uint64_t w = rng();
        std::memcpy(p.data() + i, &w, 8);
    }
    return p;
}

// `base` with `words` random words changed.
page_bytes changed(const page_bytes& base, std::mt19937_64& rng, int words) {
    page_bytes p = base;
    for (int i = 0; i < words; ++i) {
        const std::uint64_t w = rng() | 1;
        std::memcpy(p.data() + rng() % (page_size / 8) * 8, &w, 8);
    }
    return p;
}

page_bytes applied(const std::byte* diff, long n, page_bytes page) {
    EXPECT_TRUE(apply_page_diff(diff, static_cast<std::size_t>(n), page.data()));
    return page;
}

TEST(PageDiff, RoundTripsAndStaysWithinItsBound) {
    std::mt19937_64 rng(7);
    std::byte diff[max_diff_bytes];
    for (int words : {0, 1, 2, 17, 100}) {
        const page_bytes base = random_page(rng), target = changed(base, rng, words);
        const long n = encode_page_diff(base.data(), target.data(), diff);
        ASSERT_GE(n, 0) << words;
        EXPECT_LE(static_cast<std::size_t>(n), static_cast<std::size_t>(words) * 12) << "a run per changed word at most";
        EXPECT_TRUE(page_diff_well_formed(diff, static_cast<std::size_t>(n)));
        EXPECT_EQ(applied(diff, n, base), target) << words;
    }
    const page_bytes base = random_page(rng), other = random_page(rng);
    EXPECT_EQ(encode_page_diff(base.data(), other.data(), diff), -1) << "a page all new is no difference";
}

// D1: applied to any page that holds, byte by byte, the base's or the
// target's byte, a difference gives the target (a torn checkpoint's page).
TEST(PageDiff, AppliedToAnyMixOfBaseAndTargetGivesTheTarget) {
    std::mt19937_64 rng(11);
    std::byte diff[max_diff_bytes];
    for (int round = 0; round < 50; ++round) {
        const page_bytes base = random_page(rng), target = changed(base, rng, 1 + static_cast<int>(rng() % 60));
        const long n = encode_page_diff(base.data(), target.data(), diff);
        ASSERT_GE(n, 0);
        page_bytes mix = base;
        const std::size_t cut = rng() % page_size;  // a torn write: the target's first bytes, the base's after
        std::copy(target.begin(), target.begin() + static_cast<long>(cut), mix.begin());
        for (std::size_t i = 0; i < page_size; i += 512)  // and whole sectors of either, in any order
            if (rng() & 1) std::copy_n(target.begin() + static_cast<long>(i), 512, mix.begin() + static_cast<long>(i));
        EXPECT_EQ(applied(diff, n, mix), target) << "round " << round;
    }
}

TEST(PageDiff, PayloadsThatBreakTheRulesAreRefused) {
    auto run = [](std::uint16_t offset, std::uint16_t length) {
        std::vector<std::byte> d(4 + length);
        std::memcpy(d.data(), &offset, 2);
        std::memcpy(d.data() + 2, &length, 2);
        return d;
    };
    auto ok = [](const std::vector<std::byte>& d) { return page_diff_well_formed(d.data(), d.size()); };
    EXPECT_TRUE(ok(run(0, 8)));
    EXPECT_TRUE(ok(run(4088, 8)));
    EXPECT_FALSE(ok(run(4090, 8))) << "past the page";
    EXPECT_FALSE(ok(run(0, 0))) << "an empty run";
    std::vector<std::byte> cut = run(0, 8);
    cut.pop_back();
    EXPECT_FALSE(ok(cut)) << "a run cut short";
    std::vector<std::byte> two = run(16, 8), overlapping = run(20, 8);
    two.insert(two.end(), overlapping.begin(), overlapping.end());
    EXPECT_FALSE(ok(two)) << "overlapping runs";
    std::vector<std::byte> descending = run(64, 8), before = run(0, 8);
    descending.insert(descending.end(), before.begin(), before.end());
    EXPECT_FALSE(ok(descending)) << "runs out of order";
    EXPECT_TRUE(page_diff_well_formed(nullptr, 0)) << "no run: the page as the main file has it";
}

// A store whose page 1 holds `base` in the main file (checkpointed) and
// whose log holds later versions, not checkpointed.
class LogDiffTest : public ::testing::Test {
protected:
    test::temp_dir dir;
    std::string path = dir.path("s.db");
    std::mt19937_64 rng{3};
    page_bytes base = random_page(rng);

    static options no_checkpoint(options o = {}) {
        o.durable = false;
        o.checkpoint_bytes = std::uint64_t{1} << 40;
        return o;
    }
    static void commit(storage::storage& s, page_no page, const page_bytes& image) {
        const page_image p{page, image.data()};
        s.commit({&p, 1}, {});
    }
    static page_bytes read(const storage::storage& s, page_no page) {
        page_bytes out(page_size);
        s.read_page(page, out.data());
        return out;
    }
    std::unique_ptr<storage::storage> with_base() {
        auto s = storage::storage::open(path, no_checkpoint());
        commit(*s, 1, base);
        s->checkpoint();
        return s;
    }
    std::uint64_t main_offset(page_no page) const { return physical_page(page) * page_size; }
};

TEST_F(LogDiffTest, ASmallChangeIsLoggedAsADifferenceAndReadBackEverywhere) {
    const page_bytes v1 = changed(base, rng, 3), v2 = changed(v1, rng, 2);
    {
        auto s = with_base();
        const auto before = s->counters();
        commit(*s, 1, v1);
        commit(*s, 1, v2);
        EXPECT_EQ(s->counters().pages_as_diffs - before.pages_as_diffs, 2u);
        EXPECT_LT(s->counters().bytes_written - before.bytes_written, 2 * page_frame_size / 8)
            << "two diff frames and two commit frames, not two pages";
        EXPECT_EQ(read(*s, 1), v2);
        EXPECT_TRUE(s->check().empty());
    }
    {
        auto r = storage::storage::open(path, no_checkpoint({.read_only = true}));
        EXPECT_EQ(read(*r, 1), v2) << "replayed from the log";
    }
    auto s = storage::storage::open(path, no_checkpoint());  // a writable open checkpoints
    EXPECT_EQ(s->describe().wal_commits, 0u);
    EXPECT_EQ(read(*s, 1), v2) << "checkpointed into the main file";
    EXPECT_TRUE(s->check().empty());
}

TEST_F(LogDiffTest, WithDiffsOffWholePagesAreLogged) {
    auto s = with_base();
    s.reset();
    options o = no_checkpoint();
    o.log_diffs = false;
    s = storage::storage::open(path, o);
    const page_bytes v1 = changed(base, rng, 1);
    commit(*s, 1, v1);
    EXPECT_EQ(s->counters().pages_as_diffs, 0u);
    EXPECT_GE(s->counters().bytes_written, page_frame_size);
    EXPECT_EQ(read(*s, 1), v1);
}

// A new page is a difference against zeros; a page rewritten whole is a
// page frame; both read back.
TEST_F(LogDiffTest, NewSparsePagesAreDifferencesAndNewFullPagesAreImages) {
    auto s = with_base();
    page_bytes sparse(page_size);
    sparse[100] = std::byte{7};
    const page_bytes full = random_page(rng);
    const auto before = s->counters().pages_as_diffs;
    commit(*s, 5, sparse);
    commit(*s, 6, full);
    EXPECT_EQ(s->counters().pages_as_diffs - before, 1u);
    EXPECT_EQ(read(*s, 5), sparse);
    EXPECT_EQ(read(*s, 6), full);
}

// A crash in a checkpoint can leave the main file's page anywhere between
// the base the difference was made from and the version it makes: replay
// and the checkpoint after it still give that version.
TEST_F(LogDiffTest, AMainPageTornByACheckpointStillGivesTheLoggedVersion) {
    const page_bytes v1 = changed(base, rng, 40);
    with_base().reset();
    {
        auto s = storage::storage::open(path, no_checkpoint());
        commit(*s, 1, v1);
    }
    {
        std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
        f.seekp(static_cast<std::streamoff>(main_offset(1)));
        f.write(reinterpret_cast<const char*>(v1.data()), 1536);  // three sectors of the new version
    }
    {
        auto r = storage::storage::open(path, no_checkpoint({.read_only = true}));
        EXPECT_EQ(read(*r, 1), v1);
    }
    auto s = storage::storage::open(path, no_checkpoint());
    EXPECT_EQ(read(*s, 1), v1);
    EXPECT_TRUE(s->check().empty());
}

// Nothing silent: a main-file page damaged under a logged difference is
// named when read and by check, never handed out.
TEST_F(LogDiffTest, DamageUnderADifferenceIsNamedNotHandedOut) {
    const page_bytes v1 = changed(base, rng, 2);
    with_base().reset();
    {
        auto s = storage::storage::open(path, no_checkpoint());
        commit(*s, 1, v1);
    }
    // A byte the difference does not cover.
    std::size_t at = 0;
    while (base[at] != v1[at] || base[at + 1] != v1[at + 1] || at % 8 != 0) ++at;
    test::flip_byte(path, main_offset(1) + at + 1);
    auto r = storage::storage::open(path, no_checkpoint({.read_only = true}));
    page_bytes out(page_size);
    try {
        r->read_page(1, out.data());
        FAIL() << "a page made from a damaged base was handed out";
    } catch (const error& e) {
        EXPECT_EQ(e.code(), errc::corrupt);
        EXPECT_NE(std::string(e.what()).find("difference against the main file's page"), std::string::npos) << e.what();
        EXPECT_NE(std::string(e.what()).find("page 1"), std::string::npos) << e.what();
    }
    const auto findings = r->check();
    ASSERT_FALSE(findings.empty());
    EXPECT_NE(findings[0].find("page 1"), std::string::npos) << findings[0];
}

// A log cut short under an open store (another process truncated it) gives
// an error that says so, for a difference and for a whole page, not a
// checksum failure.
TEST_F(LogDiffTest, ALogCutShortUnderAnOpenStoreIsNamedAsSuch) {
    const page_bytes v1 = changed(base, rng, 2);
    with_base().reset();
    auto s = storage::storage::open(path, no_checkpoint());
    commit(*s, 1, v1);
    commit(*s, 2, random_page(rng));  // new and full: a whole page, logged after the difference
    const std::uint64_t diff_end = s->describe().wal_bytes_used;
    ASSERT_EQ(::truncate((path + "-wal").c_str(), static_cast<off_t>(wal_frames_offset + 64)), 0);
    for (page_no page : {page_no{1}, page_no{2}}) {
        page_bytes out(page_size);
        try {
            s->read_page(page, out.data());
            FAIL() << "page " << page << " was read from a log cut short";
        } catch (const error& e) {
            EXPECT_EQ(e.code(), errc::corrupt);
            EXPECT_NE(std::string(e.what()).find("is cut short"), std::string::npos) << e.what();
            EXPECT_NE(std::string(e.what()).find("page " + std::to_string(page)), std::string::npos) << e.what();
        }
    }
    EXPECT_GT(diff_end, wal_frames_offset + 64);
}

// A diff frame whose checksums are right but whose runs break the format
// (a crafted log) is damage, not a page.
TEST_F(LogDiffTest, ACraftedDifferenceIsDamageNotAPage) {
    const page_bytes v1 = changed(base, rng, 1), v2 = changed(v1, rng, 1);
    with_base().reset();
    {
        auto s = storage::storage::open(path, no_checkpoint());
        commit(*s, 1, v1);
        commit(*s, 1, v2);
    }
    std::fstream f(path + "-wal", std::ios::in | std::ios::out | std::ios::binary);
    frame_header h;
    f.seekg(static_cast<std::streamoff>(wal_frames_offset));
    f.read(reinterpret_cast<char*>(&h), sizeof h);
    ASSERT_EQ(h.kind, frame_kind::diff);
    std::vector<std::byte> payload(h.payload_bytes);
    f.read(reinterpret_cast<char*>(payload.data()), static_cast<std::streamsize>(payload.size()));
    const std::uint16_t past_the_page = 4090;
    std::memcpy(payload.data(), &past_the_page, 2);
    h.frame_crc = frame_crc_of(h, payload.data());
    h.chain = chain_of(chain_seed(h.salt), h.frame_crc);
    f.seekp(static_cast<std::streamoff>(wal_frames_offset));
    f.write(reinterpret_cast<const char*>(&h), sizeof h);
    f.write(reinterpret_cast<const char*>(payload.data()), static_cast<std::streamsize>(payload.size()));
    f.close();
    try {
        storage::storage::open(path, no_checkpoint({.read_only = true}));
        FAIL() << "a log with a malformed difference before a durable commit opened";
    } catch (const error& e) {
        EXPECT_EQ(e.code(), errc::corrupt);
        EXPECT_NE(std::string(e.what()).find("break the format"), std::string::npos) << e.what();
    }
}

}  // namespace
