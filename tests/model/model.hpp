// Model-based random testing of steppe through its public API.
//
// A run is a list of abstract operations (make nodes, write fields, link and
// unlink pointers, destroy, set/remove roots, commit, rollback, close and
// reopen, kill -9, power loss at an I/O call of a commit or of recovery, ...).
// The parent process keeps a model — the committed state and the current,
// uncommitted state: nodes with their fields and links, and the roots — and
// never opens the store itself. Every store session runs in a forked worker
// process that executes concrete steps sent down a pipe and reports what the
// store holds; the parent compares it with the model after every step, and
// after each crash requires the reopened store to equal exactly the last
// completed commit or the one in flight. Abstract ops pick their targets by
// index into what exists at that point, so any sublist of a run is still a
// valid run: a failing run is shrunk by delta debugging over the op list and
// printed as a C++-like op list, plus a STEPPE_MODEL_REPLAY string.
#pragma once

#include <steppe/steppe.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace steppe_model {

// ---- What the store holds -------------------------------------------------
struct Node {
    std::uint64_t id;   // the model's name for this node; never 0
    std::uint64_t ver;  // the last value written
    Node* link[3];
    std::uint32_t index;  // position in its make_array; 0 for single nodes
    std::uint32_t count;  // elements of its make_array (1 for make<Node>); 0 = the head of a Wide
};
struct Wide {  // two pages: a large object; links point at its head
    Node head;
    std::uint64_t fill[1000];  // fill_word(id, ver, i), rewritten by every write
};
std::uint64_t fill_word(std::uint64_t id, std::uint64_t ver, std::size_t i);

// ---- Abstract operations ----------------------------------------------------
enum class opk : std::uint8_t {
    make_one, make_array, make_wide, root_get, write, write_many, link, unlink, destroy, set_root, remove_root,
    commit, rollback, reopen, reopen_dirty, kill_now, power_loss_now, crash_commit, crash_open, kill_timed,
    readers, second_writer, transient_commit, check,
    // containers (steppe/containers.hpp): root "kv" is a steppe::map<uint64_t,
    // steppe::string>, root "vec" a steppe::vector<Node*>
    kv_put, kv_erase, vec_push, vec_pop, vec_set,
    count_
};
const char* to_string(opk k);

struct op {
    opk kind;
    std::uint32_t a = 0, b = 0, c = 0, d = 0;  // random choices, interpreted against the state at that point
};

struct config {
    steppe::fault_backend backend = steppe::fault_backend::uffd;
    std::uint64_t checkpoint_bytes = 64 << 10;
    int sabotage = 0;  // self-test only: 1 = the worker loses some writes, 2 = its commits do nothing
    // The store in the test process's PostgreSQL server (support/pg_server.hpp),
    // a fresh one per run, instead of a file: crashes in a commit are then
    // the server's (pg_ctl stop -m immediate at a random instant of it), a
    // power loss between steps the server's too, and kill -9 the worker's.
    bool pg = false;
};
config config_for_seed(std::uint64_t seed);
std::string describe(const config& c);

// ---- Figures ------------------------------------------------------------------
struct run_stats {
    std::uint64_t runs = 0, ops = 0, steps = 0, checks = 0, commits = 0, rollbacks = 0, reopens = 0;
    std::uint64_t crash_in_commit = 0;       // armed crash hit inside commit (or its checkpoint)
    std::uint64_t crash_after_commit = 0;    // commit finished before the armed call; crashed at once
    std::uint64_t in_flight_kept = 0, in_flight_lost = 0;  // outcome of the commit a crash interrupted
    std::uint64_t crash_in_open = 0;         // armed crash hit during open (recovery, checkpoint)
    std::uint64_t power_losses = 0, kills = 0, timed_kills = 0, idle_crashes = 0;
    std::uint64_t by_mode[8] = {};
    std::uint64_t max_io_call = 0;           // largest crash point index that was hit
    std::uint8_t points_hit[128] = {};       // which crash points (I/O call index in a commit) were hit
    std::uint64_t tracked_io = 0;            // I/O calls the fault env saw in plain commits
    std::uint64_t reader_checks = 0, lock_checks = 0, transient_checks = 0, store_checks = 0;
    void add(const run_stats& o);
    std::string summary() const;
};

struct outcome {
    bool failed = false;
    std::size_t op_index = 0;  // the abstract op that failed
    std::string category;      // for shrinking: a failure only counts if it is of the same kind
    std::string message;
    std::vector<std::string> trace;  // the concrete steps run, C++-like
};

std::vector<op> generate(std::uint64_t seed, std::size_t length);
// Runs ops on a fresh store in `dir` (which must exist and be empty).
outcome run(const config& cfg, const std::vector<op>& ops, const std::string& dir, run_stats* stats = nullptr,
            bool verbose = false);
// Delta debugging: the shortest sublist found that fails the same way.
std::vector<op> shrink(const config& cfg, std::vector<op> ops, const outcome& failure, outcome& last,
                       std::size_t max_runs, double max_seconds);

std::string encode(const config& cfg, const std::vector<op>& ops);
bool decode(const std::string& text, config& cfg, std::vector<op>& ops);
// The reproducer: the trace of the shrunk run, with the failure and the replay string.
std::string report(const config& cfg, const std::vector<op>& ops, const outcome& o);

}  // namespace steppe_model
