// Tests of src/heap: size classes, allocation and free (with a randomized model
// check), large runs, errors, the persistent encoding (round trip, rollback,
// dirty tracking, damaged metadata), the audit, and descriptors out of memory.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <thread>
#include <map>
#include <random>
#include <set>
#include <steppe/error.hpp>

#include "common/sigsafe.hpp"
#include "heap/heap.hpp"
#include "heap/heap_format.hpp"
#include "support/mixed_heap.hpp"

namespace steppe {

// Reaches into the heap to plant inconsistencies for audit tests.
struct heap_test_access {
    static heap::page_desc& desc(heap& h, std::uint64_t page) { return h.desc_at(page); }
    static std::uint64_t& words(heap& h, std::uint64_t page, std::size_t w) { return h.desc_at(page).words_[w]; }
    static std::uint16_t& used(heap& h, std::uint64_t page) { return h.desc_at(page).used_; }
    static void set_kind(heap& h, std::uint64_t page, heap::page_kind k) { h.desc_at(page).kind_ = k; }
    static std::uint64_t& small_chunk_counter(heap& h) { return h.small_chunks_; }
};

namespace {

using page_kind = heap::page_kind;
using namespace heap_detail;
using test::mixed_heap;
constexpr std::uint64_t P = heap::page_size;

// A stand-in for the storage manager: logical page -> bytes, plus the root.
struct disk {
    std::map<std::uint64_t, std::array<std::byte, kPageSize>> pages;
    heap_root root;

    void apply(const heap::commit_image& image) {
        for (const auto& mp : image.pages) pages[mp.page] = mp.bytes;
        auto bytes = image.root.to_bytes();
        root = heap_root::from_bytes(bytes);
    }
    heap::fetch_fn fetch() const {
        return [this](std::uint64_t page) -> std::span<const std::byte> {
            // A page that is not a metadata page reads as zeros, as a fresh data page would.
            static const std::array<std::byte, kPageSize> zeros{};
            auto it = pages.find(page);
            return it == pages.end() ? zeros : it->second;
        };
    }
    // Decode builds the indexes as it validates; the audit checks them.
    heap decode(const heap::descriptor_paging& paging = {}) const {
        heap h = heap::decode(root, fetch(), {}, paging);
        const std::vector<std::string> findings = h.audit();
        EXPECT_TRUE(findings.empty()) << findings.front();
        return h;
    }

    // Byte access by metadata page index.
    std::array<std::byte, kPageSize>& meta(const heap& h, std::size_t index) {
        return pages.at(h.metadata_pages().at(index));
    }
    // Recomputes a page's checksum and the root's pages_crc after a deliberate edit,
    // so that the structural checks behind them are what gets tested.
    void reseal(const heap& h) {
        std::vector<std::uint32_t> crcs;
        std::uint64_t page = root.first_meta_page;
        for (std::uint64_t i = 0; i < root.meta_page_count; ++i) {
            auto& bytes = pages.at(i < h.metadata_pages().size() ? h.metadata_pages()[i] : page);
            std::uint32_t crc = metadata_page_crc(bytes);
            store_le<std::uint32_t>(bytes.data() + kOffCrc, crc);
            crcs.push_back(crc);
            page = load_le<std::uint64_t>(bytes.data() + kOffNext);
        }
        root.pages_crc = heap_detail::pages_crc(crcs);
    }
};

// The byte address of page p's descriptor within its metadata page.
std::byte* desc_bytes(disk& d, const heap& h, std::uint64_t p) {
    return d.meta(h, p / kDescsPerPage).data() + kMetaHeaderSize + (p % kDescsPerPage) * kDescSize;
}

void expect_same(const heap& a, const heap& b) {
    ASSERT_EQ(a.page_count(), b.page_count());
    ASSERT_EQ(a.reserved_pages(), b.reserved_pages());
    ASSERT_EQ(a.stats(), b.stats());
    for (std::uint64_t p = 0; p < a.page_count(); ++p)
        ASSERT_TRUE(*a.describe(p) == *b.describe(p)) << "page " << p;
    ASSERT_EQ(a.free_pages().runs(), b.free_pages().runs());
    ASSERT_EQ(a.metadata_pages(), b.metadata_pages());
}

template <class F>
void expect_error(errc code, const std::string& substring, F&& f) {
    try {
        f();
        ADD_FAILURE() << "no error; expected " << to_string(code) << " with \"" << substring << "\"";
    } catch (const error& e) {
        EXPECT_EQ(e.code(), code) << e.what();
        EXPECT_NE(std::string(e.what()).find(substring), std::string::npos)
            << "message \"" << e.what() << "\" lacks \"" << substring << "\"";
    }
}


// 1. Size classes ---------------------------------------------------------------

TEST(HeapSizeClass, Table) {
    const std::uint32_t expected[] = {16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512, 768, 1024, 1536, 2048};
    static_assert(std::size(expected) == heap::class_count);
    for (std::size_t c = 0; c < heap::class_count; ++c) {
        EXPECT_EQ(heap::class_size(c), expected[c]);
        EXPECT_EQ(heap::class_capacity(c), 4096 / expected[c]);
        EXPECT_LE(heap::class_capacity(c), 256u);
        EXPECT_EQ(heap::class_alignment(c), expected[c] & -expected[c]);
    }
    EXPECT_EQ(heap::class_alignment(1), 8u);  // the 24-byte class is the only one below 16
}

TEST(HeapSizeClass, EveryBoundary) {
    EXPECT_EQ(heap::size_class_for(0, 8), 0u);
    EXPECT_EQ(heap::size_class_for(1, 8), 0u);
    for (std::size_t c = 0; c < heap::class_count; ++c) {
        std::uint32_t s = heap::class_size(c);
        EXPECT_EQ(heap::size_class_for(s, 8), c) << s;
        EXPECT_EQ(heap::size_class_for(s - 1, 8), c == 0 || heap::class_size(c - 1) < s - 1 ? c : c - 1) << s;
        EXPECT_EQ(heap::size_class_for(s + 1, 8), c + 1 < heap::class_count ? c + 1 : heap::large) << s;
    }
    // Default alignment 16 skips the 24-byte class.
    EXPECT_EQ(heap::size_class_for(17), 2u);
    EXPECT_EQ(heap::size_class_for(24), 2u);
    EXPECT_EQ(heap::size_class_for(24, 8), 1u);
    EXPECT_EQ(heap::size_class_for(25, 8), 2u);
    // Stricter alignments climb to a class aligned enough.
    EXPECT_EQ(heap::size_class_for(40, 32), 4u);    // 48 is only 16-aligned -> 64
    EXPECT_EQ(heap::size_class_for(100, 64), 6u);   // 128 is 128-aligned
    EXPECT_EQ(heap::size_class_for(130, 128), 8u);  // 192 is only 64-aligned -> 256
    EXPECT_EQ(heap::size_class_for(2048), 14u);
    EXPECT_EQ(heap::size_class_for(2049), heap::large);
    EXPECT_EQ(heap::size_class_for(16, 2048), 14u);
    EXPECT_EQ(heap::size_class_for(16, 4096), heap::large);
}


// 2. Allocation and free -----------------------------------------------------------

TEST(HeapAllocate, FreshHeapLayout) {
    heap h;
    EXPECT_EQ(h.page_count(), 2u);
    EXPECT_EQ(h.describe(0)->kind(), page_kind::reserved);
    EXPECT_EQ(h.describe(1)->kind(), page_kind::system);
    EXPECT_EQ(h.describe(1)->owner(), heap::heap_owner);
    EXPECT_EQ(h.describe(2), nullptr);
    EXPECT_EQ(h.metadata_pages(), std::vector<std::uint64_t>{1});
    EXPECT_TRUE(h.audit().empty());

    std::uint64_t a = h.allocate(7, 40, 1);
    EXPECT_EQ(a, 2 * P);  // the worked example in heap_format.hpp
    const heap::page_desc* d = h.describe(2);
    ASSERT_NE(d, nullptr);
    EXPECT_EQ(d->kind(), page_kind::small);
    EXPECT_EQ(d->type(), 7u);
    EXPECT_EQ(d->elem_size(), 40u);
    EXPECT_EQ(d->chunk_size(), 48u);
    EXPECT_EQ(d->chunks_used(), 1u);
    EXPECT_TRUE(h.is_allocated(a));
    EXPECT_FALSE(h.is_allocated(a + 48));
    EXPECT_FALSE(h.is_allocated(a + 8));
    auto c = h.find_chunk(a + 47);
    ASSERT_TRUE(c);
    EXPECT_EQ(c->addr, a);
    EXPECT_EQ(c->bytes, 48u);
    EXPECT_FALSE(h.find_chunk(a + 48));
}

TEST(HeapAllocate, SmallPageFillsThenSpills) {
    heap h;
    std::set<std::uint64_t> chunks;
    for (int i = 0; i < 256; ++i) chunks.insert(h.allocate(1, 16, 1));
    EXPECT_EQ(chunks.size(), 256u);
    EXPECT_EQ(*chunks.begin(), 2 * P);
    EXPECT_EQ(*chunks.rbegin(), 2 * P + 255 * 16);
    EXPECT_EQ(h.describe(2)->chunks_used(), 256u);
    std::vector<std::uint32_t> offsets(h.describe(2)->allocated_chunks().begin(),
                                       h.describe(2)->allocated_chunks().end());
    ASSERT_EQ(offsets.size(), 256u);
    EXPECT_EQ(offsets[255], 255u * 16);
    EXPECT_EQ(h.allocate(1, 16, 1), 3 * P);  // page 2 is full

    // The 24-byte class packs 170 chunks, 8-aligned.
    std::uint64_t x = h.allocate(2, 24, 1, 8);
    EXPECT_EQ(h.describe(x / P)->chunk_size(), 24u);
    EXPECT_EQ(h.describe(x / P)->chunk_capacity(), 170u);
    for (int i = 1; i < 170; ++i) h.allocate(2, 24, 1, 8);
    EXPECT_EQ(h.describe(x / P)->chunks_used(), 170u);
    EXPECT_TRUE(h.audit().empty());
}

// A small allocation that takes a new page can make the heap add a metadata
// page, which grows its page table: the chunk's address must not be read
// from the old table after that (a use after free under ASan; a fault when
// the old table was unmapped, as OO1 large in PostgreSQL showed).
TEST(HeapAllocate, ChunkAddressesStayRightWhileTheMetadataGrows) {
    // The page table reallocates when it is full (then with room for 1,024
    // more pages); a metadata page is due every 84 pages. A large run of
    // 1,100 + j pages sets where the table is full next, so one j makes a
    // small allocation that takes a new page also take a metadata page
    // and reallocate the table.
    for (std::uint64_t j = 0; j < 84; ++j) {
        heap h;
        h.allocate(2, P, 1100 + j);
        const std::uint64_t until = h.page_count() + 1200;
        while (h.page_count() < until) {
            const std::uint64_t a = h.allocate(1, 1024, 1, 16);
            const auto* d = h.describe(a / P);
            ASSERT_NE(d, nullptr);
            ASSERT_EQ(d->kind(), heap::page_kind::small) << "run of " << 1100 + j;
            ASSERT_EQ(a % P % 1024, 0u) << "run of " << 1100 + j;
        }
        ASSERT_TRUE(h.audit().empty()) << "run of " << 1100 + j;
    }
}

TEST(HeapAllocate, TypesAndElementSizesGetTheirOwnPages) {
    heap h;
    std::uint64_t a = h.allocate(1, 32, 1), b = h.allocate(2, 32, 1), c = h.allocate(1, 16, 2);
    std::uint64_t d = h.allocate(1, 32, 1);
    EXPECT_NE(a / P, b / P);
    EXPECT_NE(a / P, c / P);  // same class, same type, other element size
    EXPECT_EQ(a / P, d / P);
    EXPECT_EQ(h.describe(c / P)->elem_size(), 16u);
}

TEST(HeapAllocate, LastFreeReturnsThePage) {
    heap h;
    std::uint64_t a = h.allocate(1, 100, 1), b = h.allocate(1, 100, 1);
    std::uint64_t page = a / P;
    h.free(a);
    EXPECT_EQ(h.describe(page)->kind(), page_kind::small);
    EXPECT_EQ(h.stats().free_pages, 0u);
    h.free(b);
    EXPECT_EQ(h.describe(page)->kind(), page_kind::free);
    EXPECT_EQ(h.stats().free_pages, 1u);
    EXPECT_EQ(h.stats().small_pages, 0u);
    // The freed page is reused for another type.
    std::uint64_t c = h.allocate(9, 8, 1);
    EXPECT_EQ(c / P, page);
    EXPECT_EQ(h.describe(page)->type(), 9u);
    EXPECT_TRUE(h.audit().empty());
}

TEST(HeapAllocate, FullPageRejoinsItsListWhenAChunkIsFreed) {
    heap h;
    std::vector<std::uint64_t> v;
    for (int i = 0; i < 2; ++i) v.push_back(h.allocate(3, 2048, 1));
    EXPECT_EQ(v[0] / P, v[1] / P);
    EXPECT_EQ(h.allocate(3, 2048, 1) / P, v[0] / P + 1);  // page full: a new page
    h.free(v[0]);
    EXPECT_EQ(h.allocate(3, 2048, 1), v[0]);  // the last-listed page with room
    EXPECT_EQ(h.allocate(3, 2048, 1) / P, v[0] / P + 1);
    EXPECT_TRUE(h.audit().empty());
}

TEST(HeapAllocate, ArgumentErrors) {
    heap h;
    expect_error(errc::invalid_argument, "must be > 0", [&] { h.allocate(1, 0, 1); });
    expect_error(errc::invalid_argument, "must be > 0", [&] { h.allocate(1, 8, 0); });
    expect_error(errc::invalid_argument, "alignment 3", [&] { h.allocate(1, 8, 1, 3); });
    expect_error(errc::invalid_argument, "alignment 8192", [&] { h.allocate(1, 8, 1, 8192); });
    expect_error(errc::no_space, "address space", [&] { h.allocate(1, 1u << 20, std::size_t{1} << 40); });
    expect_error(errc::no_space, "address space", [&] { h.allocate(1, 8, SIZE_MAX / 4); });
    EXPECT_TRUE(h.audit().empty());
    EXPECT_EQ(h.page_count(), 2u);
}

// 3. Large objects ---------------------------------------------------------------------

// Decoding follows the metadata chain; the read-ahead hints it gives on the
// way (heap::will_need_fn) name the pages ahead on a heap that grew page by
// page, and a heap whose chain breaks the pattern still decodes exactly.
TEST(HeapPersistence, DecodeAsksForTheMetadataPagesAheadOfTheChain) {
    for (bool with_large_runs : {false, true}) {
        heap h;
        for (int i = 0; i < 2 * 84 * 60; ++i) {  // two chunks to a page
            h.allocate(1, 2048, 1);
            if (with_large_runs && i % 700 == 0) h.allocate(2, 4096, 1 + i % 37);
        }
        disk d;
        d.apply(h.encode_dirty());
        std::set<std::uint64_t> hinted;
        std::size_t fetched_before_hint = 0, metadata_fetches = 0;
        const std::set<std::uint64_t> metadata(h.metadata_pages().begin(), h.metadata_pages().end());
        heap back = heap::decode(
            d.root,
            [&](std::uint64_t page) {
                if (metadata.count(page) && ++metadata_fetches <= metadata.size() && !hinted.count(page))
                    ++fetched_before_hint;
                return d.fetch()(page);
            },
            [&](std::uint64_t page) { hinted.insert(page); });
        EXPECT_EQ(back.audit(), std::vector<std::string>{});
        EXPECT_EQ(back.page_count(), h.page_count());
        EXPECT_EQ(back.metadata_pages(), h.metadata_pages());
        ASSERT_GE(metadata.size(), 60u);
        if (!with_large_runs) {
            // The first two are read before any stride is known.
            EXPECT_LE(fetched_before_hint, 2u) << "metadata pages read without being asked for ahead";
        } else {
            EXPECT_LT(fetched_before_hint, metadata.size() / 2);
        }
    }
}

TEST(HeapLarge, RunsOfOneTwoThreeAndHundredPages) {
    heap h;
    struct obj { std::uint64_t addr, pages, count; std::uint32_t elem; };
    std::vector<obj> objs;
    for (std::uint64_t pages : {1, 2, 3, 100}) {
        std::uint32_t elem = 24;
        std::uint64_t count = (pages * P - 8) / elem;  // just under `pages` pages
        objs.push_back({h.allocate(11, elem, count), pages, count, elem});
    }
    objs.push_back({h.allocate(12, 3000, 1), 1, 1, 3000});  // > 2048 bytes: large, 1 page
    for (const auto& o : objs) {
        EXPECT_EQ(o.addr % P, 0u);
        std::uint64_t head = o.addr / P;
        const heap::page_desc* d = h.describe(head);
        EXPECT_EQ(d->kind(), page_kind::large_head);
        EXPECT_EQ(d->run_pages(), o.pages);
        EXPECT_EQ(d->elem_count(), o.count);
        EXPECT_EQ(d->elem_size(), o.elem);
        for (std::uint64_t k = 0; k < o.pages; ++k) {
            auto run = h.large_run(head + k);
            ASSERT_TRUE(run);
            EXPECT_EQ(*run, (heap::run{head, o.pages}));
            if (k > 0) {
                EXPECT_EQ(h.describe(head + k)->kind(), page_kind::large_tail);
                EXPECT_EQ(h.describe(head + k)->head_distance(), k);
                EXPECT_EQ(h.describe(head + k)->type(), d->type());
            }
            auto c = h.find_chunk((head + k) * P + 100);
            ASSERT_TRUE(c);
            EXPECT_EQ(c->addr, o.addr);
            EXPECT_TRUE(c->large);
            EXPECT_EQ(c->elem_count, o.count);
        }
        EXPECT_TRUE(h.is_allocated(o.addr));
        EXPECT_FALSE(h.is_allocated(o.addr + P * (o.pages - 1)) && o.pages > 1);
    }
    EXPECT_FALSE(h.large_run(1));
    EXPECT_EQ(h.stats().large_objects, 5u);
    EXPECT_EQ(h.stats().large_pages, 107u);
    EXPECT_TRUE(h.audit().empty());

    // Reuse: the freed 100-page run takes a 50-page object at its start; the
    // freed 3-page run is the best fit for a 3-page object.
    std::uint64_t pc = h.page_count();
    h.free(objs[3].addr);
    h.free(objs[2].addr);
    EXPECT_EQ(h.stats().free_pages, 103u);
    EXPECT_EQ(h.allocate(13, P, 3), objs[2].addr);
    EXPECT_EQ(h.allocate(13, P, 50), objs[3].addr);
    EXPECT_EQ(h.allocate(13, P, 50), objs[3].addr + 50 * P);
    EXPECT_EQ(h.page_count(), pc);
    EXPECT_EQ(h.stats().free_pages, 0u);
    EXPECT_TRUE(h.audit().empty());
}

TEST(HeapLarge, FreeRunAtTheTopIsExtended) {
    heap h;
    h.allocate(1, 8, 1);
    std::uint64_t a = h.allocate(1, P, 10);
    std::uint64_t pc = h.page_count();
    h.free(a);
    std::uint64_t b = h.allocate(1, P, 20);
    EXPECT_EQ(b, a);
    EXPECT_EQ(h.page_count(), pc + 10);
    EXPECT_TRUE(h.audit().empty());
}

TEST(HeapLarge, PageAlignedSmallRequestIsLarge) {
    heap h;
    std::uint64_t a = h.allocate(1, 64, 1, 4096);
    EXPECT_EQ(h.describe(a / P)->kind(), page_kind::large_head);
    EXPECT_EQ(h.describe(a / P)->run_pages(), 1u);
    EXPECT_EQ(h.describe(a / P)->chunk_size(), 0u);  // only small pages have chunks
    std::uint64_t b = h.allocate(1, 64, 1, 2048);
    EXPECT_EQ(h.describe(b / P)->chunk_size(), 2048u);
}

// 4. Bad frees ---------------------------------------------------------------------------

TEST(HeapFree, DoubleAndBadFreesAreRejectedClearly) {
    heap h;
    std::uint64_t a = h.allocate(1, 40, 1);
    std::uint64_t big = h.allocate(1, P, 3);
    std::uint64_t b = h.allocate(1, 40, 1);
    expect_error(errc::invalid_argument, "null", [&] { h.free(0); });
    expect_error(errc::invalid_argument, "reserved page", [&] { h.free(16); });
    expect_error(errc::invalid_argument, "system page", [&] { h.free(1 * P); });
    expect_error(errc::invalid_argument, "past the heap's end", [&] { h.free(1000 * P); });
    expect_error(errc::invalid_argument, "not the start of a chunk", [&] { h.free(a + 8); });
    expect_error(errc::invalid_argument, "not allocated", [&] { h.free(a + 96); });
    expect_error(errc::invalid_argument, "inside the large object", [&] { h.free(big + 8); });
    expect_error(errc::invalid_argument, "inside the large object", [&] { h.free(big + 2 * P); });
    h.free(a);
    expect_error(errc::invalid_argument, "double free", [&] { h.free(a); });
    h.free(big);
    expect_error(errc::invalid_argument, "is free (double free", [&] { h.free(big); });
    h.free(b);  // the page goes back to the free set
    expect_error(errc::invalid_argument, "is free (double free", [&] { h.free(b); });
    EXPECT_TRUE(h.audit().empty());
}

// 5. New and freed pages, system pages -------------------------------------------------------

TEST(HeapPages, NewAndFreedPagesAreReportedOnce) {
    heap h;
    std::uint64_t a = h.allocate(1, 16, 1);
    std::uint64_t big = h.allocate(1, P, 2);
    EXPECT_EQ(h.take_new_pages(), (std::vector<std::uint64_t>{a / P, big / P, big / P + 1}));
    EXPECT_TRUE(h.take_new_pages().empty());
    EXPECT_TRUE(h.take_freed_pages().empty());
    h.free(big);
    h.free(a);
    EXPECT_EQ(h.take_freed_pages(), (std::vector<std::uint64_t>{a / P, big / P, big / P + 1}));
    // Freed then reused within the same period: only "new".
    std::uint64_t c = h.allocate(2, 16, 1);
    h.free(c);
    std::uint64_t d = h.allocate(3, 16, 1);
    EXPECT_TRUE(h.take_freed_pages().empty());
    EXPECT_EQ(h.take_new_pages(), std::vector<std::uint64_t>{d / P});
    // Handed out and freed within the period: only "freed".
    h.free(d);
    EXPECT_TRUE(h.take_new_pages().empty());
    EXPECT_EQ(h.take_freed_pages(), std::vector<std::uint64_t>{d / P});
}

TEST(HeapPages, FreedDataPageReusedAsSystemPageIsStillReportedFreed) {
    heap h;
    std::uint64_t a = h.allocate(1, 16, 1);
    h.take_new_pages();
    h.free(a);
    std::uint64_t s = h.allocate_system_page(5, 77);
    EXPECT_EQ(s, a / P);
    EXPECT_EQ(h.describe(s)->kind(), page_kind::system);
    EXPECT_EQ(h.describe(s)->owner(), 5u);
    EXPECT_EQ(h.describe(s)->tag(), 77u);
    EXPECT_EQ(h.take_freed_pages(), std::vector<std::uint64_t>{s});
    EXPECT_TRUE(h.take_new_pages().empty());
    expect_error(errc::invalid_argument, "system page", [&] { h.free(s * P); });
    expect_error(errc::invalid_argument, "owner 0", [&] { h.allocate_system_page(0, 0); });
    expect_error(errc::invalid_argument, "not a system page", [&] { h.free_system_page(1); });
    h.free_system_page(s);
    EXPECT_EQ(h.describe(s)->kind(), page_kind::free);
    EXPECT_TRUE(h.audit().empty());
}

TEST(HeapPages, MetadataPagesGrowWithTheHeap) {
    heap h;
    for (int i = 0; i < 200; ++i) h.allocate(1, P, 1);
    EXPECT_EQ(h.metadata_pages().size(), (h.page_count() + 83) / 84);
    EXPECT_EQ(h.metadata_pages().size(), 3u);
    for (std::size_t i = 0; i < h.metadata_pages().size(); ++i) {
        const auto* d = h.describe(h.metadata_pages()[i]);
        EXPECT_EQ(d->kind(), page_kind::system);
        EXPECT_EQ(d->tag(), i);
    }
    // One 1000-page object needs many metadata pages at once.
    h.allocate(1, P, 1000);
    EXPECT_EQ(h.metadata_pages().size(), (h.page_count() + 83) / 84);
    EXPECT_TRUE(h.audit().empty());
}

TEST(HeapPages, MoreReservedPages) {
    for (std::uint64_t reserved : {3, 83, 84, 85}) {
        heap h(reserved);
        EXPECT_EQ(h.describe(reserved - 1)->kind(), page_kind::reserved);
        EXPECT_EQ(h.metadata_pages().size(), (h.page_count() + 83) / 84);
        std::uint64_t a = h.allocate(1, 8, 1);
        EXPECT_GE(a / P, reserved);
        EXPECT_TRUE(h.audit().empty());
        disk d;
        d.apply(h.encode_dirty());
        expect_same(d.decode(), h);
    }
    expect_error(errc::invalid_argument, "reserved_pages 0", [] { heap h(0); });
}

TEST(HeapPages, ChunkIterationAcrossBitmapWords) {
    heap h;
    std::vector<std::uint64_t> a;
    for (int i = 0; i < 170; ++i) a.push_back(h.allocate(1, 24, 1, 8));
    for (int i = 0; i < 170; ++i)
        if (i % 7 != 0 && i != 169) h.free(a[static_cast<std::size_t>(i)]);
    std::vector<std::uint32_t> seen(h.describe(a[0] / P)->allocated_chunks().begin(),
                                    h.describe(a[0] / P)->allocated_chunks().end());
    std::vector<std::uint32_t> want;
    for (std::uint32_t i = 0; i < 170; ++i)
        if (i % 7 == 0 || i == 169) want.push_back(i * 24);
    EXPECT_EQ(seen, want);
    EXPECT_TRUE(h.describe(1)->allocated_chunks().begin() == h.describe(1)->allocated_chunks().end());
}

TEST(HeapPages, MetadataPageTakenFromTheFreeSetRoundTrips) {
    heap h;
    std::vector<std::uint64_t> big;
    for (int i = 0; i < 80; ++i) big.push_back(h.allocate(1, P, 1));
    h.free(big[10]);
    h.free(big[40]);
    // Growing past 84 pages takes metadata page 1 from the free set, not the top.
    h.allocate(1, P, 6);
    ASSERT_EQ(h.metadata_pages().size(), 2u);
    EXPECT_EQ(h.metadata_pages()[1], big[10] / P);
    EXPECT_TRUE(h.audit().empty());
    disk d;
    d.apply(h.encode_dirty());
    expect_same(d.decode(), h);
}

// 6. Randomized model check --------------------------------------------------------------------

TEST(HeapModel, RandomAllocateFreeAgainstAMap) {
    heap h;
    std::mt19937_64 rng(42);
    struct live_chunk { std::uint64_t end; std::uint32_t type; std::size_t elem, count, align; };
    std::map<std::uint64_t, live_chunk> model;
    std::vector<std::uint64_t> addrs;
    const std::size_t elems[] = {1, 4, 8, 12, 16, 24, 40, 64, 100, 200, 500, 1000, 1500, 3000, 5000};
    const std::size_t aligns[] = {1, 8, 16, 16, 16, 64, 256, 4096};
    std::uint64_t small_live = 0, large_live = 0;

    for (int op = 0; op < 20000; ++op) {
        bool alloc = addrs.empty() || rng() % 100 < (op < 10000 ? 60 : 40);
        if (alloc) {
            auto type = static_cast<std::uint32_t>(rng() % 4);
            std::size_t elem = elems[rng() % std::size(elems)];
            std::size_t count = rng() % 8 == 0 ? 1 + rng() % 40 : 1 + rng() % 3;
            std::size_t align = aligns[rng() % std::size(aligns)];
            std::uint64_t bytes = elem * count;
            std::uint64_t a = h.allocate(type, elem, count, align);
            ASSERT_NE(a, 0u);
            ASSERT_EQ(a % std::max<std::size_t>(align, 1), 0u);
            ASSERT_GE(a / P, h.reserved_pages());
            const heap::page_desc* d = h.describe(a / P);
            ASSERT_NE(d, nullptr);
            ASSERT_EQ(d->type(), type);
            ASSERT_EQ(d->elem_size(), elem);
            std::size_t cls = heap::size_class_for(bytes, align);
            std::uint64_t end;
            if (cls == heap::large) {
                ASSERT_EQ(d->kind(), page_kind::large_head);
                ASSERT_EQ(a % P, 0u);
                ASSERT_EQ(d->run_pages(), (bytes + P - 1) / P);
                ASSERT_EQ(d->elem_count(), count);
                end = a + d->run_pages() * P;
                ++large_live;
            } else {
                ASSERT_EQ(d->kind(), page_kind::small);
                ASSERT_EQ(d->size_class(), cls);
                ASSERT_EQ((a % P) % d->chunk_size(), 0u);
                if (align <= 16 && cls != 1) { ASSERT_EQ(a % 16, 0u); }
                end = a + d->chunk_size();
                ASSERT_LE(end, (a / P + 1) * P);
                ++small_live;
            }
            ASSERT_GE(end - a, bytes);
            // No overlap with the neighbours.
            auto next = model.lower_bound(a);
            if (next != model.end()) { ASSERT_LE(end, next->first); }
            if (next != model.begin()) { ASSERT_LE(std::prev(next)->second.end, a); }
            model[a] = {end, type, elem, count, align};
            addrs.push_back(a);
            ASSERT_TRUE(h.is_allocated(a));
            ASSERT_EQ(h.find_chunk(end - 1)->addr, a);
        } else {
            std::size_t k = rng() % addrs.size();
            std::uint64_t a = addrs[k];
            addrs[k] = addrs.back();
            addrs.pop_back();
            bool was_large = h.describe(a / P)->kind() == page_kind::large_head;
            h.free(a);
            (was_large ? large_live : small_live)--;
            model.erase(a);
            ASSERT_FALSE(h.is_allocated(a));
        }
        if (op % 2500 == 0) {
            auto findings = h.audit();
            ASSERT_TRUE(findings.empty()) << findings.front();
            ASSERT_EQ(h.stats().small_chunks, small_live);
            ASSERT_EQ(h.stats().large_objects, large_live);
        }
    }
    // Every allocated chunk the bitmaps report is in the model, and vice versa.
    std::set<std::uint64_t> from_heap;
    for (std::uint64_t p = 0; p < h.page_count(); ++p) {
        const heap::page_desc* d = h.describe(p);
        for (std::uint32_t off : d->allocated_chunks()) from_heap.insert(p * P + off);
        if (d->kind() == page_kind::large_head) from_heap.insert(p * P);
    }
    std::set<std::uint64_t> from_model;
    for (const auto& [a, c] : model) from_model.insert(a);
    EXPECT_EQ(from_heap, from_model);

    for (std::uint64_t a : addrs) h.free(a);
    auto s = h.stats();
    EXPECT_EQ(s.small_pages + s.large_pages + s.small_chunks + s.large_objects, 0u);
    EXPECT_EQ(s.free_pages + s.system_pages + s.reserved_pages, s.page_count);
    EXPECT_EQ(s.free_pages, s.page_count - s.reserved_pages - s.meta_pages);
    EXPECT_TRUE(h.audit().empty());
}

// 7. Persistence: round trip, rollback, dirty tracking ------------------------------------------

TEST(HeapPersist, RootBytesRoundTrip) {
    heap_root r{123, 1, 2, 5, 0xdeadbeef};
    auto bytes = r.to_bytes();
    EXPECT_EQ(heap_root::from_bytes(bytes), r);
    for (std::size_t i = 0; i < bytes.size(); ++i) {
        auto damaged = bytes;
        damaged[i] ^= std::byte{0x10};
        expect_error(errc::corrupt, "heap root", [&] { heap_root::from_bytes(damaged); });
    }
    for (std::size_t n = 0; n < bytes.size(); ++n)
        expect_error(errc::corrupt, "heap root", [&] { heap_root::from_bytes(std::span(bytes).first(n)); });
}

TEST(HeapPersist, EncodeDecodeRoundTrip) {
    heap h = mixed_heap();
    ASSERT_GE(h.metadata_pages().size(), 3u);
    disk d;
    auto image = h.encode_dirty();
    EXPECT_EQ(image.pages.size(), h.metadata_pages().size());  // a fresh heap writes everything
    d.apply(image);
    heap back = d.decode();
    expect_same(h, back);
    EXPECT_TRUE(back.audit().empty());
    EXPECT_EQ(back.dirty_page_count(), 0u);
    // The decoded heap encodes to the same bytes.
    back.mark_all_dirty();
    auto again = back.encode_dirty();
    ASSERT_EQ(again.pages.size(), image.pages.size());
    for (std::size_t i = 0; i < again.pages.size(); ++i) EXPECT_EQ(again.pages[i].bytes, image.pages[i].bytes);
    EXPECT_EQ(again.root, image.root);
    // And it keeps working: allocations and frees on the decoded heap stay sound.
    back.allocate(1, 40, 1);
    back.allocate(2, P, 5);
    EXPECT_TRUE(back.audit().empty());
}

TEST(HeapPersist, RollbackIsDecodingTheLastCommit) {
    heap h = mixed_heap(2, 1000);
    disk d;
    d.apply(h.encode_dirty());
    heap committed = h;
    // Uncommitted work, including growth that needs new metadata pages.
    for (int i = 0; i < 300; ++i) h.allocate(5, 3000, 1);
    h.allocate(6, 8, 1);
    h = d.decode();  // rollback
    expect_same(h, committed);
    // Commit on top of the rolled-back state, then roll back to that.
    std::uint64_t a = h.allocate(6, 8, 1);
    d.apply(h.encode_dirty());
    heap second = h;
    h.free(a);
    h = d.decode();
    expect_same(h, second);
    EXPECT_TRUE(h.is_allocated(a));
}

TEST(HeapPersist, EncodeDirtyTouchesFewPages) {
    heap h;
    for (int i = 0; i < 1000; ++i) h.allocate(1, P, 1);
    std::uint64_t small = h.allocate(2, 16, 1);
    disk d;
    d.apply(h.encode_dirty());
    ASSERT_GT(h.metadata_pages().size(), 10u);
    EXPECT_TRUE(h.encode_dirty().pages.empty());

    h.allocate(2, 16, 1);  // same page as `small`
    auto image = h.encode_dirty();
    ASSERT_EQ(image.pages.size(), 1u);
    EXPECT_EQ(image.pages[0].index, small / P / kDescsPerPage);
    d.apply(image);

    h.free(500 * P);  // one large page back to the free set
    image = h.encode_dirty();
    EXPECT_EQ(image.pages.size(), 1u);
    d.apply(image);

    h.allocate(3, 8, 1);  // takes page 500 from the free set
    image = h.encode_dirty();
    EXPECT_EQ(image.pages.size(), 1u);
    d.apply(image);

    h.allocate(4, 8, 1);  // grows the high-water mark: the last metadata page
    image = h.encode_dirty();
    EXPECT_LE(image.pages.size(), 2u);
    d.apply(image);
    expect_same(d.decode(), h);
}

// 8. Damaged metadata ----------------------------------------------------------------------------

struct damaged : ::testing::Test {
    heap h = mixed_heap(3, 600);
    disk d;
    void SetUp() override {
        d.apply(h.encode_dirty());
        ASSERT_GE(h.metadata_pages().size(), 2u);
    }
    void expect_corrupt(const std::string& substring) {
        expect_error(errc::corrupt, substring, [&] { d.decode(); });
    }
};

// Two metadata pages, so that the 2 x 4096 x 2 decodes stay fast.
TEST(HeapDamage, EveryTruncationOfEveryPage) {
    heap h;
    for (int i = 0; i < 40; ++i) h.allocate(1, 100, 1 + i % 3);
    for (int i = 0; i < 90; ++i) h.allocate(2, P, 1);
    ASSERT_EQ(h.metadata_pages().size(), 2u);
    disk d;
    d.apply(h.encode_dirty());
    for (std::size_t i = 0; i < h.metadata_pages().size(); ++i) {
        const auto original = d.meta(h, i);
        for (std::size_t n = 0; n < kPageSize; ++n) {
            // The fetch returns a short page.
            auto fetch = [&](std::uint64_t page) -> std::span<const std::byte> {
                auto span = std::span<const std::byte>(d.pages.at(page));
                return page == h.metadata_pages()[i] ? span.first(n) : span;
            };
            try {
                heap::decode(d.root, fetch);
                FAIL() << "short page " << i << " of " << n << " bytes decoded";
            } catch (const error& e) {
                ASSERT_EQ(e.code(), errc::corrupt) << e.what();
            }
            // The page is torn: its tail reads as zeros.
            auto& bytes = d.meta(h, i);
            std::fill(bytes.begin() + static_cast<std::ptrdiff_t>(n), bytes.end(), std::byte{0});
            if (bytes != original) {
                try {
                    d.decode();
                    FAIL() << "page " << i << " torn at " << n << " decoded";
                } catch (const error& e) {
                    ASSERT_EQ(e.code(), errc::corrupt) << e.what();
                }
            }
            bytes = original;
        }
    }
    expect_same(d.decode(), h);
}

TEST_F(damaged, RandomByteFlipsAreCaughtByChecksums) {
    std::mt19937_64 rng(7);
    for (int trial = 0; trial < 3000; ++trial) {
        std::size_t i = rng() % h.metadata_pages().size();
        const auto original = d.meta(h, i);
        auto& bytes = d.meta(h, i);
        for (int k = 0, n = 1 + static_cast<int>(rng() % 4); k < n; ++k)
            bytes[rng() % kPageSize] ^= static_cast<std::byte>(1 + rng() % 255);
        if (bytes != original) {
            try {
                d.decode();
                FAIL() << "trial " << trial << " decoded";
            } catch (const error& e) {
                ASSERT_EQ(e.code(), errc::corrupt) << e.what();
            }
        }
        bytes = original;
    }
}

// Flips with the checksums recomputed reach the structural checks: each must
// either be refused with corrupt/version or decode to a state that audits clean.
TEST_F(damaged, ResealedRandomFlipsNeverCrash) {
    std::mt19937_64 rng(8);
    const auto saved = d.pages;
    const heap_root saved_root = d.root;
    int refused = 0;
    constexpr int trials = 2500;
    for (int trial = 0; trial < trials; ++trial) {
        std::size_t i = rng() % h.metadata_pages().size();
        auto& bytes = d.meta(h, i);
        for (int k = 0, n = 1 + static_cast<int>(rng() % 3); k < n; ++k) {
            // Aim at the header and the descriptors in use most of the time.
            std::size_t pos = rng() % 2 ? rng() % 64 : rng() % kPageSize;
            bytes[pos] ^= static_cast<std::byte>(1u << (rng() % 8));
        }
        d.reseal(h);
        try {
            heap back = d.decode();
            auto findings = back.audit();
            ASSERT_TRUE(findings.empty()) << "trial " << trial << ": " << findings.front();
        } catch (const error& e) {
            ASSERT_TRUE(e.code() == errc::corrupt || e.code() == errc::version) << e.what();
            ++refused;
        }
        d.pages = saved;
        d.root = saved_root;
    }
    EXPECT_GT(refused, trials / 2);  // most flips break something the checks see
}

TEST_F(damaged, StalePageFromAnEarlierCommit) {
    auto stale = d.meta(h, 0);
    h.allocate(1, 16, 1);
    h.allocate(1, P, 1);
    d.apply(h.encode_dirty());
    d.meta(h, 0) = stale;  // a validly checksummed page from the previous commit
    expect_corrupt("do not match the root");
}

TEST_F(damaged, HeaderFieldsByName) {
    const auto saved = d.pages;
    auto edit = [&](std::size_t index, std::size_t offset, auto value, const std::string& expect,
                    errc code = errc::corrupt) {
        store_le(d.meta(h, index).data() + offset, value);
        if (offset != kOffMagic) d.reseal(h);
        expect_error(code, expect, [&] { d.decode(); });
        d.pages = saved;
        d.apply(heap::commit_image{h.encode_dirty().root, {}});
    };
    edit(0, kOffMagic, std::uint32_t{0x12345678}, "heap metadata page 0 (logical page 1): bad magic");
    edit(0, kOffVersion, std::uint16_t{2}, "format version 2", errc::version);
    edit(0, kOffKind, std::uint8_t{2}, "kind 2, expected 1");
    edit(1, kOffIndex, std::uint32_t{0}, "heap metadata page 1 (logical page");
    edit(1, kOffIndex, std::uint32_t{0}, "says it is metadata page 0");
    edit(0, kOffCount, std::uint16_t{83}, "holds 83 descriptors, expected 84");
    edit(0, kOffNext, std::uint64_t{0}, "next metadata page 0 out of range");
    edit(0, kOffNext, std::uint64_t{1u << 30}, "out of range");
    edit(0, 26, std::uint8_t{1}, "unused bytes are not zero");
    edit(0, kPageSize - 1, std::uint8_t{1}, "unused bytes are not zero");
    // The checksum itself.
    d.meta(h, 0)[100] ^= std::byte{1};
    expect_corrupt("heap metadata page 0 (logical page 1): checksum mismatch");
}

TEST_F(damaged, RootFieldsByName) {
    const heap_root good = d.root;
    d.root.page_count += 84;
    expect_corrupt("heap root:");
    d.root = good;
    d.root.meta_page_count += 1;
    expect_corrupt("metadata pages for");
    d.root = good;
    d.root.first_meta_page = good.page_count;
    expect_corrupt("first metadata page");
    d.root = good;
    d.root.reserved_pages = 0;
    expect_corrupt("reserved_pages 0 out of range");
    d.root = good;
    d.root.pages_crc ^= 1;
    expect_corrupt("do not match the root");
}

struct descriptor_damage : damaged {
    std::uint64_t small_page = 0, head = 0, tail = 0, free_page = 0;
    void SetUp() override {
        damaged::SetUp();
        for (std::uint64_t p = h.reserved_pages(); p < h.page_count(); ++p) {
            auto k = h.describe(p)->kind();
            if (k == page_kind::small && !small_page) small_page = p;
            if (k == page_kind::large_head && h.describe(p)->run_pages() >= 2 && !head) head = p;
            if (k == page_kind::free && !free_page) free_page = p;
        }
        ASSERT_TRUE(small_page && head && free_page);
        tail = head + 1;
    }
    template <class T>
    void edit(std::uint64_t page, std::size_t offset, T value) {
        store_le(desc_bytes(d, h, page) + offset, value);
        d.reseal(h);
    }
    std::string at(std::uint64_t page) { return "descriptor of page " + std::to_string(page) + ": "; }
};

TEST_F(descriptor_damage, UnknownKind) {
    edit(small_page, kDescKind, std::uint8_t{9});
    expect_corrupt(at(small_page) + "unknown kind 9");
}
TEST_F(descriptor_damage, SizeClassOutOfRange) {
    edit(small_page, kDescClass, std::uint8_t{15});
    expect_corrupt(at(small_page) + "small page with size class 15");
}
TEST_F(descriptor_damage, UsedCountDisagreesWithBitmap) {
    edit(small_page, kDescUsed, std::uint16_t(h.describe(small_page)->chunks_used() + 1));
    expect_corrupt("chunks used but its bitmap has");
}
TEST_F(descriptor_damage, BitmapBitPastCapacity) {
    std::uint64_t p = h.allocate(20, 2048, 1) / P;  // capacity 2
    d.apply(h.encode_dirty());
    edit(p, kDescWords, std::uint64_t{0b101});
    edit(p, kDescUsed, std::uint16_t{2});
    expect_corrupt(at(p) + "small page bitmap has bit 2 set, past its 2 chunks");
}
TEST_F(descriptor_damage, ElementSizeLargerThanChunk) {
    edit(small_page, kDescElemSize, std::uint32_t{5000});
    expect_corrupt("does not fit its");
}
TEST_F(descriptor_damage, TailWithoutHead) {
    edit(free_page, kDescKind, std::uint8_t{3});
    edit(free_page, kDescWords, std::uint64_t{1});
    expect_corrupt(at(free_page) + "large tail (distance 1) without its head");
}
TEST_F(descriptor_damage, HeadWithoutItsTails) {
    edit(tail, kDescKind, std::uint8_t{0});
    expect_corrupt(at(tail) + "should be tail 1 of the large object at page " + std::to_string(head));
}
TEST_F(descriptor_damage, RunLengthDisagreesWithSize) {
    edit(head, kDescWords, std::uint64_t{h.describe(head)->run_pages() + 1});
    expect_corrupt("does not match its");
}
// Metadata pages of two commits mixed (each page whole, with its own good
// checksum, as a torn or crafted file could leave them): open reads each
// page once and interprets its descriptors as it goes, so what it reports
// may be a descriptor's error or the pages' checksums against the root, but
// it is always `corrupt` naming the heap's metadata, for every page swapped.
TEST(HeapDamage, MetadataPagesOfAnotherCommitAreCorrupt) {
    heap h = test::mixed_heap(38, 3000);
    disk d;
    d.apply(h.encode_dirty());
    ASSERT_GE(h.metadata_pages().size(), 2u);
    const disk before = d;
    for (int i = 0; i < 400; ++i) h.free(h.allocate(1, 48, 1 + static_cast<std::uint32_t>(i % 3)));
    for (int i = 0; i < 200; ++i) h.allocate(2, 100, 1);  // every metadata page has changed descriptors
    d.apply(h.encode_dirty());
    ASSERT_EQ(d.root.meta_page_count, before.root.meta_page_count) << "the same chain, other contents";
    int swapped = 0;
    for (std::size_t i = 0; i < h.metadata_pages().size(); ++i) {
        const std::uint64_t page = h.metadata_pages()[i];
        if (!before.pages.count(page) || before.pages.at(page) == d.pages.at(page)) continue;
        disk mixed = d;
        mixed.pages[page] = before.pages.at(page);
        ++swapped;
        try {
            heap::decode(mixed.root, mixed.fetch());
            ADD_FAILURE() << "metadata page " << i << " of the commit before was taken";
        } catch (const error& e) {
            EXPECT_EQ(e.code(), errc::corrupt) << e.what();
            EXPECT_NE(std::string(e.what()).find("heap metadata"), std::string::npos) << e.what();
        }
    }
    EXPECT_GE(swapped, 1) << "no metadata page changed between the two commits";
    expect_same(d.decode(), h);  // the commit itself, unmixed, reads back
}

TEST(HeapDamage, RunPastHighWaterMark) {
    heap h;
    std::uint64_t p = h.allocate(1, 16, 1) / P;
    ASSERT_EQ(p, h.page_count() - 1);
    disk d;
    d.apply(h.encode_dirty());
    auto edit = [&](std::uint64_t page, std::size_t offset, auto value) {
        store_le(desc_bytes(d, h, page) + offset, value);
        d.reseal(h);
    };
    // Make the top page the head of a 5-page run with a matching size.
    edit(p, kDescKind, std::uint8_t{2});
    edit(p, kDescClass, std::uint8_t{0});
    edit(p, kDescUsed, std::uint16_t{0});
    edit(p, kDescElemSize, std::uint32_t{4096});
    edit(p, kDescWords, std::uint64_t{5});
    edit(p, kDescWords + 8, std::uint64_t{5});
    edit(p, kDescWords + 16, std::uint64_t{0});
    edit(p, kDescWords + 24, std::uint64_t{0});
    expect_error(errc::corrupt, "descriptor of page 2: large run of 5 pages runs past page_count 3",
                 [&] { d.decode(); });
}
TEST_F(descriptor_damage, TailTypeDiffersFromHead) {
    edit(tail, kDescType, std::uint32_t{h.describe(head)->type() + 1});
    expect_corrupt("differ from its head's");
}
TEST_F(descriptor_damage, ReservedPageMarkedFree) {
    edit(0, kDescKind, std::uint8_t{0});
    expect_corrupt(at(0) + "is free but lies below reserved_pages 1");
}
TEST_F(descriptor_damage, PageMarkedReservedPastTheReservedArea) {
    edit(free_page, kDescKind, std::uint8_t{5});
    expect_corrupt(at(free_page) + "is reserved but lies past reserved_pages");
}
TEST_F(descriptor_damage, NonZeroPaddingInAFreeDescriptor) {
    edit(free_page, kDescType, std::uint32_t{1});
    expect_corrupt(at(free_page) + "free descriptor has non-zero fields");
}
TEST_F(descriptor_damage, MetadataPageNotMarkedAsSuch) {
    std::uint64_t m = h.metadata_pages()[1];
    edit(m, kDescWords, std::uint64_t{0});  // says it is metadata page 0
    expect_corrupt("descriptor of page " + std::to_string(m) + ": is heap metadata page 1 but says system owner 0 tag 0");
}
TEST_F(descriptor_damage, SecondPageClaimsToBeMetadata) {
    edit(free_page, kDescKind, std::uint8_t{4});
    edit(free_page, kDescWords, std::uint64_t{1});
    expect_corrupt(at(free_page) + "claims to be heap metadata page 1");
}
TEST_F(descriptor_damage, ChainPointsTwiceAtTheSamePage) {
    // Metadata page 0's `next` points back at page 0's own logical page.
    store_le(d.meta(h, 0).data() + kOffNext, h.metadata_pages()[0]);
    d.reseal(h);
    expect_corrupt("heap metadata page 1 (logical page " + std::to_string(h.metadata_pages()[0]) +
                   "): says it is metadata page 0");
}

// Whole descriptor slots of random bytes (with a plausible kind), resealed.
TEST_F(descriptor_damage, RandomSlotsNeverCrash) {
    std::mt19937_64 rng(9);
    const auto saved = d.pages;
    const heap_root saved_root = d.root;
    for (int trial = 0; trial < 1000; ++trial) {
        std::uint64_t p = rng() % h.page_count();
        std::byte* slot = desc_bytes(d, h, p);
        for (std::size_t k = 0; k < kDescSize; ++k)
            slot[k] = rng() % 2 ? std::byte{0} : static_cast<std::byte>(rng());
        slot[kDescKind] = static_cast<std::byte>(rng() % 6);
        d.reseal(h);
        try {
            heap back = d.decode();
            auto findings = back.audit();
            ASSERT_TRUE(findings.empty()) << "trial " << trial << ": " << findings.front();
        } catch (const error& e) {
            ASSERT_EQ(e.code(), errc::corrupt) << e.what();
        }
        d.pages = saved;
        d.root = saved_root;
    }
}

// 9. Audit ----------------------------------------------------------------------------------------------

TEST(HeapAudit, FindsPlantedInconsistencies) {
    auto has = [](const std::vector<std::string>& findings, const std::string& s) {
        return std::any_of(findings.begin(), findings.end(),
                           [&](const std::string& f) { return f.find(s) != std::string::npos; });
    };
    {
        heap h = mixed_heap(4, 500);
        ASSERT_TRUE(h.audit().empty());
        std::uint64_t p = h.allocate(1, 16, 1) / P;
        heap_test_access::words(h, p, 3) |= std::uint64_t{1} << 63;  // a bit without a used count
        auto f = h.audit();
        EXPECT_TRUE(has(f, "H3: page " + std::to_string(p) + ": used")) << (f.empty() ? "" : f.front());
        EXPECT_TRUE(has(f, "H7"));
    }
    {
        heap h = mixed_heap(4, 500);
        h.free(h.allocate(1, P, 1));
        std::uint64_t free_page = 0;
        for (std::uint64_t p = 2; p < h.page_count() && !free_page; ++p)
            if (h.describe(p)->kind() == page_kind::free) free_page = p;
        ASSERT_NE(free_page, 0u);
        heap_test_access::set_kind(h, free_page, page_kind::system);  // used and free at once
        auto f = h.audit();
        EXPECT_TRUE(has(f, "H2: page " + std::to_string(free_page) + ": system but in the free-page set"));
    }
    {
        heap h;
        std::uint64_t a = h.allocate(1, P, 3);
        heap_test_access::set_kind(h, a / P + 2, page_kind::free);
        EXPECT_TRUE(has(h.audit(), "H5"));
    }
    {
        heap h;
        h.allocate(1, 16, 1);
        heap_test_access::small_chunk_counter(h) += 1;
        EXPECT_TRUE(has(h.audit(), "H7: counters"));
    }
    {
        heap h;
        heap_test_access::set_kind(h, 0, page_kind::free);
        EXPECT_TRUE(has(h.audit(), "H1: page 0"));
    }
}

// 9. Descriptors out of memory (H8, desc_table.hpp) -------------------------------

// The disk as a descriptor source, as the page engine gives the storage.
struct disk_source {
    static bool read(const void* context, std::uint64_t page, std::byte* out, char* why, std::size_t size) noexcept {
        const auto* d = static_cast<const disk*>(context);
        auto it = d->pages.find(page);
        if (it == d->pages.end()) {
            std::snprintf(why, size, "page %llu was never written", static_cast<unsigned long long>(page));
            return false;
        }
        std::memcpy(out, it->second.data(), kPageSize);
        return true;
    }
    static heap_detail::descriptor_source of(const disk& d) { return {&read, &d}; }
};

TEST(HeapDescriptors, DroppedGroupsComeBackAsTheyWere) {
    heap h = mixed_heap(3, 6000);
    disk d;
    d.apply(h.encode_dirty());
    const heap before = h;
    ASSERT_GT(h.metadata_pages().size(), 4u);
    h.page_descriptors_from(disk_source::of(d));
    h.trim_descriptors(0);
    EXPECT_EQ(h.descriptors().present, 0u);
    EXPECT_EQ(h.descriptors().dropped, h.descriptors().groups);
    EXPECT_TRUE(h.audit().empty());  // H8 holds, and reading every descriptor brings them all back
    EXPECT_EQ(h.descriptors().present, h.descriptors().groups);
    expect_same(h, before);
    EXPECT_GE(h.descriptors().read_back, h.descriptors().groups);
    for (std::uint64_t p = 0; p < h.page_count(); p += 7)
        for (std::uint64_t off : {0u, 16u, 40u, 4095u})
            EXPECT_EQ(h.place_of(p * P + off), before.place_of(p * P + off)) << p;
}

TEST(HeapDescriptors, OnlyCleanGroupsLeaveAndWorkGoesOnAcrossCommits) {
    heap h = mixed_heap(4, 4000);
    disk d;
    d.apply(h.encode_dirty());
    h.page_descriptors_from(disk_source::of(d));
    std::mt19937_64 rng(9);
    std::vector<std::uint64_t> live;
    for (int round = 0; round < 20; ++round) {
        h.trim_descriptors(2 * kPageSize);
        for (int i = 0; i < 200; ++i) {
            if (live.empty() || rng() % 3) live.push_back(h.allocate(1 + rng() % 3, 8 + rng() % 3000, 1 + rng() % 2));
            else {
                std::size_t k = rng() % live.size();
                h.free(live[k]);
                live[k] = live.back();
                live.pop_back();
            }
        }
        h.trim_descriptors(0);  // the groups the round dirtied stay (H8)
        EXPECT_GT(h.descriptors().present, 0u);
        ASSERT_TRUE(h.audit().empty()) << h.audit().front();
        d.apply(h.encode_dirty());
        h.trim_descriptors(0);
        EXPECT_EQ(h.descriptors().present, 0u) << "round " << round;
        expect_same(d.decode(), h);
    }
    for (std::uint64_t a : live) EXPECT_TRUE(h.is_allocated(a));
}

// A mixed heap committed to `d`, reading its groups back from there.
heap committed_with_source(disk& d, std::uint64_t seed, int ops) {
    heap h = mixed_heap(seed, ops);
    d.apply(h.encode_dirty());
    h.page_descriptors_from(disk_source::of(d));
    return h;
}

TEST(HeapDescriptors, ThreadsBringTheSameGroupsBackAtOnce) {
    disk d;
    heap h = committed_with_source(d, 5, 8000);
    const heap before = h;
    for (int round = 0; round < 20; ++round) {
        h.trim_descriptors(0);
        std::atomic<int> wrong{0};
        std::vector<std::thread> threads;
        for (int t = 0; t < 4; ++t)
            threads.emplace_back([&, t] {
                for (std::uint64_t p = t; p < h.page_count(); p += 3)
                    if (h.place_of(p * P + 48) != before.place_of(p * P + 48)) wrong.fetch_add(1);
            });
        for (auto& t : threads) t.join();
        EXPECT_EQ(wrong.load(), 0);
        EXPECT_EQ(h.descriptors().present, h.descriptors().groups);
    }
}

// D2: trims run while threads read descriptors, as the eviction thread's do
// while faults run. A reading holds its descriptors across a yield, so a
// trim that did not wait for it would hand it zeros.
TEST(HeapDescriptors, TrimsWhileThreadsReadNeverPullAGroupFromUnderAReader) {
    disk d;
    heap h = committed_with_source(d, 10, 8000);
    const heap before = h;
    std::atomic<bool> done{false};
    std::atomic<long> wrong{0}, reads{0};
    std::vector<std::thread> readers;
    for (int t = 0; t < 3; ++t)
        readers.emplace_back([&, t] {
            std::mt19937_64 rng(t);
            while (!done.load()) {
                const heap::descriptor_reading reading = h.reading_descriptors();
                const std::uint64_t p = rng() % h.page_count();
                const heap::page_desc* d1 = h.describe(p);
                std::this_thread::yield();
                if (!(*d1 == *before.describe(p)) || h.place_of(p * P + 40) != before.place_of(p * P + 40))
                    wrong.fetch_add(1);
                reads.fetch_add(1);
            }
        });
    // 300 trims and 2,000 readings at least (a loaded machine gives the
    // readers little time), 30 s at most.
    int trimmed = 0, round = 0;
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    for (; (round < 300 || reads.load() < 2000) && std::chrono::steady_clock::now() < until; ++round) {
        if (h.trim_descriptors(round % 2 ? 0 : 4 * kPageSize)) ++trimmed;
        std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    done = true;
    for (auto& t : readers) t.join();
    EXPECT_EQ(wrong.load(), 0);
    EXPECT_GT(trimmed, round / 3) << "trims wait for readings; they should rarely give up";
    EXPECT_GE(reads.load(), 2000);
    EXPECT_GT(h.descriptors().read_back, 100u);
    expect_same(h, before);
}

// A big store opens in bounded memory: decode drops the oldest groups as
// it goes, keeping about what it is allowed, and reads none of them back.
TEST(HeapDescriptors, DecodeKeepsOnlyWhatItIsAllowed) {
    disk d;
    const heap h = committed_with_source(d, 11, 12000);
    ASSERT_GT(h.descriptors().groups, 40u);
    constexpr std::uint64_t keep_groups = 8;
    heap back = heap::decode(d.root, d.fetch(), {}, {disk_source::of(d), keep_groups * kPageSize});
    EXPECT_LE(back.descriptors().present, keep_groups * 5 / 4);
    EXPECT_GE(back.descriptors().present, keep_groups);
    EXPECT_EQ(back.descriptors().read_back, 0u);
    EXPECT_EQ(back.descriptors().present + back.descriptors().dropped, back.descriptors().groups);
    EXPECT_TRUE(back.audit().empty()) << back.audit().front();  // H8, and every group read back
    expect_same(back, h);
    EXPECT_GT(back.descriptors().read_back, 0u);
}

// The same, all its groups dropped.
heap committed_and_dropped(disk& d, std::uint64_t seed) {
    heap h = committed_with_source(d, seed, 3000);
    h.trim_descriptors(0);
    return h;
}

TEST(HeapDescriptors, AGroupThatComesBackOtherwiseEndsTheProcessNamingIt) {
    disk d;
    heap h = committed_and_dropped(d, 6);
    d.meta(h, 1)[100] ^= std::byte{1};  // the disk returns other bytes
    EXPECT_EXIT(h.describe(84 + 3), ::testing::ExitedWithCode(common::fatal_exit_status),
                "cannot read back the heap's descriptors of pages 84 to 167 from metadata page [0-9]+: its checksum");
    d.pages.erase(h.metadata_pages()[2]);
    EXPECT_EXIT(h.place_of(2 * 84 * P), ::testing::ExitedWithCode(common::fatal_exit_status),
                "descriptors of pages 168 to 251 .*was never written");
}

// A commit that fails after encode_dirty marks everything dirty again:
// dropped groups among them have not changed and still come back as they were.
TEST(HeapDescriptors, AFailedCommitLeavesDroppedGroupsSound) {
    disk d;
    heap h = committed_and_dropped(d, 8);
    h.allocate(3, 40, 1);
    (void)h.encode_dirty();  // the storage's commit then fails: nothing reaches the disk
    h.mark_all_dirty();
    EXPECT_LT(h.descriptors().present, h.descriptors().groups);
    EXPECT_TRUE(h.audit().empty()) << h.audit().front();
    d.apply(h.encode_dirty());  // the retry
    expect_same(d.decode(), h);
}

TEST(HeapDescriptors, WithoutASourceNothingLeaves) {
    heap h = mixed_heap(7, 2000);
    disk d;
    d.apply(h.encode_dirty());
    h.trim_descriptors(0);
    EXPECT_EQ(h.descriptors().present, h.descriptors().groups);
    EXPECT_EQ(h.descriptors().dropped, 0u);
}

// The list positions against a dense model: random sets (most to 0, as
// pages fill), shrinks and growths; a chunk whose positions are all 0 is not
// held, so clearing every position gives the memory back.
TEST(ListPositions, MatchesADenseArrayAndHoldsOnlyChunksInUse) {
    list_positions positions;
    std::vector<std::uint32_t> model;
    std::mt19937_64 rng(38);
    std::uint64_t most_pages = 0;
    const auto resize = [&](std::uint64_t pages) {
        positions.resize(pages);
        model.resize(pages, 0);
        most_pages = std::max(most_pages, pages);
    };
    resize(10 * list_positions::chunk_pages + 17);
    for (int step = 0; step < 200000; ++step) {
        if (step % 20000 == 19999) resize(model.size() / 2 + rng() % model.size());  // shrinks and grows
        const std::uint64_t page = rng() % model.size();
        const std::uint32_t position = rng() % 4 == 0 ? static_cast<std::uint32_t>(1 + rng() % 1000) : 0;
        positions.set(page, position);
        model[page] = position;
    }
    ASSERT_EQ(positions.size(), model.size());
    std::uint64_t chunks_in_use = 0;
    for (std::uint64_t page = 0; page < model.size(); ++page) {
        ASSERT_EQ(positions.get(page), model[page]) << "page " << page;
        if (page % list_positions::chunk_pages == 0)
            chunks_in_use += std::any_of(model.begin() + static_cast<std::ptrdiff_t>(page),
                                         model.begin() + static_cast<std::ptrdiff_t>(std::min<std::uint64_t>(
                                                             page + list_positions::chunk_pages, model.size())),
                                         [](std::uint32_t p) { return p != 0; });
    }
    // The chunk index: a vector and a count per chunk, its capacity up to
    // twice the most chunks it had.
    const std::uint64_t table =
        2 * (most_pages / list_positions::chunk_pages + 1) * (sizeof(std::vector<std::uint32_t>) + sizeof(std::uint16_t));
    EXPECT_LE(positions.memory_bytes(), chunks_in_use * list_positions::chunk_pages * 4 + table);
    for (std::uint64_t page = 0; page < model.size(); ++page) positions.set(page, 0);
    EXPECT_LE(positions.memory_bytes(), table) << "every chunk is all zeros: none is held";
}

}  // namespace
}  // namespace steppe
