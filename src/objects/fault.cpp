// Object faulting (object_engine.hpp): the residency checks' slow paths, and
// reading a segment into the heap.
//
// The fault path, as numbered steps:
//   1. a check finds the word is not a resident object's address: a fault
//      block not yet indirect (resolve_fault_block) or a tagged oid
//      (resolve_id) -> engine_handle::fault_in(oid)
//   2. the object is in the resident object table: done (id schemes)
//   3. read_segment: the segment's pages through the storage manager, its
//      header and object table checked against the store
//   4. materialize: copy the object (granularity::object) or every object of
//      the segment not in memory yet (logical_segment) into the heap, enter it
//      in the table, and turn a fault block standing for it into an indirect
//      block
//   5. swizzle each copied object's references: null stays null; an oid
//      becomes what the scheme keeps in a slot (word_for_oid): under
//      fault_block the address of the resident object or of its fault block
//      (made if there is none), under id and id_self_heal the tagged oid
//   6. the check returns the body; fault_block and id_self_heal patch the slot.
// A step that finds damage undoes what steps 4 and 5 did (undo_fault), so
// the heap never holds an object whose references were not translated.
//
// Invariant T1 (typed references): a reference field refers to objects of
// the one type its layout names (types::ref_target), so ref<T> never reads
// an object that is not a T. The store's bytes are not trusted for it:
//  - swizzle (word_for_oid) compares the type a reference field wants with
//    the target's type where that is known (a resident object), and
//    otherwise records the want: in the target's fault block (its count
//    field) or, under the id schemes, in expected_type_; roots want the type
//    the roots table gives (root_word);
//  - enter compares a faulted object's type with the want recorded for it;
//  - the program's layouts of every type a reference can lead to are
//    compared with the store's catalog before the first object of one is
//    reached (type_index);
// and `steppe check` verifies every stored reference's target type (O2).
#include <steppe/error.hpp>

#include <algorithm>
#include <cstring>

#include "objects/object_engine.hpp"

namespace steppe::objects::detail {

namespace {
std::uint64_t round16(std::uint64_t n) { return (n + 15) & ~std::uint64_t{15}; }
}  // namespace

void* resolve_fault_block(std::uint64_t& slot) {
    void* body = engine_at(header_of(reinterpret_cast<void*>(slot))->store()).follow(slot);
    slot = reinterpret_cast<std::uintptr_t>(body);  // indirection bypassed from now on
    return body;
}

void* resolve_id(std::uint64_t word) {
    unsigned slot = static_cast<unsigned>(word >> 8) & 0xFF;
    void* body = engine_of_tagged(word).fault_in(word >> 16);
    const barrier_state& s = open_stores[slot];
    s.rot_cache[(word >> 16) & s.rot_cache_mask] = {word, body};
    return body;
}

void remember(header* h) {
    h->word |= header::dirty;
    engine_at(h->store()).remember(h);
}

namespace {
// The header `word` leads to, read in the heap for a fault block's
// protected address (page_fault: whichever open store's mirror holds it).
const header* readable_header(std::uint64_t word) {
    for (const barrier_state& s : open_stores)
        if (s.mirror != 0 && word - s.mirror < s.heap_bytes)
            return header_of(reinterpret_cast<void*>(word - s.mirror + s.heap_base));
    return header_of(reinterpret_cast<void*>(word));
}

// (the store's tag: a tagged id's low 16 bits, oid) for a persistent
// object, (0, address) for a transient one.
std::pair<std::uint64_t, std::uint64_t> identity(std::uint64_t word) {
    if (word & 1) return {word & 0xFFFF, word >> 16};
    const header* h = readable_header(word);
    if (h->oid() == 0) return {0, word};  // transient: never behind a fault block
    return {engine_at(h->store()).tagged(0), h->oid()};
}
}  // namespace

bool same_object(std::uint64_t a, std::uint64_t b) { return identity(a) == identity(b); }

// Through indirect blocks (whose object may have been evicted since and be a
// fault block again) to the object; a victim gets its second chance.
void* engine_handle::follow(std::uint64_t word) {
    if (word == 0) return nullptr;
    if (word & 1) return fault_in(word >> 16);
    for (header* h = header_at(word);;) {
        if (!(h->word & header::proxy)) return h + 1;
        if (h->word & header::victim) return rescue(h);
        if (!(h->word & header::indirect)) return fault_in(h->oid());
        void* body;
        std::memcpy(&body, h + 1, sizeof body);
        h = header_of(body);
    }
}

void* engine_handle::rescue(header* h) {
    h->word &= ~(header::proxy | header::victim);
    ++stats_.rescued_victims;
    return h + 1;
}

std::uint64_t engine_handle::oid_of_word(std::uint64_t word) const {
    if (word & 1) return word >> 16;
    return header_at(word)->oid();
}

header* engine_handle::header_at(std::uint64_t word) const noexcept {
    if (blocks_ && blocks_->is_mirror(word)) return blocks_->readable(word);
    return header_of(reinterpret_cast<void*>(word));
}

void* engine_handle::fault_in(std::uint64_t oid) {
    if (!storage_) throw error(errc::invalid_argument, "object store: a reference followed after its store closed");
    auto it = rot_.find(oid);
    if (it != rot_.end() && it->second->type != header::fault_block_type)
        return it->second->word & header::victim ? rescue(it->second) : it->second + 1;
    std::vector<header*> copied;
    header* h = fault_one(oid, copied);
    if (options_.convert == conversion::eager) bring_in_reachable(std::move(copied));
    return h + 1;
}

// Steps 3-5 for `oid`, not in memory: its header; the objects entered are
// appended to `copied`. Undone if it throws before it holds.
header* engine_handle::fault_one(std::uint64_t oid, std::vector<header*>& copied) {
    ++stats_.segment_faults;
    std::uint64_t page = format::page_of(oid);
    std::size_t first = copied.size();
    faulting_.clear();
    pending_sources_.clear();
    try {
        read_in(oid, copied);
        for (std::size_t i = first; i < copied.size(); ++i) swizzle(copied[i]);
    } catch (...) {
        undo_fault();
        copied.resize(first);
        throw;
    }
    // Wants are forgotten once the fault holds: a fault undone meets them again.
    if (!expected_type_.empty())
        for (const auto& [h, block] : faulting_) expected_type_.erase(h->oid());
    if (swizzle_ == swizzling::eager) {
        note_sources();
        for (const auto& [h, block] : faulting_) eliminate(h, block);
    }
    faulting_.clear();
    auto found = rot_.find(oid);
    if (found == rot_.end() || found->second->type == header::fault_block_type)
        throw error(errc::corrupt, storage_->path() + ": a reference names object " + std::to_string(oid) +
                                       " (slot " + std::to_string(format::slot_of(oid)) + " of the segment at page " +
                                       std::to_string(page) + "), which the segment does not hold; run `steppe check " +
                                       storage_->path() + "`");
    return found->second;
}

// conversion::eager: every object reachable from `work` comes in (Moss's
// eager swizzling of the whole collection before work).
void engine_handle::bring_in_reachable(std::vector<header*> work) {
    while (!work.empty()) {
        header* h = work.back();
        work.pop_back();
        for_each_ref(catalog_.at(h->type), h, [&](std::byte* slot, std::uint32_t) {
            std::uint64_t w;
            std::memcpy(&w, slot, sizeof w);
            if (w == 0) return;
            std::uint64_t oid = oid_of_word(w);
            auto it = rot_.find(oid);
            if (oid != 0 && (it == rot_.end() || it->second->type == header::fault_block_type)) fault_one(oid, work);
        });
    }
}

// swizzling::eager, once a fault (or a rollback's restore) holds: the slots
// it swizzled to stand-ins join their targets' source lists.
void engine_handle::note_sources() {
    for (const auto& [oid, slot] : pending_sources_) {
        std::uint64_t& head = source_heads_[oid];
        sources_.push_back({slot, head});
        head = sources_.size();
    }
    pending_sources_.clear();
}

// swizzling::eager: `object` came in (`block` stood for it, or none): each
// slot swizzled to its stand-in that still holds it gets its address.
void engine_handle::eliminate(header* object, const header* block) {
    auto it = source_heads_.find(object->oid());
    if (it == source_heads_.end()) return;
    std::uint64_t stand_in = !block ? tagged(object->oid())
                             : blocks_ ? blocks_->word_of(block)
                                       : reinterpret_cast<std::uintptr_t>(block + 1);
    std::uint64_t direct = reinterpret_cast<std::uintptr_t>(object + 1);
    for (std::uint64_t next = it->second; next != 0; next = sources_[next - 1].next) {
        std::uint64_t now;
        std::memcpy(&now, sources_[next - 1].slot, sizeof now);
        if (now != stand_in) continue;  // rewritten since
        std::memcpy(sources_[next - 1].slot, &direct, sizeof direct);
        ++stats_.refs_repointed;
    }
    source_heads_.erase(it);
    if (source_heads_.empty()) sources_.clear();
}

// Steps 3 and 4 for a fault on `oid`: the objects entered, in `copied`.
void engine_handle::read_in(std::uint64_t oid, std::vector<header*>& copied) {
    std::uint64_t page = format::page_of(oid);
    if (options_.fetch == granularity::object) {
        const segment_view& s = buffered_segment(page, "a reference");
        if (format::slot_of(oid) < s.head.objects) copied.push_back(materialize(s, format::slot_of(oid)));
    } else {
        std::uint64_t read = bring_in(page, copied, "a reference");
        // physical_segment: the segments after it until 32 KiB of pages are read (blob pages skipped)
        for (std::uint64_t p = page + read;
             options_.fetch == granularity::physical_segment && read < physical_segment_pages && p < meta_.next_page;) {
            std::uint64_t n = is_blob_page(p) ? 0 : bring_in(p, copied, "a physical segment");
            read += n;
            p += std::max<std::uint64_t>(n, 1);
        }
    }
}

// Every object entered by the failed fault leaves the table and the heap; a
// fault block that stood for one stands for it again.
void engine_handle::undo_fault() {
    for (auto it = faulting_.rbegin(); it != faulting_.rend(); ++it) {
        auto [h, block] = *it;
        std::uint64_t oid = h->oid();
        if (block) {
            block->word &= ~header::indirect;
            std::memset(block + 1, 0, sizeof(void*));  // the address (page_fault keeps its sources after it)
            rot_[oid] = block;
        } else {
            rot_.erase(oid);
        }
        resident_bytes_ -= heap_->extent_of(h);
        heap_->release(h, 0);
    }
    faulting_.clear();
    pending_sources_.clear();
}

bool engine_handle::is_blob_page(std::uint64_t page) {
    segment_buffer_.resize(storage::page_size);
    storage_->read_page(page, segment_buffer_.data());
    std::uint32_t magic;
    std::memcpy(&magic, segment_buffer_.data(), sizeof magic);
    return magic == storage::blob_magic;
}

// The segment at `page` as read_segment checked it, from the segment buffers
// if it is there (Mneme kept segments in buffers: a fault on another object
// of a segment read before reads nothing). The buffers hold committed
// images, so a commit empties them; at most segment_buffer_bytes in all. The
// view is valid until the next call.
const engine_handle::segment_view& engine_handle::buffered_segment(std::uint64_t page, const char* why) {
    ++buffer_clock_;
    for (buffered& b : segment_buffers_)
        if (b.view.page == page) {
            b.used = buffer_clock_;
            ++stats_.segment_buffer_hits;
            return b.view;
        }
    buffered fresh;
    fresh.view = read_segment(page, fresh.bytes, why);
    fresh.used = buffer_clock_;
    std::uint64_t held = fresh.bytes.size();
    for (const buffered& b : segment_buffers_) held += b.bytes.size();
    while (held > segment_buffer_bytes && !segment_buffers_.empty()) {
        auto oldest = std::min_element(segment_buffers_.begin(), segment_buffers_.end(),
                                       [](const buffered& a, const buffered& b) { return a.used < b.used; });
        held -= oldest->bytes.size();
        segment_buffers_.erase(oldest);
    }
    segment_buffers_.push_back(std::move(fresh));  // a moved vector keeps its bytes where the view points
    return segment_buffers_.back().view;
}

// Every object of the segment at `page` not in memory yet, copied
// (placement::copy) or in place; returns the segment's pages.
std::uint64_t engine_handle::bring_in(std::uint64_t page, std::vector<header*>& copied, const char* why) {
    if (options_.place == placement::in_place) return bring_in_place(page, copied, why);
    const segment_view& s = buffered_segment(page, why);
    for (std::uint32_t i = 0; i < s.head.objects; ++i) {
        auto r = rot_.find(format::make_oid(s.page, i));
        if (r == rot_.end() || r->second->type == header::fault_block_type) copied.push_back(materialize(s, i));
    }
    return s.head.pages;
}

// placement::in_place: the segment's pages are read straight into one block
// of the heap, whose bytes then become the objects: each one's header is
// written into the 16 bytes the format leaves before it, and what is not an
// object (the segment header and table, gaps, the tail, objects already in
// memory) becomes free blocks. No object is copied.
std::uint64_t engine_handle::bring_in_place(std::uint64_t page, std::vector<header*>& copied, const char* why) {
    format::segment_header head = read_segment_header(page, segment_buffer_, why);
    std::uint64_t bytes = std::uint64_t{head.pages} * storage::page_size;
    header* block = heap_->allocate(bytes - sizeof(header));
    auto* base = reinterpret_cast<std::byte*>(block);
    segment_view s;
    heap_->make_resident(base, bytes);
    try {
        for (std::uint32_t i = 0; i < head.pages; ++i) storage_->read_page(page + i, base + i * storage::page_size);
        s = view_segment(page, base, why);
    } catch (...) {
        heap_->free_range(reinterpret_cast<std::uintptr_t>(block), bytes);
        throw;
    }
    auto at = reinterpret_cast<std::uintptr_t>(base);
    std::uint64_t done = 0;  // bytes of the block already made objects or free blocks
    for (std::uint32_t i = 0; i < s.head.objects; ++i) {
        const format::object_entry& e = s.entries[i];
        std::uint64_t slot_at = e.offset - sizeof(header), extent = sizeof(header) + round16(object_bytes(e.type, e.count));
        if (slot_at > done) heap_->free_range(at + done, slot_at - done);
        done = slot_at + extent;
        std::uint64_t oid = format::make_oid(page, i);
        auto r = rot_.find(oid);
        if (r != rot_.end() && r->second->type != header::fault_block_type) {
            heap_->free_range(at + slot_at, extent);  // in memory already
            continue;
        }
        auto* h = reinterpret_cast<header*>(at + slot_at);
        heap_->note_object(h);
        copied.push_back(enter(h, oid, e));
    }
    if (done < bytes) heap_->free_range(at + done, bytes - done);
    return head.pages;
}

format::segment_header engine_handle::read_segment_header(std::uint64_t page, std::vector<std::byte>& buffer,
                                                          const char* why) const {
    if (page < 1 || page >= meta_.next_page)
        throw segment_damage(page, why, "the page is outside the object pages (1.." +
                                            std::to_string(meta_.next_page - 1) + ")");
    buffer.resize(storage::page_size);
    storage_->read_page(page, buffer.data());
    format::segment_header h;
    std::memcpy(&h, buffer.data(), sizeof h);
    if (h.magic != format::segment_magic || h.first_page != page) throw segment_damage(page, why, "no segment header");
    std::uint64_t table_end = sizeof h + std::uint64_t{h.objects} * sizeof(format::object_entry);
    if (h.objects < 1 || h.objects > format::max_segment_objects || h.pages < 1 ||
        page + h.pages > meta_.next_page || h.bytes < table_end ||
        h.bytes > std::uint64_t{h.pages} * storage::page_size ||
        h.pages != (h.bytes + storage::page_size - 1) / storage::page_size)
        throw segment_damage(page, why, std::to_string(h.objects) + " objects in " + std::to_string(h.pages) +
                                            " pages and " + std::to_string(h.bytes) + " bytes do not fit");
    return h;
}

error engine_handle::segment_damage(std::uint64_t page, const char* why, const std::string& what) const {
    const std::string& path = storage_->path();
    return error(errc::corrupt, path + ": the segment at page " + std::to_string(page) + " (read for " + why +
                                    ") is damaged: " + what + "; run `steppe check " + path + "`");
}

engine_handle::segment_view engine_handle::read_segment(std::uint64_t page, std::vector<std::byte>& buffer,
                                                        const char* why) const {
    format::segment_header h = read_segment_header(page, buffer, why);
    buffer.resize(std::uint64_t{h.pages} * storage::page_size);
    for (std::uint32_t i = 1; i < h.pages; ++i) storage_->read_page(page + i, buffer.data() + i * storage::page_size);
    return view_segment(page, buffer.data(), why);
}

// The segment whose pages are at `bytes`, its header (read_segment_header
// checked it) and object table checked against the catalog.
// Invariant O6: a segment is packed as every writer packs it (commit.cpp,
// in_store.cpp, compact.cpp): each object starts 16 bytes (its header's
// place in memory) past the 16-byte boundary at or after the end of the
// table or of the object before it, the byte count ends at the last
// object's 16-byte boundary, and the pages are the fewest that hold it. So
// an entry whose count or type was changed to another that fits the
// segment moves every later object off its place and is refused here, at
// every read, not served short (a tester lowered an array's count by one).
engine_handle::segment_view engine_handle::view_segment(std::uint64_t page, const std::byte* bytes,
                                                        const char* why) const {
    segment_view s;
    s.page = page;
    std::memcpy(&s.head, bytes, sizeof s.head);
    const auto& h = s.head;
    auto damaged = [&](const std::string& what) { return segment_damage(page, why, what); };
    s.entries.resize(h.objects);
    std::memcpy(s.entries.data(), bytes + sizeof h, h.objects * sizeof(format::object_entry));
    std::uint64_t end = round16(sizeof h + std::uint64_t{h.objects} * sizeof(format::object_entry));
    for (std::uint32_t i = 0; i < h.objects; ++i) {
        const auto& e = s.entries[i];
        // Named only when damaged: this runs for every object a fault or a
        // compaction reads.
        auto which = [i] { return "object " + std::to_string(i); };
        if (e.offset != end + sizeof(header))
            throw damaged(which() + " is at byte " + std::to_string(e.offset) + ", not at " +
                          std::to_string(end + sizeof(header)) + (i == 0 ? ", after the object table" : ", after object " + std::to_string(i - 1)) +
                          " (invariant O6)");
        if (e.type >= catalog_.size()) throw damaged(which() + " has type " + std::to_string(e.type) + ", not in the catalog");
        std::uint64_t size = object_bytes(e.type, e.count);
        if (e.count == 0 || e.offset + size > h.bytes)
            throw damaged(which() + " (" + catalog_.at(e.type).name + " x " + std::to_string(e.count) +
                          ") ends past the segment");
        end = round16(e.offset + size);
    }
    if (end != h.bytes)
        throw damaged("its objects end at byte " + std::to_string(end) + ", its header says " + std::to_string(h.bytes) +
                      " (invariant O6)");
    s.bytes = bytes;
    return s;
}

// Copies object `slot` of `s` into the heap, its references still oids.
header* engine_handle::materialize(const segment_view& s, std::uint32_t slot) {
    const format::object_entry& e = s.entries[slot];
    header* h = heap_->allocate(object_bytes(e.type, e.count));
    std::memcpy(h + 1, s.bytes + e.offset, object_bytes(e.type, e.count));
    return enter(h, format::make_oid(s.page, slot), e);
}

// `h` (its body in place) becomes object `oid` of the resident object table
// once its type is the one the references to it want (T1).
header* engine_handle::enter(header* h, std::uint64_t oid, const format::object_entry& e) {
    h->word = oid << 16 | std::uint64_t{slot_} << 8;
    h->type = e.type;
    h->count = e.count;
    auto [it, fresh] = rot_.try_emplace(oid, h);
    header* block = fresh ? nullptr : it->second;
    auto expected = expected_type_.find(oid);
    std::uint32_t want = block ? block->count : expected != expected_type_.end() ? expected->second : any_type;
    resident_bytes_ += heap_->extent_of(h);
    faulting_.push_back({h, block});
    if (block) {  // a fault block stood for it: now it leads here
        void* body = h + 1;
        std::memcpy(block + 1, &body, sizeof body);
        block->word |= header::indirect;
        it->second = h;
    }
    if (want != any_type && want != e.type)
        throw error(errc::corrupt, storage_->path() + ": object " + std::to_string(oid) + " (slot " +
                                       std::to_string(format::slot_of(oid)) + " of the segment at page " +
                                       std::to_string(format::page_of(oid)) + ") is a " + catalog_.at(e.type).name +
                                       ", but a reference to it refers to " + type_name(want) +
                                       "; run `steppe check " + storage_->path() + "`");
    ++stats_.objects_faulted;
    return h;
}

void engine_handle::swizzle(header* h) {
    const types::layout& l = catalog_.at(h->type);
    const std::vector<std::uint32_t>& wants = ref_wants(h->type);
    auto* body = reinterpret_cast<std::byte*>(h + 1);
    for (std::uint32_t i = 0; i < h->count; ++i) {
        for (std::size_t r = 0; r < l.refs.size(); ++r) {
            std::byte* slot = body + std::uint64_t{i} * l.size + l.refs[r];
            std::uint64_t oid;
            std::memcpy(&oid, slot, sizeof oid);
            if (oid == 0) continue;
            auto damaged = [&](const std::string& what) {
                return error(errc::corrupt, storage_->path() + ": object " + std::to_string(h->oid()) + " (" + l.name +
                                                "), reference at offset " + std::to_string(l.refs[r]) +
                                                types::field_context(l, l.refs[r]) + ", element " + std::to_string(i) +
                                                ", names object " + std::to_string(oid) + ", " + what +
                                                "; run `steppe check " + storage_->path() + "`");
            };
            if (format::page_of(oid) < 1 || format::page_of(oid) >= meta_.next_page)
                throw damaged("outside the store's object pages");
            std::string wrong;
            bool stand_in = false;
            std::uint64_t word = word_for_oid(oid, wants[r], wrong, &stand_in);
            if (!wrong.empty()) throw damaged(wrong);
            std::memcpy(slot, &word, sizeof word);
            if (stand_in && swizzle_ == swizzling::eager) pending_sources_.emplace_back(oid, slot);
            ++stats_.refs_swizzled;
        }
    }
}

// What a slot wanting a `want` keeps for a reference to `oid`, as the scheme
// swizzles: the object's or its fault block's address, or the tagged oid.
// One table lookup also checks the type (T1): the type of an object in
// memory, else the want a fault block or expected_type_ recorded (the want
// is recorded where there is none yet). If they differ: 0, and `wrong` says
// what is wrong.
std::uint64_t engine_handle::word_for_oid(std::uint64_t oid, std::uint32_t want, std::string& wrong,
                                          bool* stand_in) {
    if (want == no_type) {
        wrong = "but the field refers to a type no object of this store has";
        return 0;
    }
    std::uint32_t* known = nullptr;  // the want recorded for an object not in memory
    header* h = nullptr;
    if (auto it = rot_.find(oid); it != rot_.end()) {
        h = it->second;
        if (h->type == header::fault_block_type) known = &h->count;
    } else if (scheme_.detect == detection::fault_block || blocks_) {
        h = fault_block_for(oid, want);
        known = &h->count;
    } else if (want != any_type) {
        known = &expected_type_.try_emplace(oid, want).first->second;
    }
    if (known && *known == any_type) *known = want;
    std::uint32_t is = known ? *known : h ? h->type : any_type;
    if (want != any_type && is != any_type && is != want) {
        wrong = std::string(known ? "which another reference says is a " : "which is a ") + type_name(is) +
                ", but the field refers to " + type_name(want);
        return 0;
    }
    bool resident = h && h->type != header::fault_block_type;
    if (stand_in) *stand_in = !resident;
    if (blocks_ && known) return blocks_->word_of(h);  // a fault block: its protected address
    bool id = scheme_.detect == detection::id || scheme_.detect == detection::id_self_heal;
    if (resident && scheme_.detect == detection::id && swizzle_ != swizzling::lazy) {
        if (h->word & header::victim) rescue(h);
        h->word |= header::pinned;  // opportunistic id: a direct address nothing can re-point
        return reinterpret_cast<std::uintptr_t>(h + 1);
    }
    return id ? tagged(oid) : reinterpret_cast<std::uintptr_t>(h + 1);
}

// Root `name`'s word at open and rollback: corrupt if its object is known to
// be of another type than the roots table says (T1).
std::uint64_t engine_handle::root_word(const std::string& name, std::uint32_t type, std::uint64_t oid) {
    if (oid == 0 || options_.place == placement::in_store) return oid;  // in_store: roots stay oids
    std::string wrong;
    std::uint64_t word = word_for_oid(oid, type, wrong);
    if (!wrong.empty())
        throw error(errc::corrupt, storage_->path() + ": root '" + name + "' names object " + std::to_string(oid) +
                                       ", " + wrong + "; run `steppe check " + storage_->path() + "`");
    return word;
}

// A fault block's count holds the type its references want (T1).
header* engine_handle::fault_block_for(std::uint64_t oid, std::uint32_t want) {
    header* block = heap_->allocate(object_heap::fault_block_body);
    block->word = oid << 16 | std::uint64_t{slot_} << 8 | header::proxy;
    block->type = header::fault_block_type;
    block->count = want;
    rot_.emplace(oid, block);
    ++stats_.fault_blocks;
    return block;
}

// For each reference of `type`, the catalog index of the type it wants:
// any_type where the catalog (version 2) does not say, no_type where it
// names a type the catalog lacks. Rebuilt when the catalog changes.
const std::vector<std::uint32_t>& engine_handle::ref_wants(std::uint32_t type) {
    if (ref_wants_at_ != catalog_.changes() || ref_wants_.size() != catalog_.size()) {
        ref_wants_.assign(catalog_.size(), {});
        for (std::uint32_t t = 0; t < catalog_.size(); ++t) {
            const types::layout& l = catalog_.at(t);
            for (std::size_t r = 0; r < l.refs.size(); ++r) {
                if (l.ref_targets.empty()) {
                    ref_wants_[t].push_back(any_type);
                    continue;
                }
                std::optional<types::catalog::index> i = catalog_.find(l.ref_targets[r].type);
                ref_wants_[t].push_back(i ? *i : no_type);
            }
        }
        ref_wants_at_ = catalog_.changes();
    }
    return ref_wants_[type];
}

std::string engine_handle::type_name(std::uint32_t type) const {
    return type < catalog_.size() ? catalog_.at(type).name : "type " + std::to_string(type);
}

}  // namespace steppe::objects::detail
