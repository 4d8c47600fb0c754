// oo7 — the OO7 benchmark for one system, one operation, one process.
// bench/run drives it (drops the OS caches, alternates systems, aggregates).
//
//   oo7 generate --system S --config small|medium --path P [--seed X]
//   oo7 measure  --system S --config C --path P --op t1|t2a|t2b|t2c|t6|q1|q4|insert|delete
//                [--warm 9] [--hot 10] [--slope 64] [--slope-passes 3] [--no-pair]
//       1 cold + warm iterations (+ hot repeats and Hosking's slope for the
//       read-only operations); updating operations commit inside the timed
//       region and report the commit's share; prints one JSON object
//                [--commit-each] [--resident] [--eviction P --budget-kib N]
//       --commit-each: every operation commits inside the timed region (the
//       PEVM's protocol, digest 004 §3.1: a checkpoint after each run), each
//       commit's time in "commit_ms"; --resident (objects-* systems): the
//       database is built in the measuring process, in a new store at P, as
//       transient builds it, and nothing is committed after that: the
//       residency checks and barriers run and never fire (the PEVM's
//       transient runs, Hosking & Moss's "-resident" builds); --eviction
//       second_chance|total|random|none, --budget-kib N (objects-* systems):
//       steppe::objects::options::eviction and resident_budget; the
//       persistent bytes in memory just before and after each commit (the
//       safe point where the engine evicts) are reported as
//       "resident_before_commit" and "resident_after_commit"
//   oo7 verify   --system S --config C --path P --after OP --iterations K
//       reopens the store after an updating run: counts of composite parts,
//       atomic parts and documents, a full T1 (its visit count and checksum
//       are printed for the driver to compare with the measuring process's),
//       steppe's check()
//
// Systems: transient, steppe-uffd, steppe-mprotect, steppe-load (uffd with
// open_options::load_ahead), bip, pmem, pmem-nd, lmdb
// (pmem-nd is libpmemobj with PMEM_IS_PMEM_FORCE=1: not durable here; lmdb
// keeps the objects as records keyed by id, lmdb_oo7.hpp), and steppe's
// object engine in four schemes (oo7_objects.hpp): objects-fb (fault_block +
// cards), objects-id (id + cards), objects-idsh (id_self_heal + cards), objects-pf
// (page_fault + cards). The
// scheme is compiled in, so each is its own executable, this source built with
// OO7_OBJECTS_SYSTEM and the scheme's -D flags (oo7_objects_fb, _id, _idsh, _pf,
// beside oo7); any oo7 executable asked for an objects-* system it was not
// built for re-executes itself as that system's executable.
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "harness.hpp"
#include "lmdb_oo7.hpp"
#include "objects_support.hpp"
#include "oo7.hpp"
#include "policies.hpp"
#ifdef OO7_OBJECTS_SYSTEM
#include "oo7_objects.hpp"
#endif

namespace {

using bench::json;

using bench::system_info;

oo7::config parse_config(const std::string& s) {
    if (s == "small") return oo7::small;
    if (s == "medium") return oo7::medium;
    bench::fail("unknown OO7 configuration " + s + " (small, medium)");
}

std::size_t pool_bytes(const oo7::config& c) {
    std::size_t atomics = static_cast<std::size_t>(c.comp_per_module) * static_cast<std::size_t>(c.atomic_per_comp);
    return atomics * 1536 + static_cast<std::size_t>(c.comp_per_module) * static_cast<std::size_t>(c.doc_size) * 3 +
           static_cast<std::size_t>(c.manual_size) * 2 + (std::size_t{64} << 20);
}

template <class F>
void with_model(const std::string& sys, const std::string& path, bool create, const oo7::config& c, F&& f) {
    if (bench::with_pointer_model<oo7::pointer_model>(sys, path, create, pool_bytes(c), "oo7", f)) return;
    if (sys == "lmdb") {
        oo7::lmdb_model m(path, create, pool_bytes(c));  // the map's upper bound; the file grows as used
        f(m, system_info{m.describe(), "", [&] { return m.counters(); }, m.files(), {}});
        return;
    }
#ifdef OO7_OBJECTS_SYSTEM
    if (sys == OO7_OBJECTS_SYSTEM) {
        oo7::object_model m(path, create);
        f(m, system_info{m.describe(), m.scheme(), [&] { return m.counters(); }, m.files(),
                         [&] { return m.check(); }});
        return;
    }
#endif
    bench::fail("unknown system " + sys +
                " (transient, steppe-uffd, steppe-mprotect, steppe-load, bip, pmem, pmem-nd, lmdb, objects-fb, objects-id, "
                "objects-idsh, objects-pf)");
}

oo7::op parse_op(const std::string& s) {
    for (auto o : {oo7::op::t1, oo7::op::t2a, oo7::op::t2b, oo7::op::t2c, oo7::op::t6, oo7::op::q1, oo7::op::q4,
                   oo7::op::insert, oo7::op::del})
        if (s == oo7::to_string(o)) return o;
    bench::fail("unknown op " + s + " (t1, t2a, t2b, t2c, t6, q1, q4, insert, delete)");
}

std::uint64_t input_seed(std::uint64_t seed, oo7::op o, int iteration) {
    return bench::rnd(seed ^ 0x0077u, static_cast<std::uint64_t>(o) + 1, static_cast<std::uint64_t>(iteration));
}

// The persistent bytes in memory (the object engine's; 0 for other models).
template <class M>
std::uint64_t resident_bytes(const M& m) {
    if constexpr (requires { m.resident_bytes(); }) return m.resident_bytes();
    else return 0;
}

// One iteration of `o`, `commit` called where an updating operation commits.
template <class M, class Commit>
bench::op_result run_read_or_update(M& m, oo7::op o, const oo7::config& c, std::uint64_t seed, int i,
                                    const Commit& commit, std::vector<std::int32_t>* to_delete) {
    switch (o) {
        case oo7::op::t1: {
            auto r = m.traverse(0);
            bench::check(r.count == oo7::t1_visits(c), "T1 visited " + std::to_string(r.count) + " atomic parts, "
                                                           "expected " + std::to_string(oo7::t1_visits(c)));
            return r;
        }
        case oo7::op::t2a:
        case oo7::op::t2b:
        case oo7::op::t2c: {
            m.begin();
            auto r = m.traverse(o == oo7::op::t2a ? 1 : o == oo7::op::t2b ? 2 : 3);
            commit();
            return r;
        }
        case oo7::op::t6: {
            auto r = m.traverse(6);
            bench::check(r.count == static_cast<std::int64_t>(oo7::base_assemblies(c)) * c.fanout,
                         "T6 visited " + std::to_string(r.count) + " root parts");
            return r;
        }
        case oo7::op::q1: {
            auto r = m.q1(input_seed(seed, o, i));
            bench::check(r.count == oo7::q1_lookups, "Q1 found " + std::to_string(r.count) + " of 10 parts");
            return r;
        }
        case oo7::op::q4: return m.q4(input_seed(seed, o, i));
        case oo7::op::insert: {
            m.begin();
            auto r = m.insert(input_seed(seed, o, i), nullptr);
            commit();
            return r;
        }
        case oo7::op::del: {
            m.begin();
            auto r = m.remove(*to_delete);
            commit();
            to_delete->clear();
            return r;
        }
    }
    return {};
}

// How run_op commits: `each` commits after the read-only operations too
// (--commit-each); `store` false skips every commit (--resident: nothing
// persists after building). `before` and `after` get resident_bytes() around
// each commit (the object engine evicts at commit: its safe point).
struct commit_policy {
    bool each = false;
    bool store = true;
    std::vector<double> before, after;
};

// One iteration of `o`; updating operations (and under cp->each, all) commit
// and put the commit's time in *commit_ms.
template <class M>
bench::op_result run_op(M& m, oo7::op o, const oo7::config& c, std::uint64_t seed, int i, double* commit_ms,
                        std::vector<std::int32_t>* to_delete, commit_policy* cp = nullptr) {
    auto commit = [&] {
        if (cp) cp->before.push_back(static_cast<double>(resident_bytes(m)));
        auto t = bench::clock_type::now();
        if (!cp || cp->store) m.commit();
        *commit_ms = bench::ms_since(t);
        if (cp) cp->after.push_back(static_cast<double>(resident_bytes(m)));
    };
    bench::op_result r = run_read_or_update(m, o, c, seed, i, commit, to_delete);
    if (cp && cp->each && !oo7::updates(o)) commit();
    return r;
}

int cmd_generate(const bench::args& a) {
    std::string sys = a.get("system"), path = a.get("path");
    oo7::config c = parse_config(a.get("config", "small"));
    std::uint64_t seed = static_cast<std::uint64_t>(a.num("seed", 1993));
    bench::check(!path.empty() && sys != "transient", "generate needs --path and a persistent --system");
    json out;
    std::vector<std::string> files;
    with_model(sys, path, true, c, [&](auto& m, const system_info& info) {
        files = info.files;
        auto t = bench::clock_type::now();
        bench::counters before = bench::counters::now();
        m.generate(c, seed, true);
        double ms = bench::ms_since(t);
        bench::counters d = bench::counters::now() - before;
        out.set("bench", "oo7").set("command", "generate").set("system", sys).set("config", c.name);
        out.set("generate_ms", ms).set("describe", info.describe).set("counters", bench::to_json(d));
        out.set("atomic_parts", m.atomic_count()).set("composite_parts", m.composite_count());
        out.set("peak_rss_kib", bench::peak_rss_kib());
    });
    auto t = bench::clock_type::now();
    with_model(sys, path, false, c, [&](auto& m, const system_info&) {
        bench::check(m.composite_count() == c.comp_per_module, "the generated store does not reopen");
    });
    out.set("reopen_ms", bench::ms_since(t));
    for (const auto& f : files) bench::fsync_path(f);
    out.set("size", bench::files_json(files));
    std::printf("%s\n", out.dump().c_str());
    return 0;
}

int cmd_measure(const bench::args& a) {
    std::string sys = a.get("system"), path = a.get("path");
    oo7::config c = parse_config(a.get("config", "small"));
    std::uint64_t seed = static_cast<std::uint64_t>(a.num("seed", 1993));
    oo7::op o = parse_op(a.get("op"));
    bench::series_config cfg;
    cfg.warm = static_cast<int>(a.num("warm", 9));
    cfg.hot = static_cast<int>(a.num("hot", 10));
    cfg.slope_max = static_cast<int>(a.num("slope", 64));
    cfg.slope_passes = static_cast<int>(a.num("slope-passes", 3));
    cfg.budget_ms = static_cast<double>(a.num("budget-s", 0)) * 1000;
    cfg.has_hot = !oo7::updates(o);
    bool pair = sys != "transient" && cfg.has_hot && !a.flag("no-pair");
    bool resident = a.flag("resident");
    bench::check(!resident || bench::objects_suffix(sys), "--resident is for the objects-* systems");
    commit_policy cp;
    cp.each = a.flag("commit-each");
    cp.store = !resident;

    json out;
    out.set("bench", "oo7").set("command", "measure").set("system", sys).set("config", c.name).set("op", oo7::to_string(o));
    if (resident) out.set("resident", true);
    if (cp.each) out.set("commit_each", true);
    bench::counters before_open = bench::counters::now();
    auto t_open = bench::clock_type::now();
    with_model(sys, path, resident, c, [&](auto& m, const system_info& info) {
        if (sys == "transient" || resident) {
            auto t = bench::clock_type::now();
            m.generate(c, seed, false);
            out.set("generate_ms", bench::ms_since(t));
            t_open = bench::clock_type::now();
            before_open = bench::counters::now();
        }
        double open_ms = bench::ms_since(t_open);
        out.set("open_counters", bench::to_json(bench::counters::now() - before_open));
        bench::check(m.db().seed == seed && m.db().atomic_per_comp == c.atomic_per_comp,
                     "the store at " + path + " holds another database");
        bench::check(m.composite_count() == c.comp_per_module,
                     "the store at " + path + " was modified; measure on a pristine copy");
        std::vector<double> commit_ms;
        std::vector<std::int32_t> to_delete;
        auto run = [&](int i) {
            double cm = 0;
            auto r = run_op(m, o, c, seed, i, &cm, &to_delete, &cp);
            if (oo7::updates(o) || cp.each) commit_ms.push_back(cm);
            return r;
        };
        std::function<void(int)> prepare;
        if (o == oo7::op::del)
            prepare = [&](int i) {  // the composite parts this iteration deletes, inserted untimed
                m.begin();
                m.insert(input_seed(seed, oo7::op::insert, 1000 + i), &to_delete);
                m.commit();
            };
        std::unique_ptr<bench::transient_policy> tp;
        std::unique_ptr<oo7::pointer_model<bench::transient_policy>> tm;
        std::function<bench::op_result(int)> pair_fn;
        std::function<void()> build_pair;
        if (pair) {
            build_pair = [&] {
                tp = std::make_unique<bench::transient_policy>();
                tm = std::make_unique<oo7::pointer_model<bench::transient_policy>>(*tp);
                tm->generate(c, seed, false);
            };
            pair_fn = [&](int i) {
                double cm;
                return run_op(*tm, o, c, seed, i, &cm, nullptr);
            };
        }
        bench::series_result r = bench::run_series(cfg, run, pair_fn, info.counters, build_pair, prepare);
        // Test hook for the harness: BENCH_INJECT_MISMATCH=<system> falsifies one answer,
        // which the driver's cross-system check must catch.
        if (const char* bad = std::getenv("BENCH_INJECT_MISMATCH"); bad && sys == bad) r.results[0].sum += 1;
        if (!commit_ms.empty()) out.set("commit_ms", json::list(commit_ms));
        if (!cp.before.empty() && cp.before.back() > 0) {
            out.set("resident_before_commit", json::list(cp.before));
            out.set("resident_after_commit", json::list(cp.after));
        }
        if (oo7::updates(o)) {
            auto st = m.traverse(0);  // the state the verifying process must find
            out.set("final_state", bench::to_json(st));
        }
        bench::report_run(out, info, open_ms, r);
    });
    return bench::print_run(out);
}

int cmd_verify(const bench::args& a) {
    std::string sys = a.get("system"), path = a.get("path");
    oo7::config c = parse_config(a.get("config", "small"));
    oo7::op after = parse_op(a.get("after", "t1"));
    std::int64_t iterations = a.num("iterations", 10);
    json out;
    with_model(sys, path, false, c, [&](auto& m, const system_info& info) {
        std::int64_t comps = c.comp_per_module +
                             (after == oo7::op::insert ? oo7::sm_composites * iterations : 0);
        std::int64_t atomics = comps * c.atomic_per_comp;
        bench::check(m.composite_count() == comps && m.atomic_count() == atomics && m.doc_count() == comps,
                     sys + ": reopened store holds " + std::to_string(m.composite_count()) + " composite parts, " +
                         std::to_string(m.atomic_count()) + " atomic parts, " + std::to_string(m.doc_count()) +
                         " documents; expected " + std::to_string(comps) + ", " + std::to_string(atomics) + ", " +
                         std::to_string(comps));
        auto st = m.traverse(0);
        std::int64_t visits = oo7::t1_visits(c) + (after == oo7::op::insert ? oo7::sm_composites * iterations * c.atomic_per_comp : 0);
        bench::check(st.count == visits, sys + ": T1 after reopen visits " + std::to_string(st.count) +
                                             " atomic parts, expected " + std::to_string(visits));
        out.set("state", bench::to_json(st));
        if (info.check) {
            auto findings = info.check();
            for (const auto& f : findings) std::fprintf(stderr, "steppe check: %s\n", f.c_str());
            bench::check(findings.empty(), sys + ": steppe check() reports damage");
        }
    });
    out.set("bench", "oo7").set("command", "verify").set("system", sys).set("ok", true);
    std::printf("%s\n", out.dump().c_str());
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    bench::args a(argc, argv);
    std::string sys = a.get("system");
    if (a.flag("eviction") || a.flag("budget-kib"))
        bench::set_object_eviction(a.get("eviction"), static_cast<std::uint64_t>(a.num("budget-kib", 0)));
#ifdef OO7_OBJECTS_SYSTEM
    bench::exec_objects_build("oo7", sys, OO7_OBJECTS_SYSTEM, argv);
#else
    bench::exec_objects_build("oo7", sys, nullptr, argv);
#endif
    if (sys == "pmem-nd") bench::ensure_env("PMEM_IS_PMEM_FORCE", "1", argv);
    else if (sys == "pmem" && a.command == "generate") bench::ensure_env("PMEM_IS_PMEM_FORCE", "1", argv);
    else if (sys == "pmem") bench::ensure_env("PMEM_IS_PMEM_FORCE", nullptr, argv);
    try {
        if (a.command == "generate") return cmd_generate(a);
        if (a.command == "measure") return cmd_measure(a);
        if (a.command == "verify") return cmd_verify(a);
        std::fprintf(stderr, "usage: oo7 generate|measure|verify --system S --config small|medium --path P ...\n");
        return 2;
    } catch (const std::exception& e) {
        bench::fail(std::string("exception: ") + e.what());
    }
}
