// Bad input through the PUBLIC API: every way a store can be unopenable or a
// commit can fail gets a test that checks the steppe::errc code and that the
// message names the file and the cause. storage_test.cpp checks the same
// conditions one layer down (storage::storage); these check what a program
// sees from steppe::store::open and commit.
//
// Read-only file systems and full disks need a mount: each such test runs in
// a child process with its own mount namespace (unshare(CLONE_NEWNS) as root,
// else an unprivileged user namespace) and a small tmpfs, so nothing leaks
// into the host; it is skipped with a message if no mount is possible. As root
// file modes do not apply, so the permission tests drop to uid 65534 in a
// child (skipped if setuid fails); run as a normal user they chmod instead.
// Type mismatch between two programs is a CMake test: tests/model/CMakeLists.txt
// (model.type_mismatch_between_programs).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sched.h>
#include <signal.h>
#include <steppe/objects.hpp>
#include <steppe/steppe.hpp>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstddef>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "objects/object_format.hpp"
#include "storage/blob.hpp"
#include "storage/checksum.hpp"
#include "storage/file_format.hpp"
#include "storage/storage.hpp"
#include "support/cli.hpp"
#include "support/expect_error.hpp"
#include "support/temp_dir.hpp"

namespace bad_input {
struct Part {
    long id;
    Part* next;
};
}  // namespace bad_input

using bad_input::Part;
namespace fs = std::filesystem;

namespace {

using steppe::test::error_of;

constexpr int kSkip = 77;

steppe::open_options opts(bool read_only = false) {
    steppe::open_options o;
    o.read_only = read_only;
    o.create = !read_only;
    o.durable = true;
    return o;
}

steppe::error open_error(const std::string& path, const steppe::open_options& o = opts()) {
    return error_of([&] { steppe::store::open(path, o); });
}


// A store holding `n` parts on a list under root "parts", committed (and
// checkpointed into the main file by the close).
void make_store(const std::string& path, long n = 3, const steppe::open_options& o = opts()) {
    auto s = steppe::store::open(path, o);
    Part** head = s.root<Part*>("parts");
    for (long i = 0; i < n; ++i) *head = s.make<Part>(Part{i, *head});
    s.commit();
}
// The same with the commit left in the log, as a program that crashed leaves it.
void make_store_in_log(const std::string& path, long n = 3) {
    steppe::open_options o = opts();
    o.checkpoint_on_close = false;
    make_store(path, n, o);
}
long count_parts(steppe::store& s) {
    long n = 0;
    for (Part* p = *s.find_root<Part*>("parts"); p; p = p->next) ++n;
    return n;
}

void patch_header(const std::string& path, const std::function<void(steppe::storage::file_header&)>& change) {
    for (int slot = 0; slot < 2; ++slot) {
        std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
        steppe::storage::file_header h;
        f.seekg(slot * static_cast<long>(steppe::storage::page_size));
        f.read(reinterpret_cast<char*>(&h), sizeof h);
        if (std::memcmp(h.magic, steppe::storage::header_magic, sizeof h.magic) != 0) continue;  // slot never written
        change(h);
        h.crc = steppe::storage::crc32c(0, &h, offsetof(steppe::storage::file_header, crc));
        f.seekp(slot * static_cast<long>(steppe::storage::page_size));
        f.write(reinterpret_cast<const char*>(&h), sizeof h);
    }
}

// Runs `body` in a child process; 0 = passed, kSkip = skipped (reason on
// stderr), anything else = failed.
int in_child(const std::function<void()>& body) {
    std::fflush(stdout);
    std::fflush(stderr);
    pid_t pid = ::fork();
    if (pid < 0) return -1;
    if (pid == 0) {
        int rc = 0;
        try {
            body();
            rc = ::testing::Test::HasFailure() ? 1 : 0;
        } catch (const std::exception& e) {
            std::fprintf(stderr, "child: unexpected exception: %s\n", e.what());
            rc = 2;
        }
        std::fflush(stdout);
        std::fflush(stderr);
        ::_exit(rc);
    }
    int status = 0;
    ::waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}
#define RUN_IN_CHILD(body)                                                                        \
    do {                                                                                          \
        int rc_ = in_child(body);                                                                 \
        if (rc_ == kSkip) GTEST_SKIP() << "skipped in the child (see its message on stderr above)"; \
        ASSERT_EQ(rc_, 0) << "the child process found a failure (see above)";                    \
    } while (0)
[[noreturn]] void child_skip(const std::string& why) {
    std::fprintf(stderr, "skipped: %s\n", why.c_str());
    std::fflush(stderr);
    ::_exit(kSkip);
}

// In a child: a private mount namespace with a tmpfs on `dir`.
void private_tmpfs(const std::string& dir, const std::string& options) {
    if (::unshare(CLONE_NEWNS) != 0 && ::unshare(CLONE_NEWUSER | CLONE_NEWNS) != 0)
        child_skip(std::string("cannot make a mount namespace: ") + std::strerror(errno));
    ::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr);
    if (::mount("tmpfs", dir.c_str(), "tmpfs", 0, options.c_str()) != 0)
        child_skip("cannot mount a tmpfs on " + dir + ": " + std::strerror(errno));
}

// In a child: become uid/gid 65534 (root ignores file modes).
void drop_privileges() {
    if (::geteuid() != 0) return;  // already a normal user: modes apply
    if (::setgid(65534) != 0 || ::setuid(65534) != 0)
        child_skip(std::string("cannot drop privileges with setuid(65534): ") + std::strerror(errno));
    // setuid made the process non-dumpable, which leaves /proc/self/pagemap
    // root's: the engine needs it (known bug 6 in docs/guarantees.md).
    ::prctl(PR_SET_DUMPABLE, 1);
}

class BadInput : public ::testing::Test {
protected:
    steppe::test::temp_dir dir;
    std::string path = dir.path("s.db");
};

// ---- Not a store, or not one this build reads --------------------------------

TEST_F(BadInput, NotASteppeFileIsAVersionErrorNamingTheFile) {
    { std::ofstream f(path); f << "name,part\nbolt,17\n"; }
    auto e = open_error(path);
    EXPECT_EQ(e.code(), steppe::errc::version);
    EXPECT_CONTAINS(e.what(), path);
    EXPECT_CONTAINS(e.what(), "not a steppe store");
    EXPECT_EQ(fs::file_size(path), 18u) << "a foreign file must be left alone";
}

TEST_F(BadInput, EmptyFileIsNotASteppeStore) {
    { std::ofstream f(path); }
    auto e = open_error(path);
    EXPECT_EQ(e.code(), steppe::errc::version);
    EXPECT_CONTAINS(e.what(), "not a steppe store");
}

TEST_F(BadInput, NewerFormatVersionIsAVersionError) {
    make_store(path);
    patch_header(path, [](auto& h) { h.version = steppe::storage::format_version + 1; });
    auto e = open_error(path);
    EXPECT_EQ(e.code(), steppe::errc::version);
    EXPECT_CONTAINS(e.what(), "format version " + std::to_string(steppe::storage::format_version + 1));
    EXPECT_CONTAINS(e.what(), "reads version " + std::to_string(steppe::storage::format_version));
    EXPECT_EQ(open_error(path, opts(true)).code(), steppe::errc::version) << "read-only opens refuse it too";
}

namespace so = steppe::objects;
struct Counter {
    std::int64_t value;
};

// An engine's meta of all zeros is a new store's. In a header that also
// counts commits and pages (its checksum made to match), every command
// read an empty store: check said 0 findings, and compact threw the pages
// away.
TEST_F(BadInput, ZeroEngineDataInAHeaderThatCountsCommitsIsCorruptForEveryCommand) {
    const std::string objects_path = dir.path("o.db");
    {
        auto s = so::store::open(objects_path);
        s.root<Counter>("c").mut()->value = 7;
        s.commit();
    }
    for (const std::string& store : {path, objects_path}) {
        if (store == path) make_store(path);
        patch_header(store, [](auto& h) { std::memset(h.meta, 0, sizeof h.meta); });
        const auto bytes_before = fs::file_size(store);
        const auto expect_corrupt = [&](const steppe::error& e) {
            EXPECT_EQ(e.code(), steppe::errc::corrupt) << e.what();
            EXPECT_CONTAINS(e.what(), "all zeros");
            EXPECT_CONTAINS(e.what(), "the header is damaged");
        };
        if (store == path) {
            expect_corrupt(open_error(store));
            expect_corrupt(open_error(store, opts(true)));
        } else {
            try {
                so::store::open(store);
                ADD_FAILURE() << "an object store with zero engine data opened";
            } catch (const steppe::error& e) {
                expect_corrupt(e);
            }
        }
        for (const char* command : {"check", "compact"}) {
            auto r = steppe::test::run_cli(std::string(command) + " " + store);
            EXPECT_NE(r.exit_code, 0) << command << ": " << r.out;
            EXPECT_CONTAINS(r.out, "all zeros");
        }
        EXPECT_EQ(fs::file_size(store), bytes_before) << "nothing was rewritten";
    }
}

struct Link {
    std::int64_t value;
    so::ref<Link> next;
};
struct Chain {
    so::ref<Link> first;
    so::ref<so::array<std::int64_t>> numbers;
};

// Damage that opens and that check names (here: the object engine's first
// page never allocated, lowered below the segments of a list and an array,
// with the header's checksum made to match). Compaction carried what it
// could read and dropped the rest: the list and the array were gone, and
// the store then checked clean. A backup said "checked" of a copy that did
// not check out.
TEST_F(BadInput, DamageTheCheckNamesRefusesCompactionAndFailsTheBackup) {
    {
        so::options small_segments;  // the root alone in page 1's segment: what it reaches in later ones
        small_segments.segment_objects = 1;
        auto s = so::store::open(path, small_segments);
        auto chain = s.root<Chain>("chain");
        for (int i = 0; i < 300; ++i) chain.mut()->first = s.make<Link>(i, chain->first);
        chain.mut()->numbers = s.make_array<std::int64_t>(2000);
        s.commit();
    }
    patch_header(path, [](auto& h) {
        steppe::objects::format::object_meta m;
        std::memcpy(&m, h.meta, sizeof m);
        if (m.next_page <= 3) return;  // the older slot, of the store before the commit
        m.next_page = 2;
        m.objects = m.segments = 1;  // counts that agree (O4), so references to nothing are the damage
        std::memcpy(h.meta, &m, sizeof m);
    });
    const auto checked = steppe::test::run_cli("check " + path);
    ASSERT_NE(checked.exit_code, 0) << "the damage is one check names: " << checked.out;
    const auto bytes_before = fs::file_size(path);
    const auto compacted = steppe::test::run_cli("compact " + path);
    EXPECT_NE(compacted.exit_code, 0) << compacted.out;
    EXPECT_CONTAINS(compacted.out, "compaction of " + path + " refused: a reference names object");
    EXPECT_CONTAINS(compacted.out, "Nothing was changed");
    EXPECT_EQ(fs::file_size(path), bytes_before);
    for (const auto& f : fs::directory_iterator(dir.dir()))
        EXPECT_EQ(f.path().string().find(".compact"), std::string::npos) << "left behind: " << f.path();
    EXPECT_NE(steppe::test::run_cli("check " + path).exit_code, 0) << "the damage is still there to see";
    const auto copied = steppe::test::run_cli("backup " + path + " " + dir.path("copy.db"));
    EXPECT_EQ(copied.exit_code, 1) << copied.out;
    EXPECT_CONTAINS(copied.out, "does not check out");
    EXPECT_CONTAINS(copied.out, "holds the same damage");
}

// A reference to an object of a type its field does not refer to (check's
// O2 and O3), committed with valid checksums through the storage layer:
// compaction carried it into the new store (exit 0, and check still named
// it), where a reference to no object was already refused.
enum class wrong_type_damage { field_names_an_array, target_entry_retyped, root_entry_retyped };

class WrongTypeCompaction : public BadInput,
                            public ::testing::WithParamInterface<std::tuple<wrong_type_damage, bool>> {};

// Changes the one segment (page 1) of a store holding root "chain" (a Chain),
// Links 2222 -> 1111 and an array of 5: `damage` retypes a table entry or
// aims Link 2222's `next` at the array.
void damage_types(const std::string& path, wrong_type_damage damage) {
    namespace format = steppe::objects::format;
    auto raw = steppe::storage::storage::open(path);
    std::vector<std::byte> page(steppe::storage::page_size);
    raw->read_page(1, page.data());
    format::segment_header head;
    std::memcpy(&head, page.data(), sizeof head);
    ASSERT_EQ(head.magic, format::segment_magic);
    ASSERT_EQ(head.objects, 4u) << "the four objects share one segment";
    std::optional<std::uint32_t> link_2222, link_1111, numbers, chain;
    for (std::uint32_t slot = 0; slot < head.objects; ++slot) {
        format::object_entry e;
        std::memcpy(&e, page.data() + sizeof head + slot * sizeof e, sizeof e);
        std::int64_t first_word;
        std::memcpy(&first_word, page.data() + e.offset, sizeof first_word);
        (e.count == 5 ? numbers : first_word == 2222 ? link_2222 : first_word == 1111 ? link_1111 : chain) = slot;
    }
    ASSERT_TRUE(link_2222 && link_1111 && numbers && chain);
    const auto entry_of = [&](std::uint32_t slot) {
        return page.data() + sizeof head + slot * sizeof(format::object_entry);
    };
    const auto type_at = [&](std::uint32_t slot) { return entry_of(slot) + offsetof(format::object_entry, type); };
    switch (damage) {
    case wrong_type_damage::field_names_an_array: {
        format::object_entry e;
        std::memcpy(&e, entry_of(*link_2222), sizeof e);
        const std::uint64_t array_oid = format::make_oid(1, *numbers);
        std::memcpy(page.data() + e.offset + offsetof(Link, next), &array_oid, sizeof array_oid);
        break;
    }
    case wrong_type_damage::target_entry_retyped:  // an int64 fits in a Link's place
        std::memcpy(type_at(*link_1111), type_at(*numbers), sizeof(std::uint32_t));
        break;
    case wrong_type_damage::root_entry_retyped:  // a Chain and a Link are the same size
        std::memcpy(type_at(*chain), type_at(*link_1111), sizeof(std::uint32_t));
        break;
    }
    const steppe::storage::page_image image{1, page.data()};
    raw->commit({&image, 1}, raw->meta());
}

TEST_P(WrongTypeCompaction, IsRefusedAndChangesNothing) {
    const auto [damage, collect] = GetParam();
    {
        auto s = so::store::open(path);
        auto chain = s.root<Chain>("chain");
        chain.mut()->first = s.make<Link>(2222, s.make<Link>(1111, so::ref<Link>{}));
        chain.mut()->numbers = s.make_array<std::int64_t>(5);
        s.commit();
    }
    ASSERT_EQ(steppe::test::run_cli("check " + path).exit_code, 0);
    damage_types(path, damage);
    const auto checked = steppe::test::run_cli("check " + path);
    ASSERT_EQ(checked.exit_code, 1) << checked.out;
    EXPECT_CONTAINS(checked.out, damage == wrong_type_damage::root_entry_retyped ? ": O3: " : ": O2: ");
    const auto r = steppe::test::run_cli(std::string("compact ") + (collect ? "--collect " : "") + path);
    EXPECT_NE(r.exit_code, 0) << r.out;
    EXPECT_CONTAINS(r.out, "compaction of " + path + " refused: a reference names object");
    EXPECT_CONTAINS(r.out, damage == wrong_type_damage::root_entry_retyped ? "but root 'chain' is a"
                                                                         : "but the field refers to");
    EXPECT_CONTAINS(r.out, "Nothing was changed");
    for (const auto& f : fs::directory_iterator(dir.dir()))
        EXPECT_EQ(f.path().string().find(".compact"), std::string::npos) << "left behind: " << f.path();
    EXPECT_EQ(steppe::test::run_cli("check " + path).out, checked.out) << "the same store, the same damage";
}

INSTANTIATE_TEST_SUITE_P(Damages, WrongTypeCompaction,
                         ::testing::Combine(::testing::Values(wrong_type_damage::field_names_an_array,
                                                              wrong_type_damage::target_entry_retyped,
                                                              wrong_type_damage::root_entry_retyped),
                                            ::testing::Bool()));

struct Data {
    long counter;
    long n;
    long* arr;
};

// Page-engine pointers that S1 refuses (stored_pointer.hpp), each committed
// with its page's checksum made to match, through the storage layer:
// compaction made them null as it makes a dangling pointer, and the store
// then checked clean (past the store, then, a tester's finding, into page 0).
struct RefusedWord {
    std::uint64_t word;
    const char* says;
};

class BadPointerCompaction : public BadInput, public ::testing::WithParamInterface<std::tuple<RefusedWord, bool>> {};

TEST_P(BadPointerCompaction, IsRefusedAndChangesNothing) {
    const auto [bad, collect] = GetParam();
    {
        auto s = steppe::store::open(path, opts());
        Data** root = s.root<Data*>("d");
        *root = s.make<Data>(Data{3, 711, nullptr});
        (*root)->arr = s.make_array<long>(711);
        s.commit();
    }
    {  // find the Data by its two numbers, and set its pointer to the bad word
        auto raw = steppe::storage::storage::open(path);
        std::vector<std::byte> page(steppe::storage::page_size);
        const long numbers[2] = {3, 711};
        bool aimed = false;
        for (steppe::storage::page_no p = 0; p < raw->page_count() && !aimed; ++p) {
            raw->read_page(p, page.data());
            for (std::size_t at = 0; at + sizeof(Data) <= page.size() && !aimed; at += alignof(Data)) {
                if (std::memcmp(page.data() + at, numbers, sizeof numbers) != 0) continue;
                std::memcpy(page.data() + at + offsetof(Data, arr), &bad.word, sizeof bad.word);
                const steppe::storage::page_image image{p, page.data()};
                raw->commit({&image, 1}, raw->meta());
                aimed = true;
            }
        }
        ASSERT_TRUE(aimed) << "the Data object was not found";
    }
    ASSERT_NE(steppe::test::run_cli("check " + path).exit_code, 0);
    const auto bytes_before = fs::file_size(path);
    const auto r = steppe::test::run_cli(std::string("compact ") + (collect ? "--collect " : "") + path);
    EXPECT_NE(r.exit_code, 0) << r.out;
    // check's pointer check before the pass names the page and field (C4
    // inside the pass says "a stored pointer holds ..." without them).
    EXPECT_CONTAINS(r.out, "compaction of " + path + " refused: page ");
    EXPECT_CONTAINS(r.out, std::string("in field 3 'arr' (long*)) holds ") + bad.says);
    EXPECT_CONTAINS(r.out, "Nothing was changed");
    EXPECT_EQ(fs::file_size(path), bytes_before);
    EXPECT_NE(steppe::test::run_cli("check " + path).exit_code, 0) << "the damage is still there to see";
}

constexpr std::uint64_t end_tag = std::uint64_t{1} << 63;
INSTANTIATE_TEST_SUITE_P(
    Words, BadPointerCompaction,
    ::testing::Combine(::testing::Values(RefusedWord{100 * 4096, "0x64000, which aims beyond the store's"},
                                         RefusedWord{8, "0x8, which aims at page 0, which the storage layer reserves"},
                                         RefusedWord{end_tag | (100 * 4096), "0x8000000000064000, which aims beyond the store's"},
                                         RefusedWord{end_tag | (5 * 4096 + 8),
                                                     "0x8000000000005008, which aims one past the end of a unit "
                                                     "but not at a page boundary"}),
                       ::testing::Bool()));

// Words the object engine's format keeps zero, changed and committed with
// valid checksums (through the storage layer): nothing reads them, so only
// the check can tell, and it said 0 findings.
TEST_F(BadInput, NonZeroReservedWordsOfAnObjectSegmentAreCheckFindings) {
    {
        auto s = so::store::open(path);
        s.root<Counter>("c").mut()->value = 7;
        s.commit();
    }
    // Compaction, which would write a store that checks clean, refuses (it did not).
    const auto expect_compaction_refused = [&](const std::string& finding) {
        const auto bytes_before = fs::file_size(path);
        const auto r = steppe::test::run_cli("compact " + path);
        EXPECT_NE(r.exit_code, 0) << r.out;
        EXPECT_CONTAINS(r.out, "compaction of " + path + " refused: " + path + ": " + finding);
        EXPECT_CONTAINS(r.out, "Nothing was changed");
        EXPECT_EQ(fs::file_size(path), bytes_before);
    };
    const auto change_segment = [&](std::size_t offset, std::uint32_t value) {
        auto raw = steppe::storage::storage::open(path);
        std::vector<std::byte> page(steppe::storage::page_size);
        raw->read_page(1, page.data());  // the first segment
        std::uint32_t magic;
        std::memcpy(&magic, page.data(), sizeof magic);
        ASSERT_EQ(magic, steppe::objects::format::segment_magic);
        std::memcpy(page.data() + offset, &value, sizeof value);
        const steppe::storage::page_image image{1, page.data()};
        raw->commit({&image, 1}, raw->meta());
    };
    namespace format = steppe::objects::format;
    constexpr std::size_t header_reserved2 = offsetof(format::segment_header, reserved2);
    constexpr std::size_t first_entry = sizeof(format::segment_header);
    constexpr std::size_t first_entry_reserved = first_entry + offsetof(format::object_entry, reserved);
    format::object_entry counter;
    {
        auto raw = steppe::storage::storage::open(path);
        std::vector<std::byte> page(steppe::storage::page_size);
        raw->read_page(1, page.data());
        std::memcpy(&counter, page.data() + first_entry, sizeof counter);
    }
    const std::size_t before_counter = counter.offset - 16;  // its header's place in memory, zero on disk
    for (std::size_t offset : {header_reserved2, first_entry_reserved, before_counter, before_counter + 12}) {
        change_segment(offset, 5);
        const auto r = steppe::test::run_cli("check " + path);
        EXPECT_EQ(r.exit_code, 1) << r.out;
        EXPECT_CONTAINS(r.out, "O5: segment at page 1");
        expect_compaction_refused("O5: segment at page 1");
        change_segment(offset, 0);
        EXPECT_EQ(steppe::test::run_cli("check " + path).exit_code, 0);
    }
    const auto change_meta_reserved = [&](std::uint16_t value) {
        auto raw = steppe::storage::storage::open(path);
        steppe::storage::meta_bytes meta = raw->meta();
        std::memcpy(meta.data() + offsetof(format::object_meta, reserved), &value, sizeof value);
        raw->commit({}, meta);
    };
    change_meta_reserved(5);
    const auto r = steppe::test::run_cli("check " + path);
    EXPECT_EQ(r.exit_code, 1) << r.out;
    EXPECT_CONTAINS(r.out, "O5: the object engine's meta has a reserved word that is not zero");
    expect_compaction_refused("O5: the object engine's meta");
    change_meta_reserved(0);
    EXPECT_EQ(steppe::test::run_cli("check " + path).exit_code, 0);
    {  // and O4: the meta's count of objects
        auto raw = steppe::storage::storage::open(path);
        steppe::storage::meta_bytes meta = raw->meta();
        std::uint64_t objects;
        std::memcpy(&objects, meta.data() + offsetof(format::object_meta, objects), sizeof objects);
        ++objects;
        std::memcpy(meta.data() + offsetof(format::object_meta, objects), &objects, sizeof objects);
        raw->commit({}, meta);
    }
    EXPECT_CONTAINS(steppe::test::run_cli("check " + path).out, "O4: the meta counts 2 objects");
    expect_compaction_refused("O4: the meta counts 2 objects in 1 segments, the pages hold 1 in 1");
}

// A roots table with a root renamed to another's name (or out of name
// order), its blob's checksums made to match: the table was read into a
// map, which kept one of the two, so a root was gone and check said 0
// findings.
TEST_F(BadInput, ARootsTableWithANameTwiceOrOutOfOrderIsCorrupt) {
    const auto rename_root = [&](const std::string& store, const std::string& from, const std::string& to) {
        namespace format = steppe::objects::format;
        auto raw = steppe::storage::storage::open(store);
        steppe::storage::meta_bytes meta = raw->meta();
        format::object_meta m;
        std::memcpy(&m, meta.data(), sizeof m);
        std::vector<steppe::storage::page_no> chain;
        std::vector<std::byte> roots = steppe::storage::read_blob(*raw, m.roots, format::roots_owner, "roots", chain);
        auto name = std::search(roots.begin(), roots.end(), reinterpret_cast<const std::byte*>(from.data()),
                                reinterpret_cast<const std::byte*>(from.data() + from.size()));
        ASSERT_NE(name, roots.end());
        std::memcpy(&*name, to.data(), to.size());
        std::deque<std::array<std::byte, steppe::storage::page_size>> buffers;
        std::vector<steppe::storage::page_image> images;
        const steppe::storage::page_source same_chain{
            [](std::uint32_t, std::uint64_t) -> steppe::storage::page_no { throw std::logic_error("grew"); },
            [](steppe::storage::page_no) {}};
        m.roots = steppe::storage::write_blob(roots, format::roots_owner, chain, same_chain, buffers, images);
        std::memcpy(meta.data(), &m, sizeof m);
        raw->commit(images, meta);
    };
    const struct {
        const char *from, *to, *says;
    } damages[] = {{"bb", "aa", "holds root 'aa' twice"}, {"aa", "cc", "holds root 'bb' after 'cc', out of name order"}};
    for (const auto& d : damages) {
        const std::string store = dir.path(std::string(d.from) + "-to-" + d.to + ".db");
        {
            auto s = so::store::open(store);
            s.root<Counter>("aa").mut()->value = 1;
            s.root<Counter>("bb").mut()->value = 2;
            s.commit();
        }
        rename_root(store, d.from, d.to);
        try {
            so::store::open(store);
            ADD_FAILURE() << "a store whose roots table " << d.says << " opened";
        } catch (const steppe::error& e) {
            EXPECT_EQ(e.code(), steppe::errc::corrupt) << e.what();
            EXPECT_CONTAINS(e.what(), store + ": the roots table " + d.says);
        }
        const auto r = steppe::test::run_cli("check " + store);
        EXPECT_EQ(r.exit_code, 1) << r.out;
        EXPECT_CONTAINS(r.out, d.says);
    }
}

// An object store whose engine data lost its magic, the header's checksum
// made to match: the CLI, which knows a store's engine only by the magic,
// said it "holds no page-engine data", as if it were the page engine's.
TEST_F(BadInput, AnObjectStoreWithoutItsEngineMagicIsAVersionErrorSayingWhatItHolds) {
    {
        auto s = so::store::open(path);
        s.root<Counter>("c").mut()->value = 7;
        s.commit();
    }
    {
        auto raw = steppe::storage::storage::open(path);
        steppe::storage::meta_bytes meta = raw->meta();
        std::memset(meta.data() + offsetof(steppe::objects::format::object_meta, magic), 0,
                    sizeof steppe::objects::format::object_meta::magic);
        raw->commit({}, meta);
    }
    try {
        so::store::open(path);
        ADD_FAILURE() << "an object store without its engine magic opened";
    } catch (const steppe::error& e) {
        EXPECT_EQ(e.code(), steppe::errc::version) << e.what();
        EXPECT_CONTAINS(e.what(), "holds no object-engine data");
    }
    const auto r = steppe::test::run_cli("check " + path);
    EXPECT_EQ(r.exit_code, 1) << r.out;
    EXPECT_CONTAINS(r.out, "holds no page-engine data of a version this build reads, nor object-engine data: its "
                           "engine data starts with the bytes 0000000000000000");
}

// A log left by a store once at the backup's name: the backup was renamed
// there, then refused as another store's, and every retry said it exists.
TEST_F(BadInput, ABackupToANameWithALeftoverLogIsRefusedBeforeWritingAnything) {
    make_store(path);
    const std::string old = dir.path("old.db");
    make_store(old);
    fs::remove(old);
    const auto r = steppe::test::run_cli("backup " + path + " " + old);
    EXPECT_NE(r.exit_code, 0) << r.out;
    EXPECT_CONTAINS(r.out, old + "-wal exists");
    EXPECT_CONTAINS(r.out, "nothing was written");
    EXPECT_FALSE(fs::exists(old));
    fs::remove(old + "-wal");
    fs::remove(old + "-shm");
    EXPECT_EQ(steppe::test::run_cli("backup " + path + " " + old).exit_code, 0);
}

TEST_F(BadInput, OlderFormatVersionIsAVersionError) {
    make_store(path);
    patch_header(path, [](auto& h) { h.version = 0; });
    auto e = open_error(path);
    EXPECT_EQ(e.code(), steppe::errc::version);
    EXPECT_CONTAINS(e.what(), "format version 0");
}

// A header whose page count was made smaller, its checksum made to match
// (a tester's crafted file): pages past the count read as never written
// (zeros), so a reader was served zeros for an array's tail, and check and
// backup passed it. The main file going on past the count gives it away.
TEST_F(BadInput, AHeaderPageCountMadeTooSmallIsNamedByOpenCheckAndBackup) {
    {
        auto s = steppe::store::open(path, opts());
        long** numbers = s.root<long*>("numbers");
        *numbers = s.make_array<long>(3000);
        for (long i = 0; i < 3000; ++i) (*numbers)[i] = i + 1;
        s.commit();
    }
    const std::uint64_t pages = steppe::storage::storage::open(path, {.create = false})->page_count();
    for (std::uint64_t fewer : {std::uint64_t{1}, pages / 2}) {
        const std::string damaged = dir.path("fewer-" + std::to_string(fewer) + ".db");
        fs::copy_file(path, damaged);
        patch_header(damaged, [&](auto& h) { h.page_count -= fewer; });
        const std::string says = damaged + ": the store counts " + std::to_string(pages - fewer) + " pages";
        auto e = open_error(damaged);
        EXPECT_EQ(e.code(), steppe::errc::corrupt) << e.what();
        EXPECT_CONTAINS(e.what(), says);
        EXPECT_CONTAINS(e.what(), "its header's page count is damaged");
        const auto checked = steppe::test::run_cli("check " + damaged);
        EXPECT_NE(checked.exit_code, 0) << checked.out;
        EXPECT_CONTAINS(checked.out, says);
        const auto copied = steppe::test::run_cli("backup " + damaged + " " + damaged + ".copy");
        EXPECT_NE(copied.exit_code, 0) << copied.out;
        EXPECT_CONTAINS(copied.out, says);
        EXPECT_FALSE(fs::exists(damaged + ".copy"));
    }
}

TEST_F(BadInput, WrongPageSizeIsAVersionError) {
    make_store(path);
    patch_header(path, [](auto& h) { h.page_size = 16384; });
    auto e = open_error(path);
    EXPECT_EQ(e.code(), steppe::errc::version);
    EXPECT_CONTAINS(e.what(), "page size 16384");
}

TEST_F(BadInput, StorageLevelStoreWithoutPageEngineDataIsAVersionError) {
    {
        auto raw = steppe::storage::storage::open(path);
        steppe::storage::meta_bytes meta{};
        std::memcpy(meta.data(), "some other layer", 16);
        raw->commit({}, meta);
    }
    auto e = open_error(path);
    EXPECT_EQ(e.code(), steppe::errc::version);
    EXPECT_CONTAINS(e.what(), "no page-engine data");
}

// A FIFO where one of a store's files should be. Opening one to read waits
// for a writer that never comes: every open, the CLI's too, blocked for
// good. Each open runs in a child with an alarm, so a regression fails
// (SIGALRM) rather than hanging the suite.
TEST_F(BadInput, AFifoInPlaceOfTheStoreOrAnyOfItsFilesIsAVersionErrorAtOnce) {
    auto refused_at_once = [&](const std::string& fifo, bool read_only) {
        SCOPED_TRACE(fifo + (read_only ? ", read-only" : ", writable"));
        RUN_IN_CHILD([&] {
            ::alarm(10);
            auto e = open_error(path, opts(read_only));
            EXPECT_EQ(e.code(), steppe::errc::version) << e.what();
            EXPECT_CONTAINS(e.what(), fifo + " is a FIFO");
        });
    };
    auto files = [&] {
        std::set<std::string> names;
        for (const auto& e : fs::directory_iterator(dir.dir())) names.insert(e.path().filename().string());
        return names;
    };
    ASSERT_EQ(::mkfifo(path.c_str(), 0600), 0);
    refused_at_once(path, false);
    refused_at_once(path, true);
    EXPECT_EQ(files(), std::set<std::string>{"s.db"}) << "a refused open makes nothing";

    fs::remove(path);
    make_store_in_log(path);  // a log with a commit the main file lacks
    for (const char* suffix : {"-wal", "-shm"}) {
        const std::string fifo = path + suffix;
        fs::rename(fifo, fifo + ".real");
        ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
        refused_at_once(fifo, false);
        refused_at_once(fifo, true);
        fs::remove(fifo);
        fs::rename(fifo + ".real", fifo);
    }
    // The lock file: a writer makes it, a reader without a reader table opens it.
    ASSERT_EQ(::mkfifo((path + "-lock").c_str(), 0600), 0);
    refused_at_once(path + "-lock", false);
    fs::rename(path + "-shm", path + "-shm.real");
    refused_at_once(path + "-lock", true);
    fs::rename(path + "-shm.real", path + "-shm");
    fs::remove(path + "-lock");
    ASSERT_FALSE(HasFailure()) << "the CLI would block as the library did";

    // The commands that read: the same error, never a wait.
    fs::rename(path + "-wal", path + "-wal.real");
    ASSERT_EQ(::mkfifo((path + "-wal").c_str(), 0600), 0);
    for (const char* command : {"info", "check"}) {
        auto r = steppe::test::run_cli(std::string(command) + " " + path);
        EXPECT_NE(r.exit_code, 0) << command << ": " << r.out;
        EXPECT_CONTAINS(r.out, path + "-wal is a FIFO");
    }
    fs::remove(path + "-wal");
    fs::rename(path + "-wal.real", path + "-wal");
    auto s = steppe::store::open(path, opts());
    EXPECT_EQ(count_parts(s), 3) << "the store and its log, put back, are whole";
}

// A directory in place of the log, the lock file or the reader table: the
// same `version` error as a FIFO, where a writable open (which cannot open a
// directory for writing) said only "open failed: Is a directory" (`io`; a
// tester's finding). The store, its files put back, is whole.
TEST_F(BadInput, ADirectoryInPlaceOfAnyOfTheStoresFilesIsAVersionError) {
    make_store_in_log(path);
    for (const char* suffix : {"-wal", "-shm", "-lock"}) {
        const std::string file = path + suffix;
        SCOPED_TRACE(file);
        if (fs::exists(file)) fs::rename(file, file + ".real");
        fs::create_directory(file);
        for (bool read_only : {false, true}) {
            if (read_only && std::string(suffix) == "-lock") continue;  // a reader opens it only without a table
            auto e = open_error(path, opts(read_only));
            EXPECT_EQ(e.code(), steppe::errc::version) << e.what();
            EXPECT_CONTAINS(e.what(), file + " is a directory, not a regular file");
        }
        if (std::string(suffix) != "-lock") {  // check reads beside a writer, through the table
            const auto checked = steppe::test::run_cli("check " + path);
            EXPECT_NE(checked.exit_code, 0) << checked.out;
            EXPECT_CONTAINS(checked.out, file + " is a directory, not a regular file");
        }
        fs::remove(file);
        if (fs::exists(file + ".real")) fs::rename(file + ".real", file);
    }
    auto s = steppe::store::open(path, opts());
    EXPECT_EQ(count_parts(s), 3);
}

// A symlink planted in place of the store's log, lock file or reader table
// (the store's own name may be a symlink: it is resolved first, and these
// files are named after the real one) is refused, and nothing is written
// through it: a writer overwrote the target with a log header or its pid.
TEST_F(BadInput, ASymlinkInPlaceOfTheLogLockFileOrReaderTableIsRefusedAndItsTargetUntouched) {
    make_store_in_log(path);
    const std::string target = dir.path("precious.txt");
    auto target_text = [&] {
        std::ifstream in(target);
        return std::string(std::istreambuf_iterator<char>(in), {});
    };
    for (const char* suffix : {"-wal", "-lock", "-shm"}) {
        SCOPED_TRACE(suffix);
        { std::ofstream(target) << "keep me"; }
        const std::string planted = path + suffix;
        if (fs::exists(planted)) fs::rename(planted, planted + ".real");
        fs::create_symlink(target, planted);
        auto e = open_error(path, opts());
        EXPECT_EQ(e.code(), steppe::errc::version) << e.what();
        EXPECT_CONTAINS(e.what(), planted + " is a symbolic link");
        EXPECT_EQ(target_text(), "keep me");
        fs::remove(planted);
        if (fs::exists(planted + ".real")) fs::rename(planted + ".real", planted);
    }
    auto s = steppe::store::open(path, opts());
    EXPECT_EQ(count_parts(s), 3) << "the store and its files, put back, are whole";
}

// ---- Damaged or incomplete stores ---------------------------------------------

TEST_F(BadInput, TruncatedHeaderIsCorruptAndSaysHowShort) {
    make_store(path);
    fs::resize_file(path, 100);
    auto e = open_error(path);
    EXPECT_EQ(e.code(), steppe::errc::corrupt);
    EXPECT_CONTAINS(e.what(), path);
    EXPECT_CONTAINS(e.what(), "only 100 bytes");
}

// A backup has one header slot (a file written in one pass); with it
// zeroed, it was "not a steppe store", which hid the damage (a tester's
// finding). Its commit mark still shows a store: corrupt, the header named.
TEST_F(BadInput, ABackupWhoseOnlyHeaderSlotIsZeroedIsADamagedHeader) {
    make_store(path);
    const std::string copy = dir.path("copy.db");
    ASSERT_EQ(steppe::test::run_cli("backup " + path + " " + copy).exit_code, 0);
    {
        std::fstream f(copy, std::ios::in | std::ios::out | std::ios::binary);
        const std::vector<char> zeros(steppe::storage::page_size);
        f.write(zeros.data(), static_cast<std::streamsize>(zeros.size()));
    }
    auto e = open_error(copy);
    EXPECT_EQ(e.code(), steppe::errc::corrupt) << e.what();
    EXPECT_CONTAINS(e.what(), copy + ": neither header slot (pages 0 and 1) holds a header, but page 2 holds this "
                                     "store's commit mark: the header is damaged");
}

TEST_F(BadInput, TruncatedDataPagesAreNamedByCheckAndNeverReadAsData) {
    make_store(path, 20000);                                 // ~80 data pages
    { auto s = steppe::store::open(path, opts()); }          // the open checkpointed them into the main file
    auto full = fs::file_size(path);
    ASSERT_GT(full, 60 * steppe::storage::page_size);
    fs::resize_file(path, full - 20 * steppe::storage::page_size);
    // Either the open refuses, or it opens and check() names the lost pages;
    // walking the list must then end the process with a message, never
    // return wrong data.
    std::vector<std::string> findings;
    try {
        auto s = steppe::store::open(path, opts(true));
        findings = s.check();
    } catch (const steppe::error& e) {
        EXPECT_EQ(e.code(), steppe::errc::corrupt) << e.what();
        return;
    }
    ASSERT_FALSE(findings.empty()) << "check() does not notice 20 missing data pages";
    for (auto& f : findings) std::printf("  check: %s\n", f.c_str());
    EXPECT_CONTAINS(findings[0], "page");
    EXPECT_EXIT(
        {
            auto s = steppe::store::open(path, opts(true));
            std::printf("%ld\n", count_parts(s));
            std::exit(0);
        },
        ::testing::ExitedWithCode(71), "fatal: cannot load page [0-9]+ of store .*s.db");
}

TEST_F(BadInput, MissingLogIsCorruptAndNamesTheLog) {
    make_store_in_log(path);
    fs::remove(path + "-wal");
    auto e = open_error(path);
    EXPECT_EQ(e.code(), steppe::errc::corrupt);
    EXPECT_CONTAINS(e.what(), path + "-wal");
    EXPECT_FALSE(fs::exists(path + "-wal")) << "open must not paper over a lost log by making a new one";
}

TEST_F(BadInput, ForeignLogIsCorrupt) {
    std::string other = dir.path("other.db");
    make_store_in_log(other);
    make_store_in_log(path);
    fs::copy_file(other + "-wal", path + "-wal", fs::copy_options::overwrite_existing);
    auto e = open_error(path);
    EXPECT_EQ(e.code(), steppe::errc::corrupt);
    EXPECT_CONTAINS(e.what(), "foreign log");
}

TEST_F(BadInput, MissingStoreWithoutCreateIsNotFound) {
    steppe::open_options o = opts();
    o.create = false;
    auto e = open_error(path, o);
    EXPECT_EQ(e.code(), steppe::errc::not_found);
    EXPECT_CONTAINS(e.what(), path);
    EXPECT_FALSE(fs::exists(path));
    EXPECT_EQ(open_error(path, opts(true)).code(), steppe::errc::not_found) << "read-only never creates";
}

// A new store's directory must exist: the error names it, not a lock file
// the user never named, and nothing is made.
TEST_F(BadInput, AStoreInADirectoryThatDoesNotExistNamesTheDirectory) {
    const std::string missing = dir.path("no/such/dir");
    auto e = open_error(missing + "/s.db", opts());
    EXPECT_EQ(e.code(), steppe::errc::not_found);
    EXPECT_CONTAINS(e.what(), "the directory " + missing + " does not exist");
    EXPECT_FALSE(fs::exists(dir.path("no")));
    // The directory is there; the lock file's name is a symlink into one
    // that is not: not the message above, but the planted symlink's, naming
    // the file (a symlink in place of the lock file is never followed).
    fs::create_symlink(missing + "/lock", path + "-lock");
    auto dangling = open_error(path, opts());
    EXPECT_EQ(dangling.code(), steppe::errc::version);
    EXPECT_CONTAINS(dangling.what(), path + "-lock is a symbolic link");
    EXPECT_EQ(std::string(dangling.what()).find("does not exist; create it"), std::string::npos) << dangling.what();
}

// ---- Locks ----------------------------------------------------------------------

TEST_F(BadInput, StoreLockedByALiveProcessNamesItsPid) {
    make_store(path);
    int ready[2];
    ASSERT_EQ(::pipe(ready), 0);
    pid_t holder = ::fork();
    ASSERT_GE(holder, 0);
    if (holder == 0) {
        auto s = steppe::store::open(path, opts());
        char c = 1;
        (void)!::write(ready[1], &c, 1);
        ::pause();
        ::_exit(0);
    }
    char c;
    ASSERT_EQ(::read(ready[0], &c, 1), 1);
    auto e = open_error(path);
    EXPECT_EQ(e.code(), steppe::errc::locked);
    EXPECT_CONTAINS(e.what(), "locked by process " + std::to_string(holder));
    EXPECT_CONTAINS(e.what(), path + "-lock");
    EXPECT_TRUE(steppe::store::open(path, opts(true)).check().empty()) << "a reader beside the writer";
    ::kill(holder, SIGKILL);
    ::waitpid(holder, nullptr, 0);
}

TEST_F(BadInput, StaleLockOfAKilledProcessDoesNotBlock) {
    make_store(path, 5);
    pid_t holder = ::fork();
    ASSERT_GE(holder, 0);
    if (holder == 0) {
        auto s = steppe::store::open(path, opts());
        *s.find_root<Part*>("parts") = s.make<Part>(Part{99, *s.find_root<Part*>("parts")});
        s.commit();
        ::kill(::getpid(), SIGKILL);  // dies holding the lock, its pid in the lock file
    }
    ::waitpid(holder, nullptr, 0);
    std::ifstream lock(path + "-lock");
    std::string pid;
    lock >> pid;
    EXPECT_EQ(pid, std::to_string(holder)) << "the dead holder's pid is still in the lock file";
    auto s = steppe::store::open(path, opts());
    EXPECT_EQ(count_parts(s), 6);
}

TEST_F(BadInput, LockFileWithAPidButNoHolderDoesNotBlock) {
    make_store(path, 5);
    { std::ofstream f(path + "-lock", std::ios::trunc); f << "999999\n"; }
    auto s = steppe::store::open(path, opts());
    EXPECT_EQ(count_parts(s), 5);
}

TEST_F(BadInput, ReadersShareAndAWriterOpensBesideThem) {
    make_store(path, 5);
    auto r1 = steppe::store::open(path, opts(true));
    auto r2 = steppe::store::open(path, opts(true));
    EXPECT_EQ(count_parts(r2), 5);
    RUN_IN_CHILD([&] {
        auto w = steppe::store::open(path);
        Part** head = w.root<Part*>("parts");
        *head = w.make<Part>(Part{9, *head});
        w.commit();
    });
    EXPECT_EQ(count_parts(r1), 5) << "the snapshot of its open";
    auto e = open_error(path);
    EXPECT_EQ(e.code(), steppe::errc::locked);
    EXPECT_CONTAINS(e.what(), "already open in this process");
    auto c = error_of([&] { r1.commit(); });
    EXPECT_EQ(c.code(), steppe::errc::invalid_argument);
    EXPECT_CONTAINS(c.what(), "read-only");
}

// ---- File modes and permissions ------------------------------------------------

TEST_F(BadInput, StoreFilesAreCreatedWithMode0600) {
    for (mode_t mask : {mode_t{022}, mode_t{0}, mode_t{077}}) {
        std::string p = dir.path("m" + std::to_string(mask) + ".db");
        mode_t old = ::umask(mask);
        auto s = steppe::store::open(p, opts());
        ::umask(old);
        for (const std::string& f : {p, p + "-wal", p + "-lock", p + "-shm"}) {  // the lock file exists while a writer has it
            struct stat st;
            ASSERT_EQ(::stat(f.c_str(), &st), 0) << f;
            EXPECT_EQ(st.st_mode & 07777, 0600u) << f << " with umask " << std::oct << mask;
        }
    }
}

TEST_F(BadInput, PermissionDeniedNamesTheFile) {
    make_store(path);  // owned by us, 0600; the directory is ours, 0700
    ::chmod(dir.dir().c_str(), 0755);
    RUN_IN_CHILD([&] {
        if (::geteuid() != 0) ::chmod(path.c_str(), 0);  // a normal user: take our own rights away
        drop_privileges();
        auto e = open_error(path);
        EXPECT_EQ(e.code(), steppe::errc::permission);
        EXPECT_CONTAINS(e.what(), path);
        EXPECT_CONTAINS(e.what(), "Permission denied");
        EXPECT_EQ(open_error(path, opts(true)).code(), steppe::errc::permission);
    });
}

TEST_F(BadInput, DirectoryWithoutWriteAccessCannotHoldANewStore) {
    ::chmod(dir.dir().c_str(), 0555);
    RUN_IN_CHILD([&] {
        drop_privileges();
        auto e = open_error(dir.path("new.db"));
        EXPECT_EQ(e.code(), steppe::errc::permission);
        EXPECT_CONTAINS(e.what(), dir.path("new.db"));
    });
    ::chmod(dir.dir().c_str(), 0700);
}

TEST_F(BadInput, ReadOnlyFileOpensReadOnlyButNotForWriting) {
    make_store(path, 4);
    ::chmod(dir.dir().c_str(), 0777);
    if (::geteuid() == 0) {
        for (const std::string& f : {path, path + "-wal"}) ASSERT_EQ(::chown(f.c_str(), 65534, 65534), 0);
    }
    ::chmod(path.c_str(), 0400);
    RUN_IN_CHILD([&] {
        drop_privileges();
        auto e = open_error(path);
        EXPECT_EQ(e.code(), steppe::errc::permission);
        EXPECT_CONTAINS(e.what(), path);
        auto s = steppe::store::open(path, opts(true));
        EXPECT_EQ(count_parts(s), 4);
    });
}

TEST_F(BadInput, ReadOnlyFileSystemOpensReadOnlyButNotForWriting) {
    std::string d = dir.path("ro");
    fs::create_directory(d);
    RUN_IN_CHILD([&] {
        private_tmpfs(d, "size=4m");
        std::string p = d + "/s.db";
        make_store(p, 7);
        if (::mount(nullptr, d.c_str(), nullptr, MS_REMOUNT | MS_RDONLY, nullptr) != 0)
            child_skip(std::string("cannot remount read-only: ") + std::strerror(errno));
        auto e = open_error(p);
        EXPECT_EQ(e.code(), steppe::errc::permission);
        EXPECT_CONTAINS(e.what(), "Read-only file system");
        EXPECT_CONTAINS(e.what(), p);
        auto s = steppe::store::open(p, opts(true));
        EXPECT_EQ(count_parts(s), 7);
        EXPECT_EQ(error_of([&] { steppe::store::open(d + "/new.db", opts()); }).code(), steppe::errc::permission);
    });
}

// ---- Disk full --------------------------------------------------------------------

// Fills the file system holding `dir` up to the last byte with a file that
// can be deleted to make room again.
void fill_up(const std::string& dir) {
    int fd = ::open((dir + "/filler").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    std::vector<char> block(64 << 10, 'x');
    for (std::size_t size = block.size(); size >= 1;) {
        if (::write(fd, block.data(), size) < 0) size /= 2;
    }
    ::close(fd);
}

TEST_F(BadInput, DiskFullDuringCommitKeepsThePreviousCommitAndGoesOnOnceThereIsRoom) {
    std::string d = dir.path("small");
    fs::create_directory(d);
    RUN_IN_CHILD([&] {
        private_tmpfs(d, "size=8m");
        std::string p = d + "/s.db";
        make_store(p, 10);
        {
            auto s = steppe::store::open(p, opts());  // this open checkpoints; the one below will not need to
            Part** head = s.find_root<Part*>("parts");
            fill_up(d);
            // ~320 new pages: more than the 1 MiB the log already holds, so it must grow.
            for (long i = 0; i < 80000; ++i) *head = s.make<Part>(Part{100 + i, *head});
            auto e = error_of([&] { s.commit(); });
            EXPECT_EQ(e.code(), steppe::errc::no_space);
            EXPECT_CONTAINS(e.what(), p + "-wal");
            EXPECT_CONTAINS(e.what(), "No space left on device");
            s.rollback();
            EXPECT_EQ(count_parts(s), 10) << "the store is at its previous commit";
            auto again = error_of([&] {
                for (long i = 0; i < 80000; ++i) *head = s.make<Part>(Part{i, *head});
                s.commit();
            });
            EXPECT_EQ(again.code(), steppe::errc::no_space) << "still full: fails the same way";
            s.rollback();
        }
        {
            auto s = steppe::store::open(p, opts(true));
            EXPECT_EQ(count_parts(s), 10) << "a reopen sees the previous commit, not the torn one";
        }
        fs::remove(d + "/filler");
        {
            auto s = steppe::store::open(p, opts());
            Part** head = s.find_root<Part*>("parts");
            for (long i = 0; i < 20000; ++i) *head = s.make<Part>(Part{100 + i, *head});
            s.commit();  // room again
        }
        auto s = steppe::store::open(p, opts());
        EXPECT_EQ(count_parts(s), 20010);
        EXPECT_TRUE(s.check().empty());
    });
}

TEST_F(BadInput, DiskFullDuringACheckpointInsideCommitLosesNothing) {
    std::string d = dir.path("small");
    fs::create_directory(d);
    RUN_IN_CHILD([&] {
        private_tmpfs(d, "size=4m");
        std::string p = d + "/s.db";
        steppe::open_options o = opts();
        o.checkpoint_bytes = 64 << 10;  // checkpoint after any commit of 16+ pages
        auto s = steppe::store::open(p, o);
        Part** head = s.root<Part*>("parts");
        for (long i = 0; i < 10000; ++i) *head = s.make<Part>(Part{i, *head});  // ~40 pages
        s.commit();  // checkpointed: the main file holds them; the log is reset but keeps its size
        auto log_size = fs::file_size(p + "-wal");
        fill_up(d);
        for (long i = 0; i < 5000; ++i) *head = s.make<Part>(Part{i, *head});  // ~20 new pages: fits the old log
        s.commit();  // durable in the log; the checkpoint behind it cannot grow the main file
        EXPECT_EQ(fs::file_size(p + "-wal"), log_size) << "the log did not need to grow (else this test tests commit)";
        EXPECT_EQ(count_parts(s), 15000);
        {
            auto r = error_of([&] { steppe::store::open(p, opts(true)); });  // our own writer lock
            EXPECT_EQ(r.code(), steppe::errc::locked);
        }
        auto closing = error_of([&] { s.close(); });
        EXPECT_EQ(closing.code(), steppe::errc::no_space) << "the close checkpoints, and the disk is full";
        EXPECT_CONTAINS(closing.what(), "the log keeps its commits");
        auto e = error_of([&] { steppe::store::open(p, opts()); });  // the close released the lock
        EXPECT_EQ(e.code(), steppe::errc::no_space) << "a writable open checkpoints first, and the disk is full";
        EXPECT_CONTAINS(e.what(), p);
        {
            auto r = steppe::store::open(p, opts(true));  // readers need no room
            EXPECT_EQ(count_parts(r), 15000);
        }
        fs::remove(d + "/filler");
        auto w = steppe::store::open(p, opts());
        EXPECT_EQ(count_parts(w), 15000);
        EXPECT_TRUE(w.check().empty());
    });
}

// A destructor cannot throw: the failed close-time checkpoint is reported on
// stderr, the lock is released, and the log keeps every commit.
TEST_F(BadInput, DiskFullDuringTheCheckpointAtCloseIsReportedAndLosesNothing) {
    std::string d = dir.path("small");
    fs::create_directory(d);
    const std::string report = dir.path("stderr.txt");
    RUN_IN_CHILD([&] {
        private_tmpfs(d, "size=3m");
        std::string p = d + "/s.db";
        std::optional<steppe::store> s(steppe::store::open(p, opts()));
        Part** head = s->root<Part*>("parts");
        for (long i = 0; i < 12000; ++i) *head = s->make<Part>(Part{i, *head});  // ~50 pages, in the log
        s->commit();
        fill_up(d);
        std::fflush(stderr);
        int saved = ::dup(2);
        int to = ::open(report.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
        ::dup2(to, 2);
        s.reset();
        std::fflush(stderr);
        ::dup2(saved, 2);
        ::close(to);
        ::close(saved);
        std::stringstream printed;
        printed << std::ifstream(report).rdbuf();
        EXPECT_CONTAINS(printed.str(), "steppe: closing " + p + ": the checkpoint failed, so the log keeps its commits");
        EXPECT_CONTAINS(printed.str(), "No space left on device");
        {
            auto r = steppe::store::open(p, opts(true));  // the lock was released; readers need no room
            EXPECT_EQ(count_parts(r), 12000);
        }
        fs::remove(d + "/filler");
        auto w = steppe::store::open(p, opts());
        EXPECT_EQ(count_parts(w), 12000);
        EXPECT_TRUE(w.check().empty());
    });
}

TEST_F(BadInput, DiskFullDuringTheCheckpointAtOpenLeavesTheLogToReplay) {
    std::string d = dir.path("small");
    fs::create_directory(d);
    RUN_IN_CHILD([&] {
        private_tmpfs(d, "size=3m");
        std::string p = d + "/s.db";
        make_store_in_log(p, 12000);  // ~50 pages, all still in the log (checkpoint_bytes is 64 MiB)
        fill_up(d);
        auto e = error_of([&] { steppe::store::open(p, opts()); });
        EXPECT_EQ(e.code(), steppe::errc::no_space);
        EXPECT_CONTAINS(e.what(), p);
        {
            auto r = steppe::store::open(p, opts(true));
            EXPECT_EQ(count_parts(r), 12000);
        }
        fs::remove(d + "/filler");
        auto w = steppe::store::open(p, opts());
        EXPECT_EQ(count_parts(w), 12000);
        EXPECT_TRUE(w.check().empty());
    });
}

// Known bug 5 (docs/guarantees.md): a writer locked out by readers is told
// the store "is locked by process N", N being whichever writer last held the
// store (its pid stays in the lock file), even when that process is dead:
// posix_env.cpp lock() reads the pid hint whatever kind of lock blocked it.
TEST_F(BadInput, WriterLockedOutByReadersIsNotToldADeadProcessHoldsIt) {
    pid_t writer = ::fork();
    ASSERT_GE(writer, 0);
    if (writer == 0) {
        make_store(path, 5);
        ::_exit(0);
    }
    ::waitpid(writer, nullptr, 0);
    auto r = steppe::store::open(path, opts(true));
    auto e = open_error(path);
    EXPECT_EQ(e.code(), steppe::errc::locked);
    EXPECT_EQ(std::string(e.what()).find(std::to_string(writer)), std::string::npos)
        << "names the dead writer: " << e.what();
}

// Known bug 6: a process that is not dumpable (after setuid, or by
// prctl(PR_SET_DUMPABLE, 0) for hardening) cannot open any store as a normal
// user: the write tracker's open of /proc/self/pagemap fails with EACCES and
// store::open throws instead of falling back to write-fault tracking.
TEST_F(BadInput, NonDumpableProcessCanOpenAStore) {
    ::chmod(dir.dir().c_str(), 0777);
    RUN_IN_CHILD([&] {
        if (::geteuid() == 0 && (::setgid(65534) != 0 || ::setuid(65534) != 0)) child_skip("cannot setuid(65534)");
        ::prctl(PR_SET_DUMPABLE, 0);
        make_store(path, 3);
        auto s = steppe::store::open(path, opts(true));
        EXPECT_EQ(count_parts(s), 3);
    });
}

}  // namespace
