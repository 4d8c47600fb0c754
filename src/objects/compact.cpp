// Compaction of an object-engine store (steppe::compact, docs/design.md
// "Compaction"): the committed state copied into a new main file, its live
// objects packed into new segments from page 1 and every reference (roots
// included) rewritten to their new oids. The steps:
//   1. walk: every segment of pages 1 .. next_page-1 (blob pages skipped),
//      read and checked as a fault reads it (read_segment, O1); kept in
//      memory up to the resident budget (old_store), the rest read again
//      by step 4
//   2. keep: every object, or with collect those the roots reach by the
//      layouts' references (breadth first)
//   3. place: the kept objects in oid order fill new segments as a commit's
//      cluster fills them (meta.segment_objects, options::segment_bytes), from
//      page 1; each gets its new oid
//   4. copy: each object's bytes into its new segment, every reference slot
//      forwarded (a reference to nothing kept, which only a damaged store
//      holds, becomes null); written a batch of segments at a time (the
//      blobs and meta of step 5 are made first), so the new store is never
//      all in memory
//   5. the blobs after the segments (the catalog as it was, the roots
//      forwarded) and the meta: the same scheme and segment capacity, the new
//      next_page and counts (O4)
// storage::rewrite_store runs it under the writer lock (readers refused, the
// log checkpointed) and swaps the file in. Objects are found by oid through
// an index by first page (old_store), not a hash: every object is looked up
// a few times, and hash maps of every oid were most of the pass's CPU.
//
// Migration (engine/migration.hpp) is the same pass with a plan: an object
// of a converted type is placed at its new size (step 3), built element by
// element by the plan (step 4: T{}, the carried fields, the conversion
// function) instead of copied, and the catalog written is the plan's (step
// 5). Step 4 forwards the references of the new layout, so a reference
// carried over or set by the function from old.get<ref<U>>() (an old oid)
// names the object's new oid afterwards. A reference names a whole object,
// never a byte inside one, so nothing like the page engine's C5 is needed:
// any field may be dropped.
#include <steppe/error.hpp>

#include <algorithm>
#include <array>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <span>

#include "common/memory_limit.hpp"
#include "objects/object_engine.hpp"
#include "storage/backup.hpp"
#include "storage/blob.hpp"

namespace steppe::objects::detail {

namespace {
constexpr std::uint64_t page_bytes = storage::page_size;

std::uint64_t up16(std::uint64_t n) { return (n + 15) & ~std::uint64_t{15}; }

// Where an object of the old store is: its segment (an index into
// old_store's) and its slot there.
struct object_at {
    std::uint32_t segment, slot;
};

struct old_segment {
    std::uint64_t page;
    std::vector<format::object_entry> entries;
    std::vector<std::byte> bytes;  // the segment, if kept in memory (old_store: up to its limit), else empty
    std::vector<std::uint64_t> moved;  // by slot: the new oid (step 3), 0 if not kept
    // For the marking (collect): every reference word of each object, those
    // of object i from refs[i] (a last entry ends the last object's).
    std::vector<std::uint64_t> ref_words;
    std::vector<std::uint32_t> refs;
};

// The committed segments step 1 read, found by oid. Their bytes are kept in
// memory up to `keep_bytes` (the engine's resident budget); a segment past
// it is read again when the copy needs it, which goes through the old
// segments in order, so each is read once more. The marking needs only the
// reference words, which are kept for every object when `collect`. So the
// pass holds what the budget allows of the old store, not all of it.
class old_store {
public:
    using reader = std::function<std::vector<std::byte>(std::uint64_t page)>;

    old_store(std::string store, std::uint64_t next_page, const types::catalog& types, bool collect,
              std::uint64_t keep_bytes, reader read)
        : store_(std::move(store)), at_page_(next_page, none), types_(types), collect_(collect),
          keep_bytes_(keep_bytes), read_(std::move(read)) {}

    void add(std::uint64_t page, const std::vector<format::object_entry>& entries, const std::byte* bytes,
             std::uint64_t size) {
        at_page_[page] = static_cast<std::uint32_t>(segments_.size());
        old_segment& seg = segments_.emplace_back();
        seg.page = page;
        seg.entries = entries;
        seg.moved.assign(entries.size(), 0);
        if (size <= keep_bytes_) {
            seg.bytes.assign(bytes, bytes + size);
            keep_bytes_ -= size;
        }
        if (!collect_) return;
        for (const format::object_entry& e : entries) {
            seg.refs.push_back(static_cast<std::uint32_t>(seg.ref_words.size()));
            const types::layout& l = types_.at(e.type);
            for (std::uint32_t k = 0; k < e.count; ++k)
                for (std::uint32_t offset : l.refs) {
                    std::uint64_t w;
                    std::memcpy(&w, bytes + e.offset + std::uint64_t{k} * l.size + offset, sizeof w);
                    seg.ref_words.push_back(w);
                }
        }
        seg.refs.push_back(static_cast<std::uint32_t>(seg.ref_words.size()));
    }
    // The object `oid` names, if any (a reference of a sound store always names one).
    std::optional<object_at> find(std::uint64_t oid) const {
        const std::uint64_t page = format::page_of(oid);
        if (page >= at_page_.size() || at_page_[page] == none) return std::nullopt;
        const std::uint32_t slot = format::slot_of(oid);
        if (slot >= segments_[at_page_[page]].entries.size()) return std::nullopt;
        return object_at{at_page_[page], slot};
    }
    const format::object_entry& entry(object_at o) const { return segments_[o.segment].entries[o.slot]; }
    // The object's bytes, valid until body() of an object of another segment.
    const std::byte* body(object_at o) const { return bytes_of(o.segment) + entry(o).offset; }
    // Its reference words (only with collect).
    std::span<const std::uint64_t> references(object_at o) const {
        const old_segment& seg = segments_[o.segment];
        return {seg.ref_words.data() + seg.refs[o.slot], seg.refs[o.slot + 1] - seg.refs[o.slot]};
    }
    std::uint64_t oid(object_at o) const { return format::make_oid(segments_[o.segment].page, o.slot); }
    void moved(object_at o, std::uint64_t to) { segments_[o.segment].moved[o.slot] = to; }
    bool kept(object_at o) const { return segments_[o.segment].moved[o.slot] != 0; }
    // The new oid of the object `oid` names; 0 for none, or one not kept.
    // `wrong(entry)` says what is wrong with a target of table entry
    // `entry` for the reference ("" if nothing). A reference naming no
    // object, or an object of a type its field does not refer to, is damage
    // (check's O2 and O3): carried over, the first was lost and the second
    // kept, and the new store checked no better; so both are refused,
    // before anything is written in the store's place.
    template<class Wrong> std::uint64_t forward(std::uint64_t oid, Wrong&& wrong) const {
        if (oid == 0) return 0;
        std::optional<object_at> o = find(oid);
        const std::string what = o ? wrong(entry(*o)) : "which does not exist";
        if (!what.empty())
            throw error(errc::corrupt, "compaction of " + store_ + " refused: a reference names object " +
                                           std::to_string(oid) + ", " + what +
                                           ": the store is damaged (steppe check names the field). Nothing was "
                                           "changed");
        return segments_[o->segment].moved[o->slot];
    }
    // f(object_at) for every object, in oid order (segments in page order).
    template<class F> void for_each(F&& f) const {
        for (std::uint32_t s = 0; s < segments_.size(); ++s)
            for (std::uint32_t i = 0; i < segments_[s].entries.size(); ++i) f(object_at{s, i});
    }

private:
    static constexpr std::uint32_t none = ~std::uint32_t{0};
    const std::byte* bytes_of(std::uint32_t segment) const {
        const old_segment& seg = segments_[segment];
        if (!seg.bytes.empty()) return seg.bytes.data();
        if (reread_ != segment) {
            reread_bytes_ = read_(seg.page);
            reread_ = segment;
        }
        return reread_bytes_.data();
    }

    std::string store_;  // its path, for messages
    std::vector<old_segment> segments_;
    std::vector<std::uint32_t> at_page_;  // first page -> index in segments_
    const types::catalog& types_;
    const bool collect_;
    std::uint64_t keep_bytes_;  // what the segments kept in memory may still take
    reader read_;
    mutable std::uint32_t reread_ = none;  // the segment in reread_bytes_
    mutable std::vector<std::byte> reread_bytes_;
};

// 2. keep: every object, or with `collect` those the roots reach by their
// references (breadth first), in oid order.
std::vector<object_at> kept_objects(const old_store& old, const root_table& roots, bool collect) {
    std::vector<object_at> kept;
    if (!collect) {
        old.for_each([&](object_at o) { kept.push_back(o); });
        return kept;
    }
    std::vector<std::vector<bool>> reached;
    old.for_each([&](object_at o) {
        if (o.slot == 0) reached.emplace_back();
        reached.back().push_back(false);
    });
    std::deque<object_at> todo;
    auto reach = [&](std::uint64_t oid) {
        std::optional<object_at> o = oid ? old.find(oid) : std::nullopt;
        if (!o || reached[o->segment][o->slot]) return;
        reached[o->segment][o->slot] = true;
        todo.push_back(*o);
    };
    for (const auto& [name, r] : roots) reach(r.address);
    for (; !todo.empty(); todo.pop_front())
        for (std::uint64_t w : old.references(todo.front())) reach(w);
    old.for_each([&](object_at o) {
        if (reached[o.segment][o.slot]) kept.push_back(o);
    });
    return kept;
}

struct new_segment {
    std::uint64_t first_page = 0;
    std::uint64_t bytes = 0;            // used, from the header on
    std::vector<object_at> objects;
    std::vector<std::uint32_t> offsets;  // of their bodies
};

// 3. place: `kept` fills new segments in order, each closed at
// `max_objects` or past `max_bytes` (unless it holds one object), from page
// 1; `bytes_after(entry)` is an object's size in the new store. Each kept
// object's new oid is recorded in `old`. Returns the new next_page.
template<class Size>
std::uint64_t place(old_store& old, const std::vector<object_at>& kept, Size&& bytes_after, std::uint32_t max_objects,
                    std::uint64_t max_bytes, const std::string& store, std::vector<new_segment>& placed) {
    new_segment* open = nullptr;
    for (object_at o : kept) {
        const std::uint64_t size = sizeof(format::object_entry) + sizeof(header) + up16(bytes_after(old.entry(o)));
        if (!open || open->objects.size() >= max_objects || open->bytes + size > max_bytes) {
            open = &placed.emplace_back();
            open->bytes = sizeof(format::segment_header);
        }
        open->objects.push_back(o);
        open->bytes += size;
    }
    std::uint64_t next_page = 1;
    for (new_segment& seg : placed) {
        seg.first_page = next_page;
        std::uint64_t offset = up16(sizeof(format::segment_header) + seg.objects.size() * sizeof(format::object_entry));
        for (std::uint32_t i = 0; i < seg.objects.size(); ++i) {
            offset += sizeof(header);
            if (offset > UINT32_MAX)
                throw error(errc::corrupt, "compaction of " + store + ": a segment of more than 4 GiB");
            seg.offsets.push_back(static_cast<std::uint32_t>(offset));
            offset += up16(bytes_after(old.entry(seg.objects[i])));
            old.moved(seg.objects[i], format::make_oid(seg.first_page, i));
        }
        seg.bytes = offset;
        next_page += (offset + page_bytes - 1) / page_bytes;
    }
    return next_page;
}

// 4. copy: the new segments' pages (from page 1): each object's bytes, or
// with a conversion in `plan` its elements built anew, then every reference
// of its layout in `types_after` forwarded. The pages go to `out` a batch
// of segments at a time, so the pass holds a batch of the new store, not
// all of it (a batch is at least copy_batch_bytes, or one segment).
constexpr std::uint64_t copy_batch_bytes = std::uint64_t{4} << 20;

void build_segment(const old_store& old, const new_segment& seg, const types::catalog& types_after,
                   migrating::migration_plan* plan, std::byte* image) {
    const std::uint64_t pages = (seg.bytes + page_bytes - 1) / page_bytes;
    std::memset(image, 0, pages * page_bytes);
    format::segment_header head{format::segment_magic, static_cast<std::uint16_t>(seg.objects.size()), 0,
                                static_cast<std::uint32_t>(pages), static_cast<std::uint32_t>(seg.bytes),
                                seg.first_page, 0};
    std::memcpy(image, &head, sizeof head);
    for (std::uint32_t i = 0; i < seg.objects.size(); ++i) {
        const format::object_entry& was = old.entry(seg.objects[i]);
        const format::object_entry e{seg.offsets[i], was.type, was.count, 0};
        std::memcpy(image + sizeof head + i * sizeof e, &e, sizeof e);
        const types::layout& l = types_after.at(e.type);
        std::byte* body = image + e.offset;
        if (migrating::conversion* c = plan ? plan->find(e.type) : nullptr) {
            for (std::uint32_t k = 0; k < e.count; ++k)
                c->build(old.body(seg.objects[i]) + std::uint64_t{k} * c->from->size, body + std::uint64_t{k} * l.size);
            ++c->objects;
            c->elements += e.count;
        } else {
            std::memcpy(body, old.body(seg.objects[i]), std::uint64_t{l.size} * e.count);
        }
        // Every reference of the new layout, carried or set by a
        // conversion function, holds an old oid (or none) until here.
        for (std::uint32_t k = 0; k < e.count; ++k)
            for (std::size_t r = 0; r < l.refs.size(); ++r) {
                std::byte* slot = body + std::uint64_t{k} * l.size + l.refs[r];
                std::uint64_t w;
                std::memcpy(&w, slot, sizeof w);
                w = old.forward(w, [&](const format::object_entry& target) {
                    return wrong_target(types_after, l, r, target.type);
                });
                std::memcpy(slot, &w, sizeof w);
            }
    }
}

// Segments are placed one after another from page 1, so a batch of them is
// one run of pages. `out` is null in a dry run: the segments are still
// built, so a conversion that would fail fails.
void copy_segments(const old_store& old, const std::vector<new_segment>& placed, const types::catalog& types_after,
                   migrating::migration_plan* plan, storage::page_sink* out) {
    std::vector<std::byte> batch;
    std::vector<storage::page_image> images;
    for (std::size_t first = 0; first < placed.size();) {
        std::uint64_t bytes = 0;
        std::size_t end = first;
        while (end < placed.size() && (end == first || bytes < copy_batch_bytes))
            bytes += (placed[end++].bytes + page_bytes - 1) / page_bytes * page_bytes;
        batch.resize(bytes);
        for (std::size_t i = first; i < end; ++i)
            build_segment(old, placed[i], types_after, plan,
                          batch.data() + (placed[i].first_page - placed[first].first_page) * page_bytes);
        if (out) {
            images.clear();
            for (std::uint64_t p = 0; p < bytes / page_bytes; ++p)
                images.push_back({placed[first].first_page + p, batch.data() + p * page_bytes});
            out->write(images);
        }
        first = end;
    }
}

// The report's kept and freed objects by (old) type name; counted by
// catalog index first (a string map per object was a visible cost).
void report_by_type(const old_store& old, const types::catalog& types, compact_report& r) {
    std::vector<compact_report::by_type> kept(types.size()), freed(types.size());
    old.for_each([&](object_at o) {
        const format::object_entry& e = old.entry(o);
        compact_report::by_type& t = (old.kept(o) ? kept : freed)[e.type];
        ++t.objects;
        t.bytes += sizeof(format::object_entry) + sizeof(header) + up16(std::uint64_t{types.at(e.type).size} * e.count);
    });
    for (auto [counts, out] : {std::pair{&kept, &r.kept}, std::pair{&freed, &r.freed}}) {
        std::map<std::string, compact_report::by_type> by_name;
        for (types::catalog::index i = 0; i < counts->size(); ++i)
            if ((*counts)[i].objects) by_name[types.at(i).name] = {types.at(i).name, (*counts)[i].objects, (*counts)[i].bytes};
        for (auto& [name, t] : by_name) out->push_back(t);
    }
}

}  // namespace

// Opened for this alone (steppe::compact, steppe::migrate): nothing
// uncommitted. The old files are released at the end, whatever happens,
// without a checkpoint.
compact_report engine_handle::rewrite(const char* what, bool write,
                                      const std::function<compact_report(const storage::rewrite_target& target)>& pass) {
    ensure_writable(what);
    ensure_not_forked(what);
    const std::string store = path();
    struct release {
        engine_handle& e;
        ~release() {
            e.options_.checkpoint_on_close = false;
            e.close();
        }
    } closes{*this};
    return storage::rewrite_store(*storage_, store, what, write, io_, pass);
}

compact_report engine_handle::compact(const compact_options& options) {
    return rewrite("compaction", true,
                   [&](const storage::rewrite_target& target) { return compact_into(target, options.collect); });
}

migrate_report engine_handle::migrate(const migration& m, const migrate_options& options) {
    return migrating::run_migration(
        catalog_, m, path(), migrating::engine_kind::objects, [&](migrating::migration_plan& plan) {
            return rewrite("migration", !options.dry_run,
                           [&](const storage::rewrite_target& target) {
                               return compact_into(target, options.collect, &plan);
                           });
        });
}

compact_report engine_handle::compact_into(const storage::rewrite_target& target, bool collect,
                                           migrating::migration_plan* plan) {
    // The new store's types: the plan's catalog (converted entries replaced
    // at the same indices), or the old one.
    const types::catalog& types_after = plan ? plan->catalog : catalog_;
    // What grows with the objects (old_store's table entry and new oid, the
    // kept list, the place in a new segment; with collect the reference
    // index and at least a word), checked before any of it is made.
    const std::uint64_t per_object = sizeof(format::object_entry) + sizeof(std::uint64_t) +
                                     2 * sizeof(object_at) + sizeof(std::uint32_t) +
                                     (collect ? sizeof(std::uint32_t) + sizeof(std::uint64_t) : 0);
    const std::string what = std::string(plan ? "migration" : "compaction") + " of " + storage_->path();
    const std::uint64_t free_beyond = common::ensure_available(
        meta_.objects * per_object + copy_batch_bytes, what,
        "its tables of " + std::to_string(meta_.objects) + " objects, " + std::to_string(per_object) + " bytes each");
    // 1. walk; the old segments kept in memory up to the budget, and never
    // more than the tables leave free
    old_store old(storage_->path(), meta_.next_page, catalog_, collect, std::min(budget_, free_beyond), [this](std::uint64_t page) {
        std::vector<std::byte> buffer;
        read_segment(page, buffer, "compaction");
        return buffer;
    });
    std::vector<std::string> findings;
    std::uint64_t objects = 0, segments = 0;
    for_each_segment("compaction", [&](const segment_view& s) {
        check_reserved_zero(s.page, s, findings);
        objects += s.head.objects;
        ++segments;
        old.add(s.page, s.entries, s.bytes, s.head.bytes);
    });
    check_meta(objects, segments, findings);
    // Findings of O4 and O5 change nothing compaction reads, but a store
    // compacted clean would hide them from every later check.
    if (!findings.empty())
        throw error(errc::corrupt, what + " refused: " + findings.front() + (findings.size() > 1 ? " (and " + std::to_string(findings.size() - 1) + " more)" : "") +
                                       "; run `steppe check " + storage_->path() + "` to see the damage. Nothing was changed");
    // 2. keep
    const std::vector<object_at> kept = kept_objects(old, committed_roots_, collect);
    // 3. place
    std::vector<new_segment> placed;
    const std::uint64_t next_page = place(
        old, kept, [&](const format::object_entry& e) { return std::uint64_t{types_after.at(e.type).size} * e.count; },
        meta_.segment_objects, options_.segment_bytes, storage_->path(), placed);
    // 5. blobs and meta (first: the copy streams into the target, which
    // returns the meta once every page is given)
    format::object_meta meta = meta_;
    std::deque<std::array<std::byte, page_bytes>> buffers;
    std::vector<storage::page_image> blob_images;
    std::uint64_t blob_page = next_page;
    storage::page_source source{[&](std::uint32_t, std::uint64_t) { return blob_page++; }, [](storage::page_no) {}};
    std::vector<storage::page_no> catalog_chain, roots_chain;
    if (meta_.catalog.pages || plan)
        meta.catalog = storage::write_blob(types_after.encode(), format::catalog_owner, catalog_chain, source, buffers,
                                           blob_images);
    root_table roots = committed_roots_;
    for (auto& named : roots) {  // not a structured binding: clang 14's lambdas cannot capture one
        auto& r = named.second;
        const std::string& name = named.first;
        r.address = old.forward(r.address, [&](const format::object_entry& target) -> std::string {
            if (target.type == r.type && target.count == 1) return {};
            return "a " + types_after.at(target.type).name + ", but root '" + name + "' is a " +
                   types_after.at(r.type).name;
        });
    }
    if (meta_.roots.pages)
        meta.roots = storage::write_blob(encode_roots(roots), format::roots_owner, roots_chain, source, buffers,
                                         blob_images);
    meta.next_page = blob_page;
    meta.objects = kept.size();
    meta.segments = placed.size();
    storage::meta_bytes raw{};
    std::memcpy(raw.data(), &meta, sizeof meta);
    // 4. copy
    if (target) {
        target([&](storage::page_sink& out) {
            copy_segments(old, placed, types_after, plan, &out);
            out.write(blob_images);
            return raw;
        });
    } else {
        copy_segments(old, placed, types_after, plan, nullptr);
    }

    compact_report r;
    r.pages_after = meta.next_page;
    report_by_type(old, catalog_, r);
    return r;
}

}  // namespace steppe::objects::detail
