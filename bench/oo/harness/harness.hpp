// harness.hpp — what OO1 and OO7 share: timing, counters, JSON, statistics,
// deterministic random numbers, progress, and the cold/warm/hot protocol.
//
//   counters      getrusage (minor/major faults, peak RSS), /proc/self/io
//                 (bytes read from and written to storage), and every fsync,
//                 fdatasync, msync and sync_file_range the process makes
//                 (sync_counter.cpp interposes them, so the peers' libraries are
//                 counted too)
//   json          a small writer: the measure processes print one object each
//   rng           splitmix64, counter-based, so every system derives the same
//                 database and the same operation inputs from the same seed
//   fit_line      least squares y = a + b·x (Hosking's hot slope)
//   series        runs one operation cold, warm and hot with counters per phase
#pragma once

#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace bench {

// ---- failure ----------------------------------------------------------------

// A self-check failed or the environment refused something: say what, exit 3.
[[noreturn]] inline void fail(const std::string& what) {
    std::fflush(stdout);
    std::fprintf(stderr, "FAIL: %s\n", what.c_str());
    std::exit(3);
}
inline void check(bool ok, const std::string& what) {
    if (!ok) fail(what);
}

// ---- sync counting (sync_counter.cpp) ----------------------------------------

struct sync_counts {
    std::uint64_t fsync = 0, fdatasync = 0, msync = 0, sync_file_range = 0;
    std::uint64_t total() const { return fsync + fdatasync + msync + sync_file_range; }
};
sync_counts current_syncs() noexcept;

// ---- clock --------------------------------------------------------------------

using clock_type = std::chrono::steady_clock;
inline double ms_since(clock_type::time_point t) {
    return std::chrono::duration<double, std::milli>(clock_type::now() - t).count();
}

// ---- deterministic random numbers --------------------------------------------

inline std::uint64_t splitmix(std::uint64_t x) noexcept {
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}
// A value depending only on (seed, a, b): random access, identical everywhere.
inline std::uint64_t rnd(std::uint64_t seed, std::uint64_t a, std::uint64_t b = 0) noexcept {
    return splitmix(splitmix(seed ^ splitmix(a)) ^ (b * 0xD1B54A32D192ED03ull));
}
// A sequential stream.
struct rng {
    std::uint64_t state;
    explicit rng(std::uint64_t seed) : state(splitmix(seed)) {}
    std::uint64_t next() noexcept { return splitmix(state += 0x9E3779B97F4A7C15ull); }
    std::uint64_t below(std::uint64_t n) noexcept { return next() % n; }
};

// ---- counters -------------------------------------------------------------------

struct counters {
    std::int64_t minflt = 0, majflt = 0;
    std::int64_t read_bytes = 0, write_bytes = 0;  // storage I/O caused (/proc/self/io)
    std::int64_t syncs = 0;                        // fsync + fdatasync + msync + sync_file_range
    std::map<std::string, std::int64_t> extra;     // system-specific (steppe: faults, pages committed, ...)

    static counters now(const std::map<std::string, std::int64_t>& extra = {}) {
        counters c;
        rusage u{};
        ::getrusage(RUSAGE_SELF, &u);
        c.minflt = u.ru_minflt;
        c.majflt = u.ru_majflt;
        std::ifstream io("/proc/self/io");
        std::string key;
        std::int64_t value;
        while (io >> key >> value) {
            if (key == "read_bytes:") c.read_bytes = value;
            if (key == "write_bytes:") c.write_bytes = value;
        }
        c.syncs = static_cast<std::int64_t>(current_syncs().total());
        c.extra = extra;
        return c;
    }
    counters operator-(const counters& o) const {
        counters d;
        d.minflt = minflt - o.minflt;
        d.majflt = majflt - o.majflt;
        d.read_bytes = read_bytes - o.read_bytes;
        d.write_bytes = write_bytes - o.write_bytes;
        d.syncs = syncs - o.syncs;
        for (const auto& [k, v] : extra) {
            auto it = o.extra.find(k);
            d.extra[k] = v - (it == o.extra.end() ? 0 : it->second);
        }
        return d;
    }
    counters& operator+=(const counters& o) {
        minflt += o.minflt;
        majflt += o.majflt;
        read_bytes += o.read_bytes;
        write_bytes += o.write_bytes;
        syncs += o.syncs;
        for (const auto& [k, v] : o.extra) extra[k] += v;
        return *this;
    }
};

inline std::int64_t peak_rss_kib() {
    rusage u{};
    ::getrusage(RUSAGE_SELF, &u);
    return u.ru_maxrss;
}

// Apparent size and allocated bytes of a file (0, 0 if absent).
inline std::pair<std::int64_t, std::int64_t> file_size(const std::string& path) {
    struct stat st{};
    if (::stat(path.c_str(), &st) != 0) return {0, 0};
    return {st.st_size, static_cast<std::int64_t>(st.st_blocks) * 512};
}

// ---- JSON ---------------------------------------------------------------------------

class json {
public:
    using object = std::vector<std::pair<std::string, json>>;
    using array = std::vector<json>;
    json() : v_(nullptr) {}
    json(std::nullptr_t) : v_(nullptr) {}
    json(bool b) : v_(b) {}
    json(int i) : v_(static_cast<std::int64_t>(i)) {}
    json(long i) : v_(static_cast<std::int64_t>(i)) {}
    json(long long i) : v_(static_cast<std::int64_t>(i)) {}
    json(unsigned i) : v_(static_cast<std::int64_t>(i)) {}
    json(unsigned long i) : v_(static_cast<std::int64_t>(i)) {}
    json(unsigned long long i) : v_(static_cast<std::int64_t>(i)) {}
    json(double d) : v_(d) {}
    json(const char* s) : v_(std::string(s)) {}
    json(std::string s) : v_(std::move(s)) {}
    json(array a) : v_(std::move(a)) {}
    json(object o) : v_(std::move(o)) {}
    template <class T>
    static json list(const std::vector<T>& v) {
        array a;
        for (const auto& x : v) a.emplace_back(x);
        return a;
    }
    // Adds a member (this must be an object).
    json& set(const std::string& key, json value) {
        if (std::holds_alternative<std::nullptr_t>(v_)) v_ = object{};
        std::get<object>(v_).emplace_back(key, std::move(value));
        return *this;
    }
    std::string dump() const {
        std::string out;
        write(out);
        return out;
    }

private:
    void write(std::string& out) const {
        if (std::holds_alternative<std::nullptr_t>(v_)) out += "null";
        else if (auto b = std::get_if<bool>(&v_)) out += *b ? "true" : "false";
        else if (auto i = std::get_if<std::int64_t>(&v_)) out += std::to_string(*i);
        else if (auto d = std::get_if<double>(&v_)) {
            char buf[32];
            std::snprintf(buf, sizeof buf, "%.6g", *d);
            out += buf;
        } else if (auto s = std::get_if<std::string>(&v_)) {
            out += '"';
            for (char c : *s) {
                if (c == '"' || c == '\\') out += '\\', out += c;
                else if (static_cast<unsigned char>(c) < 0x20) {
                    char buf[8];
                    std::snprintf(buf, sizeof buf, "\\u%04x", c);
                    out += buf;
                } else out += c;
            }
            out += '"';
        } else if (auto a = std::get_if<array>(&v_)) {
            out += '[';
            for (std::size_t k = 0; k < a->size(); ++k) {
                if (k) out += ',';
                (*a)[k].write(out);
            }
            out += ']';
        } else if (auto o = std::get_if<object>(&v_)) {
            out += '{';
            for (std::size_t k = 0; k < o->size(); ++k) {
                if (k) out += ',';
                json((*o)[k].first).write(out);
                out += ':';
                (*o)[k].second.write(out);
            }
            out += '}';
        }
    }
    std::variant<std::nullptr_t, bool, std::int64_t, double, std::string, array, object> v_;
};

// {"file_bytes", "file_allocated_bytes", "files": {name: [size, allocated]}}
inline json files_json(const std::vector<std::string>& files) {
    std::int64_t size = 0, alloc = 0;
    json per;
    for (const auto& f : files) {
        auto [s, a] = file_size(f);
        if (s == 0 && a == 0) continue;
        size += s;
        alloc += a;
        per.set(f.substr(f.find_last_of('/') + 1), json(json::array{json(s), json(a)}));
    }
    json j;
    j.set("file_bytes", size).set("file_allocated_bytes", alloc).set("files", per);
    return j;
}

inline json to_json(const counters& c) {
    json j;
    j.set("minflt", c.minflt).set("majflt", c.majflt).set("read_bytes", c.read_bytes);
    j.set("write_bytes", c.write_bytes).set("syncs", c.syncs);
    for (const auto& [k, v] : c.extra) j.set(k, v);
    return j;
}

// ---- statistics ------------------------------------------------------------------

inline double median(std::vector<double> v) {
    if (v.empty()) return 0;
    std::sort(v.begin(), v.end());
    std::size_t n = v.size();
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}
struct line_fit {
    double a = 0, b = 0;  // y = a + b·x
};
inline line_fit fit_line(const std::vector<double>& x, const std::vector<double>& y) {
    double n = static_cast<double>(x.size()), sx = 0, sy = 0, sxx = 0, sxy = 0;
    for (std::size_t i = 0; i < x.size(); ++i) sx += x[i], sy += y[i], sxx += x[i] * x[i], sxy += x[i] * y[i];
    double den = n * sxx - sx * sx;
    if (den == 0) return {};
    double b = (n * sxy - sx * sy) / den;
    return {(sy - b * sx) / n, b};
}

// ---- progress -------------------------------------------------------------------

// Prints "what: k/n (p %)" to stderr at most every half second.
class progress {
public:
    progress(std::string what, std::uint64_t total) : what_(std::move(what)), total_(total) {}
    void operator()(std::uint64_t done) {
        if (!::isatty(2) && !std::getenv("BENCH_PROGRESS")) return;
        auto now = clock_type::now();
        if (done != total_ && now - last_ < std::chrono::milliseconds(500)) return;
        last_ = now;
        std::fprintf(stderr, "\r  %s: %" PRIu64 "/%" PRIu64 " (%.0f %%)%s", what_.c_str(), done, total_,
                     100.0 * static_cast<double>(done) / static_cast<double>(total_ ? total_ : 1),
                     done == total_ ? "\n" : "");
    }

private:
    std::string what_;
    std::uint64_t total_;
    clock_type::time_point last_{};
};

// ---- arguments --------------------------------------------------------------------

// --key value pairs and bare --flags, after a command word.
struct args {
    std::string command;
    std::map<std::string, std::string> values;
    args(int argc, char** argv) {
        if (argc > 1) command = argv[1];
        for (int i = 2; i < argc; ++i) {
            std::string a = argv[i];
            if (a.rfind("--", 0) != 0) fail("unexpected argument " + a);
            if (i + 1 < argc && std::string(argv[i + 1]).rfind("--", 0) != 0) values[a.substr(2)] = argv[++i];
            else values[a.substr(2)] = "1";
        }
    }
    std::string get(const std::string& k, const std::string& dflt = "") const {
        auto it = values.find(k);
        return it == values.end() ? dflt : it->second;
    }
    long num(const std::string& k, long dflt) const {
        auto it = values.find(k);
        return it == values.end() ? dflt : std::atol(it->second.c_str());
    }
    bool flag(const std::string& k) const { return values.count(k) != 0; }
};

// ---- re-exec with PMEM_IS_PMEM_FORCE --------------------------------------------------

// libpmem reads PMEM_IS_PMEM_FORCE when it loads, so a process that must run
// with (or without) it re-executes itself with the environment set.
inline void ensure_env(const char* name, const char* value, char** argv) {
    const char* now = std::getenv(name);
    bool want = value != nullptr;
    bool ok = want ? (now && std::strcmp(now, value) == 0) : now == nullptr;
    if (ok) return;
    if (want) ::setenv(name, value, 1);
    else ::unsetenv(name);
    ::execv("/proc/self/exe", argv);
    fail(std::string("execv /proc/self/exe: ") + std::strerror(errno));
}

// ---- the cold / warm / hot protocol -----------------------------------------------------

// One operation run the OO1 way: iteration 0 cold (the first touch in a fresh
// process, after the driver dropped the OS caches), iterations 1..warm with
// new inputs (warm: caches filling), then `hot` repeats of the last warm
// input (everything resident) and Hosking's slope: the time of k back-to-back
// repeats for k = 1, 2, 4, ..., slope_max, fitted by least squares.
//
// `run(seed_index)` performs the operation once and returns its result
// (visit count and checksum) for the cross-system check. `pair` (optional)
// runs the same operation on the transient copy: hot iterations then
// alternate system and transient in this one process, so the hot ratio is
// robust against machine noise.
struct op_result {
    std::int64_t count = 0;
    std::int64_t sum = 0;
    friend bool operator==(const op_result&, const op_result&) = default;
};

struct series_config {
    int warm = 9;
    int hot = 10;
    int slope_max = 64;   // k = 1, 2, 4, ... slope_max
    int slope_passes = 3;
    bool has_hot = true;  // updates (insert) have no hot phase
    double budget_ms = 0; // > 0: no further warm iteration once the series took this long
};

struct series_result {
    std::vector<double> cold_ms, warm_ms, hot_ms, pair_hot_ms;
    std::vector<op_result> results;  // per iteration (cold, warm...)
    op_result hot_result;
    line_fit slope, pair_slope;
    std::vector<double> slope_x, slope_y, pair_slope_y;
    counters cold_c, warm_c, hot_c;
    std::vector<json> iteration_extra;  // per iteration, what run() reported beside the time
    std::vector<counters> iteration_c;  // per iteration (cold, warm...): its counters (the warm-up curve)
    std::int64_t peak_rss_before_hot = 0;
};

using extra_fn = std::function<std::map<std::string, std::int64_t>()>;

inline series_result run_series(const series_config& cfg, const std::function<op_result(int)>& run,
                                const std::function<op_result(int)>& pair, const extra_fn& extra,
                                const std::function<void()>& before_hot = {},
                                const std::function<void(int)>& prepare = {}) {
    series_result r;
    auto snap = [&] { return counters::now(extra ? extra() : std::map<std::string, std::int64_t>{}); };
    auto start = clock_type::now();
    for (int i = 0; i <= cfg.warm; ++i) {
        if (i >= 1 && cfg.budget_ms > 0 && ms_since(start) > cfg.budget_ms) break;  // a slow system: fewer samples
        if (prepare) prepare(i);  // untimed set-up of iteration i (OO7 delete: the insert it deletes)
        counters before = snap();
        auto t = clock_type::now();
        op_result res = run(i);
        double ms = ms_since(t);
        counters d = snap() - before;
        (i == 0 ? r.cold_ms : r.warm_ms).push_back(ms);
        r.iteration_c.push_back(d);
        if (i == 0) r.cold_c = d;
        else r.warm_c += d;
        r.results.push_back(res);
    }
    r.peak_rss_before_hot = peak_rss_kib();
    if (!cfg.has_hot) return r;
    if (before_hot) before_hot();  // e.g. build the transient copy, untimed
    int last = static_cast<int>(r.results.size()) - 1;
    counters before = snap();
    for (int h = 0; h < cfg.hot; ++h) {
        auto t = clock_type::now();
        op_result res = run(last);
        r.hot_ms.push_back(ms_since(t));
        check(res == r.results.back(), "a hot repeat gave a different result than the warm run it repeats");
        r.hot_result = res;
        if (pair) {
            t = clock_type::now();
            op_result pres = pair(last);
            r.pair_hot_ms.push_back(ms_since(t));
            check(pres == res, "the transient copy in this process gave a different result than the system");
        }
    }
    r.hot_c = snap() - before;
    // Hosking's slope, system and transient copy alternated at every k; the
    // fit uses each k's fastest pass (the passes differ only by machine noise).
    std::map<int, double> best, pair_best;
    for (int pass = 0; pass < cfg.slope_passes; ++pass)
        for (int k = 1; k <= cfg.slope_max; k *= 2) {
            auto t = clock_type::now();
            for (int j = 0; j < k; ++j) run(last);
            double y = ms_since(t);
            r.slope_x.push_back(k);
            r.slope_y.push_back(y);
            best[k] = pass ? std::min(best[k], y) : y;
            if (pair) {
                t = clock_type::now();
                for (int j = 0; j < k; ++j) pair(last);
                double p = ms_since(t);
                r.pair_slope_y.push_back(p);
                pair_best[k] = pass ? std::min(pair_best[k], p) : p;
            }
        }
    std::vector<double> xs, ys, ps;
    for (const auto& [k, y] : best) {
        xs.push_back(k);
        ys.push_back(y);
        if (pair) ps.push_back(pair_best[k]);
    }
    r.slope = fit_line(xs, ys);
    if (pair) r.pair_slope = fit_line(xs, ps);
    return r;
}

inline json to_json(const op_result& r) {
    json j;
    j.set("count", r.count).set("sum", r.sum);
    return j;
}

inline json to_json(const series_result& r) {
    json j;
    j.set("cold_ms", json::list(r.cold_ms)).set("warm_ms", json::list(r.warm_ms));
    j.set("hot_ms", json::list(r.hot_ms));
    json::array res;
    for (const auto& x : r.results) res.push_back(to_json(x));
    j.set("results", res);
    j.set("counters", json(json::object{{"cold", to_json(r.cold_c)}, {"warm", to_json(r.warm_c)},
                                         {"hot", to_json(r.hot_c)}}));
    if (!r.hot_ms.empty()) {
        j.set("hot_slope_ms", r.slope.b).set("hot_intercept_ms", r.slope.a);
        j.set("slope_k", json::list(r.slope_x)).set("slope_ms", json::list(r.slope_y));
    }
    if (!r.pair_hot_ms.empty()) {
        j.set("pair_transient_hot_ms", json::list(r.pair_hot_ms));
        j.set("pair_transient_slope_ms", r.pair_slope.b);
        j.set("pair_transient_slope_samples", json::list(r.pair_slope_y));
    }
    if (!r.iteration_extra.empty()) j.set("iteration_extra", json::array(r.iteration_extra));
    json::array per;
    for (const auto& c : r.iteration_c) per.push_back(to_json(c));
    j.set("iteration_counters", per);
    j.set("peak_rss_kib", r.peak_rss_before_hot);
    return j;
}

// ---- the null procedure (OO1 and OO7) ----

struct sink_t {
    std::int64_t count = 0;
    std::int64_t sum = 0;
};
inline sink_t g_sink;

// Out of line, as OO1 asks: a call per visited part with x, y and type.
[[gnu::noinline]] inline void null_proc(std::int32_t x, std::int32_t y, const char* type) {
    ++g_sink.count;
    g_sink.sum += x + 3 * static_cast<std::int64_t>(y) + static_cast<unsigned char>(type[9]);
}

// open_options::log_diffs for both engines' stores (a driver's
// `--log-diffs off`: whole pages logged; bench/oo/harness/hosking95.py).
inline bool& steppe_log_diffs() {
    static bool on = true;
    return on;
}

}  // namespace bench
