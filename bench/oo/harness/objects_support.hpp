// objects_support.hpp — what the OO1 and OO7 ports to steppe's object engine
// (<steppe/objects.hpp>) share: opening the store, the engine's counters as
// the harness reports them, and running the executable of an objects-* system.
//
// The object engine's scheme is chosen when the program is compiled
// (-DSTEPPE_OBJECTS_DETECTION=..., -DSTEPPE_OBJECTS_BARRIER=...), so each
// scheme is its own executable: <bench>_objects_fb, _id, _idsh, _pf beside <bench>
// (and oo1_objects_fb_flag, _fb_remset, _fb_pages: fault_block with the other
// write barriers)
// (bench/oo/oo1/CMakeLists.txt, bench/oo/oo7/CMakeLists.txt). Any of a
// benchmark's executables asked for an objects-* system it was not built for
// re-executes itself as that system's executable, so the driver and a user run
// `oo7 ... --system objects-id` alike.
#pragma once

#include <steppe/objects.hpp>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <map>
#include <string>
#include <system_error>

#include "harness.hpp"

namespace bench {

// The object engine's counters, as the harness reports them per phase.
inline std::map<std::string, std::int64_t> object_counters(const steppe::objects::store& s) {
    steppe::objects::stats st = s.stats();
    auto i = [](std::uint64_t v) { return static_cast<std::int64_t>(v); };
    return {{"segment_faults", i(st.segment_faults)},
            {"objects_faulted", i(st.objects_faulted)},
            {"fault_blocks", i(st.fault_blocks)},
            {"traps", i(st.traps)},
            {"refs_swizzled", i(st.refs_swizzled)},
            {"evicted_objects", i(st.evicted_objects)},
            {"commits", i(st.commits)},
            {"new_objects", i(st.new_objects)},
            {"objects_written", i(st.objects_written)},
            {"segments_written", i(st.segments_written)},
            {"pages_committed", i(st.pages_committed)},
            {"bytes_logged", i(st.bytes_logged)},
            {"store_syncs", i(st.syncs)},
            {"resident_objects", i(st.resident_objects)},
            {"heap_bytes", i(st.heap_bytes)}};
}

// What a fault brings into memory (steppe::objects::options::fetch) for the
// stores open_object_store opens: the engine's default unless a driver's
// `--fetch object|logical|physical` set it (Hosking & Moss's OBJ, LSEG, PSEG).
inline steppe::objects::granularity& object_fetch() {
    static steppe::objects::granularity g = steppe::objects::options{}.fetch;
    return g;
}
inline void set_object_fetch(const std::string& name) {
    using steppe::objects::granularity;
    if (name == "object") object_fetch() = granularity::object;
    else if (name == "logical" || name == "logical_segment") object_fetch() = granularity::logical_segment;
    else if (name == "physical" || name == "physical_segment") object_fetch() = granularity::physical_segment;
    else fail("unknown --fetch " + name + " (object, logical, physical)");
}

// Swizzling and conversion (steppe::objects::options::swizzle, convert) for
// the stores open_object_store opens: the engine's defaults unless a driver's
// `--swizzle lazy|opportunistic|eager` or `--convert lazy|eager` set them
// (Hosking 1995's eagerness, Moss 1990's eager conversion). The same object
// holds the eviction settings (set_object_eviction).
inline steppe::objects::options& object_eagerness() {
    static steppe::objects::options o;
    return o;
}
inline void set_object_eagerness(const std::string& flag, const std::string& name) {
    using namespace steppe::objects;
    options& o = object_eagerness();
    if (flag == "swizzle" && name == "lazy") o.swizzle = swizzling::lazy;
    else if (flag == "swizzle" && name == "opportunistic") o.swizzle = swizzling::opportunistic;
    else if (flag == "swizzle" && name == "eager") o.swizzle = swizzling::eager;
    else if (flag == "convert" && name == "lazy") o.convert = conversion::lazy;
    else if (flag == "convert" && name == "eager") o.convert = conversion::eager;
    else fail("unknown --" + flag + " " + name + " (swizzle: lazy, opportunistic, eager; convert: lazy, eager)");
}

// The resident budget and eviction policy (steppe::objects::options::
// resident_budget, eviction) for the stores open_object_store opens: the
// engine's defaults unless a driver's `--eviction none|total|random|
// second_chance` or `--budget-kib N` set them (the PEVM's eviction study).
inline void set_object_eviction(const std::string& policy, std::uint64_t budget_kib) {
    using p = steppe::objects::options::eviction_policy;
    steppe::objects::options& o = object_eagerness();
    if (!policy.empty()) {
        bool known = false;
        for (p x : {p::second_chance, p::total, p::random, p::none})  // to_string: options' friend, by ADL
            if (policy == to_string(x)) o.eviction = x, known = true;
        if (!known) fail("unknown --eviction " + policy + " (second_chance, total, random, none)");
    }
    if (budget_kib) o.resident_budget = budget_kib << 10;
}

// Objects per segment for the stores open_object_store creates
// (steppe::objects::options::segment_objects, recorded by a new store): the
// engine's default unless a driver's `--segment-objects N` set it.
inline std::uint32_t& object_segment_objects() {
    static std::uint32_t n = steppe::objects::options{}.segment_objects;
    return n;
}

// Bytes per card (steppe::objects::options::card_bytes, barrier cards) for the
// stores open_object_store opens: the engine's default unless a driver's
// `--card-bytes N` set it.
inline std::uint32_t& object_card_bytes() {
    static std::uint32_t n = steppe::objects::options{}.card_bytes;
    return n;
}

// Address space for the engine's heap (steppe::objects::options::heap_limit;
// 0 = the engine's default, 64 GiB): a driver's `--address-space-mib N` sets
// it (valgrind cannot reserve 64 GiB).
inline std::uint64_t& object_heap_limit() {
    static std::uint64_t n = 0;
    return n;
}

// Opens the benchmark's store at `path` (with `create`: anew, removing any old
// one), durable commits, the fetch granularity of object_fetch() and the
// segment size of object_segment_objects(), the engine's defaults otherwise.
inline steppe::objects::store open_object_store(const std::string& path, bool create) {
    if (create) {
        std::filesystem::remove(path);
        std::filesystem::remove(path + "-wal");
    }
    steppe::objects::options o;
    o.create = create;
    o.durable = true;
    o.fetch = object_fetch();
    o.swizzle = object_eagerness().swizzle;
    o.convert = object_eagerness().convert;
    o.eviction = object_eagerness().eviction;
    o.resident_budget = object_eagerness().resident_budget;
    o.segment_objects = object_segment_objects();
    o.card_bytes = object_card_bytes();
    o.heap_limit = object_heap_limit();
    o.log_diffs = steppe_log_diffs();
    return steppe::objects::store::open(path, o);
}

// The executable suffix of an object-engine system, null for any other system.
inline const char* objects_suffix(const std::string& sys) {
    if (sys == "objects-fb") return "fb";
    if (sys == "objects-id") return "id";
    if (sys == "objects-idsh") return "idsh";
    if (sys == "objects-pf") return "pf";
    if (sys == "objects-fb-flag") return "fb_flag";
    if (sys == "objects-fb-remset") return "fb_remset";
    if (sys == "objects-fb-pages") return "fb_pages";
    return nullptr;
}

// Runs `sys`'s executable (<bench>_objects_<suffix>, beside this one) in this
// process's place, unless `sys` is no object-engine system or is the one this
// executable was built for (`compiled_system`, null in the plain build).
inline void exec_objects_build(const char* bench_name, const std::string& sys, const char* compiled_system,
                               char** argv) {
    const char* suffix = objects_suffix(sys);
    if (!suffix) return;
    if (compiled_system && sys == compiled_system) return;
    std::error_code ec;
    std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
    check(!ec, "readlink /proc/self/exe: " + ec.message());
    std::string exe = std::string(bench_name) + "_objects_" + suffix;
    std::string target = (self.parent_path() / exe).string();
    ::execv(target.c_str(), argv);
    fail("execv " + target + ": " + std::strerror(errno) + " (build the " + bench_name + " target: it builds " +
         exe + ")");
}

}  // namespace bench
