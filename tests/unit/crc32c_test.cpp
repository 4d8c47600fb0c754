// CRC32C against an independent bitwise implementation: every length around
// the three-stripe boundary, unaligned starts, chaining, and the standard
// check value.
#include "common/crc32c.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

namespace {

using steppe::common::crc32c;

std::uint32_t reference_crc32c(std::uint32_t crc, const unsigned char* p, std::size_t n) {
    crc = ~crc;
    while (n--) {
        crc ^= *p++;
        for (int k = 0; k < 8; ++k) crc = (crc >> 1) ^ (0x82F63B78u & (0u - (crc & 1u)));
    }
    return ~crc;
}

std::vector<unsigned char> random_bytes(std::size_t n, unsigned seed) {
    std::mt19937 rng(seed);
    std::vector<unsigned char> bytes(n);
    for (auto& b : bytes) b = static_cast<unsigned char>(rng());
    return bytes;
}

TEST(Crc32c, StandardCheckValue) {
    const char text[] = "123456789";
    EXPECT_EQ(crc32c(0, text, 9), 0xE3069283u);
}

TEST(Crc32c, MatchesTheBitwiseDefinitionAtEveryLengthAndAlignment) {
    const auto bytes = random_bytes(3 * 4096 + 64, 7);
    const std::size_t lengths[] = {0, 1, 7, 8, 9, 63, 4079, 4080, 4081, 4095, 4096, 4097, 8160, 8192, 3 * 4096};
    for (std::size_t start = 0; start < 9; ++start)
        for (std::size_t n : lengths)
            ASSERT_EQ(crc32c(0, bytes.data() + start, n), reference_crc32c(0, bytes.data() + start, n))
                << "start " << start << ", length " << n;
}

TEST(Crc32c, ChainsAcrossPieces) {
    const auto bytes = random_bytes(3 * 4096, 11);
    std::mt19937 rng(3);
    for (int round = 0; round < 200; ++round) {
        const std::size_t cut = rng() % bytes.size();
        const std::uint32_t whole = crc32c(0, bytes.data(), bytes.size());
        EXPECT_EQ(crc32c(crc32c(0, bytes.data(), cut), bytes.data() + cut, bytes.size() - cut), whole) << "cut " << cut;
    }
}

// A checksum over some bytes and then a page, from the page's own
// checksum (the PostgreSQL cache file's slot checks): the same as reading
// both, for any seed, the seeds 0 and ~0 and pages of zeros included.
TEST(Crc32c, ExtendsOverAPageFromThePagesOwnChecksum) {
    using steppe::common::crc32c_extend_by_page;
    std::mt19937 rng(13);
    const std::vector<unsigned char> zeros(4096);
    for (int round = 0; round < 100; ++round) {
        const auto page = round % 10 == 0 ? zeros : random_bytes(4096, unsigned(round));
        const auto head = random_bytes(rng() % 100, unsigned(round) + 1000);
        std::uint32_t seed = crc32c(0, head.data(), head.size());
        if (round == 1) seed = 0;
        if (round == 2) seed = ~0u;
        ASSERT_EQ(crc32c_extend_by_page(seed, crc32c(0, page.data(), page.size())), crc32c(seed, page.data(), 4096))
            << "round " << round;
        ASSERT_EQ(crc32c_extend_by_page(seed, crc32c(0, page.data(), page.size())),
                  reference_crc32c(seed, page.data(), 4096))
            << "round " << round;
    }
}

TEST(Crc32c, SeesEveryFlippedBitOfAPage) {
    auto page = random_bytes(4096, 5);
    const std::uint32_t sum = crc32c(0, page.data(), page.size());
    for (std::size_t bit = 0; bit < page.size() * 8; bit += 61) {
        page[bit / 8] ^= static_cast<unsigned char>(1u << (bit % 8));
        EXPECT_NE(crc32c(0, page.data(), page.size()), sum) << "bit " << bit;
        page[bit / 8] ^= static_cast<unsigned char>(1u << (bit % 8));
    }
}

}  // namespace
