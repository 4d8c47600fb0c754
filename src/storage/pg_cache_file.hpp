// The PostgreSQL page store's cache file (pg_store.hpp; docs/format.md,
// "The page cache file"; docs/design.md, "Page stores"): verified page
// images kept on local disk across processes and opens, so a warm read is
// a pread, not a round trip. One file may serve any number of processes and
// stores at once; it is only ever a cache: whatever is in it, a read is
// right or a miss.
//
// Layout: a 4 KiB header, then the slots' 64-byte headers, then their
// 4 KiB images, page-aligned (format 2; format 1 put each header just
// before its image in 4160-byte slots, and reading one cost the kernel
// twice the copy of an aligned page: such a file is made again). Page `p`
// of a store lives in slot (p + key hash) % slot_count (direct-mapped, so
// a fetched cluster lands in consecutive slots); a newer image of any page
// that maps there replaces it. Fields in host byte order.
//
//   header  0 magic "steppe pgcache\n\0"   16 format (2)   20 slot_size (4096)
//           24 slot_count (a multiple of 64)  32 crc32c of bytes 0..31
//   slot s's header at 4096 + s * 64, its image at 4096 + slot_count * 64 + s * 4096
//   slot header  0 check: crc32c of header bytes 4..63, then of the image
//           4 sum: page_checksum(image), as in the server's row
//           8 store_id (16 bytes)  24 server (system identifier)  32 row (steppe_store.id)
//          40 page  48 version (the commit that wrote it)  56 newest_through
//
// Invariants (check_against() checks C2 and C3 against the server):
//  (C1) a slot is used only if its check and its sum match its header and
//       the image read now; anything else (torn by kill -9 or by two
//       processes writing it at once, damaged, zeros, past the end of a
//       truncated file) is a miss. A process keeps a copy of the headers
//       it has read, a page of 64 at a time (one read a group of slots,
//       not one a slot): a copy is only a guess at the file's, and an
//       image that does not match it, or a header that names another
//       page, has the header read again from the file before the slot is
//       judged (another process may have written the slot since);
//  (C2) a slot names one version of one page of one store: a store is the
//       triple (store_id, server, row), which a drop and re-creation of the
//       same name (a new row) or a copy on another server (another system
//       identifier) never repeats. A version's image is not assumed never
//       to change (a database restored to an earlier point commits the
//       same numbers again): the version map carries each version's sum
//       too, and a slot's must match it;
//  (C3) a slot claims that its version is the page's newest at every
//       snapshot in [version, newest_through]. The fetch thread writes what
//       a fetch at snapshot S returned (newest_through = S); a writer, what
//       its commit T wrote (newest_through = T) once COMMIT returned;
//  (C4) a handle at snapshot S hands out a slot's image only if its version
//       map (the newest version of every page at S and its sum, from one
//       query at open, kept up to date by its own commits) names the
//       slot's version and sum; with no map (a reader whose registration
//       was gone at open), only if version ≤ S ≤ newest_through.
//
// Two processes writing one file need no lock: a slot's image is written,
// then its header (a run of a fetched cluster's slots two calls together),
// and a reader that sees a mix of two writes finds its check wrong (C1).
// Lookups are async-signal-safe (pread, crc32c, atomics, no malloc).
#pragma once

#include <sys/types.h>
#include <sys/uio.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "storage/read_around.hpp"
#include "storage/storage.hpp"

namespace steppe::storage {

class pg_connection;

// Which store a slot belongs to (C2).
struct pg_cache_key {
    std::byte store_id[16];
    std::uint64_t server = 0;  // pg_control_system().system_identifier
    std::uint64_t row = 0;     // steppe_store.id
};

inline constexpr std::size_t pg_cache_header_size = 4096;
inline constexpr std::size_t pg_cache_slot_header_size = 64;
// The slots whose headers share a page: a process copies them together,
// and a file's slot count is a multiple.
inline constexpr std::size_t pg_cache_group_slots = page_size / pg_cache_slot_header_size;  // 64
// What a slot costs in the file, its header and its image (4160).
inline constexpr std::size_t pg_cache_bytes_per_slot = pg_cache_slot_header_size + page_size;
// At most 2^32 slots (17.9 TB): a header that says more is damage, and the
// file is made again.
inline constexpr std::uint64_t pg_cache_max_slots = std::uint64_t{1} << 32;
inline constexpr char pg_cache_magic[16] = "steppe pgcache\n";
inline constexpr std::uint32_t pg_cache_format = 2;

struct pg_cache_slot_header {
    std::uint32_t check;
    std::uint32_t sum;
    std::byte store_id[16];
    std::uint64_t server, row, page, version, newest_through;
};
static_assert(sizeof(pg_cache_slot_header) == pg_cache_slot_header_size, "slot header layout (docs/format.md)");

// The newest version of each page at the handle's snapshot and its sum
// (C4): atomic words per page (0: no version, the page reads as zeros), in
// chunks of chunk_pages made as pages get versions, so the map costs 12
// bytes and a bit (mark_filed) a page of the store, whatever it grows to,
// and covers every page. The chunk table is calloc'd (fresh zero pages:
// touched only where chunks are). newest(), sum() and the marks are
// async-signal-safe; set() runs on one thread at a time (open, then the
// writer's commits) and may allocate.
class pg_version_map {
public:
    static constexpr std::uint64_t unknown = ~std::uint64_t{0};
    static constexpr page_no chunk_pages = page_no{1} << 14;
    pg_version_map();
    ~pg_version_map();
    pg_version_map(const pg_version_map&) = delete;
    pg_version_map& operator=(const pg_version_map&) = delete;

    std::uint64_t newest(page_no page) const noexcept {
        if (!loaded_.load(std::memory_order_acquire)) return unknown;
        const chunk* c = chunk_of(page);
        return c ? c->txn[page % chunk_pages].load(std::memory_order_relaxed) : 0;
    }
    // The newest version's sum (page_checksum; meaningful where newest() is a version).
    std::uint32_t sum(page_no page) const noexcept {
        const chunk* c = chunk_of(page);
        return c ? c->sum[page % chunk_pages].load(std::memory_order_relaxed) : 0;
    }
    void set(page_no page, std::uint64_t txn, std::uint32_t sum);
    // A hint for the fetch thread's clusters (pg_store): this process saw
    // the newest version of `page` land in the cache file, so a cluster
    // need not fetch it again. Marked after a write (or a slot found
    // holding it), cleared by set() and by a fetch that finds the marks
    // stale. A wrong mark (the slot overwritten since, by a page that maps
    // there or another process, or the file cut short) costs a fetch,
    // never a wrong read: the file is read, and checked, when the page is.
    void mark_filed(page_no page, std::uint64_t txn) noexcept {
        chunk* c = const_cast<chunk*>(chunk_of(page));
        if (!c || c->txn[page % chunk_pages].load(std::memory_order_acquire) != txn) return;
        std::atomic<std::uint32_t>& word = c->filed[page % chunk_pages / 32];
        word.fetch_or(filed_bit(page), std::memory_order_acq_rel);
        // A commit's set() between the load and the mark: taken back.
        if (c->txn[page % chunk_pages].load(std::memory_order_acquire) != txn)
            word.fetch_and(~filed_bit(page), std::memory_order_acq_rel);
    }
    bool filed(page_no page) const noexcept {
        const chunk* c = chunk_of(page);
        return c && (c->filed[page % chunk_pages / 32].load(std::memory_order_relaxed) & filed_bit(page));
    }
    // Clears the marks of [from, to).
    void unfile(page_no from, page_no to) noexcept {
        for (page_no p = from; p < to; ++p)
            if (filed(p)) {
                chunk* c = const_cast<chunk*>(chunk_of(p));
                c->filed[p % chunk_pages / 32].fetch_and(~filed_bit(p), std::memory_order_relaxed);
            }
    }
    void publish() noexcept { loaded_.store(true, std::memory_order_release); }
    bool loaded() const noexcept { return loaded_.load(std::memory_order_acquire); }
    std::uint64_t bytes() const noexcept { return chunks_.load(std::memory_order_relaxed) * sizeof(chunk); }

private:
    struct chunk {
        std::atomic<std::uint64_t> txn[chunk_pages]{};
        std::atomic<std::uint32_t> sum[chunk_pages]{};
        std::atomic<std::uint32_t> filed[chunk_pages / 32]{};
    };
    static std::uint32_t filed_bit(page_no page) noexcept { return std::uint32_t{1} << (page % 32); }
    static constexpr std::size_t table_size = max_pages / chunk_pages;
    const chunk* chunk_of(page_no page) const noexcept {
        return page < max_pages ? std::atomic_ref(table_[page / chunk_pages]).load(std::memory_order_acquire)
                                : nullptr;
    }

    chunk** table_;  // table_size entries, null (no chunk) until set
    std::atomic<std::uint64_t> chunks_{0};
    std::atomic<bool> loaded_{false};
};

// What the caches and the fetch thread did (pg_store::cache_counters()).
struct pg_cache_counters {
    std::uint64_t server_fetches = 0;  // queries that fetched page versions (faults and read-ahead)
    std::uint64_t pages_fetched = 0;   // page versions those queries returned
    std::uint64_t memory_hits = 0;     // reads served by the in-memory cache
    std::uint64_t file_hits = 0;       // reads served by the cache file
    std::uint64_t file_rejects = 0;    // slots of this store's page that failed C1 or C4
    std::uint64_t file_writes = 0;     // slots written
    std::uint64_t file_write_errors = 0;  // slots not written (disk full, I/O error): only a later miss
    std::uint64_t file_runs_read = 0;     // runs of slots read before a fetch's were written (not where holes)
    std::uint64_t zero_pages = 0;      // pages the version map showed never written: zeros, no query
    std::uint64_t round_trips = 0;     // statements sent on both connections since open (the open's own included)
};

class pg_cache_file {
public:
    // Opens `path`, making it (and its directory) if missing, with
    // `slot_count` slots (rounded down to whole groups of 64, one group at
    // least); an existing file keeps its own size. Returns null and says
    // why in `why` when the file cannot serve: `unusable` when it
    // cannot be made or opened or is another program's file (the caller
    // decides whether that is an error: not for the default path), and not
    // when it is no regular file (/dev/null: a way to say "none").
    static std::unique_ptr<pg_cache_file> open(const std::string& path, std::uint64_t slot_count, std::string& why,
                                               bool& unusable);
    ~pg_cache_file();
    pg_cache_file(const pg_cache_file&) = delete;
    pg_cache_file& operator=(const pg_cache_file&) = delete;

    enum class lookup { hit, absent, rejected };
    // Page `page` of store `key` at `snapshot` into `out`, if a slot holds
    // it (C1, C4); `out` may be overwritten on a miss. With `read_around`, a
    // slot not in the page cache brings the slots around it in (a fault's
    // read; read_cached). Async-signal-safe.
    lookup find(const pg_cache_key& key, page_no page, std::uint64_t snapshot, const pg_version_map& versions,
                std::byte* out, bool read_around = false) const noexcept;
    // How store `key`'s slots are read, decided at open from its page
    // count (read_around::plan, as for a main file): small enough, asked
    // for whole now. Only advice (it may throw bad_alloc).
    void plan_reads(const pg_cache_key& key, std::uint64_t pages) const;
    // Asks the kernel for the slots of `pages` of store `key`, to be read
    // by find() soon (read-ahead's hints, many at once). Only advice.
    void will_need(const pg_cache_key& key, std::span<const page_no> pages) const noexcept;
    // Writes what a fetch at snapshot `newest_through` returned (C3), in
    // any order (runs of consecutive pages go together), except where a
    // page's slot holds, soundly, a newer version or the same one known
    // newest as far (an old
    // snapshot's fetch then leaves it: the newer serves more handles). One
    // read of the old headers and two writes per run of up to 256
    // consecutive slots, not calls a page: a fetched cluster is up to
    // thousands of pages.
    struct fetched_page {
        page_no page;
        std::uint64_t version;
        std::uint32_t sum;  // page_checksum(image), as checked against the server's
        const std::byte* image;
        bool held = false;  // set by put_fetched: the page's slot holds this version now
    };
    struct put_counts {
        std::uint64_t written = 0, failed = 0;
        std::uint64_t runs_read = 0;  // runs whose old slots were read (none where the file has holes)
    };
    // `committed`: the versions are a commit's, the newest there are, so a
    // slot claiming a newer one (a database restored to an earlier point)
    // is replaced. Callers take turns (a store's fetch thread and its
    // commits): it reuses one set of buffers.
    put_counts put_fetched(const pg_cache_key& key, std::span<fetched_page> fetched, std::uint64_t newest_through,
                           bool committed = false) const;
    // Writes one slot (C3): false if the write failed (the slot is then a miss).
    bool put(const pg_cache_key& key, page_no page, std::uint64_t version, std::uint64_t newest_through,
             const std::byte* image) const noexcept;
    // The same, for an image whose page_checksum is known (`sum`): no pass over it.
    bool put(const pg_cache_key& key, page_no page, std::uint64_t version, std::uint64_t newest_through,
             std::uint32_t sum, const std::byte* image) const noexcept;
    // Every slot of store `key` against the server's versions of store
    // `name` (C2, C3): one line per finding.
    std::vector<std::string> check_against(const pg_cache_key& key, pg_connection& conn, const std::string& name,
                                           const std::string& shown) const;

    const std::string& path() const noexcept { return path_; }
    std::uint64_t slot_count() const noexcept { return slots_; }
    // The memory this process's copy of the slot headers holds (C1): a page
    // for each group read so far, and a byte a group for their states.
    std::uint64_t header_copy_bytes() const noexcept {
        return groups_copied_.load(std::memory_order_relaxed) * page_size + slots_ / pg_cache_group_slots;
    }

    // Where page `page` of store `key` lives, and where a slot's header and
    // image are in the file (tests damage them from outside).
    std::uint64_t slot_of(const pg_cache_key& key, page_no page) const noexcept;
    static off_t header_at(std::uint64_t slot) noexcept;
    off_t image_at(std::uint64_t slot) const noexcept;

private:
    pg_cache_file(int fd, std::string path, std::uint64_t slots, std::uint64_t device_read_ahead,
                  std::uint64_t* copies, std::unique_ptr<std::atomic<std::uint8_t>[]> group_state);
    // The slot's header as this process's copy has it, the group's header
    // page read first if it was not yet (into `scratch`, a page): true if
    // what `h` holds was read from the file just now.
    bool copied_header(std::uint64_t slot, pg_cache_slot_header& h, std::byte* scratch) const noexcept;
    void reread_header(std::uint64_t slot, pg_cache_slot_header& h) const noexcept;
    void remember_header(std::uint64_t slot, const pg_cache_slot_header& h) const noexcept;
    enum class slot_read { cached, hole, uncached };
    slot_read read_cached(std::byte* image, off_t at) const noexcept;
    bool read_image(std::byte* image, off_t at, bool read_around) const noexcept;
    void advise(std::uint64_t first_slot, std::uint64_t slots, bool headers) const noexcept;
    bool may_hold_data(off_t at, std::size_t size) const noexcept;
    static pg_cache_slot_header header_for(const pg_cache_key& key, page_no page, std::uint64_t version,
                                           std::uint64_t newest_through, std::uint32_t sum,
                                           const std::byte* image) noexcept;

    int fd_;
    std::string path_;
    std::uint64_t slots_;
    mutable read_around around_;  // find()'s clusters, judged by their use
    // The copy of the slot headers (C1): 8 words a slot, mapped without
    // reserve and touched a page a group as groups are read; a group's
    // state says whether it was read (not_copied, copying, copied).
    std::uint64_t* copies_;
    std::unique_ptr<std::atomic<std::uint8_t>[]> group_state_;
    mutable std::atomic<std::uint64_t> groups_copied_{0};
    // put_fetched's runs: consecutive slots, their old headers read in one
    // call and their new images and headers written in two (so at most
    // IOV_MAX, 1024, images).
    static constexpr std::size_t max_run = 256;
    mutable std::vector<pg_cache_slot_header> run_old_, run_headers_;
    mutable std::vector<iovec> run_images_;
    mutable std::vector<std::byte> held_image_;
    mutable std::mutex run_lock_;  // put_fetched's buffers
};

// Where a cache file goes when the URL names none:
// $XDG_CACHE_HOME/steppe/pg-pages, else $HOME/.cache/steppe/pg-pages; empty
// when neither variable is set.
std::string default_pg_cache_path();

}  // namespace steppe::storage
