// Loading ahead (pager_options::load_ahead): a thread that makes a store's
// pages resident before the program touches them.
//
// Why: a page the program meets for the first time costs a fault, a read, a
// checksum and a swizzle (5-12 us warm, docs/benchmarks.md, "A miss, split
// into its parts"), where an mmap store pays a kernel minor fault (~1 us) —
// so the second query of a run, which touches pages the first did not, is
// many times slower than the mmap peers'. A store that fits in memory with
// room to spare can have all of that done once, off the program's thread:
// each page is loaded exactly as its first touch would load it (the fault
// space's fill_ahead calls the same fill_page), so it is checked against its
// checksum before anything can read it (guarantee 5), its pointers are
// swizzled and its writes tracked as for a touched page, and a touch during
// the load waits for it as for another thread's fault.
//
// How it keeps out of the way:
//   - it runs only while every page fits in a quarter of the budget, and
//     its units and guards in a quarter of the address space, and stops
//     when the ring holds half the budget or half the address space is
//     reserved (a program faulting meanwhile may take the rest);
//   - it never loads while a pause is in force (R10 in pager.hpp), so
//     commits, allocations, rollbacks and refreshes never overlap a load,
//     and a pause waits for one page at most;
//   - it reads the main file's bytes of each batch into the page cache
//     first, holding nothing, so that neither a pause nor a touch of a page
//     it claimed waits for its disk reads; and it goes to the disk only
//     when no read of the program's has waited for it in the last 2 ms
//     (storage::waited_reads): a cold program's reads are synchronous, one
//     at a time, and any read of the loader's in the device queue between
//     two of them delays the next (measured: the loader's reads alone, at
//     the idle I/O priority, made a cold OO1 traversal of a 385 MB store
//     1.6-2x as long), while pages already in the page cache cost it no
//     I/O at all; only a main file of up to 64 MiB is asked for whole when
//     it starts, which the first operation pays for in a few milliseconds;
//   - under the mprotect backend, only while the store's pages need fewer
//     mappings than a quarter of vm.max_map_count;
//   - a page it cannot load (a damaged page, a bad pointer, no address
//     space left, a mapping the kernel refuses) is refused, not fatal: the thread stops there, and a
//     touch of that page reports it as a fault always does, so a store with
//     a damaged page the program never touches works as it did without it.
#include "page/pager.hpp"

#include <fcntl.h>
#include <pthread.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdio>
#include <vector>

#include "common/started_thread.hpp"
#include "storage/file_format.hpp"

namespace steppe::page {

namespace detail {
[[gnu::tls_model("initial-exec")]] thread_local bool loading_ahead = false;
}  // namespace detail

namespace {
// Pages read into the page cache at a time: 128 KiB.
constexpr int load_batch = 32;
// A main file up to this size is asked for whole when loading starts.
constexpr off_t whole_file_bytes = off_t{64} << 20;

// ioprio_set(2): <linux/ioprio.h> is not in every distribution's headers.
constexpr int ioprio_who_process = 1, ioprio_class_idle = 3, ioprio_class_shift = 13;
// The program's reads count as under way while one waited this recently.
constexpr useconds_t quiet_us = 2000;

// cachestat(2), Linux >= 6.5; Debian bookworm's headers lack it.
constexpr long sys_cachestat = 451;
struct cachestat_range {
    std::uint64_t off, len;
};
struct cachestat {
    std::uint64_t nr_cache, nr_dirty, nr_writeback, nr_evicted, nr_recently_evicted;
};

// Whether the page cache holds all of [offset, offset + bytes) of `fd`,
// asked without starting a read (a read with RWF_NOWAIT starts the
// kernel's read-ahead of what it misses). False where the kernel cannot say.
bool cached(int fd, std::uint64_t offset, std::uint64_t bytes) noexcept {
    cachestat_range range{offset, bytes};
    cachestat stat{};
    return ::syscall(sys_cachestat, fd, &range, &stat, 0) == 0 && stat.nr_cache * translate::page_size >= bytes;
}

// The kernel's limit on a process's mappings (the default where unreadable).
std::uint64_t max_map_count() {
    std::uint64_t limit = 65530;
    if (FILE* f = std::fopen("/proc/sys/vm/max_map_count", "re")) {
        if (std::fscanf(f, "%lu", &limit) != 1) limit = 65530;
        std::fclose(f);
    }
    return limit;
}
}  // namespace

void pager::start_loading_ahead() {
    if (!opts_.load_ahead || !resident_ || loader_) return;
    // A store that would crowd the budget, or the address space (each page
    // a unit and a guard), loads on touch only: the program needs the rest.
    if (heap_->page_count() > ring_budget() / 4) return load_state_.store(load_state::budget_too_small);
    if (heap_->page_count() * 2 > map_->limit_pages() / 4)
        return load_state_.store(load_state::address_space_too_small);
    // The mprotect backend maps each page it fills on its own (with its
    // guard, about two mappings a page): a tester's store of 15,000 pages
    // under vm.max_map_count = 20,000 had the loader reach the limit.
    if (space_->backend() == vm::backend_kind::mprotect && heap_->page_count() * 2 > max_map_count() / 4)
        return load_state_.store(load_state::map_count_too_small);
    // A store in PostgreSQL (no such file) is not loaded ahead: each page
    // would be a fetch from the server beside the program's.
    const int main_file = ::open(storage_->path().c_str(), O_RDONLY | O_CLOEXEC);
    if (main_file < 0) return load_state_.store(load_state::not_a_file);
    // Its reads bring what they ask for, no read-ahead past it into the disk queue.
    (void)::posix_fadvise(main_file, 0, 0, POSIX_FADV_RANDOM);
    // A small store is asked for whole at once, in the kernel's large reads:
    // OO1 large (38 MiB), warm iterations 0.27 ms against 0.80 without it, the
    // first operation ~3 ms (12 %) slower. A larger one, the first faults'
    // reads would queue behind seconds of it.
    struct stat st {};
    if (::fstat(main_file, &st) == 0 && st.st_size <= whole_file_bytes)
        (void)::posix_fadvise(main_file, 0, 0, POSIX_FADV_WILLNEED);
    try {
        auto l = std::make_unique<loader>();
        l->end = heap_->page_count();  // pages made later are resident already (S4)
        l->main_file = main_file;
        // Made here, not on the thread: a program that forks right after
        // open must not find the thread inside the allocator.
        for (std::uint64_t first = 1; first < l->end; first += load_batch) l->batches.push_back(first);  // 0: header
        l->left.reserve(l->batches.size());
        l->scratch.resize((load_batch + 2) * translate::page_size);  // a batch, and the checksum slots it may span
        loader_ = std::move(l);
        load_state_.store(load_state::loading);
        loader_->thread = common::start_thread([this] { load_loop(); });
    } catch (const std::exception&) {  // no memory or no thread: pages load on touch, as without the option
        if (loader_) {
            stop_loading_ahead();
        } else {
            ::close(main_file);
        }
        load_state_.store(load_state::no_thread);
    }
}

void pager::stop_loading_ahead() noexcept {
    if (!loader_) return;
    loader_->stop.store(true, std::memory_order_release);
    if (loader_->thread.joinable()) loader_->thread.join();
    ::close(loader_->main_file);
    loader_.reset();
}

std::string pager::describe_load_ahead() const {
    const std::string pages = std::to_string(heap_->page_count());
    switch (load_state_.load()) {
        case load_state::off: return "off";
        case load_state::budget_too_small:
            return "not started: the store's " + pages + " pages pass a quarter of the budget's " +
                   std::to_string(ring_budget()) + " (open_options::resident_budget)";
        case load_state::address_space_too_small:
            return "not started: the store's " + pages + " pages and their guards pass a quarter of the " +
                   std::to_string(map_->limit_pages()) + " pages of address space (open_options::address_space_limit)";
        case load_state::map_count_too_small:
            return "not started: under the mprotect fault backend the store's " + pages +
                   " pages need about two mappings each, more than a quarter of vm.max_map_count (" +
                   std::to_string(max_map_count()) + ")";
        case load_state::not_a_file: return "not started: the store is not in a file";
        case load_state::no_thread: return "not started: no memory or no thread for it";
        case load_state::loading: return "loading";
        case load_state::done: return "done";
        case load_state::refused:
            return "stopped at page " + std::to_string(load_page_.load()) +
                   ", which it could not load (a touch of it reports why)";
        case load_state::budget_half_full: return "stopped: half the budget is resident";
        case load_state::address_space_half_full: return "stopped: half the address space is reserved";
        case load_state::closed: return "stopped: the store closed";
    }
    return "unknown";
}

void pager::load_loop() noexcept {
    detail::loading_ahead = true;
    pthread_setname_np(pthread_self(), "steppe-load");
    // Its CPU priority stays the program's: a pause waits for the page under
    // way (R10), and a lower-priority loader preempted on a busy CPU held
    // commits up for ~110 ms at nice 10 (0.03-0.06 ms p99 without it). Its
    // disk reads hold nothing up: the idle class.
    (void)::syscall(SYS_ioprio_set, ioprio_who_process, 0, ioprio_class_idle << ioprio_class_shift);
    std::vector<std::uint64_t>& batches = loader_->batches;
    std::vector<std::uint64_t>& left = loader_->left;
    std::vector<std::byte>& scratch = loader_->scratch;
    while (!batches.empty()) {
        left.clear();
        for (const std::uint64_t first : batches) {
            const std::uint64_t count = std::min<std::uint64_t>(load_batch, loader_->end - first);
            const brought b = bring_in(first, count, scratch);
            if (b == brought::stopped) return load_state_.store(load_state::closed);
            if (b == brought::later) {
                left.push_back(first);
            } else if (const load_state stop = load_pages_ahead(first, count); stop != load_state::loading) {
                return load_state_.store(stop);
            }
        }
        if (left.size() == batches.size()) ::usleep(quiet_us);  // the program keeps reading from the disk
        batches.swap(left);
    }
    load_state_.store(load_state::done);
}

// The pages of a batch, in order: `loading` to go on, else why it stops.
pager::load_state pager::load_pages_ahead(std::uint64_t first, std::uint64_t count) noexcept {
    bool crowded = false;
    if (!between_pauses([&] { crowded = map_->reserved_virtual_pages() >= map_->limit_pages() / 2; }))
        return load_state::closed;
    if (crowded) return load_state::address_space_half_full;
    for (std::uint64_t page = first; page < first + count; ++page) {
        if (resident_->size() >= ring_budget() / 2) return load_state::budget_half_full;
        loaded result = loaded::skipped;
        if (!between_pauses([&] { result = load_page_ahead(page); })) return load_state::closed;
        if (result == loaded::refused) {
            load_page_.store(page);
            return load_state::refused;
        }
    }
    return load_state::loading;
}

// The main file's bytes of pages [first, first + count) in the page cache,
// through the loader's own descriptor: now if they are there, or if the
// program's reads have not waited for the disk for quiet_us (the loader
// reads them then); else later. Errors and short reads are the fills' to
// report.
pager::brought pager::bring_in(std::uint64_t first, std::uint64_t count, std::vector<std::byte>& scratch) noexcept {
    const int fd = loader_->main_file;
    const std::uint64_t from = storage::physical_page(first), to = storage::physical_page(first + count - 1) + 1;
    const std::uint64_t offset = from * translate::page_size, bytes = (to - from) * translate::page_size;
    if (cached(fd, offset, bytes)) return brought::now;
    std::uint64_t waited = 0;
    if (!between_pauses([&] { waited = storage_->waited_reads(); })) return brought::stopped;
    const std::uint64_t now = common::monotonic_ns();
    if (waited != loader_->waited_reads) {
        loader_->waited_reads = waited;
        loader_->waited_reads_seen_ns = now;
    }
    if (now - loader_->waited_reads_seen_ns < std::uint64_t{quiet_us} * 1000) return brought::later;
    (void)!::pread(fd, scratch.data(), bytes, static_cast<off_t>(offset));
    return brought::now;
}

// R10 (pager.hpp): announced, then a pause looked for; under one, the
// thread waits for it to end (a commit may take seconds: it sleeps). False:
// stopped meanwhile, `f` not run.
template <class F>
bool pager::between_pauses(F&& f) noexcept {
    for (;;) {
        if (loader_->stop.load(std::memory_order_acquire)) return false;
        loading_page_.store(true, std::memory_order_seq_cst);
        if (paused_.load(std::memory_order_seq_cst) == 0) break;
        loading_page_.store(false, std::memory_order_release);
        while (paused_.load(std::memory_order_acquire) != 0 && !loader_->stop.load(std::memory_order_acquire))
            ::usleep(200);
    }
    loading_inside_.store(true, std::memory_order_relaxed);
    f();
    loading_inside_.store(false, std::memory_order_relaxed);
    loading_page_.store(false, std::memory_order_release);
    return true;
}

// A data page that is not resident is reserved (as a pointer to it met in
// a fault would reserve it) and filled.
pager::loaded pager::load_page_ahead(std::uint64_t page) noexcept {
    std::uintptr_t v;
    {
        const heap::descriptor_reading reading = heap_->reading_descriptors();
        const heap::page_desc* d = heap_->describe(page);
        if (!d || !d->is_data()) return loaded::skipped;
        v = map_->use(page);
        if (v == 0) v = reserve_data_page(page);
        if (v == 0) return loaded::refused;  // the address space is full: touches decide what to keep
    }
    switch (space_->fill_ahead(v)) {
        case vm::fault_space::ahead::filled:
            resident_->record(v);  // once mapped (R6): a mapping the kernel refuses leaves it out
            return loaded::done;
        case vm::fault_space::ahead::not_missing: return loaded::skipped;  // resident, or a touch took it first
        case vm::fault_space::ahead::refused: break;
    }
    return loaded::refused;
}

}  // namespace steppe::page
