// compact_bench: steppe::compact against a plain copy of the same bytes
// (issue 19's goal: compaction at least half the throughput of the copy).
//
//   store    N MiB of 64-byte nodes in one list (8 words, a pointer among
//            them), then all but every fifth unlinked and destroyed (80 %,
//            --delete P for another share), checkpointed
//   compact  steppe::compact (with --collect if asked) of a copy of that
//            store, the OS caches dropped first when permitted: every live
//            node moved, its pointer forwarded, the new file written and
//            synced, the old one replaced
//   copy     a plain copy of the same bytes, both ways: the store before
//            (what compaction must read: its live objects lie on every
//            page) and the compacted main file (what it writes), each read
//            and written to a new file with 1 MiB buffers, then fsync,
//            caches dropped first likewise
//   postgres with --postgres URL (a server URL without store=): the same
//            store imported into PostgreSQL (steppe import) as a new store
//            each run, then steppe::compact of it there: one commit of the
//            new pages and zero versions, then a collection
// Alternated R times; medians, MiB/s of the store compacted (bytes before)
// and the ratios copy / compact.
// Usage: compact_bench [--mib N] [--delete P] [--runs R] [--collect 1] [--dir D] [--postgres URL]
#include <steppe/steppe.hpp>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "bench_util.hpp"
#include "storage/backup.hpp"

using bench_util::clock_type;
using bench_util::median;
using bench_util::seconds_since;

namespace {

struct Node {
    std::uint64_t words[7];
    Node* next;
};
static_assert(sizeof(Node) == 64);

void make_store(const std::string& path, long mib, long delete_percent) {
    steppe::open_options o;
    o.durable = false;
    auto s = steppe::store::open(path, o);
    Node** head = s.root<Node*>("list");
    const long count = mib * (1 << 20) / static_cast<long>(sizeof(Node));
    for (long i = 0; i < count; ++i) {
        Node* n = s.make<Node>();
        for (int k = 0; k < 7; ++k) n->words[k] = static_cast<std::uint64_t>(i) * 7 + static_cast<std::uint64_t>(k);
        n->next = *head;
        *head = n;
        if (i % 262144 == 262143) s.commit();
    }
    s.commit();
    Node** link = head;
    for (long i = 0; *link; ++i) {
        Node* n = *link;
        if (i % 100 < delete_percent) {
            *link = n->next;
            s.destroy(n);
        } else {
            link = &n->next;
        }
        if (i % 262144 == 262143) s.commit();
    }
    s.commit();
}  // the close checkpoints: the main file alone holds the store

void copy_store(const std::string& from, const std::string& to) {
    for (const char* suffix : {"", "-wal", "-shm", "-lock"}) std::filesystem::remove(to + suffix);
    std::filesystem::copy_file(from, to);
}

}  // namespace

int main(int argc, char** argv) {
    long mib = 256, delete_percent = 80;
    int runs = 3;
    bool collect = false;
    std::string dir, postgres;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!std::strcmp(argv[i], "--mib")) mib = std::atol(argv[i + 1]);
        else if (!std::strcmp(argv[i], "--delete")) delete_percent = std::atol(argv[i + 1]);
        else if (!std::strcmp(argv[i], "--runs")) runs = std::atoi(argv[i + 1]);
        else if (!std::strcmp(argv[i], "--collect")) collect = std::atoi(argv[i + 1]) != 0;
        else if (!std::strcmp(argv[i], "--dir")) dir = argv[i + 1];
        else if (!std::strcmp(argv[i], "--postgres")) postgres = argv[i + 1];
    }
    bool own_dir = dir.empty();
    dir = bench_util::scratch_dir(dir);
    const std::string original = dir + "/original.db", store = dir + "/compacted.db", plain = dir + "/copy.db";
    make_store(original, mib, delete_percent);
    bool cold = true;
    std::vector<double> compact_s, copy_in_s, copy_out_s, postgres_s, compact_rss;
    steppe::compact_report report, postgres_report;
    for (int r = 0; r < runs; ++r) {
        if (!postgres.empty()) {
            const std::string url = postgres + (postgres.find('?') == std::string::npos ? "?" : "&") +
                                    "store=compact_bench_" + std::to_string(::getpid()) + "_" + std::to_string(r);
            steppe::storage::import_store(original, url);
            cold &= bench_util::drop_caches();
            auto t = clock_type::now();
            postgres_report = steppe::compact(url, {.collect = collect});
            postgres_s.push_back(seconds_since(t));
        }
        copy_store(original, store);
        std::filesystem::remove(plain);
        cold &= bench_util::drop_caches();
        bench_util::reset_peak_rss();
        auto t = clock_type::now();
        report = steppe::compact(store, {.collect = collect});
        compact_s.push_back(seconds_since(t));
        compact_rss.push_back(static_cast<double>(bench_util::peak_rss()) / (1 << 20));
        for (auto [from, times] : {std::pair{&original, &copy_in_s}, std::pair{&store, &copy_out_s}}) {
            std::filesystem::remove(plain);
            cold &= bench_util::drop_caches();
            times->push_back(bench_util::plain_copy(*from, plain));
        }
    }
    const double c = median(compact_s), in = median(copy_in_s), out = median(copy_out_s);
    const double in_mib = static_cast<double>(std::filesystem::file_size(original)) / (1 << 20);
    const double out_mib = static_cast<double>(report.bytes_after) / (1 << 20);
    std::printf("store %ld MiB of nodes, %ld %% deleted, %d runs%s%s\n", mib, delete_percent, runs,
                collect ? ", --collect" : "", cold ? ", OS caches dropped before each" : " (caches NOT dropped)");
    std::printf("files %.1f MiB -> %.1f MiB (%llu -> %llu pages)\n",
                static_cast<double>(report.bytes_before) / (1 << 20), out_mib,
                static_cast<unsigned long long>(report.pages_before), static_cast<unsigned long long>(report.pages_after));
    std::printf("compact           %.2f s  %.0f MiB/s of the store before, peak RSS %.0f MiB\n", c, in_mib / c,
                median(compact_rss));
    std::printf("copy of the store %.2f s  %.0f MiB/s\n", in, in_mib / in);
    std::printf("copy of the result %.2f s  %.0f MiB/s\n", out, out_mib / out);
    std::printf("compaction / copy of the store before  %.2f  (goal >= 0.50)\n", in / c);
    std::printf("compaction / copy of the compacted file  %.2f\n", out / c);
    if (!postgres.empty()) {
        const double p = median(postgres_s);
        std::printf("in PostgreSQL: %.1f MiB -> %.1f MiB of page images (%llu -> %llu pages), compact %.2f s, %.2f x "
                    "the file store's\n",
                    static_cast<double>(postgres_report.bytes_before) / (1 << 20),
                    static_cast<double>(postgres_report.bytes_after) / (1 << 20),
                    static_cast<unsigned long long>(postgres_report.pages_before),
                    static_cast<unsigned long long>(postgres_report.pages_after), p, p / c);
    }
    for (const std::string& f : {original, store, plain})
        for (const char* suffix : {"", "-wal", "-shm", "-lock"}) std::filesystem::remove(f + suffix);
    if (own_dir) std::filesystem::remove_all(dir);
}
