// Persistence by reachability (object_engine.hpp): commit and rollback.
//
// The commit path, as numbered steps:
//   1. written_objects: the persistent objects the barrier recorded (dirty
//      cards' objects, flagged objects, or the remembered set)
//   2. gather: breadth first from the roots and from the references in the
//      written objects, every transient object reached (nothing else is
//      written: what nothing reaches stays transient)
//   3. cluster: those objects, in the order gather met them, fill new
//      segments (options::segment_objects, segment_bytes) at fresh pages and
//      get their oids
//   4. write_segments: each new segment's image, its objects unswizzled (a
//      reference becomes its target's oid; a reference to another store's
//      object or outside any heap is transient_pointer)
//   5. write_changed: each written object unswizzled over its committed
//      segment image; only pages whose bytes changed are written
//   6. the roots table and (if it grew) the type catalog as blobs; the meta
//   7. one storage commit; then the new objects enter the resident object
//      table and the barrier forgets the writes. If anything throws before
//      7 completes, the oids are taken back and the store is as before.
#include <steppe/error.hpp>

#include <algorithm>
#include <cstring>
#include <deque>
#include <map>

#include "objects/object_engine.hpp"
#include "storage/blob.hpp"

namespace steppe::objects::detail {

struct engine_handle::commit_plan {
    std::vector<header*> reached;  // transient objects to persist, in gather order
    struct segment {
        std::uint64_t first_page;
        std::uint32_t pages, bytes;
        std::vector<header*> objects;
        std::vector<std::uint32_t> offsets;
    };
    std::vector<segment> segments;
    std::uint64_t next_page;
    std::deque<std::array<std::byte, storage::page_size>> buffers;
    std::vector<storage::page_image> images;
};

namespace {
std::uint32_t round16(std::uint64_t n) { return static_cast<std::uint32_t>((n + 15) & ~std::uint64_t{15}); }
}  // namespace

std::vector<header*> engine_handle::written_objects() {
    std::vector<header*> out;
    auto keep = [&](header* h) {
        if (h->type != header::fault_block_type && h->type != header::free_type && h->oid() != 0) out.push_back(h);
    };
    switch (scheme_.write) {
    case barrier::pages: heap_->mark_written_pages(); [[fallthrough]];
    case barrier::cards: heap_->for_each_in_dirty_cards(keep); break;
    case barrier::object_flag:
        heap_->for_each([&](header* h) {
            if (h->word & header::dirty) keep(h);
        });
        break;
    case barrier::remembered_set:
        for (header* h : remembered_) keep(h);
        break;
    }
    return out;
}

void engine_handle::gather(commit_plan& plan, const std::vector<header*>& written) {
    auto reach = [&](std::uint64_t word) {
        if (word == 0 || (word & 1) || !heap_->contains(reinterpret_cast<void*>(word))) return;
        header* t = header_of(reinterpret_cast<void*>(word));
        if ((t->word & (header::proxy | header::marked)) || t->oid() != 0) return;
        t->word |= header::marked;
        plan.reached.push_back(t);
    };
    auto scan = [&](header* h) {
        for_each_ref(catalog_.at(h->type), h, [&](std::byte* slot, std::uint32_t) {
            std::uint64_t w;
            std::memcpy(&w, slot, sizeof w);
            reach(w);
        });
    };
    for (const auto& [name, r] : roots_) reach(r.word);
    for (header* h : written) scan(h);
    for (std::size_t i = 0; i < plan.reached.size(); ++i) scan(plan.reached[i]);
}

void engine_handle::cluster(commit_plan& plan) {
    plan.next_page = meta_.next_page;
    commit_plan::segment* open = nullptr;
    auto close = [&] {
        if (!open) return;
        open->pages = (open->bytes + storage::page_size - 1) / storage::page_size;
        open->first_page = plan.next_page;
        plan.next_page += open->pages;
        if (plan.next_page > storage::max_pages || format::make_oid(plan.next_page, 0) > format::max_oid)
            throw error(errc::no_space, storage_->path() + ": the store has no more pages for new segments");
        open = nullptr;
    };
    for (header* h : plan.reached) {
        std::uint64_t size = object_bytes(h->type, h->count);
        bool full = open && (open->objects.size() >= meta_.segment_objects ||
                             open->bytes + sizeof(format::object_entry) + sizeof(header) + round16(size) >
                                 options_.segment_bytes);
        if (full) close();
        if (!open) {
            open = &plan.segments.emplace_back();
            open->bytes = sizeof(format::segment_header);
        }
        open->objects.push_back(h);
        open->bytes += static_cast<std::uint32_t>(sizeof(format::object_entry) + sizeof(header));
        if (size > UINT32_MAX - open->bytes)
            throw error(errc::invalid_argument, storage_->path() + ": an object of " + std::to_string(size) +
                                                    " bytes is larger than a segment can hold (4 GiB)");
        open->bytes += round16(size);
    }
    close();
    for (auto& seg : plan.segments) {
        // Bodies go after the whole table, which is only now known, each
        // after 16 bytes its header takes in memory (placement::in_place).
        std::uint64_t offset = sizeof(format::segment_header) + seg.objects.size() * sizeof(format::object_entry);
        offset = round16(offset);
        for (std::uint32_t i = 0; i < seg.objects.size(); ++i) {
            header* h = seg.objects[i];
            offset += sizeof(header);
            seg.offsets.push_back(static_cast<std::uint32_t>(offset));
            offset += round16(object_bytes(h->type, h->count));
            h->word = (h->word & 0xFFFF) | format::make_oid(seg.first_page, i) << 16;
        }
        seg.bytes = static_cast<std::uint32_t>(offset);
        seg.pages = static_cast<std::uint32_t>((offset + storage::page_size - 1) / storage::page_size);
    }
}

std::uint64_t engine_handle::unswizzle_word(std::uint64_t word, const header* from, std::uint32_t offset) const {
    if (word == 0) return 0;
    auto refuse = [&](const std::string& why) {
        std::string where = from ? "a " + catalog_.at(from->type).name + ", reference at offset " + std::to_string(offset)
                                 : std::string("a root");
        throw error(errc::transient_pointer,
                    storage_->path() + ": commit: " + where + ", " + why + "; nothing was written");
    };
    if (word & 1) {
        if ((word & 0xFFFF) != tagged(0)) refuse("refers to an object of another store (or of one closed since)");
        return word >> 16;
    }
    if (blocks_ && blocks_->is_mirror(word)) return blocks_->readable(word)->oid();  // a fault block (page_fault)
    if (!heap_->contains(reinterpret_cast<void*>(word)))
        refuse("holds an address that is no object of this store (another store's object, or not a reference)");
    const header* t = header_of(reinterpret_cast<void*>(word));
    if (t->oid() == 0)
        refuse("refers to an object made since the last commit that the commit did not reach (was the "
               "referring object written without mut()?)");
    return t->oid();
}

void engine_handle::unswizzle(const header* h, std::byte* out) const {
    std::uint64_t bytes = object_bytes(h->type, h->count);
    std::memcpy(out, h + 1, bytes);
    const types::layout& l = catalog_.at(h->type);
    for (std::uint32_t i = 0; i < h->count; ++i)
        for (std::uint32_t offset : l.refs) {
            std::byte* slot = out + std::uint64_t{i} * l.size + offset;
            std::uint64_t w;
            std::memcpy(&w, slot, sizeof w);
            w = unswizzle_word(w, h, offset);
            std::memcpy(slot, &w, sizeof w);
        }
}

namespace {
std::byte* new_page(std::deque<std::array<std::byte, storage::page_size>>& buffers) {
    auto& page = buffers.emplace_back();
    page.fill(std::byte{0});
    return page.data();
}
}  // namespace

void engine_handle::write_segments(commit_plan& plan) {
    std::vector<std::byte> image;
    for (const auto& seg : plan.segments) {
        image.assign(std::uint64_t{seg.pages} * storage::page_size, std::byte{0});
        format::segment_header head{format::segment_magic, static_cast<std::uint16_t>(seg.objects.size()), 0,
                                    seg.pages, seg.bytes, seg.first_page, 0};
        std::memcpy(image.data(), &head, sizeof head);
        for (std::uint32_t i = 0; i < seg.objects.size(); ++i) {
            const header* h = seg.objects[i];
            format::object_entry e{seg.offsets[i], h->type, h->count, 0};
            std::memcpy(image.data() + sizeof head + i * sizeof e, &e, sizeof e);
            unswizzle(h, image.data() + seg.offsets[i]);
        }
        for (std::uint32_t p = 0; p < seg.pages; ++p) {
            std::byte* page = new_page(plan.buffers);
            std::memcpy(page, image.data() + std::uint64_t{p} * storage::page_size, storage::page_size);
            plan.images.push_back({seg.first_page + p, page});
        }
        stats_.objects_written += seg.objects.size();
    }
}

void engine_handle::write_changed(commit_plan& plan, const std::vector<header*>& written) {
    std::map<std::uint64_t, std::vector<header*>> by_segment;
    for (header* h : written) by_segment[format::page_of(h->oid())].push_back(h);
    std::vector<std::byte> committed, image;
    for (const auto& [page, objects] : by_segment) {
        segment_view s = read_segment(page, committed, "a commit");
        image = committed;
        for (header* h : objects) {
            const format::object_entry& e = s.entries.at(format::slot_of(h->oid()));
            if (e.type != h->type || e.count != h->count)
                throw error(errc::corrupt, storage_->path() + ": the segment at page " + std::to_string(page) +
                                               " no longer holds object " + std::to_string(h->oid()) + " as read");
            unswizzle(h, image.data() + e.offset);
        }
        for (std::uint32_t p = 0; p < s.head.pages; ++p) {
            std::uint64_t at = std::uint64_t{p} * storage::page_size;
            if (std::memcmp(image.data() + at, committed.data() + at, storage::page_size) == 0) continue;
            std::byte* out = new_page(plan.buffers);
            std::memcpy(out, image.data() + at, storage::page_size);
            plan.images.push_back({page + p, out});
        }
        stats_.objects_written += objects.size();
    }
}

void engine_handle::commit() {
    ensure_writable("commit");
    ensure_not_forked("commit");
    if (options_.place == placement::in_store) return commit_in_store();
    segment_buffers_.clear();  // they hold committed images, which this commit changes
    std::vector<header*> written = written_objects();
    commit_plan plan;
    // The new objects' entries of the resident object table, made before the
    // storage commit: once it is durable nothing may fail half-way (an entry
    // that a full allocator kept out broke R1, and the next rollback could
    // not mend it); merging nodes into a table reserved for them allocates
    // nothing.
    decltype(rot_) entering;
    try {
        gather(plan, written);
        cluster(plan);
        write_segments(plan);
        write_changed(plan, written);
        entering.reserve(plan.reached.size());
        for (header* h : plan.reached) entering.emplace(h->oid(), h);
        rot_.reserve(rot_.size() + entering.size());
        root_table roots;
        for (const auto& [name, r] : roots_)
            roots[name] = {r.type, r.word ? unswizzle_word(r.word, nullptr, 0) : 0};
        commit_meta(plan, std::move(roots), plan.reached.size(), plan.segments.size());
    } catch (...) {
        for (header* h : plan.reached) h->word &= 0xFFFF & ~header::marked;  // transient again
        throw;
    }
    rot_.merge(entering);
    for (header* h : plan.reached) {
        h->word &= ~header::marked;
        resident_bytes_ += heap_->extent_of(h);
    }
    forget_writes();
    ++stats_.commits;
    stats_.new_objects += plan.reached.size();
    stats_.unreached_objects += made_since_commit_ - std::min<std::uint64_t>(made_since_commit_, plan.reached.size());
    made_since_commit_ = 0;
    stats_.segments_written += plan.segments.size();
    enforce_budget();
}

// Steps 6 and 7 for the pages in `plan` (its next_page: the first page not
// taken by them): the roots table and catalog if they changed, the meta
// counting `objects` and `segments` more, one storage commit. If it throws,
// the store and this engine's meta are as before.
void engine_handle::commit_meta(commit_plan& plan, root_table roots, std::uint64_t objects, std::uint64_t segments) {
    format::object_meta meta = meta_;
    auto taken_pages = [&](std::uint32_t, std::uint64_t) { return plan.next_page++; };
    storage::page_source pages{taken_pages, [](storage::page_no) {}};
    std::vector<storage::page_no> catalog_chain = catalog_pages_, roots_chain = roots_pages_;
    try {
        if (roots_dirty_ || roots != committed_roots_)
            meta.roots = storage::write_blob(encode_roots(roots), format::roots_owner, roots_pages_, pages,
                                             plan.buffers, plan.images);
        if (catalog_dirty_)
            meta.catalog = storage::write_blob(catalog_.encode(), format::catalog_owner, catalog_pages_, pages,
                                               plan.buffers, plan.images);
        meta.next_page = plan.next_page;
        meta.objects += objects;
        meta.segments += segments;
        storage::meta_bytes raw{};
        std::memcpy(raw.data(), &meta, sizeof meta);
        storage_->commit(plan.images, raw);
    } catch (...) {
        catalog_pages_ = std::move(catalog_chain);  // pages past the committed ones were never written
        roots_pages_ = std::move(roots_chain);
        throw;
    }
    meta_ = meta;
    committed_roots_ = std::move(roots);
    catalog_dirty_ = roots_dirty_ = false;
    stats_.pages_committed += plan.images.size();
}

// placement::in_store (in_store.cpp): every written or new segment whole,
// its header spaces zeroed (S1), then as commit's steps 6 and 7.
void engine_handle::commit_in_store() {
    close_creating();
    commit_plan plan;
    plan.next_page = in_store_next_page_;
    std::uint64_t new_objects = 0, new_segments = 0, written = 0;
    std::vector<std::byte> image;
    for (const auto& [page, s] : in_store_) {
        if (!s.dirty) continue;
        image = s.bytes;
        for (std::uint32_t i = 0; i < s.objects; ++i)
            std::memset(image.data() + stored_entry(s, i).offset - sizeof(header), 0, sizeof(header));
        for (std::uint64_t p = 0; p < image.size() / storage::page_size; ++p) {
            std::byte* out = new_page(plan.buffers);
            std::memcpy(out, image.data() + p * storage::page_size, storage::page_size);
            plan.images.push_back({page + p, out});
        }
        new_objects += s.fresh ? s.objects : 0;
        new_segments += s.fresh ? 1 : 0;
        written += s.objects;
    }
    root_table roots;
    for (const auto& [name, r] : roots_) roots[name] = {r.type, r.word};
    commit_meta(plan, std::move(roots), new_objects, new_segments);
    in_store_next_page_ = meta_.next_page;  // past the blobs' pages too
    for (auto& [page, s] : in_store_) s.dirty = s.fresh = false;
    ++stats_.commits;
    stats_.new_objects += new_objects;
    stats_.objects_written += written;
    stats_.segments_written += new_segments;
    made_since_commit_ = 0;
    trim_stored();
}

void engine_handle::forget_writes() {
    switch (scheme_.write) {
    case barrier::pages:  // take_dirty re-armed the tracking
    case barrier::cards: heap_->clear_cards(); break;
    case barrier::object_flag: heap_->for_each([](header* h) { h->word &= ~header::dirty; }); break;
    case barrier::remembered_set:
        for (header* h : remembered_) h->word &= ~header::dirty;
        remembered_.clear();
        break;
    }
}

// A written persistent object gets its committed bytes back, swizzled anew.
void engine_handle::restore(header* h) {
    segment_view s = read_segment(format::page_of(h->oid()), segment_buffer_, "a rollback");
    const format::object_entry& e = s.entries.at(format::slot_of(h->oid()));
    std::memcpy(h + 1, s.bytes + e.offset, object_bytes(h->type, h->count));
    pending_sources_.clear();
    swizzle(h);
    note_sources();
}

void engine_handle::rollback() {
    if (!storage_) throw error(errc::invalid_argument, "object store: rollback on a closed store");
    if (options_.place == placement::in_store) {
        drop_written_segments();
    } else {
        for (header* h : written_objects()) restore(h);
        forget_writes();
    }
    roots_.clear();
    for (const auto& [name, r] : committed_roots_) roots_[name] = {r.type, root_word(name, r.type, r.address)};
    roots_dirty_ = false;
    made_since_commit_ = 0;
    enforce_budget();
}

}  // namespace steppe::objects::detail
