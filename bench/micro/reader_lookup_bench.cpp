// reader_lookup_bench — readers beside the writer, steppe against LMDB, in one
// run (issue 19, "Measure it"): key -> value lookups per second in reader
// processes with and without a writer committing continuously, and the
// writer's commit latency with and without those readers.
//
//   build        N records (key, version, check, payload: 64 bytes), keyed by a
//                scrambled 64-bit key. steppe: a root `Index` holding the last
//                commit's sequence number and a steppe::map<key, Record*>;
//                LMDB: one B-tree (MDB_INTEGERKEY) of 64-byte values plus a
//                "meta" database holding the sequence number.
//   lookup       a reader picks a random record number, finds its key and
//                verifies the record (below). steppe: read_only, store::refresh()
//                every --refresh-ms, then the root fetched again; LMDB: a read
//                transaction, mdb_txn_reset + mdb_txn_renew at the same cadence.
//   commit       the writer updates k random records (version = the commit's
//                sequence number, check and payload recomputed) and the
//                sequence number, and commits durably (steppe: commit()'s
//                fdatasync; LMDB: default sync). Its latency is the whole
//                transaction, from the first lookup to durable.
//
// Verification: every record read must have check == mix(key, version) and a
// matching payload, a version no newer than its snapshot's sequence number and
// no older than what the same reader saw before; the sequence number must
// never go back across refreshes. Any failure is printed and the bench exits 1.
//
// Cells, per system and round: the writer alone (0 readers), then for each
// reader count R: R readers with the writer and R readers without. Systems
// alternate within a round (the first one swaps each round); the table gives
// the median over rounds, and the commit-latency ratio "with R readers / with
// 0 readers" is taken within each round before the median.
//
// Processes: the parent never opens a store; the build, the writer and each
// reader are forked children that open what they use (a steppe store must not
// be open in a process that forks). They meet on a shared anonymous mapping:
// ready flags, a go flag and a stop flag, and their results.
//
// Usage: reader_lookup_bench [--dir D] [--quick] [--records N] [--seconds S]
//          [--rounds K] [--readers 1,2,4] [--k K] [--refresh-ms T] [--keep]
//   --steppe-store: steppe's store at this name instead of a file in D (a
//   new store in PostgreSQL, postgresql://...?store=NEW: issue 20's reader
//   throughput), LMDB's file stays in D.
//   defaults: /var/tmp, 100000 records, 3 s per cell, 3 rounds, readers 1,2,4,
//   k = 8, refresh every 100 ms. --quick: 20000 records, 0.6 s, 1 round,
//   readers 1,2 (well under 20 s).
#include <lmdb.h>
#include <steppe/steppe.hpp>
#include <sys/mman.h>
#include <sys/statfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

namespace {

using clock_type = std::chrono::steady_clock;

struct Record {
    std::uint64_t key;
    std::uint64_t version;
    std::uint64_t check;
    std::uint64_t payload[5];
};
static_assert(sizeof(Record) == 64);

struct Index {
    std::uint64_t seq;  // the sequence number of the last commit
    steppe::map<std::uint64_t, Record*> by_key;
};

// Settings

struct settings {
    std::string dir = "/var/tmp";
    std::string steppe_store;  // --steppe-store: a name storage::open takes (a PostgreSQL URL)
    bool quick = false;
    bool keep = false;
    std::uint64_t records = 100'000;
    double seconds = 3.0;
    int rounds = 3;
    std::vector<int> readers = {1, 2, 4};
    int k = 8;
    int refresh_ms = 100;
    int phase_ms = 250;
};

[[noreturn]] void die(const std::string& what) {
    std::fprintf(stderr, "reader_lookup_bench: %s\n", what.c_str());
    std::exit(2);
}

settings parse_args(int argc, char** argv) {
    settings s;
    bool records_set = false, seconds_set = false, rounds_set = false, readers_set = false, phase_set = false;
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i];
        auto value = [&]() -> std::string {
            if (i + 1 >= argc) die(a + " needs a value");
            return argv[++i];
        };
        if (a == "--dir") s.dir = value();
        else if (a == "--steppe-store") s.steppe_store = value();
        else if (a == "--quick") s.quick = true;
        else if (a == "--keep") s.keep = true;
        else if (a == "--records") s.records = std::stoull(value()), records_set = true;
        else if (a == "--seconds") s.seconds = std::stod(value()), seconds_set = true;
        else if (a == "--rounds") s.rounds = std::stoi(value()), rounds_set = true;
        else if (a == "--k") s.k = std::stoi(value());
        else if (a == "--refresh-ms") s.refresh_ms = std::stoi(value());
        else if (a == "--phase-ms") s.phase_ms = std::stoi(value()), phase_set = true;
        else if (a == "--readers") {
            s.readers.clear();
            std::string v = value();
            for (std::size_t p = 0; p < v.size();) {
                std::size_t q = v.find(',', p);
                if (q == std::string::npos) q = v.size();
                s.readers.push_back(std::stoi(v.substr(p, q - p)));
                p = q + 1;
            }
            readers_set = true;
        } else if (a == "--help" || a == "-h") {
            std::puts("usage: reader_lookup_bench [--dir D] [--quick] [--records N] [--seconds S] [--rounds K]\n"
                      "                           [--readers 1,2,4] [--k K] [--refresh-ms T] [--phase-ms P] [--keep]\n"
                      "                           [--steppe-store postgresql://...?store=NEW]");
            std::exit(0);
        } else {
            die("unknown argument " + a + " (try --help)");
        }
    }
    if (s.quick) {
        if (!records_set) s.records = 20'000;
        if (!seconds_set) s.seconds = 0.6;
        if (!rounds_set) s.rounds = 1;
        if (!readers_set) s.readers = {1, 2};
        if (!phase_set) s.phase_ms = 100;
    }
    for (int r : s.readers)
        if (r < 1 || r > 14) die("--readers: 1 to 14 each");
    if (s.records < 1 || s.k < 1 || s.rounds < 1 || s.refresh_ms < 1 || s.phase_ms < 1)
        die("--records, --k, --rounds, --refresh-ms, --phase-ms: at least 1");
    return s;
}

// Record contents

std::uint64_t mix(std::uint64_t x) {
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}
std::uint64_t key_of(std::uint64_t i) { return mix(i * 2 + 1) | 1; }  // distinct for distinct i (mix is a bijection)

void fill(Record& r, std::uint64_t key, std::uint64_t version) {
    r.key = key;
    r.version = version;
    r.check = mix(key ^ mix(version));
    for (std::uint64_t j = 0; j < 5; ++j) r.payload[j] = r.check + j;
}

// Shared between the parent and its children

struct latency {
    std::uint64_t commits;
    double mean_us, p50_us, p99_us;
};
struct slot {
    std::atomic<int> ready;
    int failed;            // 1 if verification or the system failed
    double seconds;        // measured (a reader: only while not paused)
    std::uint64_t lookups;
    std::uint64_t refreshes;
    double refresh_ms;     // total time in refresh (steppe) or reset + renew (LMDB)
    latency active;        // the writer's commits while readers ran
    latency paused;        // and while they were paused (open but idle)
    char message[240];
};
constexpr int max_slots = 16;
struct shared_area {
    std::atomic<int> go;
    std::atomic<int> stop;
    std::atomic<int> pause;  // readers idle (the parent alternates it in cells with readers and a writer)
    slot slots[max_slots];  // 0: writer, 1..: readers
};

shared_area* shared = nullptr;

void report_failure(slot& s, const std::string& what) {
    if (s.failed) return;
    s.failed = 1;
    std::snprintf(s.message, sizeof s.message, "%s", what.c_str());
}

void wait_for_go() {
    while (!shared->go.load(std::memory_order_acquire)) std::this_thread::sleep_for(std::chrono::microseconds(200));
}
bool stopping() { return shared->stop.load(std::memory_order_relaxed) != 0; }
bool paused() { return shared->pause.load(std::memory_order_relaxed) != 0; }

// A reader waits out a pause; returns the seconds it waited.
double sit_out_pause() {
    if (!paused()) return 0;
    auto t = clock_type::now();
    while (paused() && !stopping()) std::this_thread::sleep_for(std::chrono::microseconds(500));
    return std::chrono::duration<double>(clock_type::now() - t).count();
}

latency summarize(std::vector<double>& us) {
    latency l{};
    l.commits = us.size();
    if (us.empty()) return l;
    std::sort(us.begin(), us.end());
    double sum = 0;
    for (double u : us) sum += u;
    l.mean_us = sum / static_cast<double>(us.size());
    l.p50_us = us[us.size() / 2];
    l.p99_us = us[std::min(us.size() - 1, us.size() * 99 / 100)];
    return l;
}

// The writer's commit latencies, by whether the readers were paused when the
// commit began and ended (a commit that straddles a switch is dropped).
struct latencies {
    std::vector<double> active, idle;
    void add(bool paused_before, double us) {
        if (paused_before != paused()) return;
        (paused_before ? idle : active).push_back(us);
    }
    void store(slot& s, double seconds) {
        s.seconds = seconds;
        s.active = summarize(active);
        s.paused = summarize(idle);
    }
};

// A reader's checks on one record; true if sound.
struct reader_state {
    std::vector<std::uint64_t> last_seen;  // per record: the newest version seen
    std::uint64_t last_seq = 0;
};

bool verify(slot& s, reader_state& st, std::uint64_t i, std::uint64_t key, const Record* r, std::uint64_t seq) {
    std::string bad;
    if (!r) bad = "missing";
    else if (r->key != key) bad = "wrong key";
    else if (r->check != mix(key ^ mix(r->version))) bad = "check does not match version";
    else if (r->payload[4] != r->check + 4 || r->payload[0] != r->check) bad = "payload does not match";
    else if (r->version > seq) bad = "version " + std::to_string(r->version) + " newer than the snapshot's " + std::to_string(seq);
    else if (r->version < st.last_seen[i]) bad = "version " + std::to_string(r->version) + " older than one seen before";
    if (bad.empty()) {
        st.last_seen[i] = r->version;
        return true;
    }
    report_failure(s, "record " + std::to_string(i) + ": " + bad);
    return false;
}

bool verify_seq(slot& s, reader_state& st, std::uint64_t seq) {
    if (seq < st.last_seq) {
        report_failure(s, "snapshot went back: sequence " + std::to_string(seq) + " after " + std::to_string(st.last_seq));
        return false;
    }
    st.last_seq = seq;
    return true;
}

// steppe

void steppe_build(const std::string& path, std::uint64_t n) {
    for (const char* suffix : {"", "-wal", "-shm", "-lock"}) std::filesystem::remove(path + suffix);
    auto store = steppe::store::open(path);
    auto* index = store.root<Index>("index");
    for (std::uint64_t i = 0; i < n; ++i) {
        Record* r = store.make<Record>();
        fill(*r, key_of(i), 0);
        index->by_key.emplace(r->key, r);
    }
    store.commit();
    store.close();
}

// The writer loop both systems share: `transaction(rng)` updates cfg.k
// random records and the sequence number and commits, durably; its latency
// is recorded apart while readers are paused.
template <class Transaction>
void writer_loop(slot& s, Transaction transaction) {
    std::uint64_t rng = mix(static_cast<std::uint64_t>(::getpid()));
    latencies us;
    s.ready.store(1);
    wait_for_go();
    auto start = clock_type::now();
    while (!stopping()) {
        bool was_paused = paused();
        auto t = clock_type::now();
        transaction(rng);
        us.add(was_paused, std::chrono::duration<double, std::micro>(clock_type::now() - t).count());
    }
    us.store(s, std::chrono::duration<double>(clock_type::now() - start).count());
}

void steppe_writer(const std::string& path, const settings& cfg, slot& s) {
    auto store = steppe::store::open(path, steppe::open_options{.create = false});
    auto* index = store.find_root<Index>("index");
    if (!index) throw std::runtime_error("no root \"index\"");
    writer_loop(s, [&](std::uint64_t& rng) {
        std::uint64_t seq = index->seq + 1;
        for (int j = 0; j < cfg.k; ++j) {
            std::uint64_t i = (rng = mix(rng)) % cfg.records;
            auto it = index->by_key.find(key_of(i));
            if (it == index->by_key.end()) throw std::runtime_error("writer: record " + std::to_string(i) + " missing");
            fill(*it->second, key_of(i), seq);
        }
        index->seq = seq;
        store.commit();
    });
    store.close();
}

// The reader loop both systems share: batches of 256 random lookups, each
// verified; a refresh every cfg.refresh_ms. `lookup(key)` gives the record
// or nullptr, `seq()` the snapshot's sequence number, `refresh()` moves to
// the newest snapshot.
template <class Lookup, class Seq, class Refresh>
void reader_loop(const settings& cfg, slot& s, int id, Lookup lookup, Seq seq, Refresh refresh) {
    reader_state st;
    st.last_seen.assign(cfg.records, 0);
    std::uint64_t rng = mix(static_cast<std::uint64_t>(::getpid()) * 31 + static_cast<std::uint64_t>(id));
    s.ready.store(1);
    wait_for_go();
    auto start = clock_type::now();
    auto period = std::chrono::milliseconds(cfg.refresh_ms);
    auto next_refresh = start + period;
    std::uint64_t lookups = 0;
    double refresh_ms = 0, idle_s = 0;
    verify_seq(s, st, seq());
    while (!stopping() && !s.failed) {
        idle_s += sit_out_pause();
        for (int b = 0; b < 256; ++b) {
            std::uint64_t i = (rng = mix(rng)) % cfg.records;
            std::uint64_t key = key_of(i);
            if (!verify(s, st, i, key, lookup(key), seq())) break;
        }
        lookups += 256;
        auto now = clock_type::now();
        if (now >= next_refresh) {
            refresh();
            verify_seq(s, st, seq());
            auto after = clock_type::now();
            refresh_ms += std::chrono::duration<double, std::milli>(after - now).count();
            ++s.refreshes;
            next_refresh = after + period;
        }
    }
    s.seconds = std::chrono::duration<double>(clock_type::now() - start).count() - idle_s;
    s.lookups = lookups;
    s.refresh_ms = refresh_ms;
}

void steppe_reader(const std::string& path, const settings& cfg, slot& s, int id) {
    steppe::open_options o;
    o.create = false;
    o.read_only = true;
    auto store = steppe::store::open(path, o);
    const Index* index = store.find_root<Index>("index");
    if (!index) throw std::runtime_error("no root \"index\"");
    reader_loop(
        cfg, s, id,
        [&](std::uint64_t key) -> const Record* {
            auto it = index->by_key.find(key);
            return it == index->by_key.end() ? nullptr : it->second;
        },
        [&] { return index->seq; },
        [&] {
            store.refresh();
            index = store.find_root<Index>("index");
            if (!index) throw std::runtime_error("no root \"index\" after refresh");
        });
    store.close();
}

// LMDB

void ok(int rc, const char* what) {
    if (rc != MDB_SUCCESS) throw std::runtime_error(std::string("LMDB ") + what + ": " + mdb_strerror(rc));
}

struct lmdb_env {
    MDB_env* env = nullptr;
    MDB_dbi records = 0, meta = 0;
    lmdb_env(const std::string& path, bool read_only) {
        ok(mdb_env_create(&env), "mdb_env_create");
        ok(mdb_env_set_maxdbs(env, 2), "mdb_env_set_maxdbs");
        ok(mdb_env_set_mapsize(env, std::size_t{1} << 30), "mdb_env_set_mapsize");
        ok(mdb_env_set_maxreaders(env, 126), "mdb_env_set_maxreaders");
        ok(mdb_env_open(env, path.c_str(), MDB_NOSUBDIR | (read_only ? MDB_RDONLY : 0), 0664), "mdb_env_open");
        MDB_txn* txn = nullptr;
        ok(mdb_txn_begin(env, nullptr, read_only ? MDB_RDONLY : 0, &txn), "mdb_txn_begin");
        ok(mdb_dbi_open(txn, "records", MDB_INTEGERKEY | (read_only ? 0 : MDB_CREATE), &records), "mdb_dbi_open records");
        ok(mdb_dbi_open(txn, "meta", read_only ? 0 : MDB_CREATE, &meta), "mdb_dbi_open meta");
        ok(mdb_txn_commit(txn), "mdb_txn_commit");
    }
    ~lmdb_env() { mdb_env_close(env); }
    lmdb_env(const lmdb_env&) = delete;
    lmdb_env& operator=(const lmdb_env&) = delete;
};

const char seq_name[] = "seq";

std::uint64_t lmdb_seq(MDB_txn* txn, MDB_dbi meta) {
    MDB_val k{sizeof seq_name - 1, const_cast<char*>(seq_name)}, v;
    ok(mdb_get(txn, meta, &k, &v), "mdb_get seq");
    std::uint64_t seq;
    std::memcpy(&seq, v.mv_data, sizeof seq);
    return seq;
}
void lmdb_put_seq(MDB_txn* txn, MDB_dbi meta, std::uint64_t seq) {
    MDB_val k{sizeof seq_name - 1, const_cast<char*>(seq_name)}, v{sizeof seq, &seq};
    ok(mdb_put(txn, meta, &k, &v, 0), "mdb_put seq");
}

void lmdb_build(const std::string& path, std::uint64_t n) {
    for (const char* suffix : {"", "-lock"}) std::filesystem::remove(path + suffix);
    lmdb_env e(path, false);
    MDB_txn* txn = nullptr;
    ok(mdb_txn_begin(e.env, nullptr, 0, &txn), "mdb_txn_begin");
    for (std::uint64_t i = 0; i < n; ++i) {
        Record r;
        fill(r, key_of(i), 0);
        MDB_val k{sizeof r.key, &r.key}, v{sizeof r, &r};
        ok(mdb_put(txn, e.records, &k, &v, 0), "mdb_put");
    }
    lmdb_put_seq(txn, e.meta, 0);
    ok(mdb_txn_commit(txn), "mdb_txn_commit");
}

void lmdb_writer(const std::string& path, const settings& cfg, slot& s) {
    lmdb_env e(path, false);
    writer_loop(s, [&](std::uint64_t& rng) {
        MDB_txn* txn = nullptr;
        ok(mdb_txn_begin(e.env, nullptr, 0, &txn), "mdb_txn_begin");
        std::uint64_t seq = lmdb_seq(txn, e.meta) + 1;
        for (int j = 0; j < cfg.k; ++j) {
            std::uint64_t i = (rng = mix(rng)) % cfg.records;
            std::uint64_t key = key_of(i);
            MDB_val k{sizeof key, &key}, v;
            ok(mdb_get(txn, e.records, &k, &v), "mdb_get (writer)");
            Record r;
            std::memcpy(&r, v.mv_data, sizeof r);
            fill(r, key, seq);
            v = {sizeof r, &r};
            ok(mdb_put(txn, e.records, &k, &v, 0), "mdb_put");
        }
        lmdb_put_seq(txn, e.meta, seq);
        ok(mdb_txn_commit(txn), "mdb_txn_commit");
    });
}

void lmdb_reader(const std::string& path, const settings& cfg, slot& s, int id) {
    lmdb_env e(path, true);
    MDB_txn* txn = nullptr;
    ok(mdb_txn_begin(e.env, nullptr, MDB_RDONLY, &txn), "mdb_txn_begin (read)");
    std::uint64_t seq = lmdb_seq(txn, e.meta);
    reader_loop(
        cfg, s, id,
        [&](std::uint64_t key) -> const Record* {
            MDB_val k{sizeof key, &key}, v;
            int rc = mdb_get(txn, e.records, &k, &v);
            if (rc != MDB_NOTFOUND) ok(rc, "mdb_get");
            return rc == MDB_SUCCESS && v.mv_size == sizeof(Record) ? static_cast<const Record*>(v.mv_data) : nullptr;
        },
        [&] { return seq; },
        [&] {
            mdb_txn_reset(txn);
            ok(mdb_txn_renew(txn), "mdb_txn_renew");
            seq = lmdb_seq(txn, e.meta);
        });
    mdb_txn_abort(txn);
}

// The parent: one cell

enum class sys { steppe, lmdb };
const char* name_of(sys s) { return s == sys::steppe ? "steppe" : "LMDB"; }

// Runs `body` in a child; the child exits 0, or 1 with a message in its slot.
template <class F>
pid_t spawn(slot& s, F body) {
    std::fflush(nullptr);
    pid_t pid = ::fork();
    if (pid < 0) die(std::string("fork: ") + std::strerror(errno));
    if (pid > 0) return pid;
    try {
        body();
    } catch (const std::exception& e) {
        report_failure(s, e.what());
    }
    s.ready.store(1);
    ::_exit(s.failed ? 1 : 0);
}

void wait_child(pid_t pid, slot& s, const char* who) {
    int status = 0;
    if (::waitpid(pid, &status, 0) < 0) die(std::string("waitpid: ") + std::strerror(errno));
    if (!(WIFEXITED(status) && WEXITSTATUS(status) == 0))
        report_failure(s, std::string(who) + " ended with " +
                              (WIFEXITED(status) ? "exit " + std::to_string(WEXITSTATUS(status))
                                                 : "signal " + std::to_string(WTERMSIG(status))));
}

void wait_ready(slot& s) {
    auto limit = clock_type::now() + std::chrono::seconds(60);
    while (!s.ready.load()) {
        if (clock_type::now() > limit) die("a child did not get ready within 60 s");
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
}

struct cell {
    sys system;
    int readers;
    bool writer;
    // results
    double lookups_per_s_total = 0, refreshes_per_s = 0, refresh_ms_mean = 0;
    latency active{}, paused{};  // the writer's commits while readers ran / were paused
    double active_s = 0, paused_s = 0;
};

std::vector<std::string> failures;

// With readers and a writer, the readers run and pause by turns of
// cfg.phase_ms (starting with a run), so the writer's commits with running
// readers and with idle ones interleave in one process and one stretch of time.
void run_cell(cell& c, const settings& cfg, const std::string& path) {
    std::memset(static_cast<void*>(shared), 0, sizeof *shared);
    std::vector<std::pair<pid_t, int>> kids;
    if (c.writer) {
        slot& s = shared->slots[0];
        kids.push_back({spawn(s, [&] {
                            if (c.system == sys::steppe) steppe_writer(path, cfg, s);
                            else lmdb_writer(path, cfg, s);
                        }),
                        0});
        wait_ready(s);  // the writer has the store before any reader opens it
    }
    for (int r = 1; r <= c.readers; ++r) {
        slot& s = shared->slots[r];
        kids.push_back({spawn(s, [&] {
                            if (c.system == sys::steppe) steppe_reader(path, cfg, s, r);
                            else lmdb_reader(path, cfg, s, r);
                        }),
                        r});
    }
    for (auto [pid, i] : kids) wait_ready(shared->slots[i]);
    auto start = clock_type::now();
    auto end = start + std::chrono::duration_cast<clock_type::duration>(std::chrono::duration<double>(cfg.seconds));
    shared->go.store(1, std::memory_order_release);
    if (c.writer && c.readers) {
        auto phase = std::chrono::milliseconds(cfg.phase_ms);
        for (bool pause = false;; pause = !pause) {
            auto t = clock_type::now();
            if (t >= end) break;
            shared->pause.store(pause ? 1 : 0);
            std::this_thread::sleep_for(std::min<clock_type::duration>(phase, end - t));
            (pause ? c.paused_s : c.active_s) += std::chrono::duration<double>(clock_type::now() - t).count();
        }
    } else {
        std::this_thread::sleep_until(end);
        c.active_s = std::chrono::duration<double>(clock_type::now() - start).count();
    }
    shared->stop.store(1);
    shared->pause.store(0);
    for (auto [pid, i] : kids) wait_child(pid, shared->slots[i], i == 0 ? "writer" : "reader");
    for (auto [pid, i] : kids) {
        slot& s = shared->slots[i];
        if (s.failed)
            failures.push_back(std::string(name_of(c.system)) + ", " + std::to_string(c.readers) + " readers" +
                               (c.writer ? " + writer" : "") + ", " + (i == 0 ? "writer" : "reader " + std::to_string(i)) +
                               ": " + s.message);
    }
    for (int r = 1; r <= c.readers; ++r) {
        slot& s = shared->slots[r];
        if (s.seconds > 0) {
            c.lookups_per_s_total += static_cast<double>(s.lookups) / s.seconds;
            c.refreshes_per_s += static_cast<double>(s.refreshes) / s.seconds / c.readers;
        }
        if (s.refreshes) c.refresh_ms_mean += s.refresh_ms / static_cast<double>(s.refreshes) / c.readers;
    }
    if (c.writer) {
        c.active = shared->slots[0].active;
        c.paused = shared->slots[0].paused;
    }
}

void build_store(sys system, const std::string& path, const settings& cfg) {
    std::memset(static_cast<void*>(shared), 0, sizeof *shared);
    slot& s = shared->slots[0];
    auto t = clock_type::now();
    pid_t pid = spawn(s, [&] {
        if (system == sys::steppe) steppe_build(path, cfg.records);
        else lmdb_build(path, cfg.records);
    });
    wait_child(pid, s, "build");
    if (s.failed) die(std::string(name_of(system)) + " build: " + s.message);
    std::fprintf(stderr, "reader_lookup_bench: %s store of %llu records built in %.1f s\n", name_of(system),
                 static_cast<unsigned long long>(cfg.records), std::chrono::duration<double>(clock_type::now() - t).count());
}

double median(std::vector<double> v) {
    if (v.empty()) return 0;
    std::sort(v.begin(), v.end());
    return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

std::string refuse_memory_fs(const std::string& dir) {
    struct statfs fs;
    if (::statfs(dir.c_str(), &fs) != 0) die("statfs " + dir + ": " + std::strerror(errno));
    auto type = static_cast<unsigned long>(fs.f_type);
    if (type == 0x01021994 || type == 0x858458f6) die(dir + " is a memory file system: the bench needs a disk (use --dir)");
    return dir;
}

}  // namespace

int main(int argc, char** argv) {
    settings cfg = parse_args(argc, argv);
    std::string dir = refuse_memory_fs(cfg.dir) + "/reader_lookup_bench_" + std::to_string(::getpid());
    std::filesystem::create_directories(dir);
    void* area = ::mmap(nullptr, sizeof(shared_area), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (area == MAP_FAILED) die(std::string("mmap: ") + std::strerror(errno));
    shared = static_cast<shared_area*>(area);
    auto total_start = clock_type::now();

    const sys systems[2] = {sys::steppe, sys::lmdb};
    std::string paths[2] = {cfg.steppe_store.empty() ? dir + "/steppe.db" : cfg.steppe_store, dir + "/lmdb.mdb"};
    for (int s = 0; s < 2; ++s) build_store(systems[s], paths[s], cfg);

    // Per system and round, for each reader count R: the writer alone (0
    // readers), R readers beside the writer (running and paused by turns),
    // R readers alone.
    std::vector<cell> layout;
    for (int r : cfg.readers) {
        layout.push_back({sys::steppe, 0, true});
        layout.push_back({sys::steppe, r, true});
        layout.push_back({sys::steppe, r, false});
    }
    std::vector<std::vector<std::vector<cell>>> results(2, std::vector<std::vector<cell>>(cfg.rounds));
    for (int round = 0; round < cfg.rounds; ++round) {
        for (int o = 0; o < 2; ++o) {
            int s = (o + round) % 2;
            for (cell c : layout) {
                c.system = systems[s];
                run_cell(c, cfg, paths[s]);
                std::error_code ec;
                auto wal = std::filesystem::file_size(paths[s] + "-wal", ec);
                std::fprintf(stderr, "round %d %-6s readers %d %s: %.0f lookups/s, refresh %.1f ms, commit mean %.0f us (%.0f us paused), steppe log %.1f MiB\n",
                             round + 1, name_of(c.system), c.readers, c.writer ? "+ writer" : "alone   ", c.lookups_per_s_total,
                             c.refresh_ms_mean, c.active.mean_us, c.paused.mean_us, ec ? 0.0 : static_cast<double>(wal) / (1 << 20));
                results[s][round].push_back(c);
            }
        }
    }

    std::printf("\nreader_lookup_bench: %llu records of 64 bytes, k = %d records per commit (durable), refresh every %d ms,\n"
                "%.1f s per cell, %d round(s), median over rounds; commit = one transaction of k lookups + updates, begin to durable.\n"
                "Readers beside the writer run and pause by turns of %d ms: \"running\" rows are the writer's commits while they ran,\n"
                "\"paused\" rows while they were open but idle; \"/ 0 readers\" divides by the writer-alone cell run just before.\n\n",
                static_cast<unsigned long long>(cfg.records), cfg.k, cfg.refresh_ms, cfg.seconds, cfg.rounds, cfg.phase_ms);
    std::printf("| system | readers | writer | lookups/s per reader | lookups/s total | refreshes/s per reader | refresh ms | "
                "commit mean | p50 | p99 | commits/s | mean / 0 readers | p50 / 0 readers | mean / paused | p50 / paused |\n");
    std::printf("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
    for (int s = 0; s < 2; ++s) {
        // The writer alone: every such cell of every round.
        std::vector<double> mean0, p500, p990, cps0;
        for (int round = 0; round < cfg.rounds; ++round)
            for (const cell& c : results[s][round])
                if (c.readers == 0) {
                    mean0.push_back(c.active.mean_us);
                    p500.push_back(c.active.p50_us);
                    p990.push_back(c.active.p99_us);
                    cps0.push_back(c.active_s > 0 ? static_cast<double>(c.active.commits) / c.active_s : 0);
                }
        std::printf("| %s | 0 | committing | – | – | – | – | %.0f µs | %.0f µs | %.0f µs | %.0f | – | – | – | – |\n", name_of(systems[s]),
                    median(mean0), median(p500), median(p990), median(cps0));
        for (std::size_t i = 0; i < layout.size(); ++i) {
            const cell& shape = layout[i];
            if (shape.readers == 0) continue;
            std::vector<double> tot, per, rps, rms;
            std::vector<double> mean[2], p50[2], p99[2], cps[2], r0_mean[2], r0_p50[2], rp_mean, rp_p50;
            for (int round = 0; round < cfg.rounds; ++round) {
                const cell& c = results[s][round][i];
                const cell& base = results[s][round][i - 1];  // the writer alone, just before
                tot.push_back(c.lookups_per_s_total);
                per.push_back(c.lookups_per_s_total / c.readers);
                rps.push_back(c.refreshes_per_s);
                rms.push_back(c.refresh_ms_mean);
                if (!c.writer) continue;
                const latency* l[2] = {&c.active, &c.paused};
                double secs[2] = {c.active_s, c.paused_s};
                for (int p = 0; p < 2; ++p) {
                    mean[p].push_back(l[p]->mean_us);
                    p50[p].push_back(l[p]->p50_us);
                    p99[p].push_back(l[p]->p99_us);
                    cps[p].push_back(secs[p] > 0 ? static_cast<double>(l[p]->commits) / secs[p] : 0);
                    if (base.active.mean_us > 0) r0_mean[p].push_back(l[p]->mean_us / base.active.mean_us);
                    if (base.active.p50_us > 0) r0_p50[p].push_back(l[p]->p50_us / base.active.p50_us);
                }
                if (c.paused.mean_us > 0) rp_mean.push_back(c.active.mean_us / c.paused.mean_us);
                if (c.paused.p50_us > 0) rp_p50.push_back(c.active.p50_us / c.paused.p50_us);
            }
            if (!shape.writer) {
                std::printf("| %s | %d | none | %.0f | %.0f | %.1f | %.2f | – | – | – | – | – | – | – | – |\n", name_of(systems[s]),
                            shape.readers, median(per), median(tot), median(rps), median(rms));
                continue;
            }
            std::printf("| %s | %d running | committing | %.0f | %.0f | %.1f | %.2f | %.0f µs | %.0f µs | %.0f µs | %.0f | %.3f | %.3f | %.3f | %.3f |\n",
                        name_of(systems[s]), shape.readers, median(per), median(tot), median(rps), median(rms), median(mean[0]),
                        median(p50[0]), median(p99[0]), median(cps[0]), median(r0_mean[0]), median(r0_p50[0]), median(rp_mean),
                        median(rp_p50));
            std::printf("| %s | %d paused | committing | – | – | – | – | %.0f µs | %.0f µs | %.0f µs | %.0f | %.3f | %.3f | – | – |\n",
                        name_of(systems[s]), shape.readers, median(mean[1]), median(p50[1]), median(p99[1]), median(cps[1]),
                        median(r0_mean[1]), median(r0_p50[1]));
        }
    }
    std::printf("\ntotal %.1f s\n", std::chrono::duration<double>(clock_type::now() - total_start).count());
    if (!cfg.keep) std::filesystem::remove_all(dir);
    if (!failures.empty()) {
        std::printf("\nVERIFICATION FAILED (%zu):\n", failures.size());
        for (const auto& f : failures) std::printf("  %s\n", f.c_str());
        return 1;
    }
    std::printf("verification: every record read was consistent with its snapshot\n");
    return 0;
}
