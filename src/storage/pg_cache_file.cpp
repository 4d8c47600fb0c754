// The PostgreSQL page store's cache file (pg_cache_file.hpp).
#include "storage/pg_cache_file.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <map>
#include <new>
#include <optional>

#include "storage/checksum.hpp"
#include "storage/io.hpp"
#include "storage/pg_connection.hpp"

namespace steppe::storage {

pg_version_map::pg_version_map() : table_(static_cast<chunk**>(std::calloc(table_size, sizeof(chunk*)))) {
    if (!table_) throw std::bad_alloc();
}

pg_version_map::~pg_version_map() {
    for (std::size_t i = 0; i < table_size && chunks_.load(std::memory_order_relaxed); ++i)
        if (chunk* c = table_[i]) {
            delete c;
            chunks_.fetch_sub(1, std::memory_order_relaxed);
        }
    std::free(table_);
}

void pg_version_map::set(page_no page, std::uint64_t txn, std::uint32_t sum) {
    if (page >= max_pages) return;
    chunk*& slot = table_[page / chunk_pages];
    chunk* c = std::atomic_ref(slot).load(std::memory_order_relaxed);  // set() alone stores it
    if (!c) {
        c = new chunk;
        std::atomic_ref(slot).store(c, std::memory_order_release);
        chunks_.fetch_add(1, std::memory_order_relaxed);
    }
    c->txn[page % chunk_pages].store(txn, std::memory_order_relaxed);
    c->sum[page % chunk_pages].store(sum, std::memory_order_relaxed);
    c->filed[page % chunk_pages / 32].fetch_and(~filed_bit(page), std::memory_order_acq_rel);
}

namespace {

struct file_header {
    char magic[16];
    std::uint32_t format;
    std::uint32_t slot_size;
    std::uint64_t slot_count;
    std::uint32_t check;  // crc32c of the 32 bytes before it
};

std::uint32_t header_check(const file_header& h) noexcept {
    return crc32c(0, reinterpret_cast<const std::byte*>(&h), offsetof(file_header, check));
}

std::string failed(const char* call, const std::string& path) {
    return path + ": " + call + " failed: " + std::strerror(errno);
}

// Makes the directories above `path` that are missing (0700: page images
// are the user's data).
bool make_parents(const std::string& path, std::string& why) {
    for (auto slash = path.find('/', 1); slash != std::string::npos; slash = path.find('/', slash + 1)) {
        const std::string dir = path.substr(0, slash);
        if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
            why = failed("mkdir", dir);
            return false;
        }
    }
    return true;
}

// The header and the full (sparse) size of a new file.
bool write_header(int fd, std::uint64_t slots, const std::string& path, std::string& why) {
    file_header h{};
    std::memcpy(h.magic, pg_cache_magic, sizeof h.magic);
    h.format = pg_cache_format;
    h.slot_size = page_size;
    h.slot_count = slots;
    h.check = header_check(h);
    std::byte block[pg_cache_header_size] = {};
    std::memcpy(block, &h, sizeof h);
    if (::pwrite(fd, block, sizeof block, 0) != ssize_t(sizeof block)) {
        why = failed("pwrite", path);
        return false;
    }
    if (::ftruncate(fd, off_t(pg_cache_header_size + slots * pg_cache_bytes_per_slot)) != 0) {
        why = failed("ftruncate", path);
        return false;
    }
    return true;
}

// A new cache file at `path`, made whole beside it and then linked (or, to
// replace a damaged one, renamed) into place, so no process ever opens a
// file without its header. A file another process linked first is as good.
bool make_file(const std::string& path, std::uint64_t slots, bool replace, std::string& why) {
    const std::string temp = path + ".new." + std::to_string(::getpid());
    const int fd = ::open(temp.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) {
        why = failed("open", temp);
        return false;
    }
    bool ok = write_header(fd, slots, temp, why);
    ::close(fd);
    if (ok && replace && ::rename(temp.c_str(), path.c_str()) != 0) {
        why = failed("rename", path);
        ok = false;
    }
    if (ok && !replace && ::link(temp.c_str(), path.c_str()) != 0 && errno != EEXIST) {
        why = failed("link", path);
        ok = false;
    }
    ::unlink(temp.c_str());  // after a rename, nothing is there
    return ok;
}

enum class header_state { sound, replaceable, foreign };

header_state judge_header(int fd, std::uint64_t& slots) {
    file_header h{};
    const ssize_t n = ::pread(fd, &h, sizeof h, 0);
    if (n <= 0) return header_state::replaceable;  // empty: a file truncated to nothing, or made by a crash
    // Only a file that begins as ours is ever replaced: never overwrite another program's file.
    if (std::memcmp(h.magic, pg_cache_magic, std::min<std::size_t>(std::size_t(n), sizeof h.magic)) != 0)
        return header_state::foreign;
    if (n < ssize_t(sizeof h) || h.check != header_check(h) || h.format != pg_cache_format ||
        h.slot_size != page_size || h.slot_count == 0 || h.slot_count % pg_cache_group_slots != 0 ||
        h.slot_count > pg_cache_max_slots)
        return header_state::replaceable;
    slots = h.slot_count;
    return header_state::sound;
}

}  // namespace

std::string default_pg_cache_path() {
    const char* xdg = std::getenv("XDG_CACHE_HOME");
    if (xdg && *xdg == '/') return std::string(xdg) + "/steppe/pg-pages";
    const char* home = std::getenv("HOME");
    if (home && *home == '/') return std::string(home) + "/.cache/steppe/pg-pages";
    return {};
}

std::unique_ptr<pg_cache_file> pg_cache_file::open(const std::string& path, std::uint64_t slot_count,
                                                   std::string& why, bool& unusable) {
    unusable = true;
    // Whole groups, within the size asked for (but one group at least).
    slot_count = std::max<std::uint64_t>(slot_count / pg_cache_group_slots, 1) * pg_cache_group_slots;
    if (!make_parents(path, why)) return nullptr;
    for (int attempt = 0; attempt < 3; ++attempt) {
        const int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
        if (fd < 0) {
            if (errno != ENOENT) {
                why = failed("open", path);
                return nullptr;
            }
            if (!make_file(path, slot_count, false, why)) return nullptr;
            continue;
        }
        struct stat st {};
        if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
            why = path + " is not a regular file";
            unusable = false;
            ::close(fd);
            return nullptr;
        }
        std::uint64_t slots = 0;
        switch (judge_header(fd, slots)) {
        case header_state::sound: {
            // Slots are read one at a time, by page: the kernel's read-ahead
            // of the slots after each (zeros, in a file still mostly holes)
            // was a fifth of a cold fetch thread's time. Only advice: no error.
            ::posix_fadvise(fd, 0, 0, POSIX_FADV_RANDOM);
            std::unique_ptr<std::atomic<std::uint8_t>[]> states(
                new (std::nothrow) std::atomic<std::uint8_t>[slots / pg_cache_group_slots]());
            void* copies = ::mmap(nullptr, slots * pg_cache_slot_header_size, PROT_READ | PROT_WRITE,
                                  MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
            if (!states || copies == MAP_FAILED) {
                why = states ? failed("mmap (the copy of its slot headers)", path)
                             : path + ": no memory for the copy of its slot headers";
                if (copies != MAP_FAILED) ::munmap(copies, slots * pg_cache_slot_header_size);
                ::close(fd);
                return nullptr;
            }
            return std::unique_ptr<pg_cache_file>(new pg_cache_file(
                fd, path, slots, device_read_ahead_of(fd), static_cast<std::uint64_t*>(copies), std::move(states)));
        }
        case header_state::foreign:
            ::close(fd);
            why = path + " is not a steppe page cache file (it does not begin with \"steppe pgcache\"); it is left "
                         "as it is";
            return nullptr;
        case header_state::replaceable:
            ::close(fd);
            if (!make_file(path, slot_count, true, why)) return nullptr;
            break;
        }
    }
    why = path + ": the file kept changing while it was opened";
    return nullptr;
}

pg_cache_file::pg_cache_file(int fd, std::string path, std::uint64_t slots, std::uint64_t device_read_ahead,
                             std::uint64_t* copies, std::unique_ptr<std::atomic<std::uint8_t>[]> group_state)
    : fd_(fd),
      path_(std::move(path)),
      slots_(slots),
      around_(device_read_ahead),
      copies_(copies),
      group_state_(std::move(group_state)) {}

pg_cache_file::~pg_cache_file() {
    ::munmap(copies_, slots_ * pg_cache_slot_header_size);
    ::close(fd_);
}

std::uint64_t pg_cache_file::slot_of(const pg_cache_key& key, page_no page) const noexcept {
    const std::uint32_t h = crc32c(0, reinterpret_cast<const std::byte*>(&key), sizeof key);
    return (page + h) % slots_;
}

off_t pg_cache_file::header_at(std::uint64_t slot) noexcept {
    return off_t(pg_cache_header_size + slot * pg_cache_slot_header_size);
}

off_t pg_cache_file::image_at(std::uint64_t slot) const noexcept {
    return off_t(pg_cache_header_size + slots_ * pg_cache_slot_header_size + slot * page_size);
}

namespace {
// A slot's check from its image's crc32c(0, image): one pass over the
// image serves both the check and the sum (C1).
std::uint32_t slot_check(const pg_cache_slot_header& h, std::uint32_t image_crc) noexcept {
    const auto* bytes = reinterpret_cast<const std::byte*>(&h);
    return common::crc32c_extend_by_page(crc32c(0, bytes + 4, pg_cache_slot_header_size - 4), image_crc);
}

// The image's crc32c(0, image) from its page_checksum, which maps 0 to 1:
// read again only for a sum of 1.
std::uint32_t image_crc_of(std::uint32_t sum, const std::byte* image) noexcept {
    return sum != 1 ? sum : crc32c(0, image, page_size);
}

// Whether `image` is the one h's check and sum were made over (C1).
bool slot_matches(const pg_cache_slot_header& h, const std::byte* image) noexcept {
    const std::uint32_t crc = crc32c(0, image, page_size);
    return h.sum == (crc != 0 ? crc : 1) && h.check == slot_check(h, crc);
}

bool same_store(const pg_cache_slot_header& h, const pg_cache_key& key) noexcept {
    return std::memcmp(h.store_id, key.store_id, sizeof key.store_id) == 0 && h.server == key.server &&
           h.row == key.row;
}

bool names(const pg_cache_slot_header& h, const pg_cache_key& key, page_no page) noexcept {
    return h.page == page && same_store(h, key);
}

// Whether h's version is the page's newest at `snapshot` (C4).
bool newest_at(const pg_cache_slot_header& h, page_no page, std::uint64_t snapshot,
               const pg_version_map& versions) noexcept {
    const std::uint64_t newest = versions.newest(page);
    return newest != pg_version_map::unknown ? newest == h.version && versions.sum(page) == h.sum
                                             : h.version <= snapshot && snapshot <= h.newest_through;
}

constexpr std::size_t header_words = pg_cache_slot_header_size / sizeof(std::uint64_t);
static_assert(std::atomic_ref<std::uint64_t>::is_always_lock_free, "the copy is read in signal handlers");
enum : std::uint8_t { not_copied, copying, copied };
}  // namespace

// The copy is words read and written atomically (relaxed): a lookup that
// races a put may see a mix of two headers, which names no page or fails
// its check and is read again from the file.
bool pg_cache_file::copied_header(std::uint64_t slot, pg_cache_slot_header& h, std::byte* scratch) const noexcept {
    const std::uint64_t group = slot / pg_cache_group_slots;
    std::atomic<std::uint8_t>& state = group_state_[group];
    bool read_now = false;
    if (state.load(std::memory_order_acquire) != copied) {
        std::uint8_t expected = not_copied;
        if (!state.compare_exchange_strong(expected, copying, std::memory_order_acq_rel)) {
            reread_header(slot, h);  // another thread reads the group: this slot's own header
            return true;
        }
        ssize_t n = ::pread(fd_, scratch, page_size, header_at(group * pg_cache_group_slots));
        n = std::max<ssize_t>(n, 0);  // an error or a file cut short: no header there
        std::memset(scratch + n, 0, page_size - std::size_t(n));
        std::uint64_t* words = copies_ + group * pg_cache_group_slots * header_words;
        for (std::size_t i = 0; i < page_size / sizeof(std::uint64_t); ++i) {
            std::uint64_t w;
            std::memcpy(&w, scratch + i * sizeof w, sizeof w);
            std::atomic_ref(words[i]).store(w, std::memory_order_relaxed);
        }
        state.store(copied, std::memory_order_release);
        groups_copied_.fetch_add(1, std::memory_order_relaxed);
        read_now = true;
    }
    std::uint64_t words[header_words];
    for (std::size_t i = 0; i < header_words; ++i)
        words[i] = std::atomic_ref(copies_[slot * header_words + i]).load(std::memory_order_relaxed);
    std::memcpy(&h, words, sizeof h);
    return read_now;
}

void pg_cache_file::reread_header(std::uint64_t slot, pg_cache_slot_header& h) const noexcept {
    const ssize_t n = std::max<ssize_t>(::pread(fd_, &h, sizeof h, header_at(slot)), 0);
    std::memset(reinterpret_cast<std::byte*>(&h) + n, 0, sizeof h - std::size_t(n));
    remember_header(slot, h);
}

void pg_cache_file::remember_header(std::uint64_t slot, const pg_cache_slot_header& h) const noexcept {
    if (group_state_[slot / pg_cache_group_slots].load(std::memory_order_acquire) != copied) return;
    std::uint64_t words[header_words];
    std::memcpy(words, &h, sizeof h);
    for (std::size_t i = 0; i < header_words; ++i)
        std::atomic_ref(copies_[slot * header_words + i]).store(words[i], std::memory_order_relaxed);
}

pg_cache_file::lookup pg_cache_file::find(const pg_cache_key& key, page_no page, std::uint64_t snapshot,
                                          const pg_version_map& versions, std::byte* out,
                                          bool read_around) const noexcept {
    const std::uint64_t slot = slot_of(key, page);
    pg_cache_slot_header h;
    // One system call a hit (the image's pread), the header from the copy;
    // the file's header is read again where the copy does not serve (it
    // names another page, fails the image, or is not the newest), and
    // judged against the image read before it (a slot written in between,
    // image then header, fails the check: a miss).
    bool image_read = false;
    for (bool from_file = copied_header(slot, h, out);; from_file = true) {
        if (names(h, key, page)) {  // a filter; only the check below is trusted
            // pread is a plain system call (no allocation, no lock): as safe
            // in a fault handler as any. A short read is past a truncated end.
            if (!image_read && !read_image(out, image_at(slot), read_around)) return lookup::absent;
            image_read = true;
            // C1: torn, damaged or mixed, it is a miss. C4: the newest
            // version at this snapshot, by the handle's map (the server's
            // word, sum included: C2) where it knows the page, else by the
            // slot's claim (C3).
            if (slot_matches(h, out) && h.version != 0 && newest_at(h, page, snapshot, versions)) return lookup::hit;
        }
        if (from_file) return names(h, key, page) ? lookup::rejected : lookup::absent;
        reread_header(slot, h);
    }
}

pg_cache_slot_header pg_cache_file::header_for(const pg_cache_key& key, page_no page, std::uint64_t version,
                                               std::uint64_t newest_through, std::uint32_t sum,
                                               const std::byte* image) noexcept {
    pg_cache_slot_header h{};
    h.sum = sum;
    std::memcpy(h.store_id, key.store_id, sizeof h.store_id);
    h.server = key.server;
    h.row = key.row;
    h.page = page;
    h.version = version;
    h.newest_through = newest_through;
    h.check = slot_check(h, image_crc_of(sum, image));
    return h;
}

bool pg_cache_file::put(const pg_cache_key& key, page_no page, std::uint64_t version, std::uint64_t newest_through,
                        const std::byte* image) const noexcept {
    return put(key, page, version, newest_through, page_checksum(image, page_size), image);
}

bool pg_cache_file::put(const pg_cache_key& key, page_no page, std::uint64_t version, std::uint64_t newest_through,
                        std::uint32_t sum, const std::byte* image) const noexcept {
    const std::uint64_t slot = slot_of(key, page);
    const pg_cache_slot_header h = header_for(key, page, version, newest_through, sum, image);
    // The image, then its header: a read between the two, or after a crash
    // between them, finds the old header over the new image (C1). Another
    // process's write of the same slot may still interleave with these,
    // which C1 turns into a miss too.
    if (::pwrite(fd_, image, page_size, image_at(slot)) != ssize_t(page_size) ||
        ::pwrite(fd_, &h, sizeof h, header_at(slot)) != ssize_t(sizeof h))
        return false;
    remember_header(slot, h);
    return true;
}

pg_cache_file::put_counts pg_cache_file::put_fetched(const pg_cache_key& key, std::span<fetched_page> fetched,
                                                     std::uint64_t newest_through, bool committed) const {
    std::lock_guard<std::mutex> taking_turns(run_lock_);
    put_counts counts;
    // Made once: a megabyte allocated per call was an mmap, its page
    // faults and an munmap each time.
    std::vector<pg_cache_slot_header>& old = run_old_;
    std::vector<pg_cache_slot_header>& headers = run_headers_;
    std::vector<iovec>& images = run_images_;
    old.resize(max_run);
    headers.resize(max_run);
    held_image_.resize(page_size);
    images.clear();
    std::uint64_t write_slot = 0;  // the first slot of the images gathered
    std::size_t write_from = 0;    // their first page's index in the run
    std::size_t run_at = 0;        // the run's first page in `fetched`
    auto write_images = [&] {
        const std::size_t slots = images.size();
        if (slots == 0) return;
        const bool ok = ::pwritev(fd_, images.data(), int(slots), image_at(write_slot)) == ssize_t(slots * page_size) &&
                        ::pwrite(fd_, &headers[write_from], slots * sizeof(pg_cache_slot_header),
                                 header_at(write_slot)) == ssize_t(slots * sizeof(pg_cache_slot_header));
        (ok ? counts.written : counts.failed) += slots;
        for (std::size_t i = 0; i < slots; ++i) {
            fetched[run_at + write_from + i].held = ok;
            if (ok) remember_header(write_slot + i, headers[write_from + i]);
        }
        images.clear();
    };
    for (run_at = 0; run_at < fetched.size();) {
        const std::uint64_t first = slot_of(key, fetched[run_at].page);
        std::size_t n = 1;  // consecutive pages in consecutive slots (a run stops where the slots wrap)
        while (run_at + n < fetched.size() && n < max_run && fetched[run_at + n].page == fetched[run_at].page + n &&
               first + n < slots_)
            ++n;
        // Slots whose images are a hole hold nothing: their headers are not read.
        const ssize_t got = may_hold_data(image_at(first), n * page_size)
                                ? ::pread(fd_, old.data(), n * sizeof(pg_cache_slot_header), header_at(first))
                                : 0;
        if (got > 0) ++counts.runs_read;
        for (std::size_t i = 0; i < n; ++i) {
            fetched_page& f = fetched[run_at + i];
            const bool read = got >= ssize_t((i + 1) * sizeof(pg_cache_slot_header));
            const pg_cache_slot_header* held = read && names(old[i], key, f.page) ? &old[i] : nullptr;
            // A slot that holds, soundly, a newer version, or this one known
            // newest as far, is left: it serves more handles. (The same
            // version with another sum is a database restored to an earlier
            // point that committed the number again: replaced, C2.) Its
            // image is read only then, to see that it is sound.
            const bool same = held && held->version == f.version && held->sum == f.sum;
            const bool newer = held && held->version > f.version && !committed;
            if (held && (newer || (same && held->newest_through >= newest_through)) &&
                ::pread(fd_, held_image_.data(), page_size, image_at(first + i)) == ssize_t(page_size) &&
                slot_matches(*held, held_image_.data())) {
                remember_header(first + i, *held);  // a copy taken before it was written would not serve
                write_images();
                f.held = same;
                continue;
            }
            if (images.empty()) {
                write_slot = first + i;
                write_from = i;
            }
            headers[i] = header_for(key, f.page, f.version, newest_through, f.sum, f.image);
            images.push_back({const_cast<std::byte*>(f.image), page_size});
        }
        write_images();
        run_at += n;
    }
    return counts;
}

// Whether [at, at + size) may hold data: false where the file has a hole
// there (a new file is mostly holes, and reading one makes the kernel zero
// page-cache pages for it: an eighth of a fetch's time) or ends before. An
// lseek error other than "no data from there on" says nothing: it is read.
bool pg_cache_file::may_hold_data(off_t at, std::size_t size) const noexcept {
    const off_t data = ::lseek(fd_, at, SEEK_DATA);
    return !((data < 0 && errno == ENXIO) || data >= at + off_t(size));
}

// A slot's image into `image`: false if the file holds none there (a hole,
// or cut short).
bool pg_cache_file::read_image(std::byte* image, off_t at, bool read_around) const noexcept {
    const slot_read r = read_around ? read_cached(image, at) : slot_read::uncached;
    if (r != slot_read::uncached) return r == slot_read::cached;
    return ::pread(fd_, image, page_size, at) == ssize_t(page_size);
}

// find()'s read with read-around: `cached` if the image was in the page
// cache (read into `image`); `hole` if the file holds no data there (a file
// still mostly holes: neither read nor read around); else `uncached`, and
// the kernel is asked for the cluster around the image (read_around.hpp:
// sized by how much of the clusters before was used), as file_store's
// read_main_page does for the main file. A cold process that finds its
// pages in the file then waits for the disk once a cluster, not once a
// page (with POSIX_FADV_RANDOM, the kernel reads nothing around a page).
pg_cache_file::slot_read pg_cache_file::read_cached(std::byte* image, off_t at) const noexcept {
    iovec part{image, page_size};
    const ssize_t n = ::preadv2(fd_, &part, 1, at, RWF_NOWAIT);
    if (n == ssize_t(page_size)) {
        around_.hit(std::uint64_t(at));
        return slot_read::cached;
    }
    if (n < 0 && errno != EAGAIN) return slot_read::uncached;  // no RWF_NOWAIT here: a plain read
    if (!may_hold_data(at, page_size)) return slot_read::hole;
    const auto cluster = around_.miss(std::uint64_t(at));
    (void)::posix_fadvise(fd_, off_t(cluster.start), off_t(cluster.bytes), POSIX_FADV_WILLNEED);
    return slot_read::uncached;
}

// Asks the kernel for the images, or the headers, of `slots` slots from
// `first_slot` (not wrapping).
void pg_cache_file::advise(std::uint64_t first_slot, std::uint64_t slots, bool headers) const noexcept {
    const off_t from = headers ? header_at(first_slot) : image_at(first_slot);
    const off_t bytes = off_t(slots * (headers ? pg_cache_slot_header_size : page_size));
    (void)::posix_fadvise(fd_, from, bytes, POSIX_FADV_WILLNEED);
}

// A store's slots are consecutive, from its page 0's, wrapping at the end.
// Without this, a process whose store fits in memory read its slots 128 KiB
// at a time, and OO1 large's warm iterations still waited for the disk
// (8.5 MB over 30 of them) where the file store's read the same pages in
// its cold one.
// The headers go the same way while they are no larger than the device's
// read-ahead (their 64 bytes a slot are read a page of 64 at a time, the
// first time a process looks in it: 600 KB for OO1 large, read at open in
// one request, not a disk read a group).
void pg_cache_file::plan_reads(const pg_cache_key& key, std::uint64_t pages) const {
    const std::uint64_t slots = std::min(pages, slots_);
    if (slots == 0) return;  // a length of 0 would ask for the rest of the file
    const std::uint64_t first = slot_of(key, 0);
    const std::uint64_t before_end = std::min(slots, slots_ - first);
    auto advise_all = [&](bool headers) {
        advise(first, before_end, headers);
        if (slots > before_end) advise(0, slots - before_end, headers);
    };
    if (slots * pg_cache_slot_header_size <= around_.limit()) advise_all(true);
    if (around_.plan(slots * page_size, around_.limit())) advise_all(false);
}

// One request per run of pages whose slots are consecutive (a hint's pages
// often are: a page's targets sit together), not one system call a page.
void pg_cache_file::will_need(const pg_cache_key& key, std::span<const page_no> pages) const noexcept {
    for (std::size_t i = 0; i < pages.size();) {
        const std::uint64_t first = slot_of(key, pages[i]);
        std::size_t n = 1;
        while (i + n < pages.size() && first + n < slots_ && slot_of(key, pages[i + n]) == first + n) ++n;
        advise(first, n, false);
        i += n;
    }
}

std::vector<std::string> pg_cache_file::check_against(const pg_cache_key& key, pg_connection& conn,
                                                      const std::string& name, const std::string& shown) const {
    struct cached {
        std::uint64_t version, newest_through;
        std::uint32_t sum;
    };
    std::map<page_no, cached> ours;  // the sound slots of this store
    std::vector<std::byte> images(pg_cache_group_slots * page_size);
    pg_cache_slot_header headers[pg_cache_group_slots];
    for (std::uint64_t group = 0; group < slots_ / pg_cache_group_slots;) {
        // A file of 1 GiB is mostly holes: skip them (SEEK_DATA) instead of reading zeros.
        const std::uint64_t first = group * pg_cache_group_slots;
        const off_t data = ::lseek(fd_, header_at(first), SEEK_DATA);
        if (data < 0) break;  // ENXIO: nothing past the headers
        if (data >= header_at(first) + off_t(sizeof headers)) {
            group = data >= image_at(0) ? slots_ / pg_cache_group_slots
                                        : (std::uint64_t(data) - pg_cache_header_size) / sizeof headers;
            continue;
        }
        ++group;
        const ssize_t h = ::pread(fd_, headers, sizeof headers, header_at(first));
        const ssize_t n = h < 0 ? h : ::pread(fd_, images.data(), images.size(), image_at(first));
        if (n < 0) return {path_ + ": pread failed while checking the cache file: " + std::strerror(errno)};
        for (std::size_t i = 0; (i + 1) * sizeof headers[0] <= std::size_t(h) && (i + 1) * page_size <= std::size_t(n);
             ++i)
            if (same_store(headers[i], key) && slot_matches(headers[i], images.data() + i * page_size))
                ours[headers[i].page] = {headers[i].version, headers[i].newest_through, headers[i].sum};
    }
    std::vector<std::string> findings;
    if (ours.empty()) return findings;
    pg_result rows = conn.exec("checking the cache file", "SELECT page, txn, sum FROM steppe_page WHERE store = $1",
                               {name}, true);
    for (int r = 0; r < rows.rows(); ++r) {
        const auto it = ours.find(page_no(rows.binary_integer(r, 0)));
        if (it == ours.end()) continue;
        const auto txn = std::uint64_t(rows.binary_integer(r, 1));
        const auto sum = std::uint32_t(rows.binary_integer(r, 2));
        const cached& c = it->second;
        const std::string where = path_ + ": the cached page " + std::to_string(it->first) + " of " + shown +
                                  " (version of commit " + std::to_string(c.version) + ", newest through " +
                                  std::to_string(c.newest_through) + ")";
        if (txn > c.version && txn <= c.newest_through)
            findings.push_back(where + " is not the newest: commit " + std::to_string(txn) + " wrote the page (C3)");
        if (txn == c.version && sum != c.sum)
            findings.push_back(where + " is not the image the server holds for that version (C2)");
    }
    for (const auto& [page, c] : ours)
        if (c.version > c.newest_through)
            findings.push_back(path_ + ": the cached page " + std::to_string(page) + " claims a range that ends before "
                                                                                     "its version (C3)");
    return findings;
}

}  // namespace steppe::storage
