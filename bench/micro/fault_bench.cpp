// fault_bench: what the vm module's fault path costs, per page.
//
//   bare uffd            SIGBUS + UFFDIO_COPY with a handler of its own and a fill that does nothing
//   bare fault-around    the same handler installing the aligned block of k pages around the
//                        fault (k = 4, 16, 32): with one UFFDIO_COPY of the k-page run (what
//                        grouped units would allow, issue 18 items 6 and 2) or with k single-page
//                        copies (neighbours that are not adjacent in memory, as units with guard
//                        pages are); per page installed, so k = 1 is the line above
//   read fault           first touch (a read) of a missing page through fault_space, trivial fill
//   write fault          first touch is a write: filled and mapped writable and dirty at once
//   first write          write to a resident clean page (the write-tracking cost)
//   take_dirty           collect and re-arm N written pages, every other page of 2N resident ones
//   install              eager install() from normal code
//   memfd page cache     issue 18 item 2's other lead: swizzled pages kept in a memfd, which
//                        the program maps shared. Per page, in file order and in a random
//                        order: a missing page filled by UFFDIO_COPY (as today, but into
//                        shmem); a page present in the memfd mapped by UFFDIO_CONTINUE from a
//                        minor-fault handler (MODE_MINOR: the trap kept, the copy saved); the
//                        same page mapped by the kernel with no handler (its fault-around maps
//                        up to 16 present pages a fault); and what putting a page into the
//                        memfd costs a loader (a copy through a second mapping of it)
//   fault delivery       Texas's fault loop (Kakkad 1997, Table 7.1): the handler counts the
//                        fault and returns without resolving it, so the access faults again at
//                        once; the kernel's delivery of a fault to a user handler and back, for
//                        SIGBUS (userfaultfd) and SIGSEGV (PROT_NONE). `--delivery` runs only this.
//
// Each figure is the median of --runs runs over --pages pages (default 16,667),
// timed by the CPU time of the measuring thread (user + system: what the fault
// path costs even on a busy machine), or by the wall clock with --clock wall.
// Usage: fault_bench [--pages N] [--runs R] [--clock cpu|wall] [--delivery]

#include "vm/uapi.hpp"
#include "vm/vm.hpp"

#include <fcntl.h>
#include <linux/falloc.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

namespace {

using namespace steppe::vm;
std::size_t g_pages = 16'667;
int g_runs = 5;
clockid_t g_clock = CLOCK_THREAD_CPUTIME_ID;

double now() {
    timespec t{};
    clock_gettime(g_clock, &t);
    return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) * 1e-9;
}

double median(std::vector<double> values) {
    std::sort(values.begin(), values.end());
    return values[values.size() / 2];
}

// Runs `prepare` untimed and `measure` timed, `g_runs` times; the median in seconds.
double time_median(const std::function<void()>& prepare, const std::function<void()>& measure) {
    std::vector<double> seconds;
    for (int run = 0; run < g_runs; ++run) {
        prepare();
        const double start = now();
        measure();
        seconds.push_back(now() - start);
    }
    return median(seconds);
}

void touch_read(std::uintptr_t base, std::size_t pages, std::size_t stride = 1) {
    for (std::size_t i = 0; i < pages; i += stride) (void)*reinterpret_cast<volatile char*>(base + i * page_size);
}

void touch_write(std::uintptr_t base, std::size_t pages, std::size_t stride = 1) {
    for (std::size_t i = 0; i < pages; i += stride) *reinterpret_cast<volatile char*>(base + i * page_size) = 1;
}

// Bare userfaultfd: the floor the fault path is measured against.
namespace bare {

int g_uffd = -1;
alignas(page_size) std::byte g_zero_page[page_size];

void on_sigbus(int, siginfo_t* info, void*) {
    uffdio_copy copy{};
    copy.dst = reinterpret_cast<std::uintptr_t>(info->si_addr) & ~(page_size - 1);
    copy.src = reinterpret_cast<std::uintptr_t>(g_zero_page);
    copy.len = page_size;
    if (ioctl(g_uffd, UFFDIO_COPY, &copy) != 0 && errno != EEXIST) _exit(2);
}

// `bytes` of anonymous memory registered with a new userfaultfd (g_uffd) in
// SIGBUS mode, with `handler` for SIGBUS, or null if the kernel refuses.
void* open_area(std::size_t bytes, void (*handler)(int, siginfo_t*, void*), struct sigaction& previous) {
    g_uffd = static_cast<int>(syscall(SYS_userfaultfd, O_CLOEXEC));
    if (g_uffd < 0) return nullptr;
    uffdio_api api{};
    api.api = UFFD_API;
    api.features = UFFD_FEATURE_SIGBUS;
    if (ioctl(g_uffd, UFFDIO_API, &api) != 0) return nullptr;
    void* area = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    madvise(area, bytes, MADV_NOHUGEPAGE);
    uffdio_register reg{};
    reg.range.start = reinterpret_cast<std::uintptr_t>(area);
    reg.range.len = bytes;
    reg.mode = UFFDIO_REGISTER_MODE_MISSING;
    if (ioctl(g_uffd, UFFDIO_REGISTER, &reg) != 0) return nullptr;
    struct sigaction action{};
    action.sa_sigaction = handler;
    action.sa_flags = SA_SIGINFO;
    sigaction(SIGBUS, &action, &previous);
    return area;
}

void close_area(void* area, std::size_t bytes, const struct sigaction& previous) {
    sigaction(SIGBUS, &previous, nullptr);
    munmap(area, bytes);
    close(g_uffd);
}

double fault_seconds() {
    const std::size_t bytes = g_pages * page_size;
    struct sigaction previous{};
    void* area = open_area(bytes, on_sigbus, previous);
    if (!area) return -1;
    const double seconds = time_median([&] { madvise(area, bytes, MADV_DONTNEED); },
                                       [&] { touch_read(reinterpret_cast<std::uintptr_t>(area), g_pages); });
    close_area(area, bytes, previous);
    return seconds / static_cast<double>(g_pages);
}

// Fault-around: the handler fills the aligned block of g_run pages around
// the fault, in one copy (g_one_copy) or one copy per page.
std::size_t g_run = 1;
bool g_one_copy = true;
alignas(page_size) std::byte g_zero_run[32 * page_size];

void on_sigbus_around(int, siginfo_t* info, void*) {
    const std::uintptr_t block = g_run * page_size;
    const std::uintptr_t start = reinterpret_cast<std::uintptr_t>(info->si_addr) & ~(block - 1);
    for (std::size_t done = 0; done < g_run;) {
        const std::size_t pages = g_one_copy ? g_run : 1;
        uffdio_copy copy{};
        copy.dst = start + done * page_size;
        copy.src = reinterpret_cast<std::uintptr_t>(g_zero_run);
        copy.len = pages * page_size;
        if (ioctl(g_uffd, UFFDIO_COPY, &copy) != 0 && errno != EEXIST) _exit(2);
        done += pages;
    }
}

// Per page installed; the area is touched in order, so every block faults once.
double around_seconds(std::size_t run, bool one_copy) {
    g_run = run;
    g_one_copy = one_copy;
    const std::size_t pages = (g_pages + run - 1) / run * run, bytes = pages * page_size;
    struct sigaction previous{};
    void* area = open_area(bytes + 32 * page_size, on_sigbus_around, previous);
    if (!area) return -1;
    const std::uintptr_t base = (reinterpret_cast<std::uintptr_t>(area) + 32 * page_size - 1) & ~(32 * page_size - 1);
    const double seconds = time_median([&] { madvise(area, bytes + 32 * page_size, MADV_DONTNEED); },
                                       [&] { touch_read(base, pages); });
    close_area(area, bytes + 32 * page_size, previous);
    return seconds / static_cast<double>(pages);
}

}  // namespace bare

// A page cache of swizzled pages in a memfd: `view` is the program's shared
// mapping of it, `alias` a second one through which pages are put in. A
// missing page is filled as bare's are (bare::on_sigbus, bare::g_uffd).
namespace memfd_cache {

using bare::g_uffd;

void on_sigbus_continue(int, siginfo_t* info, void*) {
    uffdio_continue cont{};
    cont.range.start = reinterpret_cast<std::uintptr_t>(info->si_addr) & ~(page_size - 1);
    cont.range.len = page_size;
    if (ioctl(g_uffd, UFFDIO_CONTINUE, &cont) != 0 && errno != EEXIST) _exit(2);
}

// none: no handler, the kernel maps present pages; tracked: the same under
// write tracking by asynchronous write-protect (as the fault space's
// wp_async), which turns the kernel's fault-around off for the mapping
// (MADV_RANDOM does not: it steers read-ahead only).
enum class trap { none, tracked, missing, minor };

struct cache {
    std::size_t bytes = 0;
    int fd = -1;
    std::byte* view = nullptr;
    std::byte* alias = nullptr;
    bool uffd_open = false, handler_set = false;  // what the destructor undoes
    struct sigaction previous {};

    // False when the kernel refuses a step (no memfd, no minor-fault mode).
    bool open(std::size_t pages, trap mode) {
        bytes = pages * page_size;
        fd = memfd_create("fault_bench", MFD_CLOEXEC);
        if (fd < 0 || ftruncate(fd, static_cast<off_t>(bytes)) != 0) return false;
        view = static_cast<std::byte*>(mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0));
        alias = static_cast<std::byte*>(mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0));
        if (view == MAP_FAILED || alias == MAP_FAILED) return false;
        if (mode == trap::none) return true;
        g_uffd = static_cast<int>(syscall(SYS_userfaultfd, O_CLOEXEC));
        uffd_open = g_uffd >= 0;
        uffdio_api api{};
        api.api = UFFD_API;
        api.features = mode == trap::tracked ? UFFD_FEATURE_WP_HUGETLBFS_SHMEM | UFFD_FEATURE_WP_ASYNC
                                             : UFFD_FEATURE_SIGBUS | (mode == trap::minor ? UFFD_FEATURE_MINOR_SHMEM : 0);
        if (g_uffd < 0 || ioctl(g_uffd, UFFDIO_API, &api) != 0) return false;
        uffdio_register reg{};
        reg.range.start = reinterpret_cast<std::uintptr_t>(view);
        reg.range.len = bytes;
        reg.mode = mode == trap::minor     ? UFFDIO_REGISTER_MODE_MINOR
                   : mode == trap::tracked ? UFFDIO_REGISTER_MODE_WP
                                           : UFFDIO_REGISTER_MODE_MISSING;
        if (ioctl(g_uffd, UFFDIO_REGISTER, &reg) != 0) return false;
        if (mode == trap::tracked) return true;
        struct sigaction action{};
        action.sa_sigaction = mode == trap::minor ? on_sigbus_continue : bare::on_sigbus;
        action.sa_flags = SA_SIGINFO;
        handler_set = sigaction(SIGBUS, &action, &previous) == 0;
        return true;
    }
    void unmap_view() const { madvise(view, bytes, MADV_DONTNEED); }  // the memfd keeps its pages
    void fill_all() const {
        for (std::size_t at = 0; at < bytes; at += page_size) std::memcpy(alias + at, bare::g_zero_page, page_size);
    }
    void drop_all() const {  // out of the memfd too
        unmap_view();
        madvise(alias, bytes, MADV_DONTNEED);
        fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0, static_cast<off_t>(bytes));
    }
    ~cache() {
        if (handler_set) sigaction(SIGBUS, &previous, nullptr);
        if (uffd_open) close(g_uffd), g_uffd = -1;
        if (view && view != MAP_FAILED) munmap(view, bytes);
        if (alias && alias != MAP_FAILED) munmap(alias, bytes);
        if (fd >= 0) close(fd);
    }
};

// The pages in file order, or shuffled (a fixed seed): warm OO1 faults land
// on scattered pages, where the kernel's fault-around maps neighbours for
// nothing.
std::vector<std::size_t> page_order(std::size_t pages, bool random) {
    std::vector<std::size_t> order(pages);
    for (std::size_t i = 0; i < pages; ++i) order[i] = i;
    if (random) {
        std::uint64_t x = 88172645463325252ull;
        for (std::size_t i = pages; i > 1; --i) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            std::swap(order[i - 1], order[x % i]);
        }
    }
    return order;
}

void touch(const cache& c, const std::vector<std::size_t>& order) {
    for (std::size_t i : order) (void)*reinterpret_cast<volatile char*>(c.view + i * page_size);
}

long minor_faults() {
    rusage usage{};
    getrusage(RUSAGE_THREAD, &usage);
    return usage.ru_minflt;
}

// Per page touched: -1 where the kernel refuses. `faults`: the kernel's
// minor faults per page touched in the last run.
double touch_seconds(trap mode, bool present, bool random, double& faults) {
    cache c;
    if (!c.open(g_pages, mode)) return -1;
    const std::vector<std::size_t> order = page_order(g_pages, random);
    long faults_before = 0;
    const double seconds = time_median(
        [&] {
            if (present) {
                c.unmap_view();
                c.fill_all();
            } else {
                c.drop_all();
            }
            faults_before = minor_faults();
        },
        [&] { touch(c, order); });
    faults = static_cast<double>(minor_faults() - faults_before) / static_cast<double>(g_pages);
    return seconds / static_cast<double>(g_pages);
}

// What a loader pays to put a page into the memfd: a copy through the alias
// into a page the memfd allocates.
double put_seconds() {
    cache c;
    if (!c.open(g_pages, trap::none)) return -1;
    return time_median([&] { c.drop_all(); }, [&] { c.fill_all(); }) / static_cast<double>(g_pages);
}

void report() {
    std::printf("memfd page cache (issue 18 item 2), us/page touched, in file order / random order "
                "(the kernel's minor faults per page)\n");
    const auto line = [](const char* what, trap mode, bool present) {
        double in_order_faults = 0, random_faults = 0;
        const double in_order = touch_seconds(mode, present, false, in_order_faults);
        const double random = touch_seconds(mode, present, true, random_faults);
        if (in_order < 0 || random < 0) {
            std::printf("  %-58s refused by this kernel\n", what);
            return;
        }
        std::printf("  %-58s %6.2f / %6.2f (%.2f / %.2f)\n", what, in_order * 1e6, random * 1e6, in_order_faults,
                    random_faults);
    };
    line("missing page, SIGBUS + UFFDIO_COPY into shmem", trap::missing, false);
    line("present page, minor fault, SIGBUS + UFFDIO_CONTINUE", trap::minor, true);
    line("present page, mapped by the kernel (fault-around)", trap::none, true);
    line("present page, mapped by the kernel, uffd-wp async tracking", trap::tracked, true);
    const double put = put_seconds();
    if (put >= 0) std::printf("  %-58s %6.2f\n", "putting a page into the memfd (copy through an alias)", put * 1e6);
    std::printf("\n");
}

}  // namespace memfd_cache

// The fault loop: one page touched, its fault delivered `g_pages` times
// before the handler resolves it (maps a page for SIGBUS, unprotects for
// SIGSEGV). Wall time, as the delivery is kernel work.
namespace delivery {

std::atomic<long> g_left{0};

void on_sigbus(int signal, siginfo_t* info, void* context) {
    if (g_left.fetch_sub(1, std::memory_order_relaxed) > 1) return;  // not resolved: the access faults again
    bare::on_sigbus(signal, info, context);
}

void on_sigsegv(int, siginfo_t* info, void*) {
    if (g_left.fetch_sub(1, std::memory_order_relaxed) > 1) return;
    const std::uintptr_t page = reinterpret_cast<std::uintptr_t>(info->si_addr) & ~(page_size - 1);
    if (mprotect(reinterpret_cast<void*>(page), page_size, PROT_READ | PROT_WRITE) != 0) _exit(2);
}

double loop_seconds(const std::function<void()>& arm, void* page) {
    const clockid_t clock = g_clock;
    g_clock = CLOCK_MONOTONIC;
    const double seconds = time_median(
        [&] {
            arm();
            g_left.store(static_cast<long>(g_pages), std::memory_order_relaxed);
        },
        [&] { touch_read(reinterpret_cast<std::uintptr_t>(page), 1); });
    g_clock = clock;
    return seconds / static_cast<double>(g_pages);
}

double sigbus_seconds() {
    struct sigaction previous{};
    void* area = bare::open_area(page_size, on_sigbus, previous);
    if (!area) return -1;
    const double seconds = loop_seconds([&] { madvise(area, page_size, MADV_DONTNEED); }, area);
    bare::close_area(area, page_size, previous);
    return seconds;
}

double sigsegv_seconds() {
    void* page = mmap(nullptr, page_size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (page == MAP_FAILED) return -1;
    struct sigaction action{}, previous{};
    action.sa_sigaction = on_sigsegv;
    action.sa_flags = SA_SIGINFO;
    sigaction(SIGSEGV, &action, &previous);
    const double seconds = loop_seconds([&] { mprotect(page, page_size, PROT_NONE); }, page);
    sigaction(SIGSEGV, &previous, nullptr);
    munmap(page, page_size);
    return seconds;
}

}  // namespace delivery

bool trivial_fill(void*, std::uintptr_t page, std::byte* out) noexcept {
    std::memcpy(out, &page, sizeof page);  // the rest of the page is whatever the buffer held
    return true;
}

struct variant {
    backend_kind backend;
    tracking_kind tracking;
    std::string name() const { return std::string(to_string(backend)) + "/" + to_string(tracking); }
};

struct results {
    double read_fault = -1, write_fault = -1, first_write = -1, take_dirty = -1, install = -1;
};

results measure(const variant& v) {
    results r;
    auto space = fault_space::create(v.backend, trivial_fill, nullptr, v.tracking);
    const std::size_t pages = g_pages;
    const double n = static_cast<double>(pages);
    const std::uintptr_t base = space->reserve(2 * pages * page_size);
    const auto discard_all = [&] { space->discard(base, 2 * pages); };

    r.read_fault = time_median(discard_all, [&] { touch_read(base, pages); }) / n;
    r.write_fault = time_median(discard_all, [&] { touch_write(base, pages); }) / n;
    r.first_write = time_median(
                        [&] {
                            discard_all();
                            touch_read(base, pages);
                        },
                        [&] { touch_write(base, pages); }) /
                    n;
    // Every other page of 2N resident pages written: N runs of one page each.
    discard_all();
    touch_read(base, 2 * pages);
    space->take_dirty();
    std::size_t reported = 0;
    r.take_dirty = time_median([&] { touch_write(base, 2 * pages, 2); }, [&] { reported = space->take_dirty().size(); });
    if (reported != pages) std::fprintf(stderr, "%s: take_dirty reported %zu pages, not %zu\n", v.name().c_str(), reported, pages);

    std::vector<std::byte> content(page_size, std::byte{7});
    r.install = time_median(discard_all, [&] {
                    for (std::size_t i = 0; i < pages; ++i) space->install(base + i * page_size, content.data());
                }) / n;
    return r;
}

void print_cell(double value, double scale) {
    if (value < 0) {
        std::printf(" %14s", "-");
    } else {
        std::printf(" %14.2f", value * scale);
    }
}

}  // namespace

int main(int argc, char** argv) {
    bool delivery_only = false, odd = false;
    for (int i = 1; i < argc; ++i) {
        if (std::strcmp(argv[i], "--delivery") == 0) {
            delivery_only = true;
            continue;
        }
        if (i + 1 == argc) {
            odd = true;  // an option without its value
            break;
        }
        if (std::strcmp(argv[i], "--pages") == 0) g_pages = std::strtoul(argv[i + 1], nullptr, 10);
        if (std::strcmp(argv[i], "--runs") == 0) g_runs = std::atoi(argv[i + 1]);
        if (std::strcmp(argv[i], "--clock") == 0) {
            g_clock = std::strcmp(argv[i + 1], "wall") == 0 ? CLOCK_MONOTONIC : CLOCK_THREAD_CPUTIME_ID;
        }
        ++i;
    }
    if (g_pages == 0 || g_runs <= 0 || odd) {
        std::fprintf(stderr, "usage: fault_bench [--delivery] [--pages N] [--runs R] [--clock cpu|wall]\n");
        return 1;
    }
    // One line each, for bench/oo/harness/texas.py: wall time per delivered fault.
    const double segv = delivery::sigsegv_seconds();
    const double bus = kernel().uffd ? delivery::sigbus_seconds() : -1;
    std::printf("fault delivery (fault loop, %zu faults, median of %d runs, wall): SIGSEGV %.3f us/fault, "
                "SIGBUS (userfaultfd) %.3f us/fault\n",
                g_pages, g_runs, segv * 1e6, bus * 1e6);
    if (delivery_only) return 0;

    const kernel_support& k = kernel();
    std::printf("vm fault_bench: %zu pages, median of %d runs, %s time; kernel: uffd %s, WP %s, WP_ASYNC %s, "
                "PAGEMAP_SCAN %s\n\n",
                g_pages, g_runs, g_clock == CLOCK_MONOTONIC ? "wall" : "thread CPU", k.uffd ? "yes" : "no", k.uffd_wp ? "yes" : "no", k.wp_async ? "yes" : "no",
                k.pagemap_scan ? "yes" : "no");

    if (k.uffd) {
        std::printf("bare SIGBUS + UFFDIO_COPY, empty fill: %.2f us/fault\n", bare::fault_seconds() * 1e6);
        for (std::size_t run : {4, 16, 32})
            std::printf("bare fault-around, %2zu pages per fault: one UFFDIO_COPY %.2f us/page, %zu copies %.2f us/page\n",
                        run, bare::around_seconds(run, true) * 1e6, run, bare::around_seconds(run, false) * 1e6);
        std::printf("\n");
        memfd_cache::report();
    }

    std::vector<variant> variants;
    for (backend_kind backend : {backend_kind::uffd, backend_kind::mprotect}) {
        for (tracking_kind tracking : supported_tracking(backend)) variants.push_back({backend, tracking});
    }
    std::vector<results> measured;
    for (const variant& v : variants) measured.push_back(measure(v));

    std::printf("%-34s", "fault_space");
    for (const variant& v : variants) std::printf(" %14s", v.name().c_str());
    std::printf("\n");
    const auto row = [&](const char* label, double results::*field, double scale) {
        std::printf("%-34s", label);
        for (const results& r : measured) print_cell(r.*field, scale);
        std::printf("\n");
    };
    row("read fault, trivial fill (us/page)", &results::read_fault, 1e6);
    row("write fault on missing (us/page)", &results::write_fault, 1e6);
    row("first write to clean (us/page)", &results::first_write, 1e6);
    char take_dirty_label[64];
    std::snprintf(take_dirty_label, sizeof take_dirty_label, "take_dirty, %zu pages (ms)", g_pages);
    row(take_dirty_label, &results::take_dirty, 1e3);
    row("install() (us/page)", &results::install, 1e6);
    return 0;
}
