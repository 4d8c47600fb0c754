// Compaction (compact.hpp, docs/design.md "Compaction"). compact_into:
//   1. refuse types hashed or ordered by persistent address
//   2. the chunks to keep: every allocated chunk (a small chunk or a large
//      run), or with collect those the roots reach (breadth first)
//   3. blocks: each maximal run of kept chunks adjacent on one small page,
//      and each large run, in address order; each gets its place in a new
//      heap with the same type, element size and chunk size (placer)
//   4. the new data pages: each block's bytes copied, every pointer word of
//      its chunks forwarded (forwarding); each page written out once every
//      block on it is copied (new_pages), after the blobs and metadata of
//      step 5 are made
//   5. the new main file: the data pages, then the blobs (the catalog and
//      the vtable table as they were, the roots forwarded), the heap's
//      metadata and the meta
// page_engine::compact, at the end, runs it and swaps the file in.
//
// Migration (engine/migration.hpp) is the same pass with a plan: a chunk of a
// converted type is a block of its own, allocated anew for its element count
// at the new size (not moved whole, so C1 and C2 do not apply to it); its
// objects are built by the plan (steps 3, 4) and words aiming into it map
// through the field mapping (C5); the catalog written is the plan's.
//   C5 a word aiming at a converted object's start (or its allocation's
//      end) aims at the new object's; at a byte of a carried field, at that
//      byte of the new field; anywhere else the pass stops (unsupported,
//      naming type and offset) before writing anything. Small pages hold one
//      type, so a converted chunk's neighbours are converted too: a word at
//      the boundary of two is read as the next one's start.
//
// Invariants of the forwarding (check_placement checks C1):
//   C1 a block is moved whole, its bytes in order: a small block within one
//      page, a large run to a page boundary. So base + offset inside a block
//      and a one-past-the-end word inside a page mean after what they meant
//      before.
//   C2 kept chunks adjacent on a small page are one block, so a word at
//      their boundary (one chunk's end or the next one's start: a
//      std::vector's end is either) keeps its meaning whichever it was.
//   C3 with collect, a word keeps the chunk its byte lies in and, one past
//      the end, the chunk before it: so the two are kept together (C2).
//   C4 a word aiming at nothing kept (dangling, S1 in stored_pointer.hpp)
//      becomes null; a one-past-the-end word is end-tagged iff it lands on a
//      page boundary (S1). A word S1 refuses (past the store's pages, into
//      the storage layer's, an end tag off a page boundary) is damage, not a
//      dangling pointer: the compaction is refused (it made such words null,
//      and the store then checked clean).
#include "page/compact.hpp"

#include <steppe/error.hpp>

#include <algorithm>
#include <array>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <unordered_map>

#include "common/hex.hpp"
#include "common/memory_limit.hpp"
#include "page/engine_meta.hpp"
#include "engine/migration.hpp"
#include "page/page_check.hpp"
#include "page/page_engine.hpp"
#include "page/stored_pointer.hpp"
#include "storage/backup.hpp"
#include "translate/swizzle.hpp"

namespace steppe::page {

namespace {
constexpr std::uint64_t page_bytes = storage::page_size;

// The old store's committed page images, each read once.
class page_reader {
public:
    page_reader(const storage::storage& files, std::uint64_t page_count) : files_(files), pages_(page_count) {}

    const std::byte* page(std::uint64_t p) {
        std::unique_ptr<buffer>& slot = pages_.at(p);
        if (!slot) {
            slot = std::make_unique<buffer>();
            storage::read_failure why;
            if (!files_.read_committed_page_nothrow(p, slot->data(), &why, true)) throw error(why.code, why.message);
        }
        return slot->data();
    }
    std::uint64_t word(std::uint64_t addr) {  // pointer words are 8-aligned: never across pages
        std::uint64_t w;
        std::memcpy(&w, page(addr / page_bytes) + addr % page_bytes, sizeof w);
        return w;
    }
    // Pages below `page` are not asked for again: their memory goes.
    void forget_below(std::uint64_t page) {
        for (; forgotten_ < page && forgotten_ < pages_.size(); ++forgotten_) pages_[forgotten_].reset();
    }
    void copy(std::uint64_t addr, std::uint64_t bytes, std::byte* out) {
        while (bytes) {
            std::uint64_t part = std::min(bytes, page_bytes - addr % page_bytes);
            std::memcpy(out, page(addr / page_bytes) + addr % page_bytes, part);
            addr += part;
            out += part;
            bytes -= part;
        }
    }

private:
    using buffer = std::array<std::byte, page_bytes>;
    const storage::storage& files_;
    std::vector<std::unique_ptr<buffer>> pages_;  // by page number
    std::uint64_t forgotten_ = 0;
};

void refuse_address_ordered(const types::catalog& catalog, const std::string& path) {
    for (const types::layout& l : catalog.entries())
        for (const char* by : {"persistent_hash", "persistent_less"}) {
            bool uses = l.name.find(by) != std::string::npos ||
                        std::any_of(l.fields.begin(), l.fields.end(),
                                    [&](const types::field& f) { return f.type.find(by) != std::string::npos; });
            if (uses)
                throw error(errc::unsupported, "compaction of " + path + ": type " + l.name + " is hashed or ordered by " +
                                                   "persistent address (" + by + "), which compaction changes; " +
                                                   "such stores are not compacted yet");
        }
}

// Calls f(address) for each pointer word of chunk c where the swizzler
// finds them (translate::for_each_slot): every element slot of a small
// chunk, the elements of a large object.
template <class F>
void for_each_pointer_word(const types::catalog& catalog, const heap::chunk_info& c, F&& f) {
    if (c.type >= catalog.size() || c.elem_size == 0) return;
    const std::vector<std::uint32_t>& offsets = catalog.at(c.type).pointers;
    const std::uint64_t count = c.large ? c.elem_count : c.bytes / c.elem_size;
    for (std::uint64_t e = 0; e < count; ++e)
        for (std::uint32_t offset : offsets)
            if (offset + sizeof(std::uint64_t) <= c.elem_size) f(c.addr + e * c.elem_size + offset);
}

// The chunks stored word `word` may aim at (C3).
template <class F>
void chunks_aimed_at(const heap& h, std::uint64_t word, F&& f) {
    const bool tagged = word & translate::end_tag;
    const std::uint64_t a = word & ~translate::end_tag;
    if (a == 0) return;
    if (!tagged)
        if (std::optional<heap::chunk_info> c = h.find_chunk(a)) f(*c);
    if (tagged || a % page_bytes != 0)
        if (std::optional<heap::chunk_info> c = h.find_chunk(a - 1)) f(*c);
}

std::size_t count_allocated_chunks(const heap& h) {
    std::size_t count = 0;
    for (std::uint64_t p = 0; p < h.page_count(); ++p) {
        const heap::page_desc* d = h.describe(p);
        count += d->kind() == heap::page_kind::large_head;
        for ([[maybe_unused]] std::uint32_t offset : d->allocated_chunks()) ++count;
    }
    return count;
}

// `count` of them (count_allocated_chunks, first: a vector grown by doubling
// holds 1.5 times the list for a moment, the pass's peak on a store of small
// objects).
std::vector<heap::chunk_info> allocated_chunks(const heap& h, std::size_t count) {
    std::vector<heap::chunk_info> out;
    out.reserve(count);
    for (std::uint64_t p = 0; p < h.page_count(); ++p) {
        const heap::page_desc* d = h.describe(p);
        if (d->kind() == heap::page_kind::large_head) out.push_back(*h.find_chunk(p * page_bytes));
        for (std::uint32_t offset : d->allocated_chunks()) out.push_back(*h.find_chunk(p * page_bytes + offset));
    }
    return out;
}

// The marking reads pages in the order the pointers lead (a list built by
// pushing at its head goes backwards through the file), which defeats the
// storage's read-around: each page cost a read of its own. So every page an
// allocated chunk with pointer words lies on (`all`: address order) is read
// first, in file order, as a copy reads; the marking then finds its pages in
// memory. They are the pages the marking reads when everything is reached,
// and stay until the copy passes them, as the marking's did.
void read_in_file_order(const committed_store& from, const std::vector<heap::chunk_info>& all, page_reader& pages) {
    for (const heap::chunk_info& c : all) {
        if (c.type >= from.catalog.size() || c.elem_size == 0 || from.catalog.at(c.type).pointers.empty()) continue;
        for (std::uint64_t p = c.addr / page_bytes; p <= (c.addr + c.bytes - 1) / page_bytes; ++p) pages.page(p);
    }
}

// Breadth first from the roots; the result in address order. A chunk is
// seen once: one bit per 8 bytes of the heap, by its start (chunks are at
// least 8 bytes, so no two start in one 8-byte word); `out` is the queue
// too (a map of every chunk reached was most of the marking's time).
std::vector<heap::chunk_info> reachable_chunks(const committed_store& from, page_reader& pages) {
    std::vector<std::uint64_t> seen(from.h.page_count() * page_bytes / 8 / 64 + 1);
    std::vector<heap::chunk_info> out;
    auto reach = [&](const heap::chunk_info& c) {
        const std::uint64_t bit = c.addr / 8, mask = std::uint64_t{1} << (bit % 64);
        std::uint64_t& word = seen.at(bit / 64);
        if (word & mask) return;
        word |= mask;
        out.push_back(c);
    };
    for (const auto& [name, root] : from.roots) chunks_aimed_at(from.h, root.address, reach);
    for (std::size_t next = 0; next < out.size(); ++next) {
        const heap::chunk_info c = out[next];  // a copy: reach() may grow `out`
        for_each_pointer_word(from.catalog, c, [&](std::uint64_t at) { chunks_aimed_at(from.h, pages.word(at), reach); });
    }
    std::sort(out.begin(), out.end(), [](const heap::chunk_info& a, const heap::chunk_info& b) { return a.addr < b.addr; });
    return out;
}

struct block {
    std::uint64_t old_addr = 0, bytes = 0, new_addr = 0;
    std::size_t first = 0, chunks = 0;  // its chunks in the kept list
    conversion* converts = nullptr;     // a converted chunk's type (migration)
    std::uint64_t count = 0;            // and its element count
};

// The objects of chunk c (all its element slots: a small chunk's count is
// not recorded), as for_each_pointer_word counts them.
std::uint64_t elements(const heap::chunk_info& c) {
    if (c.elem_size == 0) return 0;
    return c.large ? c.elem_count : c.bytes / c.elem_size;
}

// C2: `kept` in address order, adjacent small chunks of one page joined;
// a converted chunk is a block of its own.
std::vector<block> make_blocks(const std::vector<heap::chunk_info>& kept, migration_plan* plan) {
    std::vector<block> out;
    for (std::size_t i = 0; i < kept.size(); ++i) {
        const heap::chunk_info& c = kept[i];
        if (conversion* conv = plan ? plan->find(c.type) : nullptr) {
            if (c.elem_size != conv->from->size)
                throw error(errc::corrupt, "migration: an object of type " + conv->from->name + " at " +
                                               std::to_string(c.addr) + " has elements of " +
                                               std::to_string(c.elem_size) + " bytes, its type " +
                                               std::to_string(conv->from->size));
            out.push_back({c.addr, c.bytes, 0, i, 1, conv, elements(c)});
            continue;
        }
        bool joins = i > 0 && !c.large && !kept[i - 1].large && c.addr % page_bytes != 0 &&
                     !out.back().converts && out.back().old_addr + out.back().bytes == c.addr;
        if (joins) {
            out.back().bytes += c.bytes;
            ++out.back().chunks;
        } else {
            out.push_back({c.addr, c.bytes, 0, i, 1});
        }
    }
    return out;
}

// count_for_class (E1 in page_check.hpp), which the store's check before
// the pass (page_engine::refuse_damaged_objects) ensured.
std::size_t class_count_for(std::uint32_t elem_size, std::size_t cls) {
    if (std::optional<std::size_t> n = count_for_class(elem_size, cls)) return *n;
    throw error(errc::corrupt, "compaction: elements of " + std::to_string(elem_size) + " bytes cannot be in " +
                                   "chunks of " + std::to_string(heap::class_size(cls)));
}

// Places blocks in a new heap, in order: each key's chunks fill its pages
// in sequence (a fresh heap with no frees hands out the lowest free chunk of
// one non-full page per key); a block that would straddle a page leaves the
// rest of the page to spacers, freed once everything is placed (C1).
class placer {
public:
    explicit placer(std::uint64_t reserved_pages) : to_(reserved_pages) {}

    std::uint64_t place(const heap& old, const heap::chunk_info& c, std::size_t chunks) {
        if (c.large) return to_.allocate(c.type, c.elem_size, c.elem_count, page_bytes);
        const std::size_t cls = old.describe(c.addr / page_bytes)->size_class();
        const std::uint32_t size = heap::class_size(cls), capacity = heap::class_capacity(cls);
        auto one = [&, n = class_count_for(c.elem_size, cls)] {
            return to_.allocate(c.type, c.elem_size, n, heap::class_alignment(cls));
        };
        for (;;) {
            const std::uint64_t first = one();
            const std::uint64_t index = first % page_bytes / size;
            if (index + chunks <= capacity) {
                for (std::size_t k = 1; k < chunks; ++k)
                    if (one() != first + k * size)
                        throw error(errc::corrupt, "compaction: the new heap did not place chunk " + std::to_string(k) +
                                                       " of a block next to the one before");
                return first;
            }
            spacers_.push_back(first);
            for (std::uint64_t i = index + 1; i < capacity; ++i) spacers_.push_back(one());
        }
    }
    // A converted chunk: a new allocation of its count at the new size.
    std::uint64_t place(const heap::chunk_info& c, const block& b) {
        const types::layout& to = *b.converts->to;
        return to_.allocate(c.type, to.size, b.count, std::max<std::size_t>(to.align, 16));
    }
    heap& finish() {
        for (std::uint64_t a : spacers_) to_.free(a);
        spacers_.clear();
        return to_;
    }

private:
    heap to_;
    std::vector<std::uint64_t> spacers_;
};

// C1, once every block is placed.
void check_placement(const std::vector<block>& blocks, const std::vector<heap::chunk_info>& kept) {
    for (const block& b : blocks) {
        if (b.converts) continue;
        bool whole = kept[b.first].large ? b.new_addr % page_bytes == 0
                                         : b.new_addr / page_bytes == (b.new_addr + b.bytes - 1) / page_bytes;
        if (!whole)
            throw error(errc::corrupt, "compaction: C1: the block at " + std::to_string(b.old_addr) + " (" +
                                           std::to_string(b.bytes) + " bytes) was placed at " +
                                           std::to_string(b.new_addr) + ", across a page");
    }
}

// A stored word of the old store as the new store stores it (C1, C4, C5).
class forwarding {
public:
    // `blocks` in address order; `plan` refuses the words C5 cannot place;
    // `from` is the old store, whose heap is `h`.
    forwarding(const std::vector<block>& blocks, const migration_plan* plan, const heap& h, const std::string& from)
        : blocks_(blocks), plan_(plan), h_(h), from_(from) {}
    std::uint64_t operator()(std::uint64_t word) const {
        const bool tagged = word & translate::end_tag;
        const std::uint64_t a = word & ~translate::end_tag;
        if (word == 0) return 0;
        refuse_unless_admitted(word);
        if (!tagged)
            if (const block* b = holding(a)) return moved(*b, a, false);
        if (!tagged && a % page_bytes == 0) return 0;
        const block* b = holding(a - 1);  // one past its end
        if (!b) return 0;
        return moved(*b, a, true);
    }

private:
    // C4: a word S1 refuses (into the storage layer's pages, past the store,
    // an end tag off a page boundary) is damage, not a dangling pointer.
    void refuse_unless_admitted(std::uint64_t word) const {
        std::uint64_t page;
        if (admitted(h_, word, page)) return;
        char text[200];
        common::fixed_message m(text, sizeof text);
        describe_aim(m, word, aim_of(h_, word), h_);
        throw error(errc::corrupt, std::string(plan_ ? "migration" : "compaction") + " of " + from_ +
                                       " refused: a stored pointer " + m.c_str() +
                                       ": the store is damaged (steppe check names the field). Nothing was changed");
    }
    std::uint64_t moved(const block& b, std::uint64_t a, bool past) const {
        std::uint64_t offset = a - b.old_addr;
        if (b.converts) {
            std::optional<std::uint64_t> to = b.converts->map(offset, b.count);
            if (!to) plan_->refuse_pointer(*b.converts, offset);
            offset = *to;
        }
        const std::uint64_t at = b.new_addr + offset;
        return past && at % page_bytes == 0 ? (at | translate::end_tag) : at;
    }
    const block* holding(std::uint64_t addr) const {
        auto it = std::upper_bound(blocks_.begin(), blocks_.end(), addr,
                                   [](std::uint64_t a, const block& b) { return a < b.old_addr; });
        if (it == blocks_.begin()) return nullptr;
        --it;
        return addr < it->old_addr + it->bytes ? &*it : nullptr;
    }
    const std::vector<block>& blocks_;
    const migration_plan* plan_;
    const heap& h_;
    const std::string& from_;
};

// Forwards the pointer word at `slot` in place.
void forward_slot(const forwarding& forward, std::byte* slot) {
    std::uint64_t w;
    std::memcpy(&w, slot, sizeof w);
    w = forward(w);
    std::memcpy(slot, &w, sizeof w);
}

// A block's bytes in the new store.
std::uint64_t new_bytes(const block& b) { return b.converts ? b.count * b.converts->to->size : b.bytes; }

// The new store's data pages as step 4 fills them. A page goes out once
// every block placed on it is copied, in batches sorted by page number
// (consecutive pages are one write), so the pass holds the pages it is
// filling and one batch, not the new store; a large block is held whole
// until it is copied. Pages no block touches are not given: they read as
// zeros (storage::page_sink). `out` is null in a dry run.
class new_pages {
public:
    new_pages(const std::vector<block>& blocks, std::uint64_t page_count, storage::page_sink* out)
        : pending_(page_count), out_(out) {
        for (const block& b : blocks) for_each_page(b, [&](std::uint64_t p) { ++pending_.at(p); });
    }
    // The new store's byte at `addr` (on a page a block is placed on).
    std::byte* at(std::uint64_t addr) {
        std::unique_ptr<buffer>& slot = filling_[addr / page_bytes];
        if (!slot) slot = std::make_unique<buffer>();  // value-initialized: zeros
        return slot->data() + addr % page_bytes;
    }
    void write(std::uint64_t addr, const std::byte* bytes, std::uint64_t size) {
        while (size) {
            const std::uint64_t part = std::min(size, page_bytes - addr % page_bytes);
            std::memcpy(at(addr), bytes, part);
            addr += part;
            bytes += part;
            size -= part;
        }
    }
    // Block `b` is copied: its pages that wait for no other block go.
    void done(const block& b) {
        for_each_page(b, [&](std::uint64_t p) {
            if (--pending_[p] != 0) return;
            auto it = filling_.find(p);
            ready_.emplace_back(p, std::move(it->second));
            filling_.erase(it);
        });
        if (ready_.size() >= batch_pages) flush();
    }
    void flush() {
        std::sort(ready_.begin(), ready_.end(), [](const auto& x, const auto& y) { return x.first < y.first; });
        std::vector<storage::page_image> images;
        for (const auto& [page, bytes] : ready_) images.push_back({page, bytes->data()});
        if (out_) out_->write(images);
        ready_.clear();
    }

private:
    using buffer = std::array<std::byte, page_bytes>;
    static constexpr std::size_t batch_pages = 1024;  // 4 MiB
    template<class F> static void for_each_page(const block& b, F&& f) {
        const std::uint64_t bytes = new_bytes(b);
        if (bytes == 0) return;
        for (std::uint64_t p = b.new_addr / page_bytes; p <= (b.new_addr + bytes - 1) / page_bytes; ++p) f(p);
    }
    std::vector<std::uint32_t> pending_;  // by page: blocks placed on it not copied yet
    std::unordered_map<std::uint64_t, std::unique_ptr<buffer>> filling_;
    std::vector<std::pair<std::uint64_t, std::unique_ptr<buffer>>> ready_;
    storage::page_sink* out_;
};

// A converted block's objects built anew (step 4), their pointer words
// forwarded (the new layout's: they hold old words).
void convert_block(page_reader& pages, const block& b, const forwarding& forward, new_pages& out) {
    conversion& conv = *b.converts;
    std::vector<std::byte> old(conv.from->size), object(conv.to->size);
    for (std::uint64_t e = 0; e < b.count; ++e) {
        pages.copy(b.old_addr + e * conv.from->size, conv.from->size, old.data());
        conv.build(old.data(), object.data());
        for (std::uint32_t offset : conv.to->pointers) forward_slot(forward, object.data() + offset);
        out.write(b.new_addr + e * conv.to->size, object.data(), object.size());
    }
    ++conv.objects;
    conv.elements += b.count;
}

// Step 4: each block copied (or converted) to its new place in `out`, every
// pointer word of its chunks forwarded.
void copy_blocks(const committed_store& from, page_reader& pages, const std::vector<heap::chunk_info>& kept,
                 const std::vector<block>& blocks, const forwarding& forward, new_pages& out) {
    for (const block& b : blocks) {
        pages.forget_below(b.old_addr / page_bytes);  // blocks come in address order
        if (b.converts) {
            convert_block(pages, b, forward, out);
        } else {
            for (std::uint64_t offset = 0; offset < b.bytes;) {
                const std::uint64_t part = std::min(b.bytes - offset, page_bytes - (b.new_addr + offset) % page_bytes);
                pages.copy(b.old_addr + offset, part, out.at(b.new_addr + offset));
                offset += part;
            }
            for (std::size_t i = b.first; i < b.first + b.chunks; ++i)
                for_each_pointer_word(from.catalog, kept[i], [&](std::uint64_t at) {
                    forward_slot(forward, out.at(b.new_addr + (at - b.old_addr)));  // 8-aligned: within a page
                });
        }
        out.done(b);
    }
    out.flush();
}

// The blobs and heap metadata of the new store and its meta (step 5).
struct new_metadata {
    std::deque<std::array<std::byte, page_bytes>> buffers;
    std::vector<storage::page_image> images;
    storage::meta_bytes meta{};
};

void write_metadata(const committed_store& from, heap& to, const root_table& roots, const migration_plan* plan,
                    new_metadata& out) {
    storage::page_source source = system_pages(to);
    engine_meta meta = from.meta;
    auto carry = [&](const storage::blob_ref& ref, std::uint32_t owner, const char* what) {
        std::vector<storage::page_no> old_chain, new_chain;
        if (!ref.pages) return ref;  // never written
        return storage::write_blob(storage::read_blob(from.files, ref, owner, what, old_chain), owner, new_chain,
                                   source, out.buffers, out.images);
    };
    if (plan) {
        std::vector<storage::page_no> chain;
        meta.catalog = storage::write_blob(plan->catalog.encode(), catalog_owner, chain, source, out.buffers, out.images);
    } else {
        meta.catalog = carry(from.meta.catalog, catalog_owner, "type catalog");
    }
    meta.vtables = carry(from.meta.vtables, vtables_owner, "vtable table");
    std::vector<storage::page_no> roots_chain;
    if (from.meta.roots.pages)
        meta.roots = storage::write_blob(encode_roots(roots), roots_owner, roots_chain, source, out.buffers, out.images);
    heap::commit_image heap_image = to.encode_dirty();
    for (const heap::metadata_page& m : heap_image.pages) {
        out.buffers.emplace_back();
        std::memcpy(out.buffers.back().data(), m.bytes.data(), page_bytes);
        out.images.push_back({m.page, out.buffers.back().data()});
    }
    auto root_bytes = heap_image.root.to_bytes();
    std::memcpy(meta.heap, root_bytes.data(), root_bytes.size());
    std::memcpy(out.meta.data(), &meta, sizeof meta);
}

void tally(const types::catalog& catalog, const heap::chunk_info& c, std::map<std::string, compact_report::by_type>& to) {
    const std::string& name = c.type < catalog.size() ? catalog.at(c.type).name : "type " + std::to_string(c.type);
    compact_report::by_type& t = to[name];
    t.type = name;
    ++t.objects;
    t.bytes += c.bytes;
}

// Kept and freed by type: `kept` is a subset of `all`, both in address order.
void report_by_type(const types::catalog& catalog, const std::vector<heap::chunk_info>& all,
                    const std::vector<heap::chunk_info>& kept, compact_report& r) {
    std::map<std::string, compact_report::by_type> kept_by, freed_by;
    std::size_t k = 0;
    for (const heap::chunk_info& c : all) {
        bool keeps = k < kept.size() && kept[k].addr == c.addr;
        tally(catalog, c, keeps ? kept_by : freed_by);
        if (keeps) ++k;
    }
    for (auto& [name, t] : kept_by) r.kept.push_back(t);
    for (auto& [name, t] : freed_by) r.freed.push_back(t);
}

// The copy keeps about 430 bytes for each page of the new store until the
// end (the pages written, their checksums: measured with heaptrack on a
// 97,017-page store); with the chunk lists checked before they were made
// and made by now, a pass that cannot fit that in what is left is refused
// here, before it writes anything (a tester's compaction in a 128 MiB
// cgroup passed the first check and was killed halfway).
constexpr std::uint64_t copy_bytes_per_page = 512;

void ensure_room_to_copy(std::uint64_t pages_after, const std::string& what) {
    common::ensure_available(pages_after * copy_bytes_per_page, what,
                             "what its copy keeps for the new store's " + std::to_string(pages_after) + " pages, " +
                                 std::to_string(copy_bytes_per_page) + " bytes each");
}
}  // namespace

compact_report compact_into(const committed_store& from, const storage::rewrite_target& target, bool collect,
                            migration_plan* plan) {
    refuse_address_ordered(from.catalog, from.files.path());
    page_reader pages(from.files, from.h.page_count());
    // What grows with the store is the chunk lists (every chunk; with
    // collect, the kept ones too), checked before they are made.
    const std::size_t chunks = count_allocated_chunks(from.h);
    const std::size_t list_bytes = sizeof(heap::chunk_info) * (collect ? 2 : 1);
    common::ensure_available(chunks * list_bytes, std::string(plan ? "migration" : "compaction") + " of " + from.files.path(),
                             "its lists of " + std::to_string(chunks) + " allocated chunks, " +
                                 std::to_string(list_bytes) + " bytes each");
    const std::vector<heap::chunk_info> all = allocated_chunks(from.h, chunks);
    if (collect) read_in_file_order(from, all, pages);
    const std::vector<heap::chunk_info> reachable = collect ? reachable_chunks(from, pages) : std::vector<heap::chunk_info>{};
    const std::vector<heap::chunk_info>& kept = collect ? reachable : all;  // not a copy: 40 bytes a chunk
    std::vector<block> blocks = make_blocks(kept, plan);
    placer place(from.h.reserved_pages());
    for (block& b : blocks)
        b.new_addr = b.converts ? place.place(kept[b.first], b) : place.place(from.h, kept[b.first], b.chunks);
    heap& to = place.finish();
    check_placement(blocks, kept);
    ensure_room_to_copy(to.page_count(), std::string(plan ? "migration" : "compaction") + " of " + from.files.path());
    const forwarding forward(blocks, plan, from.h, from.files.path());
    root_table roots = from.roots;
    for (auto& [name, root] : roots) root.address = forward(root.address);
    new_metadata metadata;
    write_metadata(from, to, roots, plan, metadata);
    // The data pages as the copy gives them, then the metadata; the meta goes
    // in the header (storage::write_main_file: each page written once).
    auto copy_into = [&](storage::page_sink* sink) {
        new_pages out(blocks, to.page_count(), sink);
        copy_blocks(from, pages, kept, blocks, forward, out);
    };
    if (target) {
        target([&](storage::page_sink& sink) {
            copy_into(&sink);
            sink.write(metadata.images);
            return metadata.meta;
        });
    } else {
        copy_into(nullptr);
    }

    compact_report r;
    r.pages_after = to.page_count();
    report_by_type(from.catalog, all, kept, r);
    return r;
}

// 1. refuse: changes since the last commit, a reader (it would go on
//    reading the old files)
// 2. checkpoint: the old main file alone holds the old store
// 3. the pager goes: nothing maps the store, no eviction thread runs
// 4. the new main file beside the old one, complete and durable (`pass`)
// 5. the swap (storage::replace_store); the old files are released
// compact and migrate; `what` names the operation in messages. With `write`
// false (a dry run) step 4 writes nothing and step 5 is left out. Steps 1
// (readers), 2, 4 and 5 are storage::rewrite_store, shared with the object engine.
compact_report page_engine::rewrite(const std::string& what, bool write, const rewrite_pass& pass) {
    ensure_writable();
    struct release {
        page_engine& e;
        ~release() {
            e.pager_.reset();
            e.storage_.reset();
        }
    } closes{*this};
    require_no_changes(what.c_str());
    refuse_damaged_objects(what);
    return storage::rewrite_store(*storage_, path(), what, write, io_, [&](const storage::rewrite_target& target) {
        pager_.reset();
        std::unique_ptr<heap> h = load_committed_heap();
        return pass({*storage_, committed_.meta, *h, committed_.catalog, committed_.roots}, target);
    });
}

compact_report page_engine::compact(const compact_options& options) {
    return rewrite("compaction", true, [&](const committed_store& from, const storage::rewrite_target& target) {
        return compact_into(from, target, options.collect);
    });
}

migrate_report page_engine::migrate(const migration& m, const migrate_options& options) {
    return migrating::run_migration(committed_.catalog, m, path(), migrating::engine_kind::page, [&](migration_plan& plan) {
        return rewrite("migration", !options.dry_run,
                       [&](const committed_store& from, const storage::rewrite_target& target) {
            return compact_into(from, target, options.collect, &plan);
        });
    });
}

}  // namespace steppe::page
