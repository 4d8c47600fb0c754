// The PostgreSQL page store (storage.hpp; docs/design.md, "Page stores"):
// a store's pages live as versioned rows in a PostgreSQL database, so any
// number of processes on any machines that reach the server can open it.
//
//   postgresql://[user[:password]@][host][:port][,host[:port]...]/db?store=NAME[&cache_mib=N]
//       [&cache_file=PATH][&cache_file_mib=N][&fault_wait_s=S][&pages_from=standby][&libpq parameters]
//
// cache_mib: the in-memory verified-image cache (16 MiB); cache_file: the
// local file of verified images kept across processes (pg_cache_file.hpp;
// by default $XDG_CACHE_HOME/steppe/pg-pages, else ~/.cache/steppe/pg-pages;
// a default that cannot be used is skipped, a named one that cannot is an
// error); cache_file_mib: its size when this open makes it (1024; 0: no
// cache file); fault_wait_s: how long a page fault waits for a server that
// went away before it fails (10 s); connect_timeout (libpq's) is 10 s
// unless the URL says otherwise; pages_from=standby: a reader registers on
// the primary among the URL's hosts and fetches pages from a streaming
// standby among them (P5).
//
// Tables (made on first use, shared by the database's stores):
//   steppe_store  (name, store_id, format, txn, page_count, meta, fence, digest)
//                 one row per store: its newest commit
//   steppe_page   (store, page, txn, sum, image)  every kept page version;
//                 version txn of a page holds from commit txn on
//   steppe_reader (store, id, txn)  live readers and the commit each reads
//
// Invariants (checked by check()):
//  (P1) a commit is one PostgreSQL transaction: its page rows and the store
//       row's new txn, page_count and meta become visible together, durable
//       by the server's own log when COMMIT returns;
//  (P2) one writer: it holds the session advisory lock (writer_class, store)
//       for as long as its connection lives, and the store row's fence it
//       took at open; a commit locks the store row and checks the fence, so
//       a writer that lost its session (and so its lock) to another can no
//       longer commit, even over a new connection; nor fetch a page: each
//       fetch checks the fence in the same statement (the new writer may
//       have collected the old one's versions);
//  (P3) a reader's snapshot is the store row as of its open; it registers
//       (steppe_reader, under the store row's share lock, so no collection
//       runs between) and holds the session advisory lock (reader_class,
//       id) while it lives. A collection keeps, for each page, the newest
//       version at or below the oldest live reader's txn and every later
//       one, and drops the rows of readers whose lock is gone;
//  (P4) every page image handed out was verified against its sum
//       (page_checksum, as in the main file).
//  (P5) a reader that fetches from a standby does so only once the standby
//       shows its registration (open waits for it): the registration was
//       made after the reader's snapshot commit, and the standby replays
//       in commit order, so it holds every version the snapshot needs, and
//       collection's deletes reach it in that order too (P3's check in the
//       fetch then holds there). A writer always reads from the primary.
//  (P6) the store row's digest is the sum, over the pages that have a
//       version at or below its txn, of the commit number of the page's
//       newest such version times (page + 1), twice that for a zero
//       version (pg_digest_term); a commit
//       adds its terms for the pages it writes and takes away those of the
//       versions they supersede (the writer's version map names them), in
//       the statement that moves the store row (P1). Collection drops
//       no newest version, so leaves it as it is. A newest version deleted
//       (by hand, or lost in a restore of steppe_page older than
//       steppe_store) leaves an older one or none, of a smaller number (a
//       version added by hand, a larger one; a version moved to another
//       page number, another weight): the digest no longer adds up.
//       (A damaged image or sum is P4's: that page alone fails its read.) Open loads every
//       page's newest version at its snapshot (the version map) and adds
//       it up: a mismatch is corrupt (a writer opened with salvage takes
//       the versions as they are); every fetch then checks that it got
//       the version the map names, and check() adds the digest up again.
//  (P7) a version whose image is empty and whose sum is 0 is a zero
//       version: the page reads as zeros from its commit on. Only a
//       rewrite (compaction, migration: commit_rewrite) writes them, for
//       each page with a version that it leaves out, so the rewritten store
//       is exactly what it wrote; the pages past its new page count keep
//       their older versions for older readers until collection drops
//       them, and their zero version after that. So a page at or past the
//       store's page count has, as its newest version, a zero version or
//       none.
//
// Reads never run libpq in the caller's thread: read_page_nothrow may run in
// a fault handler, so it looks in a verified-image cache in memory, then in
// the cache file (C1-C4, pg_cache_file.hpp), and otherwise hands the
// request to the fetch thread, which owns its own connection, and sleeps on
// a futex until it is served. Pages the transaction in progress spills go
// to an unlinked local file.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <vector>

#include "common/sigsafe.hpp"
#include "storage/pg_cache_file.hpp"
#include "storage/fetch_worth.hpp"
#include "storage/storage.hpp"

namespace steppe::storage {

class pg_connection;

// P6: a store row's digest (up to 2^32 pages' terms added up, each below 2^96).
__extension__ typedef unsigned __int128 pg_digest;
// A page's term in the digest: its newest version's commit number times
// (page + 1), so a version moved to another page number changes the sum
// (a sum of bare commit numbers would not see it); twice that for a zero
// version (P7), so a version emptied by hand changes it too.
inline pg_digest pg_digest_term(page_no page, std::uint64_t txn, bool zero_version = false) {
    return pg_digest(txn) * (pg_digest(page) + 1) * (zero_version ? 2 : 1);
}

// What a store URL says: libpq's part, the store's name and steppe's own
// parameters. Throws invalid_argument naming what is wrong.
struct pg_address {
    std::string conninfo;  // the URL without steppe's parameters, for libpq
    std::string store;     // [A-Za-z0-9_.-]{1,63}
    std::string shown;     // the URL without a password, for messages
    std::uint64_t cache_bytes = 16ull << 20;
    std::string cache_file;           // empty: default_pg_cache_path()
    bool cache_file_named = false;    // the URL said cache_file= (so failing to use it is an error)
    std::uint64_t cache_file_bytes = 1024ull << 20;  // 0: no cache file
    std::chrono::seconds fault_wait{10};
    // pages_from=standby: a reader fetches pages over fetch_conninfo, which
    // prefers a standby among the URL's hosts (streaming replication).
    bool pages_from_standby = false;
    std::string fetch_conninfo;
};
pg_address parse_pg_address(const std::string& url);
// The URL as messages show it: without a password (in the user part or a
// password= parameter). Never throws for a malformed URL.
std::string pg_shown_url(const std::string& url);

class pg_store final : public storage {
public:
    // Opens (or creates) the store the URL names. Throws invalid_argument
    // (a malformed URL), io (no server), not_found, exists, locked (a live
    // writer holds it), version, corrupt.
    static std::unique_ptr<pg_store> open(const std::string& url, const options& opts);
    ~pg_store() override;

    void read_page(page_no page, std::byte* out) const override;
    // With `read_around`, a page that is not cached comes with the aligned
    // cluster around it, in one query: 128 KiB, grown and shrunk by what
    // the pages fetched were worth (fetch_worth.hpp), up to an eighth of
    // the cache file.
    bool read_page_nothrow(page_no page, std::byte* out, read_failure* why,
                           bool read_around = false) const noexcept override;
    bool read_committed_page_nothrow(page_no page, std::byte* out, read_failure* why,
                                     bool read_around = false) const noexcept override;
    // Asks the fetch thread to bring `page` into the memory cache when no
    // fault waits (batched with other hints). Async-signal-safe.
    void prefetch(page_no page) const noexcept override;
    std::uint64_t waited_reads() const noexcept override;
    void commit(std::span<const page_image> pages, const meta_bytes& meta) override;
    // The rewrite's pages are spilled as `fill` gives them, then committed
    // with its meta and page count; every page with a version that it does
    // not write gets a zero version in the same commit (P7).
    void commit_rewrite(const page_fill& fill) override;
    void spill(std::span<const page_image> pages) override;
    void discard_pending() noexcept override;
    bool is_pending(page_no page) const noexcept override;
    std::size_t pending_count() const noexcept override;
    std::vector<page_no> pending_pages() const override;
    // Drops page versions no live reader needs (P3); readers never block it.
    void checkpoint() override;
    bool try_checkpoint() override;
    // LISTEN/NOTIFY on the control connection: each commit notifies.
    bool wait_for_commit(std::chrono::milliseconds timeout) const override;
    std::optional<std::vector<page_no>> changed_since(const storage& older) const override;
    server_stats server_counters() const noexcept override;
    void hold_threads_for_fork() noexcept override;
    void release_threads_after_fork() noexcept override;
    info describe() const override;
    memory memory_bytes() const noexcept override;
    std::vector<std::string> check() const override;

    // The PostgreSQL backend of the writer's session (for tests of P2).
    int backend_pid() const noexcept;
    // What the caches and the fetch thread did, and which cache file serves
    // this handle (empty, and why not in `cache_file_note`, when none).
    pg_cache_counters cache_counters() const noexcept;
    std::string cache_file_path() const { return file_ ? file_->path() : std::string(); }
    const std::string& cache_file_note() const noexcept { return cache_file_note_; }
    // Fixes the costs that size fetched clusters (fetch_worth::pin; for
    // tests whose counts must not depend on the machine's speed).
    void pin_fetch_costs(std::uint64_t trip_ns, std::uint64_t page_ns) noexcept { worth_.pin(trip_ns, page_ns); }
    // Which store this handle's slots belong to (C2; for tests that forge slots).
    const pg_cache_key& cache_key() const noexcept { return key_; }

    // The pages a fault's first fetch brings (128 KiB); later ones grow and shrink by their use.
    static constexpr page_no first_cluster = fetch_worth::start_pages;

private:
    pg_store(pg_address address, const options& opts);
    struct cache;
    struct fetcher;
    void open_as_writer();
    void open_as_reader();
    void wait_for_standby(pg_connection& fetch) const;
    void make_store_row();
    std::string session_settings() const;
    void set_up_session();
    bool reconnect_control();
    void ensure_tables();
    void set_image_storage(const char* what);
    // A commit; with `rewrite` the page count is `count` exactly (not at
    // least the old one) and the pages it leaves out get zero versions.
    void commit_pages(std::span<const page_image> pages, const meta_bytes& meta, std::optional<page_no> rewrite);
    // The pages a rewrite gave zero versions, with the commit each superseded.
    struct zeroed_page {
        page_no page;
        std::uint64_t old_txn;
    };
    std::uint64_t commit_transaction(std::span<const page_image> pages, std::span<const page_no> spilled_only,
                                     std::uint64_t txn, page_no count, const meta_bytes& meta, bool rewrite,
                                     std::vector<zeroed_page>& zeroed);
    std::vector<zeroed_page> zero_versions(std::uint64_t txn);
    std::uint64_t copy_rows(std::span<const page_image> pages, std::span<const page_no> spilled_only,
                            std::uint64_t txn);
    void adopt_store_row(const class pg_result& row);
    void upgrade_format();
    // What open's load of the version map found (P6; P1 for a writer).
    struct loaded_versions {
        pg_digest digest = 0;
        page_no past_page = 0;       // a version past the store row (writers),
        std::uint64_t past_txn = 0;  // 0: none
    };
    loaded_versions load_versions(pg_connection& conn);
    static pg_result speculate_versions(pg_connection& conn, const char* prepare_fetch, const std::string& store,
                                        bool& prepared);
    bool take_speculated_versions(const pg_result& rows, loaded_versions& loaded);
    loaded_versions take_versions(const pg_result& rows, bool registered_column);
    void verify_versions(const loaded_versions& loaded);
    void collect();
    void vacuum_after_bulk_load() noexcept;
    bool read_version(page_no page, std::byte* out, read_failure* why, bool read_around,
                      bool with_pending) const noexcept;
    // P6: whether `txn` (0: none) is the version of `page` at `snapshot` the
    // version map names; true where it names none (not loaded, or moved
    // past the snapshot by a commit under way).
    // `page` from the memory cache or the cache file (C4 at `snapshot`), a
    // hit counted, and a use for the clusters' judgement (worth_).
    // Async-signal-safe.
    pg_cache_file::lookup from_caches(page_no page, std::uint64_t snapshot, std::byte* out,
                                      bool read_around = false) const noexcept;
    bool named_version(page_no page, std::uint64_t txn, std::uint64_t snapshot) const noexcept;
    enum class spilled_read { absent, read, failed };
    spilled_read read_spilled(page_no page, std::byte* out, read_failure* why) const noexcept;
    void ensure_usable() const;
    void open_cache_file();
    void remember_committed(std::span<const page_image> pages, std::span<const page_no> spilled_only,
                            std::span<const zeroed_page> zeroed, std::uint64_t txn);
    void remember_images(std::span<const page_image> pages, std::span<const page_no> spilled_only,
                         std::uint64_t txn);
    std::vector<std::string> check_cache_file() const;
    std::vector<std::string> check_rows() const;  // check()'s, in its one-snapshot transaction
    // A committed image (`sum` its page_checksum) into the cache file, as newest through its commit.
    void write_slots(std::span<pg_cache_file::fetched_page> pages) const noexcept;

    pg_address address_;
    options opts_;
    std::unique_ptr<pg_connection> control_;  // open, commit, collection; the writer's lock lives on it
    std::unique_ptr<cache> cache_;
    // The cluster a fault's fetch brings, sized by what its pages were worth.
    mutable fetch_worth worth_;
    std::unique_ptr<fetcher> fetcher_;
    std::unique_ptr<pg_cache_file> file_;       // null: none (cache_file_note_ says why)
    std::unique_ptr<pg_version_map> versions_;  // C4; loaded by the fetch thread's connection at open
    pg_cache_key key_{};
    std::string cache_file_note_;
    struct fetch_counters;
    std::unique_ptr<fetch_counters> counters_;
    std::int64_t store_key_ = 0;    // the advisory lock's second key
    std::int64_t fence_ = 0;        // the writer's (P2)
    std::int64_t reader_id_ = 0;    // a reader's registration (P3)
    std::string store_id_;
    // P6: the store row's digest as of the snapshot (digest_known_: the row
    // has one, format 2).
    pg_digest digest_ = 0;
    bool digest_known_ = false;
    // The newest txn this handle reads. C4: whatever moves it (a commit; a
    // reader refreshed in place) must first bring versions_ to the new
    // snapshot, or the cache file hands out versions the map no longer names
    // truly (remember_committed does it for commits).
    std::atomic<std::uint64_t> snapshot_{0};
    // page_count_ as the fetch thread and faults on other threads read it
    // (a commit on the writer's thread moves it).
    std::atomic<page_no> pages_{0};
    mutable std::uint64_t newest_heard_ = 0;  // the newest commit a notification named (wait_for_commit)
    std::uint64_t collect_due_ = 0;           // bytes committed since the last collection
    std::uint64_t vacuum_due_ = 0;            // pages committed since the last VACUUM (vacuum_after_bulk_load)
    // remember_images' copies of a commit's pages, into the memory cache and
    // the cache file filing_batch at a time (write_slots).
    static constexpr std::size_t filing_batch = 256;
    std::vector<std::byte> filing_images_;
    std::vector<pg_cache_file::fetched_page> filing_;
    std::vector<std::uint32_t> row_sums_;  // copy_rows': each row's sum, the given pages' then the spilled
    bool poisoned_ = false;
    bool lock_lost_ = false;  // reconnected: the new session must take the writer's lock again
    bool session_ready_ = false;  // the control session has its settings and the commit statement

    // Pages the transaction in progress spilled: their offsets in spill_fd_.
    int spill_fd_ = -1;
    std::uint64_t spill_end_ = 0;
    std::unordered_map<page_no, std::uint64_t> spilled_;
    common::spin_lock spilled_lock_;  // readers are fault handlers
};

}  // namespace steppe::storage
