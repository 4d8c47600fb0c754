// check, types and dump for the object engine (object_engine.hpp): walks over
// the committed store's object pages (dump: from the roots, by reference).
//
// Pages 1 .. next_page-1 are segments and blob pages, in allocation order; a
// page that starts neither is a finding. Checked (invariants of the format,
// docs/format.md "Object engine"):
//  O1 every segment's header and object table fit its pages and the catalog
//     (read_segment's checks);
//  O2 every stored reference is 0 or names an object that exists (a slot
//     below its segment's object count) of the type its field refers to
//     (the catalog's reference targets: invariant T1, fault.cpp);
//  O3 every root names an existing object of the root's type;
//  O4 meta.objects and meta.segments count what the walk finds;
//  O5 the fields the format keeps zero (the meta's reserved word, a segment
//     header's two, each table entry's reserved word, the 16 bytes before
//     each object, its header's place in memory, and the padding after the
//     table, after each object and after the last to the segment's end) are
//     zero: bytes nothing reads, so only the check can say they changed (an
//     array whose count was lowered leaves its last element there);
//  O6 every segment is packed as the writers pack it (view_segment,
//     fault.cpp: checked at every read);
// plus the storage manager's checks and this process's R1, R2, H1-H3.
#include <steppe/error.hpp>

#include <algorithm>
#include <array>
#include <cstring>
#include <deque>
#include <map>
#include <set>

#include "objects/object_engine.hpp"
#include "types/json_dump.hpp"

namespace steppe::objects::detail {

namespace {
// What the reference checks need of every object: its type and count (8
// bytes an object). The segments' bytes are read again for those checks,
// one segment at a time: holding them all made `steppe check` of an object
// store take about the store's size in memory (130 MB for a 161 MB store,
// killed in a 128 MiB cgroup).
struct object_kind {
    std::uint32_t type, count;
};
}  // namespace

std::string wrong_target(const types::catalog& types, const types::layout& l, std::size_t r, std::uint32_t type) {
    if (l.ref_targets.empty() || types.at(type).name == l.ref_targets[r].type) return {};
    return "a " + types.at(type).name + ", but the field refers to " + l.ref_targets[r].type;
}

std::vector<std::string> engine_handle::check() const {
    if (!storage_) throw error(errc::invalid_argument, "object store: check on a closed store");
    std::vector<std::string> findings = storage_->check();
    const std::string& path = storage_->path();
    for (const auto& f : catalog_.check()) findings.push_back(path + ": " + f);
    std::map<std::uint64_t, std::vector<object_kind>> segments;
    std::vector<std::byte> buffer;
    std::uint64_t objects = 0;
    for (std::uint64_t page = 1; page < meta_.next_page;) {
        std::uint32_t magic = 0;
        try {
            buffer.resize(storage::page_size);
            storage_->read_page(page, buffer.data());
            std::memcpy(&magic, buffer.data(), sizeof magic);
            if (magic == storage::blob_magic) {
                ++page;
                continue;
            }
            segment_view s = read_segment(page, buffer, "steppe check");
            check_reserved_zero(page, s, findings);
            objects += s.head.objects;
            std::vector<object_kind>& kinds = segments[page];
            for (const format::object_entry& e : s.entries) kinds.push_back({e.type, e.count});
            page += s.head.pages;
        } catch (const error& e) {
            findings.push_back(std::string("O1: ") + e.what());
            ++page;
        }
    }
    auto exists = [&](std::uint64_t oid) -> const object_kind* {
        auto it = segments.find(format::page_of(oid));
        if (it == segments.end() || format::slot_of(oid) >= it->second.size()) return nullptr;
        return &it->second[format::slot_of(oid)];
    };
    for (const auto& segment : segments) {
        const std::uint64_t page = segment.first;
        segment_view seg;
        try {
            seg = read_segment(page, buffer, "steppe check");
        } catch (const error& e) {  // read whole a moment ago: the file changed under the check
            findings.push_back(std::string("O1: ") + e.what());
            continue;
        }
        for (std::uint32_t i = 0; i < seg.entries.size(); ++i) {
            const auto& e = seg.entries[i];
            const types::layout& l = catalog_.at(e.type);
            for (std::uint32_t k = 0; k < e.count; ++k)
                for (std::size_t r = 0; r < l.refs.size(); ++r) {
                    std::uint64_t oid;
                    std::memcpy(&oid, seg.bytes + e.offset + std::uint64_t{k} * l.size + l.refs[r], sizeof oid);
                    if (oid == 0) continue;
                    const object_kind* target = exists(oid);
                    std::string wrong = !target ? "which does not exist" : wrong_target(catalog_, l, r, target->type);
                    if (!wrong.empty())
                        findings.push_back(path + ": O2: object " + std::to_string(format::make_oid(page, i)) + " (" +
                                           l.name + "), element " + std::to_string(k) + ", reference at offset " +
                                           std::to_string(l.refs[r]) + types::field_context(l, l.refs[r]) +
                                           " names object " + std::to_string(oid) + ", " + wrong);
                }
        }
    }
    for (const auto& [name, r] : committed_roots_) {
        if (r.address == 0) continue;
        const object_kind* e = exists(r.address);
        if (!e)
            findings.push_back(path + ": O3: root '" + name + "' names object " + std::to_string(r.address) +
                               ", which does not exist");
        else if (e->type != r.type || e->count != 1)
            findings.push_back(path + ": O3: root '" + name + "' is a " + catalog_.at(r.type).name +
                               " but names a " + catalog_.at(e->type).name);
    }
    check_meta(objects, segments.size(), findings);
    for (std::string& f : check_memory()) findings.push_back(path + ": " + f);
    return findings;
}

void engine_handle::check_meta(std::uint64_t objects, std::uint64_t segments, std::vector<std::string>& findings) const {
    if (meta_.reserved != 0)
        findings.push_back(storage_->path() + ": O5: the object engine's meta has a reserved word that is not zero");
    if (objects != meta_.objects || segments != meta_.segments)
        findings.push_back(storage_->path() + ": O4: the meta counts " + std::to_string(meta_.objects) + " objects in " +
                           std::to_string(meta_.segments) + " segments, the pages hold " + std::to_string(objects) +
                           " in " + std::to_string(segments));
}

void engine_handle::check_reserved_zero(std::uint64_t page, const segment_view& s,
                                        std::vector<std::string>& findings) const {
    const std::string where = storage_->path() + ": O5: segment at page " + std::to_string(page);
    if (s.head.reserved != 0 || s.head.reserved2 != 0)
        findings.push_back(where + ": its header's reserved words are not zero");
    for (std::uint32_t i = 0; i < s.entries.size(); ++i)
        if (s.entries[i].reserved != 0)
            findings.push_back(where + ": the table entry of object " + std::to_string(format::make_oid(page, i)) +
                               " has a reserved word that is not zero");
    // Every byte outside the table and the objects' bytes: the padding after
    // the table and after each object, and the 16 bytes before each object
    // (its header's place in memory). A gap ends where the next object's
    // bytes start (read_segment checked the offsets: O6), the last at the
    // end of the segment's pages.
    std::uint64_t from = sizeof s.head + s.entries.size() * sizeof(format::object_entry);
    for (std::uint32_t i = 0; i <= s.entries.size(); ++i) {
        const std::uint64_t to =
            i < s.entries.size() ? s.entries[i].offset : std::uint64_t{s.head.pages} * storage::page_size;
        const std::byte* nonzero =
            std::find_if(s.bytes + from, s.bytes + to, [](std::byte b) { return b != std::byte{0}; });
        if (nonzero != s.bytes + to)
            findings.push_back(
                where + ": byte " + std::to_string(nonzero - s.bytes) + ", in the padding after " +
                (i == 0 ? "the object table" : "object " + std::to_string(format::make_oid(page, i - 1))) +
                (i < s.entries.size() ? " or the 16 bytes before object " + std::to_string(format::make_oid(page, i)) +
                                            " (its header's place in memory)"
                                      : ", to the segment's end") +
                ", is not zero");
        if (i < s.entries.size()) from = s.entries[i].offset + object_bytes(s.entries[i].type, s.entries[i].count);
    }
}

bool engine_handle::blob_page_at(std::uint64_t page, std::vector<std::byte>& buffer) const {
    buffer.resize(storage::page_size);
    storage_->read_page(page, buffer.data());
    std::uint32_t magic;
    std::memcpy(&magic, buffer.data(), sizeof magic);
    return magic == storage::blob_magic;
}

std::vector<type_usage> engine_handle::types() const {
    std::vector<type_usage> out;
    for (const types::layout& l : catalog_.entries()) out.push_back({l.name, l.size, 0, 0});
    for_each_segment("steppe types", [&](const segment_view& s) {
        std::vector<bool> seen(out.size(), false);
        for (const auto& e : s.entries) {
            ++out[e.type].objects;
            if (!seen[e.type]) out[e.type].pages += s.head.pages;
            seen[e.type] = true;
        }
    });
    return out;
}

// Breadth first from the roots over stored references (oids), each object
// read from its committed segment.
void engine_handle::dump(const std::function<void(const std::string&)>& line) const {
    if (!storage_) throw error(errc::invalid_argument, "object store: dump of a closed store");
    std::deque<std::uint64_t> todo;
    std::set<std::uint64_t> seen;
    auto name = [](std::uint64_t oid) { return "\"o:" + std::to_string(oid) + "\""; };
    types::word_to_json word = [&](std::uint64_t oid) -> std::string {
        if (oid == 0) return "null";
        if (seen.insert(oid).second) todo.push_back(oid);
        return name(oid);
    };
    for (const auto& [root, r] : committed_roots_)
        line("{\"root\":" + types::json_string(root) + ",\"type\":" + types::json_string(catalog_.at(r.type).name) +
             ",\"id\":" + word(r.address) + "}");
    std::vector<std::byte> buffer;
    while (!todo.empty()) {
        std::uint64_t oid = todo.front();
        todo.pop_front();
        segment_view s = read_segment(format::page_of(oid), buffer, "a dump");
        if (format::slot_of(oid) >= s.head.objects)
            throw segment_damage(s.page, "a dump", "a reference names object " + std::to_string(format::slot_of(oid)) +
                                                       " of " + std::to_string(s.head.objects));
        const format::object_entry& e = s.entries[format::slot_of(oid)];
        line("{\"id\":" + name(oid) + ",\"type\":" + types::json_string(catalog_.at(e.type).name) + ",\"count\":" +
             std::to_string(e.count) + ",\"value\":" +
             types::object_json(catalog_, e.type, e.count, s.bytes + e.offset, word) + "}");
    }
}

}  // namespace steppe::objects::detail
