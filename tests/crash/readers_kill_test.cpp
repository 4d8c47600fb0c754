// Readers beside a writer under kill -9 (docs/guarantees.md, promise 4;
// storage.hpp, invariant 5). A writer process commits continuously through
// the public API: 64 nodes of 120 words under a state root that holds the
// commit number and a checksum of every node word; each commit rewrites some
// words and replaces some nodes (make, destroy), and the log is checkpointed
// often (a small checkpoint_bytes, and store::checkpoint() now and then).
// Before each commit it appends "commit checksum" to a record file. Reader
// processes open the store read-only and, snapshot after snapshot
// (refresh()), walk every node: the checksum they compute must be the
// state's (no page of another commit), the pair must be in the record (a
// committed state), commits never go backwards, and check() now and then
// finds nothing. The test kills readers and the writer with SIGKILL at
// random instants and starts new ones. At the end a writer's checkpoint
// must go through (every killed reader's slot reclaimed) and check() be
// clean. STEPPE_READERS_SECONDS sets the length (default 3).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <steppe/steppe.hpp>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "support/temp_dir.hpp"

namespace readers_kill {
struct Node {
    std::uint64_t words[120];
};
constexpr int kNodes = 64;
struct State {
    std::uint64_t commit;
    std::uint64_t sum;
    Node* nodes[kNodes];
};
}  // namespace readers_kill

using namespace readers_kill;
using clock_type = std::chrono::steady_clock;

namespace {

std::uint64_t checksum(const State& s) {
    std::uint64_t h = 1469598103934665603ull;
    for (const Node* n : s.nodes)
        for (std::uint64_t w : n->words) h = (h ^ w) * 1099511628211ull;
    return h;
}

void record(const std::string& file, std::uint64_t commit, std::uint64_t sum) {
    std::string line = std::to_string(commit) + " " + std::to_string(sum) + "\n";
    int fd = ::open(file.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
    (void)!::write(fd, line.data(), line.size());
    ::close(fd);
}

bool recorded(const std::string& file, std::uint64_t commit, std::uint64_t sum) {
    std::ifstream in(file);
    std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    return ("\n" + all).find("\n" + std::to_string(commit) + " " + std::to_string(sum) + "\n") != std::string::npos;
}

[[noreturn]] void writer_main(const std::string& path, const std::string& records, const std::string& checkpoints) {
    steppe::open_options o;
    o.durable = false;  // kill -9 keeps what was written; the power-loss tests are elsewhere
    o.checkpoint_bytes = 256 << 10;
    o.lock_timeout = std::chrono::seconds(20);
    auto s = steppe::store::open(path, o);
    std::mt19937_64 rng(static_cast<std::uint64_t>(::getpid()) * 7919);
    State** state = s.root<State*>("state");
    if (!*state) {
        *state = s.make<State>();
        for (Node*& n : (*state)->nodes) n = s.make<Node>();
    }
    for (std::uint64_t round = 0;; ++round) {
        State* st = *state;
        for (int k = 1 + static_cast<int>(rng() % 4); k > 0; --k) {
            Node*& n = st->nodes[rng() % kNodes];
            if (rng() % 3 == 0) {
                Node* fresh = s.make<Node>(*n);
                s.destroy(n);
                n = fresh;
            }
            for (int j = 0; j < 10; ++j) n->words[rng() % 120] = rng();
        }
        ++st->commit;
        st->sum = checksum(*st);
        record(records, st->commit, st->sum);
        s.commit();
        if (round % 40 == 39) {
            // A checkpoint runs only while every reader is at the newest
            // commit: a pause lets them catch up (docs/guarantees.md).
            std::this_thread::sleep_for(std::chrono::milliseconds(rng() % 60));
            try {
                s.checkpoint();
                record(checkpoints, st->commit, 0);
            } catch (const steppe::error& e) {
                if (e.code() != steppe::errc::locked) throw;  // a reader behind: it waits
            }
        }
    }
}

// Exits 0 at `deadline`, 1 on a finding (printed); records each snapshot it
// checked.
[[noreturn]] void reader_main(const std::string& path, const std::string& records, clock_type::time_point deadline,
                              const std::string& counts) {
    steppe::open_options o;
    o.read_only = true;
    auto s = steppe::store::open(path, o);
    std::uint64_t last = 0, checked = 0;
    while (clock_type::now() < deadline) {
        State** state = s.find_root<State*>("state");
        if (state && *state && (*state)->commit > 0) {
            const State& st = **state;
            std::uint64_t sum = checksum(st);
            if (sum != st.sum || st.commit < last || !recorded(records, st.commit, sum)) {
                std::fprintf(stderr, "reader %d: commit %llu (last %llu): state sum %llu, nodes sum %llu, %s\n",
                             ::getpid(), (unsigned long long)st.commit, (unsigned long long)last,
                             (unsigned long long)st.sum, (unsigned long long)sum,
                             recorded(records, st.commit, st.sum) ? "recorded" : "not recorded");
                ::_exit(1);
            }
            last = st.commit;
            ++checked;
            record(counts, st.commit, ::getpid());  // one line per snapshot checked, killed readers' too
            if (checked % 25 == 0) {
                for (const std::string& f : s.check()) {
                    std::fprintf(stderr, "reader %d: check: %s\n", ::getpid(), f.c_str());
                    ::_exit(1);
                }
            }
        }
        s.refresh();
    }
    s.close();
    ::_exit(0);
}

template <class Body>
pid_t spawn(Body body) {
    std::fflush(nullptr);
    pid_t pid = ::fork();
    if (pid == 0) {
        try {
            body();
        } catch (const std::exception& e) {
            std::fprintf(stderr, "child %d: %s\n", ::getpid(), e.what());
        }
        ::_exit(2);
    }
    return pid;
}

int reap(pid_t pid, bool kill_it) {
    if (kill_it) ::kill(pid, SIGKILL);
    int status = 0;
    ::waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

TEST(ReadersKill, EverySnapshotIsACommittedOneWhileReadersAndTheWriterAreKilled) {
    steppe::test::temp_dir dir;
    std::string path = dir.path("s.db"), records = dir.path("records"), counts = dir.path("counts"),
                checkpoints = dir.path("checkpoints");
    const char* env = std::getenv("STEPPE_READERS_SECONDS");
    auto run_for = std::chrono::milliseconds(static_cast<long>(1000 * (env ? std::atof(env) : 3.0)));
    auto deadline = clock_type::now() + run_for;
    auto new_writer = [&] { return spawn([&] { writer_main(path, records, checkpoints); }); };
    auto new_reader = [&] { return spawn([&] { reader_main(path, records, deadline + std::chrono::seconds(1), counts); }); };

    pid_t writer = new_writer();
    for (int i = 0; i < 500 && !std::ifstream(records).good(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    std::vector<pid_t> readers;
    for (int i = 0; i < 3; ++i) readers.push_back(new_reader());
    std::mt19937_64 rng(42);
    int reader_kills = 0, writer_kills = 0, failures = 0;
    while (clock_type::now() < deadline) {
        std::this_thread::sleep_for(std::chrono::milliseconds(20 + rng() % 150));
        if (rng() % 4 == 0) {
            reap(writer, true);
            writer = new_writer();
            ++writer_kills;
        } else {
            pid_t& victim = readers[rng() % readers.size()];
            int code = reap(victim, true);
            failures += code != 128 + SIGKILL;
            EXPECT_EQ(code, 128 + SIGKILL) << "a reader ended by itself before it was killed";
            victim = new_reader();
            ++reader_kills;
        }
    }
    for (pid_t r : readers) EXPECT_EQ(reap(r, false), 0) << "a reader found a snapshot that was not a commit";
    reap(writer, true);
    auto lines = [](const std::string& file) {
        std::ifstream in(file);
        std::uint64_t n = 0, a = 0, b = 0;
        while (in >> a >> b) ++n;
        return n;
    };
    std::uint64_t snapshots = lines(counts), checkpointed = lines(checkpoints);
    std::printf("%d reader kills, %d writer kills, %llu commits, %llu explicit checkpoints, %llu snapshots checked, "
                "log %llu KiB\n",
                reader_kills, writer_kills, (unsigned long long)lines(records), (unsigned long long)checkpointed,
                (unsigned long long)snapshots, (unsigned long long)(std::filesystem::file_size(path + "-wal") >> 10));
    EXPECT_GT(checkpointed, 0u);
    EXPECT_GT(snapshots, 0u);
    EXPECT_EQ(failures, 0);

    auto s = steppe::store::open(path);
    s.checkpoint();  // no reader left: every killed one's slot was reclaimed
    EXPECT_TRUE(s.check().empty());
    State* st = *s.find_root<State*>("state");
    EXPECT_EQ(checksum(*st), st->sum);
}

}  // namespace
