// The object engine against a model: random programs of operations on a graph
// of objects (nodes with links, arrays of references, of values and of
// structs holding references, large blobs, named roots), each checked against
// plain C++ maps that say what the program must see and what a reopen must
// find. Built once per scheme, as the functional suite (CMakeLists.txt).
//
// The model (struct model) keeps
//   current     every object the program knows in this session (all of them
//               held: `handles`), with the contents it must see now, and the
//               roots as set;
//   committed   the contents of every persistent object as of the last commit,
//               and the committed roots;
//   persistent  the objects that have an identity in the store;
//   dirty       persistent objects written through mut() since the last
//               commit or rollback.
// Its rules are the engine's documented ones (objects.hpp, commit.cpp):
//   commit     gathers, breadth first from the roots and from the references
//              of the written objects, every transient object reached (they
//              become persistent); written and new objects get their current
//              contents committed; the roots are committed. What nothing
//              reaches stays transient (and is not written).
//   rollback   written persistent objects get their committed contents back,
//              the roots are the committed ones; transient objects keep theirs.
//   reopen     only what the committed roots reach is there (objects no root
//              reaches are unreachable for ever: the model forgets them).
//   a crash during a commit, then any power loss: the store holds the state
//              before the commit or the one in flight, whole: one of the two.
//   an I/O error during a commit: the program sees the state from before the
//              commit (its changes still pending) and can commit again, unless
//              the store is poisoned (then a reopen finds one of the two).
//
// The operations (class runner; weights per profile): make nodes, trees of
// nodes, arrays of references / values / edges, blobs (transient, often hung
// on a node the roots reach); set and copy links and array elements, whole
// objects, versions (all through mut()); set, null, remove, find-or-make
// roots; commit (the number of objects it made persistent must be the
// model's gather: stats().new_objects); rollback; close and reopen with
// random options (fetch granularity, swizzling, conversion, segment_objects, segment_bytes,
// card_bytes, checkpoint_bytes, another store open first so the slot
// differs); a read-only open; a power cut; a crash at a random I/O call of a
// commit or of a checkpoint, then each kind of power loss; an EIO / ENOSPC
// at a random I/O call of a commit; a reference to another store's object,
// which the commit must refuse (transient_pointer) without writing anything.
// After every reopen check() must be empty.
//
// The checker (class differ) walks the store from its roots and from every
// held reference, in step with the model: ids, versions, the link structure
// and identity (two references to one model object must be the same store
// object: ref operator== and the same body; different model objects must be
// different store objects), array contents, blob bytes, the root names.
//
// Seeds are deterministic. Environment variables for long or replayed runs:
//   STEPPE_OBJECTS_MODEL_SEED=n     run only seed n (replay a failure)
//   STEPPE_OBJECTS_MODEL_SEEDS=n    seeds per test (default: a few, for CI)
//   STEPPE_OBJECTS_MODEL_SEED_OFFSET=k  start k seeds further (other seeds than CI's)
//   STEPPE_OBJECTS_MODEL_STEPS=n    operations per seed
//   STEPPE_OBJECTS_MODEL_VERBOSE=1  print every operation as it runs (for a
//                                   crash of the test program itself)
// A failure names the seed, the step and the operations that led there.
#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>
#include <steppe/objects.hpp>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <iterator>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <unordered_map>
#include <variant>
#include <vector>

#include "objects/object_engine.hpp"
#include "support/fault_env.hpp"
#include "support/temp_dir.hpp"

namespace so = steppe::objects;

namespace {

// ---- stored types -------------------------------------------------------------

constexpr int node_links = 3;
constexpr std::size_t blob_bytes = 3000;  // most of a page: blobs make segments span pages

struct Node;
struct Edge;
struct Blob;
using node_ref = so::ref<Node>;
using refs_ref = so::ref<so::array<node_ref>>;
using values_ref = so::ref<so::array<std::int64_t>>;
using edges_ref = so::ref<so::array<Edge>>;
using blob_ref = so::ref<Blob>;

struct Edge {  // an array element with a reference inside, between scalars (24 bytes)
    std::int32_t weight;
    node_ref to;
    std::int16_t tag;
};
struct Node {
    std::int64_t id;  // the model's id
    std::int64_t version;
    node_ref link[node_links];
    refs_ref refs;
    values_ref values;
    edges_ref edges;
    blob_ref blob;
    std::int32_t check;  // node_check(id, version): a torn or mixed object shows
};
struct Blob {
    std::int64_t id;
    std::int64_t version;
    node_ref owner;
    std::uint8_t bytes[blob_bytes];  // blob_byte(id, version, i)
};

std::int32_t node_check(std::int64_t id, std::int64_t version) {
    return static_cast<std::int32_t>(static_cast<std::uint32_t>(static_cast<std::uint64_t>(id) * 7919u +
                                                                static_cast<std::uint64_t>(version) * 31u));
}
std::uint8_t blob_byte(std::int64_t id, std::int64_t version, std::size_t i) {
    return static_cast<std::uint8_t>(static_cast<std::uint64_t>(id) * 131u + static_cast<std::uint64_t>(version) * 17u +
                                     i * 7u + (i >> 8));
}

// ---- the model ------------------------------------------------------------------

using mid = std::int64_t;  // a model object's id; 0 = null

enum class kind : std::uint8_t { node = 0, refs = 1, values = 2, edges = 3, blob = 4 };
constexpr int kinds = 5;
const char* kind_name(kind k) {
    switch (k) {
    case kind::node: return "node";
    case kind::refs: return "refs";
    case kind::values: return "values";
    case kind::edges: return "edges";
    case kind::blob: return "blob";
    }
    return "?";
}

// A node's references, in the model: its links, then its four fields.
constexpr int node_slots = node_links + 4;
constexpr int slot_refs = node_links, slot_values = node_links + 1, slot_edges = node_links + 2,
              slot_blob = node_links + 3;
kind slot_kind(int slot) {
    switch (slot) {
    case slot_refs: return kind::refs;
    case slot_values: return kind::values;
    case slot_edges: return kind::edges;
    case slot_blob: return kind::blob;
    default: return kind::node;
    }
}
const char* slot_name(int slot) {
    static const char* names[node_slots] = {"link[0]", "link[1]", "link[2]", "refs", "values", "edges", "blob"};
    return names[slot];
}

struct mobj {
    kind k = kind::node;
    std::int64_t version = 0;      // node, blob
    std::vector<mid> refs;         // node: node_slots; refs: the elements; edges: each `to`; blob: the owner
    std::vector<std::int64_t> vals;  // values: the elements; edges: weight, tag per element
    friend bool operator==(const mobj&, const mobj&) = default;
};

struct state {
    std::map<mid, mobj> objects;
    std::map<std::string, mid> roots;  // 0: a root set to null
};

std::string name_of(const state& s, mid id) {
    auto it = s.objects.find(id);
    return std::string(it == s.objects.end() ? "object" : kind_name(it->second.k)) + " " + std::to_string(id);
}

// What the roots of `s` reach, through the contents `s` gives.
state reachable_part(const state& s) {
    state out;
    out.roots = s.roots;
    std::vector<mid> stack;
    for (const auto& [name, id] : s.roots)
        if (id) stack.push_back(id);
    while (!stack.empty()) {
        mid id = stack.back();
        stack.pop_back();
        if (out.objects.count(id)) continue;
        const mobj& o = s.objects.at(id);
        out.objects.emplace(id, o);
        for (mid t : o.refs)
            if (t && !out.objects.count(t)) stack.push_back(t);
    }
    return out;
}

struct model {
    state current, committed;
    std::set<mid> persistent, dirty;
    mid next_id = 1;

    struct commit_plan {
        state committed;          // the committed state if the commit completes
        std::vector<mid> reached;  // transient objects it makes persistent
    };
    commit_plan plan_commit() const {
        commit_plan p;
        std::set<mid> reached;
        auto reach = [&](mid t) {
            if (t && !persistent.count(t) && reached.insert(t).second) p.reached.push_back(t);
        };
        for (const auto& [name, id] : current.roots) reach(id);
        for (mid d : dirty)
            for (mid t : current.objects.at(d).refs) reach(t);
        for (std::size_t i = 0; i < p.reached.size(); ++i)
            for (mid t : current.objects.at(p.reached[i]).refs) reach(t);
        p.committed = committed;
        p.committed.roots = current.roots;
        for (mid x : dirty) p.committed.objects[x] = current.objects.at(x);
        for (mid x : p.reached) p.committed.objects[x] = current.objects.at(x);
        return p;
    }
    void commit(const commit_plan& p) {
        committed = p.committed;
        persistent.insert(p.reached.begin(), p.reached.end());
        dirty.clear();
    }
    void rollback() {
        for (mid x : dirty) current.objects[x] = committed.objects.at(x);
        dirty.clear();
        current.roots = committed.roots;
    }
    // After a reopen that found `durable` (a committed state).
    void reopened(const state& durable) {
        committed = reachable_part(durable);
        current = committed;
        persistent.clear();
        for (const auto& [id, o] : committed.objects) persistent.insert(id);
        dirty.clear();
    }
    void wrote(mid id) {
        if (persistent.count(id)) dirty.insert(id);
    }
};

// ---- references of any stored kind ------------------------------------------------

using any_ref = std::variant<node_ref, refs_ref, values_ref, edges_ref, blob_ref>;  // by kind

template<class R> constexpr kind kind_of() {
    if constexpr (std::is_same_v<R, node_ref>) return kind::node;
    else if constexpr (std::is_same_v<R, refs_ref>) return kind::refs;
    else if constexpr (std::is_same_v<R, values_ref>) return kind::values;
    else if constexpr (std::is_same_v<R, edges_ref>) return kind::edges;
    else return kind::blob;
}

using handle_map = std::map<mid, any_ref>;

// ---- the checker -----------------------------------------------------------------

// Compares what a store shows with a model state; run() returns the first
// difference, empty if none. Walks from the roots, then (all_handles) from
// every held reference. With `adopt`, references met to objects not held yet
// become the held ones (after a reopen). Dereference errors propagate.
class differ {
public:
    differ(const state& want, handle_map& handles, bool adopt, bool all_handles)
        : want_(want), handles_(handles), adopt_(adopt), all_handles_(all_handles),
          seen_(want.objects.empty() ? 1 : static_cast<std::size_t>(want.objects.rbegin()->first) + 1, no_item) {}

    std::string run(so::store& s) {
        std::set<std::string> got;
        for (const so::root_info& r : s.roots()) got.insert(r.name);
        for (const std::string& n : got)
            if (!want_.roots.count(n)) return "the store has a root '" + n + "' the model does not";
        for (const auto& [n, id] : want_.roots)
            if (!got.count(n)) return "root '" + n + "' is missing from the store's roots()";
        for (const auto& [n, id] : want_.roots) {
            node_ref r = s.find_root<Node>(n);
            std::string label = "root '" + n + "'";
            if (!edge(r, id, no_item, label.c_str(), -1)) return problem_;
            drain();
            if (!problem_.empty()) return problem_;
        }
        for (const item& it : items_)
            if (want_.objects.at(it.id).k == kind::node) rooted_.push_back(it.id);
        if (all_handles_) {
            std::vector<std::pair<mid, any_ref>> held(handles_.begin(), handles_.end());
            for (const auto& [id, h] : held) {
                if (seen(id) != no_item) continue;
                if (!want_.objects.count(id))
                    return "the program holds " + std::to_string(id) + ", unknown to the model";
                std::visit([&, id = id](const auto& r) { edge(r, id, no_item, "a held reference", -1); }, h);
                drain();
                if (!problem_.empty()) return problem_;
            }
        }
        return problem_;
    }
    // The nodes the walk met from the roots.
    const std::vector<mid>& rooted() const { return rooted_; }

private:
    static constexpr std::size_t no_item = static_cast<std::size_t>(-1);
    struct item {
        any_ref raw;  // the reference as met first, unresolved
        const void* body;
        mid id;
        std::size_t parent;
        std::string label;
        long index;
    };
    std::size_t seen(mid id) const {
        return id > 0 && static_cast<std::size_t>(id) < seen_.size() ? seen_[static_cast<std::size_t>(id)] : no_item;
    }

    bool fail(const std::string& what) {
        if (problem_.empty()) problem_ = what;
        return false;
    }
    std::string path(std::size_t i) const {
        std::vector<std::string> parts;
        for (std::size_t at = i; at != no_item; at = items_[at].parent) {
            const item& it = items_[at];
            parts.push_back(it.label + (it.index >= 0 ? "[" + std::to_string(it.index) + "]" : "") + " -> " +
                            name_of(want_, it.id));
        }
        std::string out;
        for (auto p = parts.rbegin(); p != parts.rend(); ++p) out += (out.empty() ? "" : ", ") + *p;
        return out;
    }
    std::string where(std::size_t from, const char* label, long index) const {
        std::string here = label + std::string(index >= 0 ? "[" + std::to_string(index) + "]" : "");
        return from == no_item ? here : "(" + path(from) + ")." + here;
    }

    // The reference `slot` should lead to model object `want_id` (0: be null).
    template<class R> bool edge(const R& slot, mid want_id, std::size_t from, const char* label, long index) {
        if (!want_id) return slot ? fail(where(from, label, index) + " is set, the model says null") : true;
        if (!slot) return fail(where(from, label, index) + " is null, the model says " + name_of(want_, want_id));
        R raw = slot;  // unresolved: a fault block, a tagged id, or an address
        const void* body;
        if (want_id % 3 == 0) {
            body = slot.get();  // resolves in place (patches the slot inside its object)
        } else {
            R copy = raw;
            body = copy.get();
        }
        if (std::size_t at = seen(want_id); at != no_item) {
            const item& first = items_[at];
            if (!(raw == std::get<R>(first.raw)))
                return fail(where(from, label, index) + " and (" + path(at) +
                            ") should be one object, but ref operator== says they differ");
            if (body != first.body)
                return fail(where(from, label, index) + " and (" + path(at) +
                            ") should be one object, but lead to two copies");
            return true;
        }
        auto w = want_.objects.find(want_id);
        if (w == want_.objects.end() || w->second.k != kind_of<R>())
            return fail(where(from, label, index) + ": model bookkeeping: " + std::to_string(want_id));
        if (static_cast<std::size_t>(want_id) >= seen_.size())
            seen_.resize(static_cast<std::size_t>(want_id) + 1, no_item);
        if (auto o = owner_.find(body); o != owner_.end())
            return fail(where(from, label, index) + " leads to the store object of (" + path(o->second) +
                        "), the model says it is " + name_of(want_, want_id) + ", another object");
        auto& last = last_[static_cast<int>(kind_of<R>())];
        if (last && raw == std::get<R>(last->raw))
            return fail(where(from, label, index) + " compares equal (ref operator==) to " + name_of(want_, last->id) +
                        ", another object");
        if (!check_handle(raw, body, want_id, from, label, index)) return false;
        items_.push_back({raw, body, want_id, from, label, index});
        seen_[static_cast<std::size_t>(want_id)] = items_.size() - 1;
        owner_[body] = items_.size() - 1;
        last.emplace(last_seen{raw, want_id});
        pending_.push_back(items_.size() - 1);
        return true;
    }
    template<class R>
    bool check_handle(const R& raw, const void* body, mid id, std::size_t from, const char* label, long index) {
        auto h = handles_.find(id);
        if (h == handles_.end()) {
            if (adopt_) handles_.emplace(id, raw);
            return true;
        }
        const R& held = std::get<R>(h->second);
        if (!(held == raw))
            return fail(where(from, label, index) + ": the reference the program holds to " + name_of(want_, id) +
                        " and this one differ by ref operator==");
        R copy = held;
        if (copy.get() != body)
            return fail(where(from, label, index) + ": the reference the program holds to " + name_of(want_, id) +
                        " leads elsewhere");
        return true;
    }

    void drain() {
        while (!pending_.empty() && problem_.empty()) {
            std::size_t i = pending_.back();
            pending_.pop_back();
            compare(i);
        }
    }

    template<class T> bool same_value(std::size_t i, const char* field, long index, T got, T want) {
        if (got == want) return true;
        return fail("(" + path(i) + ")." + field + (index >= 0 ? "[" + std::to_string(index) + "]" : "") + " is " +
                    std::to_string(got) + ", the model says " + std::to_string(want));
    }

    void compare(std::size_t i) {
        const mid id = items_[i].id;
        const void* body = items_[i].body;
        const mobj& o = want_.objects.at(id);
        switch (o.k) {
        case kind::node: {
            const Node* n = static_cast<const Node*>(body);
            if (!same_value(i, "id", -1, n->id, id) || !same_value(i, "version", -1, n->version, o.version) ||
                !same_value(i, "check", -1, n->check, node_check(id, o.version)))
                return;
            for (int l = 0; l < node_links; ++l)
                if (!edge(n->link[l], o.refs[static_cast<std::size_t>(l)], i, "link", l)) return;
            if (!edge(n->refs, o.refs[slot_refs], i, "refs", -1) ||
                !edge(n->values, o.refs[slot_values], i, "values", -1) ||
                !edge(n->edges, o.refs[slot_edges], i, "edges", -1) || !edge(n->blob, o.refs[slot_blob], i, "blob", -1))
                return;
            break;
        }
        case kind::refs: {
            const auto* a = static_cast<const so::array<node_ref>*>(body);
            if (!same_value(i, "size()", -1, a->size(), o.refs.size())) return;
            for (std::size_t k = 0; k < o.refs.size(); ++k)
                if (!edge((*a)[k], o.refs[k], i, "element", static_cast<long>(k))) return;
            break;
        }
        case kind::values: {
            const auto* a = static_cast<const so::array<std::int64_t>*>(body);
            if (!same_value(i, "size()", -1, a->size(), o.vals.size())) return;
            for (std::size_t k = 0; k < o.vals.size(); ++k)
                if (!same_value(i, "element", static_cast<long>(k), (*a)[k], o.vals[k])) return;
            break;
        }
        case kind::edges: {
            const auto* a = static_cast<const so::array<Edge>*>(body);
            if (!same_value(i, "size()", -1, a->size(), o.refs.size())) return;
            for (std::size_t k = 0; k < o.refs.size(); ++k) {
                const Edge& e = (*a)[k];
                if (!same_value(i, "weight", static_cast<long>(k), std::int64_t{e.weight}, o.vals[2 * k]) ||
                    !same_value(i, "tag", static_cast<long>(k), std::int64_t{e.tag}, o.vals[2 * k + 1]) ||
                    !edge(e.to, o.refs[k], i, "to", static_cast<long>(k)))
                    return;
            }
            break;
        }
        case kind::blob: {
            const Blob* b = static_cast<const Blob*>(body);
            if (!same_value(i, "id", -1, b->id, id) || !same_value(i, "version", -1, b->version, o.version)) return;
            for (std::size_t k = 0; k < blob_bytes; ++k)
                if (!same_value(i, "bytes", static_cast<long>(k), int{b->bytes[k]}, int{blob_byte(id, o.version, k)}))
                    return;
            if (!edge(b->owner, o.refs[0], i, "owner", -1)) return;
            break;
        }
        }
    }

    const state& want_;
    handle_map& handles_;
    bool adopt_, all_handles_;
    std::string problem_;
    std::vector<item> items_;
    std::vector<mid> rooted_;
    std::vector<std::size_t> pending_;
    std::vector<std::size_t> seen_;                       // by model id: the item, or no_item
    std::unordered_map<const void*, std::size_t> owner_;  // store object -> its item
    struct last_seen {
        any_ref raw;
        mid id;
    };
    std::optional<last_seen> last_[kinds];
};

std::string differences(so::store& s, const state& want) {
    handle_map none;
    return differ(want, none, true, false).run(s);
}

// ---- the random programs -------------------------------------------------------

long env_long(const char* name, long fallback) {
    const char* v = std::getenv(name);
    return v && *v ? std::strtol(v, nullptr, 10) : fallback;
}

enum op : int {
    op_make_node, op_make_tree, op_make_refs, op_make_values, op_make_edges, op_make_blob,
    op_set_link, op_copy_link, op_set_field, op_set_version, op_clear_node,
    op_set_ref_element, op_copy_ref_elements, op_set_values, op_set_edge, op_set_blob,
    op_set_root, op_set_root_null, op_remove_root, op_root_or_make,
    op_commit, op_rollback, op_reopen, op_read_only_view, op_power_cut,
    op_crash_commit, op_fail_commit, op_crash_checkpoint, op_foreign_ref, op_explore, op_checkpoint, op_check,
    op_verify, op_count
};

struct profile {
    const char* name;
    int weight[op_count];
    int verify_every;  // a full comparison after this many operations (and after every commit, rollback, reopen)
    std::size_t soft_cap;  // objects the program knows before it leans towards unlinking
};

// clang-format off
constexpr profile mixed_profile{"mixed", {
    /*make_node*/ 10, /*make_tree*/ 2, /*make_refs*/ 2, /*make_values*/ 2, /*make_edges*/ 2, /*make_blob*/ 1,
    /*set_link*/ 14, /*copy_link*/ 4, /*set_field*/ 5, /*set_version*/ 8, /*clear_node*/ 2,
    /*set_ref_element*/ 5, /*copy_ref_elements*/ 2, /*set_values*/ 4, /*set_edge*/ 3, /*set_blob*/ 2,
    /*set_root*/ 3, /*set_root_null*/ 1, /*remove_root*/ 1, /*root_or_make*/ 2,
    /*commit*/ 8, /*rollback*/ 3, /*reopen*/ 2, /*read_only_view*/ 1, /*power_cut*/ 1,
    /*crash_commit*/ 2, /*fail_commit*/ 2, /*crash_checkpoint*/ 1, /*foreign_ref*/ 1,
    /*explore*/ 3, /*checkpoint*/ 1, /*check*/ 1, /*verify*/ 4},
    3, 600};
constexpr profile large_profile{"large", {
    /*make_node*/ 12, /*make_tree*/ 8, /*make_refs*/ 2, /*make_values*/ 2, /*make_edges*/ 2, /*make_blob*/ 1,
    /*set_link*/ 8, /*copy_link*/ 3, /*set_field*/ 5, /*set_version*/ 8, /*clear_node*/ 1,
    /*set_ref_element*/ 5, /*copy_ref_elements*/ 2, /*set_values*/ 3, /*set_edge*/ 3, /*set_blob*/ 2,
    /*set_root*/ 1, /*set_root_null*/ 0, /*remove_root*/ 0, /*root_or_make*/ 1,
    /*commit*/ 6, /*rollback*/ 2, /*reopen*/ 1, /*read_only_view*/ 0, /*power_cut*/ 0,
    /*crash_commit*/ 1, /*fail_commit*/ 1, /*crash_checkpoint*/ 0, /*foreign_ref*/ 1,
    /*explore*/ 3, /*checkpoint*/ 1, /*check*/ 1, /*verify*/ 2},
    6, 2500};
constexpr profile fault_profile{"faults", {
    /*make_node*/ 10, /*make_tree*/ 2, /*make_refs*/ 2, /*make_values*/ 2, /*make_edges*/ 2, /*make_blob*/ 1,
    /*set_link*/ 12, /*copy_link*/ 3, /*set_field*/ 4, /*set_version*/ 8, /*clear_node*/ 2,
    /*set_ref_element*/ 4, /*copy_ref_elements*/ 2, /*set_values*/ 3, /*set_edge*/ 3, /*set_blob*/ 2,
    /*set_root*/ 3, /*set_root_null*/ 1, /*remove_root*/ 1, /*root_or_make*/ 2,
    /*commit*/ 4, /*rollback*/ 2, /*reopen*/ 1, /*read_only_view*/ 1, /*power_cut*/ 2,
    /*crash_commit*/ 8, /*fail_commit*/ 6, /*crash_checkpoint*/ 2, /*foreign_ref*/ 1,
    /*explore*/ 3, /*checkpoint*/ 1, /*check*/ 1, /*verify*/ 2},
    4, 400};
// clang-format on

enum class sabotage {
    none,
    version,        // at a step, the model expects another version of a node the roots reach
    crash_outcome,  // after a crash, the model expects neither state the store may hold
};

struct run_totals {
    long steps = 0, commits = 0, rollbacks = 0, reopens = 0, crashes = 0, crash_before = 0, crash_after = 0,
         io_failures = 0, io_poisoned = 0, power_cuts = 0, verifies = 0, max_objects = 0, reached = 0;
    long losses[4] = {};  // power losses by steppe::test::loss
    void add(const run_totals& o) {
        for (int i = 0; i < 4; ++i) losses[i] += o.losses[i];
        steps += o.steps, commits += o.commits, rollbacks += o.rollbacks, reopens += o.reopens, crashes += o.crashes;
        crash_before += o.crash_before, crash_after += o.crash_after, io_failures += o.io_failures;
        io_poisoned += o.io_poisoned, power_cuts += o.power_cuts, verifies += o.verifies, reached += o.reached;
        max_objects = std::max(max_objects, o.max_objects);
    }
    std::string text() const {
        char buf[400];
        std::snprintf(buf, sizeof buf,
                      "%ld steps, %ld commits (%ld objects made persistent), %ld rollbacks, %ld reopens, "
                      "%ld crashes in commits (%ld left the state before, %ld the one in flight), %ld power cuts, "
                      "%ld I/O errors in commits (%ld poisoned), %ld comparisons, at most %ld objects",
                      steps, commits, reached, rollbacks, reopens, crashes, crash_before, crash_after, power_cuts,
                      io_failures, io_poisoned, verifies, max_objects);
        return buf;
    }
};

struct failure {
    std::string what;
};

class runner {
public:
    runner(std::uint64_t seed, const profile& p, sabotage sab = sabotage::none, long sabotage_step = -1)
        : seed_(seed), rng_(seed * 0x9E3779B97F4A7C15ull + 1), profile_(p), sabotage_(sab),
          sabotage_step_(sabotage_step) {
        verbose_ = env_long("STEPPE_OBJECTS_MODEL_VERBOSE", 0) != 0;
    }
    ~runner() {
        handles_.clear();
        main_.reset();
        spacer_.reset();
    }

    // Runs `steps` operations; false (with a gtest failure naming seed, step
    // and operations) at the first difference.
    bool run(long steps) {
        try {
            open_main(false);
            after_open(m_.committed, "open");
            for (step_ = 0; step_ < steps; ++step_) {
                one_step();
                ++totals_.steps;
                totals_.max_objects = std::max<long>(totals_.max_objects, static_cast<long>(m_.current.objects.size()));
            }
            verify("the end");
            after_reopen_check("the end");
        } catch (const failure& f) {
            report(f.what);
            return false;
        } catch (const steppe::error& e) {
            report(std::string("steppe::error: ") + e.what());
            return false;
        } catch (const steppe::test::simulated_crash&) {
            report("an unexpected simulated crash");
            return false;
        } catch (const std::exception& e) {
            report(std::string("exception: ") + e.what());
            return false;
        }
        return true;
    }
    const run_totals& totals() const { return totals_; }

private:
    // ---- randomness
    std::uint64_t below(std::uint64_t n) { return n ? rng_() % n : 0; }
    bool chance(unsigned percent) { return below(100) < percent; }
    std::int64_t any_value() { return static_cast<std::int64_t>(rng_()) >> below(60); }

    // ---- logging and failing
    void note(std::string text) {
        if (verbose_)
            std::fprintf(stderr, "[model seed %llu] %ld: %s\n", static_cast<unsigned long long>(seed_), step_,
                         text.c_str());
        log_.push_back(std::to_string(step_) + ": " + std::move(text));
    }
    [[noreturn]] void fail(const std::string& what) { throw failure{what}; }
    void report(const std::string& what) {
        std::string ops;
        std::size_t from = log_.size() > 80 ? log_.size() - 80 : 0;
        for (std::size_t i = from; i < log_.size(); ++i) ops += "  " + log_[i] + "\n";
        if (sabotage_ == sabotage::none) {  // (a sabotaged run fails on purpose)
            std::fprintf(stderr, "[model seed %llu] every operation up to the failure:\n",
                         static_cast<unsigned long long>(seed_));
            for (const std::string& l : log_) std::fprintf(stderr, "  %s\n", l.c_str());
        }
        ADD_FAILURE() << "object model: seed " << seed_ << " (" << profile_.name << "), step " << step_ << ": " << what
                      << "\nreplay: STEPPE_OBJECTS_MODEL_SEED=" << seed_ << " STEPPE_OBJECTS_MODEL_STEPS=" << step_ + 1
                      << " <this test program> --gtest_filter=" << current_test()
                      << " (STEPPE_OBJECTS_MODEL_VERBOSE=1 to trace every operation)"
                      << "\nthe last operations (all of them are on stderr):\n"
                      << ops;
    }

    static std::string current_test() {
        const ::testing::TestInfo* t = ::testing::UnitTest::GetInstance()->current_test_info();
        return t ? std::string(t->test_suite_name()) + "." + t->name() : std::string("*");
    }

    // ---- the store
    so::options pick_options(bool read_only) {
        so::options o;
        o.checkpoint_on_close = false;  // a "crashed" store object must write nothing when destroyed
        o.durable = true;
        o.read_only = read_only;
        o.create = !read_only;
        o.fetch = chance(50) ? so::granularity::object : so::granularity::logical_segment;
        static const std::uint32_t seg_objects[] = {1, 2, 5, 16, 64, 255};
        o.segment_objects = seg_objects[below(std::size(seg_objects))];
        static const std::uint32_t seg_bytes[] = {4096, 16384, 65536, 1u << 20};
        o.segment_bytes = seg_bytes[below(std::size(seg_bytes))];
        static const std::uint32_t cards[] = {16, 128, 256, 4096};
        o.card_bytes = cards[below(std::size(cards))];
        o.checkpoint_bytes = chance(25) ? 48u << 10 : std::uint64_t{64} << 20;
        o.convert = chance(25) ? so::conversion::eager : so::conversion::lazy;
        constexpr so::detection detect = so::detail::compiled_scheme.detect;
        if (detect == so::detection::id && chance(50)) {
            o.swizzle = chance(50) ? so::swizzling::opportunistic : so::swizzling::eager;
        } else if (detect != so::detection::id_self_heal && chance(50)) {
            o.swizzle = chance(50) ? so::swizzling::opportunistic : so::swizzling::eager;
        }
        return o;
    }
    std::string describe(const so::options& o) const {
        return std::string("fetch=") + so::to_string(o.fetch) +
               " segment_objects=" + std::to_string(o.segment_objects) +
               " segment_bytes=" + std::to_string(o.segment_bytes) + " card_bytes=" + std::to_string(o.card_bytes) +
               " checkpoint_bytes=" + std::to_string(o.checkpoint_bytes) + " swizzle=" + so::to_string(o.swizzle) +
               " convert=" + so::to_string(o.convert) + (o.read_only ? " read_only" : "") +
               (spacer_ ? " (another store open first)" : "");
    }
    void open_main(bool read_only) {
        handles_.clear();
        main_.reset();
        spacer_.reset();
        so::options o = pick_options(read_only);
        if (chance(30)) {  // another store holds slot 1, so this one's words carry another slot
            so::options so_;
            so_.durable = false;
            so_.card_bytes = o.card_bytes;  // all object stores open in a process use the same
            spacer_.emplace(so::store::open(dir_.path("spacer.ods"), so_));
        }
        note("open " + describe(o));
        main_.emplace(so::detail::store_access::open(path_, o, so::detail::compiled_scheme, &env_));
        read_only_ = read_only;
    }
    so::store& s() { return *main_; }

    // After any open: check() is empty, and the store must be `durable` (its
    // reachable part). Either compared at once (every object reachable is
    // faulted in, and the references met become the program's), or, in a lazy
    // session, later: until then the program holds only what it explores,
    // mostly not resident (fault blocks, tagged ids), and writes, commits and
    // rolls back over a graph that is mostly still in its segments.
    void after_open(const state& durable, const char* why, bool may_be_lazy = true) {
        m_.reopened(durable);
        handles_.clear();
        rooted_.clear();
        after_reopen_check(why);
        if (may_be_lazy && !read_only_ && chance(50)) {
            lazy_left_ = 5 + static_cast<int>(below(40));
            note("  lazy for " + std::to_string(lazy_left_) + " operations: compared at their end");
            rebuild_ids();
            for (int i = 0; i < 3; ++i) explore();
            return;
        }
        lazy_left_ = 0;
        verify(why);
    }
    void after_reopen_check(const char* why) {
        std::vector<std::string> findings = s().check();
        if (!findings.empty()) fail(std::string("check() after ") + why + ": " + findings[0]);
    }
    // Everything the roots reach and everything held against the model; what
    // the walk meets and the program did not hold yet, it holds from now on.
    void verify(const char* why) {
        ++totals_.verifies;
        differ d(m_.current, handles_, true, true);
        std::string found = d.run(s());
        if (!found.empty()) fail(std::string("after ") + why + ": " + found);
        rooted_ = d.rooted();
        lazy_left_ = 0;
        rebuild_ids();
    }

    // ---- what the program knows
    // The objects operations pick from: those the program holds.
    void rebuild_ids() {
        for (auto& v : ids_) v.clear();
        for (const auto& [id, h] : handles_) ids_[h.index()].push_back(id);
    }
    // Follows a few references from a root, through the store's own words
    // (only the objects passed are resolved), and holds what it meets.
    void explore() {
        std::vector<mid> roots;
        for (const auto& [n, id] : m_.current.roots)
            if (id) roots.push_back(id);
        if (roots.empty()) return;
        std::string name;
        mid at = 0;
        {
            auto it = m_.current.roots.begin();
            std::advance(it, static_cast<long>(below(m_.current.roots.size())));
            while (!it->second) it = it == m_.current.roots.begin() ? std::prev(m_.current.roots.end()) : std::prev(it);
            name = it->first;
            at = it->second;
        }
        hold(at, any_ref(s().find_root<Node>(name)));
        std::string path = "explore '" + short_name(name) + "' " + nm(at);
        for (int step = static_cast<int>(below(12)); step > 0; --step) {
            const mobj& o = obj(at);
            std::vector<std::size_t> slots;
            for (std::size_t i = 0; i < o.refs.size(); ++i)
                if (o.refs[i]) slots.push_back(i);
            if (slots.empty()) break;
            std::size_t i = slots[below(slots.size())];
            mid next = o.refs[i];
            any_ref raw = ref_in(at, i);  // the word as stored, unresolved
            hold(next, raw);
            path += " > " + nm(next);
            at = next;
        }
        note(path);
    }
    void hold(mid id, any_ref r) {
        if (handles_.emplace(id, std::move(r)).second) ids_[static_cast<int>(obj(id).k)].push_back(id);
    }
    // The reference in slot i of held object `at`, copied from the object.
    any_ref ref_in(mid at, std::size_t i) {
        const any_ref& h = handles_.at(at);
        switch (obj(at).k) {
        case kind::node: {
            const Node* n = std::get<node_ref>(h).get();
            switch (slot_kind(static_cast<int>(i))) {
            case kind::node: return n->link[i];
            case kind::refs: return n->refs;
            case kind::values: return n->values;
            case kind::edges: return n->edges;
            case kind::blob: return n->blob;
            }
            break;
        }
        case kind::refs: return (*std::get<refs_ref>(h))[i];
        case kind::edges: return (*std::get<edges_ref>(h))[i].to;
        case kind::blob: return std::get<blob_ref>(h)->owner;
        case kind::values: break;
        }
        fail("model bookkeeping: no reference in slot " + std::to_string(i) + " of " + nm(at));
    }
    mid pick(kind k) {
        auto& v = ids_[static_cast<int>(k)];
        return v.empty() ? 0 : v[below(v.size())];
    }
    // A target for a reference slot of kind k: sometimes null.
    mid pick_target(kind k) {
        unsigned null_percent = big() ? 55 : 15;
        return chance(null_percent) ? 0 : pick(k);
    }
    // A node to hang a new object on: mostly one the roots reached lately, so the graph grows.
    mid pick_owner() {
        if (!rooted_.empty() && chance(75)) {
            mid id = rooted_[below(rooted_.size())];
            if (handles_.count(id)) return id;
        }
        return pick(kind::node);
    }
    bool big() const { return m_.current.objects.size() > profile_.soft_cap; }
    mobj& obj(mid id) { return m_.current.objects.at(id); }
    template<class R> R& handle(mid id) { return std::get<R>(handles_.at(id)); }
    template<class R> R ref_to(mid id) { return id ? handle<R>(id) : R(); }
    mid adopt(mobj o, any_ref r) {
        mid id = m_.next_id++;
        kind k = o.k;
        m_.current.objects.emplace(id, std::move(o));
        handles_.emplace(id, std::move(r));
        ids_[static_cast<int>(k)].push_back(id);
        return id;
    }
    std::string nm(mid id) { return id ? name_of(m_.current, id) : std::string("null"); }

    std::size_t pick_size(bool values) {
        unsigned r = static_cast<unsigned>(below(100));
        if (r < 70) return 1 + below(16);
        if (r < 96) return 17 + below(600);
        return values ? 4000 + below(9000) : 800 + below(2500);  // past a segment's byte budget / several pages
    }

    static const std::string& root_name(std::uint64_t i) {
        static const std::vector<std::string> names = {
            "a", "b", "c", "d", "", "ünïcode/名前", std::string(300, 'r') + "-long", "e", std::string(5000, 'x')};
        return names[i % names.size()];
    }
    static std::string short_name(const std::string& n) {
        return n.size() > 20 ? n.substr(0, 8) + "…(" + std::to_string(n.size()) + ")" : n;
    }

    // Attaches a new object of kind k to a random node's slot of that kind (or leaves it unattached).
    void maybe_attach(kind k, mid id, unsigned percent) {
        if (!chance(percent)) return;
        mid owner = pick_owner();
        if (!owner || owner == id) return;
        int slot = k == kind::node ? static_cast<int>(below(node_links))
                 : k == kind::refs ? slot_refs
                 : k == kind::values ? slot_values
                 : k == kind::edges ? slot_edges
                                    : slot_blob;
        set_slot(owner, slot, id);
    }
    void set_slot(mid a, int slot, mid target) {
        Node* n = handle<node_ref>(a).mut();
        switch (slot_kind(slot)) {
        case kind::node: n->link[slot] = ref_to<node_ref>(target); break;
        case kind::refs: n->refs = ref_to<refs_ref>(target); break;
        case kind::values: n->values = ref_to<values_ref>(target); break;
        case kind::edges: n->edges = ref_to<edges_ref>(target); break;
        case kind::blob: n->blob = ref_to<blob_ref>(target); break;
        }
        obj(a).refs[static_cast<std::size_t>(slot)] = target;
        m_.wrote(a);
        note("  " + nm(a) + "." + slot_name(slot) + " = " + nm(target));
    }

    // ---- operations
    op pick_op() {
        int w[op_count];
        int total = 0;
        for (int i = 0; i < op_count; ++i) {
            w[i] = profile_.weight[i];
            if (read_only_) w[i] = 0;
            if (big()) {  // lean towards a smaller graph
                if (i == op_make_node || i == op_make_tree || i == op_make_refs || i == op_make_edges ||
                    i == op_make_blob)
                    w[i] /= 3;
                if (i == op_clear_node || i == op_remove_root || i == op_set_root_null) w[i] *= 4;
                if (i == op_reopen) w[i] *= 2;
            }
            total += w[i];
        }
        long r = static_cast<long>(below(static_cast<std::uint64_t>(total)));
        for (int i = 0; i < op_count; ++i) {
            if (r < w[i]) return static_cast<op>(i);
            r -= w[i];
        }
        return op_verify;
    }

    void one_step() {
        if (m_.current.objects.size() > 3 * profile_.soft_cap) {
            note("(too many objects: commit what the roots reach and reopen)");
            do_commit();
            do_reopen();
        }
        op o = pick_op();
        bool structural = false;
        switch (o) {
        case op_make_node: make_node(); break;
        case op_make_tree: make_tree(); break;
        case op_make_refs: make_refs(); break;
        case op_make_values: make_values(); break;
        case op_make_edges: make_edges(); break;
        case op_make_blob: make_blob(); break;
        case op_set_link: set_link(); break;
        case op_copy_link: copy_link(); break;
        case op_set_field: set_field(); break;
        case op_set_version: set_version(); break;
        case op_clear_node: clear_node(); break;
        case op_set_ref_element: set_ref_element(); break;
        case op_copy_ref_elements: copy_ref_elements(); break;
        case op_set_values: set_values(); break;
        case op_set_edge: set_edge(); break;
        case op_set_blob: set_blob(); break;
        case op_set_root: set_root(false); break;
        case op_set_root_null: set_root(true); break;
        case op_remove_root: remove_root(); break;
        case op_root_or_make: root_or_make(); break;
        case op_commit: do_commit(); structural = true; break;
        case op_rollback: do_rollback(); structural = true; break;
        case op_reopen: do_reopen(); structural = true; break;
        case op_read_only_view: read_only_view(); structural = true; break;
        case op_power_cut: power_cut(); structural = true; break;
        case op_crash_commit: crash_commit(); structural = true; break;
        case op_fail_commit: fail_commit(); structural = true; break;
        case op_crash_checkpoint: crash_checkpoint(); structural = true; break;
        case op_foreign_ref: foreign_ref(); structural = true; break;
        case op_explore: explore(); break;
        case op_checkpoint: note("checkpoint"); s().checkpoint(); break;
        case op_check: {
            note("check");
            auto findings = s().check();
            if (!findings.empty()) fail("check(): " + findings[0]);
            break;
        }
        case op_verify: structural = true; note("verify"); break;
        case op_count: break;
        }
        if (sabotage_ == sabotage::version && step_ >= sabotage_step_ && !sabotaged_) sabotaged_ = sabotage_version();
        if (lazy_left_ > 0 && o != op_verify) {  // a lazy session: compare at its end only
            if (--lazy_left_ == 0) verify("a lazy session");
            return;
        }
        if (structural || ++since_verify_ >= profile_.verify_every) {
            since_verify_ = 0;
            verify(op_name(o));
        }
    }
    static const char* op_name(op o) {
        static const char* names[op_count] = {
            "make_node", "make_tree", "make_refs", "make_values", "make_edges", "make_blob", "set_link", "copy_link",
            "set_field", "set_version", "clear_node", "set_ref_element", "copy_ref_elements", "set_values",
            "set_edge", "set_blob", "set_root", "set_root_null", "remove_root", "root_or_make", "commit",
            "rollback", "reopen", "read_only_view", "power_cut", "crash_commit", "fail_commit",
            "crash_checkpoint", "foreign_ref", "explore", "checkpoint", "check", "verify"};
        return names[o];
    }

    void make_node() {
        std::int64_t v = any_value();
        mid id = m_.next_id;
        node_ref r;
        switch (below(3)) {
        case 0: {
            r = s().make<Node>();
            Node* n = r.mut();
            n->id = id;
            n->version = v;
            n->check = node_check(id, v);
            break;
        }
        case 1:  // every member given (the link array by brace elision)
            r = s().make<Node>(id, v, node_ref(), node_ref(), node_ref(), refs_ref(), values_ref(), edges_ref(),
                               blob_ref(), node_check(id, v));
            break;
        default: {
            Node n{};
            n.id = id;
            n.version = v;
            n.check = node_check(id, v);
            r = s().make<Node>(n);
            break;
        }
        }
        mobj o{kind::node, v, std::vector<mid>(node_slots, 0), {}};
        adopt(std::move(o), r);
        note("make_node " + nm(id));
        maybe_attach(kind::node, id, 65);
        if (chance(profile_.weight[op_set_root] ? 8 : 0)) set_root_to(root_name(below(9)), id);
    }
    // Many new nodes at once, a tree with cross links, hung on one node: a commit
    // of several segments, clustered breadth first.
    void make_tree() {
        std::size_t n = 2 + below(chance(20) ? 300 : 40);
        bool chain = chance(25);  // a list: after a reopen, one fault per node along it
        std::vector<mid> made;
        for (std::size_t i = 0; i < n; ++i) {
            mid id = m_.next_id;
            std::int64_t v = any_value();
            Node fresh{};
            fresh.id = id;
            fresh.version = v;
            fresh.check = node_check(id, v);
            node_ref r = s().make<Node>(fresh);
            adopt(mobj{kind::node, v, std::vector<mid>(node_slots, 0), {}}, r);
            if (!made.empty()) {  // a parent among the earlier ones, and sometimes a cross link
                mid parent = chain ? made.back() : made[below(made.size())];
                int slot = static_cast<int>(below(node_links));
                handle<node_ref>(parent).mut()->link[slot] = r;
                obj(parent).refs[static_cast<std::size_t>(slot)] = id;
                if (chance(20)) {
                    mid other = pick(kind::node);
                    r.mut()->link[0] = handle<node_ref>(other);
                    obj(id).refs[0] = other;
                }
            }
            made.push_back(id);
        }
        note(std::string("make_tree (") + (chain ? "a chain" : "a tree") + ") of " + std::to_string(n) + " nodes, " +
             nm(made.front()) + " .. " + nm(made.back()));
        maybe_attach(kind::node, made.front(), 90);
    }
    void make_refs() {
        std::size_t n = pick_size(false);
        refs_ref r = s().make_array<node_ref>(n);
        mobj o{kind::refs, 0, std::vector<mid>(n, 0), {}};
        auto* a = r.mut();
        for (std::size_t i = 0; i < n; ++i)
            if (chance(50)) {
                mid t = pick(kind::node);
                (*a)[i] = ref_to<node_ref>(t);
                o.refs[i] = t;
            }
        mid id = adopt(std::move(o), r);
        note("make_refs " + nm(id) + " of " + std::to_string(n));
        maybe_attach(kind::refs, id, 70);
    }
    void make_values() {
        std::size_t n = pick_size(true);
        values_ref r = s().make_array<std::int64_t>(n);
        mobj o{kind::values, 0, {}, std::vector<std::int64_t>(n, 0)};
        if (chance(80)) {
            auto* a = r.mut();
            for (std::size_t i = 0; i < n; ++i) (*a)[i] = o.vals[i] = any_value();
        }
        mid id = adopt(std::move(o), r);
        note("make_values " + nm(id) + " of " + std::to_string(n));
        maybe_attach(kind::values, id, 70);
    }
    void make_edges() {
        std::size_t n = pick_size(false);
        edges_ref r = s().make_array<Edge>(n);
        mobj o{kind::edges, 0, std::vector<mid>(n, 0), std::vector<std::int64_t>(2 * n, 0)};
        auto* a = r.mut();
        for (std::size_t i = 0; i < n; ++i) {
            Edge& e = (*a)[i];
            e.weight = static_cast<std::int32_t>(any_value());
            e.tag = static_cast<std::int16_t>(any_value());
            mid t = chance(60) ? pick(kind::node) : 0;
            e.to = ref_to<node_ref>(t);
            o.refs[i] = t;
            o.vals[2 * i] = e.weight;
            o.vals[2 * i + 1] = e.tag;
        }
        mid id = adopt(std::move(o), r);
        note("make_edges " + nm(id) + " of " + std::to_string(n));
        maybe_attach(kind::edges, id, 70);
    }
    void fill_blob(Blob* b, mid id, std::int64_t v) {
        b->id = id;
        b->version = v;
        for (std::size_t i = 0; i < blob_bytes; ++i) b->bytes[i] = blob_byte(id, v, i);
    }
    void make_blob() {
        mid id = m_.next_id;
        std::int64_t v = any_value();
        blob_ref r = s().make<Blob>();
        mid owner = pick(kind::node);
        Blob* b = r.mut();
        fill_blob(b, id, v);
        b->owner = ref_to<node_ref>(owner);
        adopt(mobj{kind::blob, v, {owner}, {}}, r);
        note("make_blob " + nm(id) + " owner " + nm(owner));
        maybe_attach(kind::blob, id, 70);
    }

    void set_link() {
        mid a = pick(kind::node);
        if (!a) return make_node();
        note("set_link");
        set_slot(a, static_cast<int>(below(node_links)), pick_target(kind::node));
    }
    void copy_link() {  // a.link[i] = b->link[j]: a reference word copied as it is (maybe unresolved)
        mid a = pick(kind::node), b = pick(kind::node);
        if (!a) return make_node();
        std::size_t i = below(node_links), j = below(node_links);
        Node* pa = handle<node_ref>(a).mut();
        pa->link[i] = handle<node_ref>(b)->link[j];
        obj(a).refs[i] = obj(b).refs[j];
        m_.wrote(a);
        note("copy_link " + nm(a) + ".link[" + std::to_string(i) + "] = " + nm(b) + ".link[" + std::to_string(j) +
             "] (" + nm(obj(a).refs[i]) + ")");
    }
    void set_field() {
        mid a = pick(kind::node);
        if (!a) return make_node();
        int slot = node_links + static_cast<int>(below(4));
        note("set_field");
        set_slot(a, slot, pick_target(slot_kind(slot)));
    }
    void set_version() {
        std::int64_t v = any_value();
        if (chance(75) || ids_[static_cast<int>(kind::blob)].empty()) {
            mid a = pick(kind::node);
            if (!a) return make_node();
            if (chance(10)) {  // mut() and no change: a write the commit finds identical
                handle<node_ref>(a).mut();
                m_.wrote(a);
                note("touch " + nm(a));
                return;
            }
            // Mostly through the held reference; sometimes through a link or
            // an array element that leads to the node (mut() on a reference
            // stored in another object: resolved, maybe faulted, in place).
            Node* n = nullptr;
            std::string via;
            if (chance(40)) {
                mid p = pick(kind::node);
                for (int l = 0; l < node_links && !n; ++l)
                    if (mid t = obj(p).refs[static_cast<std::size_t>(l)]) {
                        n = handle<node_ref>(p)->link[l].mut();
                        a = t;
                        via = " through " + nm(p) + ".link[" + std::to_string(l) + "]";
                    }
                if (!n) {
                    mid r = pick(kind::refs);
                    for (std::size_t k = 0; r && k < obj(r).refs.size() && !n; ++k)
                        if (mid t = obj(r).refs[k]) {
                            n = (*handle<refs_ref>(r))[k].mut();
                            a = t;
                            via = " through " + nm(r) + "[" + std::to_string(k) + "]";
                        }
                }
            }
            if (!n) n = handle<node_ref>(a).mut();
            if (n->id != a)
                fail("set_version" + via + ": the node reached has id " + std::to_string(n->id) + ", not " +
                     std::to_string(a));
            n->version = v;
            n->check = node_check(a, v);
            obj(a).version = v;
            m_.wrote(a);
            note("set_version " + nm(a) + via + " = " + std::to_string(v));
        } else {
            mid b = pick(kind::blob);
            fill_blob(handle<blob_ref>(b).mut(), b, v);
            obj(b).version = v;
            m_.wrote(b);
            note("set_version " + nm(b) + " = " + std::to_string(v));
        }
    }
    void clear_node() {  // the whole object assigned at once
        mid a = pick(kind::node);
        if (!a) return make_node();
        Node fresh{};
        fresh.id = a;
        fresh.version = obj(a).version;
        fresh.check = node_check(a, fresh.version);
        *handle<node_ref>(a).mut() = fresh;
        std::fill(obj(a).refs.begin(), obj(a).refs.end(), 0);
        m_.wrote(a);
        note("clear_node " + nm(a));
    }
    void set_ref_element() {
        mid a = pick(kind::refs);
        if (!a) return make_refs();
        std::size_t i = below(obj(a).refs.size());
        mid t = pick_target(kind::node);
        (*handle<refs_ref>(a).mut())[i] = ref_to<node_ref>(t);
        obj(a).refs[i] = t;
        m_.wrote(a);
        note("set_ref_element " + nm(a) + "[" + std::to_string(i) + "] = " + nm(t));
    }
    void copy_ref_elements() {  // dst[i..] = src[j..], words copied as they are
        mid d = pick(kind::refs), src = pick(kind::refs);
        if (!d) return make_refs();
        std::size_t nd = obj(d).refs.size(), ns = obj(src).refs.size();
        std::size_t i = below(nd), j = below(ns);
        std::size_t n = std::min({nd - i, ns - j, std::size_t{1} + below(40)});
        auto first = obj(src).refs.begin() + static_cast<long>(j);
        std::vector<mid> from(first, first + static_cast<long>(n));
        auto* dst = handle<refs_ref>(d).mut();
        if (d == src) {
            std::vector<node_ref> tmp(dst->begin() + j, dst->begin() + j + n);
            std::copy(tmp.begin(), tmp.end(), dst->begin() + i);
        } else {
            const auto& sa = *handle<refs_ref>(src);
            for (std::size_t k = 0; k < n; ++k) (*dst)[i + k] = sa[j + k];
        }
        std::copy(from.begin(), from.end(), obj(d).refs.begin() + static_cast<long>(i));
        m_.wrote(d);
        note("copy_ref_elements " + nm(d) + "[" + std::to_string(i) + "..+" + std::to_string(n) + "] = " + nm(src) +
             "[" + std::to_string(j) + "..]");
    }
    void set_values() {
        mid a = pick(kind::values);
        if (!a) return make_values();
        std::size_t size = obj(a).vals.size();
        std::size_t i = below(size);
        std::size_t n = std::min(size - i, std::size_t{1} + (chance(20) ? below(size) : below(8)));
        auto* arr = handle<values_ref>(a).mut();
        for (std::size_t k = i; k < i + n; ++k) (*arr)[k] = obj(a).vals[k] = any_value();
        m_.wrote(a);
        note("set_values " + nm(a) + "[" + std::to_string(i) + "..+" + std::to_string(n) + "]");
    }
    void set_edge() {
        mid a = pick(kind::edges);
        if (!a) return make_edges();
        std::size_t i = below(obj(a).refs.size());
        mid t = pick_target(kind::node);
        Edge& e = (*handle<edges_ref>(a).mut())[i];
        e.to = ref_to<node_ref>(t);
        if (chance(50)) {
            e.weight = static_cast<std::int32_t>(any_value());
            e.tag = static_cast<std::int16_t>(any_value());
        }
        obj(a).refs[i] = t;
        obj(a).vals[2 * i] = e.weight;
        obj(a).vals[2 * i + 1] = e.tag;
        m_.wrote(a);
        note("set_edge " + nm(a) + "[" + std::to_string(i) + "].to = " + nm(t));
    }
    void set_blob() {
        mid b = pick(kind::blob);
        if (!b) return make_blob();
        mid owner = pick_target(kind::node);
        handle<blob_ref>(b).mut()->owner = ref_to<node_ref>(owner);
        obj(b).refs[0] = owner;
        m_.wrote(b);
        note("set_blob " + nm(b) + ".owner = " + nm(owner));
    }

    void set_root_to(const std::string& name, mid t) {
        s().set_root(name, ref_to<node_ref>(t));
        m_.current.roots[name] = t;
        note("set_root '" + short_name(name) + "' = " + nm(t));
    }
    void set_root(bool null) {
        mid t = null ? 0 : pick(kind::node);
        if (!null && !t) return make_node();
        set_root_to(root_name(below(9)), t);
    }
    void remove_root() {
        const std::string& name = root_name(below(9));
        bool had = m_.current.roots.erase(name) > 0;
        bool removed = s().remove_root(name);
        note("remove_root '" + short_name(name) + "'");
        if (removed != had)
            fail("remove_root('" + name + "') returned " + (removed ? "true" : "false") + ", the model " +
                 (had ? "has" : "does not have") + " the root");
    }
    void root_or_make() {  // store::root<T>: find or make
        const std::string& name = root_name(below(9));
        auto it = m_.current.roots.find(name);
        mid want = it == m_.current.roots.end() ? 0 : it->second;
        node_ref r = s().root<Node>(name);
        if (!r) fail("root<Node>('" + name + "') returned null");
        if (want) {
            note("root '" + short_name(name) + "' finds " + nm(want));
            if (!handles_.count(want)) hold(want, any_ref(r));
            if (!(r == handle<node_ref>(want)) || r->id != want)
                fail("root<Node>('" + name + "') is not " + nm(want) + " (id " + std::to_string(r->id) + ")");
            return;
        }
        mid id = m_.next_id;
        if (r->id != 0 || r->version != 0 || r->link[0] || r->blob)
            fail("root<Node>('" + name + "') made an object that is not value-initialized");
        Node* n = r.mut();
        n->id = id;
        n->check = node_check(id, 0);
        adopt(mobj{kind::node, 0, std::vector<mid>(node_slots, 0), {}}, r);
        m_.current.roots[name] = id;
        note("root '" + short_name(name) + "' makes " + nm(id));
    }

    // Commits; checks that it made exactly the objects the model gathers persistent.
    void commit_now(const model::commit_plan& plan) {
        so::stats before = s().stats();
        long calls = env_.calls();
        s().commit();
        last_commit_calls_ = std::max(1L, env_.calls() - calls);
        so::stats after = s().stats();
        std::uint64_t made = after.new_objects - before.new_objects;
        note("  committed: " + std::to_string(made) + " new objects, " +
             std::to_string(after.objects_written - before.objects_written) + " written, " +
             std::to_string(after.pages_committed - before.pages_committed) + " pages, " +
             std::to_string(last_commit_calls_) + " I/O calls");
        if (made != plan.reached.size())
            fail("the commit made " + std::to_string(made) + " objects persistent, the model gathers " +
                 std::to_string(plan.reached.size()));
        m_.commit(plan);
        ++totals_.commits;
        totals_.reached += static_cast<long>(plan.reached.size());
    }
    void do_commit() {
        note("commit");
        commit_now(m_.plan_commit());
    }
    void do_rollback() {
        note("rollback");
        s().rollback();
        m_.rollback();
        ++totals_.rollbacks;
    }
    void do_reopen() {
        bool checkpoint = chance(30);
        note(std::string("close") + (checkpoint ? " (checkpoint first)" : "") + " and reopen");
        if (checkpoint) s().checkpoint();
        s().close();
        open_main(false);
        after_open(m_.committed, "a reopen");
        ++totals_.reopens;
    }
    void read_only_view() {
        note("close, open read-only");
        s().close();
        open_main(true);
        after_open(m_.committed, "a read-only open");
        bool refused = false;
        try {
            s().commit();
        } catch (const steppe::error&) {
            refused = true;
        }
        if (!refused) fail("commit on a store opened read-only did not throw");
        note("close, reopen writable");
        s().close();
        open_main(false);
        after_open(m_.committed, "a reopen");
    }
    steppe::test::loss pick_loss() { return static_cast<steppe::test::loss>(below(4)); }
    static const char* loss_name(steppe::test::loss l) {
        static const char* names[] = {"keep_all", "drop_all", "random_subset", "torn"};
        return names[static_cast<int>(l)];
    }
    // The process dies now (nothing more is written) and the power goes.
    void die(steppe::test::loss mode) {
        handles_.clear();
        main_.reset();  // checkpoint_on_close is off: writes nothing
        std::uint64_t seed = rng_();
        note(std::string("  power loss: ") + loss_name(mode) + " (seed " + std::to_string(seed) + ")");
        env_.power_loss(mode, seed);
        ++totals_.losses[static_cast<int>(mode)];
    }
    void power_cut() {
        note("power cut (no crash in a call: what was committed must be there)");
        die(pick_loss());
        ++totals_.power_cuts;
        open_main(false);
        after_open(m_.committed, "a power cut");
    }
    // After a crash or a poisoned store: reopen and find `before` or `after`, whole.
    void reopen_expecting_one_of(const state& before, const state& after, const char* why) {
        open_main(false);
        state b = reachable_part(before), a = reachable_part(after);
        if (sabotage_ == sabotage::crash_outcome) {
            for (state* x : {&b, &a})
                for (auto& [id, o] : x->objects)
                    if (o.k == kind::node) {
                        ++o.version;
                        break;
                    }
        }
        std::string db = differences(s(), b);
        std::string da = db.empty() ? std::string() : differences(s(), a);
        if (!db.empty() && !da.empty())
            fail(std::string("after ") + why + ", the store holds neither the state before the commit (" + db +
                 ") nor the one in flight (" + da + ")");
        note(std::string("  found the state ") + (db.empty() ? "before the commit" : "of the commit in flight"));
        if (db.empty()) ++totals_.crash_before;
        else ++totals_.crash_after;
        // That walk faulted everything in: open again, so the program goes on
        // from a store with nothing resident (or compares once more).
        m_.reopened(db.empty() ? b : a);
        s().close();
        open_main(false);
        after_open(m_.committed, why);
    }
    void crash_commit() {
        long at = static_cast<long>(below(static_cast<std::uint64_t>(last_commit_calls_) + 3));
        steppe::test::loss mode = pick_loss();
        model::commit_plan plan = m_.plan_commit();
        note("commit, crashing at its I/O call " + std::to_string(at));
        env_.crash_after(at);
        bool crashed = false;
        try {
            commit_now(plan);
        } catch (const steppe::test::simulated_crash&) {
            crashed = true;
        }
        env_.clear_faults();
        if (!crashed) {
            note("  (the commit made fewer calls: it completed)");
            return;
        }
        ++totals_.crashes;
        die(mode);
        reopen_expecting_one_of(m_.committed, plan.committed, "a crash in a commit");
    }
    void fail_commit() {
        long at = static_cast<long>(below(static_cast<std::uint64_t>(last_commit_calls_) + 3));
        int err = chance(50) ? EIO : ENOSPC;
        model::commit_plan plan = m_.plan_commit();
        note("commit, failing its I/O call " + std::to_string(at) + " with " + (err == EIO ? "EIO" : "ENOSPC"));
        env_.fail_after(at, err);
        try {
            commit_now(plan);
            env_.clear_faults();
            note("  (it completed)");
            return;
        } catch (const steppe::error& e) {
            env_.clear_faults();
            note(std::string("  threw: ") + steppe::to_string(e.code()));
        }
        ++totals_.io_failures;
        bool poisoned = false;
        auto check_poisoned = [&] {
            try {  // checkpoint refuses a poisoned store (and is harmless otherwise)
                s().checkpoint();
            } catch (const steppe::error& e) {
                if (e.code() != steppe::errc::poisoned) throw;
                poisoned = true;
            }
        };
        // Under page_fault a fault on a poisoned store ends the process (a
        // trapped load cannot throw): ask the store first.
        if constexpr (so::detail::compiled_scheme.detect == so::detection::page_fault) check_poisoned();
        // The program must see what it saw before the commit, its changes pending.
        try {
            if (!poisoned) verify("a failed commit");
        } catch (const steppe::error& e) {
            if (e.code() != steppe::errc::poisoned) throw;
            poisoned = true;
        }
        if (!poisoned) check_poisoned();
        if (!poisoned) {
            bool retry = chance(60);
            if (!retry) {
                note("  goes on without committing");
                return;
            }
            note("  commit again");
            try {
                commit_now(plan);
                return;
            } catch (const steppe::error& e) {
                if (e.code() != steppe::errc::poisoned) throw;
                poisoned = true;
            }
        }
        ++totals_.io_poisoned;
        note("  poisoned: reopen");
        handles_.clear();
        main_.reset();
        if (chance(50)) die(pick_loss());
        reopen_expecting_one_of(m_.committed, plan.committed, "a poisoned commit");
    }
    void crash_checkpoint() {
        long at = static_cast<long>(below(12));
        steppe::test::loss mode = pick_loss();
        note("checkpoint, crashing at its I/O call " + std::to_string(at));
        env_.crash_after(at);
        bool crashed = false;
        try {
            s().checkpoint();
        } catch (const steppe::test::simulated_crash&) {
            crashed = true;
        }
        env_.clear_faults();
        if (!crashed) return;
        die(mode);
        open_main(false);
        after_open(m_.committed, "a crash in a checkpoint");
    }

    // A reference to another store's object: the commit refuses it and writes
    // nothing; the program takes it back and goes on.
    void foreign_ref() {
        if (!spacer_) return make_node();
        // The node holding it must be written by the commit: a persistent node
        // (written: it is dirty), or a new one a root reaches (written into a
        // new segment). A transient one nothing reaches would not be.
        mid a = 0;
        if (chance(50)) {
            make_node();
            a = m_.next_id - 1;
            set_root_to(root_name(below(9)), a);
        }
        for (int tries = 0; tries < 8 && !a; ++tries)
            if (mid n = pick(kind::node); n && m_.persistent.count(n)) a = n;
        if (!a) return make_node();
        std::size_t slot = below(node_links);
        node_ref foreign = spacer_->make<Node>();
        note("foreign_ref: " + nm(a) + ".link[" + std::to_string(slot) + "] = another store's object; commit");
        node_ref old = handle<node_ref>(a)->link[slot];
        handle<node_ref>(a).mut()->link[slot] = foreign;
        m_.wrote(a);
        bool refused = false;
        try {
            s().commit();
        } catch (const steppe::error& e) {
            if (e.code() != steppe::errc::transient_pointer) throw;
            refused = true;
        }
        if (!refused) fail("a commit took a reference to another store's object");
        note("  refused; the link is taken back");
        handle<node_ref>(a).mut()->link[slot] = old;
    }

    // At the first step from sabotage_step_ on where the program holds a node.
    bool sabotage_version() {
        for (const auto& [id, h] : handles_)
            if (h.index() == static_cast<std::size_t>(kind::node)) {
                ++obj(id).version;
                note("(sabotage: the model now expects " + nm(id) + " at another version)");
                verify("the sabotage");
                return true;
            }
        return false;
    }
    bool sabotaged_ = false;

    std::uint64_t seed_;
    std::mt19937_64 rng_;
    const profile& profile_;
    sabotage sabotage_;
    long sabotage_step_;
    bool verbose_ = false;
    steppe::test::temp_dir dir_;
    std::string path_ = dir_.path("model.ods");
    steppe::test::fault_env env_;
    std::optional<so::store> spacer_, main_;
    bool read_only_ = false;
    model m_;
    handle_map handles_;
    std::vector<mid> ids_[kinds];
    std::vector<mid> rooted_;  // nodes the roots reached at the last comparison
    std::vector<std::string> log_;
    long step_ = 0;
    int since_verify_ = 0;
    int lazy_left_ = 0;  // operations left in a lazy session (after_open)
    long last_commit_calls_ = 6;
    run_totals totals_;
};

// Runs the seeds of one profile: a few in CI, or as the environment says.
void run_seeds(const profile& p, std::uint64_t first_seed, long seeds, long steps) {
    long one = env_long("STEPPE_OBJECTS_MODEL_SEED", -1);
    seeds = env_long("STEPPE_OBJECTS_MODEL_SEEDS", seeds);
    first_seed += static_cast<std::uint64_t>(env_long("STEPPE_OBJECTS_MODEL_SEED_OFFSET", 0));
    steps = env_long("STEPPE_OBJECTS_MODEL_STEPS", steps);
    run_totals all;
    auto start = std::chrono::steady_clock::now();
    for (long i = 0; i < (one >= 0 ? 1 : seeds); ++i) {
        std::uint64_t seed = one >= 0 ? static_cast<std::uint64_t>(one) : first_seed + static_cast<std::uint64_t>(i);
        runner r(seed, p);
        bool ok = r.run(steps);
        all.add(r.totals());
        if (!ok) break;
    }
    double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::printf("[ model    ] %s, %s + %s: %s; %.1f s\n", p.name, so::to_string(so::detail::compiled_scheme.detect),
                so::to_string(so::detail::compiled_scheme.write), all.text().c_str(), secs);
    if (one < 0 && !::testing::Test::HasFailure()) {
        // Not vacuous: the runs went through the states they are meant to.
        EXPECT_GT(all.commits, 0);
        EXPECT_GT(all.reopens + all.power_cuts, 0);
        EXPECT_GT(all.crashes, 0);
        EXPECT_GT(all.max_objects, 50);
        if (p.weight[op_crash_commit] >= 4) {
            for (long n : all.losses) {
                EXPECT_GT(n, 0) << "a kind of power loss never happened";
            }
        }
    }
}

TEST(ObjectsModel, RandomProgramsAgreeWithTheModel) { run_seeds(mixed_profile, 1, 4, 1000); }

TEST(ObjectsModel, LargeGraphsInLongSessionsAgreeWithTheModel) { run_seeds(large_profile, 501, 1, 1200); }

TEST(ObjectsModel, CrashesAndIoErrorsInRandomProgramsLeaveOneCommitWhole) {
    run_seeds(fault_profile, 1001, 3, 700);
}

// ---- what the random programs found, as directed tests ------------------------------

// Seed 102 of the mixed profile (STEPPE_OBJECTS_MODEL_SEED_OFFSET=100): a
// commit on a new store with nothing to write yet (no type, object or root) left
// a meta saying next page 1 over a storage of 0 pages, which open took for a
// damaged meta ("next page 1 of 0"): the store could not be opened again.
TEST(ObjectsModelFound, AStoreWhoseFirstCommitWroteNothingOpens) {
    steppe::test::temp_dir dir;
    std::string path = dir.path("empty.ods");
    {
        so::store s = so::store::open(path);
        s.commit();  // no type, object or root yet: only the meta
    }
    {
        so::store s = so::store::open(path);
        EXPECT_TRUE(s.roots().empty());
        EXPECT_TRUE(s.check().empty());
        s.commit();  // again nothing
        s.root<Node>("n").mut()->version = 5;
        s.commit();
    }
    so::store s = so::store::open(path);
    EXPECT_EQ(s.find_root<Node>("n")->version, 5);
    EXPECT_TRUE(s.check().empty());
}

// ---- the checker is not vacuous ---------------------------------------------------

// A small graph whose model is known exactly, and the kinds of differences the
// checker must see in it.
class ModelChecker : public ::testing::Test {
protected:
    void SetUp() override {
        s.emplace(so::store::open(dir.path("checker.ods")));
        // node 1 (root "a") links node 2 twice, node 3 once; node 3 holds the arrays and the blob.
        node_ref n1 = make_node(1, 10), n2 = make_node(2, 20), n3 = make_node(3, 30);
        n1.mut()->link[0] = n2;
        n1.mut()->link[1] = n2;
        n1.mut()->link[2] = n3;
        refs_ref refs = s->make_array<node_ref>(3);
        (*refs.mut())[0] = n1;
        (*refs.mut())[2] = n2;
        values_ref values = s->make_array<std::int64_t>(4);
        for (std::size_t i = 0; i < 4; ++i) (*values.mut())[i] = static_cast<std::int64_t>(i * 100);
        edges_ref edges = s->make_array<Edge>(2);
        (*edges.mut())[1] = Edge{7, n3, 9};
        blob_ref blob = s->make<Blob>();
        blob.mut()->id = 8;
        blob.mut()->version = 80;
        for (std::size_t i = 0; i < blob_bytes; ++i) blob.mut()->bytes[i] = blob_byte(8, 80, i);
        blob.mut()->owner = n1;
        n3.mut()->refs = refs;
        n3.mut()->values = values;
        n3.mut()->edges = edges;
        n3.mut()->blob = blob;
        s->set_root("a", n1);
        s->set_root("nothing", node_ref());
        s->commit();

        auto node = [](std::int64_t v, std::vector<mid> refs) { return mobj{kind::node, v, std::move(refs), {}}; };
        truth.objects[1] = node(10, {2, 2, 3, 0, 0, 0, 0});
        truth.objects[2] = node(20, {0, 0, 0, 0, 0, 0, 0});
        truth.objects[3] = node(30, {0, 0, 0, 4, 5, 6, 8});
        truth.objects[4] = mobj{kind::refs, 0, {1, 0, 2}, {}};
        truth.objects[5] = mobj{kind::values, 0, {}, {0, 100, 200, 300}};
        truth.objects[6] = mobj{kind::edges, 0, {0, 3}, {0, 0, 7, 9}};
        truth.objects[8] = mobj{kind::blob, 80, {1}, {}};
        truth.roots = {{"a", 1}, {"nothing", 0}};
    }
    node_ref make_node(std::int64_t id, std::int64_t version) {
        Node n{};
        n.id = id;
        n.version = version;
        n.check = node_check(id, version);
        return s->make<Node>(n);
    }
    // The checker's verdict on the store against `want`, in this session and after a reopen.
    std::string verdict(const state& want) { return differences(*s, want); }
    std::string verdict_reopened(const state& want) {
        s->close();
        s.emplace(so::store::open(dir.path("checker.ods")));
        return differences(*s, want);
    }

    steppe::test::temp_dir dir;
    std::optional<so::store> s;
    state truth;
};

TEST_F(ModelChecker, FindsNothingWhenTheStoreIsTheModel) {
    EXPECT_EQ(verdict(truth), "");
    EXPECT_EQ(verdict_reopened(truth), "");
}

TEST_F(ModelChecker, SeesEveryKindOfDifference) {
    struct variant_case {
        const char* what;
        void (*change)(state&);
        const char* says;
    };
    const variant_case cases[] = {
        {"a version", [](state& m) { m.objects[2].version = 21; }, "version"},
        {"a link", [](state& m) { m.objects[1].refs[2] = 0; }, "the model says null"},
        {"a link's target", [](state& m) { m.objects[1].refs[2] = 2; }, ""},
        {"an array element", [](state& m) { m.objects[5].vals[3] = 301; }, "element[3]"},
        {"an array's size", [](state& m) { m.objects[5].vals.push_back(400); }, "size()"},
        {"a reference element", [](state& m) { m.objects[4].refs[1] = 3; }, "is null"},
        {"an edge's tag", [](state& m) { m.objects[6].vals[3] = 10; }, "tag[1]"},
        {"an edge's target", [](state& m) { m.objects[6].refs[0] = 1; }, "to[0]"},
        {"a blob", [](state& m) { m.objects[8].version = 81; }, "version"},
        {"a blob's owner", [](state& m) { m.objects[8].refs[0] = 2; }, "owner"},
        {"a missing root", [](state& m) { m.roots["b"] = 0; }, "root 'b'"},
        {"an extra root", [](state& m) { m.roots.erase("nothing"); }, "root 'nothing'"},
        {"a null root", [](state& m) { m.roots["nothing"] = 2; }, "null"},
    };
    for (const auto& c : cases) {
        state want = truth;
        c.change(want);
        std::string d = verdict(want);
        EXPECT_NE(d, "") << c.what;
        EXPECT_NE(d.find(c.says), std::string::npos) << c.what << ": " << d;
    }
    for (const auto& c : cases) {
        state want = truth;
        c.change(want);
        EXPECT_NE(verdict_reopened(want), "") << c.what << " after a reopen";
    }
}

// Identity: two store objects with equal contents where the model has one
// object are a difference (and one store object where the model has two).
TEST_F(ModelChecker, SeesTwoObjectsWhereTheModelHasOne) {
    node_ref n1 = s->find_root<Node>("a");
    node_ref twin = make_node(2, 20);
    n1.mut()->link[1] = twin;  // link[0] is node 2, link[1] a copy of it
    s->commit();
    std::string d = verdict(truth);
    EXPECT_NE(d.find("should be one object"), std::string::npos) << d;
    d = verdict_reopened(truth);
    EXPECT_NE(d.find("should be one object"), std::string::npos) << d;
}

TEST_F(ModelChecker, SeesOneObjectWhereTheModelHasTwo) {
    // Model: link[2] leads to node 3; the edge array's `to` to another node 9
    // with node 3's contents. The store has one object for both.
    state want = truth;
    want.objects[9] = want.objects[3];
    want.objects[6].refs[1] = 9;
    std::string d = verdict(want);
    EXPECT_NE(d, "");
    EXPECT_NE(verdict_reopened(want), "");
}

// The random runner reports a model that expects what the store does not hold,
// with the seed to replay it; and a crash outcome that is neither state (the
// sabotaged runs look for the first chance from their step on).
TEST(ObjectsModel, TheRunnerReportsAModelThatDisagrees) {
    EXPECT_NONFATAL_FAILURE(
        {
            runner r(7, mixed_profile, sabotage::version, 40);
            (void)r.run(200);
        },
        "STEPPE_OBJECTS_MODEL_SEED=7");
}

TEST(ObjectsModel, TheRunnerReportsACrashOutcomeThatIsNeitherState) {
    EXPECT_NONFATAL_FAILURE(
        {
            runner r(8, fault_profile, sabotage::crash_outcome);
            (void)r.run(400);
        },
        "holds neither the state before the commit");
}

}  // namespace
