// objects_walk_bench: the object engine's memory while a program walks a
// store larger than its memory cap (docs/objects.md, "What the budget
// bounds, and what grows"). `build` makes a list of N 64-byte objects
// (committing every 200,000); `walk` follows it from the root in a new
// process, calling rollback() (a safe point) every 200,000, and prints
// VmRSS and resident_bytes at each. Built twice: objects_walk_bench with
// the default detection (fault_block), objects_walk_bench_id with id.
//
// Usage: objects_walk_bench STORE build N
//        objects_walk_bench STORE walk [BUDGET_BYTES]    (0 or none: the default budget)
// In a 64 MiB cgroup v1 group, as root (the walk is killed, or ends "ok"):
//   mkdir /sys/fs/cgroup/memory/walk && echo 64M > /sys/fs/cgroup/memory/walk/memory.limit_in_bytes
//   objects_walk_bench_id /var/tmp/l.ods build 1000000
//   sh -c 'echo $$ > /sys/fs/cgroup/memory/walk/cgroup.procs; exec objects_walk_bench_id /var/tmp/l.ods walk 12000000'
#include <steppe/objects.hpp>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace so = steppe::objects;

namespace {

struct Node {
    long value;
    so::ref<Node> next;
    long pad[4];
};
struct Head {
    long count;
    so::ref<Node> first;
};

long rss_kib() {
    std::FILE* f = std::fopen("/proc/self/status", "r");
    if (!f) return -1;
    char line[256];
    long kib = -1;
    while (std::fgets(line, sizeof line, f))
        if (std::strncmp(line, "VmRSS:", 6) == 0) kib = std::atol(line + 6);
    std::fclose(f);
    return kib;
}

constexpr long every = 200'000;

void build(so::store& s, long count) {
    so::ref<Head> head = s.root<Head>("list");
    so::ref<Node> prev;
    for (long i = 0; i < count; ++i) {
        so::ref<Node> n = s.make<Node>();
        n.mut()->value = i;
        n.mut()->next = prev;
        prev = n;
        if ((i + 1) % every == 0 || i + 1 == count) {
            head.mut()->first = prev;
            head.mut()->count = i + 1;
            s.commit();
            std::printf("built %ld  VmRSS %ld KiB\n", i + 1, rss_kib());
            std::fflush(stdout);
        }
    }
}

int walk(so::store& s) {
    so::ref<Head> head = s.root<Head>("list");
    long seen = 0, sum = 0;
    for (so::ref<Node> n = head->first; n; n = n->next) {
        sum += n->value;
        if (++seen % every == 0) {
            s.rollback();
            std::printf("walked %ld  VmRSS %ld KiB  resident_bytes %llu\n", seen, rss_kib(),
                        static_cast<unsigned long long>(s.stats().resident_bytes));
            std::fflush(stdout);
        }
    }
    const long count = head->count;
    const bool ok = seen == count && sum == count * (count - 1) / 2;
    std::printf("walked %ld of %ld: %s\n", seen, count, ok ? "ok" : "WRONG");
    return ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
    if (argc < 3 || (std::string(argv[2]) != "build" && std::string(argv[2]) != "walk") ||
        (std::string(argv[2]) == "build" && argc < 4)) {
        std::fprintf(stderr, "usage: %s STORE build N | STORE walk [BUDGET_BYTES]\n", argv[0]);
        return 2;
    }
    try {
        so::options o;
        const bool building = std::string(argv[2]) == "build";
        if (!building && argc > 3) o.resident_budget = std::strtoull(argv[3], nullptr, 10);
        auto s = so::store::open(argv[1], o);
        std::printf("resident_budget %llu (%s)\n", static_cast<unsigned long long>(s.stats().resident_budget),
                    s.stats().resident_budget_source.c_str());
        if (building) {
            build(s, std::atol(argv[3]));
            return 0;
        }
        return walk(s);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "%s\n", e.what());
        return 1;
    }
}
