// S1's admission as the fault handler decides it (admitted(), no descriptor
// read) against the whole answer (aim_of), for words aimed at every page of
// a heap with a mix of everything, at offsets in chunks, between them, past
// them, and with the end tag on and off page boundaries.
#include <gtest/gtest.h>

#include <cstdint>

#include "page/stored_pointer.hpp"
#include "support/mixed_heap.hpp"

namespace steppe::page {
namespace {

TEST(PointerAdmission, WithoutDescriptorsItIsAimOfs) {
    const heap h = test::mixed_heap(3, 5000);
    constexpr std::uint64_t P = translate::page_size;
    long admitted_count = 0, refused = 0;
    for (std::uint64_t page = 0; page < h.page_count() + 3; ++page)
        for (std::uint64_t offset : {0ul, 1ul, 8ul, 15ul, 16ul, 40ul, 1000ul, 2047ul, 2048ul, 4000ul, 4095ul})
            for (std::uint64_t tag : {0ul, translate::end_tag}) {
                const std::uint64_t word = tag | (page * P + offset);
                if (word == 0) continue;
                std::uint64_t aimed = 0;
                const bool fast = admitted(h, word, aimed);
                const pointer_aim aim = aim_of(h, word);
                ASSERT_EQ(fast, aim.admitted()) << "word " << std::hex << word;
                if (fast) {
                    EXPECT_EQ(aimed, aim.page) << "word " << std::hex << word;
                }
                (fast ? admitted_count : refused) += 1;
            }
    EXPECT_GT(admitted_count, 1000);
    EXPECT_GT(refused, 100);  // the reserved pages, past the end, end tags off a boundary
}

}  // namespace
}  // namespace steppe::page
