// readers_bench — what readers beside the writer cost the writer, and what a
// reader's snapshot costs (storage level, docs/design.md "Readers beside the
// writer"). For 0, 1 and 3 reader processes that open a snapshot, read every
// page, and open again, in a loop, the writer makes `commits` commits of 8
// pages out of 256 (durable: one fdatasync each) and reports the mean and the
// 99th percentile of its commit latency, how many checkpoints ran, how many
// attempts a reader deferred, how often the writer paused for readers
// (storage::options::checkpoint_wait) and how big the log ended, and how many
// snapshots the readers read (each verified page by page). Without
// checkpoints (the commit path alone), then with one due every MiB of log
// (where readers make checkpoints wait), without the pause and with 100 ms.
//
// Beside the wall time, the writer thread's own CPU time per commit
// (getrusage, RUSAGE_THREAD: user + system), which the shared disk's
// fdatasync and the other processes on the CPUs do not move: what a reader
// costs the writer's work. --no-sync leaves out the fdatasync too
// (storage::options::durable off), so the wall time shows it as well.
//
// Usage: readers_bench [--dir D] [--commits N] [--no-sync]   (default /var/tmp, 400)
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "storage/storage.hpp"

using namespace steppe;
using clock_type = std::chrono::steady_clock;

namespace {

constexpr std::uint64_t store_pages = 256;
bool durable = true;

// The calling thread's CPU time so far, in microseconds.
double thread_cpu_us() {
    rusage r{};
    ::getrusage(RUSAGE_THREAD, &r);
    auto us = [](const timeval& t) { return static_cast<double>(t.tv_sec) * 1e6 + static_cast<double>(t.tv_usec); };
    return us(r.ru_utime) + us(r.ru_stime);
}

void commit_pages(storage::storage& s, std::uint64_t t) {
    std::vector<std::byte> image(storage::page_size, std::byte(t & 0xff));
    std::vector<storage::page_image> images;
    for (std::uint64_t i = 0; i < 8; ++i) images.push_back({(t * 8 + i) % store_pages, image.data()});
    s.commit(images, storage::meta_bytes{});
}

// A reader process: snapshot after snapshot until killed; counts them in a pipe.
pid_t start_reader(const std::string& path, int count_fd) {
    pid_t pid = ::fork();
    if (pid != 0) return pid;
    storage::options o;
    o.read_only = true;
    std::vector<std::byte> page(storage::page_size);
    for (;;) {
        auto r = storage::storage::open(path, o);
        for (std::uint64_t p = 0; p < r->page_count(); ++p) r->read_page(p, page.data());
        char c = 1;
        (void)!::write(count_fd, &c, 1);
    }
}

void run(const std::string& path, int readers, int commits, std::uint64_t checkpoint_bytes,
         std::chrono::milliseconds checkpoint_wait) {
    std::filesystem::remove(path);
    std::filesystem::remove(path + "-wal");
    std::filesystem::remove(path + "-shm");
    storage::options o;
    o.checkpoint_bytes = checkpoint_bytes;
    o.checkpoint_wait = checkpoint_wait;
    o.durable = durable;
    auto w = storage::storage::open(path, o);
    for (std::uint64_t t = 0; t < store_pages / 8; ++t) commit_pages(*w, t);
    int counts[2];
    if (::pipe(counts) != 0) std::exit(1);
    std::vector<pid_t> pids;
    for (int i = 0; i < readers; ++i) pids.push_back(start_reader(path, counts[1]));
    ::close(counts[1]);
    std::vector<double> us;
    const double cpu_start = thread_cpu_us();
    for (int t = 0; t < commits; ++t) {
        auto start = clock_type::now();
        commit_pages(*w, static_cast<std::uint64_t>(t));
        us.push_back(std::chrono::duration<double, std::micro>(clock_type::now() - start).count());
    }
    const double cpu_per_commit = (thread_cpu_us() - cpu_start) / commits;
    for (pid_t pid : pids) ::kill(pid, SIGKILL);
    for (pid_t pid : pids) ::waitpid(pid, nullptr, 0);
    long snapshots = 0;
    char buf[4096];
    for (ssize_t n; (n = ::read(counts[0], buf, sizeof buf)) > 0;) snapshots += n;
    ::close(counts[0]);
    std::sort(us.begin(), us.end());
    double mean = 0;
    for (double u : us) mean += u / static_cast<double>(us.size());
    const storage::stats& st = w->counters();
    std::printf("checkpoint_bytes %llu, checkpoint_wait %lld ms, readers %d: commit mean %.0f us, p99 %.0f us, "
                "writer CPU %.1f us; "
                "checkpoints %llu run, %llu deferred, %llu pauses (%llu gave up); log %.1f MiB at the end; "
                "%ld snapshots read\n",
                (unsigned long long)checkpoint_bytes, (long long)checkpoint_wait.count(), readers, mean,
                us[us.size() * 99 / 100], cpu_per_commit, (unsigned long long)st.checkpoints,
                (unsigned long long)st.checkpoints_deferred, (unsigned long long)st.checkpoint_waits,
                (unsigned long long)st.checkpoint_waits_expired, static_cast<double>(w->describe().wal_bytes_used) / (1 << 20),
                snapshots);
}

}  // namespace

int main(int argc, char** argv) {
    std::string dir = "/var/tmp";
    int commits = 400;
    for (int i = 1; i < argc; ++i) {
        if (std::strcmp(argv[i], "--no-sync") == 0) durable = false;
        else if (i + 1 < argc && std::strcmp(argv[i], "--dir") == 0) dir = argv[++i];
        else if (i + 1 < argc && std::strcmp(argv[i], "--commits") == 0) commits = std::atoi(argv[++i]);
    }
    std::string path = dir + "/readers_bench_" + std::to_string(::getpid()) + ".db";
    using std::chrono::milliseconds;
    for (int readers : {0, 1, 3}) run(path, readers, commits, std::uint64_t{1} << 40, milliseconds(0));
    for (milliseconds wait : {milliseconds(0), milliseconds(100)})
        for (int readers : {0, 1, 3}) run(path, readers, commits, std::uint64_t{1} << 20, wait);
    for (const char* suffix : {"", "-wal", "-shm", "-lock"}) std::filesystem::remove(path + suffix);
}
