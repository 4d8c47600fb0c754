// Encoding, decoding and auditing the heap's state. The byte layout and the
// validity rules are in heap_format.hpp; the invariants H1..H7 in heap.hpp.
//
// Divisions:
//   1. checksums and the root record
//   2. descriptor encode / decode (decode validates one descriptor)
//   3. encode_dirty
//   4. decode (headers and checksums first, then descriptors, runs, the chain)
//   5. audit
#include <algorithm>
#include <bit>
#include <cassert>
#include <cstddef>
#include <cstring>
#include <type_traits>

#include <steppe/error.hpp>

#include "heap/heap.hpp"
#include "heap/heap_format.hpp"
#include "common/crc32c.hpp"

namespace steppe {
namespace heap_detail {
namespace {

[[noreturn]] void corrupt(const std::string& message) {
    throw error(errc::corrupt, message);
}

bool all_zero(const std::byte* p, std::size_t from, std::size_t to) noexcept {
    for (std::size_t i = from; i < to; ++i)
        if (p[i] != std::byte{0}) return false;
    return true;
}

std::string kind_name(std::uint8_t kind) {
    if (kind <= 5) return to_string(static_cast<heap::page_kind>(kind));
    return "unknown kind " + std::to_string(kind);
}

}  // namespace

// 1. Checksums and the root record -------------------------------------------

std::uint32_t metadata_page_crc(std::span<const std::byte, kPageSize> page) noexcept {
    return common::crc32c(0, page.data() + kCrcStart, kPageSize - kCrcStart);
}

std::uint32_t pages_crc(std::span<const std::uint32_t> page_crcs) noexcept {
    std::uint32_t crc = 0;
    for (std::uint32_t c : page_crcs) {
        std::byte le[4];
        store_le<std::uint32_t>(le, c);
        crc = common::crc32c(crc, le, sizeof le);
    }
    return crc;
}

// 2. Descriptors ----------------------------------------------------------------

struct codec {
    using page_kind = heap::page_kind;
    using page_desc = heap::page_desc;

    // A descriptor's bytes in memory are its stored bytes: desc_table reads a
    // dropped group back as its metadata page, straight into its slot.
    static_assert(std::is_standard_layout_v<page_desc> && std::is_trivially_copyable_v<page_desc>);
    static_assert(sizeof(page_desc) == kDescSize && offsetof(page_desc, kind_) == kDescKind &&
                  offsetof(page_desc, cls_) == kDescClass && offsetof(page_desc, used_) == kDescUsed &&
                  offsetof(page_desc, type_) == kDescType && offsetof(page_desc, elem_size_) == kDescElemSize &&
                  offsetof(page_desc, spare_) == 12 && offsetof(page_desc, words_) == kDescWords);
    static_assert(desc_table::header_bytes == kMetaHeaderSize && desc_table::desc_bytes == kDescSize &&
                  desc_table::per_group == kDescsPerPage && desc_table::slot_bytes == kPageSize);

    static void encode_desc(const page_desc& d, std::byte* out) noexcept {
        out[kDescKind] = static_cast<std::byte>(d.kind_);
        out[kDescClass] = static_cast<std::byte>(d.cls_);
        store_le<std::uint16_t>(out + kDescUsed, d.used_);
        store_le<std::uint32_t>(out + kDescType, d.type_);
        store_le<std::uint32_t>(out + kDescElemSize, d.elem_size_);
        store_le<std::uint32_t>(out + 12, 0);
        for (std::size_t w = 0; w < 4; ++w) store_le<std::uint64_t>(out + kDescWords + 8 * w, d.words_[w]);
    }

    // Streaming state for invariant H5 while descriptors are decoded in page order.
    struct run_state {
        std::uint64_t head = 0, end = 0;  // the current large run is [head, end)
        std::uint32_t type = 0, elem_size = 0;
    };

    // Decodes and validates the descriptor of page `p`; `where` prefixes errors.
    static page_desc decode_desc(const std::byte* b, std::uint64_t p, const heap_root& root,
                                 run_state& run, const std::string& where) {
        auto fail = [&](const std::string& what) -> void {
            corrupt(where + "descriptor of page " + std::to_string(p) + ": " + what);
        };
        page_desc d;
        std::uint8_t kind = static_cast<std::uint8_t>(b[kDescKind]);
        if (kind > 5) fail("unknown kind " + std::to_string(kind));
        d.kind_ = static_cast<page_kind>(kind);
        d.cls_ = static_cast<std::uint8_t>(b[kDescClass]);
        d.used_ = load_le<std::uint16_t>(b + kDescUsed);
        d.type_ = load_le<std::uint32_t>(b + kDescType);
        d.elem_size_ = load_le<std::uint32_t>(b + kDescElemSize);
        for (std::size_t w = 0; w < 4; ++w) d.words_[w] = load_le<std::uint64_t>(b + kDescWords + 8 * w);
        if (!all_zero(b, 12, 16)) fail("reserved bytes 12..15 are not zero");

        if ((p < root.reserved_pages) != (d.kind_ == page_kind::reserved))
            fail(p < root.reserved_pages ? "is " + kind_name(kind) + " but lies below reserved_pages " +
                                               std::to_string(root.reserved_pages)
                                         : "is reserved but lies past reserved_pages " +
                                               std::to_string(root.reserved_pages));
        if (p < run.end) {
            if (d.kind_ != page_kind::large_tail || d.words_[0] != p - run.head)
                fail("should be tail " + std::to_string(p - run.head) + " of the large object at page " +
                     std::to_string(run.head) + " (" + std::to_string(run.end - run.head) +
                     " pages) but is " + kind_name(kind) +
                     (d.kind_ == page_kind::large_tail ? " with distance " + std::to_string(d.words_[0]) : ""));
            if (d.type_ != run.type || d.elem_size_ != run.elem_size)
                fail("large tail's type/element size " + std::to_string(d.type_) + "/" +
                     std::to_string(d.elem_size_) + " differ from its head's " + std::to_string(run.type) +
                     "/" + std::to_string(run.elem_size));
        }

        switch (d.kind_) {
        case page_kind::free:
        case page_kind::reserved:
            if (!all_zero(b, 1, kDescSize)) fail(kind_name(kind) + " descriptor has non-zero fields");
            break;
        case page_kind::small: {
            if (d.cls_ >= heap::class_count)
                fail("small page with size class " + std::to_string(d.cls_) + " (valid: 0..14)");
            std::uint32_t cap = heap::class_capacity(d.cls_);
            std::uint32_t bits = 0;
            for (auto w : d.words_) bits += static_cast<std::uint32_t>(std::popcount(w));
            if (std::uint32_t i = first_bit_past(d.words_, cap); i < 256)
                fail("small page bitmap has bit " + std::to_string(i) + " set, past its " +
                     std::to_string(cap) + " chunks");
            if (d.used_ != bits)
                fail("small page says " + std::to_string(d.used_) + " chunks used but its bitmap has " +
                     std::to_string(bits));
            if (d.used_ == 0) fail("small page with no allocated chunk");
            if (d.elem_size_ == 0 || d.elem_size_ > heap::class_size(d.cls_))
                fail("small page element size " + std::to_string(d.elem_size_) + " does not fit its " +
                     std::to_string(heap::class_size(d.cls_)) + "-byte chunks");
            break;
        }
        case page_kind::large_head: {
            if (!all_zero(b, 1, 4) || !all_zero(b, 32, kDescSize))
                fail("large head has non-zero unused fields");
            std::uint64_t pages = d.words_[0], count = d.words_[1];
            if (d.elem_size_ == 0 || count == 0)
                fail("large head with element size " + std::to_string(d.elem_size_) + " and count " +
                     std::to_string(count));
            if (count > heap::max_page_count * heap::page_size / d.elem_size_)
                fail("large head's size " + std::to_string(count) + " x " + std::to_string(d.elem_size_) +
                     " is past the heap's address space");
            std::uint64_t bytes = count * d.elem_size_;
            if (pages != (bytes + heap::page_size - 1) / heap::page_size)
                fail("large head's run of " + std::to_string(pages) + " pages does not match its " +
                     std::to_string(bytes) + " bytes");
            if (pages > root.page_count - p)
                fail("large run of " + std::to_string(pages) + " pages runs past page_count " +
                     std::to_string(root.page_count));
            run = run_state{p, p + pages, d.type_, d.elem_size_};
            break;
        }
        case page_kind::large_tail:
            if (!all_zero(b, 1, 4) || !all_zero(b, 24, kDescSize))
                fail("large tail has non-zero unused fields");
            if (p >= run.end)
                fail("large tail (distance " + std::to_string(d.words_[0]) + ") without its head");
            break;
        case page_kind::system:
            if (!all_zero(b, 1, 4) || !all_zero(b, 8, 16) || !all_zero(b, 24, kDescSize))
                fail("system page descriptor has non-zero unused fields");
            if (d.type_ == heap::heap_owner && d.words_[0] >= root.meta_page_count)
                fail("claims to be heap metadata page " + std::to_string(d.words_[0]) + " of " +
                     std::to_string(root.meta_page_count));
            break;
        }
        return d;
    }

    // 3. encode_dirty ----------------------------------------------------------

    static void encode_page(const heap& h, std::size_t index, std::array<std::byte, kPageSize>& out) {
        out.fill(std::byte{0});
        std::uint64_t first = index * kDescsPerPage;
        auto count = static_cast<std::uint16_t>(std::min<std::uint64_t>(kDescsPerPage, h.page_count() - first));
        std::uint64_t next = index + 1 < h.meta_pages_.size() ? h.meta_pages_[index + 1] : 0;
        store_le<std::uint32_t>(out.data() + kOffMagic, kMetaMagic);
        store_le<std::uint16_t>(out.data() + kOffVersion, kFormatVersion);
        out[kOffKind] = std::byte{kDescriptorPage};
        store_le<std::uint32_t>(out.data() + kOffIndex, static_cast<std::uint32_t>(index));
        store_le<std::uint64_t>(out.data() + kOffNext, next);
        store_le<std::uint16_t>(out.data() + kOffCount, count);
        for (std::size_t k = 0; k < count; ++k)
            encode_desc(h.desc_at(first + k), out.data() + kMetaHeaderSize + k * kDescSize);
        store_le<std::uint32_t>(out.data() + kOffCrc, metadata_page_crc(out));
    }
};

}  // namespace heap_detail

using namespace heap_detail;

namespace {

// The metadata chain can only be followed one page at a time, and on a cold
// open each page is a wait for the disk (about 3,000 of them on a 400 MB
// store). But a heap that grows takes a metadata page every 84 pages, so the
// pages ahead usually lie at the same stride: asking for `depth` of them
// ahead of the chain lets the disk serve them together. A wrong guess costs
// a needless read of one page, never a wrong result: the chain decides.
class chain_read_ahead {
public:
    chain_read_ahead(const heap_root& root, const heap::will_need_fn& will_need)
        : count_(root.meta_page_count), page_count_(root.page_count), will_need_(will_need) {}

    // Metadata page i is at `page`, page i + 1 at `next`.
    void step(std::uint64_t i, std::uint64_t page, std::uint64_t next) {
        if (!will_need_ || next == 0) return;
        const std::int64_t stride = static_cast<std::int64_t>(next) - static_cast<std::int64_t>(page);
        // On a new stride, the guesses already made are likely wrong: guess the window again.
        std::uint64_t from = stride == stride_ ? std::max(hinted_, i + 2) : i + 2;
        stride_ = stride;
        const std::uint64_t to = std::min(count_, i + 2 + depth);
        for (std::uint64_t j = from; j < to; ++j) {
            const std::int64_t guess = static_cast<std::int64_t>(next) + stride * static_cast<std::int64_t>(j - i - 1);
            if (guess <= 0 || static_cast<std::uint64_t>(guess) >= page_count_) break;
            will_need_(static_cast<std::uint64_t>(guess));
        }
        hinted_ = std::max(hinted_, to);
    }

private:
    static constexpr std::uint64_t depth = 32;
    const std::uint64_t count_, page_count_;
    const heap::will_need_fn& will_need_;
    std::int64_t stride_ = 0;
    std::uint64_t hinted_ = 0;  // metadata pages below this index were asked for
};

}  // namespace

std::array<std::byte, heap_root::size> heap_root::to_bytes() const noexcept {
    std::array<std::byte, size> out{};
    store_le<std::uint32_t>(out.data() + kRootMagicOff, kRootMagic);
    store_le<std::uint16_t>(out.data() + kRootVersion, kFormatVersion);
    store_le<std::uint64_t>(out.data() + kRootPageCount, page_count);
    store_le<std::uint64_t>(out.data() + kRootReserved, reserved_pages);
    store_le<std::uint64_t>(out.data() + kRootMetaCount, meta_page_count);
    store_le<std::uint64_t>(out.data() + kRootFirstMeta, first_meta_page);
    store_le<std::uint32_t>(out.data() + kRootPagesCrc, pages_crc);
    store_le<std::uint32_t>(out.data() + kRootCrc, common::crc32c(0, out.data(), kRootCrc));
    return out;
}

heap_root heap_root::from_bytes(std::span<const std::byte> bytes) {
    if (bytes.size() != size)
        corrupt("heap root: " + std::to_string(bytes.size()) + " bytes, not " + std::to_string(size));
    const std::byte* b = bytes.data();
    if (load_le<std::uint32_t>(b + kRootMagicOff) != kRootMagic) corrupt("heap root: bad magic");
    std::uint32_t stored = load_le<std::uint32_t>(b + kRootCrc), computed = common::crc32c(0, b, kRootCrc);
    if (stored != computed) corrupt("heap root: checksum mismatch");
    if (auto v = load_le<std::uint16_t>(b + kRootVersion); v != kFormatVersion)
        throw error(errc::version, "heap root: format version " + std::to_string(v) + ", this build reads " +
                                       std::to_string(kFormatVersion));
    if (!all_zero(b, 6, 8) || !all_zero(b, 44, 60)) corrupt("heap root: reserved bytes are not zero");
    heap_root r;
    r.page_count = load_le<std::uint64_t>(b + kRootPageCount);
    r.reserved_pages = load_le<std::uint64_t>(b + kRootReserved);
    r.meta_page_count = load_le<std::uint64_t>(b + kRootMetaCount);
    r.first_meta_page = load_le<std::uint64_t>(b + kRootFirstMeta);
    r.pages_crc = load_le<std::uint32_t>(b + kRootPagesCrc);
    return r;
}

heap::commit_image heap::encode_dirty() {
    commit_image out;
    std::sort(dirty_list_.begin(), dirty_list_.end());
    out.pages.reserve(dirty_list_.size());
    for (std::uint32_t index : dirty_list_) {
        meta_dirty_[index] = 0;
        assert(index < meta_pages_.size());  // H6 holds after every public call
        auto& mp = out.pages.emplace_back();
        mp.index = index;
        mp.page = meta_pages_[index];
        codec::encode_page(*this, index, mp.bytes);
        meta_crc_[index] = load_le<std::uint32_t>(mp.bytes.data() + kOffCrc);
    }
    dirty_list_.clear();
    out.root.page_count = page_count();
    out.root.reserved_pages = reserved_pages_;
    out.root.meta_page_count = meta_pages_.size();
    out.root.first_meta_page = meta_pages_.front();
    out.root.pages_crc = heap_detail::pages_crc(meta_crc_);
    return out;
}

// 4. decode ---------------------------------------------------------------------

heap heap::decode(const heap_root& root, const fetch_fn& fetch, const will_need_fn& will_need,
                  const descriptor_paging& paging) {
    if (root.reserved_pages == 0 || root.reserved_pages > max_reserved_pages)
        corrupt("heap root: reserved_pages " + std::to_string(root.reserved_pages) + " out of range");
    if (root.page_count <= root.reserved_pages || root.page_count > max_page_count)
        corrupt("heap root: page_count " + std::to_string(root.page_count) + " out of range");
    if (root.meta_page_count != meta_pages_needed(root.page_count))
        corrupt("heap root: " + std::to_string(root.meta_page_count) + " metadata pages for " +
                std::to_string(root.page_count) + " pages (need " +
                std::to_string(meta_pages_needed(root.page_count)) + ")");
    if (root.first_meta_page < root.reserved_pages || root.first_meta_page >= root.page_count)
        corrupt("heap root: first metadata page " + std::to_string(root.first_meta_page) + " out of range");

    // One pass along the chain, in metadata-page order (which is page order
    // of the descriptors): each page's header and checksum checked, then its
    // descriptors validated (the run checks (4) stream across pages) and
    // indexed, and with paging the oldest groups dropped once more than
    // keep_bytes are in memory. What needs the whole chain comes after it:
    // the pages' checksums against the root (6: all from this root's commit)
    // and the chain marks (5), from the descriptors that claim to be
    // metadata, collected on the way. A descriptor error on a page of
    // another commit is reported as that descriptor's error; the heap is
    // thrown away either way. (Two passes, the first only checking, read
    // every metadata page twice: 0.3 s of an 8 GiB store's open.) The audit,
    // a second pass over every descriptor (which a paged heap would read
    // back), is not run here: the indexes come from descriptors just
    // validated, and `check` runs it.
    heap h{no_init{}};
    h.reserved_pages_ = root.reserved_pages;
    h.meta_pages_.reserve(root.meta_page_count);
    h.meta_crc_.reserve(root.meta_page_count);
    h.descs_.set_source(paging.source);
    h.descs_.resize(root.page_count);
    h.list_pos_.resize(root.page_count);
    h.meta_dirty_.assign(root.meta_page_count, 0);
    auto where = [&](std::uint64_t i) {
        return "heap metadata page " + std::to_string(i) + " (logical page " + std::to_string(h.meta_pages_[i]) +
               "): ";
    };
    std::vector<std::pair<std::uint64_t, std::uint64_t>> claims;  // (page, the metadata index it says it is)
    std::uint64_t free_start = 0, free_length = 0;
    auto index = [&](std::uint64_t p, const page_desc& d) {  // the free set, non-full lists and counters
        if (d.kind_ == page_kind::free) {
            if (free_length == 0) free_start = p;
            ++free_length;
            return;
        }
        if (free_length > 0) h.free_.insert(free_start, free_length);
        free_length = 0;
        if (d.is_data()) h.type_bound_ = std::max(h.type_bound_, std::uint64_t{d.type_} + 1);
        switch (d.kind_) {
        case page_kind::small:
            ++h.small_pages_;
            h.small_chunks_ += d.used_;
            if (d.used_ < d.chunk_capacity()) h.list_push(p);
            break;
        case page_kind::large_head: ++h.large_objects_; [[fallthrough]];
        case page_kind::large_tail: ++h.large_pages_; break;
        case page_kind::system:
            ++h.system_pages_;
            if (d.type_ == heap_owner) claims.emplace_back(p, d.words_[0]);
            break;
        default: break;
        }
    };
    // Groups are dropped a batch at a time (one exclusive section and one
    // madvise each), so up to 5/4 of keep_bytes stay.
    const std::uint64_t keep_groups =
        paging.source ? std::max<std::uint64_t>(paging.keep_bytes / heap_detail::desc_table::slot_bytes, 1)
                      : ~std::uint64_t{0} / 2;
    const std::uint64_t drop_batch = keep_groups / 4 + 1;
    std::uint64_t oldest_kept = 0;
    codec::run_state run;
    std::uint64_t page_no = root.first_meta_page;
    chain_read_ahead ahead{root, will_need};
    for (std::uint64_t i = 0; i < root.meta_page_count; ++i) {
        h.meta_pages_.push_back(page_no);
        const std::string at = where(i);
        auto fail = [&](const std::string& what) { corrupt(at + what); };
        std::span<const std::byte> bytes = fetch(page_no);
        if (bytes.size() != kPageSize)
            fail(std::to_string(bytes.size()) + " bytes, not " + std::to_string(kPageSize));
        const std::byte* b = bytes.data();
        if (load_le<std::uint32_t>(b + kOffMagic) != kMetaMagic) fail("bad magic");
        std::uint32_t stored = load_le<std::uint32_t>(b + kOffCrc);
        if (stored != metadata_page_crc(bytes.first<kPageSize>())) fail("checksum mismatch");
        if (auto v = load_le<std::uint16_t>(b + kOffVersion); v != kFormatVersion)
            throw error(errc::version, at + "format version " + std::to_string(v) + ", this build reads " +
                                           std::to_string(kFormatVersion));
        if (auto k = static_cast<std::uint8_t>(b[kOffKind]); k != kDescriptorPage)
            fail("kind " + std::to_string(k) + ", expected 1 (descriptor page)");
        if (auto idx = load_le<std::uint32_t>(b + kOffIndex); idx != i)
            fail("says it is metadata page " + std::to_string(idx));
        const std::uint64_t first = i * kDescsPerPage;
        const std::uint64_t count = std::min<std::uint64_t>(kDescsPerPage, root.page_count - first);
        if (auto c = load_le<std::uint16_t>(b + kOffCount); c != count)
            fail("holds " + std::to_string(c) + " descriptors, expected " + std::to_string(count));
        std::uint64_t next = load_le<std::uint64_t>(b + kOffNext);
        if (i + 1 == root.meta_page_count ? next != 0
                                          : next < root.reserved_pages || next >= root.page_count)
            fail("next metadata page " + std::to_string(next) + " out of range");
        if (!all_zero(b, 11, 12) || !all_zero(b, 26, kMetaHeaderSize) ||
            !all_zero(b, kMetaHeaderSize + count * kDescSize, kPageSize))
            fail("unused bytes are not zero");
        h.meta_crc_.push_back(stored);
        ahead.step(i, page_no, next);
        page_no = next;
        for (std::uint64_t k = 0; k < count; ++k)
            index(first + k, h.desc_at(first + k) = codec::decode_desc(bytes.data() + kMetaHeaderSize + k * kDescSize,
                                                                       first + k, root, run, at));
        if (i + 1 - oldest_kept < keep_groups + drop_batch) continue;
        const heap_detail::desc_table::exclusive section(h.descs_, heap_detail::desc_table::exclusive::wait_forever);
        for (; i + 1 - oldest_kept > keep_groups; ++oldest_kept)
            h.descs_.drop(section, oldest_kept, h.meta_pages_[oldest_kept], h.meta_crc_[oldest_kept]);
    }
    if (heap_detail::pages_crc(h.meta_crc_) != root.pages_crc)
        corrupt("heap metadata: the pages' checksums do not match the root (pages from different commits?)");
    // (5) Every metadata page's descriptor says it is that page, and no
    // other page claims to be one. Both lists ascend by page.
    std::vector<std::pair<std::uint64_t, std::uint64_t>> meta_by_page;  // (logical page, index)
    meta_by_page.reserve(h.meta_pages_.size());
    for (std::uint64_t i = 0; i < h.meta_pages_.size(); ++i) meta_by_page.emplace_back(h.meta_pages_[i], i);
    std::sort(meta_by_page.begin(), meta_by_page.end());
    auto descriptor_of = [](std::uint64_t p) {
        return "heap metadata page " + std::to_string(p / kDescsPerPage) + ": descriptor of page " + std::to_string(p) +
               ": ";
    };
    auto false_claim = [&](const std::pair<std::uint64_t, std::uint64_t>& claim) {
        corrupt(descriptor_of(claim.first) + "claims to be heap metadata page " + std::to_string(claim.second) +
                ", which is page " + std::to_string(h.meta_pages_[claim.second]));
    };
    std::size_t c = 0;
    for (const auto& [p, i] : meta_by_page) {
        for (; c < claims.size() && claims[c].first < p; ++c) false_claim(claims[c]);
        if (c == claims.size() || claims[c].first != p || claims[c].second != i) {
            const page_desc& d = h.desc_at(p);
            corrupt(descriptor_of(p) + "is heap metadata page " + std::to_string(i) + " but says " +
                    kind_name(static_cast<std::uint8_t>(d.kind_)) +
                    (d.kind_ == page_kind::system
                         ? " owner " + std::to_string(d.type_) + " tag " + std::to_string(d.words_[0])
                         : ""));
        }
        ++c;
    }
    if (c < claims.size()) false_claim(claims[c]);
    if (free_length > 0) h.free_.insert(free_start, free_length);
    h.trim_hand_ = oldest_kept;  // trims go on from the oldest group still in memory
    return h;
}

// 5. audit ---------------------------------------------------------------------------

std::vector<std::string> heap::audit() const {
    std::vector<std::string> out;
    constexpr std::size_t max_findings = 100;
    std::size_t suppressed = 0;
    auto add = [&](std::string s) {
        if (out.size() < max_findings) out.push_back(std::move(s)); else ++suppressed;
    };
    auto at = [](std::uint64_t p) { return "page " + std::to_string(p) + ": "; };
    const std::uint64_t n = descs_.size();

    // H8, before any descriptor is read (which brings its group back). A
    // dropped group may be dirty again after a failed commit (mark_all_dirty):
    // it has not changed, so it still comes back as it was.
    for (std::uint64_t g = 0; g < descs_.group_count(); ++g) {
        if (descs_.is_present(g)) continue;
        const desc_table::source_page from = descs_.dropped_from(g);
        if (g >= meta_pages_.size())
            add("H8: descriptor group " + std::to_string(g) + " is out of memory but has no metadata page");
        else if (from.page != meta_pages_[g] || from.crc != meta_crc_[g])
            add("H8: descriptor group " + std::to_string(g) + " is out of memory and would come back from page " +
                std::to_string(from.page) + " with checksum " + std::to_string(from.crc) + ", not page " +
                std::to_string(meta_pages_[g]) + " with " + std::to_string(meta_crc_[g]));
    }

    stats_t count;
    if (list_pos_.size() != n) add("list positions cover " + std::to_string(list_pos_.size()) + " of " +
                                   std::to_string(n) + " pages");
    for (std::uint64_t p = 0; p < n; ++p) {
        const page_desc& d = desc_at(p);
        // H1
        if ((p < reserved_pages_) != (d.kind_ == page_kind::reserved))
            add("H1: " + at(p) + to_string(d.kind_) + (p < reserved_pages_ ? " below" : " at or past") +
                " reserved_pages " + std::to_string(reserved_pages_));
        // H2 (page side)
        bool in_free_set = free_.contains(p);
        if ((d.kind_ == page_kind::free) != in_free_set)
            add("H2: " + at(p) + to_string(d.kind_) + (in_free_set ? " but in" : " but not in") +
                " the free-page set");
        switch (d.kind_) {
        case page_kind::free:
            ++count.free_pages;
            if (!(d == page_desc{})) add("H1: " + at(p) + "free page with non-zero fields");
            break;
        case page_kind::reserved:
            ++count.reserved_pages;
            break;
        case page_kind::small: {
            ++count.small_pages;
            if (d.cls_ >= class_count) {
                add("H3: " + at(p) + "size class " + std::to_string(d.cls_));
                break;
            }
            std::uint32_t cap = d.chunk_capacity(), bits = 0;
            for (auto w : d.words_) bits += static_cast<std::uint32_t>(std::popcount(w));
            count.small_chunks += bits;
            if (bits != d.used_)
                add("H3: " + at(p) + "used " + std::to_string(d.used_) + " but " + std::to_string(bits) +
                    " bits set");
            if (d.used_ == 0 || d.used_ > cap)
                add("H3: " + at(p) + "used " + std::to_string(d.used_) + " of " + std::to_string(cap));
            if (std::uint32_t i = first_bit_past(d.words_, cap); i < 256)
                add("H3: " + at(p) + "bit " + std::to_string(i) + " set past capacity");
            if (d.elem_size_ == 0 || d.elem_size_ > d.chunk_size())
                add("H3: " + at(p) + "element size " + std::to_string(d.elem_size_));
            // H4 (page side)
            bool listed = p < list_pos_.size() && list_pos_.get(p) != 0;
            if (listed != (d.used_ < cap))
                add("H4: " + at(p) + "used " + std::to_string(d.used_) + " of " + std::to_string(cap) +
                    (listed ? " but on a non-full list" : " but not on its non-full list"));
            if (listed) {
                auto it = nonfull_.find(list_key(d.type_, d.elem_size_, d.cls_));
                if (it == nonfull_.end() || list_pos_.get(p) > it->second.size() || it->second[list_pos_.get(p) - 1] != p)
                    add("H4: " + at(p) + "list position does not point back to it");
            }
            break;
        }
        case page_kind::large_head: {
            ++count.large_objects;
            ++count.large_pages;
            std::uint64_t run = d.words_[0];
            std::uint64_t bytes = d.words_[1] * std::uint64_t{d.elem_size_};
            if (run == 0 || run > n - p) {
                add("H5: " + at(p) + "large run of " + std::to_string(run) + " pages past page_count");
                break;
            }
            if (d.elem_size_ == 0 || d.words_[1] == 0 || run != (bytes + page_size - 1) / page_size)
                add("H5: " + at(p) + "run of " + std::to_string(run) + " pages for " +
                    std::to_string(d.words_[1]) + " x " + std::to_string(d.elem_size_) + " bytes");
            for (std::uint64_t k = 1; k < run; ++k) {
                const page_desc& t = desc_at(p + k);
                if (t.kind_ != page_kind::large_tail || t.words_[0] != k || t.type_ != d.type_ ||
                    t.elem_size_ != d.elem_size_) {
                    add("H5: " + at(p + k) + "should be tail " + std::to_string(k) + " of the run at page " +
                        std::to_string(p) + " but is " + to_string(t.kind_));
                    break;
                }
            }
            break;
        }
        case page_kind::large_tail: {
            ++count.large_pages;
            std::uint64_t dist = d.words_[0];
            if (dist == 0 || dist > p || desc_at(p - dist).kind_ != page_kind::large_head ||
                desc_at(p - dist).words_[0] <= dist)
                add("H5: " + at(p) + "large tail (distance " + std::to_string(dist) + ") without its head");
            break;
        }
        case page_kind::system:
            ++count.system_pages;
            if (d.type_ == heap_owner) {
                ++count.meta_pages;
                if (d.words_[0] >= meta_pages_.size() || meta_pages_[d.words_[0]] != p)
                    add("H6: " + at(p) + "claims to be heap metadata page " + std::to_string(d.words_[0]));
            }
            break;
        default:
            add("H1: " + at(p) + "unknown kind " + std::to_string(static_cast<int>(d.kind_)));
        }
    }

    // H2 (set side): runs maximal, in range, both indexes agree.
    std::uint64_t prev_end = 0, total = 0;
    bool first_run = true;
    for (auto [start, length] : free_.runs()) {
        if (length == 0 || start < reserved_pages_ || start > n || length > n - start)
            add("H2: free run [" + std::to_string(start) + ", +" + std::to_string(length) + ") out of range");
        if (!first_run && start <= prev_end)
            add("H2: free run at " + std::to_string(start) + " touches or overlaps the previous one");
        if (!free_.runs_by_length().contains({length, start}))
            add("H2: free run at " + std::to_string(start) + " missing from the by-length index");
        prev_end = start + length;
        first_run = false;
        total += length;
    }
    if (free_.runs_by_length().size() != free_.runs().size() || total != free_.total_pages())
        add("H2: free-set indexes disagree");

    // H4 (list side)
    for (const auto& [key, list] : nonfull_) {
        if (list.empty()) add("H4: empty non-full list kept for key " + std::to_string(key));
        for (std::size_t i = 0; i < list.size(); ++i) {
            std::uint64_t p = list[i];
            if (p >= n || desc_at(p).kind_ != page_kind::small ||
                list_key(desc_at(p).type_, desc_at(p).elem_size_, desc_at(p).cls_) != key ||
                list_pos_.get(p) != i + 1)
                add("H4: non-full list entry " + std::to_string(i) + " (page " + std::to_string(p) +
                    ") is not a listed small page of its key");
        }
    }

    // H6
    if (meta_pages_.size() != meta_pages_needed(n) || count.meta_pages != meta_pages_.size())
        add("H6: " + std::to_string(meta_pages_.size()) + " metadata pages listed, " +
            std::to_string(count.meta_pages) + " marked, " + std::to_string(meta_pages_needed(n)) + " needed");
    for (std::size_t i = 0; i < meta_pages_.size(); ++i) {
        std::uint64_t p = meta_pages_[i];
        if (p >= n || desc_at(p).kind_ != page_kind::system || desc_at(p).type_ != heap_owner ||
            desc_at(p).words_[0] != i)
            add("H6: metadata page " + std::to_string(i) + " at page " + std::to_string(p) +
                " is not marked as such");
    }

    // H7
    count.page_count = n;
    stats_t kept = stats();
    if (count.free_pages != kept.free_pages || count.small_pages != kept.small_pages ||
        count.large_pages != kept.large_pages || count.system_pages != kept.system_pages ||
        count.small_chunks != kept.small_chunks || count.large_objects != kept.large_objects)
        add("H7: counters (free " + std::to_string(kept.free_pages) + ", small " +
            std::to_string(kept.small_pages) + ", large " + std::to_string(kept.large_pages) + ", system " +
            std::to_string(kept.system_pages) + ", chunks " + std::to_string(kept.small_chunks) + ", objects " +
            std::to_string(kept.large_objects) + ") differ from a recount (" + std::to_string(count.free_pages) +
            ", " + std::to_string(count.small_pages) + ", " + std::to_string(count.large_pages) + ", " +
            std::to_string(count.system_pages) + ", " + std::to_string(count.small_chunks) + ", " +
            std::to_string(count.large_objects) + ")");
    std::uint64_t sum = count.free_pages + count.small_pages + count.large_pages + count.system_pages +
                        count.reserved_pages;
    if (sum != n) add("H1: page kinds add up to " + std::to_string(sum) + ", not page_count " + std::to_string(n));
    if (suppressed > 0) out.push_back("... and " + std::to_string(suppressed) + " more findings");
    return out;
}

}  // namespace steppe
