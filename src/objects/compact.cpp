// Compaction of an object-engine store (steppe::compact, docs/design.md
// "Compaction"): the committed state copied into a new main file, its live
// objects packed into new segments from page 1 and every reference (roots
// included) rewritten to their new oids. The steps:
//   1. walk: every segment of pages 1 .. next_page-1 (blob pages skipped),
//      read and checked as a fault reads it (read_segment, O1)
//   2. keep: every object, or with collect those the roots reach by the
//      layouts' references (breadth first)
//   3. place: the kept objects in oid order fill new segments as a commit's
//      cluster fills them (meta.segment_objects, options::segment_bytes), from
//      page 1; each gets its new oid
//   4. copy: each object's bytes into its new segment, every reference slot
//      forwarded (a reference to nothing kept, which only a damaged store
//      holds, becomes null)
//   5. the blobs after the segments (the catalog as it was, the roots
//      forwarded) and the meta: the same scheme and segment capacity, the new
//      next_page and counts (O4)
// storage::rewrite_store runs it under the writer lock (readers refused, the
// log checkpointed) and swaps the file in.
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

#include <cstring>
#include <deque>
#include <map>
#include <unordered_map>

#include "objects/object_engine.hpp"
#include "storage/backup.hpp"
#include "storage/blob.hpp"

namespace steppe::objects::detail {

namespace {
constexpr std::uint64_t page_bytes = storage::page_size;
constexpr std::size_t batch_pages = 1024;  // page images per commit of the new file

std::uint64_t up16(std::uint64_t n) { return (n + 15) & ~std::uint64_t{15}; }

struct old_segment {
    std::uint64_t page;
    std::vector<format::object_entry> entries;
    std::vector<std::byte> bytes;
};

// The new main file `temp`: the segments' pages in commits of batch_pages
// (not synced: write_main_file syncs once), then the blobs and the meta.
void write_pages(const std::string& temp, const std::vector<std::byte>& data, std::uint64_t next_page,
                 const std::vector<storage::page_image>& blob_images, const storage::meta_bytes& meta,
                 storage::env* io) {
    storage::write_main_file(
        temp,
        [&](storage::storage& out) {
            std::vector<storage::page_image> batch;
            for (std::uint64_t p = 1; p < next_page; ++p) {
                batch.push_back({p, data.data() + (p - 1) * page_bytes});
                if (batch.size() == batch_pages) {
                    out.commit(batch, storage::meta_bytes{});
                    batch.clear();
                }
            }
            batch.insert(batch.end(), blob_images.begin(), blob_images.end());
            out.commit(batch, meta);
        },
        io);
}

struct new_segment {
    std::uint64_t first_page = 0;
    std::uint64_t bytes = 0;             // used, from the header on
    std::vector<std::uint64_t> objects;  // old oids
    std::vector<std::uint32_t> offsets;  // of their bodies
};
}  // namespace

// Opened for this alone (steppe::compact, steppe::migrate): nothing
// uncommitted. The old files are released at the end, whatever happens,
// without a checkpoint.
compact_report engine_handle::rewrite(const char* what, bool write,
                                      const std::function<compact_report(const std::string& temp)>& pass) {
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
    return rewrite("compaction", true, [&](const std::string& temp) { return compact_into(temp, options.collect); });
}

migrate_report engine_handle::migrate(const migration& m, const migrate_options& options) {
    return migrating::run_migration(
        catalog_, m, path(), migrating::engine_kind::objects, [&](migrating::migration_plan& plan) {
            return rewrite("migration", !options.dry_run,
                           [&](const std::string& temp) { return compact_into(temp, options.collect, &plan); });
        });
}

compact_report engine_handle::compact_into(const std::string& temp, bool collect, migrating::migration_plan* plan) {
    const std::string& store = storage_->path();
    // The new store's types: the plan's catalog (converted entries replaced
    // at the same indices), or the old one.
    const types::catalog& types_after = plan ? plan->catalog : catalog_;
    auto bytes_after = [&](const format::object_entry& e) {
        return std::uint64_t{types_after.at(e.type).size} * e.count;
    };
    // 1. walk
    std::vector<old_segment> segments;
    std::unordered_map<std::uint64_t, std::size_t> segment_at;  // first page -> index
    for_each_segment("compaction", [&](const segment_view& s) {
        segment_at[s.page] = segments.size();
        segments.push_back({s.page, s.entries, std::vector<std::byte>(s.bytes, s.bytes + s.head.bytes)});
    });
    auto entry = [&](std::uint64_t oid) -> const format::object_entry* {
        auto it = segment_at.find(format::page_of(oid));
        if (it == segment_at.end() || format::slot_of(oid) >= segments[it->second].entries.size()) return nullptr;
        return &segments[it->second].entries[format::slot_of(oid)];
    };
    auto refs_of = [&](std::uint64_t oid, auto&& f) {  // f(offset in the segment's bytes) per reference slot
        const old_segment& s = segments[segment_at.at(format::page_of(oid))];
        const format::object_entry& e = s.entries[format::slot_of(oid)];
        const types::layout& l = catalog_.at(e.type);
        for (std::uint32_t k = 0; k < e.count; ++k)
            for (std::uint32_t offset : l.refs) f(e.offset + std::uint64_t{k} * l.size + offset);
    };
    auto word_at = [&](std::uint64_t oid, std::uint64_t at) {
        std::uint64_t w;
        std::memcpy(&w, segments[segment_at.at(format::page_of(oid))].bytes.data() + at, sizeof w);
        return w;
    };

    // 2. keep (in oid order: segments are in page order, slots in order)
    std::vector<std::uint64_t> all;
    for (const old_segment& s : segments)
        for (std::uint32_t i = 0; i < s.entries.size(); ++i) all.push_back(format::make_oid(s.page, i));
    std::vector<std::uint64_t> kept;
    if (!collect) {
        kept = all;
    } else {
        std::unordered_map<std::uint64_t, bool> seen;
        std::deque<std::uint64_t> todo;
        auto reach = [&](std::uint64_t oid) {
            if (oid && entry(oid) && seen.emplace(oid, true).second) todo.push_back(oid);
        };
        for (const auto& [name, r] : committed_roots_) reach(r.address);
        while (!todo.empty()) {
            std::uint64_t oid = todo.front();
            todo.pop_front();
            refs_of(oid, [&](std::uint64_t at) { reach(word_at(oid, at)); });
        }
        for (std::uint64_t oid : all)
            if (seen.count(oid)) kept.push_back(oid);
    }

    // 3. place
    std::vector<new_segment> placed;
    std::unordered_map<std::uint64_t, std::uint64_t> moved;  // old oid -> new
    {
        new_segment* open = nullptr;
        for (std::uint64_t oid : kept) {
            const format::object_entry& e = *entry(oid);
            const std::uint64_t size = up16(bytes_after(e));
            bool full = open && (open->objects.size() >= meta_.segment_objects ||
                                 open->bytes + sizeof(format::object_entry) + sizeof(header) + size >
                                     options_.segment_bytes);
            if (!open || full) {
                open = &placed.emplace_back();
                open->bytes = sizeof(format::segment_header);
            }
            open->objects.push_back(oid);
            open->bytes += sizeof(format::object_entry) + sizeof(header) + size;
        }
    }
    std::uint64_t next_page = 1;
    for (new_segment& seg : placed) {
        seg.first_page = next_page;
        std::uint64_t offset = up16(sizeof(format::segment_header) + seg.objects.size() * sizeof(format::object_entry));
        for (std::uint32_t i = 0; i < seg.objects.size(); ++i) {
            const format::object_entry& e = *entry(seg.objects[i]);
            offset += sizeof(header);
            if (offset > UINT32_MAX)
                throw error(errc::corrupt, "compaction of " + store + ": a segment of more than 4 GiB");
            seg.offsets.push_back(static_cast<std::uint32_t>(offset));
            offset += up16(bytes_after(e));
            moved[seg.objects[i]] = format::make_oid(seg.first_page, i);
        }
        seg.bytes = offset;
        next_page += (offset + page_bytes - 1) / page_bytes;
    }
    auto forward = [&](std::uint64_t oid) -> std::uint64_t {
        auto it = moved.find(oid);
        return it == moved.end() ? 0 : it->second;
    };

    // 4. copy
    std::vector<std::byte> data((next_page - 1) * page_bytes);
    for (const new_segment& seg : placed) {
        std::byte* image = data.data() + (seg.first_page - 1) * page_bytes;
        const std::uint64_t pages = (seg.bytes + page_bytes - 1) / page_bytes;
        format::segment_header head{format::segment_magic, static_cast<std::uint16_t>(seg.objects.size()), 0,
                                    static_cast<std::uint32_t>(pages), static_cast<std::uint32_t>(seg.bytes),
                                    seg.first_page, 0};
        std::memcpy(image, &head, sizeof head);
        for (std::uint32_t i = 0; i < seg.objects.size(); ++i) {
            const std::uint64_t oid = seg.objects[i];
            const format::object_entry& old = *entry(oid);
            const old_segment& from = segments[segment_at.at(format::page_of(oid))];
            format::object_entry e{seg.offsets[i], old.type, old.count, 0};
            std::memcpy(image + sizeof head + i * sizeof e, &e, sizeof e);
            std::byte* body = image + e.offset;
            const std::byte* was = from.bytes.data() + old.offset;
            if (migrating::conversion* c = plan ? plan->find(old.type) : nullptr) {
                for (std::uint32_t k = 0; k < old.count; ++k)
                    c->build(was + std::uint64_t{k} * c->from->size, body + std::uint64_t{k} * c->to->size);
                ++c->objects;
                c->elements += old.count;
            } else {
                std::memcpy(body, was, object_bytes(old.type, old.count));
            }
            // Every reference of the new layout, carried or set by a
            // conversion function, holds an old oid (or none) until here.
            const types::layout& l = types_after.at(old.type);
            for (std::uint32_t k = 0; k < old.count; ++k)
                for (std::uint32_t at : l.refs) {
                    std::byte* slot = body + std::uint64_t{k} * l.size + at;
                    std::uint64_t w;
                    std::memcpy(&w, slot, sizeof w);
                    w = forward(w);
                    std::memcpy(slot, &w, sizeof w);
                }
        }
    }

    // 5. blobs and meta
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
    for (auto& [name, r] : roots) r.address = forward(r.address);
    if (meta_.roots.pages)
        meta.roots = storage::write_blob(encode_roots(roots), format::roots_owner, roots_chain, source, buffers,
                                         blob_images);
    meta.next_page = blob_page;
    meta.objects = kept.size();
    meta.segments = placed.size();
    storage::meta_bytes raw{};
    std::memcpy(raw.data(), &meta, sizeof meta);
    if (!temp.empty()) write_pages(temp, data, next_page, blob_images, raw, io_);

    // The report: kept and freed by type name.
    compact_report r;
    r.pages_after = meta.next_page;
    std::map<std::string, compact_report::by_type> kept_by, freed_by;
    for (std::uint64_t oid : all) {
        const format::object_entry& e = *entry(oid);
        auto& to = moved.count(oid) ? kept_by : freed_by;
        compact_report::by_type& t = to[catalog_.at(e.type).name];
        t.type = catalog_.at(e.type).name;
        ++t.objects;
        t.bytes += sizeof(format::object_entry) + sizeof(header) + up16(object_bytes(e.type, e.count));
    }
    for (auto& [name, t] : kept_by) r.kept.push_back(t);
    for (auto& [name, t] : freed_by) r.freed.push_back(t);
    return r;
}

}  // namespace steppe::objects::detail
