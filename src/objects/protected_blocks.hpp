// detection::page_fault (Hosking & Moss's PF): fault blocks reached through
// protected pages, so the residency check is a load that traps instead of a
// test. The fault blocks themselves live in the object heap as under
// fault_block; what a reference holds for one is its address in a mirror of
// the heap, a PROT_NONE reservation of the same size: mirror address =
// heap address + offset. The program's only load through a reference is the
// check's (ref<T>::resolve: `movq -16(%rax), %r11`, the slot's address in
// rdx), so a trap is always that instruction, and the trap handler
// (vm::register_trap_range) turns it around:
//   1. an indirect block: rax := the object, the slot := the object;
//   2. a fault block: the service thread faults the object in (normal
//      context: the handler itself only waits on a futex, so it stays
//      async-signal-safe), then as 1;
//   3. the fault failed (a damaged segment): the process ends with the
//      error's message (exit 71): an exception cannot leave a trapped load.
// The library never loads through a mirror address: readable() gives the
// heap header of one.
//
// Slots swizzled to a fault block are re-pointed at the object when it
// comes in (swizzling::eager, the engine's source lists), so a stored
// reference traps once.
#pragma once

#include <steppe/objects.hpp>

#include <cstdint>
#include <string>
#include <thread>

namespace steppe::objects::detail {

class protected_blocks {
public:
    // Faults in the object the fault block `block` (a heap header) stands
    // for and returns its body; throws steppe::error. Runs on the service
    // thread while the trapping thread waits.
    using resolve_fn = void* (*)(void* ctx, header* block);

    // Mirrors the heap [heap_base, heap_base + heap_bytes).
    protected_blocks(std::uintptr_t heap_base, std::uint64_t heap_bytes, resolve_fn resolve, void* ctx,
                     std::string store_path);
    ~protected_blocks();
    protected_blocks(const protected_blocks&) = delete;
    protected_blocks& operator=(const protected_blocks&) = delete;

    bool is_mirror(std::uint64_t word) const noexcept { return word - mirror_ < bytes_; }
    std::uintptr_t mirror() const noexcept { return mirror_; }
    // The word a slot holds for the fault block `block`, and back.
    std::uint64_t word_of(const header* block) const noexcept {
        return reinterpret_cast<std::uintptr_t>(block + 1) + (mirror_ - heap_);
    }
    header* readable(std::uint64_t word) const noexcept {
        return header_of(reinterpret_cast<void*>(word - (mirror_ - heap_)));
    }

    std::uint64_t traps() const noexcept;

    // Around fork (the object engine's fork handlers): no trap is in flight
    // while the fork happens, so the service thread, waiting for the next,
    // holds no lock (the allocator's) a child could inherit. Takes the turn
    // a trapping thread takes (`busy`), waiting up to a second for a trap
    // being served; then the fork goes on without it.
    void hold_for_fork() noexcept;
    void release_after_fork() noexcept;

private:
    static bool on_trap(void* self, std::uintptr_t address, void* ucontext) noexcept;
    void* resolve_on_service_thread(header* block) noexcept;
    [[noreturn]] void stray(std::uintptr_t address, const char* why) const noexcept;
    void serve();
    void stop() noexcept;

    std::uintptr_t heap_, mirror_ = 0;
    std::uint64_t bytes_;
    resolve_fn resolve_;
    void* ctx_;
    std::string path_;
    int owner_pid_;

    // The one request in flight (the store is used by one thread at a
    // time; `busy` makes a second trapping thread wait its turn).
    enum : std::uint32_t { idle, posted, done, failed, stopping };
    std::uint32_t busy_ = 0;
    std::uint32_t state_ = idle;
    header* block_ = nullptr;
    void* body_ = nullptr;
    char message_[1024] = {};
    std::uint64_t traps_ = 0;
    bool held_for_fork_ = false;
    int service_tid_ = 0;
    std::thread service_;
};

}  // namespace steppe::objects::detail
