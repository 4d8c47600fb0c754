// The main job: builds a pointer structure (OO1-style parts, each with three
// raw pointers to other parts) in a new store, commits, then a second process
// reopens the store and walks it, printing what it found and what it cost.
//
//   parts_demo [DIR] [PARTS]    (default: a fresh directory under /var/tmp, 100000 parts)
#include <steppe/steppe.hpp>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

namespace demo {

struct Part {
    int id;
    char type[10];
    int x, y;
    long build;
    Part* to[3];
};

struct Catalog {
    long count;
    Part** index;  // by id: a large array of pointers
};

}  // namespace demo

using demo::Catalog;
using demo::Part;
using clock_type = std::chrono::steady_clock;

namespace {

double ms_since(clock_type::time_point t) {
    return std::chrono::duration<double, std::milli>(clock_type::now() - t).count();
}

void build(const std::string& path, long parts) {
    auto t = clock_type::now();
    auto store = steppe::store::open(path);
    auto* cat = store.root<Catalog>("parts");
    cat->count = parts;
    cat->index = store.make_array<Part*>(static_cast<std::size_t>(parts));
    for (long i = 0; i < parts; ++i) {
        Part* p = store.make<Part>();
        p->id = static_cast<int>(i);
        std::snprintf(p->type, sizeof p->type, "part-%ld", i % 10);
        p->x = static_cast<int>(i * 7 % 100000);
        p->y = static_cast<int>(i * 13 % 100000);
        p->build = 20260000 + i % 365;
        cat->index[i] = p;
    }
    std::uint64_t x = 42;
    for (long i = 0; i < parts; ++i) {
        for (auto& link : cat->index[i]->to) {  // 90 % near, 10 % anywhere, as OO1 does
            x = x * 6364136223846793005ull + 1442695040888963407ull;
            long near = i + static_cast<long>((x >> 33) % 200) - 100;
            long target = (x >> 20) % 10 < 9 ? (near + parts) % parts : static_cast<long>((x >> 24) % parts);
            link = cat->index[target];
        }
    }
    double built = ms_since(t);
    t = clock_type::now();
    store.commit();
    auto s = store.stats();
    std::printf("process %d built %ld parts with %ld pointers in %.0f ms, committed in %.0f ms\n", ::getpid(), parts,
                parts * 4, built, ms_since(t));
    std::printf("  commit wrote %llu data pages (%.1f MiB to the log, %llu pointers unswizzled), fault backend %s, "
                "write tracking %s\n",
                static_cast<unsigned long long>(s.pages_committed), s.bytes_logged / 1048576.0,
                static_cast<unsigned long long>(s.pointers_unswizzled), s.backend.c_str(), s.write_tracking.c_str());
}

int walk(const std::string& path) {
    auto t = clock_type::now();
    steppe::open_options o;
    o.read_only = true;
    auto store = steppe::store::open(path, o);
    double opened = ms_since(t);
    t = clock_type::now();
    auto* cat = store.find_root<Catalog>("parts");
    if (!cat) {
        std::printf("no root 'parts' in %s\n", path.c_str());
        return 1;
    }
    long visited = 0, bad = 0, checksum = 0;
    for (long i = 0; i < cat->count; ++i) {
        const Part* p = cat->index[i];
        bad += p->id != i;
        for (const Part* q : p->to) {
            checksum += q->x;
            ++visited;
        }
    }
    double cold = ms_since(t);
    t = clock_type::now();
    long again = 0;
    for (long i = 0; i < cat->count; ++i)
        for (const Part* q : cat->index[i]->to) again += q->x;
    double hot = ms_since(t);
    auto s = store.stats();
    std::printf("process %d reopened %s in %.1f ms and walked %ld parts, %ld connections, %ld wrong ids\n", ::getpid(),
                path.c_str(), opened, cat->count, visited, bad);
    std::printf("  cold walk %.0f ms: %llu page faults, %llu pointers swizzled (%.1f us per fault incl. the walk)\n",
                cold, static_cast<unsigned long long>(s.faults), static_cast<unsigned long long>(s.pointers_swizzled),
                cold * 1000 / static_cast<double>(s.faults ? s.faults : 1));
    std::printf("  hot walk  %.1f ms: resident, plain loads; checksum %s\n", hot,
                again == checksum ? "matches" : "DIFFERS");
    return bad == 0 && again == checksum ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
    try {
        std::string dir = argc > 1 ? argv[1] : "";
        long parts = argc > 2 ? std::atol(argv[2]) : 100000;
        if (dir.empty()) {
            char templ[] = "/var/tmp/steppe-demo-XXXXXX";
            if (!::mkdtemp(templ)) return 2;
            dir = templ;
        }
        std::string path = dir + "/parts.db";
        std::filesystem::remove(path);
        std::filesystem::remove(path + "-wal");
        build(path, parts);
        std::fflush(stdout);
        pid_t child = ::fork();
        if (child == 0) {
            int rc = walk(path);
            std::fflush(stdout);
            ::_exit(rc);
        }
        int status = 0;
        ::waitpid(child, &status, 0);
        std::printf("store files: %s (%ju bytes) and its log (%ju bytes); inspect with `steppe info %s`\n",
                    path.c_str(), static_cast<std::uintmax_t>(std::filesystem::file_size(path)),
                    static_cast<std::uintmax_t>(std::filesystem::file_size(path + "-wal")), path.c_str());
        return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
    } catch (const steppe::error& e) {
        std::fprintf(stderr, "parts_demo: %s (%s)\n", e.what(), steppe::to_string(e.code()));
        return 1;
    }
}
