// detection::page_fault's trap path (protected_blocks.hpp). The handler
// (on_trap) runs in signal context: it reads the registers and the heap,
// waits on futexes, and writes two words; it never allocates, locks or
// throws (common/sigsafe.hpp). Everything that does runs on the service
// thread (serve) while the trapping thread waits.
#include "objects/protected_blocks.hpp"

#include <steppe/error.hpp>

#include <sys/mman.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <exception>

#include "common/sigsafe.hpp"
#include "common/started_thread.hpp"
#include "common/system_error.hpp"
#include "objects/object_heap.hpp"
#include "vm/vm.hpp"

namespace steppe::objects::detail {

namespace {

// ref<T>::resolve's check under page_fault (objects.hpp, detail::probe):
// `movq -16(%rax), %r11`, the only load the program makes through a word
// that may be a mirror address.
constexpr unsigned char check_instruction[] = {0x4C, 0x8B, 0x58, 0xF0};

std::uint32_t load(std::uint32_t& word) noexcept { return std::atomic_ref(word).load(std::memory_order_acquire); }
void store(std::uint32_t& word, std::uint32_t value) noexcept {
    std::atomic_ref(word).store(value, std::memory_order_release);
    common::futex_wake_all(word);
}

int thread_id() noexcept { return static_cast<int>(::syscall(SYS_gettid)); }

}  // namespace

protected_blocks::protected_blocks(std::uintptr_t heap_base, std::uint64_t heap_bytes, resolve_fn resolve, void* ctx,
                                   std::string store_path)
    : heap_(heap_base), bytes_(heap_bytes), resolve_(resolve), ctx_(ctx), path_(std::move(store_path)),
      owner_pid_(::getpid()) {
    void* p = vm::reserve_address_space(bytes_);
    if (p == MAP_FAILED)
        common::throw_system_error("mmap", errno, path_,
                                   "reserving the protected mirror of the object heap (" +
                                       std::to_string(bytes_ >> 20) + " MiB of address space, options::heap_limit)");
    mirror_ = reinterpret_cast<std::uintptr_t>(p);
    service_ = common::start_thread([this] { serve(); });
    try {
        vm::register_trap_range(mirror_, bytes_, on_trap, this);
    } catch (...) {
        stop();
        ::munmap(reinterpret_cast<void*>(mirror_), bytes_);
        throw;
    }
}

// The mirror stays reserved (a closed range): references kept past the
// store's close hold its addresses, and must not lead into a later store's.
protected_blocks::~protected_blocks() {
    vm::unregister_trap_range(mirror_);
    stop();
    vm::retire_range(mirror_, bytes_, path_, closed_references);
}

void protected_blocks::stop() noexcept {
    store(state_, stopping);
    if (service_.joinable()) service_.join();
}

std::uint64_t protected_blocks::traps() const noexcept {
    return std::atomic_ref(const_cast<std::uint64_t&>(traps_)).load(std::memory_order_relaxed);
}

void protected_blocks::hold_for_fork() noexcept {
    const timespec a_millisecond{0, 1'000'000};
    for (int waited_ms = 0; waited_ms < 1000; ++waited_ms) {
        std::uint32_t expected = 0;
        if (std::atomic_ref(busy_).compare_exchange_strong(expected, 1, std::memory_order_acquire)) {
            held_for_fork_ = true;
            return;
        }
        common::futex_wait(busy_, expected, &a_millisecond);
    }
}

void protected_blocks::release_after_fork() noexcept {
    if (!held_for_fork_) return;
    held_for_fork_ = false;
    store(busy_, 0);
}

// Signal context, on the thread whose check trapped.
bool protected_blocks::on_trap(void* ctx, std::uintptr_t address, void* ucontext) noexcept {
    auto& self = *static_cast<protected_blocks*>(ctx);
    if (::getpid() != self.owner_pid_)
        self.stray(address, "in a child forked from the process that opened the store, which cannot use it (fork "
                            "before opening the store, or exec)");
    if (thread_id() == std::atomic_ref(self.service_tid_).load(std::memory_order_acquire)) self.stray(address, "by the library itself (a bug: please report it)");
    greg_t* regs = static_cast<ucontext_t*>(ucontext)->uc_mcontext.gregs;
    const auto* at = reinterpret_cast<const unsigned char*>(regs[REG_RIP]);
    const std::uint64_t word = address + sizeof(header);
    if (std::memcmp(at, check_instruction, sizeof check_instruction) != 0 ||
        static_cast<std::uint64_t>(regs[REG_RAX]) != word)
        self.stray(address, "other than by a reference's residency check (was a reference's word copied out "
                            "and used as an address?)");
    header* block = self.readable(word);
    void* body;
    if (block->word & header::indirect) std::memcpy(&body, block + 1, sizeof body);
    else body = self.resolve_on_service_thread(block);
    regs[REG_RAX] = static_cast<greg_t>(reinterpret_cast<std::uintptr_t>(body));
    auto* slot = reinterpret_cast<std::uint64_t*>(regs[REG_RDX]);
    if (slot != nullptr && *slot == word) *slot = reinterpret_cast<std::uintptr_t>(body);
    std::atomic_ref(self.traps_).fetch_add(1, std::memory_order_relaxed);
    return true;
}

void* protected_blocks::resolve_on_service_thread(header* block) noexcept {
    for (std::uint32_t expected = 0;
         !std::atomic_ref(busy_).compare_exchange_strong(expected, 1, std::memory_order_acquire); expected = 0)
        common::futex_wait(busy_, 1);
    block_ = block;
    store(state_, posted);
    std::uint32_t now;
    while ((now = load(state_)) == posted) common::futex_wait(state_, posted);
    if (now == failed) {
        char text[1536];
        common::fixed_message message(text, sizeof text);
        message << "steppe: fatal: object store " << path_.c_str()
                << ": a reference led to an object that could not be read in, and under detection::page_fault the "
                   "check that found it is a trapped load, which cannot throw: "
                << message_ << "\n";
        common::fatal_exit(message.c_str());
    }
    void* body = body_;
    store(state_, idle);
    store(busy_, 0);
    return body;
}

[[noreturn]] void protected_blocks::stray(std::uintptr_t address, const char* why) const noexcept {
    char text[1024];
    common::fixed_message message(text, sizeof text);
    message << "steppe: fatal: object store " << path_.c_str() << ": address " << common::in_hex{address}
            << ", a fault block's protected address, was touched " << why << "\n";
    common::fatal_exit(message.c_str());
}

void protected_blocks::serve() {
    std::atomic_ref(service_tid_).store(thread_id(), std::memory_order_release);
    for (;;) {
        std::uint32_t now;
        while ((now = load(state_)) != posted && now != stopping) common::futex_wait(state_, now);
        if (now == stopping) return;
        try {
            body_ = resolve_(ctx_, block_);
            store(state_, done);
        } catch (const std::exception& e) {
            std::strncpy(message_, e.what(), sizeof message_ - 1);
            store(state_, failed);
        } catch (...) {
            std::strncpy(message_, "an exception that is no std::exception", sizeof message_ - 1);
            store(state_, failed);
        }
    }
}

}  // namespace steppe::objects::detail
