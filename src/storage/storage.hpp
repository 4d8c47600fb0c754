// The storage manager's interface: pages of 4096 opaque bytes named by
// logical page number, plus `meta_size` opaque bytes of roots per commit,
// committed atomically and durably. It knows nothing of types or pointers.
// Two implementations (docs/design.md, "Page stores"):
//   file_store (file_store.hpp)  a main file and a write-ahead log beside it
//   pg_store   (pg_store.hpp)    page versions in PostgreSQL tables
// storage::open picks one by the name: "postgresql://..." or a file path.
//
// What every implementation keeps:
//  (S1) every page image handed out was verified against its checksum;
//  (S2) commit() is all or nothing, and durable when it returns;
//  (S3) a read-only handle's snapshot never changes under it (refresh by
//       opening a new handle).
#pragma once

#include <steppe/error.hpp>
#include <sys/types.h>

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "storage/file_format.hpp"
#include "storage/io.hpp"
#include "storage/reader_table.hpp"

namespace steppe::storage {

using page_no = std::uint64_t;
// The most pages one store can hold (16 TiB); page numbers are checked
// against it wherever they enter (commits, headers, log frames).
inline constexpr page_no max_pages = page_no{1} << 32;
using meta_bytes = std::array<std::byte, meta_size>;

// True if `name` is a PostgreSQL URL ("postgresql://" or "postgres://"):
// storage::open gives it to pg_store.
inline bool is_postgres_url(std::string_view name) noexcept {
    return name.starts_with("postgresql://") || name.starts_with("postgres://");
}

class storage;

struct options {
    bool create = true;              // create the store if it does not exist
    bool exclusive_create = false;   // with create: errc::exists if it does exist
    bool read_only = false;          // shared lock, no writes, no recovery writes
    bool durable = true;             // fdatasync at commit; off only for tests/benchmarks that say so
    std::uint64_t checkpoint_bytes = 64ull << 20;  // checkpoint once the log grows past this
    std::uint64_t log_growth = 1ull << 20;         // the log grows by zeroed steps of at least this; 0 = as written
    // When the log is damaged before a commit shown durable, open throws
    // corrupt; with salvage it instead keeps every commit before the damage,
    // copies the log aside (NAME-wal.damaged), checkpoints them and starts a
    // new log; salvage_report() says what was lost. Writable opens only.
    bool salvage = false;
    mode_t file_mode = 0600;
    std::chrono::milliseconds lock_timeout{0};  // how long to wait for a conflicting lock
    // A checkpoint a reader defers (invariant 5) makes the commit that was to
    // run it wait up to this long for every reader to reach the newest
    // commit, once per checkpoint_bytes the log grows past that; 0 never
    // waits (docs/design.md, "Readers beside the writer").
    std::chrono::milliseconds checkpoint_wait{100};
    // Log a page version that differs from the main file's page in at most
    // max_diff_bytes as a diff frame (wal_format.hpp); off: whole pages
    // only (for measuring what differences save).
    bool log_diffs = true;
    env* io = nullptr;               // nullptr = the real file system
    // A read-only open may start from `after`, an open read-only handle of
    // the same store (a refresh): the log it has read is not read again
    // where the two snapshots share it. Used during open only.
    const storage* after = nullptr;
};

struct page_image {
    page_no page;
    const std::byte* data;  // page_size bytes
};

// Throws invalid_argument, naming `path`, for the first page numbered
// max_pages or more: every way pages enter a store (commit, spill, bulk
// write) checks them here, before anything is written.
void check_page_numbers(std::span<const page_image> pages, const std::string& path);

// Where a rewrite (compaction, migration, backup) writes a whole store's
// pages: a new main file (bulk_writer) or a PostgreSQL store's next commit
// (storage::commit_rewrite). Pages it is not given read as zeros.
class page_sink {
public:
    virtual ~page_sink() = default;
    virtual void write(std::span<const page_image> pages) = 0;
};
// Writes the pages of a rewritten store into `sink` and returns its meta.
using page_fill = std::function<meta_bytes(page_sink& sink)>;
// How a rewrite's pass writes the rewritten store (rewrite_store, in
// backup.hpp): it calls this with its fill once, or not at all; empty in a
// dry run.
using rewrite_target = std::function<void(const page_fill& fill)>;

struct info {
    std::uint32_t version;
    std::uint32_t page_size;
    std::string store_id;  // hex
    page_no page_count;
    std::uint64_t main_file_bytes;
    std::uint64_t wal_file_bytes;
    std::uint64_t wal_generation;
    std::uint64_t wal_bytes_used;
    std::uint64_t wal_commits;       // complete commits in the log, not yet checkpointed
    std::uint64_t wal_pages;         // distinct pages whose newest version is in the log
    std::uint64_t txn_seq;
    std::uint64_t header_seq;
    std::uint64_t marked_txn;        // the last commit the commit mark shows durable (0: none of this log)
    std::vector<reader_info> readers;  // live readers beside the writer (the reader table's slots), but this one
};

// Why a no-throw read failed, for the fault handler to print before it ends the process.
struct read_failure {
    errc code;
    char message[320];
};

struct stats {
    std::uint64_t commits = 0, pages_written = 0, bytes_written = 0, syncs = 0;
    std::uint64_t pages_as_diffs = 0;  // of pages_written: logged as diff frames
    std::uint64_t checkpoints = 0;
    std::uint64_t checkpoints_deferred = 0;  // a live reader held an older snapshot (invariant 5)
    std::uint64_t checkpoint_waits = 0;      // commits that waited for readers (options::checkpoint_wait)
    std::uint64_t checkpoint_waits_expired = 0;  // of those, the ones that ended without a checkpoint
};

// A store in PostgreSQL (zero for a file): statements sent, one round trip
// each; page-fetch queries and the page versions they brought; reads the
// local cache file served.
struct server_stats {
    std::uint64_t round_trips = 0, fetches = 0, pages_fetched = 0, cache_file_hits = 0;
};

class storage {
public:
    // Opens (or creates) the store named `path`: a file path, or a
    // "postgresql://" URL naming a database and a store (pg_store.hpp).
    // Throws not_found, version, corrupt, locked, permission, io, unavailable.
    static std::unique_ptr<storage> open(const std::string& path, const options& opts = {});
    virtual ~storage();
    storage(const storage&) = delete;
    storage& operator=(const storage&) = delete;

    // The newest committed version of `page` (zeros if never written).
    // Throws corrupt (naming file and page) or io.
    virtual void read_page(page_no page, std::byte* out) const = 0;
    // The same without allocating or throwing: safe in a signal handler as
    // long as no commit or checkpoint runs concurrently. With `read_around`,
    // a page that is not cached comes with the aligned cluster of pages
    // around it in one I/O (for data pages, used together).
    virtual bool read_page_nothrow(page_no page, std::byte* out, read_failure* why,
                                   bool read_around = false) const noexcept = 0;
    // The same as of the last commit, leaving out what spill() holds for the
    // transaction in progress (for checkers of the committed store).
    virtual bool read_committed_page_nothrow(page_no page, std::byte* out, read_failure* why,
                                             bool read_around = false) const noexcept = 0;

    // Asks for `page`'s newest version to be read ahead (for the page
    // engine). Async-signal-safe, like read_page_nothrow.
    virtual void prefetch(page_no page) const noexcept = 0;
    // Reads of newest versions that waited for the disk or the server since
    // open (read_page_nothrow with read_around that missed the page cache; a
    // fetch). A thread that works ahead of the program (the page engine's
    // load ahead) keeps off the disk while this grows. Async-signal-safe.
    virtual std::uint64_t waited_reads() const noexcept = 0;

    page_no page_count() const { return page_count_; }
    const meta_bytes& meta() const { return meta_; }
    std::uint64_t txn_seq() const { return txn_seq_; }

    // Atomically and durably replaces the given pages and the meta. All or
    // nothing: on a write error (no_space, io) the store stays at the previous
    // commit and can go on; if a sync fails the handle is poisoned.
    virtual void commit(std::span<const page_image> pages, const meta_bytes& meta) = 0;
    // Replaces the whole committed store, as one commit, by the pages `fill`
    // writes and the meta it returns: every page it does not write reads as
    // zeros, and the store has as many pages as the highest it writes + 1
    // (fewer than before, or more). Readers at older commits go on reading
    // them. For stores whose commits keep versions (PostgreSQL); a store in
    // files is rewritten as a new main file instead (storage::rewrite_store),
    // and this throws unsupported.
    virtual void commit_rewrite(const page_fill& fill);
    // Writes pages of the transaction in progress ahead of its commit, so
    // they need not stay in memory: read_page returns them from now on, the
    // next commit includes them, and discard_pending() (rollback) or a crash
    // before that commit forgets them. Not durable. It may run on another
    // thread while faults read pages (read_page_nothrow, prefetch,
    // is_pending), but not at the same time as any other call.
    virtual void spill(std::span<const page_image> pages) = 0;
    virtual void discard_pending() noexcept = 0;
    virtual bool is_pending(page_no page) const noexcept = 0;
    // How many pages spill() holds for the transaction in progress, and which.
    virtual std::size_t pending_count() const noexcept = 0;
    virtual std::vector<page_no> pending_pages() const = 0;
    // Makes the committed state cheaper to read and drops page versions no
    // reader needs (files: copies the log into the main file). Throws
    // locked naming the reader when a live reader holds an older snapshot
    // that keeps it from running.
    virtual void checkpoint() = 0;
    // The same, but false instead of the throw.
    virtual bool try_checkpoint() = 0;

    // A read-only handle: true once a commit newer than its snapshot has
    // been published (by a writer in any process or, for PostgreSQL, on any
    // machine), waiting up to `timeout` for one; false when none came. It
    // does not move the snapshot: the engines open the store again for that.
    // Throws io when it cannot ask (a PostgreSQL server gone).
    virtual bool wait_for_commit(std::chrono::milliseconds timeout) const = 0;
    // A read-only handle opened after `older`, another read-only handle of
    // the store still open: every page whose committed image may differ
    // between older's snapshot and this one's, ascending (a refresh in place
    // reloads only those: page_engine::refresh_in_place). nullopt when the
    // two cannot be compared (another store under the name, as compaction
    // leaves; a snapshot the writer's checkpoints have moved past): then any
    // page may differ.
    virtual std::optional<std::vector<page_no>> changed_since(const storage& older) const;
    // The engine's own open, failing after this storage made a new store,
    // removes what it made (the files; a store in PostgreSQL keeps its
    // rows): no failed open leaves a store behind. A no-op for a store that
    // was there before the open. Only before the first commit.
    virtual void remove_if_made_by_open() noexcept {}
    // Around fork (engine::hold_threads_for_fork): the store's own threads
    // (PostgreSQL's fetch thread) kept between their passes, bounded.
    virtual void hold_threads_for_fork() noexcept {}
    virtual void release_threads_after_fork() noexcept {}

    virtual info describe() const = 0;
    const stats& counters() const { return stats_; }  // live: they move as the store works
    virtual server_stats server_counters() const noexcept { return {}; }
    // What this handle holds in memory, in bytes (estimates from its
    // containers' sizes): `index` is what finds page versions (for files:
    // the checksum pages of the main file, 4 KiB per 1,020 pages, the log's
    // index, at most checkpoint_bytes / 4 KiB entries, and the index of the
    // pages spilled by the transaction in progress); `buffers` what it
    // buffers for writes and reads.
    struct memory {
        std::uint64_t index = 0, buffers = 0;
    };
    virtual memory memory_bytes() const noexcept = 0;
    // Every checksum and structural invariant of the store; one line per finding.
    virtual std::vector<std::string> check() const = 0;
    const std::string& path() const { return path_; }
    // What an open with options::salvage found and did; empty if the log was sound.
    const std::string& salvage_report() const { return salvage_report_; }

protected:
    explicit storage(std::string path) : path_(std::move(path)) {}

    std::string path_;
    page_no page_count_ = 0;
    meta_bytes meta_{};
    std::uint64_t txn_seq_ = 0;
    std::string salvage_report_;
    mutable stats stats_;
};

// An engine's meta of all zeros is a new store's: the first commit writes
// one. Throws corrupt, naming the store, for zeros in a store that has
// committed (a damaged header whose checksum was made to match), which
// would otherwise read as an empty store and be compacted to nothing.
void refuse_zero_meta_after_commits(const storage& s);

// A writer's close, for both engines (open_options::checkpoint_on_close):
// forgets the pages the transaction in progress spilled, then checkpoints,
// unless a reader in another process holds an older snapshot: then the log
// keeps the commits, quietly, and the next writable open checkpoints them.
// Any other failure throws, saying the log keeps every commit.
void checkpoint_at_close(storage& s);

}  // namespace steppe::storage
