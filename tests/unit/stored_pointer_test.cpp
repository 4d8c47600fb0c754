// Crafted stored pointers (issue 12, item 5): a pointer word of a data page,
// rewritten at storage level (storage::commit recomputes the checksums, as an
// attacker or a bug would). Invariant S1 (src/page/stored_pointer.hpp) says what a
// stored word may aim at; a word that breaks it is named by store::check and
// ends a reader that faults its page in with exit 71 and a message naming
// the store, the page, the offset, the value and what it aimed at. A word
// into memory a destroyed object may have left (a free chunk or page, a
// metadata page or a page of another shape that reused it) cannot be told
// from a dangling pointer (DequeMapSlotsOfFreedBlocksDoNotEndTheReader;
// ContainersTest.DequeGrowsAtBothEnds has one into a reused store metadata
// page), so it is accepted and leads to no object. The legitimate edges
// (one past the end at a chunk boundary and at a unit's end, interior
// pointers into large objects) keep working.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <steppe/steppe.hpp>

#include <csignal>
#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <regex>
#include <string>
#include <vector>

#include "heap/heap.hpp"
#include "storage/storage.hpp"
#include "support/temp_dir.hpp"
#include "translate/swizzle.hpp"

namespace stored_pointer_test {
struct Part {
    long id;
    Part* next;
};
struct Wide {  // 40 bytes: the 48-byte class, whose pages end in 16 bytes no chunk covers
    long id;
    Wide* next;
    long pad[3];
};
struct Span {
    char* begin;
    char* end;
};
}  // namespace stored_pointer_test

using stored_pointer_test::Part;
using stored_pointer_test::Span;
using stored_pointer_test::Wide;

namespace {

constexpr std::uint64_t page_size = 4096;
constexpr long first_id = 0x5EED00;
constexpr long parts = 20;

steppe::open_options opts(bool read_only = false) {
    steppe::open_options o;
    o.read_only = read_only;
    o.create = !read_only;
    o.durable = false;
    return o;
}

long count_parts(steppe::store& s) {
    long n = 0;
    for (Part* p = *s.find_root<Part*>("parts"); p; p = p->next) ++n;
    return n;
}

// A store with a list of parts (one 16-byte-class page, one chunk destroyed),
// a Wide object (a 48-byte-class page) and a large object destroyed (free pages).
void make_store(const std::string& path) {
    auto s = steppe::store::open(path, opts());
    Part** head = s.root<Part*>("parts");
    for (long i = parts - 1; i >= 0; --i) *head = s.make<Part>(Part{first_id + i, *head});
    Part* third = (*head)->next->next;
    (*head)->next->next = third->next;
    s.destroy(third);
    *s.root<Wide*>("wide") = s.make<Wide>(Wide{1, nullptr, {}});
    s.destroy(s.make<std::array<char, 3 * page_size>>());
    s.commit();
}

// The store's committed heap and the stored word of the first part's `next`.
class crafted {
public:
    explicit crafted(const std::string& path) : storage_(steppe::storage::storage::open(path)) {
        const auto& meta = storage_->meta();
        auto root = steppe::heap_root::from_bytes(std::span(meta.data() + 8, steppe::heap_root::size));
        std::vector<std::byte> buf(page_size);
        heap_.emplace(steppe::heap::decode(root, [&](std::uint64_t page) {
            storage_->read_page(page, buf.data());
            return std::span<const std::byte>(buf);
        }));
        find_first_part();
    }
    const steppe::heap& heap() const { return *heap_; }
    std::uint64_t page() const { return page_; }
    std::size_t offset() const { return offset_; }  // of the first part's `next`
    std::uint64_t page_of(std::size_t type_size) const {
        for (std::uint64_t p = 0; p < heap_->page_count(); ++p)
            if (heap_->describe(p)->kind() == steppe::heap::page_kind::small &&
                heap_->describe(p)->elem_size() == type_size)
                return p;
        ADD_FAILURE() << "no page of " << type_size << "-byte objects";
        return 0;
    }
    std::uint64_t free_chunk_address() const {
        const auto* d = heap_->describe(page_);
        for (std::uint32_t i = 0; i < d->chunk_capacity(); ++i)
            if (!d->chunk_allocated(i)) return page_ * page_size + i * d->chunk_size();
        ADD_FAILURE() << "page " << page_ << " has no free chunk";
        return 0;
    }
    // Rewrites the first part's `next` with `word`; storage::commit checksums the page.
    void write(std::uint64_t word) {
        std::vector<std::byte> image(page_size);
        storage_->read_page(page_, image.data());
        std::memcpy(image.data() + offset_, &word, sizeof word);
        steppe::storage::page_image img{page_, image.data()};
        storage_->commit(std::span(&img, 1), storage_->meta());
    }

private:
    void find_first_part() {
        std::vector<std::byte> image(page_size);
        for (std::uint64_t p = 0; p < heap_->page_count(); ++p) {
            if (heap_->describe(p)->kind() != steppe::heap::page_kind::small) continue;
            storage_->read_page(p, image.data());
            for (std::size_t at = 0; at + sizeof(Part) <= page_size; at += 16) {
                long id;
                std::memcpy(&id, image.data() + at, sizeof id);
                if (id != first_id) continue;
                page_ = p;
                offset_ = at + offsetof(Part, next);
                return;
            }
        }
        FAIL() << "the first part is not in the store";
    }

    std::unique_ptr<steppe::storage::storage> storage_;
    std::optional<steppe::heap> heap_;
    std::uint64_t page_ = 0;
    std::size_t offset_ = 0;
};

class StoredPointer : public ::testing::Test {
protected:
    void SetUp() override { make_store(path); }

    // Crafts `word` into the first part's `next`, then expects check() to name
    // it and a walk of the list to end the process with the same words.
    void expect_refused(std::uint64_t word, const std::string& aims_at) {
        std::string page, field;
        {
            crafted c(path);
            c.write(word);
            page = std::to_string(c.page());
            field = "the pointer at offset " + std::to_string(c.offset()) +
                    " \\(offset 8 in type stored_pointer_test::Part, in field 2 'next' "
                    "\\(stored_pointer_test::Part\\*\\)\\) holds " +
                    hex(word) + ", which aims " +
                    aims_at;
        }
        const std::string where = "page " + page + ": " + field;
        std::vector<std::string> findings;
        {
            auto s = steppe::store::open(path, opts(true));
            findings = s.check();
        }
        ASSERT_EQ(findings.size(), 1u) << (findings.empty() ? "no findings" : findings[0]);
        EXPECT_TRUE(std::regex_search(findings[0], std::regex(where))) << findings[0] << "\nlacks\n" << where;
        EXPECT_EXIT(
            {
                auto s = steppe::store::open(path, opts(true));
                std::printf("%ld\n", count_parts(s));
                std::exit(0);
            },
            ::testing::ExitedWithCode(71), "fatal: cannot swizzle page " + page + " of store .*s\\.db: " + field);
    }

    // Following the word ends the process with `message`, not a bare signal.
    void expect_dangling(const std::function<std::uint64_t(const crafted&)>& aim, const std::string& message) {
        {
            crafted c(path);
            c.write(aim(c));
        }
        {
            auto s = steppe::store::open(path, opts(true));
            auto findings = s.check();
            EXPECT_TRUE(findings.empty()) << findings[0];
        }
        EXPECT_EXIT(
            {
                auto s = steppe::store::open(path, opts(true));
                std::printf("%ld\n", (*s.find_root<Part*>("parts"))->next->next->id);
                std::exit(0);
            },
            ::testing::ExitedWithCode(71), message);
    }

    static std::string hex(std::uint64_t v) {
        char buf[24];
        std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(v));
        return buf;
    }

    steppe::test::temp_dir dir;
    std::string path = dir.path("s.db");
};

TEST_F(StoredPointer, UntouchedStoreIsSoundAndWalks) {
    auto s = steppe::store::open(path, opts(true));
    auto findings = s.check();
    EXPECT_TRUE(findings.empty()) << findings[0];
    EXPECT_EQ(count_parts(s), parts - 1);
}

// Words a destroyed object may have left: check() passes, and they lead to
// no object; following one ends the process with a message saying so.
const std::string dangling = "fatal: store .*s\\.db: the program followed a pointer to 0x[0-9a-f]+, where steppe puts "
                             "stored pointers that aim at memory no object holds: a dangling pointer";

TEST_F(StoredPointer, PointerToHeapMetadataIsTakenForADanglingOne) {
    expect_dangling([](const crafted& c) { return c.heap().metadata_pages()[0] * page_size + 8; }, dangling);
}

TEST_F(StoredPointer, PointerToAFreePageIsTakenForADanglingOne) {
    expect_dangling([](const crafted& c) { return c.heap().free_pages().runs().begin()->first * page_size; },
                    dangling);
}

// The last word of a page no chunk covers: the part there has its id on that
// page's tail and its next field in the guard page after it. (Aligned, so the
// read is the guard page's fault, not UBSan's misaligned access.)
TEST_F(StoredPointer, PointerToTheEndOfAPageNoChunkCoversIsTakenForADanglingOne) {
    expect_dangling([](const crafted& c) { return c.page_of(sizeof(Wide)) * page_size + page_size - 8; },
                    "fatal: the program touched 0x[0-9a-f]+ in the address space of store .*s\\.db, where no object "
                    "is: the guard page after an object");
}

TEST_F(StoredPointer, PointerToAFreeChunkIsTakenForADanglingOne) {
    {
        crafted c(path);
        c.write(c.free_chunk_address());
    }
    auto s = steppe::store::open(path, opts(true));
    auto findings = s.check();
    EXPECT_TRUE(findings.empty()) << findings[0];
    EXPECT_EQ(count_parts(s), 2) << "a freed chunk reads as zeros: the list ends after it";
}

TEST_F(StoredPointer, PointerPastTheStoreIsRefused) {
    std::uint64_t pages = crafted(path).heap().page_count();
    expect_refused((pages + 10) * page_size, "beyond the store's " + std::to_string(pages) + " pages");
}

TEST_F(StoredPointer, PointerToTheStorageHeaderIsRefused) {
    expect_refused(16, "at page 0, which the storage layer reserves");
}

TEST_F(StoredPointer, EndPointerOffAPageBoundaryIsRefused) {
    std::uint64_t page = crafted(path).page();
    expect_refused(steppe::translate::end_tag | (page * page_size + 24),
                   "one past the end of a unit but not at a page boundary");
}

// One past the end at a chunk boundary whose next chunk is free, one past
// the end of a large object that fills its pages (an end-of-unit word) and
// of one that does not, interior pointers into a large object: all sound.
TEST(StoredPointerEdges, LegitimateEdgesPassCheckAndSwizzle) {
    steppe::test::temp_dir dir;
    std::string path = dir.path("s.db");
    {
        auto s = steppe::store::open(path, opts());
        auto* spans = s.root<std::array<Span, 4>>("spans");
        char* chunk = reinterpret_cast<char*>(s.make<Part>(Part{1, nullptr}));
        auto* full = s.make<std::array<char, 2 * page_size>>();
        auto* partial = s.make<std::array<char, page_size + 100>>();
        (*spans)[0] = {chunk, chunk + sizeof(Part)};
        (*spans)[1] = {full->data(), full->data() + full->size()};
        (*spans)[2] = {partial->data(), partial->data() + partial->size()};
        (*spans)[3] = {full->data() + page_size - 1, full->data() + page_size + 7};
        s.commit();
    }
    auto s = steppe::store::open(path, opts(true));
    auto findings = s.check();
    EXPECT_TRUE(findings.empty()) << findings[0];
    const auto& spans = *s.find_root<std::array<Span, 4>>("spans");
    EXPECT_EQ(spans[0].end - spans[0].begin, 16);
    EXPECT_EQ(spans[1].end - spans[1].begin, 2 * 4096);
    EXPECT_EQ(spans[2].end - spans[2].begin, 4096 + 100);
    EXPECT_EQ(spans[3].end - spans[3].begin, 8);
    EXPECT_EQ(reinterpret_cast<const Part*>(spans[0].begin)->id, 1);
}

// A deque's map keeps the addresses of the blocks pop_front freed in slots
// before its first block, and pop_front does not write the map's page: the
// stored map holds dangling words into freed memory. They must not end the
// reader that faults the map in.
TEST(StoredPointerEdges, DequeMapSlotsOfFreedBlocksDoNotEndTheReader) {
    steppe::test::temp_dir dir;
    std::string path = dir.path("s.db");
    {
        auto s = steppe::store::open(path, opts());
        auto* d = s.root<steppe::deque<long>>("d");
        for (long i = 0; i < 5000; ++i) d->push_back(i);
        s.commit();
        for (long i = 0; i < 4000; ++i) d->pop_front();
        s.commit();
    }
    EXPECT_EXIT(
        {
            auto s = steppe::store::open(path, opts(true));
            long sum = 0;
            for (long v : *s.find_root<steppe::deque<long>>("d")) sum += v;
            std::exit(sum == (4000 + 4999) * 1000 / 2 ? 0 : 1);
        },
        ::testing::ExitedWithCode(0), "");
}

}  // namespace
