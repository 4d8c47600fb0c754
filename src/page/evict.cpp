// The eviction thread keeps resident store pages within the budget: it
// takes the oldest out a batch at a time, drops the clean ones (they cool
// first: cool(), cooling.hpp), and writes
// the ones the transaction in progress wrote to the log (as its frames,
// storage::spill) before dropping them, so a transaction that writes more
// existing pages than the budget holds runs in bounded memory
// (docs/design.md, "Larger than memory").
//
// Why a thread: a program that only reads or writes store memory calls no
// steppe function, so nothing but the fault handler runs, and the fault
// handler cannot unswizzle (it may throw, allocate, learn a vtable) or
// append to the log. It records each page it loads, wakes this thread
// through an eventfd (async-signal-safe) once past the budget, and far past
// it waits on a futex (with a timeout) for the thread to catch up.
//
// Why no write is lost, whichever thread writes: pages are taken with vm
// hold(), which claims each page and moves it aside with UFFDIO_MOVE where
// it can (uffd with userfaultfd write-protect tracking, Linux >= 6.8) or
// makes it read-only otherwise; a write to one meanwhile faults and waits
// until it is dropped (it then faults in again, from the log if it was
// spilled) or kept. (The faulting thread's own eviction, drop_oldest_clean,
// takes clean pages only, through vm evict_clean: see fault.cpp.)
#include "page/pager.hpp"

#include <pthread.h>
#include <sched.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <exception>
#include <system_error>

#include "common/memory_limit.hpp"
#include "common/sigsafe.hpp"
#include "common/started_thread.hpp"
#include "common/system_error.hpp"

namespace steppe::page {

namespace {

// The eviction thread never waits for itself (it touches no store page, but
// a bug there must not hang it).
[[gnu::tls_model("initial-exec")]] thread_local bool t_is_evictor = false;

}  // namespace

// R9: announced, then waits for the faults' drops under way, and for the
// load-ahead thread's page under way (R10; each takes microseconds and waits
// for nothing a pause holds).
pager::pause::pause(pager& p) : pager_(p) {
    pager_.evict_mutex_.lock();
    pager_.paused_.fetch_add(1, std::memory_order_seq_cst);
    while (pager_.fault_drops_.load(std::memory_order_seq_cst) != 0 ||
           pager_.loading_page_.load(std::memory_order_seq_cst))
        sched_yield();
}

pager::pause::~pause() {
    pager_.paused_.fetch_sub(1, std::memory_order_acq_rel);
    pager_.evict_mutex_.unlock();
}

void pager::hold_evictor_for_fork() noexcept {
    if (!evictor_) return;
    // try_lock, not lock: the forking thread holds steppe's list of open
    // stores, which a thread inside a pause might be waiting for.
    for (int waited_ms = 0; waited_ms < 1000; ++waited_ms) {
        if (evict_mutex_.try_lock()) {
            held_for_fork_ = true;
            return;
        }
        ::usleep(1000);
    }
}

void pager::release_evictor_after_fork() noexcept {
    if (!held_for_fork_) return;
    held_for_fork_ = false;
    evict_mutex_.unlock();
}

void pager::start_evictor() {
    auto s = std::make_unique<evictor>();
    s->wake_fd = ::eventfd(0, EFD_CLOEXEC);
    if (s->wake_fd < 0) common::throw_system_error("eventfd", errno, storage_->path() + ": starting the eviction thread");
    evictor_ = std::move(s);
    try {
        evictor_->thread = common::start_thread([this] { evict_loop(); });
    } catch (const std::system_error& e) {
        ::close(evictor_->wake_fd);
        evictor_.reset();
        throw error(errc::io, storage_->path() + ": starting the eviction thread: " + e.what());
    }
}

void pager::stop_evictor() noexcept {
    if (!evictor_) return;
    evictor_->stop.store(true, std::memory_order_release);
    const std::uint64_t one = 1;
    (void)!::write(evictor_->wake_fd, &one, sizeof one);
    evictor_->thread.join();
    ::close(evictor_->wake_fd);
    evictor_.reset();
}

void pager::forget_spill_failure() noexcept {
    if (evictor_) evictor_->spill_failed.store(false, std::memory_order_release);
}

void pager::ask_evictor() noexcept {
    if (evictor_->asked.exchange(true, std::memory_order_acq_rel)) return;
    const std::uint64_t one = 1;
    (void)!::write(evictor_->wake_fd, &one, sizeof one);  // cannot block: the count stays far below its limit
}

// A fault far over the budget waits (20 ms at a time, 1 s at most) while the
// eviction thread makes progress; never while a pause keeps it off, or once
// it is stalled (nothing it could take out), or on the eviction thread itself.
void pager::wait_for_evictor() noexcept {
    const std::uint64_t budget = ring_budget(), limit = budget + budget / 8 + 16;
    for (int round = 0; round < 50 && !t_is_evictor && resident_->size() > limit; ++round) {
        if (paused_.load(std::memory_order_acquire) > 0 || evictor_->stalled.load(std::memory_order_acquire)) return;
        const std::uint32_t seen = evictor_->batches.load(std::memory_order_acquire);
        ask_evictor();
        timespec timeout{0, 20'000'000};
        common::futex_wait(common::futex_word(evictor_->batches), seen, &timeout);
    }
}

void pager::evict_loop() {
    t_is_evictor = true;
    pthread_setname_np(pthread_self(), "steppe-evict");
    for (;;) {
        std::uint64_t count;
        if (::read(evictor_->wake_fd, &count, sizeof count) < 0) {
            if (errno == EINTR) continue;
            evictor_->stalled.store(true, std::memory_order_release);  // cannot happen on a valid eventfd
            return;
        }
        std::lock_guard<std::recursive_mutex> lock(evict_mutex_);
        if (evictor_->stop.load(std::memory_order_acquire)) return;
        evictor_->asked.store(false, std::memory_order_release);  // faults during the pass may ask again
        bool progress = false;
        try {
            trim_descriptors(true);  // faults that read groups back ask for this too
            if (opts_.follow_memory) follow_memory();
            refresh_budget();  // what metadata took since: faults map pages, reserve units
            // Asked for the descriptors only, it leaves the pages to the faulting
            // threads (their own drops interrupt no other CPU).
            progress = resident_->size() <= ring_budget() || evict_oldest(true);
        } catch (const std::exception&) {  // out of memory: the pages stay, the budget is exceeded
        }
        evictor_->stalled.store(!progress, std::memory_order_release);
        note_batch();
    }
}

// A budget taken from the process's memory limit at open (half of what was
// free then) follows it while the store runs: half of what this store holds
// and what the limit still leaves, the limit's file cache counted as free
// (the kernel takes it back before it kills), between an eighth of the
// open's budget (and what the store's metadata needs) and the open's. Two
// processes opening at once in one memory cgroup each took half of it, and
// one of two rewriting stores 4.5 times a 64 MiB cap was killed (a tester's
// finding); now each keeps about half of what the other leaves. Asked for by
// the fault path each time the ring grows by a sixteenth of the budget, and
// at each pass at most every 50 ms (a ring at its budget, churning, grows no
// more).
void pager::follow_memory() noexcept {
    const std::uint64_t now = common::monotonic_ns(), held_pages = resident_->size();
    if (held_pages < follow_at_.load(std::memory_order_relaxed) && now - followed_ns_ < 50'000'000) return;
    followed_ns_ = now;
    follow_at_.store(held_pages + std::max<std::uint64_t>(budget_ceiling_bytes_ / translate::page_size / 16, min_pages),
                     std::memory_order_relaxed);
    try {
        const common::memory_limit m = common::available_memory();
        const std::uint64_t held = held_pages * translate::page_size + metadata_bytes_;
        const std::uint64_t floor = std::min(
            budget_ceiling_bytes_, std::max(budget_ceiling_bytes_ / 8, metadata_bytes_ + 4 * min_pages * translate::page_size));
        budget_bytes_.store(std::clamp((held + m.available) / 2, floor, budget_ceiling_bytes_),
                            std::memory_order_relaxed);
    } catch (const std::exception&) {  // out of memory reading the limit: the budget stays
    }
}

// The eviction thread waits for the pause's mutex, and a program that
// allocates in a tight loop takes it back at once (the mutex is not fair),
// so past the budget the allocating thread, holding the pause already,
// evicts itself; so does a commit, whose new pages enter the ring at once.
void pager::evict_if_over_budget() noexcept {
    if (!resident_ || resident_->size() <= ring_budget()) return;
    try {
        evict_oldest(false);
    } catch (const std::exception&) {  // out of memory, as in evict_loop: the eviction thread tries again
        ask_evictor();
    }
}

void pager::note_batch() noexcept {
    evictor_->batches.fetch_add(1, std::memory_order_acq_rel);
    common::futex_wake_all(common::futex_word(evictor_->batches));
}

// Takes pages out of the residency ring, oldest first, a batch at a time,
// until it is a little under the budget (so eviction runs in batches). On
// the eviction thread (`only_what_was_over`), at most as many as were over
// that at the start: pages other threads fault in meanwhile are the next
// pass's, else a pass chases a walk page by page, and every page it takes
// interrupts the walking CPU (a walk under 64 MiB took 1.7x as long that
// way). A thread that evicts for its own allocations or commit goes on
// until it is under. False if it could not get there: nothing (more) could
// go. A batch is batch_pages(): written ones make one log write of at most
// 4 MiB (less under a small budget, whose memory the images count against),
// and few enough pages are held that writers wait little for them.
bool pager::evict_oldest(bool only_what_was_over) {
    const std::uint64_t target = ring_budget() * 15 / 16;
    const std::size_t batch_size = batch_pages();
    std::vector<std::uintptr_t> batch(batch_size);
    const std::uint64_t at_start = resident_->size(), over = at_start > target ? at_start - target : 0;
    std::uint64_t left = only_what_was_over ? over : ~std::uint64_t{0};
    for (;;) {
        trim_descriptors(true);  // descriptors come back while a pass runs
        const std::uint64_t size = resident_->size();
        if (size <= target || left == 0) return true;
        std::size_t n = resident_->take_oldest(batch.data(), std::min<std::uint64_t>({batch_size, size - target, left}));
        if (n == 0) {  // a fault is recording the oldest page right now
            sched_yield();
            continue;
        }
        // Pages that came back lately go round again, each taking one of its
        // two chances (reuse_history); a chance comes back only with a page
        // that leaves and is read in again, so the pass ends.
        const std::size_t taken = n;
        const auto spared = [this](std::uintptr_t page) {
            if (!spare_reused(page)) return false;
            record_again(page);
            return true;
        };
        const auto end = std::remove_if(batch.begin(), batch.begin() + static_cast<long>(n), spared);
        n = static_cast<std::size_t>(end - batch.begin());
        left -= std::min<std::uint64_t>(left, n);
        if (n == 0) continue;
        std::sort(batch.begin(), batch.begin() + static_cast<long>(n));
        if (evict_batch(std::span<const std::uintptr_t>(batch.data(), n)) == 0 && n == taken) return false;
        note_batch();
    }
}

// T5 and T6 (pager.hpp) on the eviction thread: holds the pages (ascending),
// drops the clean ones, and writes the written ones to the log before
// dropping them; returns how many it dropped.
std::size_t pager::evict_batch(std::span<const std::uintptr_t> pages) {
    held_batch b{pages, std::vector<vm::fault_space::held>(pages.size()),
                 std::vector<const std::byte*>(pages.size()), std::vector<bool>(pages.size())};
    space_->hold(pages, b.how, b.contents);
    spill_written(b);
    return release_batch(b);
}

// The written pages of the batch go to the log as frames of the transaction
// in progress (T6); those that cannot are kept.
void pager::spill_written(held_batch& b) {
    std::vector<std::size_t> source_of;  // where in the batch each source is
    const std::vector<page_source> sources = spill_sources(b, source_of);
    if (sources.empty()) return;  // clean pages only: a process that only reads needs no buffer
    evict_buffer_.reserve(batch_pages() * translate::page_size);  // exactly a batch: resize alone may double
    evict_buffer_.resize(sources.size() * translate::page_size);
    std::vector<storage::page_image> images;
    const std::vector<unswizzled> done = unswizzle_pages(sources, evict_buffer_.data(), false, true, images);
    // Freed in this transaction (nothing to save, no reason to write it), or
    // a transient pointer or a new vtable (the commit reports or learns it).
    for (std::size_t k = 0; k < sources.size(); ++k)
        if (done[k] != unswizzled::image) b.keep[source_of[k]] = true;
    try {
        if (!images.empty()) storage_->spill(images);
    } catch (const std::exception&) {
        // A full disk, say: the commit meets it again and reports it. Until
        // the transaction ends, written pages stay and only clean ones go.
        evictor_->spill_failed.store(true, std::memory_order_release);
        for (std::size_t i = 0; i < b.pages.size(); ++i)
            if (b.how[i] == vm::fault_space::held::written) b.keep[i] = true;
        return;
    }
    note_spilled(images);
    spilled_pages_.fetch_add(images.size(), std::memory_order_relaxed);
}

// The written pages of the batch that may go to the log. Pages a failed
// commit collected (unwritten_: written, but their tracking re-armed; R2),
// clean new pages (R3) and, after a failed spill, all written pages are
// kept; a page hold() could not take is recorded again (R6).
std::vector<pager::page_source> pager::spill_sources(held_batch& b, std::vector<std::size_t>& source_of) {
    using held = vm::fault_space::held;
    std::vector<page_source> sources;
    for (std::size_t i = 0; i < b.pages.size(); ++i) {
        if (b.how[i] == held::none) {
            record_again(b.pages[i]);  // busy: next time
            continue;
        }
        b.keep[i] = std::binary_search(unwritten_.begin(), unwritten_.end(), b.pages[i]) ||
                    (b.how[i] == held::written && evictor_->spill_failed.load(std::memory_order_acquire)) ||
                    (b.how[i] == held::clean && is_new(b.pages[i]));
        if (b.how[i] == held::clean || b.keep[i]) continue;
        auto where = map_->lookup(b.pages[i]);
        if (where.what != translate::page_map::kind::page) {
            b.keep[i] = true;
            continue;
        }
        sources.push_back({where.page, b.contents[i]});
        source_of.push_back(i);
    }
    return sources;
}

// The end of T5 and T6: dropped pages become missing (the next touch fills
// them again, from the log if spilled, from the cooling pool if clean);
// kept ones go back as they were, and into the ring (R6).
std::size_t pager::release_batch(const held_batch& b) {
    std::size_t dropped = 0;
    for (std::size_t i = 0; i < b.pages.size(); ++i) {
        if (b.how[i] == vm::fault_space::held::none || b.keep[i]) continue;
        ++dropped;
        if (b.how[i] == vm::fault_space::held::clean) cool(b.pages[i], b.contents[i]);
        if (const auto where = map_->lookup(b.pages[i]); where.what == translate::page_map::kind::page)
            history_->left(where.page);
    }
    release_held(b);
    for (std::size_t i = 0; i < b.pages.size(); ++i)
        if (b.how[i] != vm::fault_space::held::none && b.keep[i]) resident_->record(b.pages[i]);
    return dropped;
}

// A held clean page cools (R7): its bytes cannot change while it is held,
// and a touch waits until release() dropped it, then finds it.
void pager::cool(std::uintptr_t page, const std::byte* contents) noexcept {
    const auto where = map_->lookup(page);
    if (!cooling_ || where.what != translate::page_map::kind::page) return;
    const std::size_t slot = cooling_->claim(where.page);
    if (slot == cooling::no_slot) return;
    std::memcpy(cooling_->bytes(slot), contents, translate::page_size);
    cooling_->settle(slot, where.page, true);
}

}  // namespace steppe::page
