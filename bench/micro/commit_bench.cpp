// commit_bench — steppe's durable commit against the raw cost of the same
// bytes and against LMDB's durable commit. Every case runs three (or four)
// variants alternated repetition by repetition, so machine and disk noise hit
// all of them alike:
//
//   commit_1_fresh     1 page, store fresh, log appending    latency    raw 4 KiB overwrite + fdatasync
//   commit_1           1 page, log reused after checkpoint   latency    raw 4 KiB overwrite + fdatasync
//   commit_16          16 distinct pages                     latency    raw sequential write + fdatasync
//   commit_256         256 distinct pages                    latency    raw sequential write + fdatasync
//   commit_10000       10,000 distinct pages                 MB/s       raw sequential write + fdatasync
//
// and beside each, LMDB: one write transaction putting the same number of
// 4 KiB values (key = page number, MDB_INTEGERKEY) committed with
// mdb_txn_commit under the default sync flags, MDB_WRITEMAP off.
//
// Steppe runs with durable = true and automatic checkpoints off; the bench
// checkpoints between repetitions, outside the timed region, whenever the next
// commit would extend the log past its current size (so "log reused" cases
// overwrite the log in place, as a store does in steady state), and reports
// the checkpoint time separately. commit_1_fresh instead measures a new store
// whose log grows with every commit; its extra "raw append" variant is the
// raw cost of that (4 KiB appended + fdatasync).
//
// Usage: commit_bench [--dir D] [--json FILE] [--quick] [--keep] [--only CASE]...
//   --dir D    where to create the bench's files (a fresh subdirectory of D;
//              default /var/tmp); tmpfs and ramfs are refused
//   --json F   also write the results as JSON to F
//   --quick    few repetitions (CI; well under 20 s on a normal disk)
//   --keep     leave the files behind
//   --only C   run only case C (repeatable), e.g. --only commit_10000
//   --whole-pages  steppe logs every page whole (storage::options::log_diffs
//              off; this bench's pages are random, so a difference never
//              fits, and the default pays only the look at the main file's copy)
#include <fcntl.h>
#include <lmdb.h>
#include <steppe/error.hpp>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <numeric>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "storage/storage.hpp"
#include "storage/wal_format.hpp"

namespace {

namespace st = steppe::storage;
using clock_type = std::chrono::steady_clock;

constexpr std::size_t kPage = st::page_size;
constexpr std::uint64_t kPageSpace = 10'000;  // page numbers used: [0, kPageSpace)

[[noreturn]] void die(const std::string& what) {
    std::fprintf(stderr, "commit_bench: %s\n", what.c_str());
    std::exit(2);
}
[[noreturn]] void die_errno(const char* call, const std::string& path) {
    die(std::string(call) + " failed on " + path + ": " + std::strerror(errno));
}

// Settings

struct settings {
    std::string dir = "/var/tmp";
    std::string json;
    bool quick = false;
    bool keep = false;
    bool whole_pages = false;
    std::vector<std::string> only;  // case names; empty = all
};

settings parse_args(int argc, char** argv) {
    settings s;
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i];
        auto value = [&]() -> std::string {
            if (i + 1 >= argc) die(a + " needs a value");
            return argv[++i];
        };
        if (a == "--dir") s.dir = value();
        else if (a == "--json") s.json = value();
        else if (a == "--quick") s.quick = true;
        else if (a == "--keep") s.keep = true;
        else if (a == "--whole-pages") s.whole_pages = true;
        else if (a == "--only") s.only.push_back(value());
        else if (a == "--help" || a == "-h") {
            std::puts("usage: commit_bench [--dir D] [--json FILE] [--quick] [--keep] [--whole-pages] [--only CASE]...");
            std::exit(0);
        } else {
            die("unknown argument " + a + " (try --help)");
        }
    }
    return s;
}

// The bench must measure a disk: refuse memory file systems.
std::string file_system_of(const std::string& dir) {
    struct statfs fs;
    if (::statfs(dir.c_str(), &fs) != 0) die_errno("statfs", dir);
    auto type = static_cast<unsigned long>(fs.f_type);
    switch (type) {
    case 0x01021994: die(dir + " is on tmpfs: the bench needs a disk file system (use --dir)");
    case 0x858458f6: die(dir + " is on ramfs: the bench needs a disk file system (use --dir)");
    case 0xEF53: return "ext2/3/4";
    case 0x58465342: return "xfs";
    case 0x9123683E: return "btrfs";
    case 0x2FC12FC1: return "zfs";
    case 0x794c7630: return "overlayfs";
    case 0xF2F52010: return "f2fs";
    default: {
        char buf[32];
        std::snprintf(buf, sizeof buf, "0x%lx", type);
        return buf;
    }
    }
}

// Statistics

double percentile(std::vector<double> v, double p) {
    if (v.empty()) return 0;
    std::sort(v.begin(), v.end());
    double at = p * static_cast<double>(v.size() - 1);
    auto lo = static_cast<std::size_t>(std::floor(at));
    auto hi = std::min(lo + 1, v.size() - 1);
    return v[lo] + (v[hi] - v[lo]) * (at - static_cast<double>(lo));
}

struct summary {
    double median_us = 0, p90_us = 0, min_us = 0, max_us = 0;
    std::size_t samples = 0;
};

summary summarize(const std::vector<double>& us) {
    summary s;
    s.samples = us.size();
    if (us.empty()) return s;
    s.median_us = percentile(us, 0.5);
    s.p90_us = percentile(us, 0.9);
    s.min_us = *std::min_element(us.begin(), us.end());
    s.max_us = *std::max_element(us.begin(), us.end());
    return s;
}

// Raw file: the cost of the bytes alone

class raw_file {
public:
    explicit raw_file(std::string path) : path_(std::move(path)) {
        fd_ = ::open(path_.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        if (fd_ < 0) die_errno("open", path_);
    }
    ~raw_file() { ::close(fd_); }
    raw_file(const raw_file&) = delete;
    raw_file& operator=(const raw_file&) = delete;

    // Writes `bytes` of data (not fallocate: unwritten extents would cost a
    // metadata update on first write) and makes them durable.
    void preallocate(std::uint64_t bytes) {
        std::vector<std::byte> chunk(1 << 20, std::byte{0x5a});
        for (std::uint64_t at = 0; at < bytes; at += chunk.size())
            write_at(at, chunk.data(), std::min<std::uint64_t>(chunk.size(), bytes - at));
        if (::fsync(fd_) != 0) die_errno("fsync", path_);
        size_ = bytes;
    }
    void truncate() {
        if (::ftruncate(fd_, 0) != 0 || ::fsync(fd_) != 0) die_errno("ftruncate", path_);
        size_ = 0;
    }
    void write_at(std::uint64_t offset, const std::byte* data, std::size_t n) {
        for (std::size_t done = 0; done < n;) {
            ssize_t w = ::pwrite(fd_, data + done, n - done, static_cast<off_t>(offset + done));
            if (w < 0) {
                if (errno == EINTR) continue;
                die_errno("pwrite", path_);
            }
            done += static_cast<std::size_t>(w);
        }
    }
    void sync() {
        if (::fdatasync(fd_) != 0) die_errno("fdatasync", path_);
    }
    std::uint64_t size() const { return size_; }

private:
    std::string path_;
    int fd_ = -1;
    std::uint64_t size_ = 0;
};

// LMDB

void check_mdb(int rc, const char* call) {
    if (rc != MDB_SUCCESS) die(std::string(call) + ": " + mdb_strerror(rc));
}

class lmdb_store {
public:
    explicit lmdb_store(const std::string& dir) {
        std::filesystem::create_directories(dir);
        check_mdb(mdb_env_create(&env_), "mdb_env_create");
        check_mdb(mdb_env_set_mapsize(env_, std::size_t{4} << 30), "mdb_env_set_mapsize");
        check_mdb(mdb_env_open(env_, dir.c_str(), 0, 0600), "mdb_env_open");  // default sync, no WRITEMAP
        MDB_txn* txn = nullptr;
        check_mdb(mdb_txn_begin(env_, nullptr, 0, &txn), "mdb_txn_begin");
        check_mdb(mdb_dbi_open(txn, nullptr, MDB_INTEGERKEY, &dbi_), "mdb_dbi_open");
        check_mdb(mdb_txn_commit(txn), "mdb_txn_commit");
    }
    ~lmdb_store() { mdb_env_close(env_); }
    lmdb_store(const lmdb_store&) = delete;
    lmdb_store& operator=(const lmdb_store&) = delete;

    // One durable transaction writing pages[i] under key keys[i].
    void commit(const std::vector<std::uint64_t>& keys, const std::byte* pages) {
        MDB_txn* txn = nullptr;
        check_mdb(mdb_txn_begin(env_, nullptr, 0, &txn), "mdb_txn_begin");
        for (std::size_t i = 0; i < keys.size(); ++i) {
            std::uint64_t k = keys[i];  // native-endian integer key; the size must be sizeof(size_t)
            MDB_val key{sizeof k, &k};
            MDB_val val{kPage, const_cast<std::byte*>(pages + i * kPage)};
            int rc = mdb_put(txn, dbi_, &key, &val, 0);
            if (rc != MDB_SUCCESS) {
                mdb_txn_abort(txn);
                check_mdb(rc, "mdb_put");
            }
        }
        check_mdb(mdb_txn_commit(txn), "mdb_txn_commit");
    }

private:
    MDB_env* env_ = nullptr;
    MDB_dbi dbi_ = 0;
};

// Steppe

class steppe_store {
public:
    steppe_store(const std::string& path, bool log_diffs) {
        st::options o;
        o.durable = true;
        o.log_diffs = log_diffs;
        o.checkpoint_bytes = std::uint64_t{1} << 50;  // the bench checkpoints, untimed
        store_ = st::storage::open(path, o);
    }

    void commit(const std::vector<st::page_image>& images, std::uint64_t stamp) {
        st::meta_bytes meta{};
        std::memcpy(meta.data(), &stamp, sizeof stamp);
        store_->commit(images, meta);
    }

    // Checkpoints if a commit of `pages` pages would extend the log beyond its
    // current size; returns the seconds spent (0 if none was needed).
    double make_room(std::size_t pages) {
        auto i = store_->describe();
        std::uint64_t need = st::wal_frames_offset + i.wal_bytes_used + pages * st::page_frame_size +
                             st::commit_frame_size;
        if (i.wal_commits == 0 || need <= i.wal_file_bytes) return 0;
        return checkpoint();
    }
    double checkpoint() {
        auto t0 = clock_type::now();
        store_->checkpoint();
        ++checkpoints_;
        double s = std::chrono::duration<double>(clock_type::now() - t0).count();
        checkpoint_seconds_ += s;
        return s;
    }
    st::info describe() const { return store_->describe(); }
    std::uint64_t checkpoints() const { return checkpoints_; }
    double checkpoint_seconds() const { return checkpoint_seconds_; }

private:
    std::unique_ptr<st::storage> store_;
    std::uint64_t checkpoints_ = 0;
    double checkpoint_seconds_ = 0;
};

// The workload: n distinct pages per commit

struct batch {
    std::size_t n;
    std::vector<std::byte> data;             // n pages, back to back
    std::vector<std::uint64_t> pages;        // their page numbers (= LMDB keys)
    std::vector<st::page_image> images;

    explicit batch(std::size_t count) : n(count), data(count * kPage), pages(count), images(count) {
        std::uint64_t x = 0x9E3779B97F4A7C15ull;
        for (auto& b : data) {  // incompressible content
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            b = static_cast<std::byte>(x);
        }
    }
    // Repetition `rep` writes pages rep*n .. rep*n+n-1 (mod the page space),
    // each stamped with (rep, page) and every word of it changed, so every
    // commit carries a whole page of new bytes (a page that differs from its
    // last version in a few words is logged as those words: not what this
    // bench measures).
    void prepare(std::uint64_t rep) {
        for (std::size_t i = 0; i < n; ++i) {
            std::uint64_t p = n >= kPageSpace ? i : (rep * n + i) % kPageSpace;
            pages[i] = p;
            std::byte* page = data.data() + i * kPage;
            images[i] = {p, page};
            const std::uint64_t mix = (rep + 1) * 0x9E3779B97F4A7C15ull;
            for (std::size_t w = 2; w < kPage / 8; ++w) {
                std::uint64_t v;
                std::memcpy(&v, page + w * 8, 8);
                v ^= mix;
                std::memcpy(page + w * 8, &v, 8);
            }
            std::memcpy(page, &rep, sizeof rep);
            std::memcpy(page + 8, &p, sizeof p);
        }
    }
};

struct variant {
    std::string name;
    std::function<void(std::uint64_t rep)> prepare;  // untimed
    std::function<void(std::uint64_t rep)> run;      // timed
    std::vector<double> us;
};

// Runs `warmup` untimed then `reps` timed repetitions of every variant,
// rotating their order each repetition.
void alternate(std::vector<variant>& vs, batch& b, int warmup, int reps, std::uint64_t& rep_counter) {
    for (int r = 0; r < warmup + reps; ++r) {
        std::uint64_t rep = rep_counter++;
        b.prepare(rep);
        for (auto& v : vs)  // before any timed run, so e.g. a checkpoint's disk traffic hits all variants alike
            if (v.prepare) v.prepare(rep);
        for (std::size_t k = 0; k < vs.size(); ++k) {
            auto& v = vs[(k + static_cast<std::size_t>(r)) % vs.size()];
            auto t0 = clock_type::now();
            v.run(rep);
            double us = std::chrono::duration<double, std::micro>(clock_type::now() - t0).count();
            if (r >= warmup) v.us.push_back(us);
        }
    }
}

// Results

struct result {
    std::string name, what, baseline, goal;
    std::size_t pages = 0;
    int reps = 0;
    bool throughput = false;  // report MB/s instead of latency
    std::vector<std::pair<std::string, summary>> variants;
    // Latency: steppe time / other time; throughput: steppe rate / other rate.
    // ratio_*: of the medians. paired_*: the median over repetitions of the
    // per-repetition ratio (the variants of one repetition ran back to back,
    // so they saw the same disk weather).
    double ratio_raw = 0, ratio_lmdb = 0;
    double paired_raw = 0, paired_lmdb = 0;
    int goal_met = -1;                     // -1 = no goal
    std::string note;
};

double mbps(std::size_t pages, double us) { return us > 0 ? static_cast<double>(pages * kPage) / us : 0; }

const summary& get(const result& r, const std::string& name) {
    for (auto& [n, s] : r.variants)
        if (n == name) return s;
    throw std::logic_error("no variant " + name);
}

std::string fmt(const char* f, double v) {
    char buf[64];
    std::snprintf(buf, sizeof buf, f, v);
    return buf;
}

std::string cell(const result& r, const summary& s) {
    if (r.throughput) return fmt("%.0f MB/s", mbps(r.pages, s.median_us));
    return fmt("%.0f", s.median_us) + " / " + fmt("%.0f", s.p90_us) + " us";
}

void print_table(const std::vector<result>& results) {
    std::printf("\n%-14s %6s %5s  %-22s %-22s %-22s %9s %9s  %s\n", "case", "pages", "reps", "steppe",
                "raw", "LMDB", "st/raw", "st/LMDB", "goal");
    std::printf("%-14s %6s %5s  %-22s %-22s %-22s %9s %9s  %s\n", "", "", "", "(median / p90)", "", "", "", "", "");
    for (auto& r : results) {
        std::string ratio_raw = r.throughput ? fmt("%.0f%%", 100 * r.ratio_raw) : fmt("%.2fx", r.ratio_raw);
        std::string ratio_lmdb = r.throughput ? fmt("%.0f%%", 100 * r.ratio_lmdb) : fmt("%.2fx", r.ratio_lmdb);
        std::string goal = r.goal.empty() ? "-" : r.goal + (r.goal_met == 1 ? "  MET" : "  MISSED");
        std::printf("%-14s %6zu %5d  %-22s %-22s %-22s %9s %9s  %s\n", r.name.c_str(), r.pages, r.reps,
                    cell(r, get(r, "steppe")).c_str(), cell(r, get(r, "raw")).c_str(),
                    cell(r, get(r, "lmdb")).c_str(), ratio_raw.c_str(), ratio_lmdb.c_str(), goal.c_str());
    }
    std::printf("\n");
    for (auto& r : results) {
        std::printf("  %-14s %s; raw = %s\n", r.name.c_str(), r.what.c_str(), r.baseline.c_str());
        std::string unit = r.throughput ? "rate" : "time";
        std::printf("  %-14s paired ratios (median of per-repetition steppe/other %s): raw %.2f, LMDB %.2f\n", "",
                    unit.c_str(), r.paired_raw, r.paired_lmdb);
        if (!r.note.empty()) std::printf("  %-14s %s\n", "", r.note.c_str());
    }
    std::printf("  st/raw, st/LMDB: ratio of the medians; latency rows: steppe time / other time, throughput rows:\n"
                "  steppe rate / other rate (MB/s = 4096 * pages / median time, 10^6 bytes).\n");
}

std::string json_escape(const std::string& s) {
    std::string out;
    for (char c : s) {
        if (c == '"' || c == '\\') out += '\\';
        if (static_cast<unsigned char>(c) < 0x20) {
            char buf[8];
            std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(static_cast<unsigned char>(c)));
            out += buf;
            continue;
        }
        out += c;
    }
    return out;
}

void write_json(const std::string& path, const settings& s, const std::string& dir, const std::string& fs,
                const std::vector<result>& results, double seconds) {
    std::ostringstream o;
    o << "{\n  \"bench\": \"commit_bench\",\n  \"dir\": \"" << json_escape(dir) << "\",\n  \"file_system\": \""
      << json_escape(fs) << "\",\n  \"quick\": " << (s.quick ? "true" : "false") << ",\n  \"seconds\": " << seconds
      << ",\n  \"cases\": [\n";
    for (std::size_t i = 0; i < results.size(); ++i) {
        auto& r = results[i];
        o << "    {\"name\": \"" << r.name << "\", \"pages\": " << r.pages << ", \"reps\": " << r.reps
          << ", \"metric\": \"" << (r.throughput ? "throughput" : "latency") << "\", \"variants\": {";
        for (std::size_t k = 0; k < r.variants.size(); ++k) {
            auto& [name, v] = r.variants[k];
            o << (k ? ", " : "") << "\"" << name << "\": {\"median_us\": " << v.median_us << ", \"p90_us\": " << v.p90_us
              << ", \"min_us\": " << v.min_us << ", \"max_us\": " << v.max_us << ", \"samples\": " << v.samples;
            if (r.throughput) o << ", \"median_mb_per_s\": " << mbps(r.pages, v.median_us);
            o << "}";
        }
        o << "}, \"steppe_vs_raw\": " << r.ratio_raw << ", \"steppe_vs_lmdb\": " << r.ratio_lmdb
          << ", \"steppe_vs_raw_paired\": " << r.paired_raw << ", \"steppe_vs_lmdb_paired\": " << r.paired_lmdb;
        if (!r.goal.empty())
            o << ", \"goal\": \"" << json_escape(r.goal) << "\", \"goal_met\": " << (r.goal_met == 1 ? "true" : "false");
        o << "}" << (i + 1 < results.size() ? "," : "") << "\n";
    }
    o << "  ]\n}\n";
    std::ofstream f(path);
    f << o.str();
    if (!f) die("cannot write " + path);
}

// The cases

struct bench {
    settings cfg;
    std::string dir;
    std::unique_ptr<steppe_store> store;
    std::unique_ptr<lmdb_store> lmdb;
    std::unique_ptr<raw_file> raw, raw_append;
    std::uint64_t rep_counter = 0;
    std::vector<result> results;

    void setup() {
        store = std::make_unique<steppe_store>(dir + "/steppe.db", !cfg.whole_pages);
        lmdb = std::make_unique<lmdb_store>(dir + "/lmdb");
        raw = std::make_unique<raw_file>(dir + "/raw.dat");
        raw->preallocate((kPageSpace + 256) * kPage);
        raw_append = std::make_unique<raw_file>(dir + "/raw_append.dat");
        // LMDB holds every key before timing starts, so each timed put replaces a value.
        batch all(kPageSpace);
        all.prepare(rep_counter++);
        lmdb->commit(all.pages, all.data.data());
        lmdb->commit(all.pages, all.data.data());
    }

    variant steppe_variant(batch& b, bool reuse_log) {
        variant v{"steppe", {}, {}, {}};
        if (reuse_log) v.prepare = [this, &b](std::uint64_t) { store->make_room(b.n); };
        v.run = [this, &b](std::uint64_t rep) { store->commit(b.images, rep); };
        return v;
    }
    variant lmdb_variant(batch& b) {
        return {"lmdb", {}, [this, &b](std::uint64_t) { lmdb->commit(b.pages, b.data.data()); }, {}};
    }
    // 4 KiB overwritten in place in a preallocated file, then fdatasync.
    variant raw_overwrite_variant(batch& b) {
        return {"raw", {}, [this, &b](std::uint64_t) {
                    raw->write_at(b.pages[0] * kPage, b.data.data(), kPage);
                    raw->sync();
                }, {}};
    }
    // The same bytes written sequentially (overwriting the preallocated file), then fdatasync.
    variant raw_sequential_variant(batch& b) {
        auto cursor = std::make_shared<std::uint64_t>(0);
        return {"raw", {}, [this, &b, cursor](std::uint64_t) {
                    std::size_t bytes = b.n * kPage;
                    if (*cursor + bytes > raw->size()) *cursor = 0;
                    raw->write_at(*cursor, b.data.data(), bytes);
                    raw->sync();
                    *cursor += bytes;
                }, {}};
    }
    // 4 KiB appended to a growing file, then fdatasync (which must also persist the new size).
    variant raw_append_variant(batch& b) {
        auto end = std::make_shared<std::uint64_t>(0);
        return {"raw_append", {}, [this, &b, end](std::uint64_t) {
                    raw_append->write_at(*end, b.data.data(), kPage);
                    raw_append->sync();
                    *end += kPage;
                }, {}};
    }

    result finish(std::string name, std::size_t pages, int reps, bool throughput, std::vector<variant>& vs) {
        result r;
        r.name = std::move(name);
        r.pages = pages;
        r.reps = reps;
        r.throughput = throughput;
        for (auto& v : vs) r.variants.push_back({v.name, summarize(v.us)});
        auto samples = [&](const std::string& n) -> const std::vector<double>& {
            for (auto& v : vs)
                if (v.name == n) return v.us;
            throw std::logic_error("no variant " + n);
        };
        auto paired = [&](const std::string& other) {
            const auto &a = samples("steppe"), &b = samples(other);
            std::vector<double> q;
            for (std::size_t i = 0; i < std::min(a.size(), b.size()); ++i) q.push_back(throughput ? b[i] / a[i] : a[i] / b[i]);
            return percentile(q, 0.5);
        };
        r.paired_raw = paired("raw");
        r.paired_lmdb = paired("lmdb");
        double s = get(r, "steppe").median_us, raw_us = get(r, "raw").median_us, l = get(r, "lmdb").median_us;
        r.ratio_raw = throughput ? raw_us / s : s / raw_us;
        r.ratio_lmdb = throughput ? l / s : s / l;
        return r;
    }

    void one_page(bool fresh, int reps) {
        batch b(1);
        std::vector<variant> vs;
        vs.push_back(steppe_variant(b, !fresh));
        vs.push_back(raw_overwrite_variant(b));
        vs.push_back(lmdb_variant(b));
        if (fresh) {
            raw_append->truncate();
            vs.push_back(raw_append_variant(b));
        }
        auto before = store->describe();
        alternate(vs, b, fresh ? 0 : 5, reps, rep_counter);
        auto after = store->describe();
        result r = finish(fresh ? "commit_1_fresh" : "commit_1", 1, reps, false, vs);
        r.goal = "<= 1.30x raw and < LMDB";
        r.goal_met = r.ratio_raw <= 1.3 && r.ratio_lmdb < 1.0;
        if (fresh) {
            r.what = "1-page commit on a new store: every commit appends to the log (log " +
                     std::to_string(before.wal_file_bytes) + " -> " + std::to_string(after.wal_file_bytes) +
                     " bytes)";
            auto& ra = get(r, "raw_append");
            r.note = "raw 4 KiB append + fdatasync (file grows, like the log): " + fmt("%.0f", ra.median_us) + " / " +
                     fmt("%.0f", ra.p90_us) + " us; steppe / raw append = " +
                     fmt("%.2fx", get(r, "steppe").median_us / ra.median_us);
        } else {
            r.what = "1-page commit, log overwritten in place after a checkpoint";
        }
        r.baseline = "4 KiB pwrite overwriting a preallocated file + fdatasync";
        results.push_back(r);
    }

    void pages_latency(std::size_t n, int reps) {
        batch b(n);
        std::vector<variant> vs;
        vs.push_back(steppe_variant(b, true));
        vs.push_back(raw_sequential_variant(b));
        vs.push_back(lmdb_variant(b));
        alternate(vs, b, 3, reps, rep_counter);
        result r = finish("commit_" + std::to_string(n), n, reps, false, vs);
        r.what = std::to_string(n) + "-page commit, log reused";
        r.baseline = "sequential pwrite of " + std::to_string(n * kPage) + " bytes + fdatasync";
        results.push_back(r);
    }

    void throughput(std::size_t n, int reps) {
        batch b(n);
        std::vector<variant> vs;
        vs.push_back(steppe_variant(b, true));
        vs.push_back(raw_sequential_variant(b));
        vs.push_back(lmdb_variant(b));
        std::uint64_t cp0 = store->checkpoints();
        double cps0 = store->checkpoint_seconds();
        alternate(vs, b, 1, reps, rep_counter);
        result r = finish("commit_" + std::to_string(n), n, reps, true, vs);
        r.what = std::to_string(n) + "-page commit (" + fmt("%.1f", static_cast<double>(n * kPage) / 1e6) +
                 " MB of pages), log reused";
        r.baseline = "one sequential pwrite of the same bytes + fdatasync";
        r.goal = ">= 70% of raw";
        r.goal_met = r.ratio_raw >= 0.70;
        std::uint64_t cps = store->checkpoints() - cp0;
        if (cps > 0)
            r.note = "untimed checkpoints between reps: " + std::to_string(cps) + ", mean " +
                     fmt("%.0f", 1e3 * (store->checkpoint_seconds() - cps0) / static_cast<double>(cps)) + " ms each";
        results.push_back(r);
    }

    bool wanted(const std::string& name) const {
        return cfg.only.empty() || std::find(cfg.only.begin(), cfg.only.end(), name) != cfg.only.end();
    }

    void run() {
        struct plan { int fresh1, reused1, p16, p256, p10k; };
        plan p = cfg.quick ? plan{30, 30, 15, 6, 2} : plan{200, 200, 100, 40, 7};
        if (wanted("commit_1_fresh")) {
            std::fprintf(stderr, "commit_1_fresh...\n");
            one_page(true, p.fresh1);
        }
        // Grow the log to its steady-state size (one 10,000-page commit) and
        // checkpoint, so the following cases overwrite it in place.
        {
            batch all(kPageSpace);
            all.prepare(rep_counter++);
            store->commit(all.images, 0);
            store->checkpoint();
        }
        if (wanted("commit_1")) {
            std::fprintf(stderr, "commit_1...\n");
            one_page(false, p.reused1);
        }
        if (wanted("commit_16")) {
            std::fprintf(stderr, "commit_16...\n");
            pages_latency(16, p.p16);
        }
        if (wanted("commit_256")) {
            std::fprintf(stderr, "commit_256...\n");
            pages_latency(256, p.p256);
        }
        if (wanted("commit_10000")) {
            std::fprintf(stderr, "commit_10000...\n");
            throughput(kPageSpace, p.p10k);
        }
        if (results.empty()) die("no case matches --only");
    }
};

}  // namespace

int main(int argc, char** argv) {
    settings cfg = parse_args(argc, argv);
    std::filesystem::create_directories(cfg.dir);
    std::string fs = file_system_of(cfg.dir);
    std::string templ = (std::filesystem::path(cfg.dir) / "steppe-bench-XXXXXX").string();
    if (!::mkdtemp(templ.data())) die_errno("mkdtemp", templ);

    bench b;
    b.cfg = cfg;
    b.dir = templ;
    auto t0 = clock_type::now();
    int status = 0;
    try {
        b.setup();
        b.run();
    } catch (const steppe::error& e) {
        std::fprintf(stderr, "commit_bench: steppe error: %s\n", e.what());
        status = 1;
    }
    double seconds = std::chrono::duration<double>(clock_type::now() - t0).count();
    b.store.reset();
    b.lmdb.reset();
    b.raw.reset();
    b.raw_append.reset();
    if (!cfg.keep) {
        std::error_code ec;
        std::filesystem::remove_all(templ, ec);
    }
    if (status != 0) return status;

    std::printf("commit_bench: durable commits (fdatasync) on %s (%s)%s, %.1f s\n", templ.c_str(), fs.c_str(),
                cfg.quick ? ", --quick" : "", seconds);
    std::printf("steppe: automatic checkpoints off, checkpoints between reps untimed; LMDB: default sync flags, "
                "no MDB_WRITEMAP, 4 KiB values under integer keys\n");
    print_table(b.results);
    if (!cfg.json.empty()) write_json(cfg.json, cfg, templ, fs, b.results, seconds);
    return 0;
}
