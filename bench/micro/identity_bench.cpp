// identity_bench: what issue 18 item 3's identity mapping would cost a page,
// measured before it is built. Today a warm miss is a userfaultfd trap, a
// pread of the page, its checksum, the swizzle and a UFFDIO_COPY (5.6-7.4
// us on OO1 large, docs/benchmarks.md). Mapped where its pointers were
// written for, a store's main file could be served by the kernel's page
// cache instead; what steppe would still owe each page is its checksum
// (S-checks and CRC32C before the program reads it) and write tracking.
// This measures those costs on a plain file of random pages, page cache
// warm, touched in a random order (as a warm OO1 iteration touches ~500 of
// the 9,841 pages of OO1 large), each run on a fresh mapping:
//
//   kernel, fault-around      MAP_PRIVATE read-only: the kernel's minor fault, 16 pages mapped a fault
//   kernel, MADV_RANDOM       the same, one page a fault
//   checked regions of R      PROT_NONE; the first touch of an aligned region of R pages traps
//                             (SIGSEGV), the handler opens the region (mprotect) and checks every
//                             page of it against its CRC32C: the checksum kept, the trap amortized
//   trapped pages, unchecked  the same for R = 1 without the check: what the trap itself costs
//   write: copy-on-write      the first write to a resident page of a MAP_PRIVATE mapping
//   write: mprotect           the same, tracked by a trap per page (read-only until written)
//   write: uffd-wp async      the same, tracked by userfaultfd's asynchronous write-protect (no
//                             trap: the kernel marks the page) and found by one PAGEMAP_SCAN
//
// µs per page touched (wall clock, median of --runs); for regions also the
// pages checked per page touched. A wrong checksum is counted, never
// expected: the file is written with its sums.
//
// Usage: identity_bench [--pages N] [--touch K] [--runs R] [--dir D]
#include "common/crc32c.hpp"
#include "vm/sys.hpp"
#include "vm/uapi.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "bench_util.hpp"

namespace {

constexpr std::size_t page = 4096;
std::size_t g_pages = 9'841, g_touch = 500;
int g_runs = 9;
std::string g_dir = "/var/tmp";

// What the SIGSEGV handler works with (set before a mapping is touched).
std::byte* g_base = nullptr;
std::size_t g_region_bytes = page, g_length = 0;
const std::uint32_t* g_sums = nullptr;
std::atomic<std::uint64_t> g_checked{0}, g_bad{0};
bool g_write_trap = false, g_check = true;

void die(const char* what) {
    std::fprintf(stderr, "identity_bench: %s: %s\n", what, std::strerror(errno));
    std::exit(1);
}

// Async-signal-safe: mprotect and arithmetic.
void on_segv(int, siginfo_t* info, void*) {
    auto* at = static_cast<std::byte*>(info->si_addr);
    if (at < g_base || at >= g_base + g_length) {
        signal(SIGSEGV, SIG_DFL);
        return;
    }
    if (g_write_trap) {
        std::byte* p = g_base + (at - g_base) / page * page;
        if (mprotect(p, page, PROT_READ | PROT_WRITE) != 0) _exit(3);
        return;
    }
    const std::size_t start = std::size_t(at - g_base) / g_region_bytes * g_region_bytes;
    const std::size_t end = std::min(start + g_region_bytes, g_length);
    if (mprotect(g_base + start, end - start, PROT_READ) != 0) _exit(3);
    for (std::size_t off = start; g_check && off < end; off += page) {
        if (steppe::common::crc32c(0, g_base + off, page) != g_sums[off / page])
            g_bad.fetch_add(1, std::memory_order_relaxed);
        g_checked.fetch_add(1, std::memory_order_relaxed);
    }
}

struct store_file {
    int fd = -1;
    std::vector<std::uint32_t> sums;
};

store_file make_file() {
    store_file f;
    const std::string path = g_dir + "/identity_bench.dat";
    f.fd = open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (f.fd < 0) die(path.c_str());
    unlink(path.c_str());
    std::mt19937_64 random(42);
    std::vector<std::uint64_t> words(page / 8);
    for (std::size_t p = 0; p < g_pages; ++p) {
        for (auto& w : words) w = random();
        f.sums.push_back(steppe::common::crc32c(0, words.data(), page));
        if (pwrite(f.fd, words.data(), page, off_t(p * page)) != ssize_t(page)) die("pwrite");
    }
    if (fsync(f.fd) != 0) die("fsync");
    return f;  // written through the page cache: warm
}

std::vector<std::size_t> trace_of(int run) {
    std::vector<std::size_t> pages(g_pages);
    std::iota(pages.begin(), pages.end(), std::size_t{0});
    std::mt19937_64 random(std::uint64_t(run) + 1);
    std::shuffle(pages.begin(), pages.end(), random);
    pages.resize(std::min(g_touch, g_pages));
    return pages;
}

std::byte* map_file(const store_file& f, int prot) {
    void* p = mmap(nullptr, g_pages * page, prot, MAP_PRIVATE, f.fd, 0);
    if (p == MAP_FAILED) die("mmap");
    return static_cast<std::byte*>(p);
}

volatile std::uint64_t g_sink;

double read_pages(std::byte* base, const std::vector<std::size_t>& trace) {
    const auto start = bench_util::clock_type::now();
    std::uint64_t sum = 0;
    for (std::size_t p : trace) sum += *reinterpret_cast<volatile std::uint64_t*>(base + p * page);
    const double s = bench_util::seconds_since(start);
    g_sink = sum;
    return s;
}

double write_pages(std::byte* base, const std::vector<std::size_t>& trace) {
    const auto start = bench_util::clock_type::now();
    for (std::size_t p : trace) *reinterpret_cast<volatile std::uint64_t*>(base + p * page + 8) = p;
    return bench_util::seconds_since(start);
}

struct row {
    std::string what;
    std::vector<double> us_per_page;
    double checked_per_touch = 0;
    std::string note;
};

// One run of a read variant: a fresh mapping, the trace read once.
row measure_reads(const store_file& f, const std::string& what, int advice, std::size_t region_pages,
                  bool check = true) {
    row r{what, {}, 0, ""};
    g_check = check;
    std::uint64_t checked = 0;
    for (int run = 0; run < g_runs; ++run) {
        const auto trace = trace_of(run);
        std::byte* base = map_file(f, region_pages ? PROT_NONE : PROT_READ);
        if (advice && madvise(base, g_pages * page, advice) != 0) die("madvise");
        g_base = base, g_length = g_pages * page, g_region_bytes = region_pages * page, g_sums = f.sums.data();
        g_write_trap = false;
        const std::uint64_t before = g_checked.load();
        r.us_per_page.push_back(read_pages(base, trace) * 1e6 / double(trace.size()));
        checked += g_checked.load() - before;
        munmap(base, g_pages * page);
    }
    if (region_pages && check) r.checked_per_touch = double(checked) / double(g_runs) / double(std::min(g_touch, g_pages));
    return r;
}

// Write variants: the trace's pages are read first (resident, as a page the
// program writes has been read), then written once each.
enum class tracking { none, mprotect, uffd_wp };

bool arm_uffd_wp(std::byte* base, int* uffd_out, std::string* why) {
    const int uffd = steppe::vm::detail::open_userfaultfd();
    if (uffd < 0) return *why = "no userfaultfd", false;
    uffdio_api api{UFFD_API, UFFD_FEATURE_WP_ASYNC | UFFD_FEATURE_WP_UNPOPULATED, 0};
    uffdio_register reg{{std::uint64_t(base), g_pages * page}, UFFDIO_REGISTER_MODE_WP, 0};
    uffdio_writeprotect wp{{std::uint64_t(base), g_pages * page}, UFFDIO_WRITEPROTECT_MODE_WP};
    if (ioctl(uffd, UFFDIO_API, &api) != 0) return *why = std::string("UFFDIO_API: ") + std::strerror(errno), false;
    if (ioctl(uffd, UFFDIO_REGISTER, &reg) != 0)
        return *why = std::string("UFFDIO_REGISTER on a MAP_PRIVATE file mapping: ") + std::strerror(errno), false;
    if (ioctl(uffd, UFFDIO_WRITEPROTECT, &wp) != 0)
        return *why = std::string("UFFDIO_WRITEPROTECT: ") + std::strerror(errno), false;
    *uffd_out = uffd;
    return true;
}

// Pages PAGEMAP_SCAN reports written in the mapping, or -1.
long written_pages(std::byte* base) {
    const int fd = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    std::vector<page_region> regions(g_pages);
    pm_scan_arg arg{};
    arg.size = sizeof arg;
    arg.start = std::uint64_t(base);
    arg.end = std::uint64_t(base + g_pages * page);
    arg.vec = std::uint64_t(regions.data());
    arg.vec_len = regions.size();
    arg.category_mask = arg.return_mask = PAGE_IS_WRITTEN;
    const long n = ioctl(fd, PAGEMAP_SCAN, &arg);
    close(fd);
    if (n < 0) return -1;
    long pages = 0;
    for (long i = 0; i < n; ++i) pages += long((regions[std::size_t(i)].end - regions[std::size_t(i)].start) / page);
    return pages;
}

row measure_writes(const store_file& f, const std::string& what, tracking how) {
    row r{what, {}, 0, ""};
    for (int run = 0; run < g_runs; ++run) {
        const auto trace = trace_of(run);
        std::byte* base = map_file(f, PROT_READ | PROT_WRITE);
        int uffd = -1;
        if (how == tracking::uffd_wp && !arm_uffd_wp(base, &uffd, &r.note)) {
            munmap(base, g_pages * page);
            return r;
        }
        read_pages(base, trace);
        if (how == tracking::mprotect) {
            if (mprotect(base, g_pages * page, PROT_READ) != 0) die("mprotect");
            g_base = base, g_length = g_pages * page, g_write_trap = true;
        }
        double s = write_pages(base, trace);
        if (how == tracking::uffd_wp) {
            const auto start = bench_util::clock_type::now();
            const long found = written_pages(base);
            s += bench_util::seconds_since(start);
            if (found != long(trace.size()))
                r.note = "PAGEMAP_SCAN found " + std::to_string(found) + " written pages of " +
                         std::to_string(trace.size());
        }
        r.us_per_page.push_back(s * 1e6 / double(trace.size()));
        if (uffd >= 0) close(uffd);
        munmap(base, g_pages * page);
    }
    return r;
}

}  // namespace

int main(int argc, char** argv) {
    for (int i = 1; i + 1 < argc; i += 2) {
        const std::string flag = argv[i], value = argv[i + 1];
        if (flag == "--pages") g_pages = std::stoull(value);
        else if (flag == "--touch") g_touch = std::stoull(value);
        else if (flag == "--runs") g_runs = std::stoi(value);
        else if (flag == "--dir") g_dir = value;
        else {
            std::fprintf(stderr, "usage: identity_bench [--pages N] [--touch K] [--runs R] [--dir D]\n");
            return 2;
        }
    }
    struct sigaction sa{};
    sa.sa_sigaction = on_segv;
    sa.sa_flags = SA_SIGINFO;
    sigaction(SIGSEGV, &sa, nullptr);

    const store_file f = make_file();
    std::printf("identity_bench: %zu pages (page cache warm), %zu touched a run in a random order, median of %d "
                "runs\n\n| variant | us per page touched | pages checked per page touched | note |\n|---|---|---|---|\n",
                g_pages, std::min(g_touch, g_pages), g_runs);
    std::vector<row> rows;
    rows.push_back(measure_reads(f, "kernel, fault-around", 0, 0));
    rows.push_back(measure_reads(f, "kernel, MADV_RANDOM", MADV_RANDOM, 0));
    for (std::size_t region : {1, 4, 16, 64})
        rows.push_back(measure_reads(f, "checked regions of " + std::to_string(region), 0, region));
    rows.push_back(measure_reads(f, "trapped pages, unchecked", 0, 1, false));
    rows.push_back(measure_writes(f, "write: copy-on-write", tracking::none));
    rows.push_back(measure_writes(f, "write: mprotect", tracking::mprotect));
    rows.push_back(measure_writes(f, "write: uffd-wp async + PAGEMAP_SCAN", tracking::uffd_wp));
    for (const row& r : rows) {
        std::printf("| %s | ", r.what.c_str());
        if (r.us_per_page.empty()) std::printf("- | ");
        else std::printf("%.2f | ", bench_util::median(r.us_per_page));
        if (r.checked_per_touch > 0) std::printf("%.1f | ", r.checked_per_touch);
        else std::printf("| ");
        std::printf("%s |\n", r.note.c_str());
    }
    if (g_bad.load()) std::printf("\n%llu pages failed their checksum\n", (unsigned long long)g_bad.load());
    return g_bad.load() ? 1 : 0;
}
