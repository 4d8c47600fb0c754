// The page engine behind the engine interface: it composes the storage
// manager, the heap (through the pager), the type catalog, the roots table
// and the vtable table, and keeps its committed state as one value.
//
// What one commit writes, all through one storage commit:
//   - the data pages written (or handed out) since the last commit, unswizzled;
//   - the type catalog, the roots table and the vtable table, each a blob on a
//     chain of system pages, when they changed;
//   - the heap's changed metadata pages;
//   - the storage meta: engine_meta (page/engine_format.hpp), which pins the
//     heap root and the blobs, so a commit's pieces can never mix with
//     another's.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "engine/engine.hpp"
#include "page/engine_meta.hpp"
#include "page/pager.hpp"
#include "storage/storage.hpp"
#include "types/types.hpp"
#include "types/vtables.hpp"

namespace steppe::page {

struct committed_store;  // compact.hpp

class page_engine final : public engine {
public:
    // `io`: the file system the storage opens the store's files through
    // (nullptr: the real one). `match_program` false: the stored types are
    // not compared with the program's (migrate, which changes them).
    page_engine(const std::string& path, const open_options& options, storage::env* io, bool match_program = true);

    void close() override;
    bool holds(const void* p) const noexcept override { return pager_->holds(p); }
    void hold_threads_for_fork() noexcept override {
        if (pager_) pager_->hold_evictor_for_fork();
        if (storage_) storage_->hold_threads_for_fork();
    }
    void release_threads_after_fork() noexcept override {
        if (storage_) storage_->release_threads_after_fork();
        if (pager_) pager_->release_evictor_after_fork();
    }
    std::uint64_t persistent_address(const void* p) const override { return pager_->to_persistent(p, "pointer"); }
    void* translate(std::uint64_t address) override { return pager_->translate_at_use(address); }
    void* make(const types::layout& layout, std::size_t count) override;
    void destroy(void* object) override;
    void note_vtable(const void* object) override;
    void* find_root(std::string_view name, const types::layout& layout) override;
    void set_root(std::string_view name, const types::layout& layout, void* object) override;
    bool remove_root(std::string_view name) override;
    std::vector<root_info> roots() const override;
    void commit() override;
    void rollback() override;
    bool refresh_in_place() override;
    void checkpoint() override;
    bool wait_for_commit(std::chrono::milliseconds timeout) const override {
        return storage_->wait_for_commit(timeout);
    }
    void backup(const std::string& dest) override;
    void dump(const std::function<void(const std::string&)>& line) const override;
    void reuse_address_space() override;
    compact_report compact(const compact_options& options) override;  // compact.cpp
    migrate_report migrate(const migration& m, const migrate_options& options) override;  // compact.cpp
    store_stats stats() const override;
    std::vector<type_usage> types() const override;
    std::vector<std::string> check() const override;
    const std::string& path() const override { return storage_->path(); }
    const std::string& salvage_report() const override { return storage_->salvage_report(); }

private:
    // Everything one commit pins down, as one value: committed_ is live_ as
    // of the last commit, so rollback restores all of it by one assignment.
    struct state {
        engine_meta meta{};
        types::catalog catalog;
        root_table roots;
        std::vector<std::uint64_t> catalog_pages, roots_pages, vtables_pages;  // the blobs' chains
        types::vtable_table vtables;  // the pager reads and learns it in place
    };

    // The copying pass compact and migrate share (compact.cpp): writes the
    // new main file `temp` ("" on a dry run) from the committed store.
    using rewrite_pass = std::function<compact_report(const committed_store&, const storage::rewrite_target& target)>;
    compact_report rewrite(const std::string& what, bool write, const rewrite_pass& pass);
    std::unique_ptr<heap> load_committed_heap() const { return load_heap(*storage_, committed_.meta, descriptors_kept()); }
    std::uint64_t descriptors_kept() const noexcept { return pager::descriptor_bytes_kept(budget_pages_); }
    void load_and_map(const std::string& path);
    state load_state(const storage::storage& s, const std::string& path) const;
    types::catalog::index type_index(const types::layout& layout);
    void sync_shapes(bool rebuild);
    void validate(const state& s, const heap& h, const storage::storage& files) const;
    // M2 (page_check.hpp) for the roots `s` read from the store, by name:
    // the entry found broken and what breaks it.
    using mistyped_roots = std::map<std::string, std::pair<root_entry, std::string>, std::less<>>;
    mistyped_roots find_mistyped_roots(const state& s, const heap& h) const;
    void check_objects(const heap& h, const std::string& prefix, std::vector<std::string>& findings) const;
    void refuse_damaged_objects(const std::string& what) const;
    std::vector<std::string> blob_findings(const state& s, const heap& h, const storage::storage& files) const;
    void ensure_writable() const;
    void require_no_changes(const char* what) const;
    // The heap and the pager change several structures per make or destroy;
    // memory that runs out between them (std::bad_alloc) leaves them
    // disagreeing, so the transaction is broken: make, destroy and commit
    // refuse it (errc::poisoned) until a rollback, which rebuilds both from
    // the last commit.
    template <class F>
    auto unless_memory_runs_out(const char* what, F&& f);
    void refuse_if_broken(const char* what) const;
    void reuse_if_crowded(const char* after);
    void note_types_memory();

    open_options options_;
    storage::env* io_;  // the file system the store's files go through (nullptr: the real one)
    bool match_program_;  // compare the stored types with the program's (not for migrate)
    std::unique_ptr<storage::storage> storage_;
    state live_, committed_;
    // What find_root refuses: M2 is checked once, when the roots are read
    // (open, refresh), not at every call (4 times its cost); a root the
    // program set since is its own.
    mistyped_roots mistyped_;
    std::unique_ptr<pager> pager_;  // after live_: it holds live_.vtables
    bool catalog_dirty_ = false, roots_dirty_ = false;
    const char* broken_by_ = nullptr;  // the make or destroy that ran out of memory half-way, until a rollback
    std::uint64_t budget_pages_ = 0;
    std::string budget_source_;
};

}  // namespace steppe::page
