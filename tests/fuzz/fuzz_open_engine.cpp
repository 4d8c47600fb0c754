// fuzz_open_engine: a damaged page-engine store (main file and log), opened
// read-only through the public API: the engine meta, the heap's metadata
// pages (heap::decode), the type catalog, roots and vtable tables (their blob
// chains and decoders), validate(), then roots(), types() and check(), which
// walks every committed page's pointers. Only steppe::error may come out.
// Objects are not touched: a damaged page met by a fault ends the process by
// design (exit 71), which is not what this target looks for.
//
// Input: as fuzz_open_store: [u32 length L of the main file][u8 fix-up flags][L bytes][log]
// STEPPE_FUZZ_MAKE_CORPUS=DIR ./fuzz_open_engine writes the seed corpus and exits.
#include <steppe/steppe.hpp>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "fuzz_common.hpp"

using namespace steppe::fuzz;

namespace fuzzed {
struct Node {
    long value;
    Node* next;
    Node* other;
};
}  // namespace fuzzed

namespace {

void build_seed(const std::string& path, int variant) {
    remove_file(path);
    remove_file(path + "-wal");
    steppe::open_options o;
    o.checkpoint_on_close = false;  // the seeds are to have commits in the log to damage
    auto s = steppe::store::open(path, o);
    auto* head = s.root<fuzzed::Node*>("list");
    for (long i = 0; i < 300; ++i) *head = s.make<fuzzed::Node>(fuzzed::Node{i, *head, *head});
    if (variant > 0) {
        auto* names = s.root<steppe::map<steppe::string, steppe::vector<long>>>("names");
        for (long i = 0; i < 50; ++i)
            (*names)[steppe::string("name number ") + std::to_string(i).c_str()].assign(static_cast<std::size_t>(i), i);
        s.make_array<long>(1500);  // a large object
    }
    s.commit();
    if (variant > 1) {
        s.destroy(*head);
        s.commit();
    }
}


}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
    if (const char* dir = std::getenv("STEPPE_FUZZ_MAKE_CORPUS")) {
        std::string path = work_dir() + "/seed.db";
        for (int variant = 0; variant < 3; ++variant) {
            build_seed(path, variant);
            bytes main = read_file(path), wal = read_file(path + "-wal");
            while (!wal.empty() && wal.back() == 0) wal.pop_back();  // the log's zeroed growth: keep inputs small
            write_file(std::string(dir) + "/engine" + std::to_string(variant), encode_store_input(main, wal, all_fixups));
        }
        std::printf("seed corpus written to %s\n", dir);
        std::exit(0);
    }
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    static const std::string path = work_dir() + "/e.db";
    if (!write_store_input(data, size, path)) return 0;
    try {
        steppe::open_options o;
        o.read_only = true;
        o.create = false;
        auto s = steppe::store::open(path, o);
        (void)s.roots();
        (void)s.types();
        (void)s.check();
        (void)s.stats();
    } catch (const steppe::error&) {
    }
    return 0;
}
