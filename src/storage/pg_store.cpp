// The PostgreSQL page store (pg_store.hpp). Divisions, in order (the URL
// is read in pg_url.cpp):
//   2. the verified-image cache, the fetch thread, the cache file's use (reads)
//   3. open (the connections, the fetch thread; the statements it sends
//      are in pg_open.cpp)
//   4. reads
//   5. commit, spill, collection
//   6. describe and check
#include "storage/pg_store.hpp"

#include <fcntl.h>
#include <sched.h>
#include <sys/random.h>
#include <steppe/error.hpp>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <optional>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <exception>
#include <mutex>
#include <new>
#include <thread>

#include "common/sigsafe.hpp"
#include "common/started_thread.hpp"
#include "common/system_error.hpp"
#include "storage/checksum.hpp"
#include "storage/pg_connection.hpp"
#include "storage/pg_text.hpp"

namespace steppe::storage {

using namespace pg_text;

namespace {

// P7: what a zero version reads as.
constexpr std::byte zero_page[page_size]{};
bool is_zero_version(std::size_t image_bytes, std::uint32_t sum) { return image_bytes == 0 && sum == 0; }

// Commits of at least this many pages, and half the store or more, since
// the last VACUUM are a bulk load: VACUUM follows (vacuum_after_bulk_load).
constexpr std::uint64_t bulk_load_pages = 1024;

void copy_message(read_failure* why, errc code, const std::string& text) noexcept {
    why->code = code;
    std::snprintf(why->message, sizeof why->message, "%s", text.c_str());
}

}  // namespace

// 2. The cache and the fetch thread --------------------------------------------

// Direct-mapped by page number, so a cluster lands in consecutive slots.
// Each slot has a spin lock, held only to copy one page in or out (readers
// are fault handlers, which never hold it when they interrupt). Slots come
// in chunks made by the first put into them: an open (and so a refresh)
// does not pay for initializing the whole cache (16 MiB by default took
// 10-16 ms an open). A chunk keeps its slots' locks and pages apart from
// their images, which are page-aligned and left untouched until a put: making
// a chunk writes one page of headers, not all 65 pages (open's read-ahead
// makes a chunk for nearly every page it puts, and first touches of chunks
// were 46% of a warm open's CPU), and a copy in or out touches one page.
struct pg_store::cache {
    struct alignas(64) header {  // a cache line each: neighbours' locks do not contend (64 fill one page)
        common::spin_lock held;
        page_no page = ~page_no{0};
    };
    static constexpr std::uint64_t chunk_slots = 64;  // 256 KiB of images
    struct chunk {
        header headers[chunk_slots];
        alignas(page_size) std::byte images[chunk_slots][page_size];  // not initialized: untouched until a put
    };
    static_assert(sizeof(chunk) == (chunk_slots + 1) * page_size, "one page of headers, then the images");
    static constexpr std::uint64_t bytes_per_slot = sizeof(chunk) / chunk_slots;
    struct slot {
        header& h;
        std::byte* image;
    };
    explicit cache(std::uint64_t bytes)
        : count(bytes / page_size), chunks(new std::atomic<chunk*>[(count + chunk_slots - 1) / chunk_slots]()) {}
    ~cache() {
        for (std::uint64_t i = 0; i < chunk_count(); ++i) delete chunks[i].load(std::memory_order_relaxed);
    }

    bool find(page_no page, std::byte* out) const noexcept {
        const std::optional<slot> s = existing(page);
        if (!s) return false;
        std::lock_guard<const common::spin_lock> h(s->h.held);
        if (s->h.page != page) return false;
        std::memcpy(out, s->image, page_size);
        return true;
    }
    bool contains(page_no page) const noexcept {
        const std::optional<slot> s = existing(page);
        if (!s) return false;
        std::lock_guard<const common::spin_lock> h(s->h.held);
        return s->h.page == page;
    }
    // A fetched image, unless a commit ran, or was running, since the
    // fetch took its epoch and then its snapshot (its image may be older
    // than the commit's). The epoch is odd while a commit changes what is
    // newest (remember_committed), so an even epoch taken before the
    // snapshot means the snapshot is the one that epoch ends with.
    void put(page_no page, const std::byte* image, std::uint64_t epoch_at_fetch) noexcept {
        const std::optional<slot> s = epoch_at_fetch % 2 ? std::nullopt : made(page);
        if (!s) return;
        std::lock_guard<const common::spin_lock> h(s->h.held);
        if (epoch.load(std::memory_order_acquire) != epoch_at_fetch) return;
        s->h.page = page;
        std::memcpy(s->image, image, page_size);
    }
    // A committed image, while the epoch is odd (see put).
    void replace(page_no page, const std::byte* image) noexcept {
        const std::optional<slot> s = made(page);
        if (!s) return;
        std::lock_guard<const common::spin_lock> h(s->h.held);
        s->h.page = page;
        std::memcpy(s->image, image, page_size);
    }
    void forget_all() noexcept {
        for (std::uint64_t i = 0; i < chunk_count(); ++i)
            if (chunk* c = chunks[i].load(std::memory_order_acquire))
                for (header& h : c->headers) {
                    std::lock_guard<const common::spin_lock> held(h.held);
                    h.page = ~page_no{0};
                }
    }

    const std::uint64_t count;
    std::atomic<std::uint64_t> epoch{0};

private:
    std::uint64_t chunk_count() const noexcept { return (count + chunk_slots - 1) / chunk_slots; }
    static slot slot_in(chunk& c, std::uint64_t i) noexcept {
        return slot{c.headers[i % chunk_slots], c.images[i % chunk_slots]};
    }
    // Async-signal-safe: the slot of `page` if its chunk was made.
    std::optional<slot> existing(page_no page) const noexcept {
        if (count == 0) return std::nullopt;
        const std::uint64_t i = page % count;
        chunk* c = chunks[i / chunk_slots].load(std::memory_order_acquire);
        if (!c) return std::nullopt;
        return slot_in(*c, i);
    }
    // Normal context (the fetch thread, a commit): the slot, its chunk made
    // if needed; none without a cache, or memory for the chunk (the image
    // is then not kept, as with no cache).
    std::optional<slot> made(page_no page) noexcept {
        if (count == 0) return std::nullopt;
        const std::uint64_t i = page % count;
        std::atomic<chunk*>& at = chunks[i / chunk_slots];
        chunk* c = at.load(std::memory_order_acquire);
        if (!c) {
            chunk* fresh = new (std::nothrow) chunk;
            if (!fresh) return std::nullopt;
            if (at.compare_exchange_strong(c, fresh, std::memory_order_acq_rel)) c = fresh;
            else delete fresh;  // another thread made it: c is that one
        }
        return slot_in(*c, i);
    }
    std::unique_ptr<std::atomic<chunk*>[]> chunks;
};

// What pg_cache_counters reports, counted from any thread (fault handlers too).
struct pg_store::fetch_counters {
    std::atomic<std::uint64_t> server_fetches{0}, pages_fetched{0}, memory_hits{0}, file_hits{0}, file_rejects{0},
        file_writes{0}, file_write_errors{0}, file_runs_read{0}, zero_pages{0};
    static void add(std::atomic<std::uint64_t>& c, std::uint64_t n = 1) noexcept {
        c.fetch_add(n, std::memory_order_relaxed);
    }
};

// Requests from any thread (fault handlers among them), served by one thread
// that owns a connection. A request slot goes free → claimed → asked → served
// → free; the asking thread sleeps on the slot's state.
struct pg_store::fetcher {
    enum : std::uint32_t { free_slot, claimed, asked, served };
    struct request {
        std::atomic<std::uint32_t> state{free_slot};
        page_no page = 0;
        bool around = false;  // fetch the cluster around the page
        std::uint64_t snapshot = 0;
        std::uint64_t epoch = 0;  // the cache's, taken before the snapshot (cache::put)
        bool ok = false;
        read_failure why{};
        std::byte image[page_size];
    };
    static constexpr int request_slots = 16;

    // `c` has its fetch statement prepared already (prepare) if `prepared`.
    fetcher(const pg_store& s, std::unique_ptr<pg_connection> c, bool prepared) : store(s), conn(std::move(c)) {
        if (!prepared && !prepare(*conn)) conn->fail_last("preparing the page fetch");
        thread = common::start_thread([this] { run(); });
    }

    ~fetcher() {
        stop.store(true, std::memory_order_release);
        signal_work();
        thread.join();
    }

    // Async-signal-safe: atomics and futexes only.
    bool fetch(page_no page, bool around, std::uint64_t epoch, std::uint64_t snapshot, std::byte* out,
               read_failure* why) noexcept {
        request* r = nullptr;
        while (!r) {
            for (auto& candidate : requests) {
                std::uint32_t expected = free_slot;
                if (candidate.state.compare_exchange_strong(expected, claimed, std::memory_order_acquire)) {
                    r = &candidate;
                    break;
                }
            }
            if (!r) sched_yield();
        }
        r->page = page;
        r->around = around;
        r->snapshot = snapshot;
        r->epoch = epoch;
        r->state.store(asked, std::memory_order_release);
        signal_work();
        while (r->state.load(std::memory_order_acquire) != served) common::futex_wait(common::futex_word(r->state), asked);
        const bool ok = r->ok;
        if (ok) std::memcpy(out, r->image, page_size);
        else *why = r->why;
        r->state.store(free_slot, std::memory_order_release);
        return ok;
    }

    // Read-ahead (storage::prefetch): pages pushed from any thread, fault
    // handlers included, fetched by cluster when no fault waits; dropped
    // when the ring is full or the server is away.
    void ask_ahead(page_no page) noexcept {
        const std::uint64_t at = ahead_head.fetch_add(1, std::memory_order_acq_rel) % ahead_slots;
        ahead[at].store(page + 1, std::memory_order_release);
        signal_work();
    }

    // Async-signal-safe. Wakes the thread only if it sleeps or is about to
    // (run): a fault pushes up to eight hints, and a futex wake each was a
    // system call on the faulting thread while the thread was busy anyway.
    // Sequentially consistent both sides (as Dekker's): either run() sees
    // the new work before it sleeps, or this sees it sleeping.
    void signal_work() noexcept {
        work.fetch_add(1, std::memory_order_seq_cst);
        if (sleeping.load(std::memory_order_seq_cst)) common::futex_wake_all(common::futex_word(work));
    }

    bool serve_asked() {
        bool any = false;
        for (auto& r : requests) {
            if (r.state.load(std::memory_order_acquire) != asked) continue;
            serve(r);
            write_fetched();  // after the fault goes on: it waits for the server's bytes, not the disk's
            any = true;
        }
        return any;
    }

    // Hands r back to its fault, its page there (or why not); the slot is
    // the fault's again after this.
    static void answer(request& r) noexcept {
        r.state.store(served, std::memory_order_release);
        common::futex_wake_all(common::futex_word(r.state));
    }

    // One fetch's progress: what its rows are judged by, and the request it
    // serves until it answers it (then null; null too for read-ahead).
    struct fetch_state {
        using clock = std::chrono::steady_clock;
        std::uint64_t epoch, snapshot;
        request* r;
        std::optional<page_no> around{};  // a fault's fetch: its page (the rows beside it are judged)
        std::uint64_t got = 0;         // the version of r's page the rows held (0: none)
        bool refused = false;          // P2, P3: the registration or the fence was gone
        std::uint64_t rows = 0;
        clock::time_point sent{}, first_row{}, last_row{};
    };

    // Read-ahead from the cache file: a page it holds at the snapshot goes
    // into the in-memory cache (the fault then copies it from memory, not
    // through a system call and a checksum) and needs no fetch.
    bool ahead_from_file(page_no page, std::uint64_t epoch, std::uint64_t snapshot) {
        if (!store.file_ ||
            store.file_->find(store.key_, page, snapshot, *store.versions_, scratch) != pg_cache_file::lookup::hit)
            return false;
        store.cache_->put(page, scratch, epoch);
        return true;
    }

    // Read-ahead fetches the pages asked for, not their clusters: the hints
    // (a fault's targets, open's metadata) name what will be read, and over
    // a network the neighbours' bytes cost more than the round trip they
    // might save (a fault still brings its own cluster). Up to
    // pages_per_query a query: one round trip for a fault's worth of hints.
    bool serve_ahead() {
        std::vector<page_no> asked, pages;
        // The epoch before the snapshot (see cache::put).
        const std::uint64_t epoch = store.cache_->epoch.load(std::memory_order_acquire);
        const std::uint64_t snapshot = store.snapshot_.load(std::memory_order_acquire);
        for (auto& slot : ahead) {
            const std::uint64_t v = slot.exchange(0, std::memory_order_acq_rel);
            if (v != 0 && v - 1 < store.pages_.load(std::memory_order_relaxed) && !store.cache_->contains(v - 1))
                asked.push_back(v - 1);
        }
        // The file's slots are all asked for before the first is read: the
        // disk reads them together, not one after another; in page order,
        // so a run of consecutive pages is one request.
        std::sort(asked.begin(), asked.end());
        asked.erase(std::unique(asked.begin(), asked.end()), asked.end());
        if (store.file_) store.file_->will_need(store.key_, asked);
        for (page_no page : asked)
            if (!ahead_from_file(page, epoch, snapshot)) pages.push_back(page);
        std::sort(pages.begin(), pages.end());
        pages.erase(std::unique(pages.begin(), pages.end()), pages.end());
        for (std::size_t at = 0; at < pages.size(); at += pages_per_query) {
            page_ranges runs;  // of consecutive pages
            const std::size_t end = std::min(pages.size(), at + pages_per_query);
            for (std::size_t i = at; i < end; ++i) append_page(pages[i], runs);
            const auto [firsts, lasts] = range_arrays(runs);
            try {
                fetch_state f{epoch, snapshot, nullptr};
                run("steppe_fetch",
                    {store.address_.store, firsts, lasts, std::to_string(snapshot), std::to_string(store.reader_id_),
                     std::to_string(store.fence_)},
                    f);
            } catch (const std::exception&) {
                // read-ahead only: the fault that needs the page reports it
            }
            write_fetched();
            serve_asked();  // a fault never waits behind more than one read-ahead query
        }
        return !pages.empty();
    }

    void run() {
        while (!stop.load(std::memory_order_acquire)) {
            const std::uint32_t seen = work.load(std::memory_order_acquire);
            bool any = false;
            {
                std::lock_guard<std::mutex> in_pass(pass);
                any = serve_asked();
                any = serve_ahead() || any;
            }
            if (any) continue;
            sleeping.store(true, std::memory_order_seq_cst);
            if (work.load(std::memory_order_seq_cst) == seen) common::futex_wait(common::futex_word(work), seen);
            sleeping.store(false, std::memory_order_relaxed);
        }
    }

    // storage::hold_threads_for_fork: the thread kept between passes, so a
    // child forked meanwhile inherits no lock it took inside one (libpq's,
    // the allocator's). try_lock, bounded: a pass waiting for a server that
    // went away may take fault_wait; then the fork goes on without it.
    // A fault answered at its row may fork while the rest of a cluster
    // (up to 8 MiB) still streams in: the thread then stops between two
    // rows, where it holds no lock (let_fork), and the fork goes on.
    void hold_for_fork() noexcept {
        fork_wanted.store(1, std::memory_order_release);
        for (int waited_ms = 0; waited_ms < 1000; ++waited_ms) {
            if (pass.try_lock()) {
                held_for_fork = true;
                return;
            }
            if (parked_for_fork.load(std::memory_order_acquire)) return;
            ::usleep(1000);
        }
    }
    void release_after_fork() noexcept {
        if (held_for_fork) {
            held_for_fork = false;
            pass.unlock();
        }
        fork_wanted.store(0, std::memory_order_release);
        common::futex_wake_all(common::futex_word(fork_wanted));
    }
    // Between two rows of a fetch, or before its file writes: waits while
    // a fork is under way.
    void let_fork() noexcept {
        if (fork_wanted.load(std::memory_order_acquire) == 0) return;
        parked_for_fork.store(true, std::memory_order_release);
        while (fork_wanted.load(std::memory_order_acquire) != 0) common::futex_wait(common::futex_word(fork_wanted), 1);
        parked_for_fork.store(false, std::memory_order_release);
    }

    // Answers r: from a cache, or by a query that answers it as soon as
    // the row of its page arrives (take_row).
    void serve(request& r) {
        // The fetch before this one may have brought the page: into memory,
        // or (past the memory cache) into the file after its fault went on.
        if (store.from_caches(r.page, r.snapshot, r.image) == pg_cache_file::lookup::hit) {
            r.ok = true;
            answer(r);
            return;
        }
        fetch_state f{r.epoch, r.snapshot, &r};
        try {
            query(f);
        } catch (const std::exception& e) {
            if (f.r) {
                f.r->ok = false;
                copy_message(&f.r->why, errc::io, e.what());
            }
        }
        if (f.r) answer(*f.r);
    }

    // Runs the prepared fetch `name`, each row to take_row as it arrives; a
    // session the server ended is waited for (reconnecting every 100 ms, up
    // to fault_wait) only while a request waits for its page.
    void run(const char* name, std::initializer_list<std::string_view> params, fetch_state& f) {
        const bool wait = f.r != nullptr;
        const auto deadline =
            std::chrono::steady_clock::now() + (wait ? store.address_.fault_wait : std::chrono::seconds(0));
        fetch_counters::add(store.counters_->server_fetches);
        unwritten_snapshot = f.snapshot;
        for (;;) {
            // Each try judges the rows afresh (a retry's are all there again).
            f.got = 0;
            f.refused = false;
            if (f.r) {
                std::memset(f.r->image, 0, page_size);  // a page never written reads as zeros
                f.r->ok = true;
            }
            f.rows = 0;
            f.sent = fetch_state::clock::now();
            if (conn->try_stream_prepared(name, params, [&](pg_result row) { take_row(std::move(row), f); })) {
                using ns = std::chrono::nanoseconds;
                store.worth_.timed(f.rows, std::chrono::duration_cast<ns>(f.first_row - f.sent).count(),
                                   std::chrono::duration_cast<ns>(f.last_row - f.first_row).count());
                return;
            }
            // The statement failed, not the session; or the request was
            // answered before the session ended, and nothing waits for the rest.
            if (!conn->lost() || (wait && !f.r)) conn->fail_last("reading pages");
            while (!(conn->reconnect() && prepare(*conn))) {
                if (std::chrono::steady_clock::now() >= deadline)
                    throw error(errc::io, store.path_ + ": reading pages: the server did not answer for " +
                                              std::to_string(store.address_.fault_wait.count()) +
                                              " s (fault_wait_s=): " + conn->error());
                std::this_thread::sleep_for(std::chrono::milliseconds(100));
            }
        }
    }

    using page_ranges = std::vector<std::pair<page_no, page_no>>;  // [first, last)

    // The fetch statement's $2 and $3 for `ranges`.
    static std::pair<std::string, std::string> range_arrays(const page_ranges& ranges) {
        std::string firsts = "{", lasts = "{";
        for (const auto& [first, last] : ranges) {
            firsts += std::to_string(first) + ",";
            lasts += std::to_string(last) + ",";
        }
        firsts.back() = '}';
        lasts.back() = '}';
        return {firsts, lasts};
    }

    // Appends `page`, above every page in `out`: to its last range if it
    // follows it.
    static void append_page(page_no page, page_ranges& out) {
        if (!out.empty() && out.back().second == page)
            ++out.back().second;
        else
            out.push_back({page, page + 1});
    }

    // Appends the runs of [from, to) that neither cache holds: the memory
    // cache, or, if `marks`, the file as this process put pages there.
    void append_uncached(page_no from, page_no to, bool marks, page_ranges& out) const {
        for (page_no p = from; p < to; ++p)
            if (!store.cache_->contains(p) && !(marks && store.versions_->filed(p))) append_page(p, out);
    }

    // Fetches the cluster of f.r's page into the caches. The cluster is
    // judged here, not by the faulting thread: a page the fetch before
    // brought is a hit by now, not a miss. Its page's row comes first (the
    // ranges from it, then those before it), so its fault goes on while
    // the rest of the cluster still arrives.
    void query(fetch_state& f) {
        const request& r = *f.r;
        page_no first = r.page, last = r.page + 1;
        if (r.around) {
            f.around = r.page;
            first = store.worth_.cluster_first(r.page);
            last = std::max(std::min(first + store.worth_.pages(), store.pages_.load(std::memory_order_relaxed)), last);
        }
        // The page's range comes first, and pages the caches hold are left
        // out: a cluster grown around the last one holds it, and pages
        // pushed out of memory are in the file. The file's marks are
        // trusted while no two pages of the store share a slot, and not
        // around a page marked but missed there (the file was cut short,
        // or its slots taken by another store's pages): those are cleared.
        const bool marks = store.file_ && !store.versions_->filed(r.page) &&
                           store.file_->slot_count() >= store.pages_.load(std::memory_order_relaxed);
        if (store.file_ && !marks) store.versions_->unfile(first, last);
        page_ranges ranges{{r.page, r.page + 1}};
        append_uncached(r.page + 1, last, marks, ranges);
        append_uncached(first, r.page, marks, ranges);
        const auto [firsts, lasts] = range_arrays(ranges);
        run("steppe_fetch",
            {store.address_.store, firsts, lasts, std::to_string(r.snapshot), std::to_string(store.reader_id_),
             std::to_string(store.fence_)},
            f);
        if (f.around) store.worth_.judge();
        if (f.r && !f.refused && f.got == 0 && !store.named_version(f.r->page, 0, f.snapshot))
            missing_version(*f.r, 0);
    }

    // Writes what take_row() left for the cache file. Always leaves none
    // (the next fetch's snapshot must not be claimed for these).
    void write_fetched() noexcept {
        if (!unwritten.empty()) {
            let_fork();
            for (std::size_t i = 0; i < unwritten.size(); ++i)
                unwritten[i].image = unwritten_images.data() + i * page_size;
            try {
                const auto counts = store.file_->put_fetched(store.key_, unwritten, unwritten_snapshot);
                for (const auto& u : unwritten)
                    if (u.held) store.versions_->mark_filed(u.page, u.version);
                fetch_counters::add(store.counters_->file_writes, counts.written);
                fetch_counters::add(store.counters_->file_write_errors, counts.failed);
                fetch_counters::add(store.counters_->file_runs_read, counts.runs_read);
            } catch (const std::exception&) {  // memory for its buffers, or its lock: only later misses
                fetch_counters::add(store.counters_->file_write_errors, unwritten.size());
            }
        }
        unwritten.clear();
        unwritten_images.clear();
    }

    // Caches a sound version a fetch at f.snapshot returned: in memory
    // unless a commit ran since f.epoch, and for the cache file (C3: it is
    // the page's newest through the snapshot), which write_fetched()
    // writes; for f's request, its page's image (answered at once) or why
    // not; and any other fault whose page has come meanwhile.
    void take_row(pg_result row, fetch_state& f) {
        let_fork();
        f.last_row = fetch_state::clock::now();
        if (f.rows++ == 0) f.first_row = f.last_row;
        // P3: a reader reads only while its registration (and so every
        // version its snapshot needs) is there, as of the same statement.
        if (f.refused || row.binary_integer(0, 0) == 0) {
            if (!f.refused) refuse(f);
            return;
        }
        if (row.is_null(0, 1)) return;  // no version in the range
        const page_no page = page_no(row.binary_integer(0, 1));
        const auto txn = std::uint64_t(row.binary_integer(0, 2));
        const auto sum = std::uint32_t(row.binary_integer(0, 3));
        const std::size_t size = row.size(0, 4);
        const bool zero = is_zero_version(size, sum);  // P7
        const auto* image = zero ? zero_page : reinterpret_cast<const std::byte*>(row.bytes(0, 4));
        const bool sound = zero || (size == page_size && page_checksum(image, page_size) == sum);
        // P6: not the version the map names is not cached anywhere.
        const bool named = store.named_version(page, txn, f.snapshot);
        if (sound && named) {
            fetch_counters::add(store.counters_->pages_fetched);
            store.cache_->put(page, image, f.epoch);
            if (f.around && page != *f.around)
                store.worth_.fetched(page);
            else
                store.worth_.forget(page);
            // A zero version's slot would carry the zeros' sum, not the
            // server's 0 (C2); it costs a query once per process.
            if (store.file_ && !zero) {
                // Copied, so the row is freed now and the next one reuses its
                // memory: a cluster's rows kept until the file's write cost
                // fresh pages from the kernel for every fetch.
                unwritten.push_back({page, txn, sum, nullptr});
                unwritten_images.insert(unwritten_images.end(), image, image + page_size);
            }
        }
        if (f.r && page == f.r->page) {
            f.got = txn;
            if (!named) {
                missing_version(*f.r, txn);
            } else if (sound) {
                std::memcpy(f.r->image, image, page_size);
                answer(*f.r);
                f.r = nullptr;
            } else {
                f.r->ok = false;
                copy_message(&f.r->why, errc::corrupt,
                             store.path_ + ": page " + std::to_string(page) + " (version of commit " +
                                 std::to_string(txn) + ", " + std::to_string(size) +
                                 " bytes) fails its checksum in table steppe_page; run `steppe check " +
                                 store.path_ + "`");
            }
        }
        answer_arrived(f);
    }

    // Other faults waiting for pages that the running fetch has brought:
    // answered from the memory cache now, not after its last row.
    void answer_arrived(const fetch_state& f) {
        for (auto& q : requests) {
            if (&q == f.r || q.state.load(std::memory_order_acquire) != asked || !store.cache_->find(q.page, q.image))
                continue;
            fetch_counters::add(store.counters_->memory_hits);
            store.worth_.used(q.page);
            q.ok = true;
            answer(q);
        }
    }

    // P2, P3: the fetch's statement found the reader's registration or the
    // writer's fence gone; f's request is told why.
    void refuse(fetch_state& f) const {
        f.refused = true;
        if (!f.r) return;
        f.r->ok = false;
        if (store.reader_id_ != 0)
            copy_message(&f.r->why, errc::io,
                         store.path_ + ": this reader's snapshot (commit " + std::to_string(f.r->snapshot) +
                             ") is no longer kept: its registration was dropped when its session to the server "
                             "ended, and the writer may have collected the versions it reads; open the store "
                             "again");
        else
            copy_message(&f.r->why, errc::locked,
                         store.path_ + ": another writer took the store over (its fence is no longer this "
                                       "handle's), so the versions of this handle's commit " +
                             std::to_string(f.r->snapshot) +
                             " may be collected; this handle can neither commit nor read: open the store again");
    }

    // P6: the server holds another version of r's page at r's snapshot (`got`;
    // 0: none) than the one the version map names.
    void missing_version(request& r, std::uint64_t got) const {
        r.ok = false;
        // Short: the message has 320 bytes, and the URL comes first.
        copy_message(&r.why, errc::corrupt,
                     store.path_ + ": page " + std::to_string(r.page) + " at commit " + std::to_string(r.snapshot) +
                         ": steppe_page holds " +
                         (got ? "the version of commit " + std::to_string(got) : std::string("no version")) +
                         " there, not that of commit " + std::to_string(store.versions_->newest(r.page)) +
                         " (P6: the version map loaded at open); a version row was deleted or added outside "
                         "steppe: run `steppe check` on the store");
    }

    // The one query: whether reader $5 is registered, or for the writer
    // (reader 0) whether the store row still has its fence $6 (P2: a writer
    // taken over must not read at its old commit, whose versions the new
    // writer may collect); and the newest version at or below the snapshot
    // of each page of the ranges [$2[i], $3[i]); one statement, so one snapshot.
    // (Ranges streamed from their last page down, a backward scan of the
    // key with no sort before the first row, made cold OO1 traversals
    // slower: a fault's next page is more often after it than before.)
    static constexpr const char* prepare_sql =
        "PREPARE steppe_fetch(text, bigint[], bigint[], bigint, integer, bigint) AS "
        "SELECT reg.n, v.page, v.txn, v.sum, v.image FROM "
        "(SELECT CASE WHEN $5 = 0 THEN (SELECT count(*) FROM steppe_store WHERE name = $1 AND fence = $6) "
        "ELSE (SELECT count(*) FROM steppe_reader WHERE store = $1 AND id = $5) END AS n) reg LEFT JOIN LATERAL "
        "(SELECT p.* FROM unnest($2, $3) AS c(first, last) CROSS JOIN LATERAL "
        "(SELECT DISTINCT ON (page) page, txn, sum, image FROM steppe_page "
        "WHERE store = $1 AND page >= c.first AND page < c.last AND txn <= $4 ORDER BY page, txn DESC) p) v ON true";
    static bool prepare(pg_connection& conn) {
        PGresult* r = conn.try_exec(prepare_sql, {}, false);
        const bool prepared = r != nullptr;
        libpq().PQclear(r);
        return prepared;
    }

    static constexpr std::size_t ahead_slots = 256;
    static constexpr std::size_t pages_per_query = 256;  // up to 1 MiB of images a query
    const pg_store& store;
    std::unique_ptr<pg_connection> conn;
    request requests[request_slots];
    std::atomic<std::uint64_t> ahead[ahead_slots] = {};  // page + 1; 0: empty
    std::atomic<std::uint64_t> ahead_head{0};
    std::atomic<std::uint32_t> work{0};
    std::atomic<bool> sleeping{false};  // run() waits, or is about to, for work to change (signal_work)
    std::atomic<bool> stop{false};
    std::mutex pass;              // held by a pass of the thread, and across a fork
    bool held_for_fork = false;   // pass taken by hold_for_fork
    std::atomic<std::uint32_t> fork_wanted{0};   // 1 from hold_for_fork to release_after_fork
    std::atomic<bool> parked_for_fork{false};    // the thread waits in let_fork
    std::thread thread;
    std::byte scratch[page_size];  // ahead_from_file's image, used by the fetch thread only
    // What take_row() found for the cache file, and their images (the
    // i-th at i * page_size; the pointers are set when they are written).
    std::vector<pg_cache_file::fetched_page> unwritten;
    std::vector<std::byte> unwritten_images;
    std::uint64_t unwritten_snapshot = 0;
};

void pg_store::hold_threads_for_fork() noexcept {
    if (fetcher_) fetcher_->hold_for_fork();
}

void pg_store::release_threads_after_fork() noexcept {
    if (fetcher_) fetcher_->release_after_fork();
}

// 3. Open ---------------------------------------------------------------------

pg_store::pg_store(pg_address address, const options& opts)
    : storage(address.shown), address_(std::move(address)), opts_(opts) {}

pg_store::~pg_store() {
    fetcher_.reset();
    // The writer's lock goes before close returns, so a writer opened next
    // finds it free (the server ends a closed session's locks on its own time).
    if (!opts_.read_only && control_ && control_->ok())
        if (PGresult* r = control_->try_exec("SELECT pg_advisory_unlock_all()", {}, false)) libpq().PQclear(r);
    if (reader_id_ != 0 && control_ && control_->ok()) {
        if (PGresult* r = control_->try_exec("DELETE FROM steppe_reader WHERE store = $1 AND id = $2",
                                             {address_.store, std::to_string(reader_id_)}, false))
            libpq().PQclear(r);
    }
    if (spill_fd_ >= 0) ::close(spill_fd_);
}

std::unique_ptr<pg_store> pg_store::open(const std::string& url, const options& opts) {
    if (opts.salvage && opts.read_only)
        throw error(errc::invalid_argument, pg_shown_url(url) + ": salvage changes the store; it needs a writable open");
    if (opts.exclusive_create && (opts.read_only || !opts.create))
        throw error(errc::invalid_argument, pg_shown_url(url) + ": exclusive_create needs a writable open with create");
    std::unique_ptr<pg_store> s(new pg_store(parse_pg_address(url), opts));
    const bool from_standby = opts.read_only && s->address_.pages_from_standby;  // P5
    // The fetch connection is made on a thread of its own while the
    // control connection registers: two connections' set-up in about the
    // time of one (each is a few round trips and a server process).
    // Its fetch statement is prepared there too, in the time of the control
    // connection's first round trip; again later if that found no tables
    // (a first open makes them) or a standby that has not caught up.
    // On the primary, the same round trip reads the version map ahead of
    // the store row the control connection is about to return
    // (take_speculated_versions says whether it may stand; else it is read
    // again after): the query was most of an open's time after the
    // registration, each in turn.
    std::unique_ptr<pg_connection> fetch;
    bool fetch_prepared = false;
    pg_result speculated(nullptr);  // declared before the thread: it outlives the join on every way out
    std::exception_ptr fetch_failed;
    std::thread connecting([&] {
        try {
            fetch = std::make_unique<pg_connection>(from_standby ? s->address_.fetch_conninfo : s->address_.conninfo,
                                                    s->address_.shown);
            if (!from_standby) speculated = speculate_versions(*fetch, fetcher::prepare_sql, s->address_.store, fetch_prepared);
        } catch (...) {
            fetch_failed = std::current_exception();
        }
    });
    struct join_on_exit {
        std::thread& thread;
        ~join_on_exit() {
            if (thread.joinable()) thread.join();  // an exception on the way out
        }
    } joined{connecting};
    s->control_ = std::make_unique<pg_connection>(s->address_.conninfo, s->address_.shown);
    if (opts.read_only) s->open_as_reader();
    else s->open_as_writer();
    s->counters_ = std::make_unique<fetch_counters>();
    s->open_cache_file();
    s->versions_ = std::make_unique<pg_version_map>();
    s->cache_ = std::make_unique<cache>(s->address_.cache_bytes);
    // A cluster lands in both caches, each direct-mapped by page. Without
    // the file, a larger one pushes out the clusters just before it from
    // the memory cache (16 MiB by default), which made warm OO1 2-6x slower:
    // it stays at 128 KiB. With it, up to an eighth of the file: what a
    // large cluster pushes out of the memory cache is read from the file.
    // A cluster larger than the memory cache would push out pages of its
    // own that query() left out as cached (with none, none are left out).
    if (s->file_) {
        const std::uint64_t cached = s->cache_->count ? s->cache_->count : ~std::uint64_t{0};
        s->worth_.set_limit(std::min<std::uint64_t>(s->file_->slot_count() / 8, cached));
    }
    connecting.join();
    if (fetch_failed) std::rethrow_exception(fetch_failed);
    if (from_standby) s->wait_for_standby(*fetch);
    loaded_versions loaded;
    if (!s->take_speculated_versions(speculated, loaded)) loaded = s->load_versions(*fetch);
    if (s->file_) s->file_->plan_reads(s->key_, s->pages_.load(std::memory_order_relaxed));  // key_ is whole now
    s->fetcher_ = std::make_unique<fetcher>(*s, std::move(fetch), fetch_prepared);
    s->verify_versions(loaded);
    return s;
}

// 4. Reads ------------------------------------------------------------------

pg_store::spilled_read pg_store::read_spilled(page_no page, std::byte* out, read_failure* why) const noexcept {
    std::uint64_t offset = 0;
    {
        std::lock_guard<const common::spin_lock> hold(spilled_lock_);
        auto it = spilled_.find(page);
        if (it == spilled_.end()) return spilled_read::absent;
        offset = it->second;
    }
    ssize_t n = ::pread(spill_fd_, out, page_size, off_t(offset));
    if (n == ssize_t(page_size)) return spilled_read::read;
    common::fixed_message msg(why->message, sizeof why->message);
    why->code = errc::io;
    msg << path_.c_str() << ": reading spilled page " << page << " back from the spill file failed, errno "
        << std::uint64_t(n < 0 ? errno : 0);
    return spilled_read::failed;
}

bool pg_store::read_version(page_no page, std::byte* out, read_failure* why, bool read_around,
                            bool with_pending) const noexcept {
    if (with_pending) {
        if (auto r = read_spilled(page, out, why); r != spilled_read::absent) return r == spilled_read::read;
    }
    const page_no pages = pages_.load(std::memory_order_relaxed);
    if (page >= pages) {
        common::fixed_message msg(why->message, sizeof why->message);
        why->code = errc::invalid_argument;
        msg << path_.c_str() << ": page " << page << " is beyond the store's " << pages << " pages";
        return false;
    }
    for (int attempt = 0;; ++attempt) {
        // The epoch before the snapshot (cache::put): a commit between the
        // two then keeps this fetch's images, which may be older than its
        // own, out of the memory cache.
        const std::uint64_t epoch = cache_->epoch.load(std::memory_order_acquire);
        const std::uint64_t snapshot = snapshot_.load(std::memory_order_acquire);
        switch (from_caches(page, snapshot, out, read_around)) {
        case pg_cache_file::lookup::hit:
            return true;
        case pg_cache_file::lookup::rejected:  // counted once a read (the fetch thread looks again)
            fetch_counters::add(counters_->file_rejects);
            break;
        case pg_cache_file::lookup::absent:
            break;
        }
        if (versions_->newest(page) == 0) {  // C4: no version at the snapshot, so zeros
            fetch_counters::add(counters_->zero_pages);
            std::memset(out, 0, page_size);
            return true;
        }
        const bool ok = fetcher_->fetch(page, read_around, epoch, snapshot, out, why);
        // The writer read on another thread while a commit returned: the
        // collection after it may have dropped the versions of `snapshot`
        // before the fetch ran (it then found none: zeros, which the map,
        // moved past the snapshot, could not refuse). Read again at the new one.
        if (snapshot_.load(std::memory_order_acquire) == snapshot || attempt >= 100) return ok;
    }
}

pg_cache_file::lookup pg_store::from_caches(page_no page, std::uint64_t snapshot, std::byte* out,
                                            bool read_around) const noexcept {
    if (cache_->find(page, out)) {
        fetch_counters::add(counters_->memory_hits);
    } else if (!file_) {
        return pg_cache_file::lookup::absent;
    } else if (const auto found = file_->find(key_, page, snapshot, *versions_, out, read_around);
               found != pg_cache_file::lookup::hit) {
        return found;
    } else {
        fetch_counters::add(counters_->file_hits);
    }
    worth_.used(page);
    return pg_cache_file::lookup::hit;
}

bool pg_store::named_version(page_no page, std::uint64_t txn, std::uint64_t snapshot) const noexcept {
    const std::uint64_t named = versions_->newest(page);
    return named == pg_version_map::unknown || named > snapshot || named == txn;
}

bool pg_store::read_page_nothrow(page_no page, std::byte* out, read_failure* why, bool read_around) const noexcept {
    return read_version(page, out, why, read_around, true);
}

bool pg_store::read_committed_page_nothrow(page_no page, std::byte* out, read_failure* why,
                                           bool read_around) const noexcept {
    return read_version(page, out, why, read_around, false);
}

void pg_store::prefetch(page_no page) const noexcept {
    if (cache_->count && page < pages_.load(std::memory_order_relaxed) && !cache_->contains(page))
        fetcher_->ask_ahead(page);
}

std::uint64_t pg_store::waited_reads() const noexcept {
    return counters_->server_fetches.load(std::memory_order_relaxed);
}

void pg_store::read_page(page_no page, std::byte* out) const {
    read_failure why;
    if (!read_page_nothrow(page, out, &why)) throw error(why.code, why.message);
}

// The cache file: which one, what a commit puts in it, its check.

void pg_store::open_cache_file() {
    if (address_.cache_file_bytes == 0 || address_.cache_file.empty()) {
        cache_file_note_ =
            address_.cache_file_bytes == 0 ? "cache_file_mib=0" : "neither XDG_CACHE_HOME nor HOME is set";
        return;
    }
    std::string why;
    bool unusable = false;
    const std::uint64_t slots = std::max<std::uint64_t>(address_.cache_file_bytes / pg_cache_bytes_per_slot, 1);
    file_ = pg_cache_file::open(address_.cache_file, slots, why, unusable);
    if (!file_) {
        // Only a file the user named is worth an error; the default one is a convenience.
        if (address_.cache_file_named && unusable)
            throw error(errc::invalid_argument, path_ + ": the cache file cannot be used: " + why +
                                                    " (name another with cache_file=, or cache_file_mib=0 for none)");
        cache_file_note_ = why;
        return;
    }
    if (!bytes_of_hex(store_id_, key_.store_id, sizeof key_.store_id))
        throw error(errc::corrupt, path_ + ": the store's id in steppe_store is not 32 hex digits: " + store_id_);
    key_.row = std::uint64_t(store_key_);
}

// Commits' images into the cache file, a run of slots in two writes (a
// 2,560-page commit was 5,120 system calls a slot at a time).
void pg_store::write_slots(std::span<pg_cache_file::fetched_page> pages) const noexcept {
    if (!file_ || pages.empty()) return;
    try {
        const auto counts = file_->put_fetched(key_, pages, pages.front().version, true);
        for (const auto& p : pages)
            if (p.held) versions_->mark_filed(p.page, p.version);
        fetch_counters::add(counters_->file_writes, counts.written);
        fetch_counters::add(counters_->file_write_errors, counts.failed);
        fetch_counters::add(counters_->file_runs_read, counts.runs_read);
    } catch (const std::exception&) {  // its buffers' memory, or its lock: only later misses
        fetch_counters::add(counters_->file_write_errors, pages.size());
    }
}

// After commit `txn` returned (so its versions are durable and newest, C3):
// the in-memory cache and the cache file take its images, the version map
// its versions. Spilled pages are read back from the spill file for the
// cache file (a big transaction's pages are most of a new store's); if one
// cannot be, the map still names its version and its row's sum, so its
// older slot no longer serves (C4) and the next commit's digest terms are
// right (P6).
void pg_store::remember_committed(std::span<const page_image> pages, std::span<const page_no> spilled_only,
                                  std::span<const zeroed_page> zeroed, std::uint64_t txn) {
    cache_->epoch.fetch_add(1, std::memory_order_acq_rel);  // odd: no read-ahead lands until it is even again
    remember_images(pages, spilled_only, txn);
    for (const zeroed_page& z : zeroed) versions_->set(z.page, txn, 0);  // P7: a zero version's sum
    snapshot_.store(txn, std::memory_order_release);
    cache_->epoch.fetch_add(1, std::memory_order_acq_rel);
}

// remember_committed's writes, while the epoch is odd.
void pg_store::remember_images(std::span<const page_image> pages, std::span<const page_no> spilled_only,
                               std::uint64_t txn) {
    filing_.clear();
    auto take = [&](page_no page, std::uint32_t sum) {
        filing_.push_back({page, txn, sum, filing_images_.data() + filing_.size() * page_size});
        if (filing_.size() == filing_batch) {
            write_slots(filing_);
            filing_.clear();
        }
    };
    // Each page's sum is the one its row got (copy_rows made it: no second
    // pass over the page): the map's must be the server's (C4, and P6's
    // terms of the next commit), even for a spilled page that cannot be
    // read back for the cache file now.
    for (std::size_t i = 0; i < pages.size(); ++i) {
        std::byte* copy = filing_images_.data() + filing_.size() * page_size;
        std::memcpy(copy, pages[i].data, page_size);  // outside the slot's lock: it may be a store page
        cache_->replace(pages[i].page, copy);
        versions_->set(pages[i].page, txn, row_sums_[i]);
        take(pages[i].page, row_sums_[i]);
    }
    for (std::size_t i = 0; i < spilled_only.size(); ++i) {
        read_failure why;
        std::byte* copy = filing_images_.data() + filing_.size() * page_size;
        const std::uint32_t sum = row_sums_[pages.size() + i];
        versions_->set(spilled_only[i], txn, sum);
        if (read_spilled(spilled_only[i], copy, &why) == spilled_read::read && page_checksum(copy, page_size) == sum)
            take(spilled_only[i], sum);
    }
    write_slots(filing_);
}

std::vector<std::string> pg_store::check_cache_file() const {
    if (!file_) return {};
    return file_->check_against(key_, *control_, address_.store, path_);
}

pg_cache_counters pg_store::cache_counters() const noexcept {
    const fetch_counters& c = *counters_;
    auto get = [](const std::atomic<std::uint64_t>& v) { return v.load(std::memory_order_relaxed); };
    return {get(c.server_fetches), get(c.pages_fetched), get(c.memory_hits),       get(c.file_hits),
            get(c.file_rejects),   get(c.file_writes),   get(c.file_write_errors), get(c.file_runs_read),
            get(c.zero_pages),
            control_->round_trips() + (fetcher_ ? fetcher_->conn->round_trips() : 0)};
}

server_stats pg_store::server_counters() const noexcept {
    const pg_cache_counters c = cache_counters();
    return {c.round_trips, c.server_fetches, c.pages_fetched, c.file_hits};
}

// 5. Commit, spill, collection ---------------------------------------------------

void pg_store::ensure_usable() const {
    if (opts_.read_only) throw error(errc::invalid_argument, path_ + " is open read-only");
    if (poisoned_)
        throw error(errc::poisoned, path_ + ": an earlier commit's outcome is unknown (the server connection was "
                                            "lost during COMMIT); reopen the store to see which state it is in");
}

namespace {
// One COPY text line: store, page, txn, sum, image as bytea hex.
// Returns the image's sum, as the row holds it.
std::uint32_t copy_line(std::string& out, const std::string& store, page_no page, std::uint64_t txn,
                        const std::byte* image) {
    const std::uint32_t sum = page_checksum(image, page_size);
    out += store;
    out += '\t';
    out += std::to_string(page);
    out += '\t';
    out += std::to_string(txn);
    out += '\t';
    out += std::to_string(std::int32_t(sum));
    out += "\t\\\\x";  // COPY's text format escapes the backslash of bytea's "\x"
    append_hex(out, image, page_size);
    out += '\n';
    return sum;
}
}  // namespace

// P7: a zero version, in this commit `txn`, of every page whose newest
// version is older and not a zero version already (the rewrite's own pages
// were copied in before this, as `txn`). The pages zeroed are read from the
// same `newest` the INSERT read (a data-modifying WITH runs to its end
// whether or not it is read), not by a join with its RETURNING: a join the
// planner may make a nested loop over two unindexed results.
std::vector<pg_store::zeroed_page> pg_store::zero_versions(std::uint64_t txn) {
    pg_result rows = control_->exec(
        "committing (zero versions of the pages the rewrite leaves out)",
        "WITH newest AS (SELECT DISTINCT ON (page) page, txn, length(image) AS bytes FROM steppe_page WHERE store = $1 "
        "ORDER BY page, txn DESC), zeroed AS (INSERT INTO steppe_page (store, page, txn, sum, image) SELECT $1, page, $2, "
        "0, ''::bytea FROM newest WHERE txn < $2 AND bytes > 0) "
        "SELECT page, txn FROM newest WHERE txn < $2 AND bytes > 0",
        {address_.store, std::to_string(txn)}, true);
    std::vector<zeroed_page> out;
    out.reserve(std::size_t(rows.rows()));
    for (int r = 0; r < rows.rows(); ++r)
        out.push_back({page_no(rows.binary_integer(r, 0)), std::uint64_t(rows.binary_integer(r, 1))});
    return out;
}

bool pg_store::reconnect_control() {
    if (!control_->reconnect()) return false;
    lock_lost_ = true;  // a new session holds no advisory lock
    set_up_session();
    return true;
}

std::uint64_t pg_store::copy_rows(std::span<const page_image> pages, std::span<const page_no> spilled_only,
                                  std::uint64_t txn) {
    const char* what = "committing";
    // Sent a few hundred pages at a time, so a big commit is not held in memory twice over.
    constexpr std::size_t chunk = 1u << 20;
    std::uint64_t sent = 0;
    std::string rows;
    row_sums_.clear();
    auto flush = [&](bool last) {
        if (rows.size() < chunk && !last) return;
        control_->put_copy(what, rows);
        sent += rows.size();
        rows.clear();
    };
    control_->begin_copy(what, "COPY steppe_page (store, page, txn, sum, image) FROM STDIN");
    for (const auto& p : pages) {
        row_sums_.push_back(copy_line(rows, address_.store, p.page, txn, p.data));
        flush(false);
    }
    std::vector<std::byte> image(page_size);
    for (page_no page : spilled_only) {
        read_failure why;
        if (read_spilled(page, image.data(), &why) != spilled_read::read) throw error(why.code, why.message);
        row_sums_.push_back(copy_line(rows, address_.store, page, txn, image.data()));
        flush(false);
    }
    flush(true);
    control_->end_copy(what);
    return sent;
}

std::uint64_t pg_store::commit_transaction(std::span<const page_image> pages, std::span<const page_no> spilled_only,
                                           std::uint64_t txn, page_no count, const meta_bytes& meta, bool rewrite,
                                           std::vector<zeroed_page>& zeroed) {
    std::uint64_t sent = 0;
    const char* what = "committing";
    // Four round trips: this script, COPY's start and end, and the last
    // script (the row moved and COMMIT). Names are literals: valid_store_name
    // lets no quote into them.
    const std::string name = "'" + address_.store + "'";
    bool outcome_unknown = false;
    try {
        if (!session_ready_) set_up_session();  // a reconnect that could not set it up
        // P2: the store row locked, the fence ours. After a reconnect the
        // session lost its advisory lock: take it again, or give up.
        PGresult* locked = control_->try_exec_script("BEGIN; SELECT fence, txn, id FROM steppe_store WHERE name = " +
                                                     name + " FOR UPDATE");
        if (!locked) control_->fail_last(what);
        pg_result row(locked);
        if (row.rows() == 0 || row.integer(0, 0) != fence_)
            throw error(errc::locked, path_ + ": another writer took the store over (its fence is " +
                                          (row.rows() ? row.text(0, 0) : "gone") + ", this handle's " +
                                          std::to_string(fence_) +
                                          "); this handle can no longer commit: its changes are not in the store");
        if (std::uint64_t(row.integer(0, 1)) != txn_seq_)
            throw error(errc::corrupt, path_ + ": the store is at commit " + row.text(0, 1) + ", not " +
                                           std::to_string(txn_seq_) + " as this writer left it");
        if (lock_lost_ && control_->exec(what, "SELECT pg_try_advisory_lock($1, $2)",
                                         {std::to_string(writer_class), row.text(0, 2)})
                                  .text(0, 0) != "t")
            throw error(errc::locked, path_ + ": another session holds the writer's lock; this handle can no longer "
                                              "commit");
        sent = copy_rows(pages, spilled_only, txn);
        zeroed.clear();
        if (rewrite) zeroed = zero_versions(txn);
        // The row, its digest (P6: the terms of this commit's versions, and
        // those of the versions they supersede, which the version map names:
        // a writer's is every page's newest at its snapshot, added up
        // against the digest at open, or it did not open) and the readers'
        // notice in one statement: one round trip. (The server read the
        // superseded versions' rows instead until stop 47: 5-10 ms of a
        // 2,560-page commit.)
        pg_digest added = 0, superseded = 0;
        auto write = [&](page_no page) {
            added += pg_digest_term(page, txn);
            const std::uint64_t old = versions_->newest(page);
            if (old != 0 && old != pg_version_map::unknown)
                superseded += pg_digest_term(page, old, versions_->sum(page) == 0);
        };
        for (const auto& p : pages) write(p.page);
        for (page_no page : spilled_only) write(page);
        for (const zeroed_page& z : zeroed) {  // P7's, over the (not zero) versions they supersede
            added += pg_digest_term(z.page, txn, true);
            superseded += pg_digest_term(z.page, z.old_txn);
        }
        std::string meta_hex;
        append_hex(meta_hex, meta.data(), meta.size());
        const std::string move_and_commit =
            "EXECUTE steppe_move_row(" + name + ", " + std::to_string(txn) + ", " + std::to_string(count) +
            ", decode('" + meta_hex + "', 'hex'), '" + address_.store + " " + std::to_string(txn) + "', " +
            digest_text(added) + ", " + digest_text(superseded) + "); COMMIT";
        // Whether COMMIT ran is unknown only if the session was lost after
        // the row moved, or before the server said anything. An error the
        // server sent for the EXECUTE (a session ended mid-statement
        // included) means COMMIT never ran: the caller may reconnect and
        // commit again.
        int completed = 0;
        PGresult* committed = control_->try_exec_script(move_and_commit, &completed);
        if (!committed) {
            outcome_unknown = completed == 1 || !control_->failed_on_server();
            control_->fail_last(what);
        }
        libpq().PQclear(committed);
    } catch (const error& e) {
        if (!outcome_unknown || !control_->lost()) {
            control_->rollback();
            throw;
        }
        // COMMIT's outcome is unknown: the caller must not take this io for
        // "the store is at its previous commit", as before COMMIT.
        poisoned_ = true;
        throw error(errc::io, std::string(e.what()) + "; the connection was lost after COMMIT was sent, so whether "
                                                      "commit " + std::to_string(txn) +
                                  " took is unknown: this handle is poisoned; reopen the store to see which state it "
                                  "is in");
    } catch (...) {
        control_->rollback();
        throw;
    }
    lock_lost_ = false;
    return sent;
}

void pg_store::commit(std::span<const page_image> pages, const meta_bytes& meta) {
    commit_pages(pages, meta, std::nullopt);
}

void pg_store::commit_rewrite(const page_fill& fill) {
    ensure_usable();
    if (pending_count() != 0)
        throw error(errc::invalid_argument, path_ + ": a rewrite runs with no transaction in progress");
    struct spilling final : page_sink {
        pg_store& store;
        page_no count = 0;
        explicit spilling(pg_store& s) : store(s) {}
        void write(std::span<const page_image> pages) override {
            store.spill(pages);
            for (const auto& p : pages) count = std::max(count, p.page + 1);
        }
    } sink(*this);
    try {
        const meta_bytes meta = fill(sink);
        commit_pages({}, meta, sink.count);
    } catch (...) {
        discard_pending();
        throw;
    }
}

void pg_store::commit_pages(std::span<const page_image> pages, const meta_bytes& meta, std::optional<page_no> rewrite) {
    ensure_usable();
    const std::uint64_t txn = txn_seq_ + 1;
    page_no count = rewrite ? *rewrite : page_count_;
    check_page_numbers(pages, path_);
    std::vector<page_no> given;
    for (const auto& p : pages) {
        given.push_back(p.page);
        count = std::max(count, p.page + 1);
    }
    std::sort(given.begin(), given.end());
    std::vector<page_no> spilled_only;  // spilled and not given again: read back from the spill file
    for (page_no page : pending_pages())
        if (!std::binary_search(given.begin(), given.end(), page)) {
            spilled_only.push_back(page);
            count = std::max(count, page + 1);
        }
    std::uint64_t bytes = 0;
    std::vector<zeroed_page> zeroed;
    // remember_images' buffers, made before COMMIT: nothing after it allocates.
    filing_images_.resize(filing_batch * page_size);
    filing_.reserve(filing_batch);
    for (int attempt = 0;; ++attempt) {
        try {
            if (!control_->ok() && !reconnect_control())
                throw error(errc::io, path_ + ": the connection to the server is lost and cannot be made again: " +
                                          control_->error() + " (the store is at its previous commit; retry)");
            bytes = commit_transaction(pages, spilled_only, txn, count, meta, rewrite.has_value(), zeroed);
            break;
        } catch (const error& e) {
            // A session the server ended shows only when a statement fails.
            // If COMMIT was not sent nothing was committed: once more, on a new session.
            if (e.code() != errc::io || attempt > 0 || poisoned_ || !control_->lost() || !reconnect_control()) throw;
        }
    }
    remember_committed(pages, spilled_only, zeroed, txn);  // and the new snapshot
    txn_seq_ = txn;
    page_count_ = count;
    pages_.store(count, std::memory_order_relaxed);
    meta_ = meta;
    // Spilled pages were committed from the spill file, zeroed ones have
    // no image: any cached image of theirs is older.
    if (!spilled_only.empty() || !zeroed.empty()) cache_->forget_all();
    discard_pending();
    const std::uint64_t committed = pages.size() + spilled_only.size();
    stats_.commits++;
    stats_.pages_written += committed;
    stats_.bytes_written += bytes;
    stats_.syncs++;
    collect_due_ += committed * page_size;
    if (collect_due_ >= opts_.checkpoint_bytes) try_checkpoint();
    vacuum_due_ += committed;
    if (vacuum_due_ >= bulk_load_pages && vacuum_due_ * 2 >= count) vacuum_after_bulk_load();
}

void pg_store::spill(std::span<const page_image> pages) {
    ensure_usable();
    check_page_numbers(pages, path_);
    if (spill_fd_ < 0) {
        const char* dir = std::getenv("TMPDIR");
        spill_fd_ = ::open(dir && *dir ? dir : "/tmp", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
        if (spill_fd_ < 0) common::throw_system_error("open(O_TMPFILE)", errno, dir && *dir ? dir : "/tmp",
                                                  "the spill file of " + path_);
    }
    for (const auto& p : pages) {
        std::uint64_t offset = spill_end_;
        {
            std::lock_guard<const common::spin_lock> hold(spilled_lock_);
            auto it = spilled_.find(p.page);
            if (it != spilled_.end()) offset = it->second;
        }
        if (::pwrite(spill_fd_, p.data, page_size, off_t(offset)) != ssize_t(page_size))
            common::throw_system_error("pwrite", errno, "the spill file of " + path_);
        if (offset == spill_end_) spill_end_ += page_size;
        std::lock_guard<const common::spin_lock> hold(spilled_lock_);
        spilled_[p.page] = offset;
    }
}

void pg_store::discard_pending() noexcept {
    {
        std::lock_guard<const common::spin_lock> hold(spilled_lock_);
        spilled_.clear();
    }
    spill_end_ = 0;
    if (spill_fd_ >= 0) (void)::ftruncate(spill_fd_, 0);
}

bool pg_store::is_pending(page_no page) const noexcept {
    std::lock_guard<const common::spin_lock> hold(spilled_lock_);
    return spilled_.count(page) != 0;
}

std::size_t pg_store::pending_count() const noexcept {
    std::lock_guard<const common::spin_lock> hold(spilled_lock_);
    return spilled_.size();
}

std::vector<page_no> pg_store::pending_pages() const {
    std::vector<page_no> out;
    {
        std::lock_guard<const common::spin_lock> hold(spilled_lock_);
        for (const auto& [page, offset] : spilled_) out.push_back(page);
    }
    std::sort(out.begin(), out.end());
    return out;
}

void pg_store::collect() {
    const char* what = "collecting old page versions";
    control_->exec(what, "BEGIN");
    try {
        pg_result row = control_->exec(what, "SELECT fence FROM steppe_store WHERE name = $1 FOR UPDATE",
                                       {address_.store});
        if (row.rows() == 0 || row.integer(0, 0) != fence_)
            throw error(errc::locked, path_ + ": another writer took the store over; this handle collects nothing");
        // P3: readers whose session (and so its lock) is gone leave.
        control_->exec(what,
                       "DELETE FROM steppe_reader r WHERE store = $1 AND NOT EXISTS (SELECT 1 FROM pg_locks l "
                       "WHERE l.locktype = 'advisory' AND l.classid = $2::oid AND l.objid = r.id::oid "
                       "AND l.objsubid = 2 AND l.granted)",
                       {address_.store, std::to_string(reader_class)});
        // No nested loop: with statistics from before a bulk load (the
        // table's autoanalyze not yet run, or a store that is new to them)
        // the planner takes the store for one row and joins every version
        // with the whole store's aggregate, re-run per row: a collection
        // after a 2,000,000-part OO1 load ran 18 minutes, where a merge or
        // hash join takes a fraction of a second whatever the estimates.
        control_->exec(what, "SET LOCAL enable_nestloop = off");
        control_->exec(what,
                       "DELETE FROM steppe_page p USING (SELECT page, max(txn) AS keep FROM steppe_page "
                       "WHERE store = $1 AND txn <= (SELECT coalesce(min(txn), $2) FROM steppe_reader "
                       "WHERE store = $1) GROUP BY page) k WHERE p.store = $1 AND p.page = k.page AND p.txn < k.keep",
                       {address_.store, std::to_string(txn_seq_)});
        control_->exec(what, "COMMIT");
    } catch (...) {
        control_->rollback();
        throw;
    }
    collect_due_ = 0;
    stats_.checkpoints++;
}

// Commits of half the store or more since the last VACUUM (an import, a
// first load, a load in chunks, a compaction's rewrite) leave rows no
// VACUUM has seen: until autovacuum comes (a minute or more after), every
// open's version map, an index-only scan, fetches each row's heap tuple to
// learn it is visible. On OO1 huge (93,717 pages) that query took 1,036 ms
// before VACUUM and 79 ms after. VACUUM reads the heap pages that are not
// all-visible yet and, where versions were deleted, the indexes. Best effort, and never a wait: SKIP_LOCKED passes
// over a table another VACUUM or ANALYZE holds (another store's writer,
// an autovacuum), TRUNCATE false takes no lock that would stop the
// readers; one that fails (statement_timeout, the server gone, a server
// before PostgreSQL 12 without the options; a role that does not own the
// table gets a warning only) leaves it to autovacuum, as before.
void pg_store::vacuum_after_bulk_load() noexcept {
    vacuum_due_ = 0;
    (void)control_->send_detached("VACUUM (SKIP_LOCKED, TRUNCATE false) steppe_page");
}

void pg_store::checkpoint() {
    if (opts_.read_only) throw error(errc::invalid_argument, "checkpoint: store " + path_ + " is open read-only");
    ensure_usable();
    collect();
}

// A close's (and a rewrite's) collection: none when this handle committed
// nothing since the last one. The DELETE reads every version of the store
// to find the old ones (0.25-0.7 s on OO1 huge), which made every close of
// a writer that only read cost that much. What an earlier handle left (it
// crashed before collecting) goes with the next collection after a commit,
// or an explicit checkpoint().
bool pg_store::try_checkpoint() {
    if (opts_.read_only || poisoned_) return false;
    if (collect_due_ == 0) return true;
    try {
        collect();
        return true;
    } catch (const error&) {
        stats_.checkpoints_deferred++;
        return false;
    }
}

// 6. Describe and check -----------------------------------------------------------

bool pg_store::wait_for_commit(std::chrono::milliseconds timeout) const {
    if (!opts_.read_only)
        throw error(errc::invalid_argument, path_ + " is open for writing: it always has its newest commit");
    const char* what = "waiting for a new commit";
    const std::string prefix = address_.store + " ";  // commit's payload: "NAME TXN"
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    const std::uint64_t snapshot = snapshot_.load(std::memory_order_acquire);
    while (newest_heard_ <= snapshot) {
        const auto left = std::max(std::chrono::milliseconds(0), std::chrono::duration_cast<std::chrono::milliseconds>(
                                                                      deadline - std::chrono::steady_clock::now()));
        auto payload = control_->wait_for_notification(what, "steppe", prefix, left);
        if (!payload) return false;
        newest_heard_ = std::max(newest_heard_, std::uint64_t(std::strtoull(payload->c_str() + prefix.size(), nullptr, 10)));
    }
    return true;
}

// C4: each handle's version map names the commit of every page's newest
// version at its snapshot, so the pages that differ are those whose
// commits differ. A map not loaded (a registration the server did not
// keep) cannot be compared.
std::optional<std::vector<page_no>> pg_store::changed_since(const storage& older_store) const {
    const auto* older = dynamic_cast<const pg_store*>(&older_store);
    if (!older || older->address_.conninfo != address_.conninfo || older->address_.store != address_.store ||
        older->store_id_ != store_id_ || !older->versions_->loaded() || !versions_->loaded())
        return std::nullopt;
    std::vector<page_no> changed;
    const page_no pages = std::max(older->page_count_, page_count_);
    for (page_no page = 0; page < pages; ++page)
        if (older->versions_->newest(page) != versions_->newest(page)) changed.push_back(page);
    return changed;
}

info pg_store::describe() const {
    info i{pg_format, std::uint32_t(page_size), store_id_, page_count_, 0, 0, 0, 0, 0, 0, txn_seq_, 0, txn_seq_, {}};
    pg_result rows = control_->exec("listing readers", "SELECT id, txn FROM steppe_reader WHERE store = $1 ORDER BY id",
                                    {address_.store});
    for (int r = 0; r < rows.rows(); ++r) {
        if (rows.integer(r, 0) == reader_id_) continue;
        i.readers.push_back({std::uint64_t(rows.integer(r, 0)), 0, 0, std::uint64_t(rows.integer(r, 1)), false});
    }
    pg_result size = control_->exec("measuring the store", "SELECT count(*), coalesce(sum(length(image)), 0) FROM "
                                                           "steppe_page WHERE store = $1",
                                    {address_.store});
    i.main_file_bytes = std::uint64_t(size.integer(0, 1));
    return i;
}

storage::memory pg_store::memory_bytes() const noexcept {
    return {pending_count() * 48 + (versions_ ? versions_->bytes() : 0) + (file_ ? file_->header_copy_bytes() : 0),
            cache_->count * cache::bytes_per_slot + sizeof(fetcher::request) * fetcher::request_slots +
                filing_images_.capacity()};
}

std::vector<std::string> pg_store::check() const {
    std::vector<std::string> findings = check_cache_file();
    // The store row, the versions (read in several statements) and the
    // readers as of one instant: a commit or a collection landing between
    // two statements is no finding (REPEATABLE READ: one snapshot).
    const char* what = "checking the store";
    control_->exec(what, "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY");
    try {
        auto more = check_rows();
        control_->exec(what, "COMMIT");
        findings.insert(findings.end(), more.begin(), more.end());
    } catch (...) {
        control_->rollback();
        throw;
    }
    return findings;
}

std::vector<std::string> pg_store::check_rows() const {
    std::vector<std::string> findings;
    const std::string at = path_ + ": ";
    pg_result row = control_->exec("checking the store",
                                   "SELECT txn, page_count, format, length(meta), digest FROM steppe_store WHERE name = $1",
                                   {address_.store});
    if (row.rows() == 0) return {at + "the store's row in steppe_store is gone"};
    const std::uint64_t newest = std::uint64_t(row.integer(0, 0));
    const page_no count = page_no(row.integer(0, 1));
    // What open checks, as the row is now (damage after this handle's open).
    const std::string damaged = at + "the store's row in steppe_store is damaged: ";
    if (row.integer(0, 0) < 0) findings.push_back(damaged + "commit " + row.text(0, 0));
    if (row.integer(0, 1) < 0 || count > max_pages) findings.push_back(damaged + "it has " + row.text(0, 1) + " pages");
    if (row.integer(0, 3) != std::int64_t(meta_size))
        findings.push_back(damaged + "meta of " + row.text(0, 3) + " bytes, not " + std::to_string(meta_size));
    if (row.integer(0, 2) != pg_format && row.integer(0, 2) != pg_format_without_digest)
        findings.push_back(at + "the store's row in steppe_store is of format " + row.text(0, 2) +
                           "; this build reads format " + std::to_string(pg_format));
    pg_digest recorded = 0;
    bool has_digest = row.integer(0, 2) == pg_format;
    if (has_digest && !parse_digest(row.text(0, 4), recorded)) {
        findings.push_back(damaged + "its digest is " + row.text(0, 4) + ", not a count");
        has_digest = false;
    }
    // P6: the digest added up again, and each page's version at this
    // handle's snapshot against its version map (which names the page).
    pg_digest found = 0;
    const std::uint64_t snapshot = snapshot_.load(std::memory_order_acquire);
    // Only while the versions the map names are kept for this handle: its
    // registration (a reader's) or its fence (a writer's) still there.
    const bool map_holds =
        versions_->loaded() &&
        control_
                ->exec("checking page versions",
                       reader_id_ ? "SELECT count(*) FROM steppe_reader WHERE store = $1 AND id = $2::integer"
                                  : "SELECT count(*) FROM steppe_store WHERE name = $1 AND fence = $2::bigint",
                       {address_.store, std::to_string(reader_id_ ? reader_id_ : fence_)})
                .integer(0, 0) != 0;
    std::vector<bool> with_rows(map_holds ? page_count_ : 0);
    page_no page_seen = ~page_no{0};
    std::uint64_t newest_of_page = 0, at_snapshot = 0;
    bool newest_is_zero = false;      // P7
    std::uint32_t newest_sum = 0;     // the digest weighs by the sum alone, as the server's statements do
    auto page_done = [&] {
        if (page_seen == ~page_no{0}) return;
        if (page_seen >= count && newest_of_page && !newest_is_zero)  // P7
            findings.push_back(at + "page " + std::to_string(page_seen) + " is past the store's " +
                               std::to_string(count) + " pages, but its newest version (of commit " +
                               std::to_string(newest_of_page) + ") is not a zero version (P7)");
        if (page_seen < with_rows.size()) with_rows[page_seen] = true;
        if (newest_of_page) found += pg_digest_term(page_seen, newest_of_page, newest_sum == 0);
        if (map_holds && !named_version(page_seen, at_snapshot, snapshot))
            findings.push_back(at + "page " + std::to_string(page_seen) + " at commit " + std::to_string(snapshot) +
                               " is the version of commit " + std::to_string(versions_->newest(page_seen)) +
                               " (P6: as this handle loaded it at open), but steppe_page holds " +
                               (at_snapshot ? "the version of commit " + std::to_string(at_snapshot)
                                            : std::string("no version")) +
                               " there: a version row was deleted or added outside steppe");
    };
    // Every version of every page, by ranges of pages so memory stays bounded.
    const auto last = control_->exec("checking page versions",
                                     "SELECT coalesce(max(page), -1) FROM steppe_page WHERE store = $1", {address_.store})
                          .integer(0, 0);
    constexpr std::int64_t step = 1024;
    for (std::int64_t first = 0; first <= last; first += step) {
        pg_result rows = control_->exec(
            "checking page versions",
            "SELECT page, txn, sum, image FROM steppe_page WHERE store = $1 AND page >= $2 AND page < $3 ORDER BY page, "
            "txn",
            {address_.store, std::to_string(first), std::to_string(first + step)}, true);
        for (int r = 0; r < rows.rows(); ++r) {
            const page_no page = page_no(rows.binary_integer(r, 0));
            const auto txn = std::uint64_t(rows.binary_integer(r, 1));
            const auto sum = std::uint32_t(rows.binary_integer(r, 2));
            if (page != page_seen) {
                page_done();
                page_seen = page;
                newest_of_page = at_snapshot = 0;
            }
            const bool zero = is_zero_version(rows.size(r, 3), sum);
            if (txn <= newest) {
                newest_of_page = txn;
                newest_is_zero = zero;
                newest_sum = sum;
            }
            if (txn <= snapshot) at_snapshot = txn;
            const std::string where = at + "page " + std::to_string(page) + " version of commit " + std::to_string(txn);
            if (!zero && rows.size(r, 3) != page_size)
                findings.push_back(where + " is " + std::to_string(rows.size(r, 3)) + " bytes, not " +
                                   std::to_string(page_size));
            else if (!zero && page_checksum(reinterpret_cast<const std::byte*>(rows.bytes(r, 3)), page_size) != sum)
                findings.push_back(where + " fails its checksum");
            if (txn > newest)
                findings.push_back(where + " is past the store's newest commit " + std::to_string(newest) +
                                   " (P1: a commit's rows and its store row go together)");
            else if (txn == 0)
                findings.push_back(where + " is of commit 0, which no commit is (the first is 1)");
        }
    }
    page_done();
    if (map_holds)  // pages with no version row at all, where the map names one
        for (page_no page = 0; page < with_rows.size(); ++page)
            if (!with_rows[page] && versions_->newest(page) != 0 && versions_->newest(page) <= snapshot)
                findings.push_back(at + "page " + std::to_string(page) + " at commit " + std::to_string(snapshot) +
                                   " is the version of commit " + std::to_string(versions_->newest(page)) +
                                   " (P6: as this handle loaded it at open), but steppe_page holds no version of it");
    if (has_digest && found != recorded) findings.push_back(digest_mismatch(path_, newest, recorded, found));
    pg_result readers = control_->exec("checking readers", "SELECT id, txn FROM steppe_reader WHERE store = $1 AND txn > $2",
                                       {address_.store, row.text(0, 0)});
    for (int r = 0; r < readers.rows(); ++r)
        findings.push_back(at + "reader " + readers.text(r, 0) + " reads commit " + readers.text(r, 1) +
                           ", past the newest " + std::to_string(newest));
    return findings;
}

}  // namespace steppe::storage
