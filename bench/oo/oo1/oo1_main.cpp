// oo1 — the OO1 benchmark for one system, one operation, one process.
// bench/run drives it (drops the OS caches, alternates systems, aggregates).
//
//   oo1 generate --system S --parts N --path P [--seed X] [--segment-objects K]
//       builds the database in a new store at P and makes it durable;
//       --segment-objects (objects-* systems): objects per segment, 1..255
//       (steppe::objects::options::segment_objects; the engine's default 255);
//       --index-chunk-slots N (objects-* systems; also for measure --resident):
//       slots per array object of the index, a power of two (default 256;
//       at least 2 x parts: one flat array, as the pointer model's)
//   oo1 measure  --system S --parts N --path P --op lookup|traversal|reverse|insert
//                [--seed X] [--warm 9] [--hot 10] [--slope 64] [--slope-passes 3] [--no-pair]
//                [--budget-s S] [--touch-all] [--fetch object|logical|physical] [--resident]
//                [--swizzle lazy|opportunistic|eager] [--convert lazy|eager]
//       opens the store and runs the operation: 1 cold + warm iterations with
//       new inputs, then hot repeats and Hosking's slope; prints one JSON object
//       (times, results for the cross-system check, counters per phase);
//       --touch-all first touches every part in id order (a diagnostic: the
//       page engine then reserves the parts' pages in file order);
//       --fetch (objects-* systems): what a fault brings in, one object, its
//       logical segment (the default) or the physical segment from it on
//       (steppe::objects::options::fetch; Hosking & Moss's OBJ, LSEG, PSEG);
//       --resident (objects-* systems): the database is built in the measuring
//       process, in a new store at P, as transient builds it, and measured
//       there: every reference is the address of an object made in this
//       process, so the residency check runs and never fires (Hosking & Moss's
//       "-resident" builds: the checks without persistence)
//       --swizzle, --convert (objects-* systems): steppe::objects::options::
//       swizzle and convert (Hosking 1995's lazy / opportunistic / eager,
//       Moss 1990's eager conversion of the whole collection at the first fault)
//   oo1 verify   --system S --parts N --path P --max-id M
//       reopens a store after inserts and checks it: every id found, every
//       connection's reverse entry present (3 per part), steppe's check() clean;
//       prints the state checksum of every part's x and y ("state")
//   oo1 measure ... --op update [--update-prob P] [--perf N]
//       the update traversal (oo1.hpp): each visit modifies its part with
//       probability P (default 1), x and y, no commit (a long-running
//       transaction); --perf N [--perf-passes P] (any op with a hot phase):
//       P passes of N more hot repeats under the hardware counters the
//       machine exposes and the TSC (perf_counters.hpp), the fastest pass
//       reported per repeat as "perf" (update: "perf_p0" beside, the same
//       input at probability 0, alternated pass by pass)
//   oo1 checkpoint --system S --parts N --path P [--probs 0,0.01,0.1,0.5,1] [--cycles 5]
//       checkpoint latency against update probability (Hosking 1995, Fig. 1):
//       every part made resident, then per probability `cycles` x (one update
//       traversal, commit timed: wall and process CPU, bytes logged, pages
//       committed, objects written); the final state checksum
//   --card-bytes N (objects-* systems built with barrier cards): bytes per card
//       (steppe::objects::options::card_bytes, 16..4096; default 256)
//   --write-tracking wp_async|wp_sync|mprotect: sets STEPPE_WRITE_TRACKING (the
//       page engine's and objects-fb-pages' write tracking)
//   --address-space-mib N: the object engine's heap_limit and the page engine's
//       address_space_limit (valgrind cannot reserve their default 64 GiB)
//   --prefetch on|off: the page engine's read-ahead (open_options::prefetch;
//       default on; off: one page read per fault, as Texas had)
//   --load-ahead on|off: the page engine's open_options::load_ahead (default
//     off)
//   --log-diffs on|off: both engines' open_options::log_diffs (default on;
//       off: every committed page logged whole)
//
// Systems: transient, steppe-uffd, steppe-mprotect, steppe-load (uffd with
// open_options::load_ahead), bip, pmem, pmem-nd, lmdb
// (pmem-nd is libpmemobj with PMEM_IS_PMEM_FORCE=1: not durable here),
// steppe-smart-index and steppe-all-smart (the page engine with
// steppe::pref in the index only / for every pointer: texas_policies.hpp), and
// steppe's object engine in four schemes: objects-fb (fault_block + cards),
// objects-id (id + cards), objects-idsh (id_self_heal + cards), objects-pf
// (page_fault + cards), and fault_block with the other write barriers for the
// write-barrier study: objects-fb-flag (object_flag), objects-fb-remset
// (remembered_set), objects-fb-pages (pages). The scheme is
// compiled in, so each is its own executable, this source built with
// OO1_OBJECTS_SYSTEM and the scheme's -D flags (oo1_objects_fb, _id, _idsh, _pf,
// beside oo1); any oo1 executable asked for an objects-* system it was not
// built for re-executes itself as that system's executable, so the driver and
// a user run `oo1 ... --system objects-id` alike.
// transient builds its database in the measuring process (nothing to open).
// A self-check failure prints FAIL: ... and exits 3.
#include <cstdio>
#include <functional>
#include <string>

#include "harness.hpp"
#include "lmdb_oo1.hpp"
#include "oo1.hpp"
#include "policies.hpp"
#include "objects_support.hpp"
#include "perf_counters.hpp"
#include "texas_policies.hpp"
#ifdef OO1_OBJECTS_SYSTEM
#include "oo1_objects.hpp"
#endif

// The stretch the --perf counters measure, out of line under a plain name so
// that `valgrind --tool=callgrind --collect-atstart=no
// --toggle-collect=bench_counted_region` counts exactly it.
extern "C" [[gnu::noinline]] void bench_counted_region(const std::function<void()>* body) {
    (*body)();
    asm volatile("" ::: "memory");
}

namespace {

using bench::json;
constexpr std::uint64_t insert_salt = 0x15E47;

using bench::system_info;

std::size_t bip_bytes(std::int64_t n) { return static_cast<std::size_t>(n) * 512 + (std::size_t{64} << 20); }
std::size_t pmem_bytes(std::int64_t n) { return static_cast<std::size_t>(n) * 640 + (std::size_t{64} << 20); }
std::size_t lmdb_bytes(std::int64_t n) { return static_cast<std::size_t>(n) * 1024 + (std::size_t{64} << 20); }

// Calls f(model, info) with the system's model open on `path` (created if `create`).
template <class F>
void with_model(const std::string& sys, const std::string& path, bool create, std::int64_t n, F&& f) {
    std::size_t pool = sys == "bip" ? bip_bytes(n) : pmem_bytes(n);
    if (bench::with_pointer_model<oo1::pointer_model>(sys, path, create, pool, "oo1", f)) return;
    if (bench::with_texas_model<oo1::pointer_model>(sys, path, create, f)) return;
    if (sys == "lmdb") {
        oo1::lmdb_model m(path, create, lmdb_bytes(n));
        f(m, system_info{m.describe(), "", [&] { return m.counters(); }, m.files(), {}});
        return;
    }
#ifdef OO1_OBJECTS_SYSTEM
    if (sys == OO1_OBJECTS_SYSTEM) {
        oo1::object_model m(path, create);
        f(m, system_info{m.describe(), m.scheme(), [&] { return m.counters(); }, m.files(),
                         [&] { return m.check(); }});
        return;
    }
#endif
    bench::fail("unknown system " + sys +
                " (transient, steppe-uffd, steppe-mprotect, steppe-load, steppe-smart-index, steppe-all-smart, bip, pmem, pmem-nd, "
                "lmdb, objects-fb, objects-id, "
                "objects-idsh, objects-pf)");
}

oo1::op parse_op(const std::string& s) {
    if (s == "lookup") return oo1::op::lookup;
    if (s == "traversal") return oo1::op::traversal;
    if (s == "reverse") return oo1::op::reverse;
    if (s == "insert") return oo1::op::insert;
    if (s == "update") return oo1::op::update;
    bench::fail("unknown op " + s + " (lookup, traversal, reverse, insert, update)");
}

template <class M>
bench::op_result run_op(M& m, oo1::op o, std::int64_t n, std::uint64_t seed, int iteration, double* commit_ms) {
    switch (o) {
        case oo1::op::lookup: {
            auto r = oo1::lookup(m, n, seed, iteration);
            bench::check(r.count == oo1::lookups, "lookup found " + std::to_string(r.count) + " of " +
                                                      std::to_string(oo1::lookups) + " parts");
            return r;
        }
        case oo1::op::traversal: {
            auto r = oo1::traversal(m, n, seed, iteration, false);
            bench::check(r.count == oo1::traversal_visits,
                         "traversal visited " + std::to_string(r.count) + " parts, not 3280");
            return r;
        }
        case oo1::op::reverse: return oo1::traversal(m, n, seed, iteration, true);
        case oo1::op::insert: return oo1::insert(m, n, seed ^ insert_salt, commit_ms);
        case oo1::op::update: {
            if constexpr (requires(M& x) { x.update(x.uroot(1)); }) {
                auto r = oo1::update_traversal(m, n, seed, iteration, oo1::update_probability());
                bench::check(r.count == oo1::traversal_visits,
                             "update traversal visited " + std::to_string(r.count) + " parts, not 3280");
                return r;
            } else {
                bench::fail("the update traversal is not written for this system");
            }
        }
    }
    return {};
}

int cmd_generate(const bench::args& a) {
    std::string sys = a.get("system"), path = a.get("path");
    std::int64_t n = a.num("parts", 20000);
    std::uint64_t seed = static_cast<std::uint64_t>(a.num("seed", 1992));
    bench::check(!path.empty() && sys != "transient", "generate needs --path and a persistent --system");
    json out;
    std::vector<std::string> files;
    with_model(sys, path, true, n, [&](auto& m, const system_info& info) {
        files = info.files;
        auto t = bench::clock_type::now();
        bench::counters before = bench::counters::now();
        m.generate(n, seed, true);
        double ms = bench::ms_since(t);
        bench::counters d = bench::counters::now() - before;
        out.set("bench", "oo1").set("command", "generate").set("system", sys).set("parts", n);
        out.set("generate_ms", ms).set("describe", info.describe).set("counters", bench::to_json(d));
        out.set("peak_rss_kib", bench::peak_rss_kib());
    });
    // Reopen once, so the first measured open finds the store in its steady
    // state (steppe checkpoints its log at a writable open; libpmemobj
    // finishes its first-open work), then make every file durable.
    auto t = bench::clock_type::now();
    with_model(sys, path, false, n, [&](auto& m, const system_info&) {
        bench::check(m.part_count() == n, "the generated store does not reopen with its parts");
    });
    out.set("reopen_ms", bench::ms_since(t));
    for (const auto& f : files) bench::fsync_path(f);
    out.set("size", bench::files_json(files));
    std::printf("%s\n", out.dump().c_str());
    return 0;
}

int cmd_measure(const bench::args& a) {
    std::string sys = a.get("system"), path = a.get("path");
    std::int64_t n = a.num("parts", 20000);
    std::uint64_t seed = static_cast<std::uint64_t>(a.num("seed", 1992));
    oo1::op o = parse_op(a.get("op"));
    bench::series_config cfg;
    cfg.warm = static_cast<int>(a.num("warm", 9));
    cfg.hot = static_cast<int>(a.num("hot", 10));
    cfg.slope_max = static_cast<int>(a.num("slope", 64));
    cfg.slope_passes = static_cast<int>(a.num("slope-passes", 3));
    cfg.budget_ms = static_cast<double>(a.num("budget-s", 0)) * 1000;
    cfg.has_hot = o != oo1::op::insert;
    bool pair = sys != "transient" && cfg.has_hot && !a.flag("no-pair");
    bool resident = a.flag("resident");
    bench::check(!resident || bench::objects_suffix(sys), "--resident is for the objects-* systems");
    bench::check(!resident || o != oo1::op::insert, "--resident measures the read operations");

    json out;
    out.set("bench", "oo1").set("command", "measure").set("system", sys).set("parts", n).set("op", oo1::to_string(o));
    bench::counters before_open = bench::counters::now();
    auto t_open = bench::clock_type::now();
    if (resident) out.set("resident", true);
    if (a.flag("fetch")) out.set("fetch", a.get("fetch"));
    if (o == oo1::op::update) out.set("update_probability", oo1::update_probability());
    with_model(sys, path, resident, n, [&](auto& m, const system_info& info) {
        if (sys == "transient" || resident) {
            auto t = bench::clock_type::now();
            m.generate(n, seed, false);
            out.set("generate_ms", bench::ms_since(t));
            t_open = bench::clock_type::now();
            before_open = bench::counters::now();
        }
        double open_ms = bench::ms_since(t_open);
        out.set("open_counters", bench::to_json(bench::counters::now() - before_open));
        bench::check(m.base_parts() == n && m.seed() == seed,
                     "the store at " + path + " holds another database (parts " + std::to_string(m.base_parts()) + ")");
        bench::check(m.part_count() == n, "the store at " + path + " was modified (" + std::to_string(m.part_count()) +
                                              " parts); measure on a pristine copy");
        if (a.flag("touch-all")) {  // diagnostic: fault every part in id order before measuring
            m.begin_read();
            std::int64_t sum = 0;
            for (std::int64_t id = 1; id <= n; ++id) sum += m.part(m.find(id)).x;
            m.end_read();
            out.set("touched_all", sum);
        }
        std::vector<double> commit_ms;
        auto run = [&](int i) {
            double c = 0;
            auto r = run_op(m, o, n, seed, i, &c);
            if (o == oo1::op::insert) commit_ms.push_back(c);
            return r;
        };
        // The transient copy for the in-process hot comparison, built after the warm phase.
        std::unique_ptr<bench::transient_policy> tp;
        std::unique_ptr<oo1::pointer_model<bench::transient_policy>> tm;
        std::function<bench::op_result(int)> pair_fn;
        std::function<void()> build_pair;
        if (pair) {
            build_pair = [&] {
                tp = std::make_unique<bench::transient_policy>();
                tm = std::make_unique<oo1::pointer_model<bench::transient_policy>>(*tp);
                tm->generate(n, seed, false);
            };
            pair_fn = [&](int i) {
                double c;
                return run_op(*tm, o, n, seed, i, &c);
            };
        }
        bench::series_result r = bench::run_series(cfg, run, pair_fn, info.counters, build_pair);
        // --perf N [--perf-passes P]: P passes of N more hot repeats of the
        // last input under the hardware counters the machine exposes
        // (perf_counters.hpp; "unavailable" with the reason otherwise) and
        // the TSC, inside bench_counted_region (what callgrind
        // --toggle-collect counts); the fastest pass is reported, per repeat
        // (short passes, many of them: on a shared machine the fastest is the
        // one nothing preempted). For the update traversal, the same input at
        // probability 0 alternates with it pass by pass (perf_p0): the
        // difference is what the updates and their barrier cost, measured in
        // one process; updates_per_run says how many visits modified.
        // --perf-single: one pass, probability p only (callgrind).
        if (int reps = static_cast<int>(a.num("perf", 0)); reps > 0 && cfg.has_hot) {
            int last = static_cast<int>(r.results.size()) - 1;
            bool single = a.flag("perf-single");
            int passes = single ? 1 : static_cast<int>(a.num("perf-passes", 15));
            bench::perf_counters pc;
            auto counted = [&] {
                std::function<void()> body = [&] {
                    pc.start();
                    for (int k = 0; k < reps; ++k) run(last);
                    pc.stop();
                };
                bench_counted_region(&body);
                return pc.to_json(reps);
            };
            for (int w = 0; w < std::max(1, reps / 4); ++w) run(last);  // caches and predictors warm
            bool alternate = o == oo1::op::update && !single;
            double p = oo1::update_probability();
            bench::json best, best0;
            double best_ms = 1e300, best0_ms = 1e300;
            for (int pass = 0; pass < passes; ++pass) {
                oo1::update_probability() = p;
                bench::json j = counted();
                if (pc.last_ms() < best_ms) best_ms = pc.last_ms(), best = j;
                if (!alternate) continue;
                oo1::update_probability() = 0;
                j = counted();
                if (pc.last_ms() < best0_ms) best0_ms = pc.last_ms(), best0 = j;
                oo1::update_probability() = p;
            }
            out.set("perf", best).set("perf_passes", passes);
            if (alternate) out.set("perf_p0", best0);
            if (o == oo1::op::update)
                out.set("updates_per_run", oo1::updates_of(r.results[static_cast<std::size_t>(last)]));
        }
        // Test hook for the harness: BENCH_INJECT_MISMATCH=<system> falsifies one answer,
        // which the driver's cross-system check must catch.
        if (const char* bad = std::getenv("BENCH_INJECT_MISMATCH"); bad && sys == bad) r.results[0].sum += 1;
        if (o == oo1::op::insert) {
            // every inserted part is found, with the connections it was given
            std::int64_t expect = n + static_cast<std::int64_t>(oo1::inserts) * static_cast<std::int64_t>(r.results.size());
            bench::check(m.part_count() == expect && m.max_id() == expect,
                         "after the inserts the store counts " + std::to_string(m.part_count()) + " parts, not " +
                             std::to_string(expect));
            m.begin_read();
            for (std::int64_t id = n + 1; id <= expect; ++id) {
                auto h = m.find(id);
                bench::check(static_cast<bool>(h), "inserted part " + std::to_string(id) + " not found");
                oo1::part_spec s = oo1::spec(seed ^ insert_salt, n, id);
                for (int c = 0; c < oo1::fanout; ++c)
                    bench::check(m.part(m.out(m.part(h), c)).id == s.conn[c].to,
                                 "inserted part " + std::to_string(id) + ": connection " + std::to_string(c) + " wrong");
            }
            m.end_read();
            out.set("commit_ms", json::list(commit_ms));
        }
        bench::report_run(out, info, open_ms, r);
    });
    return bench::print_run(out);
}

double process_cpu_ms() {
    timespec ts{};
    ::clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) / 1e6;
}

std::vector<double> parse_list(const std::string& s) {
    std::vector<double> v;
    std::size_t at = 0;
    while (at < s.size()) {
        std::size_t comma = s.find(',', at);
        if (comma == std::string::npos) comma = s.size();
        v.push_back(std::atof(s.substr(at, comma - at).c_str()));
        at = comma + 1;
    }
    return v;
}

// Checkpoint latency against update probability (Hosking 1995, Figure 1):
// every part made resident through the index (so a barrier that scans what
// is in memory scans the whole database), one commit with nothing written,
// then for each probability p, `cycles` times: one update traversal at p
// (a new input each time, the same for every system), then commit, timed
// (wall, and the process's CPU time, which leaves out the wait for
// fdatasync), with the store's counters (bytes logged, pages committed,
// objects written) per commit. Ends with the state checksum of every part,
// which the driver compares with the reopened store and every other system.
int cmd_checkpoint(const bench::args& a) {
    std::string sys = a.get("system"), path = a.get("path");
    std::int64_t n = a.num("parts", 20000);
    std::uint64_t seed = static_cast<std::uint64_t>(a.num("seed", 1992));
    std::vector<double> probs = parse_list(a.get("probs", "0,0.01,0.1,0.5,1"));
    int cycles = static_cast<int>(a.num("cycles", 5));
    bench::check(!path.empty() && sys != "transient", "checkpoint needs --path and a persistent --system");
    json out;
    out.set("bench", "oo1").set("command", "checkpoint").set("system", sys).set("parts", n).set("op", "checkpoint");
    std::vector<bench::op_result> results;
    double open_ms = 0;
    auto t_open = bench::clock_type::now();
    with_model(sys, path, false, n, [&](auto& m, const system_info& info) {
        if constexpr (requires { m.update(m.uroot(1)); }) {
            open_ms = bench::ms_since(t_open);
            bench::check(m.base_parts() == n && m.seed() == seed && m.part_count() == n,
                         "the store at " + path + " is not the pristine database");
            auto snap = [&] { return bench::counters::now(info.counters ? info.counters() : std::map<std::string, std::int64_t>{}); };
            auto t = bench::clock_type::now();
            m.begin_read();
            std::int64_t sum = 0;
            for (std::int64_t id = 1; id <= n; ++id) sum += m.part(m.find(id)).x;
            m.end_read();
            out.set("touch_all_ms", bench::ms_since(t)).set("touched", sum);
            t = bench::clock_type::now();
            m.commit();
            out.set("empty_commit_ms", bench::ms_since(t));
            json::array per_p;
            int iteration = 100;
            for (double p : probs) {
                std::vector<double> trav, wall, cpu;
                std::vector<std::int64_t> logged, pages, objects, written, updates, syncs;
                for (int k = 0; k < cycles; ++k, ++iteration) {
                    bench::counters c0 = snap();
                    t = bench::clock_type::now();
                    bench::op_result r = oo1::update_traversal(m, n, seed, iteration, p);
                    trav.push_back(bench::ms_since(t));
                    bench::check(r.count == oo1::traversal_visits, "update traversal: wrong visit count");
                    results.push_back(r);
                    updates.push_back(oo1::updates_of(r));
                    double c = process_cpu_ms();
                    t = bench::clock_type::now();
                    m.commit();
                    wall.push_back(bench::ms_since(t));
                    cpu.push_back(process_cpu_ms() - c);
                    bench::counters d = snap() - c0;
                    logged.push_back(d.extra["bytes_logged"]);
                    pages.push_back(d.extra["pages_committed"]);
                    objects.push_back(d.extra.count("objects_written") ? d.extra["objects_written"] : -1);
                    syncs.push_back(d.syncs);
                    written.push_back(d.write_bytes);
                }
                json jp;
                jp.set("p", p).set("traversal_ms", json::list(trav)).set("commit_ms", json::list(wall));
                jp.set("commit_cpu_ms", json::list(cpu)).set("bytes_logged", json::list(logged));
                jp.set("pages_committed", json::list(pages)).set("objects_written", json::list(objects));
                jp.set("write_bytes", json::list(written)).set("syncs", json::list(syncs));
                jp.set("updates", json::list(updates));
                per_p.push_back(jp);
            }
            out.set("probabilities", json(per_p));
            std::int64_t state = oo1::state_checksum(m, n);
            out.set("final_state", state);
            results.push_back({n, state});
            out.set("describe", info.describe).set("backend", info.backend).set("open_ms", open_ms);
        } else {
            bench::fail("the update traversal is not written for " + sys);
        }
    });
    json::array res;
    for (const auto& r : results) res.push_back(bench::to_json(r));
    out.set("series", json(json::object{{"results", json(res)}}));
    return bench::print_run(out);
}

int cmd_verify(const bench::args& a) {
    std::string sys = a.get("system"), path = a.get("path");
    std::int64_t n = a.num("parts", 20000);
    std::int64_t max_id = a.num("max-id", n);
    std::int64_t state = 0;
    with_model(sys, path, false, n, [&](auto& m, const system_info& info) {
        bench::check(m.part_count() == max_id && m.max_id() == max_id,
                     sys + ": reopened store counts " + std::to_string(m.part_count()) + " parts, expected " +
                         std::to_string(max_id));
        m.begin_read();
        std::int64_t reverse = 0;
        for (std::int64_t id = 1; id <= max_id; ++id) {
            auto h = m.find(id);
            bench::check(static_cast<bool>(h), sys + ": part " + std::to_string(id) + " missing after reopen");
            bench::check(m.part(h).id == id, sys + ": part " + std::to_string(id) + " has the wrong id");
            reverse += m.from_count(h);
        }
        m.end_read();
        bench::check(reverse == oo1::fanout * max_id, sys + ": " + std::to_string(reverse) +
                                                          " reverse connections, expected " +
                                                          std::to_string(oo1::fanout * max_id));
        state = oo1::state_checksum(m, max_id);
        if (info.check) {
            auto findings = info.check();
            for (const auto& f : findings) std::fprintf(stderr, "steppe check: %s\n", f.c_str());
            bench::check(findings.empty(), sys + ": steppe check() reports damage");
        }
    });
    json out;
    out.set("bench", "oo1").set("command", "verify").set("system", sys).set("parts", max_id).set("ok", true);
    out.set("state", state);
    std::printf("%s\n", out.dump().c_str());
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    bench::args a(argc, argv);
    std::string sys = a.get("system");
    if (a.flag("fetch")) bench::set_object_fetch(a.get("fetch"));
    for (const char* f : {"swizzle", "convert"})
        if (a.flag(f)) bench::set_object_eagerness(f, a.get(f));
    if (a.flag("update-prob")) oo1::update_probability() = std::atof(a.get("update-prob").c_str());
    if (a.flag("card-bytes")) bench::object_card_bytes() = static_cast<std::uint32_t>(a.num("card-bytes", 256));
    if (a.flag("address-space-mib")) {  // for valgrind: a smaller heap / arena reservation
        std::uint64_t mib = static_cast<std::uint64_t>(a.num("address-space-mib", 0));
        bench::object_heap_limit() = mib << 20;
        bench::steppe_address_space_limit() = mib << 20;
    }
    if (a.flag("write-tracking")) ::setenv("STEPPE_WRITE_TRACKING", a.get("write-tracking").c_str(), 1);
    if (a.flag("prefetch")) bench::steppe_prefetch() = a.get("prefetch") != "off";
    if (a.flag("load-ahead")) bench::steppe_load_ahead() = a.get("load-ahead") != "off";
    if (a.flag("log-diffs")) bench::steppe_log_diffs() = a.get("log-diffs") != "off";
    if (a.flag("segment-objects"))
        bench::object_segment_objects() = static_cast<std::uint32_t>(a.num("segment-objects", 255));
#ifdef OO1_OBJECTS_SYSTEM
    if (a.flag("index-chunk-slots"))
        oo1::index_chunk_slots() = static_cast<std::uint64_t>(a.num("index-chunk-slots", 256));
#endif
#ifdef OO1_OBJECTS_SYSTEM
    bench::exec_objects_build("oo1", sys, OO1_OBJECTS_SYSTEM, argv);
#else
    bench::exec_objects_build("oo1", sys, nullptr, argv);
#endif
    // libpmem decides at load time whether flushes are msync (durable) or cache flushes.
    if (sys == "pmem-nd") bench::ensure_env("PMEM_IS_PMEM_FORCE", "1", argv);
    else if (sys == "pmem" && a.command == "generate") bench::ensure_env("PMEM_IS_PMEM_FORCE", "1", argv);  // bulk load; fsynced after
    else if (sys == "pmem") bench::ensure_env("PMEM_IS_PMEM_FORCE", nullptr, argv);
    try {
        if (a.command == "generate") return cmd_generate(a);
        if (a.command == "measure") return cmd_measure(a);
        if (a.command == "verify") return cmd_verify(a);
        if (a.command == "checkpoint") return cmd_checkpoint(a);
        std::fprintf(stderr, "usage: oo1 generate|measure|verify|checkpoint --system S --parts N --path P [--op OP] ...\n");
        return 2;
    } catch (const std::exception& e) {
        bench::fail(std::string("exception: ") + e.what());
    }
}
