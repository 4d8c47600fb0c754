// backup_bench: store::backup against a plain copy of the same bytes (issue
// 19's goal: backup at least half the throughput of the copy).
//
//   backup   store::backup(DEST) of a store of N MiB (blocks of 4 KiB linked
//            in a list, checkpointed: the main file holds it all), the OS
//            caches dropped first when permitted
//   copy     the main file read and written to a new file with 1 MiB
//            buffers, then fsync (what `cp` and a sync do), caches dropped
//            first likewise
// Alternated R times; medians and the ratio copy / backup.
// Usage: backup_bench [--mib N] [--runs R] [--dir D]
#include <steppe/steppe.hpp>

#include <fcntl.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "bench_util.hpp"

using bench_util::clock_type;
using bench_util::drop_caches;
using bench_util::plain_copy;
using bench_util::median;
using bench_util::seconds_since;

namespace {

struct Block {
    std::uint64_t words[511];
    Block* next;
};

void make_store(const std::string& path, long mib) {
    steppe::open_options o;
    o.durable = false;
    auto s = steppe::store::open(path, o);
    Block* prev = nullptr;
    for (long i = 0; i < mib * 256; ++i) {
        Block* b = s.make<Block>();
        for (int k = 0; k < 511; ++k) b->words[k] = static_cast<std::uint64_t>(i) * 511 + static_cast<std::uint64_t>(k);
        b->next = prev;
        prev = b;
        if (i % 16384 == 16383) s.commit();
    }
    s.set_root("last", prev);
    s.commit();
}  // the close checkpoints: the main file alone holds the store

}  // namespace

int main(int argc, char** argv) {
    long mib = 512;
    int runs = 3;
    std::string dir;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!std::strcmp(argv[i], "--mib")) mib = std::atol(argv[i + 1]);
        else if (!std::strcmp(argv[i], "--runs")) runs = std::atoi(argv[i + 1]);
        else if (!std::strcmp(argv[i], "--dir")) dir = argv[i + 1];
    }
    bool own_dir = dir.empty();
    dir = bench_util::scratch_dir(dir);
    std::string store = dir + "/source.db";
    make_store(store, mib);
    bool cold = true;
    std::vector<double> backup_s, copy_s;
    for (int r = 0; r < runs; ++r) {
        std::string dest = dir + "/backup.db", plain = dir + "/copy.db";
        std::filesystem::remove(dest);
        std::filesystem::remove(plain);
        cold &= drop_caches();
        {
            auto s = steppe::store::open(store);
            auto t = clock_type::now();
            s.backup(dest);
            backup_s.push_back(seconds_since(t));
        }
        cold &= drop_caches();
        copy_s.push_back(plain_copy(store, plain));
    }
    double b = median(backup_s), c = median(copy_s);
    std::printf("store %ld MiB, %d runs%s\n", mib, runs, cold ? ", OS caches dropped before each" : " (caches NOT dropped)");
    std::printf("backup  %.2f s  %.0f MiB/s\n", b, static_cast<double>(mib) / b);
    std::printf("copy    %.2f s  %.0f MiB/s\n", c, static_cast<double>(mib) / c);
    std::printf("backup throughput / copy throughput  %.2f  (goal >= 0.50)\n", c / b);
    for (const char* f : {"/source.db", "/source.db-wal", "/source.db-shm", "/backup.db", "/copy.db"})
        std::filesystem::remove(dir + f);
    if (own_dir) std::filesystem::remove_all(dir);
}
