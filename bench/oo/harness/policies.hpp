// policies.hpp — the pointer / allocation / transaction policies the OO1 and
// OO7 databases are written over, one per system:
//
//   transient_policy  T*, new/delete                      the ceiling: no persistence at all
//   steppe_policy     T*, store.make / destroy / commit   page engine, uffd or mprotect backend
//   bip_policy        boost::interprocess::offset_ptr<T>, managed_mapped_file, flush() (msync)
//   pmem_policy       a PMEMoid wrapper (pmemobj_direct at every dereference), libpmemobj
//                     transactions with pmemobj_tx_add_range_direct before every write of an
//                     existing object
//
// A policy P gives:
//   P::ptr<T>                  what a persistent object stores to refer to a T
//   P::get(ptr) -> T*          dereference (the per-use cost of a fancy pointer)
//   make<T>() / make_array<T>(n) -> ptr<T>   value-initialized, in the store
//   destroy(ptr, n)
//   will_write(T*, bytes)      before writing an object that existed before this
//                              transaction (only libpmemobj needs it: TX_ADD)
//   begin() / commit()         an update transaction; commit makes it durable
//   bulk_begin() / bulk_end()  around building the database (durable at the end)
//   root<R>(name)              the database root, created value-initialized if absent
//   counters()                 system-specific counters (steppe's page faults, ...)
//   files()                    the files that hold the store, for their sizes
//
// LMDB is not a pointer system; its OO1 adapter lives in lmdb_oo1.hpp.
#pragma once

#include <boost/interprocess/managed_mapped_file.hpp>
#include <boost/interprocess/offset_ptr.hpp>
#include <fcntl.h>
#include <sys/mman.h>
#include <libpmemobj.h>
#include <steppe/steppe.hpp>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <new>
#include <string>
#include <vector>

#include "harness.hpp"

namespace bench {

// ---- transient ------------------------------------------------------------------

struct transient_policy {
    static constexpr const char* name = "transient";
    template <class T>
    using ptr = T*;
    template <class T>
    static T* get(T* p) noexcept {
        return p;
    }
    template <class T>
    T* make() {
        return new T();
    }
    template <class T>
    T* make_array(std::size_t n) {
        return new T[n]();
    }
    template <class T>
    void destroy(T* p, std::size_t n) {
        if (n == 1) delete p;
        else delete[] p;
    }
    template <class T>
    void will_write(T*, std::size_t = sizeof(T)) noexcept {}
    void begin() {}
    void commit() {}
    void bulk_begin() {}
    void bulk_end() {}
    template <class R>
    R* root(const char*) {
        if (!root_) root_ = std::shared_ptr<void>(new R(), [](void* p) { delete static_cast<R*>(p); });
        return static_cast<R*>(root_.get());
    }
    std::map<std::string, std::int64_t> counters() const { return {}; }
    std::vector<std::string> files() const { return {}; }
    std::string describe() const { return "std::allocator (new/delete), no persistence"; }

private:
    std::shared_ptr<void> root_;
};

// ---- steppe ------------------------------------------------------------------------

// open_options::address_space_limit for the page-engine stores the benchmarks
// open (0 = the default, 4 TiB): a driver's `--address-space-mib N` sets it
// (valgrind cannot reserve the default's 64 GiB arenas).
inline std::uint64_t& steppe_address_space_limit() {
    static std::uint64_t n = 0;
    return n;
}

// open_options::prefetch for those stores (a driver's `--prefetch off`: one
// page read per fault, as Texas had; bench/oo/harness/texas.py).
inline bool& steppe_prefetch() {
    static bool on = true;
    return on;
}

inline bool& steppe_load_ahead() {
    static bool on = false;
    return on;
}

struct steppe_policy {
    static constexpr const char* name = "steppe";
    template <class T>
    using ptr = T*;
    template <class T>
    static T* get(T* p) noexcept {
        return p;
    }

    steppe_policy(const std::string& path, steppe::fault_backend backend, bool create)
        : store_(open(path, backend, create)), path_(path) {}

    template <class T>
    T* make() {
        return store_.make<T>();
    }
    template <class T>
    T* make_array(std::size_t n) {
        return store_.make_array<T>(n);
    }
    template <class T>
    void destroy(T* p, std::size_t n) {
        store_.destroy(p, n);
    }
    template <class T>
    void will_write(T*, std::size_t = sizeof(T)) noexcept {}
    void begin() {}
    void commit() { store_.commit(); }
    void bulk_begin() {}
    void bulk_end() { store_.commit(); }
    template <class R>
    R* root(const char* name) {
        return store_.root<R>(name);
    }
    std::map<std::string, std::int64_t> counters() const {
        auto s = store_.stats();
        return {{"store_faults", static_cast<std::int64_t>(s.faults)},
                {"pointers_swizzled", static_cast<std::int64_t>(s.pointers_swizzled)},
                {"pages_committed", static_cast<std::int64_t>(s.pages_committed)},
                {"bytes_logged", static_cast<std::int64_t>(s.bytes_logged)},
                {"store_syncs", static_cast<std::int64_t>(s.syncs)},
                {"evictions", static_cast<std::int64_t>(s.evictions)},
                {"prefetched_pages", static_cast<std::int64_t>(s.prefetched_pages)},
                {"prefetch_hits", static_cast<std::int64_t>(s.prefetch_hits)},
                {"loaded_ahead_pages", static_cast<std::int64_t>(s.loaded_ahead_pages)},
                {"reserved_virtual_pages", static_cast<std::int64_t>(s.reserved_virtual_pages)},
                {"miss_io_ns", static_cast<std::int64_t>(s.miss_io_ns)},
                {"miss_swizzle_ns", static_cast<std::int64_t>(s.miss_swizzle_ns)},
                {"miss_handler_ns", static_cast<std::int64_t>(s.miss_handler_ns)},
                {"server_round_trips", static_cast<std::int64_t>(s.server_round_trips)},
                {"server_fetches", static_cast<std::int64_t>(s.server_fetches)},
                {"server_pages_fetched", static_cast<std::int64_t>(s.server_pages_fetched)},
                {"cache_file_hits", static_cast<std::int64_t>(s.cache_file_hits)}};
    }
    std::vector<std::string> files() const { return {path_, path_ + "-wal"}; }
    std::string describe() const {
        auto s = store_.stats();
        return "steppe page engine, fault backend " + s.backend + ", write tracking " + s.write_tracking +
               ", durable commit (fdatasync)";
    }
    std::string backend() const { return store_.stats().backend; }
    steppe::store& store() { return store_; }

private:
    static steppe::store open(const std::string& path, steppe::fault_backend backend, bool create) {
        if (create) {
            std::filesystem::remove(path);
            std::filesystem::remove(path + "-wal");
        }
        steppe::open_options o;
        o.create = create;
        o.backend = backend;
        o.durable = true;
        o.address_space_limit = steppe_address_space_limit();
        o.prefetch = steppe_prefetch();
        o.load_ahead = steppe_load_ahead();
        o.log_diffs = steppe_log_diffs();
        return steppe::store::open(path, o);
    }
    steppe::store store_;
    std::string path_;
};

// ---- Boost.Interprocess ---------------------------------------------------------------

struct bip_policy {
    static constexpr const char* name = "boost-interprocess";
    template <class T>
    using ptr = boost::interprocess::offset_ptr<T>;
    template <class T>
    static T* get(const ptr<T>& p) noexcept {
        return p.get();
    }

    // create: a new file of `bytes` (managed_mapped_file cannot grow while mapped).
    bip_policy(const std::string& path, bool create, std::size_t bytes) : path_(path) {
        namespace bi = boost::interprocess;
        if (create) {
            std::filesystem::remove(path);
            seg_ = std::make_unique<bi::managed_mapped_file>(bi::create_only, path.c_str(), bytes);
        } else {
            seg_ = std::make_unique<bi::managed_mapped_file>(bi::open_only, path.c_str());
        }
    }
    template <class T>
    ptr<T> make() {
        return make_array<T>(1);
    }
    template <class T>
    ptr<T> make_array(std::size_t n) {
        void* m = seg_->allocate(sizeof(T) * n);  // throws bad_alloc when the file is full
        T* first = static_cast<T*>(m);
        for (std::size_t i = 0; i < n; ++i) ::new (first + i) T();
        return ptr<T>(first);
    }
    template <class T>
    void destroy(const ptr<T>& p, std::size_t) {
        if (T* raw = p.get()) seg_->deallocate(raw);
    }
    template <class T>
    void will_write(T*, std::size_t = sizeof(T)) noexcept {}
    void begin() {}
    // flush() is msync(MS_ASYNC) by default, which makes nothing durable:
    // msync(MS_SYNC) over the whole mapping instead (writes only dirty pages).
    void commit() { sync(); }
    void bulk_begin() {}
    void bulk_end() { sync(); }
    template <class R>
    R* root(const char* name) {
        return seg_->find_or_construct<R>(name)();
    }
    std::map<std::string, std::int64_t> counters() const {
        return {{"segment_free_bytes", static_cast<std::int64_t>(seg_->get_free_memory())}};
    }
    std::vector<std::string> files() const { return {path_}; }
    std::string describe() const {
        return "Boost.Interprocess managed_mapped_file, offset_ptr, rbtree_best_fit; commit = msync(MS_SYNC) of "
               "the mapping (durable, not atomic: no crash consistency)";
    }

private:
    void sync() {
        if (::msync(seg_->get_address(), seg_->get_size(), MS_SYNC) != 0)
            fail("msync " + path_ + ": " + std::strerror(errno));
    }
    std::unique_ptr<boost::interprocess::managed_mapped_file> seg_;
    std::string path_;
};

// ---- libpmemobj ---------------------------------------------------------------------------

template <class T>
struct pmem_ptr {  // PMEMoid, typed: 16 bytes {pool uuid, offset}
    PMEMoid oid{0, 0};
};

struct pmem_policy {
    static constexpr const char* name = "libpmemobj";
    template <class T>
    using ptr = pmem_ptr<T>;
    template <class T>
    static T* get(const ptr<T>& p) noexcept {
        return static_cast<T*>(pmemobj_direct(p.oid));  // the inline cached-pool variant
    }

    pmem_policy(const std::string& path, bool create, std::size_t bytes, const char* layout) : path_(path) {
        if (create) {
            std::filesystem::remove(path);
            pop_ = pmemobj_create(path.c_str(), layout, std::max<std::size_t>(bytes, PMEMOBJ_MIN_POOL), 0666);
        } else {
            pop_ = pmemobj_open(path.c_str(), layout);
        }
        if (!pop_) fail("libpmemobj: " + std::string(pmemobj_errormsg()) + " (" + path + ")");
    }
    ~pmem_policy() {
        if (in_tx_) {
            pmemobj_tx_abort(ECANCELED);
            pmemobj_tx_end();
        }
        if (pop_) pmemobj_close(pop_);
    }
    pmem_policy(const pmem_policy&) = delete;
    pmem_policy& operator=(const pmem_policy&) = delete;

    template <class T>
    ptr<T> make() {
        return make_array<T>(1);
    }
    template <class T>
    ptr<T> make_array(std::size_t n) {
        ptr<T> p;
        if (in_tx_) {
            p.oid = pmemobj_tx_zalloc(sizeof(T) * n, 1);
            if (OID_IS_NULL(p.oid)) fail("pmemobj_tx_zalloc: " + std::string(pmemobj_errormsg()));
        } else if (pmemobj_zalloc(pop_, &p.oid, sizeof(T) * n, 1) != 0) {
            fail("pmemobj_zalloc: " + std::string(pmemobj_errormsg()));
        }
        T* first = get(p);
        for (std::size_t i = 0; i < n; ++i) ::new (first + i) T();
        return p;
    }
    template <class T>
    void destroy(ptr<T> p, std::size_t) {
        if (OID_IS_NULL(p.oid)) return;
        if (in_tx_) {
            if (pmemobj_tx_free(p.oid) != 0) fail("pmemobj_tx_free: " + std::string(pmemobj_errormsg()));
        } else {
            pmemobj_free(&p.oid);
        }
    }
    // Undo-log the range before the transaction writes it (TX_ADD).
    template <class T>
    void will_write(T* p, std::size_t bytes = sizeof(T)) {
        if (in_tx_ && pmemobj_tx_add_range_direct(p, bytes) != 0)
            fail("pmemobj_tx_add_range_direct: " + std::string(pmemobj_errormsg()));
    }
    void begin() {
        if (pmemobj_tx_begin(pop_, nullptr, TX_PARAM_NONE) != 0)
            fail("pmemobj_tx_begin: " + std::string(pmemobj_errormsg()));
        pmemobj_tx_set_failure_behavior(POBJ_TX_FAILURE_RETURN);  // errors return (checked), no longjmp
        in_tx_ = true;
    }
    void commit() {
        if (!in_tx_) return;
        pmemobj_tx_commit();
        int rc = pmemobj_tx_end();
        in_tx_ = false;
        if (rc != 0) fail("pmemobj transaction failed: " + std::string(pmemobj_errormsg()));
    }
    // A bulk load runs outside transactions (atomic allocations, plain
    // stores); the generator fsyncs the pool file afterwards.
    void bulk_begin() {}
    void bulk_end() {}
    template <class R>
    R* root(const char*) {
        PMEMoid r = pmemobj_root(pop_, sizeof(R));
        if (OID_IS_NULL(r)) fail("pmemobj_root: " + std::string(pmemobj_errormsg()));
        return static_cast<R*>(pmemobj_direct(r));
    }
    std::map<std::string, std::int64_t> counters() const { return {}; }
    std::vector<std::string> files() const { return {path_}; }
    std::string describe() const {
        const char* force = std::getenv("PMEM_IS_PMEM_FORCE");
        bool nd = force && std::strcmp(force, "1") == 0;
        return std::string("libpmemobj 1.12 C API (PMDK, archived upstream 2025), PMEMoid + pmemobj_direct, "
                           "undo-log transactions; ") +
               (nd ? "PMEM_IS_PMEM_FORCE=1: flushes are CPU cache flushes, NOT durable on this disk"
                   : "ordinary file: every persist is an msync (durable)");
    }
    PMEMobjpool* pool() { return pop_; }

private:
    PMEMobjpool* pop_ = nullptr;
    bool in_tx_ = false;
    std::string path_;
};

// fsync a file by name (after a bulk load, so the next cold run reads a
// durable, quiescent file).
inline void fsync_path(const std::string& path) {
    int fd = ::open(path.c_str(), O_RDONLY);
    if (fd < 0) return;
    ::fsync(fd);
    ::close(fd);
}

// What the drivers report about the system a model runs on.
struct system_info {
    std::string describe;
    std::string backend;
    std::function<std::map<std::string, std::int64_t>()> counters;
    std::vector<std::string> files;
    std::function<std::vector<std::string>()> check;  // steppe's store.check()
};

// What every measuring run reports about its system and series.
inline void report_run(json& out, const system_info& info, double open_ms, const series_result& r) {
    out.set("describe", info.describe).set("backend", info.backend).set("open_ms", open_ms);
    out.set("series", to_json(r));
    out.set("size", files_json(info.files));
}

// Prints a measuring run's JSON object, with the peak memory at its end.
inline int print_run(json& out) {
    out.set("peak_rss_kib_end", peak_rss_kib());
    std::printf("%s\n", out.dump().c_str());
    return 0;
}

// Calls f(model, info) with Model<policy> open on `path` for the systems that
// store pointers (transient, steppe-uffd/-mprotect, bip, pmem, pmem-nd); false
// if `sys` is none of them. Both OO1 and OO7 drivers use it.
// f(model, info) over a steppe_policy (or a policy derived from it) on `path`.
template <template <class> class Model, class Policy, class F>
void with_steppe_model(const std::string& path, steppe::fault_backend backend, bool create, F&& f) {
    Policy p(path, backend, create);
    Model<Policy> m(p);
    f(m, system_info{p.describe(), p.backend(), [&] { return p.counters(); }, p.files(),
                     [&] { return p.store().check(); }});
}

template <template <class> class Model, class F>
bool with_pointer_model(const std::string& sys, const std::string& path, bool create, std::size_t pool_bytes,
                        const char* pmem_layout, F&& f) {
    if (sys == "transient") {
        transient_policy p;
        Model<transient_policy> m(p);
        f(m, system_info{p.describe(), "", [] { return std::map<std::string, std::int64_t>{}; }, {}, {}});
    } else if (sys == "steppe-uffd" || sys == "steppe-mprotect" || sys == "steppe-load") {
        if (sys == "steppe-load") steppe_load_ahead() = true;
        with_steppe_model<Model, steppe_policy>(
            path, sys == "steppe-mprotect" ? steppe::fault_backend::mprotect : steppe::fault_backend::uffd, create, f);
    } else if (sys == "bip") {
        bip_policy p(path, create, pool_bytes);
        Model<bip_policy> m(p);
        f(m, system_info{p.describe(), "", [&] { return p.counters(); }, p.files(), {}});
    } else if (sys == "pmem" || sys == "pmem-nd") {
        pmem_policy p(path, create, pool_bytes, pmem_layout);
        Model<pmem_policy> m(p);
        f(m, system_info{p.describe(), "", [&] { return p.counters(); }, p.files(), {}});
    } else {
        return false;
    }
    return true;
}

}  // namespace bench

