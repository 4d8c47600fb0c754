// fuzz_open_store: an arbitrary main file and log, opened read-only and
// read-write, every page read, describe(), check(), then a commit that must
// read back (see fuzz_common.hpp for the oracle).
//
// Input: [u32 little-endian length L of the main file][u8 fix-up flags]
//        [L bytes: s.db][the rest: s.db-wal]
//
// STEPPE_FUZZ_MAKE_CORPUS=DIR ./fuzz_open_store writes the seed corpus to DIR
// (one input per seed store, cut from real stores) and exits.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "fuzz_common.hpp"

using namespace steppe::fuzz;

namespace {


void make_corpus(const std::string& dir) {
    std::string path = work_dir() + "/seed.db";
    for (const auto& seed : seed_stores()) {
        seed.build(path);
        bytes main = read_file(path), wal = read_file(path + "-wal");
        write_file(dir + "/" + seed.name, encode_store_input(main, wal, all_fixups));
        if (std::string(seed.name) == "checkpointed") {
            write_file(dir + "/checkpointed_nofix", encode_store_input(main, wal, 0));
            bytes torn(wal.begin(), wal.end() - 100);  // the last commit frame is cut short
            write_file(dir + "/checkpointed_torn", encode_store_input(main, torn, all_fixups));
        }
    }
    std::printf("seed corpus written to %s\n", dir.c_str());
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
    if (const char* dir = std::getenv("STEPPE_FUZZ_MAKE_CORPUS")) {
        make_corpus(dir);
        std::exit(0);
    }
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    static const std::string path = work_dir() + "/s.db";
    if (write_store_input(data, size, path)) exercise_store(path);
    return 0;
}
