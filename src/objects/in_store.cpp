// placement::in_store (object_engine.hpp): Moss 1990's in-store access
// (digest 003 §2.2). No object is copied into the heap and no reference is
// swizzled: a segment is read into a buffer of its own (stored_segment) and
// its objects are used there, their reference fields holding oids as on
// disk. The program presents an oid at every access; locate finds the
// segment (reading it on first use), checks the slot and the type (T1), and
// returns the object's bytes.
//
//   locate             the object's bytes; the pointer and call interfaces
//                      (store::peek, poke, read, write) all come here
//   create_stored      a new object in the segment being filled (creating_),
//                      its oid fixed at once: the segment's first page is
//                      the next free page, and it closes (close_creating)
//                      when full or at commit, its table packed
//   commit_in_store    (commit.cpp) every written or new segment, whole,
//                      with the roots and catalog, in one storage commit
//   drop_written_segments  rollback: written and new segments leave
//
// Invariant S1 (in_store_check): every buffered segment's header spaces hold
// the header of the object after them (so array<T>::size works in a buffer),
// and are zeroed in every image written.
#include <steppe/error.hpp>

#include <algorithm>
#include <cstring>

#include "objects/object_engine.hpp"

namespace steppe::objects::detail {

namespace {
std::uint64_t round16(std::uint64_t n) { return (n + 15) & ~std::uint64_t{15}; }

void set_entry(std::byte* segment, std::uint32_t slot, const format::object_entry& e) {
    std::memcpy(segment + sizeof(format::segment_header) + std::uint64_t{slot} * sizeof e, &e, sizeof e);
}
}  // namespace

format::object_entry engine_handle::stored_entry(const stored_segment& s, std::uint32_t slot) {
    format::object_entry e;
    std::memcpy(&e, s.bytes.data() + sizeof(format::segment_header) + std::uint64_t{slot} * sizeof e, sizeof e);
    return e;
}

void engine_handle::in_store_only(const char* call) const {
    if (!storage_) throw error(errc::invalid_argument, std::string("object store: ") + call + " on a closed store");
    if (options_.place != placement::in_store)
        throw error(errc::unsupported, storage_->path() + ": " + call + " is placement::in_store's; this store is open with placement " +
                                           to_string(options_.place) + " (use ref<T>, root, make)");
}

void engine_handle::not_in_store(const char* call) const {
    if (options_.place == placement::in_store)
        throw error(errc::unsupported, storage_->path() + ": " + call +
                                           " is not available under placement::in_store (use oid<T>, "
                                           "find_stored_root, create, peek, poke, read, write)");
}

namespace {
bool names_ref(const std::string& type) {
    return type.find("steppe::objects::") != std::string::npos && type.find("::ref<") != std::string::npos;
}
bool names_oid(const std::string& type) { return type.find("steppe::objects::oid<") != std::string::npos; }
}  // namespace

// A type's reference fields are read as its program declares them: under
// in_store as oids (oid<T>), elsewhere as swizzled words (ref<T>). The two
// have one layout in the catalog, so only the program's names tell them
// apart: a field declared for the other placement would be misread.
void engine_handle::refuse_other_references(const types::layout& l) const {
    bool in_store = options_.place == placement::in_store;
    auto wrong = in_store ? names_ref : names_oid;
    auto refuse = [&](const std::string& what) {
        throw error(errc::invalid_argument,
                    storage_->path() + ": " + what +
                        (in_store ? ": under placement::in_store references are identifiers; declare it as "
                                    "steppe::objects::oid<T>"
                                  : ": oid<T> is placement::in_store's reference; declare it as "
                                    "steppe::objects::ref<T>, or open the store with placement::in_store"));
    };
    if (wrong(l.name)) refuse("type " + l.name);
    for (const types::field& f : l.fields) {
        if (wrong(f.type)) refuse("type " + l.name + ", field " + (f.name.empty() ? f.type : f.name) + " at offset " +
                                  std::to_string(f.offset));
        if (f.nested.get) refuse_other_references(f.nested.get());
    }
}

std::uint64_t engine_handle::stored_root(std::string_view name, const types::layout& layout) {
    in_store_only("find_stored_root");
    auto it = roots_.find(name);
    if (it == roots_.end() || it->second.word == 0) return 0;
    const types::layout& stored = catalog_.at(it->second.type);
    if (stored.name != layout.name)
        throw error(errc::type_mismatch, storage_->path() + ": root '" + std::string(name) + "' holds a " +
                                             stored.name + ", not a " + layout.name);
    type_index(layout);  // type_mismatch if the program's layout differs from the store's
    return it->second.word;
}

void engine_handle::set_stored_root(std::string_view name, const types::layout& layout, std::uint64_t oid) {
    in_store_only("set_stored_root");
    ensure_writable("set_stored_root");
    types::catalog::index type = type_index(layout);
    if (oid) locate_typed(oid, type, false, false);  // names a `layout` object of this store
    roots_[std::string(name)] = {type, oid};
    roots_dirty_ = true;
}

// The buffer of the segment at `page`, read (and its header spaces filled,
// S1) on first use.
engine_handle::stored_segment& engine_handle::stored(std::uint64_t page) {
    if (page == last_page_ && last_segment_) {  // a walk meets one segment's objects one after another
        last_segment_->used = ++buffer_clock_;
        return *last_segment_;
    }
    auto it = in_store_.find(page);
    if (it != in_store_.end()) {
        it->second.used = ++buffer_clock_;
        last_page_ = page;
        last_segment_ = &it->second;
        return it->second;
    }
    if (page == 0 || page >= meta_.next_page)  // not a committed segment (nor one made since: those are buffered)
        throw error(errc::invalid_argument, storage_->path() + ": no object has an identifier on page " +
                                                std::to_string(page) + " (an oid of another store, or made up)");
    stored_segment fresh;
    segment_view s = read_segment(page, fresh.bytes, "an in-store access");
    for (std::uint32_t i = 0; i < s.head.objects; ++i) {
        const format::object_entry& e = s.entries[i];
        header h{format::make_oid(page, i) << 16 | std::uint64_t{slot_} << 8, e.type, e.count};
        std::memcpy(fresh.bytes.data() + e.offset - sizeof h, &h, sizeof h);
    }
    fresh.objects = s.head.objects;
    fresh.used = ++buffer_clock_;
    ++stats_.segment_faults;
    stats_.objects_faulted += s.head.objects;
    buffered_bytes_ += fresh.bytes.size();
    trim_stored();
    stored_segment& made = in_store_.emplace(page, std::move(fresh)).first->second;
    last_page_ = page;
    last_segment_ = &made;
    return made;
}

// Past the resident budget, clean segments leave, least recently used
// first (written and new ones stay until the commit writes them).
void engine_handle::trim_stored() {
    while (buffered_bytes_ > budget_) {
        auto victim = in_store_.end();
        for (auto it = in_store_.begin(); it != in_store_.end(); ++it)
            if (!it->second.dirty && !it->second.fresh && (victim == in_store_.end() || it->second.used < victim->second.used))
                victim = it;
        if (victim == in_store_.end()) return;
        buffered_bytes_ -= victim->second.bytes.size();
        stats_.evicted_objects += victim->second.objects;
        forget_last_segment();
        in_store_.erase(victim);
    }
}

std::byte* engine_handle::locate_typed(std::uint64_t oid, std::uint32_t type, bool array, bool write) {
    if (oid == 0) throw error(errc::invalid_argument, storage_->path() + ": a null oid dereferenced");
    stored_segment& s = stored(format::page_of(oid));
    std::uint32_t slot = format::slot_of(oid);
    if (slot >= s.objects)
        throw error(errc::invalid_argument, storage_->path() + ": the segment at page " +
                                                std::to_string(format::page_of(oid)) + " has no object " +
                                                std::to_string(slot) + " (oid " + std::to_string(oid) + ")");
    format::object_entry e = stored_entry(s, slot);
    if (e.type != type || (!array && e.count != 1))
        throw error(errc::type_mismatch, storage_->path() + ": object " + std::to_string(oid) + " is a " +
                                             catalog_.at(e.type).name + (e.count != 1 ? " array" : "") +
                                             ", not a " + catalog_.at(type).name + (array ? " array" : ""));
    if (write) {
        ensure_writable("poke");
        s.dirty = true;
    }
    return s.bytes.data() + e.offset;
}

void* engine_handle::locate(std::uint64_t oid, const types::layout& element, bool array, bool write) {
    in_store_only(write ? "poke" : "peek");
    if (&element != last_layout_) {
        last_type_ = type_index(element);
        last_layout_ = &element;
    }
    return locate_typed(oid, last_type_, array, write);
}

void engine_handle::access(std::uint64_t oid, const types::layout& element, bool array, std::size_t index,
                           void* out, const void* in) {
    std::byte* body = static_cast<std::byte*>(locate(oid, element, array, in != nullptr));
    std::uint32_t count = header_of(body)->count;
    if (index >= count)
        throw error(errc::invalid_argument, storage_->path() + ": index " + std::to_string(index) + " of object " +
                                                std::to_string(oid) + ", an array of " + std::to_string(count) +
                                                " " + element.name);
    std::byte* at = body + std::uint64_t{index} * element.size;
    if (in) std::memcpy(at, in, element.size);
    else std::memcpy(out, at, element.size);
}

void* engine_handle::create_stored(const types::layout& layout, std::size_t count, std::uint64_t& oid) {
    in_store_only("create");
    ensure_writable("create");
    types::catalog::index type = checked_type(layout, count);
    std::uint64_t need = sizeof(header) + round16(object_bytes(type, count));
    if (need > UINT32_MAX / 2)
        throw error(errc::invalid_argument, storage_->path() + ": an object of " + std::to_string(need) +
                                                " bytes is larger than a segment can hold");
    if (creating_) {
        stored_segment& open = in_store_.at(creating_);
        if (open.objects >= meta_.segment_objects || open.bytes.size() + need > options_.segment_bytes)
            close_creating();
    }
    if (!creating_) open_creating();
    stored_segment& s = in_store_.at(creating_);
    std::uint64_t at = s.bytes.size();
    s.bytes.resize(at + need, std::byte{0});
    buffered_bytes_ += need;
    std::uint32_t slot = s.objects++;
    oid = format::make_oid(creating_, slot);
    header h{oid << 16 | std::uint64_t{slot_} << 8, type, static_cast<std::uint32_t>(count)};
    std::memcpy(s.bytes.data() + at, &h, sizeof h);
    set_entry(s.bytes.data(), slot, {static_cast<std::uint32_t>(at + sizeof h), type, h.count, 0});
    ++made_since_commit_;
    return s.bytes.data() + at + sizeof h;
}

void engine_handle::uncreate(std::uint64_t oid) noexcept {
    auto it = in_store_.find(creating_);
    if (it == in_store_.end() || it->second.objects == 0) return;
    stored_segment& s = it->second;
    const std::uint32_t slot = s.objects - 1;
    if (oid != format::make_oid(creating_, slot)) return;  // not the last made: stays
    const std::uint64_t at = stored_entry(s, slot).offset - sizeof(header);
    buffered_bytes_ -= s.bytes.size() - at;
    s.bytes.resize(at);
    set_entry(s.bytes.data(), slot, {});
    --made_since_commit_;
    if (--s.objects > 0) return;
    // Opened for it (open_creating is called only for an object to come): it goes too.
    buffered_bytes_ -= s.bytes.size();
    forget_last_segment();
    in_store_.erase(it);
    creating_ = 0;
}

// A new segment at the next free page, its table sized for a full segment
// (close_creating packs it).
void engine_handle::open_creating() {
    std::uint64_t page = in_store_next_page_;
    if (page >= storage::max_pages || format::make_oid(page + 1, 0) > format::max_oid)
        throw error(errc::no_space, storage_->path() + ": the store has no more pages for new segments");
    stored_segment s;
    s.bytes.assign(round16(sizeof(format::segment_header) + std::uint64_t{meta_.segment_objects} *
                                                                   sizeof(format::object_entry)),
                   std::byte{0});
    s.fresh = s.dirty = true;
    s.used = ++buffer_clock_;
    buffered_bytes_ += s.bytes.size();
    in_store_.emplace(page, std::move(s));
    creating_ = page;
}

// The segment being filled gets its final form: the table packed to its
// objects (each object moves down with the 16 bytes before it, so its oid
// and header stay), the header written, whole pages.
void engine_handle::close_creating() {
    if (!creating_) return;
    stored_segment& s = in_store_.at(creating_);
    std::uint64_t reserved = round16(sizeof(format::segment_header) + std::uint64_t{meta_.segment_objects} *
                                                                          sizeof(format::object_entry));
    std::uint64_t packed = round16(sizeof(format::segment_header) + std::uint64_t{s.objects} *
                                                                        sizeof(format::object_entry));
    std::uint64_t shift = reserved - packed;
    std::memmove(s.bytes.data() + packed, s.bytes.data() + reserved, s.bytes.size() - reserved);
    for (std::uint32_t i = 0; i < s.objects; ++i) {
        format::object_entry e = stored_entry(s, i);
        e.offset -= static_cast<std::uint32_t>(shift);
        set_entry(s.bytes.data(), i, e);
    }
    std::uint64_t used = s.bytes.size() - shift;
    std::uint64_t pages = (used + storage::page_size - 1) / storage::page_size;
    buffered_bytes_ += pages * storage::page_size - s.bytes.size();
    s.bytes.resize(pages * storage::page_size);
    std::fill(s.bytes.begin() + static_cast<std::ptrdiff_t>(used), s.bytes.end(), std::byte{0});
    format::segment_header head{format::segment_magic, static_cast<std::uint16_t>(s.objects), 0,
                                static_cast<std::uint32_t>(pages), static_cast<std::uint32_t>(used), creating_, 0};
    std::memcpy(s.bytes.data(), &head, sizeof head);
    in_store_next_page_ = creating_ + pages;
    creating_ = 0;
}

// rollback: written and new segments leave (a later use reads the
// committed ones again); new objects' pages are free again.
void engine_handle::drop_written_segments() {
    creating_ = 0;
    in_store_next_page_ = meta_.next_page;
    for (auto it = in_store_.begin(); it != in_store_.end();) {
        if (!it->second.dirty) {
            ++it;
            continue;
        }
        buffered_bytes_ -= it->second.bytes.size();
        forget_last_segment();
        it = in_store_.erase(it);
    }
    made_since_commit_ = 0;
}

// S1, and each buffered segment's table against its size.
std::vector<std::string> engine_handle::in_store_check() const {
    std::vector<std::string> findings;
    for (const auto& [page, s] : in_store_) {
        for (std::uint32_t i = 0; i < s.objects; ++i) {
            format::object_entry e = stored_entry(s, i);
            header h;
            if (e.offset < sizeof h || e.offset + object_bytes(e.type, e.count) > s.bytes.size()) {
                findings.push_back("object engine: S1: object " + std::to_string(i) + " of the buffered segment at page " +
                                   std::to_string(page) + " lies outside its buffer");
                continue;
            }
            std::memcpy(&h, s.bytes.data() + e.offset - sizeof h, sizeof h);
            if (h.oid() != format::make_oid(page, i) || h.type != e.type || h.count != e.count)
                findings.push_back("object engine: S1: the header before object " + std::to_string(i) +
                                   " of the buffered segment at page " + std::to_string(page) +
                                   " does not match its table entry");
        }
    }
    return findings;
}

}  // namespace steppe::objects::detail
