// moss — Moss 1990's binary-tree collections and work kernels (seed 003,
// digest 003 §5) on steppe's object engine: issue 17 item 3, driven by
// bench/oo/harness/moss.py (`bench/run --experiment moss`).
//
//   moss build --variant V --slots K --height H --store PATH
//       creates a full binary tree of 2^H - 1 objects of K slots each
//       (slots 0 and 1 the children, the rest null), then saves it
//       (commit); prints create_us and save_us per object
//   moss run --variant V --slots K --store PATH [--convert eager|lazy]
//            [--visits N] [--work X]
//       opens the store (the driver drops the OS caches first), loads the
//       collection (eager: the first dereference converts it all; lazy and
//       in-store: the first traversal, with no work), then N traversals
//       without work and N reading X slots per visit (wrapping around, as
//       Moss's kernels: count the null ones); prints load_us and the medians
//       per object; with --update-every E, then a traversal swapping the
//       children of every E-th object and a commit (save_updated_us per
//       object updated)
//
// Variants (the rows of Moss's tables; digest 003 §2):
//   c           non-persistent: the same tree of raw pointers in a bump heap
//               (build only, and the traversals right after it)
//   copy        copy swizzling into the engine's heap (ref<T>, fault_block)
//   in_place    in-place swizzling: segments read into the heap, used there
//   is_pointer  in-store, pointer interface (peek: one located access per use)
//   is_call     in-store, call interface (read: one checked copy per slot)
// A node is an array object of K slots; a slot is one word (Mneme's were 4
// bytes), so an object is 16 (header) + 8K bytes.
#include <steppe/objects.hpp>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <utility>
#include <string>
#include <vector>

#include "harness.hpp"

namespace so = steppe::objects;

namespace {

// ---- the node types ------------------------------------------------------------

struct Slot {  // copy and in_place: a swizzled reference
    so::ref<so::array<Slot>> to;
};
struct StoredSlot {  // in-store: the identifier as stored
    so::oid<so::array<StoredSlot>> to;
};
struct CSlot {  // non-persistent
    CSlot* to;
};
// The roots (a root is one object, not an array).
struct Tree {
    so::ref<so::array<Slot>> root;
};
struct StoredTree {
    so::oid<so::array<StoredSlot>> root;
};

struct shape {
    int slots;
    int height;
    std::uint64_t objects() const { return (std::uint64_t{1} << height) - 1; }
};

struct traversal {
    std::uint64_t visits = 0;
    std::uint64_t nulls = 0;  // the work kernel's answer
};

double us_per(double ms, std::uint64_t objects) { return ms * 1000.0 / static_cast<double>(objects); }

// ---- non-persistent --------------------------------------------------------------

class c_tree {
public:
    explicit c_tree(shape s) : shape_(s) {}
    CSlot* build(int depth) {
        if (depth == 0) return nullptr;
        CSlot* node = allocate();
        node[0].to = build(depth - 1);
        node[1].to = build(depth - 1);
        return node;
    }
    void walk(const CSlot* n, int work, traversal& t) const {
        if (!n) return;
        ++t.visits;
        for (int i = 0; i < work; ++i) t.nulls += n[i % shape_.slots].to == nullptr;
        walk(n[0].to, work, t);
        walk(n[1].to, work, t);
    }

private:
    // A bump allocator on 32 KiB blocks, as Moss's C runs used (digest 003 §5.4).
    CSlot* allocate() {
        std::size_t need = static_cast<std::size_t>(shape_.slots);
        if (used_ + need > block_slots) {
            blocks_.push_back(std::make_unique<CSlot[]>(block_slots));
            used_ = 0;
        }
        CSlot* node = blocks_.back().get() + used_;
        used_ += need;
        for (std::size_t i = 0; i < need; ++i) node[i].to = nullptr;
        return node;
    }
    static constexpr std::size_t block_slots = (32 << 10) / sizeof(CSlot);
    shape shape_;
    std::vector<std::unique_ptr<CSlot[]>> blocks_;
    std::size_t used_ = block_slots;
};

// ---- swizzled (copy, in_place) ------------------------------------------------------

using node_ref = so::ref<so::array<Slot>>;

node_ref build_swizzled(so::store& s, int slots, int depth) {
    if (depth == 0) return {};
    node_ref n = s.make_array<Slot>(static_cast<std::size_t>(slots));
    node_ref l = build_swizzled(s, slots, depth - 1);
    node_ref r = build_swizzled(s, slots, depth - 1);
    so::array<Slot>* body = n.mut();
    (*body)[0].to = l;
    (*body)[1].to = r;
    return n;
}

void walk_swizzled(const node_ref& n, int slots, int work, traversal& t) {
    if (!n) return;
    const so::array<Slot>& a = *n;  // the residency check
    ++t.visits;
    for (int i = 0; i < work; ++i) t.nulls += !a[static_cast<std::size_t>(i % slots)].to;
    walk_swizzled(a[0].to, slots, work, t);
    walk_swizzled(a[1].to, slots, work, t);
}

// ---- in-store ---------------------------------------------------------------------

using node_oid = so::oid<so::array<StoredSlot>>;

// `call`: the slots set through the call interface (write), else poke.
node_oid build_stored(so::store& s, int slots, int depth, bool call) {
    if (depth == 0) return {};
    node_oid n = s.create_array<StoredSlot>(static_cast<std::size_t>(slots));
    node_oid l = build_stored(s, slots, depth - 1, call);
    node_oid r = build_stored(s, slots, depth - 1, call);
    if (call) {
        s.write(n, 0, StoredSlot{l});
        s.write(n, 1, StoredSlot{r});
    } else {
        so::array<StoredSlot>* body = s.poke(n);  // one access: the buffer may move at the next create
        (*body)[0].to = l;
        (*body)[1].to = r;
    }
    return n;
}

// Pointer interface: one peek per visit, valid for that access.
void walk_pointer(so::store& s, node_oid n, int slots, int work, traversal& t) {
    if (!n) return;
    const so::array<StoredSlot>& a = *s.peek(n);
    ++t.visits;
    for (int i = 0; i < work; ++i) t.nulls += !a[static_cast<std::size_t>(i % slots)].to;
    node_oid l = a[0].to, r = a[1].to;
    walk_pointer(s, l, slots, work, t);
    walk_pointer(s, r, slots, work, t);
}

// Call interface: every slot read is a call (located, bounds-checked, copied).
void walk_call(so::store& s, node_oid n, int slots, int work, traversal& t) {
    if (!n) return;
    ++t.visits;
    for (int i = 0; i < work; ++i) t.nulls += !s.read(n, static_cast<std::size_t>(i % slots)).to;
    node_oid l = s.read(n, 0).to, r = s.read(n, 1).to;
    walk_call(s, l, slots, work, t);
    walk_call(s, r, slots, work, t);
}

// ---- the update kernel --------------------------------------------------------------------

// Every `every`-th object visited swaps its two children (Moss's slot update:
// even and odd pointers swapped), through the barrier of each variant; the
// tree stays a tree. Returns the objects updated.
struct updater {
    so::store& s;
    std::uint64_t every;
    std::uint64_t seen = 0, updated = 0;
    bool due() {
        bool now = seen++ % every == 0;
        updated += now;
        return now;
    }
    void swizzled(const node_ref& n) {
        if (!n) return;
        if (due()) {
            so::array<Slot>* m = n.mut();
            std::swap((*m)[0].to, (*m)[1].to);
        }
        node_ref l = (*n)[0].to, r = (*n)[1].to;
        swizzled(l);
        swizzled(r);
    }
    void pointer(node_oid n) {
        if (!n) return;
        if (due()) {
            so::array<StoredSlot>* m = s.poke(n);
            std::swap((*m)[0].to, (*m)[1].to);
        }
        node_oid l = (*s.peek(n))[0].to, r = (*s.peek(n))[1].to;
        pointer(l);
        pointer(r);
    }
    void call(node_oid n) {
        if (!n) return;
        StoredSlot l = s.read(n, 0), r = s.read(n, 1);
        if (due()) {
            s.write(n, 0, r);
            s.write(n, 1, l);
        }
        call(l.to);
        call(r.to);
    }
};

// ---- the phases ----------------------------------------------------------------------

so::options store_options(const std::string& variant, const std::string& convert) {
    so::options o;
    o.durable = true;
    o.segment_objects = 255;
    if (variant == "in_place") o.place = so::placement::in_place;
    else if (variant == "is_pointer" || variant == "is_call") o.place = so::placement::in_store;
    else if (variant != "copy") bench::fail("unknown variant " + variant);
    o.convert = convert == "eager" ? so::conversion::eager : so::conversion::lazy;
    return o;
}

// Median ms per object of `rounds` runs of `walk`, each checked against `want`.
double timed_walks(int rounds, const traversal& want, const std::function<traversal()>& walk) {
    std::vector<double> ms;
    for (int r = 0; r < rounds; ++r) {
        auto t0 = bench::clock_type::now();
        traversal t = walk();
        ms.push_back(bench::ms_since(t0));
        bench::check(t.visits == want.visits && t.nulls == want.nulls,
                     "a traversal visited " + std::to_string(t.visits) + " objects and counted " +
                         std::to_string(t.nulls) + " null slots, want " + std::to_string(want.visits) + " and " +
                         std::to_string(want.nulls));
    }
    return bench::median(ms);
}

// What a traversal reading `work` slots per visit must count.
traversal expected(shape sh, int work) {
    traversal t;
    t.visits = sh.objects();
    std::uint64_t leaves = std::uint64_t{1} << (sh.height - 1);
    for (int i = 0; i < work; ++i) {
        int slot = i % sh.slots;
        t.nulls += slot < 2 ? leaves : sh.objects();  // only leaves have null children
    }
    return t;
}

int build(const bench::args& a, const std::string& variant, shape sh) {
    bench::json out;
    out.set("variant", variant).set("slots", sh.slots).set("objects", sh.objects());
    auto t0 = bench::clock_type::now();
    if (variant == "c") {
        c_tree tree(sh);
        CSlot* root = tree.build(sh.height);
        out.set("create_us", us_per(bench::ms_since(t0), sh.objects()));
        int rounds = static_cast<int>(a.num("visits", 5));
        int work = static_cast<int>(a.num("work", 0));
        for (int w : {0, work}) {
            double ms = timed_walks(rounds, expected(sh, w), [&] {
                traversal t;
                tree.walk(root, w, t);
                return t;
            });
            out.set(w == 0 ? "traverse_us" : "work_us", us_per(ms, sh.objects()));
        }
        std::printf("%s\n", out.dump().c_str());
        return 0;
    }
    so::store s = so::store::open(a.get("store"), store_options(variant, "lazy"));
    if (variant == "copy" || variant == "in_place") {
        so::ref<Tree> tree = s.make<Tree>();
        node_ref root = build_swizzled(s, sh.slots, sh.height);
        tree.mut()->root = root;
        s.set_root("tree", tree);
    } else {
        so::oid<StoredTree> tree = s.create<StoredTree>();
        node_oid root = build_stored(s, sh.slots, sh.height, variant == "is_call");
        s.poke(tree)->root = root;
        s.set_stored_root("tree", tree);
    }
    out.set("create_us", us_per(bench::ms_since(t0), sh.objects()));
    t0 = bench::clock_type::now();
    s.commit();
    out.set("save_us", us_per(bench::ms_since(t0), sh.objects()));
    out.set("store_bytes", s.stats().store_pages * 4096);
    std::printf("%s\n", out.dump().c_str());
    return 0;
}

int run(const bench::args& a, const std::string& variant, shape sh) {
    std::string convert = a.get("convert", "lazy");
    int rounds = static_cast<int>(a.num("visits", 5));
    int work = static_cast<int>(a.num("work", 0));
    bench::json out;
    out.set("variant", variant).set("slots", sh.slots).set("objects", sh.objects()).set("convert", convert);
    bool stored = variant == "is_pointer" || variant == "is_call";
    auto t0 = bench::clock_type::now();
    so::store s = so::store::open(a.get("store"), store_options(variant, convert));
    std::function<traversal(int)> walk;
    node_ref root;
    node_oid stored_root;
    if (stored) {
        so::oid<StoredTree> tree = s.find_stored_root<StoredTree>("tree");
        bench::check(bool(tree), "the store has no tree");
        stored_root = s.peek(tree)->root;
        walk = [&](int w) {
            traversal t;
            if (variant == "is_pointer") walk_pointer(s, stored_root, sh.slots, w, t);
            else walk_call(s, stored_root, sh.slots, w, t);
            return t;
        };
    } else {
        so::ref<Tree> tree = s.find_root<Tree>("tree");
        bench::check(bool(tree), "the store has no tree");
        root = tree->root;
        walk = [&](int w) {
            traversal t;
            walk_swizzled(root, sh.slots, w, t);
            return t;
        };
    }
    // The load: eager converts everything at the first dereference; lazy
    // (and in-store, intrinsically lazy) loads during the first traversal.
    if (!stored && convert == "eager") (void)root.get();
    traversal first = walk(0);
    out.set("load_us", us_per(bench::ms_since(t0), sh.objects()));
    bench::check(first.visits == sh.objects(), "the loading traversal visited " + std::to_string(first.visits));
    out.set("segment_faults", s.stats().segment_faults);
    out.set("traverse_us", us_per(timed_walks(rounds, expected(sh, 0), [&] { return walk(0); }), sh.objects()));
    if (work > 0)
        out.set("work_us", us_per(timed_walks(rounds, expected(sh, work), [&] { return walk(work); }), sh.objects()));
    // The save of a session that updated a fraction u = 1/every of the objects.
    if (std::uint64_t every = static_cast<std::uint64_t>(a.num("update-every", 0))) {
        updater u{s, every};
        auto t1 = bench::clock_type::now();
        if (variant == "is_pointer") u.pointer(stored_root);
        else if (variant == "is_call") u.call(stored_root);
        else u.swizzled(root);
        out.set("update_traverse_us", us_per(bench::ms_since(t1), sh.objects()));
        t1 = bench::clock_type::now();
        s.commit();
        out.set("save_updated_us", us_per(bench::ms_since(t1), u.updated)).set("updated", u.updated);
        bench::check(walk(0).visits == sh.objects(), "the tree lost objects to the updates");
    }
    std::printf("%s\n", out.dump().c_str());
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    bench::args a(argc, argv);
    std::string variant = a.get("variant", "copy");
    shape sh{static_cast<int>(a.num("slots", 2)), static_cast<int>(a.num("height", 14))};
    if (sh.slots < 2 || sh.height < 1 || sh.height > 30) bench::fail("--slots >= 2, --height 1..30");
    try {
        if (a.command == "build") return build(a, variant, sh);
        if (a.command == "run") return run(a, variant, sh);
        bench::fail("usage: moss build|run --variant c|copy|in_place|is_pointer|is_call --slots K --height H "
                    "--store PATH [--convert eager|lazy] [--visits N] [--work X]");
    } catch (const std::exception& e) {
        bench::fail(e.what());
    }
}
