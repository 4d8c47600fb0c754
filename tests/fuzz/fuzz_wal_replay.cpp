// fuzz_wal_replay: a valid store (commits 1-3 checkpointed, 4-6 in the log,
// built at startup) whose log is replaced by the input; then the same
// workout as fuzz_open_store (see fuzz_common.hpp for the oracle).
//
// Input: [u8 fix-up flags (log bits only)][the log]
//
// STEPPE_FUZZ_MAKE_CORPUS=DIR ./fuzz_wal_replay writes the seed corpus to DIR
// and exits.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "fuzz_common.hpp"

using namespace steppe::fuzz;

namespace {

constexpr std::uint8_t log_flags = fix_wal_header | fix_frames | adopt_identity | no_log;

bytes base_main;

bytes encode(const bytes& wal, std::uint8_t flags) {
    bytes in{flags};
    in.insert(in.end(), wal.begin(), wal.end());
    return in;
}

void make_corpus(const std::string& dir) {
    std::string path = work_dir() + "/seed.db";
    build_replay_base(path);
    bytes wal = read_file(path + "-wal");
    write_file(dir + "/base", encode(wal, all_fixups & log_flags));
    write_file(dir + "/base_nofix", encode(wal, 0));
    write_file(dir + "/base_torn", encode(bytes(wal.begin(), wal.end() - 300), all_fixups & log_flags));
    build_replay_base(path, 3);
    write_file(dir + "/longer", encode(read_file(path + "-wal"), all_fixups & log_flags));
    for (const auto& seed : seed_stores()) {
        if (std::string(seed.name) != "empty" && std::string(seed.name) != "log_only") continue;
        seed.build(path);
        write_file(dir + "/" + seed.name, encode(read_file(path + "-wal"), all_fixups & log_flags));
    }
    std::printf("seed corpus written to %s\n", dir.c_str());
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
    if (const char* dir = std::getenv("STEPPE_FUZZ_MAKE_CORPUS")) {
        make_corpus(dir);
        std::exit(0);
    }
    std::string path = work_dir() + "/base.db";
    build_replay_base(path);
    base_main = read_file(path);
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    if (size < 1) return 0;
    std::uint8_t flags = data[0] & log_flags;
    bytes main = base_main, wal(data + 1, data + size);
    apply_fixups(main, wal, flags);
    if (known_finding(main, wal)) return 0;

    static const std::string path = work_dir() + "/s.db";
    write_file(path, main);
    if (flags & no_log) remove_file(path + "-wal");
    else write_file(path + "-wal", wal);
    exercise_store(path);
    return 0;
}
