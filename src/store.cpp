// steppe::store — the public API over an engine (engine/engine.hpp; today
// the page engine), plus what every engine shares:
//   - the internal open path (engine/open_internal.hpp): store::open with
//     the storage layer's file system given, for tests
//   - the fork check: a forked child may not use its parent's store
//   - exclusive_call: the calls one thread at a time may make
//   - the open-stores registry: which store steppe::allocator allocates in
//     (the container's, through the allocator copies it made, or the current
//     store), and which store frees memory or translates a pointer
//   - steppe::transaction, the scope guard: one live guard per store
//   - the STEPPE_STATS report at close
#include <steppe/steppe.hpp>
#include <pthread.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <utility>

#include "common/forsaken.hpp"
#include "common/hex.hpp"
#include "common/system_error.hpp"
#include "engine/engine.hpp"
#include "engine/open_internal.hpp"

namespace steppe {
namespace detail {

class store_impl {
public:
    store_impl(const std::string& path, const open_options& options, storage::env* io);
    ~store_impl();
    bool holds(const void* p) const { return engine_->holds(p); }
    bool opened_here() const noexcept;  // false in a child forked since
    void hold_threads_for_fork() noexcept {
        if (opened_here()) engine_->hold_threads_for_fork();
    }
    void release_threads_after_fork() noexcept {
        if (opened_here()) engine_->release_threads_after_fork();
    }
    std::uint64_t persistent_address(const void* p) const { return engine_->persistent_address(p); }
    void* translate(std::uint64_t address) {
        ensure_opened_here_fast();
        return engine_->translate(address);
    }

    void* allocate(const types::layout& layout, std::size_t count) {
        ensure_opened_here_fast();
        return engine_->make(layout, count);
    }
    void deallocate(void* object) {
        ensure_opened_here_fast();
        engine_->destroy(object);
    }
    void note_vtable(const void* object) {
        ensure_opened_here_fast();
        engine_->note_vtable(object);
    }
    void* find_root(std::string_view name, const types::layout& layout) {
        exclusive_call one(*this, "find_root", pid_check::cached);
        return engine_->find_root(name, layout);
    }
    void set_root(std::string_view name, const types::layout& layout, void* object) {
        exclusive_call one(*this, "set_root");
        engine_->set_root(name, layout, object);
    }
    bool remove_root(std::string_view name) {
        exclusive_call one(*this, "remove_root");
        return engine_->remove_root(name);
    }
    std::vector<root_info> roots() const {
        ensure_opened_here();
        return engine_->roots();
    }
    void commit() {
        exclusive_call one(*this, "commit");
        engine_->commit();
    }
    void rollback() {
        exclusive_call one(*this, "rollback");
        engine_->rollback();
    }
    void checkpoint() {
        exclusive_call one(*this, "checkpoint");
        engine_->checkpoint();
    }
    void backup(const std::string& dest) {
        exclusive_call one(*this, "backup");
        engine_->backup(dest);
    }
    void reuse_address_space() {
        exclusive_call one(*this, "reuse_address_space");
        engine_->reuse_address_space();
    }
    void refresh();
    // Exclusive, as refresh: a refresh on another thread would close the
    // engine it waits on.
    bool wait_for_commit(std::chrono::milliseconds timeout) {
        exclusive_call one(*this, "wait_for_commit");
        return engine_->wait_for_commit(timeout);
    }
    // store::transaction: at most one live guard; it follows its moves and
    // is told when the store closes.
    void begin_transaction(steppe::transaction* guard);
    void move_transaction(steppe::transaction* to) noexcept { guard_.store(to, std::memory_order_relaxed); }
    void end_transaction() noexcept { guard_.store(nullptr, std::memory_order_relaxed); }
    void close();
    store_stats stats() const {
        ensure_opened_here();
        return engine_->stats();
    }
    std::vector<type_usage> types() const {
        ensure_opened_here();
        return engine_->types();
    }
    std::vector<std::string> check() const {
        ensure_opened_here();
        return engine_->check();
    }
    const std::string& path() const { return engine_->path(); }
    const std::string& salvage_report() const { return engine_->salvage_report(); }

private:
    // fork: a child may not use its parent's store (docs/guarantees.md).
    // By getpid(): a child made without fork handlers (glibc's _Fork, clone)
    // still has its parent's g_pid. That is a system call, so the calls made
    // per object (make, destroy, translate, note_vtable) and find_root compare
    // g_pid: in such a child they touch the store's memory (or the program
    // does, through the root found), which ends it saying why. (By getpid(),
    // find_root took 180 ns where it took 53.)
    void ensure_opened_here() const;
    void ensure_opened_here_fast() const;
    [[noreturn]] void refuse_forked_child() const;
    // Checks the process, then claims the store for one of the calls one thread
    // at a time may make; a second thread gets an error instead of corrupting it.
    enum class pid_check { system_call, cached };
    class exclusive_call {
    public:
        exclusive_call(store_impl& s, const char* call, pid_check pid = pid_check::system_call) : s_(s) {
            if (pid == pid_check::system_call) s.ensure_opened_here();
            else s.ensure_opened_here_fast();
            const char* running = nullptr;
            if (!s.exclusive_.compare_exchange_strong(running, call, std::memory_order_acquire))
                throw error(errc::invalid_argument,
                            s.path() + ": " + call + " called while another thread is in " + running +
                                "; the root functions, commit, rollback, checkpoint and reuse_address_space must "
                                "not run while another thread uses the store (serialize them, e.g. with a mutex)");
        }
        ~exclusive_call() { s_.exclusive_.store(nullptr, std::memory_order_release); }
        exclusive_call(const exclusive_call&) = delete;
        exclusive_call& operator=(const exclusive_call&) = delete;

    private:
        store_impl& s_;
    };

    pid_t opener_;  // the process that opened the store
    open_options options_;  // as opened, for refresh
    storage::env* io_;
    // The call in progress of those one thread at a time may make (the root
    // functions, commit, rollback, checkpoint, reuse), or null.
    std::atomic<const char*> exclusive_{nullptr};
    std::atomic<steppe::transaction*> guard_{nullptr};  // the live transaction guard
    std::unique_ptr<engine> engine_;
};

namespace {

// Open stores, so memory is freed to the store that holds it, and each
// thread's current store for steppe::allocator. Never destroyed: a store
// held in a static object is closed by exit() after this file's statics
// would be (static destruction runs in reverse order of construction, and
// the order across files is unspecified), and closing leaves the list.
struct open_list {
    std::mutex mutex;
    std::vector<store_impl*> stores;
};
open_list& open_stores() {
    static auto* list = new open_list;
    return *list;
}
void leave_open_list(store_impl* s) {
    open_list& open = open_stores();
    std::lock_guard lock(open.mutex);
    open.stores.erase(std::find(open.stores.begin(), open.stores.end(), s));
}
thread_local store_impl* t_current = nullptr;

// This process's pid, renewed in a forked child by a fork handler: every
// store call compares it with its store's opener, and getpid() is a system
// call. The handlers also keep the open list's mutex whole across fork, and
// hold the open stores' threads between their passes while it happens
// (engine::hold_threads_for_fork); the child leaves its parent's stores
// alone (forsaken), so only the parent releases them.
std::atomic<pid_t> g_pid{0};
void lock_open_list() noexcept {
    open_stores().mutex.lock();
    for (store_impl* s : open_stores().stores) s->hold_threads_for_fork();
}
void unlock_open_list() noexcept {
    for (store_impl* s : open_stores().stores) s->release_threads_after_fork();
    open_stores().mutex.unlock();
}
void renew_pid_in_child() noexcept {
    g_pid.store(::getpid(), std::memory_order_relaxed);
    open_stores().mutex.unlock();
}
pid_t current_pid() {
    static std::once_flag once;
    std::call_once(once, [] {
        g_pid.store(::getpid(), std::memory_order_relaxed);
        if (int err = ::pthread_atfork(lock_open_list, unlock_open_list, renew_pid_in_child))
            common::throw_system_error("pthread_atfork", err, "registering steppe's fork handler");
    });
    return g_pid.load(std::memory_order_relaxed);
}

}  // namespace

store_impl::store_impl(const std::string& path, const open_options& options, storage::env* io)
    : opener_(current_pid()), options_(options), io_(io), engine_(open_page_engine(path, options, io)) {
    open_list& open = open_stores();
    std::lock_guard lock(open.mutex);
    open.stores.push_back(this);
    t_current = this;
}

store_impl::~store_impl() {
    try {
        close();
    } catch (const std::exception& e) {  // destructors report, never throw
        std::fprintf(stderr, "steppe: %s\n", e.what());
    }
}

// 1. the STEPPE_STATS report
// 2. leave the open list (steppe::allocator and the pointer lookups)
// 3. the engine closes (uncommitted changes go, the committed state is
//    checkpointed if the options ask for it)
void store_impl::close() {
    if (!engine_) return;
    if (steppe::transaction* guard = guard_.exchange(nullptr)) guard->store_ = nullptr;  // nothing left to roll back
    if (::getpid() != opener_) {  // a forked child (with fork handlers or not): leave the parent's store alone
        leave_open_list(this);
        if (t_current == this) t_current = nullptr;
        common::forsake(engine_);  // its destructor would write the parent's files (common/forsaken.hpp)
        return;
    }
    if (const char* env = std::getenv("STEPPE_STATS"); env && *env && std::strcmp(env, "0") != 0) {
        try {
            std::fprintf(stderr, "steppe: stats of %s at close:\n%s", path().c_str(), to_string(stats()).c_str());
        } catch (const std::exception&) {  // a report is not worth failing the close for
        }
    }
    leave_open_list(this);
    if (t_current == this) t_current = nullptr;
    std::unique_ptr<engine> closing = std::move(engine_);
    closing->close();
}

// In place where the engine can (the pages that did not change stay
// resident); else the new snapshot is opened before the old one closes, so
// a failed open leaves the store as it was (two read-only opens of one
// store may overlap).
void store_impl::refresh() {
    exclusive_call one(*this, "refresh");
    if (!options_.read_only)
        throw error(errc::invalid_argument, "refresh: store " + path() +
                                                " is open for writing and always sees its newest commit; refresh is "
                                                "for read-only stores");
    if (engine_->refresh_in_place()) return;
    std::unique_ptr<engine> next = open_page_engine(path(), options_, io_);
    std::swap(engine_, next);
    next->close();
}

void store_impl::begin_transaction(steppe::transaction* guard) {
    ensure_opened_here();
    steppe::transaction* live = nullptr;
    if (!guard_.compare_exchange_strong(live, guard))
        throw error(errc::invalid_argument,
                    "store " + path() + ": transaction() called while another transaction guard of this store is "
                                        "live; guards do not nest (commit or roll back the first, or move it)");
}

bool store_impl::opened_here() const noexcept { return g_pid.load(std::memory_order_relaxed) == opener_; }

void store_impl::ensure_opened_here() const {
    if (::getpid() != opener_) refuse_forked_child();
}

void store_impl::ensure_opened_here_fast() const {
    if (!opened_here()) refuse_forked_child();
}

void store_impl::refuse_forked_child() const {
    throw error(errc::invalid_argument,
                "store " + path() + " was opened by process " + std::to_string(opener_) + "; process " +
                    std::to_string(::getpid()) +
                    " is a child forked from it and cannot use it (fork before opening the store, or exec)");
}

namespace {
// The open store (of this process) whose memory holds p, or null. The
// current store is asked first, lock-free: the usual case.
store_impl* owner_of(const void* p) {
    if (t_current && t_current->opened_here() && t_current->holds(p)) return t_current;
    open_list& open = open_stores();
    std::lock_guard lock(open.mutex);
    for (store_impl* s : open.stores)
        if (s->opened_here() && s->holds(p)) return s;
    return nullptr;
}

// The allocators copied last on this thread and the allocator each copy
// goes back to (through copies of copies). libstdc++ copies a container's
// allocator into stack temporaries (a deque's map, a hash table's buckets,
// the new buffer of vector::assign or shrink_to_fit, a copy of a copy to
// ask max_size) and allocates through one of them a few copies later, so a
// handful of entries is plenty. Every allocator constructed at an address
// updates its entry, so an entry never speaks for an older object there.
struct copied_allocator {
    const void* at = nullptr;
    const void* origin = nullptr;
};
struct recent_copies {
    static constexpr std::size_t size = 16;
    copied_allocator entries[size] = {};
    std::size_t next = 0;  // the oldest entry, replaced next

    copied_allocator* find(const void* at) noexcept {
        for (copied_allocator& e : entries)
            if (e.at == at) return &e;
        return nullptr;
    }
};
thread_local recent_copies t_copies;
}  // namespace

void note_allocator_made(std::uintptr_t address) noexcept {
    if (copied_allocator* e = t_copies.find(reinterpret_cast<const void*>(address))) *e = {};
}

void note_allocator_copied(std::uintptr_t address, std::uintptr_t from_address) noexcept {
    const void* allocator = reinterpret_cast<const void*>(address);
    const void* from = reinterpret_cast<const void*>(from_address);
    const copied_allocator* source = t_copies.find(from);
    const void* origin = source ? source->origin : from;
    copied_allocator* e = t_copies.find(allocator);
    if (!e) {
        e = &t_copies.entries[t_copies.next];
        t_copies.next = (t_copies.next + 1) % recent_copies::size;
    }
    *e = {allocator, origin};
}

// docs/types.md, "Which store a container allocates in".
void* allocate_for(const void* allocator, const types::layout& layout, std::size_t count) {
    store_impl* s = owner_of(allocator);
    if (!s)
        if (const copied_allocator* copy = t_copies.find(allocator)) s = owner_of(copy->origin);
    if (!s) s = t_current;
    if (!s)
        throw error(errc::invalid_argument, "steppe::allocator<" + layout.name +
                                                ">: the container is in no open store and this thread has no current "
                                                "store (open one, or use steppe::use_store)");
    return s->allocate(layout, count);
}

std::uint64_t persistent_address_of(const void* p) noexcept {
    if (!p) return 0;
    if (t_current && t_current->holds(p)) return t_current->persistent_address(p);  // lock-free: the usual case
    open_list& open = open_stores();
    std::lock_guard lock(open.mutex);
    for (store_impl* s : open.stores)
        if (s->holds(p)) return s->persistent_address(p);
    return reinterpret_cast<std::uintptr_t>(p) | (std::uint64_t{1} << 63);
}

// steppe::pref (pref.hpp): translated by the store holding the pref, else
// by the current store, as allocate_for chooses.
void* pref_translate(const void* slot, std::uint64_t address) {
    store_impl* s = owner_of(slot);
    if (!s) s = t_current;
    if (!s)
        throw error(errc::invalid_argument,
                    "steppe::pref: a pref holding persistent address " + common::hex(address) +
                        " was dereferenced outside every open store while this thread has no current store (open "
                        "the store it came from, or name it with steppe::use_store)");
    return s->translate(address);
}

std::uint64_t pref_address(const void* slot, const void* target) {
    store_impl* target_store = owner_of(target);
    if (!target_store)
        throw error(errc::transient_pointer,
                    "steppe::pref: cannot refer to " + common::hex(reinterpret_cast<std::uintptr_t>(target)) +
                        ", which is in no open store (a pref holds a persistent address: only objects made with "
                        "store.make<T>() have one)");
    if (store_impl* slot_store = owner_of(slot); slot_store && slot_store != target_store)
        throw error(errc::transient_pointer,
                    "steppe::pref: a pref in store " + slot_store->path() + " cannot refer to " +
                        common::hex(reinterpret_cast<std::uintptr_t>(target)) + ", an object of store " +
                        target_store->path() + " (a persistent address means something only in its own store)");
    return target_store->persistent_address(target);
}

void deallocate_anywhere(void* object) noexcept {
    if (store_impl* owner = owner_of(object)) owner->deallocate(object);  // a forked child frees nothing of its parent's
}

// The one way into store's private constructor besides store::open.
struct store_access {
    static store open(const std::string& path, const open_options& options, storage::env* io) {
        return store(std::make_unique<store_impl>(path, options, io));
    }
};

store open_with_env(const std::string& path, const open_options& options, storage::env* io) {
    return store_access::open(path, options, io);
}

}  // namespace detail

store::store(std::unique_ptr<detail::store_impl> impl) : impl_(std::move(impl)) {}
store::store(store&&) noexcept = default;
store& store::operator=(store&&) noexcept = default;
store::~store() = default;

detail::store_impl& store::impl(const char* call) const {
    if (!impl_)
        throw error(errc::invalid_argument, std::string("store: ") + call +
                                                " on a closed store (closed, or moved from): open the store again, "
                                                "or call it on the store it was moved to");
    return *impl_;
}

void* engine::translate(std::uint64_t) {
    throw error(errc::unsupported, "steppe::pref is translated by the page engine's page map; this store's engine "
                                   "has none");
}

namespace {
// Opened as the CLI opens stores (no program classes needed), not through a
// store: nothing of the program's may point into it while it is replaced.
// Either engine's store, by the storage meta's magic (the page engine
// refuses the object engine's). Migration changes the stored types: they are
// compared with the program's after its plan (run_migration), not before.
std::unique_ptr<engine> open_to_rewrite(const std::string& path, storage::env* io, bool match_program,
                                        std::uint64_t resident_budget) {
    open_options o;
    o.create = false;
    o.resident_budget = resident_budget;
    o.checkpoint_on_close = false;
    try {
        return open_page_engine(path, o, io, match_program);
    } catch (const error& failed) {
        if (failed.code() != errc::unsupported ||
            std::string_view(failed.what()).find("made by the object engine") == std::string_view::npos)
            throw;
        return open_object_engine(path, o, io, match_program);
    }
}
}  // namespace

compact_report detail::compact_with_env(const std::string& path, const compact_options& options, storage::env* io) {
    return open_to_rewrite(path, io, true, options.resident_budget)->compact(options);
}

compact_report compact(const std::string& path, const compact_options& options) {
    return detail::compact_with_env(path, options, nullptr);
}

migrate_report detail::migrate_with_env(const std::string& path, const migration& m, const migrate_options& options,
                                        storage::env* io) {
    return open_to_rewrite(path, io, false, options.resident_budget)->migrate(m, options);
}

migrate_report migrate(const std::string& path, const migration& m, const migrate_options& options) {
    return detail::migrate_with_env(path, m, options, nullptr);
}

store store::open(const std::string& path, const open_options& options) {
    return detail::open_with_env(path, options, nullptr);
}

void* store::allocate(const types::layout& layout, std::size_t count) {
    return impl("make").allocate(layout, count);
}
void store::deallocate(void* object) { impl("destroy").deallocate(object); }
void store::note_vtable(const void* object) { impl("make").note_vtable(object); }
void* store::find_root_raw(std::string_view name, const types::layout& layout) {
    return impl("find_root").find_root(name, layout);
}
void store::set_root_raw(std::string_view name, const types::layout& layout, void* object) {
    impl("set_root").set_root(name, layout, object);
}
bool store::remove_root(std::string_view name) { return impl("remove_root").remove_root(name); }
std::vector<root_info> store::roots() const { return impl("roots").roots(); }
void store::commit() { impl("commit").commit(); }
void store::rollback() { impl("rollback").rollback(); }
void store::checkpoint() { impl("checkpoint").checkpoint(); }
void store::backup(const std::string& dest) { impl("backup").backup(dest); }
void store::close() {
    if (!impl_) return;  // closed already, or moved from
    std::unique_ptr<detail::store_impl> closing = std::move(impl_);
    closing->close();
}
void store::reuse_address_space() { impl("reuse_address_space").reuse_address_space(); }
void store::refresh() { impl("refresh").refresh(); }
bool store::wait_for_commit(std::chrono::milliseconds timeout) {
    return impl("wait_for_commit").wait_for_commit(timeout);
}

steppe::transaction store::transaction() {
    steppe::transaction guard(&impl("transaction"));
    try {
        guard.store_->begin_transaction(&guard);
    } catch (...) {
        guard.store_ = nullptr;  // never live: nothing to roll back
        throw;
    }
    return guard;  // if not elided, the move constructor hands the registration over
}

transaction::transaction(transaction&& other) noexcept : store_(std::exchange(other.store_, nullptr)) {
    if (store_) store_->move_transaction(this);
}

transaction& transaction::operator=(transaction&& other) noexcept {
    if (this == &other) return *this;
    abandon();
    store_ = std::exchange(other.store_, nullptr);
    if (store_) store_->move_transaction(this);
    return *this;
}

transaction::~transaction() { abandon(); }

void transaction::ensure_active(const char* call) const {
    if (!store_)
        throw error(errc::invalid_argument, std::string("steppe::transaction::") + call +
                                                ": the guard has ended (committed, rolled back, moved from, or its "
                                                "store closed)");
}

void transaction::commit() {
    ensure_active("commit");
    store_->commit();
    end();
}

void transaction::rollback() {
    ensure_active("rollback");
    store_->rollback();
    end();
}

void transaction::end() noexcept {
    store_->end_transaction();
    store_ = nullptr;
}

void transaction::abandon() noexcept {
    if (!store_) return;
    try {
        store_->rollback();
    } catch (const std::exception& e) {  // destructors report, never throw
        std::fprintf(stderr, "steppe: rolling back an abandoned transaction: %s\n", e.what());
    }
    end();
}

store_stats store::stats() const { return impl("stats").stats(); }

std::string to_string(const store_stats& st) {
    char buf[2048];
    const auto u = [](std::uint64_t v) { return static_cast<unsigned long long>(v); };
    const auto kib = [](std::uint64_t bytes) { return static_cast<unsigned long long>((bytes + 1023) >> 10); };
    const store_memory& m = st.memory;
    std::snprintf(buf, sizeof buf,
                  "  backend             %s, write tracking %s\n"
                  "  faults              %llu pages loaded on first touch, %llu pointers swizzled\n"
                  "  miss time           %llu us reading pages, %llu us swizzling, %llu us in the rest of the "
                  "handler\n"
                  "  resident pages      %llu (budget %llu: %s), %llu written since the last commit\n"
                  "  evictions           %llu pages dropped to keep the budget, %llu of them spilled to the log first, %llu "
                  "cooled (%llu touched again while cooling, put back without a read)\n"
                  "  prefetched pages    %llu read-ahead hints, %llu then faulted in; %llu pages loaded ahead (%s)\n"
                  "  commits             %llu: %llu data pages, %llu pointers unswizzled, %llu bytes logged, %llu syncs\n"
                  "  checkpoints         %llu run, %llu put off by readers at older commits, %llu commits paused for "
                  "readers (%llu gave up)\n"
                  "  store pages         %llu (%llu free); heap descriptors: %llu groups of 84 dropped, %llu read back\n"
                  "  address space       %llu virtual pages reserved of %llu MiB; %llu reuse rounds gave back %llu arenas\n"
                  "  memory              %llu KiB of budget %llu KiB: store pages %llu, cooling %llu, heap %llu, page map %llu, "
                  "fault space %llu, residency %llu, types %llu, storage %llu, transaction %llu, buffers %llu (KiB)\n",
                  st.backend.c_str(), st.write_tracking.c_str(), u(st.faults), u(st.pointers_swizzled),
                  u(st.miss_io_ns / 1000), u(st.miss_swizzle_ns / 1000), u(st.miss_handler_ns / 1000),
                  u(st.resident_pages), u(st.resident_budget_pages), st.resident_budget_source.c_str(),
                  u(st.dirty_pages), u(st.evictions),
                  u(st.spilled_pages), u(st.cooled_pages), u(st.rewarmed_pages), u(st.prefetched_pages),
                  u(st.prefetch_hits), u(st.loaded_ahead_pages), st.load_ahead.c_str(), u(st.commits), u(st.pages_committed), u(st.pointers_unswizzled),
                  u(st.bytes_logged), u(st.syncs), u(st.checkpoints), u(st.checkpoints_deferred),
                  u(st.checkpoint_waits), u(st.checkpoint_waits_expired), u(st.store_pages), u(st.free_pages),
                  u(st.descriptor_groups_dropped), u(st.descriptor_groups_read_back), u(st.reserved_virtual_pages),
                  u(st.address_space_limit >> 20), u(st.reuse_rounds), u(st.reclaimed_arenas), kib(m.total()),
                  kib(st.resident_budget_pages * 4096), kib(m.store_pages), kib(m.cooling), kib(m.heap),
                  kib(m.page_map), kib(m.fault_space), kib(m.residency), kib(m.types), kib(m.storage),
                  kib(m.transaction), kib(m.buffers));
    std::string out = buf;
    if (st.server_round_trips != 0) {  // a store in PostgreSQL
        std::snprintf(buf, sizeof buf,
                      "  server              %llu round trips, %llu page fetches bringing %llu pages, %llu reads "
                      "from the cache file\n",
                      u(st.server_round_trips), u(st.server_fetches), u(st.server_pages_fetched),
                      u(st.cache_file_hits));
        out += buf;
    }
    return out;
}
std::vector<type_usage> store::types() const { return impl("types").types(); }
std::vector<std::string> store::check() const { return impl("check").check(); }
const std::string& store::path() const { return impl("path").path(); }
const std::string& store::salvage_report() const { return impl("salvage_report").salvage_report(); }

use_store::use_store(store& s) noexcept : previous_(detail::t_current) { detail::t_current = s.impl_.get(); }
use_store::~use_store() { detail::t_current = static_cast<detail::store_impl*>(previous_); }

}  // namespace steppe
