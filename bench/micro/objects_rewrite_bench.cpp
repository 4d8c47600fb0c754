// objects_rewrite_bench: compaction and migration of an object-engine store
// (steppe::compact, steppe::migrate) against a plain copy of the same bytes
// (issue 19's goal: at least half the throughput of the copy).
//
//   store    N MiB of 64-byte nodes (six words, two ints, a reference) in
//            one list from a root, committed 65,536 at a time; with
//            --delete P, P % of them then unlinked (every node but one in
//            100/(100-P)), so compaction and migration collect; the close
//            checkpoints it into its main file alone
//   compact  steppe::compact of a copy of that store (--collect when some
//            were unlinked): every kept node read, placed, its reference
//            forwarded, the new file written and synced, the old replaced
//   migrate  steppe::migrate of another copy: every kept node converted to
//            the 72-byte NodeV2 (`count` int -> long by a conversion
//            function, `flags` dropped, `added` new), the root's type too
//            (it names the renamed node type), references forwarded
//   (each with the process's peak RSS while it ran)
//   copy     the store's main file read and written to a new file with 1 MiB
//            buffers, then fsync
// The OS caches are dropped before each when permitted. Alternated R times;
// medians, MiB/s of the store before, and the ratios copy / operation.
// With --budget B, both keep at most B MiB of the old store in memory
// (compact_options::resident_budget; 0, the default: from the real limit).
// Usage: objects_rewrite_bench [--mib N] [--delete P] [--runs R] [--dir D] [--budget B]
#include <steppe/objects.hpp>
#include <steppe/steppe.hpp>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "bench_util.hpp"

using bench_util::clock_type;
using bench_util::median;
using bench_util::seconds_since;
namespace so = steppe::objects;

namespace bench {

struct NodeV1 {
    std::uint64_t words[6];
    std::int32_t count;
    std::int32_t flags;
    so::ref<NodeV1> next;
    STEPPE_FIELDS(words, count, flags, next)
};
static_assert(sizeof(NodeV1) == 64);
struct HeadV1 {
    so::ref<NodeV1> first;
    std::int64_t nodes;
    STEPPE_FIELDS(first, nodes)
};

struct NodeV2 {
    std::uint64_t words[6];
    std::int64_t count;
    so::ref<NodeV2> next;
    std::uint64_t added;
    STEPPE_FIELDS(words, count, next, added)
};
struct HeadV2 {
    so::ref<NodeV2> first;
    std::int64_t nodes;
    STEPPE_FIELDS(first, nodes)
};

}  // namespace bench

namespace {

so::options bulk() {
    so::options o;
    o.durable = false;
    o.fetch = so::granularity::physical_segment;
    return o;
}

void make_store(const std::string& path, long mib, long delete_percent) {
    auto s = so::store::open(path, bulk());
    auto head = s.root<bench::HeadV1>("list");
    const long count = mib * (1 << 20) / static_cast<long>(sizeof(bench::NodeV1));
    for (long i = 0; i < count; ++i) {
        auto n = s.make<bench::NodeV1>();
        bench::NodeV1* p = n.mut();
        for (int k = 0; k < 6; ++k) p->words[k] = static_cast<std::uint64_t>(i) * 7 + static_cast<std::uint64_t>(k);
        p->count = static_cast<std::int32_t>(i);
        p->next = head->first;
        head.mut()->first = n;
        if (i % 65536 == 65535) s.commit();
    }
    head.mut()->nodes = count;
    s.commit();
    if (delete_percent <= 0) return;
    const long keep_every = 100 / (100 - delete_percent);
    long kept = 0;
    so::ref<bench::NodeV1> p = head->first;
    for (long i = 0; p; ++i) {
        so::ref<bench::NodeV1> q = p->next;
        for (long k = 1; k < keep_every && q; ++k) q = q->next;
        p.mut()->next = q;
        p = q;
        ++kept;
        if (i % 65536 == 65535) s.commit();
    }
    head.mut()->nodes = kept;
    s.commit();
}

steppe::migration to_v2() {
    steppe::migration m;
    m.convert<bench::NodeV2>(steppe::types::layout_of<bench::NodeV1>().name)
        .with([](const steppe::old_object& old, bench::NodeV2& n) { n.count = old.get<std::int32_t>("count"); });
    m.convert<bench::HeadV2>(steppe::types::layout_of<bench::HeadV1>().name);
    return m;
}

void copy_store(const std::string& from, const std::string& to) {
    for (const char* suffix : {"", "-wal", "-shm", "-lock", ".compact"}) std::filesystem::remove(to + suffix);
    std::filesystem::copy_file(from, to);
}

}  // namespace

int main(int argc, char** argv) {
    long mib = 256, delete_percent = 0, budget_mib = 0;
    int runs = 3;
    std::string dir;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!std::strcmp(argv[i], "--mib")) mib = std::atol(argv[i + 1]);
        else if (!std::strcmp(argv[i], "--delete")) delete_percent = std::atol(argv[i + 1]);
        else if (!std::strcmp(argv[i], "--runs")) runs = std::atoi(argv[i + 1]);
        else if (!std::strcmp(argv[i], "--dir")) dir = argv[i + 1];
        else if (!std::strcmp(argv[i], "--budget")) budget_mib = std::atol(argv[i + 1]);
    }
    if (delete_percent < 0 || delete_percent >= 100) return 64;
    const bool own_dir = dir.empty();
    dir = bench_util::scratch_dir(dir);
    const std::string original = dir + "/original.ods", store = dir + "/rewritten.ods", plain = dir + "/copy.ods";
    auto t = clock_type::now();
    make_store(original, mib, delete_percent);
    const double built = seconds_since(t);
    const bool collect = delete_percent > 0;
    const std::uint64_t budget = static_cast<std::uint64_t>(budget_mib) << 20;
    bool cold = true;
    std::vector<double> compact_s, migrate_s, copy_s, compact_rss, migrate_rss;
    steppe::compact_report compacted;
    steppe::migrate_report migrated;
    for (int r = 0; r < runs; ++r) {
        copy_store(original, store);
        cold &= bench_util::drop_caches();
        bench_util::reset_peak_rss();
        t = clock_type::now();
        compacted = steppe::compact(store, {.collect = collect, .resident_budget = budget});
        compact_s.push_back(seconds_since(t));
        compact_rss.push_back(static_cast<double>(bench_util::peak_rss()));

        copy_store(original, store);
        cold &= bench_util::drop_caches();
        bench_util::reset_peak_rss();
        t = clock_type::now();
        migrated = steppe::migrate(store, to_v2(), {.collect = collect, .resident_budget = budget});
        migrate_s.push_back(seconds_since(t));
        migrate_rss.push_back(static_cast<double>(bench_util::peak_rss()));

        std::filesystem::remove(plain);
        cold &= bench_util::drop_caches();
        copy_s.push_back(bench_util::plain_copy(original, plain));
    }
    const double c = median(compact_s), m = median(migrate_s), copy = median(copy_s);
    const double in_mib = static_cast<double>(std::filesystem::file_size(original)) / (1 << 20);
    auto mib_of = [](std::uint64_t bytes) { return static_cast<double>(bytes) / (1 << 20); };
    std::printf("object store: %ld MiB of 64-byte nodes, %ld %% unlinked%s, built in %.1f s; %d runs%s; budget %s\n",
                mib, delete_percent, collect ? " (collect)" : "", built, runs,
                cold ? ", OS caches dropped before each" : " (caches NOT dropped)",
                budget ? (std::to_string(budget_mib) + " MiB").c_str() : "from the real limit");
    std::printf("files: %.1f MiB -> compacted %.1f MiB, migrated %.1f MiB (%llu elements converted)\n", in_mib,
                mib_of(compacted.bytes_after), mib_of(migrated.compaction.bytes_after),
                static_cast<unsigned long long>(migrated.converted.empty() ? 0 : migrated.converted[0].elements));
    std::printf("compact  %.2f s  %.0f MiB/s of the store before, peak RSS %.0f MiB\n", c, in_mib / c,
                mib_of(static_cast<std::uint64_t>(median(compact_rss))));
    std::printf("migrate  %.2f s  %.0f MiB/s, peak RSS %.0f MiB\n", m, in_mib / m,
                mib_of(static_cast<std::uint64_t>(median(migrate_rss))));
    std::printf("copy     %.2f s  %.0f MiB/s\n", copy, in_mib / copy);
    std::printf("compaction / copy  %.2f  (goal >= 0.50)\n", copy / c);
    std::printf("migration / copy   %.2f  (goal >= 0.50)\n", copy / m);
    for (const std::string& f : {original, store, plain})
        for (const char* suffix : {"", "-wal", "-shm", "-lock", ".compact"}) std::filesystem::remove(f + suffix);
    if (own_dir) std::filesystem::remove_all(dir);
}
