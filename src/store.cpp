// steppe::store — composes the storage manager, the heap, the type catalog,
// the roots and the page engine behind the public API.
//
// What one commit writes, all through one storage commit:
//   - the data pages written (or handed out) since the last commit, unswizzled;
//   - the type catalog and the roots table, each a "blob" on a chain of system
//     pages, when they changed;
//   - the heap's changed metadata pages;
//   - the storage meta (256 bytes): engine_meta below, which pins the heap root
//     and both blobs, so a commit's pieces can never mix with another's.
#include <steppe/steppe.hpp>
#include <pthread.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>

#include "common/bytes.hpp"
#include "common/system_error.hpp"
#include "heap/heap.hpp"
#include "pager.hpp"
#include "storage/checksum.hpp"
#include "storage/storage.hpp"
#include "stored_pointer.hpp"
#include "types/types.hpp"

namespace steppe {
namespace detail {
namespace {

constexpr char engine_magic[8] = {'s', 't', 'p', 'e', 'n', 'g', 'n', '1'};
constexpr std::uint32_t catalog_owner = 1, roots_owner = 2, vtables_owner = 3;

struct blob_ref {
    std::uint64_t first_page;  // 0: empty blob
    std::uint64_t length;      // bytes
    std::uint32_t crc;         // crc32c of all the bytes
    std::uint32_t pages;
};

// The storage meta of a page-engine store.
struct engine_meta {
    char magic[8];
    std::byte heap[heap_root::size];
    blob_ref catalog;
    blob_ref roots;
    blob_ref vtables;
};
static_assert(sizeof(engine_meta) <= storage::meta_size);

// One page of a blob: this header, then payload.
struct blob_page_header {
    std::uint32_t magic;  // "SBLB"
    std::uint32_t owner;
    std::uint32_t index;  // position in the chain
    std::uint32_t used;   // payload bytes in this page
    std::uint64_t next;   // next page of the chain, 0 at the end
    std::uint32_t reserved;
    std::uint32_t crc;    // crc32c of the page with this field zero
};
constexpr std::uint32_t blob_magic = 0x424C4253;
constexpr std::size_t blob_payload = storage::page_size - sizeof(blob_page_header);

struct root_entry {
    std::uint32_t type;
    std::uint64_t address;
};
using root_table = std::map<std::string, root_entry, std::less<>>;

std::vector<std::byte> encode_roots(const root_table& roots) {
    common::byte_writer w;
    w.put(static_cast<std::uint32_t>(roots.size()));
    for (const auto& [name, e] : roots) {
        w.put(name);
        w.put(e.type);
        w.put(e.address);
    }
    return w.take();
}

root_table decode_roots(std::span<const std::byte> in, const std::string& where) {
    root_table roots;
    common::byte_reader r(in, where + ": the roots table");
    for (auto count = r.get<std::uint32_t>(); count > 0; --count) {
        std::string name = r.get_string();
        root_entry e;
        e.type = r.get<std::uint32_t>();
        e.address = r.get<std::uint64_t>();
        roots[name] = e;
    }
    r.expect_end();
    return roots;
}

std::uint32_t blob_page_crc(blob_page_header h, const std::byte* payload) {
    h.crc = 0;
    return storage::crc32c(storage::crc32c(0, &h, sizeof h), payload, blob_payload);
}

}  // namespace

class store_impl {
public:
    store_impl(const std::string& path, const open_options& options);
    ~store_impl();
    bool holds(const void* p) const;
    bool opened_here() const noexcept;  // false in a child forked since
    std::uint64_t persistent_address(const void* p) const { return pager_->to_persistent(p, "pointer"); }

    void* allocate(const types::layout& layout, std::size_t count);
    // make and destroy from several threads take turns (the pause's mutex),
    // as std containers on steppe::allocator in several threads need.
    void deallocate(void* object) {
        ensure_opened_here();
        pager::pause p(*pager_);
        pager_->free(object);
    }
    void note_vtable(const void* object) {
        ensure_opened_here();
        pager::pause p(*pager_);
        pager_->note_vtable(object);
    }
    void* find_root(std::string_view name, const types::layout& layout);
    void set_root(std::string_view name, const types::layout& layout, void* object);
    bool remove_root(std::string_view name);
    std::vector<root_info> roots() const;
    void commit();
    void rollback();
    void checkpoint();
    void close();
    void reuse_address_space() {
        exclusive_call one(*this, "reuse_address_space");
        pager::pause p(*pager_);
        pager_->reuse_address_space();
    }
    store_stats stats() const;
    std::vector<type_usage> types() const;
    std::vector<std::string> check() const;
    const std::string& path() const { return storage_->path(); }
    const std::string& salvage_report() const { return storage_->salvage_report(); }

private:
    // The state one commit pins down; kept so rollback needs no reads.
    struct committed_state {
        engine_meta meta{};
        types::catalog catalog;
        root_table roots;
        std::vector<std::uint64_t> catalog_pages, roots_pages, vtables_pages;
        types::vtable_table vtables;
    };

    std::unique_ptr<heap> load_heap() const;
    std::vector<std::byte> read_blob(const blob_ref& ref, std::uint32_t owner, const char* what,
                                     std::vector<std::uint64_t>& pages) const;
    blob_ref write_blob(std::span<const std::byte> bytes, std::uint32_t owner, std::vector<std::uint64_t>& pages,
                        std::deque<std::array<std::byte, storage::page_size>>& buffers,
                        std::vector<storage::page_image>& images);
    types::catalog::index type_index(const types::layout& layout);
    void sync_shapes(bool rebuild);
    void validate() const;
    void ensure_writable() const;
    void reuse_if_crowded(const char* after);
    // fork: a child may not use its parent's store (docs/guarantees.md).
    void ensure_opened_here() const;
    // Checks the process, then claims the store for one of the calls one thread
    // at a time may make; a second thread gets an error instead of corrupting it.
    class exclusive_call {
    public:
        exclusive_call(store_impl& s, const char* call) : s_(s) {
            s.ensure_opened_here();
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
    // The call in progress of those one thread at a time may make (the root
    // functions, commit, rollback, checkpoint, reuse), or null.
    std::atomic<const char*> exclusive_{nullptr};
    open_options options_;
    std::unique_ptr<storage::storage> storage_;
    std::unique_ptr<pager> pager_;
    committed_state committed_;
    types::catalog catalog_;
    root_table roots_;
    std::vector<std::uint64_t> catalog_pages_, roots_pages_, vtables_pages_;
    bool catalog_dirty_ = false, roots_dirty_ = false;
    std::uint64_t budget_pages_ = 0;
};

namespace {

// Open stores, so memory is freed to the store that holds it, and each
// thread's current store for steppe::allocator.
std::mutex g_open_mutex;
std::vector<store_impl*> g_open;
thread_local store_impl* t_current = nullptr;

// This process's pid, renewed in a forked child by a fork handler: every
// store call compares it with its store's opener, and getpid() is a system
// call. The handlers also keep g_open_mutex whole across fork.
std::atomic<pid_t> g_pid{0};
void lock_open_list() noexcept { g_open_mutex.lock(); }
void unlock_open_list() noexcept { g_open_mutex.unlock(); }
void renew_pid_in_child() noexcept {
    g_pid.store(::getpid(), std::memory_order_relaxed);
    g_open_mutex.unlock();
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

// A forked child's store objects: never destroyed (their destructors would
// write the parent's files, unmap memory the child does not have and join
// threads the child does not have), but still reachable, so leak checkers
// at the child's exit do not count them.
std::vector<void*>& forsaken() {
    static auto* objects = new std::vector<void*>;
    return *objects;
}

vm::backend_kind backend_for(fault_backend b) {
    return vm::choose_backend(b == fault_backend::mprotect ? vm::backend_kind::mprotect : vm::backend_kind::uffd);
}
}  // namespace

store_impl::store_impl(const std::string& path, const open_options& options)
    : opener_(current_pid()), options_(options) {
    storage::options so;
    so.create = options.create;
    so.read_only = options.read_only;
    so.durable = options.durable;
    so.checkpoint_bytes = options.checkpoint_bytes;
    so.salvage = options.salvage_damaged_log;
    storage_ = storage::storage::open(path, so);

    const auto& raw = storage_->meta();
    bool fresh = std::all_of(raw.begin(), raw.end(), [](std::byte b) { return b == std::byte{0}; });
    if (!fresh) {
        std::memcpy(&committed_.meta, raw.data(), sizeof(engine_meta));
        if (std::memcmp(committed_.meta.magic, engine_magic, sizeof engine_magic) != 0)
            throw error(errc::version, path + " holds no page-engine data of a version this build reads");
        // A blob never written (no types, roots or vtables yet) has no pages.
        const engine_meta& m = committed_.meta;
        if (m.catalog.pages)
            committed_.catalog = types::catalog::decode(
                read_blob(m.catalog, catalog_owner, "type catalog", committed_.catalog_pages));
        if (m.roots.pages)
            committed_.roots =
                decode_roots(read_blob(m.roots, roots_owner, "roots table", committed_.roots_pages), path);
        if (m.vtables.pages)
            committed_.vtables = types::vtable_table::decode(
                read_blob(m.vtables, vtables_owner, "vtable table", committed_.vtables_pages));
    } else {
        std::memcpy(committed_.meta.magic, engine_magic, sizeof engine_magic);
    }
    pager_options po;
    po.backend = backend_for(options.backend);
    po.null_transient_pointers = options.null_transient_pointers;
    po.fatal_hook = options.fatal_hook;
    po.prefetch = options.prefetch;
    po.address_space_limit = options.address_space_limit;
    std::uint64_t budget = options.resident_budget;
    if (budget == 0)
        budget = static_cast<std::uint64_t>(::sysconf(_SC_PHYS_PAGES)) * static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE)) / 2;
    po.resident_budget_pages = std::max<std::uint64_t>(budget / storage::page_size, 256);
    pager_ = std::make_unique<pager>(*storage_, load_heap(), po);
    budget_pages_ = po.resident_budget_pages;
    catalog_ = committed_.catalog;
    roots_ = committed_.roots;
    catalog_pages_ = committed_.catalog_pages;
    roots_pages_ = committed_.roots_pages;
    vtables_pages_ = committed_.vtables_pages;
    pager_->vtables() = committed_.vtables;
    validate();
    sync_shapes(true);
    std::lock_guard lock(g_open_mutex);
    g_open.push_back(this);
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
// 3. drop the page engine: its eviction thread stops, uncommitted changes go
// 4. checkpoint the committed state, after forgetting the frames the dropped
//    transaction spilled to the log (a checkpoint resets the log)
// 5. release the files and the lock, whether 4 succeeded or not
void store_impl::close() {
    if (!storage_) return;
    if (!opened_here()) {  // a forked child: leave the parent's store alone
        std::lock_guard lock(g_open_mutex);
        g_open.erase(std::find(g_open.begin(), g_open.end(), this));
        if (t_current == this) t_current = nullptr;
        forsaken().push_back(pager_.release());
        forsaken().push_back(storage_.release());
        return;
    }
    if (const char* env = std::getenv("STEPPE_STATS"); env && *env && std::strcmp(env, "0") != 0) {
        try {
            std::fprintf(stderr, "steppe: stats of %s at close:\n%s", path().c_str(), to_string(stats()).c_str());
        } catch (const std::exception&) {  // a report is not worth failing the close for
        }
    }
    {
        std::lock_guard lock(g_open_mutex);
        g_open.erase(std::find(g_open.begin(), g_open.end(), this));
    }
    if (t_current == this) t_current = nullptr;
    pager_.reset();
    struct release {
        std::unique_ptr<storage::storage>& files;
        ~release() { files.reset(); }
    } release_files{storage_};
    if (!options_.checkpoint_on_close || options_.read_only) return;
    try {
        storage_->discard_pending();
        storage_->checkpoint();
    } catch (const error& e) {
        throw error(e.code(), "closing " + path() +
                                  ": the checkpoint failed, so the log keeps its commits (the next open recovers "
                                  "them): " + e.what());
    }
}

bool store_impl::holds(const void* p) const { return pager_->holds(p); }

bool store_impl::opened_here() const noexcept { return g_pid.load(std::memory_order_relaxed) == opener_; }

void store_impl::ensure_opened_here() const {
    if (!opened_here())
        throw error(errc::invalid_argument,
                    "store " + path() + " was opened by process " + std::to_string(opener_) + "; process " +
                        std::to_string(::getpid()) +
                        " is a child forked from it and cannot use it (fork before opening the store, or exec)");
}


void* allocate_in_current(const types::layout& layout, std::size_t count) {
    if (!t_current)
        throw error(errc::invalid_argument, "steppe::allocator<" + layout.name +
                                                ">: this thread has no current store (open one, or use steppe::use_store)");
    return t_current->allocate(layout, count);
}

std::uint64_t persistent_address_of(const void* p) noexcept {
    if (!p) return 0;
    if (t_current && t_current->holds(p)) return t_current->persistent_address(p);  // lock-free: the usual case
    std::lock_guard lock(g_open_mutex);
    for (store_impl* s : g_open)
        if (s->holds(p)) return s->persistent_address(p);
    return reinterpret_cast<std::uintptr_t>(p) | (std::uint64_t{1} << 63);
}

void deallocate_anywhere(void* object) noexcept {
    store_impl* owner = nullptr;
    {
        std::lock_guard lock(g_open_mutex);
        for (store_impl* s : g_open)
            if (s->opened_here() && s->holds(object)) owner = s;  // a forked child frees nothing of its parent's
    }
    if (owner) owner->deallocate(object);
}

std::unique_ptr<heap> store_impl::load_heap() const {
    if (std::all_of(std::begin(committed_.meta.heap), std::end(committed_.meta.heap),
                    [](std::byte b) { return b == std::byte{0}; }))
        return std::make_unique<heap>(1);  // page 0 stays unused: address 0 is null
    heap_root root = heap_root::from_bytes(committed_.meta.heap);
    std::vector<std::byte> buf(storage::page_size);
    return std::make_unique<heap>(heap::decode(root, [&](std::uint64_t page) {
        storage_->read_page(page, buf.data());
        return std::span<const std::byte>(buf);
    }));
}

std::vector<std::byte> store_impl::read_blob(const blob_ref& ref, std::uint32_t owner, const char* what,
                                             std::vector<std::uint64_t>& pages) const {
    std::vector<std::byte> out;
    pages.clear();
    std::vector<std::byte> buf(storage::page_size);
    std::uint64_t page = ref.first_page;
    auto fail = [&](const std::string& why) {
        return error(errc::corrupt, storage_->path() + ": the " + what + " (page " + std::to_string(page) +
                                        ") is damaged: " + why);
    };
    for (std::uint32_t i = 0; i < ref.pages; ++i) {
        if (page == 0 || page >= storage_->page_count()) throw fail("its chain leaves the store");
        storage_->read_page(page, buf.data());
        blob_page_header h;
        std::memcpy(&h, buf.data(), sizeof h);
        if (h.magic != blob_magic || h.owner != owner || h.index != i || h.used > blob_payload ||
            h.crc != blob_page_crc(h, buf.data() + sizeof h))
            throw fail("bad page header or checksum");
        pages.push_back(page);
        out.insert(out.end(), buf.begin() + sizeof h, buf.begin() + static_cast<long>(sizeof h + h.used));
        page = h.next;
    }
    if (out.size() != ref.length || storage::crc32c(out) != ref.crc) throw fail("its length or checksum differs");
    return out;
}

blob_ref store_impl::write_blob(std::span<const std::byte> bytes, std::uint32_t owner,
                                std::vector<std::uint64_t>& pages,
                                std::deque<std::array<std::byte, storage::page_size>>& buffers,
                                std::vector<storage::page_image>& images) {
    heap& h = pager_->allocator();
    std::size_t n = std::max<std::size_t>(1, (bytes.size() + blob_payload - 1) / blob_payload);
    while (pages.size() < n) pages.push_back(h.allocate_system_page(owner, pages.size()));
    while (pages.size() > n) {
        h.free_system_page(pages.back());
        pages.pop_back();
    }
    for (std::size_t i = 0; i < n; ++i) {
        auto& page = buffers.emplace_back();
        page.fill(std::byte{0});
        std::size_t used = std::min(blob_payload, bytes.size() - std::min(bytes.size(), i * blob_payload));
        blob_page_header hdr{blob_magic, owner, static_cast<std::uint32_t>(i), static_cast<std::uint32_t>(used),
                             i + 1 < n ? pages[i + 1] : 0, 0, 0};
        if (used) std::memcpy(page.data() + sizeof hdr, bytes.data() + i * blob_payload, used);
        hdr.crc = blob_page_crc(hdr, page.data() + sizeof hdr);
        std::memcpy(page.data(), &hdr, sizeof hdr);
        images.push_back({pages[i], page.data()});
    }
    return {pages[0], bytes.size(), storage::crc32c(bytes), static_cast<std::uint32_t>(n)};
}

// Every root and every data page must name a type the catalog has.
void store_impl::validate() const {
    for (const auto& [name, e] : roots_)
        if (e.type >= catalog_.size())
            throw error(errc::corrupt, path() + ": root '" + name + "' names type " + std::to_string(e.type) +
                                           ", which the type catalog does not have");
    const heap& h = pager_->allocator();
    for (std::uint64_t p = 0; p < h.page_count(); ++p) {
        const heap::page_desc* d = h.describe(p);
        if (d->is_data() && d->type() >= catalog_.size())
            throw error(errc::corrupt, path() + ": page " + std::to_string(p) + " holds objects of type " +
                                           std::to_string(d->type()) + ", which the type catalog does not have");
    }
}

void store_impl::sync_shapes(bool rebuild) {
    auto& shapes = pager_->shapes();
    if (rebuild) shapes.clear();
    for (std::size_t i = shapes.size(); i < catalog_.size(); ++i) {
        const types::layout& l = catalog_.at(static_cast<types::catalog::index>(i));
        shapes.push_back({l.name, l.size, l.pointers, l.vptrs});
    }
}

types::catalog::index store_impl::type_index(const types::layout& layout) {
    std::size_t before = catalog_.size();
    types::catalog::index i = catalog_.find_or_add(layout);
    if (catalog_.size() != before) {
        catalog_dirty_ = true;
        sync_shapes(false);
    }
    return i;
}

void store_impl::ensure_writable() const {
    if (options_.read_only) throw error(errc::invalid_argument, path() + " is open read-only");
}

void* store_impl::allocate(const types::layout& layout, std::size_t count) {
    ensure_opened_here();
    ensure_writable();
    pager::pause p(*pager_);
    if (count == 0) throw error(errc::invalid_argument, "make_array of 0 elements of " + layout.name);
    return pager_->allocate(type_index(layout), layout.size, count, std::max<std::size_t>(layout.align, 16));
}

void* store_impl::find_root(std::string_view name, const types::layout& layout) {
    exclusive_call one(*this, "find_root");
    auto it = roots_.find(name);
    if (it == roots_.end()) return nullptr;
    types::catalog::index want = type_index(layout);
    if (it->second.type != want)
        throw error(errc::type_mismatch, path() + ": root '" + std::string(name) + "' holds a " +
                                             catalog_.at(it->second.type).name + ", not a " + layout.name);
    return pager_->to_pointer(it->second.address);
}

void store_impl::set_root(std::string_view name, const types::layout& layout, void* object) {
    exclusive_call one(*this, "set_root");
    ensure_writable();
    if (!object) throw error(errc::invalid_argument, "set_root('" + std::string(name) + "') with a null object; use remove_root");
    std::uint64_t address = pager_->to_persistent(object, "set_root('" + std::string(name) + "'): object");
    roots_[std::string(name)] = {type_index(layout), address};
    roots_dirty_ = true;
}

bool store_impl::remove_root(std::string_view name) {
    exclusive_call one(*this, "remove_root");
    ensure_writable();
    auto it = roots_.find(name);
    if (it == roots_.end()) return false;
    roots_.erase(it);
    roots_dirty_ = true;
    return true;
}

std::vector<root_info> store_impl::roots() const {
    ensure_opened_here();
    std::vector<root_info> out;
    for (const auto& [name, e] : roots_) out.push_back({name, catalog_.at(e.type).name});
    return out;
}

// 1. blobs that changed (may take system pages from the heap)
// 2. data pages, unswizzled (throws transient_pointer before anything is written)
// 3. the heap's changed metadata pages and its root
// 4. one storage commit of all of it with the new meta
// 5. adopt the new committed state
void store_impl::commit() {
    exclusive_call one(*this, "commit");
    ensure_writable();
    pager::pause p(*pager_);
    std::deque<std::array<std::byte, storage::page_size>> buffers;
    std::vector<storage::page_image> images;
    engine_meta meta = committed_.meta;
    if (catalog_dirty_)
        meta.catalog = write_blob(catalog_.encode(), catalog_owner, catalog_pages_, buffers, images);
    if (roots_dirty_) meta.roots = write_blob(encode_roots(roots_), roots_owner, roots_pages_, buffers, images);
    pager::page_images data = pager_->collect();
    images.insert(images.end(), data.pages.begin(), data.pages.end());
    if (pager_->vtables().size() != committed_.vtables.size())  // collect met new vtable symbols
        meta.vtables = write_blob(pager_->vtables().encode(), vtables_owner, vtables_pages_, buffers, images);
    heap::commit_image heap_image = pager_->allocator().encode_dirty();
    for (const auto& m : heap_image.pages) images.push_back({m.page, m.bytes.data()});
    auto root_bytes = heap_image.root.to_bytes();
    std::memcpy(meta.heap, root_bytes.data(), root_bytes.size());

    storage::meta_bytes raw{};
    std::memcpy(raw.data(), &meta, sizeof meta);
    try {
        storage_->commit(images, raw);
    } catch (...) {
        pager_->allocator().mark_all_dirty();
        catalog_dirty_ = roots_dirty_ = true;
        throw;
    }
    pager_->committed();
    committed_ = {meta, catalog_, roots_, catalog_pages_, roots_pages_, vtables_pages_, pager_->vtables()};
    catalog_dirty_ = roots_dirty_ = false;
    reuse_if_crowded("the commit");
}

// The committed state only, so nothing may have changed since the last
// commit: pages a transaction spilled sit in the log after its last commit,
// and the reset would lose them.
void store_impl::checkpoint() {
    exclusive_call one(*this, "checkpoint");
    if (options_.read_only)
        throw error(errc::invalid_argument, "checkpoint: store " + path() + " is open read-only");
    pager::pause p(*pager_);
    std::size_t pages = pager_->uncommitted_pages();
    if (pages || catalog_dirty_ || roots_dirty_)
        throw error(errc::invalid_argument,
                    "checkpoint: store " + path() + " has changes since the last commit (" + std::to_string(pages) +
                        " pages written, made or freed" + (roots_dirty_ ? "; roots changed" : "") +
                        (catalog_dirty_ ? "; new types" : "") + "); commit() or rollback() first");
    storage_->checkpoint();
}

void store_impl::rollback() {
    exclusive_call one(*this, "rollback");
    pager::pause p(*pager_);
    pager_->rollback(load_heap());
    catalog_ = committed_.catalog;
    roots_ = committed_.roots;
    catalog_pages_ = committed_.catalog_pages;
    roots_pages_ = committed_.roots_pages;
    vtables_pages_ = committed_.vtables_pages;
    pager_->vtables() = committed_.vtables;
    catalog_dirty_ = roots_dirty_ = false;
    sync_shapes(true);
    reuse_if_crowded("the rollback");
}

// Starts an address-space reuse round if the reserved space is crowded. The
// commit or rollback before it is complete whatever happens here; the error
// says so, since commit() throwing otherwise means the commit failed.
void store_impl::reuse_if_crowded(const char* after) {
    try {
        pager_->reuse_if_crowded();
    } catch (const error& e) {
        throw error(e.code(), path() + ": address-space reuse after " + after + " (which is complete) failed: " +
                                  e.what());
    }
}

store_stats store_impl::stats() const {
    ensure_opened_here();
    pager::pause paused(*pager_);
    pager_stats p = pager_->stats();
    const storage::stats& s = storage_->counters();
    return {vm::to_string(pager_->backend()),
            vm::to_string(pager_->tracking()),
            p.faults,
            p.pointers_swizzled,
            s.commits,
            p.pages_committed,
            p.pointers_unswizzled,
            s.bytes_written,
            s.syncs,
            storage_->page_count(),
            pager_->allocator().free_pages().total_pages(),
            p.resident_pages,
            p.dirty_pages,
            p.evictions,
            budget_pages_,
            p.spilled_pages,
            p.prefetched_pages,
            p.prefetch_hits,
            p.address_space_limit,
            p.reserved_virtual_pages,
            p.reuse_rounds,
            p.reclaimed_arenas,
            p.reclaimed_pages};
}

std::vector<type_usage> store_impl::types() const {
    ensure_opened_here();
    std::vector<type_usage> out;
    for (const auto& l : catalog_.entries()) out.push_back({l.name, l.size, 0, 0});
    const heap& h = pager_->allocator();
    for (std::uint64_t p = 0; p < h.page_count(); ++p) {
        const heap::page_desc* d = h.describe(p);
        if (!d->is_data() || d->type() >= out.size()) continue;
        type_usage& u = out[d->type()];
        ++u.pages;
        if (d->kind() == heap::page_kind::small) u.objects += d->chunks_used();
        if (d->kind() == heap::page_kind::large_head) ++u.objects;
    }
    return out;
}

// Committed state only: pages are read from the storage, not from memory.
std::vector<std::string> store_impl::check() const {
    ensure_opened_here();
    pager::pause p(*pager_);
    std::vector<std::string> findings = storage_->check();
    std::unique_ptr<heap> committed_heap = load_heap();  // not the live one: uncommitted changes are not findings
    const heap& h = *committed_heap;
    for (const auto& f : h.audit()) findings.push_back(path() + ": heap: " + f);
    for (const auto& [name, e] : committed_.roots)
        if (!h.find_chunk(e.address))
            findings.push_back(path() + ": root '" + name + "' points to " + std::to_string(e.address) +
                               ", which is not an allocated object");
    std::vector<std::byte> page(storage::page_size);
    storage::read_failure why;
    for (std::uint64_t p = 0; p < h.page_count() && p < storage_->page_count(); ++p) {
        if (!h.describe(p)->is_data() || !storage_->read_page_nothrow(p, page.data(), &why, true)) continue;
        check_pointers(h, pager_->layout_of_page(h, p), p, page.data(), path() + ": ", findings);
    }
    return findings;
}

}  // namespace detail

store::store(std::unique_ptr<detail::store_impl> impl) : impl_(std::move(impl)) {}
store::store(store&&) noexcept = default;
store& store::operator=(store&&) noexcept = default;
store::~store() = default;

store store::open(const std::string& path, const open_options& options) {
    return store(std::make_unique<detail::store_impl>(path, options));
}

void* store::allocate(const types::layout& layout, std::size_t count) { return impl_->allocate(layout, count); }
void store::deallocate(void* object) { impl_->deallocate(object); }
void store::note_vtable(const void* object) { impl_->note_vtable(object); }
void* store::find_root_raw(std::string_view name, const types::layout& layout) {
    return impl_->find_root(name, layout);
}
void store::set_root_raw(std::string_view name, const types::layout& layout, void* object) {
    impl_->set_root(name, layout, object);
}
bool store::remove_root(std::string_view name) { return impl_->remove_root(name); }
std::vector<root_info> store::roots() const { return impl_->roots(); }
void store::commit() { impl_->commit(); }
void store::rollback() { impl_->rollback(); }
void store::checkpoint() { impl_->checkpoint(); }
void store::close() {
    if (!impl_) return;  // closed already, or moved from
    std::unique_ptr<detail::store_impl> closing = std::move(impl_);
    closing->close();
}
void store::reuse_address_space() { impl_->reuse_address_space(); }
store_stats store::stats() const { return impl_->stats(); }

std::string to_string(const store_stats& st) {
    char buf[1536];
    const auto u = [](std::uint64_t v) { return static_cast<unsigned long long>(v); };
    std::snprintf(buf, sizeof buf,
                  "  backend             %s, write tracking %s\n"
                  "  faults              %llu pages loaded on first touch, %llu pointers swizzled\n"
                  "  resident pages      %llu (budget %llu), %llu written since the last commit\n"
                  "  evictions           %llu pages dropped to keep the budget, %llu of them spilled to the log first\n"
                  "  prefetched pages    %llu read-ahead hints, %llu then faulted in\n"
                  "  commits             %llu: %llu data pages, %llu pointers unswizzled, %llu bytes logged, %llu syncs\n"
                  "  store pages         %llu (%llu free)\n"
                  "  address space       %llu virtual pages reserved of %llu MiB; %llu reuse rounds gave back %llu arenas\n",
                  st.backend.c_str(), st.write_tracking.c_str(), u(st.faults), u(st.pointers_swizzled),
                  u(st.resident_pages), u(st.resident_budget_pages), u(st.dirty_pages), u(st.evictions),
                  u(st.spilled_pages), u(st.prefetched_pages), u(st.prefetch_hits), u(st.commits),
                  u(st.pages_committed), u(st.pointers_unswizzled), u(st.bytes_logged), u(st.syncs), u(st.store_pages),
                  u(st.free_pages), u(st.reserved_virtual_pages), u(st.address_space_limit >> 20), u(st.reuse_rounds),
                  u(st.reclaimed_arenas));
    return buf;
}
std::vector<type_usage> store::types() const { return impl_->types(); }
std::vector<std::string> store::check() const { return impl_->check(); }
const std::string& store::path() const { return impl_->path(); }
const std::string& store::salvage_report() const { return impl_->salvage_report(); }

use_store::use_store(store& s) noexcept : previous_(detail::t_current) { detail::t_current = s.impl_.get(); }
use_store::~use_store() { detail::t_current = static_cast<detail::store_impl*>(previous_); }

}  // namespace steppe
