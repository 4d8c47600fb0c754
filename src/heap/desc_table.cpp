// The heap's descriptor groups: growing the slots, dropping a group and
// bringing it back (desc_table.hpp).
#include "heap/desc_table.hpp"

#include <sys/mman.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "common/crc32c.hpp"
#include "common/sigsafe.hpp"
#include "common/sparse_mapping.hpp"
#include "common/system_error.hpp"

namespace steppe::heap_detail {

desc_table::desc_table(desc_table&& other) noexcept { *this = std::move(other); }

desc_table& desc_table::operator=(desc_table&& other) noexcept {
    if (this == &other) return *this;
    release();
    base_ = std::exchange(other.base_, nullptr);
    capacity_ = std::exchange(other.capacity_, 0);
    size_.store(other.size_.exchange(0));
    state_ = std::move(other.state_);
    backing_ = std::move(other.backing_);
    source_ = std::exchange(other.source_, {});
    present_.store(other.present_.exchange(0));
    dropped_.store(other.dropped_.exchange(0));
    loaded_.store(other.loaded_.exchange(0));
    return *this;
}

desc_table::desc_table(const desc_table& other) : source_(other.source_) {
    resize(other.size());
    for (std::uint64_t g = 0; g < other.group_count(); ++g) {
        backing_[g] = other.backing_[g];
        if (other.is_present(g)) {
            std::memcpy(base_ + g * slot_bytes, other.base_ + g * slot_bytes, slot_bytes);
        } else {
            state_[g].store(absent, std::memory_order_relaxed);
            present_.fetch_sub(1, std::memory_order_relaxed);
        }
    }
}

desc_table::~desc_table() { release(); }

void desc_table::release() noexcept {
    if (base_) ::munmap(base_, capacity_ * slot_bytes);
    base_ = nullptr;
    capacity_ = 0;
}

// Room for 1/16 more at a time, as the vector it replaces had: a big store's
// descriptors would otherwise cost up to twice what they must in address
// space (the memory itself is only what is touched).
void desc_table::resize(std::uint64_t count) {
    if (count <= size()) return;
    const exclusive section(*this, exclusive::wait_forever);
    const std::uint64_t groups = (count + per_group - 1) / per_group;
    if (groups > capacity_) {
        const std::uint64_t room = groups + std::max<std::uint64_t>(groups / 16, 16);
        void* p = base_ ? ::mremap(base_, capacity_ * slot_bytes, room * slot_bytes, MREMAP_MAYMOVE)
                        : common::map_sparse(room * slot_bytes, PROT_READ | PROT_WRITE,
                                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (p == MAP_FAILED)
            common::throw_system_error(base_ ? "mremap" : "mmap", errno,
                                       "the heap's descriptor table (" + std::to_string(room) + " groups of 84 pages)");
        auto state = std::make_unique<std::atomic<std::uint8_t>[]>(room);
        auto backs = std::make_unique<source_page[]>(room);
        for (std::uint64_t g = 0; g < capacity_; ++g) {
            state[g].store(state_[g].load(std::memory_order_relaxed), std::memory_order_relaxed);
            backs[g] = backing_[g];
        }
        base_ = static_cast<std::byte*>(p);
        capacity_ = room;
        state_ = std::move(state);
        backing_ = std::move(backs);
    }
    for (std::uint64_t g = group_count(); g < groups; ++g) {  // new groups: present, all zero
        state_[g].store(present, std::memory_order_relaxed);
        present_.fetch_add(1, std::memory_order_relaxed);
    }
    size_.store(count, std::memory_order_release);
}

// seq_cst on both sides of the gate (here and in exclusive): a reading
// either sees the section closed and backs off, or the section sees it
// counted and waits for it.
desc_table::reading::reading(const desc_table& t) noexcept : table_(t) {
    for (;;) {
        table_.readers_.fetch_add(1, std::memory_order_seq_cst);
        if (!table_.closed_.load(std::memory_order_seq_cst)) return;
        table_.readers_.fetch_sub(1, std::memory_order_seq_cst);
        while (table_.closed_.load(std::memory_order_acquire)) sched_yield();
    }
}

// A reading is short (one page's pointers, a group read at most), and a
// reading thread waits for nothing the opener of a section holds; the bound
// is for a reader the scheduler put aside (more threads than CPUs), which a
// trim need not wait for: it gives up and the next one tries again.
desc_table::exclusive::exclusive(desc_table& t, std::uint64_t max_wait_ns) noexcept : table_(t) {
    table_.closed_.store(true, std::memory_order_seq_cst);
    const std::uint64_t start = common::monotonic_ns();
    while (table_.readers_.load(std::memory_order_seq_cst) != 0) {
        if (max_wait_ns != wait_forever && common::monotonic_ns() - start > max_wait_ns) {
            table_.closed_.store(false, std::memory_order_release);
            return;
        }
        sched_yield();
    }
    open_ = true;
}

desc_table::exclusive::~exclusive() {
    if (!open_) return;
    table_.give_back_pending();
    table_.closed_.store(false, std::memory_order_release);
}

void desc_table::drop(const exclusive& section, std::uint64_t group, std::uint64_t page, std::uint32_t crc) noexcept {
    if (!section || !source_ || state_[group].load(std::memory_order_relaxed) != present) return;
    backing_[group] = {page, crc};
    state_[group].store(absent, std::memory_order_release);
    if (pending_count_ != 0 && pending_first_ + pending_count_ != group) give_back_pending();
    if (pending_count_ == 0) pending_first_ = group;
    ++pending_count_;
    present_.fetch_sub(1, std::memory_order_relaxed);
    dropped_.fetch_add(1, std::memory_order_relaxed);
}

// One madvise per run of dropped groups (a trim's hand goes round them in
// order). MADV_DONTNEED on private anonymous memory cannot fail for a
// mapped, page-aligned range; if it did, the slots would only stay in memory.
void desc_table::give_back_pending() noexcept {
    if (pending_count_ == 0) return;
    ::madvise(base_ + pending_first_ * slot_bytes, pending_count_ * slot_bytes, MADV_DONTNEED);
    pending_count_ = 0;
}

// Async-signal-safe (the fault path gets here). The thread whose CAS wins
// reads the group; the others wait for it, yielding.
void desc_table::bring_back(std::uint64_t group) const noexcept {
    auto& state = state_[group];
    for (;;) {
        std::uint8_t s = state.load(std::memory_order_acquire);
        if (s == present) return;
        if (s == loading) {
            sched_yield();
            continue;
        }
        if (state.compare_exchange_strong(s, loading, std::memory_order_acquire)) break;
    }
    if (!source_) cannot_bring_back(group, "the heap has no source to read it from");
    std::byte* slot = base_ + group * slot_bytes;
    char why[320];
    why[0] = '\0';
    if (!source_.read(source_.context, backing_[group].page, slot, why, sizeof why)) cannot_bring_back(group, why);
    std::uint32_t stored;
    std::memcpy(&stored, slot + 4, sizeof stored);
    if (stored != backing_[group].crc || common::crc32c(0, slot + 8, slot_bytes - 8) != stored)
        cannot_bring_back(group, "its checksum is not the one this process wrote or read for it (the store changed "
                                 "under the process, or the disk returned other bytes)");
    present_.fetch_add(1, std::memory_order_relaxed);
    loaded_.fetch_add(1, std::memory_order_relaxed);
    state.store(present, std::memory_order_release);
}

// A group read and checked before cannot be read again: the process cannot
// go on (the access asking for it may be a fault, which cannot throw).
void desc_table::cannot_bring_back(std::uint64_t group, const char* why) const noexcept {
    static char buf[1024];
    common::fixed_message msg(buf, sizeof buf);
    msg << "steppe: fatal: cannot read back the heap's descriptors of pages " << group * per_group << " to "
        << (group + 1) * per_group - 1 << " from metadata page " << backing_[group].page << ": " << why
        << ". The access that needed them cannot go on, so the process ends; run `steppe check` on the store to "
           "see the damage.\n";
    common::fatal_exit(buf);
}

std::uint64_t desc_table::memory_bytes() const noexcept {
    return present_groups() * slot_bytes + capacity_ * (sizeof(std::atomic<std::uint8_t>) + sizeof(source_page));
}

}  // namespace steppe::heap_detail
