// steppe::engine — what a store asks of the engine that keeps its objects.
// The page engine (src/page/) implements it; an object engine will too. The
// store façade (store.cpp) adds what every engine shares: the fork check,
// one call at a time for the calls that need it, the open-stores registry
// (steppe::allocator) and the STEPPE_STATS report at close. So nothing here
// names an engine's own types: only the public API's and the type layouts.
//
// Threads: make, destroy, note_vtable, holds and persistent_address may run
// on several threads at once (the engine serializes what it must); the
// root functions, commit, rollback, checkpoint and reuse_address_space run
// one at a time (the façade's exclusive_call sees to it).
#pragma once

#include <steppe/steppe.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace steppe {

class engine {
public:
    virtual ~engine() = default;

    // Ends the transaction in progress, checkpoints if the options ask for
    // it and releases the files; the engine is unusable after.
    virtual void close() = 0;

    // Around fork (store.cpp's fork handlers): the engine's own threads are
    // held between their passes, so a forked child inherits none of the
    // locks they take inside one (an allocator without fork handlers, as
    // GCC 12's AddressSanitizer's, would leave the child's next allocation
    // waiting forever). Bounded: a thread that does not come to a stop in
    // time is left running.
    virtual void hold_threads_for_fork() noexcept {}
    virtual void release_threads_after_fork() noexcept {}

    // Is p inside this store's memory? (Lock-free.)
    virtual bool holds(const void* p) const noexcept = 0;
    // transient_pointer if p is not in the store.
    virtual std::uint64_t persistent_address(const void* p) const = 0;
    // Translate-at-use (steppe::pref): the address of the object at
    // persistent address `address`, reserving its page as a swizzled pointer
    // would; invalid_argument if it names no object of the store. An engine
    // without a page map has no such translation (unsupported).
    virtual void* translate(std::uint64_t address);

    virtual void* make(const types::layout& layout, std::size_t count) = 0;
    virtual void destroy(void* object) = 0;
    virtual void note_vtable(const void* object) = 0;

    virtual void* find_root(std::string_view name, const types::layout& layout) = 0;
    virtual void set_root(std::string_view name, const types::layout& layout, void* object) = 0;
    virtual bool remove_root(std::string_view name) = 0;
    virtual std::vector<root_info> roots() const = 0;

    virtual void commit() = 0;
    virtual void rollback() = 0;
    // store::refresh on a read-only store, without closing it: true once it
    // is at the newest commit, with what did not change kept in memory;
    // false (nothing changed) when the engine cannot, and the store opens
    // again instead. Errors as open's, the store then on its old snapshot.
    virtual bool refresh_in_place() { return false; }
    virtual void checkpoint() = 0;
    // store::wait_for_commit (storage::wait_for_commit).
    virtual bool wait_for_commit(std::chrono::milliseconds timeout) const = 0;
    // A copy of the last commit as one new main file (storage::backup_from).
    virtual void backup(const std::string& dest) = 0;
    // `steppe dump`: each root, then every object the last commit reaches
    // from them, as one JSON object per line (types/json_dump.hpp).
    virtual void dump(const std::function<void(const std::string&)>& line) const = 0;
    virtual void reuse_address_space() = 0;
    // steppe::compact on this engine's store, which it closes: the engine is
    // unusable after, whether it succeeded or not.
    virtual compact_report compact(const compact_options& options) = 0;
    // steppe::migrate on this engine's store, which it closes, as compact.
    virtual migrate_report migrate(const migration& m, const migrate_options& options) = 0;

    virtual store_stats stats() const = 0;
    virtual std::vector<type_usage> types() const = 0;
    virtual std::vector<std::string> check() const = 0;
    virtual const std::string& path() const = 0;
    virtual const std::string& salvage_report() const = 0;
};

namespace storage {
class env;
}

// The page engine (src/page/page_engine.cpp) on the store at `path`, its
// files opened through `io` (nullptr: the real file system).
// `match_program` false: the stored types are not compared with the
// program's (steppe::migrate).
std::unique_ptr<engine> open_page_engine(const std::string& path, const open_options& options,
                                         storage::env* io = nullptr, bool match_program = true);
// The object engine (src/objects/) on the store at `path`, whatever scheme
// made it, for tools that inspect stores (steppe info, check, roots, stats)
// and for compaction and migration. `match_program` as open_page_engine's.
std::unique_ptr<engine> open_object_engine(const std::string& path, const open_options& options,
                                           storage::env* io = nullptr, bool match_program = true);

}  // namespace steppe
