// The spill thread: when the pages a transaction wrote fill the resident
// budget, it writes them to the log as frames of the transaction in progress
// and drops them, so a transaction that writes more existing pages than the
// budget holds runs in bounded memory (docs/design.md, "Larger than memory").
//
// Why a thread: a program that only writes store memory calls no steppe
// function, so nothing but the fault handler runs, and the fault handler
// cannot unswizzle (it may throw, allocate, learn a vtable) or append to the
// log. It wakes this thread through an eventfd (async-signal-safe) and, far
// over the budget, waits for it on a futex with a timeout.
//
// Why no write is lost: a page is taken with vm hold(), which makes it
// read-only; a write to it meanwhile faults and waits until it is dropped
// (then it faults in again from the log) or kept.
#include "pager.hpp"

#include <linux/futex.h>
#include <pthread.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <exception>
#include <system_error>

#include "common/system_error.hpp"

namespace steppe {

namespace {

// The spill thread never waits for itself (it touches no store page, but a
// bug there must not hang it).
[[gnu::tls_model("initial-exec")]] thread_local bool t_is_spiller = false;

// Pages per log write: 4 MiB is one efficient sequential write, and few
// enough pages that writers wait little for the ones being held.
constexpr std::size_t spill_batch = 1024;

std::uint32_t* futex_word(std::atomic<std::uint32_t>& word) {
    static_assert(sizeof(std::atomic<std::uint32_t>) == sizeof(std::uint32_t));
    return reinterpret_cast<std::uint32_t*>(&word);
}

}  // namespace

pager::pause::pause(pager& p) : pager_(p) {
    pager_.spill_mutex_.lock();
    pager_.paused_.fetch_add(1, std::memory_order_acq_rel);
}

pager::pause::~pause() {
    pager_.paused_.fetch_sub(1, std::memory_order_acq_rel);
    pager_.spill_mutex_.unlock();
}

void pager::start_spiller() {
    auto s = std::make_unique<spiller>();
    s->wake_fd = ::eventfd(0, EFD_CLOEXEC);
    if (s->wake_fd < 0) common::throw_system_error("eventfd", errno, storage_.path() + ": starting the spill thread");
    spiller_ = std::move(s);
    try {
        spiller_->thread = std::thread([this] { spill_loop(); });
    } catch (const std::system_error& e) {
        ::close(spiller_->wake_fd);
        spiller_.reset();
        throw error(errc::io, storage_.path() + ": starting the spill thread: " + e.what());
    }
}

void pager::stop_spiller() noexcept {
    if (!spiller_) return;
    spiller_->stop.store(true, std::memory_order_release);
    const std::uint64_t one = 1;
    (void)!::write(spiller_->wake_fd, &one, sizeof one);
    spiller_->thread.join();
    ::close(spiller_->wake_fd);
    spiller_.reset();
}

void pager::forget_spill_failure() noexcept {
    if (spiller_) spiller_->failed.store(false, std::memory_order_release);
}

void pager::ask_spiller() noexcept {
    if (spiller_->asked.exchange(true, std::memory_order_acq_rel)) return;
    const std::uint64_t one = 1;
    (void)!::write(spiller_->wake_fd, &one, sizeof one);  // cannot block: the count stays far below its limit
}

// A fault far over the budget waits (20 ms at a time, 1 s at most) while the
// spill thread makes progress; never while a pause keeps it off, or after it
// failed, or on the spill thread itself.
void pager::wait_for_spiller() noexcept {
    const std::uint64_t budget = opts_.resident_budget_pages, limit = budget + budget / 8 + 16;
    for (int round = 0; round < 50 && !t_is_spiller && resident_->size() > limit; ++round) {
        if (paused_.load(std::memory_order_acquire) > 0 || spiller_->failed.load(std::memory_order_acquire)) return;
        const std::uint32_t seen = spiller_->batches.load(std::memory_order_acquire);
        ask_spiller();
        timespec timeout{0, 20'000'000};
        syscall(SYS_futex, futex_word(spiller_->batches), FUTEX_WAIT_PRIVATE, seen, &timeout, nullptr, 0);
    }
}

void pager::spill_loop() {
    t_is_spiller = true;
    pthread_setname_np(pthread_self(), "steppe-spill");
    for (;;) {
        std::uint64_t count;
        if (::read(spiller_->wake_fd, &count, sizeof count) < 0) {
            if (errno == EINTR) continue;
            spiller_->failed.store(true, std::memory_order_release);  // cannot happen on a valid eventfd
            return;
        }
        std::lock_guard<std::recursive_mutex> lock(spill_mutex_);
        if (spiller_->stop.load(std::memory_order_acquire)) return;
        spiller_->asked.store(false, std::memory_order_release);  // faults during the pass may ask again
        try {
            if (!spiller_->failed.load(std::memory_order_acquire)) spill_written_pages();
        } catch (const std::exception&) {
            spiller_->failed.store(true, std::memory_order_release);  // out of memory: the commit will say so
        }
    }
}

// Takes pages out of the residency ring, oldest first, until it is back
// under the fault path's target: clean ones are dropped, written ones held
// and spilled a batch at a time. Pages a failed commit collected (unwritten_)
// stay: they are written but their tracking was re-armed.
void pager::spill_written_pages() {
    const std::uint64_t target = opts_.resident_budget_pages * 15 / 16;
    while (resident_->size() > target && !spiller_->failed.load(std::memory_order_acquire)) {
        const std::uint64_t before = resident_->size();
        std::vector<std::uintptr_t> held;
        resident_->shrink_to(
            target,
            [&](std::uintptr_t page) {
                if (std::binary_search(unwritten_.begin(), unwritten_.end(), page)) return false;
                switch (space_->hold(page)) {
                case vm::fault_space::held::none:
                    return false;
                case vm::fault_space::held::clean:
                    space_->release(page, true);
                    return true;
                case vm::fault_space::held::written:
                    held.push_back(page);
                    return true;
                }
                return false;
            },
            [this](std::uintptr_t page) { return space_->is_resident(page); }, spill_batch);
        if (!held.empty()) spill_held(held);
        spiller_->batches.fetch_add(1, std::memory_order_acq_rel);
        syscall(SYS_futex, futex_word(spiller_->batches), FUTEX_WAKE_PRIVATE, INT32_MAX, nullptr, nullptr, 0);
        if (resident_->size() >= before) return;  // another evictor is at work, or nothing could go
    }
}

void pager::spill_held(const std::vector<std::uintptr_t>& held) {
    std::vector<std::byte> bytes(held.size() * translate::page_size);
    std::vector<storage::page_image> images;
    std::vector<std::uintptr_t> spilled, kept;
    for (std::uintptr_t v : held) {
        auto where = map_->lookup(v);
        const heap::page_desc* d =
            where.what == translate::page_map::kind::page ? heap_->describe(where.page) : nullptr;
        std::byte* image = bytes.data() + images.size() * translate::page_size;
        try {
            if (!d || !d->is_data()) {
                kept.push_back(v);  // freed in this transaction: nothing to keep, but no reason to write it
                continue;
            }
            unswizzle_into(where.page, reinterpret_cast<const std::byte*>(v), image, false);
            images.push_back({where.page, image});
            spilled.push_back(v);
        } catch (const error&) {
            kept.push_back(v);  // a transient pointer or a new vtable: the commit reports or learns it
        }
    }
    try {
        storage_.spill(images);
    } catch (const std::exception&) {
        spiller_->failed.store(true, std::memory_order_release);  // the commit meets it again and reports it
        kept.insert(kept.end(), spilled.begin(), spilled.end());
        spilled.clear();
    }
    for (std::size_t i = 0; i < spilled.size(); ++i) {
        space_->release(spilled[i], true);
        spilled_.insert(images[i].page);
    }
    spilled_pages_.fetch_add(spilled.size(), std::memory_order_relaxed);
    for (std::uintptr_t v : kept) {
        space_->release(v, false);
        resident_->record(v);
    }
}

}  // namespace steppe
