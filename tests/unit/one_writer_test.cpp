// One writer per store FILE, fork, two threads, and no files left behind
// (docs/guarantees.md, promise 4 and "fork"). Real files, real processes:
// a holder runs in a forked child that opens the store itself (a child may
// open stores; it may not use its parent's) and reports through a pipe.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <steppe/containers.hpp>
#include <steppe/objects.hpp>
#include <steppe/steppe.hpp>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "storage/io.hpp"
#include "storage/storage.hpp"
#include "support/cli.hpp"
#include "support/fault_env.hpp"
#include "support/expect_error.hpp"
#include "support/temp_dir.hpp"

namespace one_writer {
struct Part {
    long id;
    Part* next;
};
}  // namespace one_writer

using one_writer::Part;
namespace fs = std::filesystem;

namespace {

using steppe::test::error_of;


steppe::open_options opts(bool read_only = false) {
    steppe::open_options o;
    o.read_only = read_only;
    o.create = !read_only;
    return o;
}

steppe::error open_error(const std::string& path, const steppe::open_options& o = opts()) {
    return error_of([&] { steppe::store::open(path, o); });
}

long count_parts(steppe::store& s, const std::string& root = "parts") {
    long n = 0;
    Part** head = s.find_root<Part*>(root);
    for (Part* p = head ? *head : nullptr; p; p = p->next) ++n;
    return n;
}

// Adds `n` parts to the list under `root` and commits.
void add_parts(steppe::store& s, long n, const std::string& root = "parts") {
    Part** head = s.root<Part*>(root);
    for (long i = 0; i < n; ++i) *head = s.make<Part>(Part{i, *head});
    s.commit();
}

std::set<std::string> files_in(const fs::path& dir) {
    std::set<std::string> names;
    for (const auto& e : fs::directory_iterator(dir)) names.insert(e.path().filename().string());
    return names;
}

// A child process that opens `path`, commits `parts` parts under root
// `root`, says so through a pipe and keeps the store open until killed.
class holder {
public:
    holder(const std::string& path, const std::string& root, long parts,
           const std::function<void()>& before_open = [] {}) {
        int ready[2];
        if (::pipe(ready) != 0) throw std::runtime_error("pipe");
        std::fflush(nullptr);
        pid_ = ::fork();
        if (pid_ == 0) {
            char ok = 0;
            try {
                before_open();
                auto s = steppe::store::open(path, opts());
                add_parts(s, parts, root);
                ok = 1;
                (void)!::write(ready[1], &ok, 1);
                for (;;) ::pause();
            } catch (const std::exception& e) {
                std::fprintf(stderr, "holder: %s\n", e.what());
            }
            (void)!::write(ready[1], &ok, 1);
            ::_exit(1);
        }
        ::close(ready[1]);
        char ok = 0;
        opened_ = ::read(ready[0], &ok, 1) == 1 && ok == 1;
        ::close(ready[0]);
    }
    ~holder() { kill(); }
    pid_t pid() const { return pid_; }
    bool opened() const { return opened_; }
    // kill -9: what it committed is durable.
    void kill() {
        if (pid_ <= 0) return;
        ::kill(pid_, SIGKILL);
        ::waitpid(pid_, nullptr, 0);
        pid_ = -1;
    }

private:
    pid_t pid_ = -1;
    bool opened_ = false;
};

// Runs `body` in a forked child; returns its exit status, or 128 + signal.
// The child's stderr goes to `err` when given.
int in_child(const std::function<int()>& body, std::string* err = nullptr, pid_t (*make_child)() = ::fork) {
    int out[2];
    if (::pipe(out) != 0) return -1;
    std::fflush(nullptr);
    pid_t pid = make_child();
    if (pid == 0) {
        ::alarm(60);  // a child that hangs ends (SIGALRM: 128 + 14) instead of the test waiting for ever
        ::close(out[0]);
        if (err) ::dup2(out[1], STDERR_FILENO);
        int rc = 99;
        try {
            rc = body();
        } catch (const std::exception& e) {
            std::fprintf(stderr, "child: unexpected exception: %s\n", e.what());
        }
        std::fflush(nullptr);
        ::_exit(rc);
    }
    ::close(out[1]);
    char buf[512];
    for (ssize_t n; (n = ::read(out[0], buf, sizeof buf)) > 0;)
        if (err) err->append(buf, static_cast<std::size_t>(n));
    ::close(out[0]);
    int status = 0;
    ::waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

class OneWriter : public ::testing::Test {
protected:
    steppe::test::temp_dir dir;
    std::string path = dir.path("s.db");
};

// ---- One writer per file ---------------------------------------------------------

TEST_F(OneWriter, SymlinkOpensTheRealStoreAndCannotMakeASecondWriter) {
    { auto s = steppe::store::open(path, opts()); add_parts(s, 3); }
    std::string alias = dir.path("alias.db");
    fs::create_symlink("s.db", alias);  // relative, as ln -s makes them
    {
        holder h(alias, "by_alias", 5);
        ASSERT_TRUE(h.opened());
        for (const std::string& p : {path, alias}) {
            auto e = open_error(p);
            EXPECT_EQ(e.code(), steppe::errc::locked) << p;
            EXPECT_CONTAINS(e.what(), "locked by process " + std::to_string(h.pid()));
            auto r = steppe::store::open(p, opts(true));  // a reader beside the writer
            EXPECT_EQ(count_parts(r, "by_alias"), 5) << p;
        }
        EXPECT_FALSE(fs::exists(alias + "-wal")) << "the log is the real store's";
        EXPECT_FALSE(fs::exists(alias + "-lock"));
    }
    {
        holder h(path, "by_path", 7);
        ASSERT_TRUE(h.opened());
        EXPECT_EQ(open_error(alias).code(), steppe::errc::locked);
    }
    auto s = steppe::store::open(alias, opts());
    EXPECT_EQ(s.path(), path);
    EXPECT_EQ(count_parts(s), 3);
    EXPECT_EQ(count_parts(s, "by_alias"), 5) << "the commit through the symlink survives";
    EXPECT_EQ(count_parts(s, "by_path"), 7);
    EXPECT_TRUE(s.check().empty());
    EXPECT_EQ(files_in(dir.dir()), (std::set<std::string>{"alias.db", "s.db", "s.db-lock", "s.db-shm", "s.db-wal"}));
}

TEST_F(OneWriter, SymlinkChainsAndAbsoluteTargetsResolve) {
    { auto s = steppe::store::open(path, opts()); add_parts(s, 2); }
    fs::create_symlink(path, dir.path("a.db"));
    fs::create_symlink("a.db", dir.path("b.db"));
    holder h(dir.path("b.db"), "parts", 1);
    ASSERT_TRUE(h.opened());
    EXPECT_EQ(open_error(dir.path("a.db")).code(), steppe::errc::locked);
    EXPECT_EQ(open_error(path).code(), steppe::errc::locked);
}

TEST_F(OneWriter, HardLinkCannotMakeASecondWriter) {
    { auto s = steppe::store::open(path, opts()); add_parts(s, 3); }
    std::string alias = dir.path("hard.db");
    fs::create_hard_link(path, alias);
    {
        holder h(path, "parts", 4);
        ASSERT_TRUE(h.opened());
        auto e = open_error(alias);
        EXPECT_EQ(e.code(), steppe::errc::locked);
        EXPECT_CONTAINS(e.what(), "locked by process " + std::to_string(h.pid()));
        EXPECT_CONTAINS(e.what(), "another name");
        EXPECT_EQ(open_error(alias, opts(true)).code(), steppe::errc::locked)
            << "the hard link has no reader table: its reader takes a flock, which the writer holds";
        EXPECT_FALSE(fs::exists(alias + "-lock")) << "the refused open removed the lock file it made";
    }
    steppe::store::open(path, opts()).close();  // the holder's commit into the main file: the log names no commit
    {
        auto r = steppe::store::open(path, opts(true));  // in the table of the name the writers used
        int rc = in_child([&] {
            auto w = steppe::store::open(alias, opts());  // another name: another log, another table
            add_parts(w, 1);
            auto e = error_of([&] { w.checkpoint(); });
            return e.code() == steppe::errc::locked && std::string(e.what()).find("another name") != std::string::npos
                       ? 0
                       : 1;
        });
        EXPECT_EQ(rc, 0) << "a writer by the hard link cannot see the reader's snapshot: its checkpoints wait";
        EXPECT_EQ(count_parts(r), 7) << "the reader's snapshot";
        EXPECT_TRUE(r.check().empty());
    }
    steppe::store::open(alias, opts()).close();  // no reader now: its commit goes into the main file
    auto s = steppe::store::open(path, opts());
    EXPECT_EQ(count_parts(s), 8) << "the holder's commit and the one by the hard link survived";
    EXPECT_TRUE(s.check().empty());
}

// A name that has a reader table of its own (a writer used it once) must
// not let a reader in beside a writer by the other name: that writer's
// commits are in its own log, and its checkpoints do not wait for readers
// of this table. The reader read an older commit than the writer had
// returned, or died on a page overwritten under it ("fails its checksum").
// Nor may it read the older state once that writer is gone (killed) with
// commits in its log: the main file's commit mark shows them.
TEST_F(OneWriter, AReaderByAHardLinkIsRefusedWhileAWriterHoldsTheOtherName) {
    { auto s = steppe::store::open(path, opts()); add_parts(s, 1); }
    const std::string alias = dir.path("hard.db");
    fs::create_hard_link(path, alias);
    { auto s = steppe::store::open(alias, opts()); add_parts(s, 1); }
    ASSERT_TRUE(fs::exists(alias + "-shm")) << "the alias has a reader table: the case under test";
    {
        holder h(path, "parts", 1);
        ASSERT_TRUE(h.opened());
        auto e = open_error(alias, opts(true));
        EXPECT_EQ(e.code(), steppe::errc::locked) << e.what();
        EXPECT_CONTAINS(e.what(), std::to_string(h.pid()));
        auto r = steppe::store::open(path, opts(true));  // by the writer's name: its snapshot
        EXPECT_EQ(count_parts(r), 3);
    }  // the holder is killed: its commit is in its name's log alone
    auto e = open_error(alias, opts(true));
    EXPECT_EQ(e.code(), steppe::errc::corrupt) << "not an older state read quietly: " << e.what();
    EXPECT_CONTAINS(e.what(), "hard links");
    steppe::store::open(path, opts()).close();  // replayed and checkpointed into the main file
    auto r = steppe::store::open(alias, opts(true));
    EXPECT_EQ(count_parts(r), 3);
    EXPECT_TRUE(r.check().empty());
}

TEST_F(OneWriter, RelativeAndOtherSpellingsAreTheSameStore) {
    { auto s = steppe::store::open(path, opts()); add_parts(s, 1); }
    std::string base = dir.dir().filename().string();
    holder h("s.db", "parts", 2, [&] { fs::current_path(dir.dir()); });
    ASSERT_TRUE(h.opened());
    for (const std::string& p : {path, dir.path("./s.db"), dir.path("../" + base + "/s.db")})
        EXPECT_EQ(open_error(p).code(), steppe::errc::locked) << p;
    int rc = in_child([&] {
        fs::current_path(dir.dir().parent_path());
        return open_error(base + "//s.db").code() == steppe::errc::locked ? 0 : 1;
    });
    EXPECT_EQ(rc, 0);
    h.kill();
    auto s = steppe::store::open(path, opts());
    EXPECT_EQ(count_parts(s), 3);
}

TEST_F(OneWriter, SameStoreTwiceInOneProcessIsRefusedAsSuch) {
    auto s = steppe::store::open(path, opts());
    add_parts(s, 2);
    fs::create_symlink(path, dir.path("sym.db"));
    fs::create_hard_link(path, dir.path("hard.db"));
    for (const std::string& p : {path, dir.path("sym.db"), dir.path("hard.db")}) {
        for (bool read_only : {false, true}) {
            auto e = open_error(p, opts(read_only));
            EXPECT_EQ(e.code(), steppe::errc::locked) << p;
            EXPECT_CONTAINS(e.what(), "already open in this process");
            EXPECT_EQ(std::string(e.what()).find("locked by process"), std::string::npos) << e.what();
        }
    }
    add_parts(s, 1);  // the refusals did not disturb the open store
    s = steppe::store::open(dir.path("other.db"), opts());  // closes the first
    auto r1 = steppe::store::open(path, opts(true));
    auto r2 = steppe::store::open(dir.path("sym.db"), opts(true));  // readers share, here too
    EXPECT_EQ(count_parts(r2), 3);
    auto e = open_error(path);
    EXPECT_EQ(e.code(), steppe::errc::locked);
    EXPECT_CONTAINS(e.what(), "already open in this process, read-only");
}

// ---- fork ---------------------------------------------------------------------------

class Fork : public OneWriter, public ::testing::WithParamInterface<steppe::fault_backend> {
protected:
    steppe::open_options fork_opts() {
        steppe::open_options o = opts();
        o.backend = GetParam();
        return o;
    }
};

TEST_P(Fork, ChildCallsThrowNamingTheParent) {
    auto s = steppe::store::open(path, fork_opts());
    add_parts(s, 3);
    std::string err;
    int rc = in_child(
        [&] {
            std::string parent = "opened by process " + std::to_string(::getppid());
            int failures = 0;
            auto expect_refused = [&](const char* what, const std::function<void()>& call) {
                try {
                    call();
                    std::fprintf(stderr, "%s did not throw\n", what);
                    ++failures;
                } catch (const steppe::error& e) {
                    std::string m = e.what();
                    if (e.code() != steppe::errc::invalid_argument || m.find(parent) == std::string::npos ||
                        m.find("fork before opening the store") == std::string::npos) {
                        std::fprintf(stderr, "%s: %s\n", what, e.what());
                        ++failures;
                    }
                }
            };
            expect_refused("commit", [&] { s.commit(); });
            expect_refused("rollback", [&] { s.rollback(); });
            expect_refused("make", [&] { s.make<Part>(); });
            expect_refused("root", [&] { s.root<Part*>("parts"); });
            expect_refused("set_root", [&] { s.set_root("x", reinterpret_cast<Part*>(8)); });
            expect_refused("remove_root", [&] { s.remove_root("parts"); });
            expect_refused("roots", [&] { s.roots(); });
            expect_refused("stats", [&] { s.stats(); });
            expect_refused("check", [&] { s.check(); });
            expect_refused("allocator", [&] { steppe::vector<long> v{1, 2, 3}; });
            { steppe::store mine = std::move(s); }  // the child's destructor: writes nothing
            return failures;
        },
        &err);
    EXPECT_EQ(rc, 0) << err;
    add_parts(s, 1);  // moved from in the child only
    EXPECT_EQ(count_parts(s), 4);
}

TEST_P(Fork, ChildTouchingStoreMemoryDiesWithAMessage) {
    auto s = steppe::store::open(path, fork_opts());
    add_parts(s, 3);
    Part* head = *s.find_root<Part*>("parts");
    ASSERT_EQ(head->id, 2);
    std::string err;
    int rc = in_child([&] { return static_cast<int>(head->next->id); }, &err);
    EXPECT_EQ(rc, 71) << err;
    EXPECT_CONTAINS(err, "steppe: fatal: process ");
    EXPECT_CONTAINS(err, "memory of a store that process " + std::to_string(::getpid()) + " opened");
    EXPECT_CONTAINS(err, "fork before opening the store, or exec");
    add_parts(s, 1);
    EXPECT_EQ(count_parts(s), 4);
}

// A child made by glibc's _Fork, which runs no fork handlers (so steppe's
// pid of the process is still the parent's there), is refused and ended as
// fork()'s is: its commit throws, its close leaves the parent's store alone
// and returns, a touch of store memory ends it with the message. Before,
// commit and the touch were a bare SIGSEGV, and close waited for ever to
// join an eviction thread the child does not have (a tester's finding).
TEST_P(Fork, AChildOfUnderscoreForkIsRefusedAndEndedAsAForkedOne) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
    GTEST_SKIP() << "_Fork bypasses the sanitizer runtime's own fork handling: its child may wait on a lock "
                    "of the runtime's allocator another thread held";
#endif
    auto s = steppe::store::open(path, fork_opts());
    add_parts(s, 3);
    Part* head = *s.find_root<Part*>("parts");
    std::string err;
    int rc = in_child(
        [&] {
            try {
                s.commit();
                return 1;
            } catch (const steppe::error& e) {
                if (e.code() != steppe::errc::invalid_argument ||
                    std::string(e.what()).find("opened by process " + std::to_string(::getppid())) ==
                        std::string::npos)
                    return 2;
            }
            s.close();
            return 0;
        },
        &err, ::_Fork);
    EXPECT_EQ(rc, 0) << "1: the child committed, 2: the refusal did not say why, 142: its close hung; " << err;
    err.clear();
    rc = in_child([&] { return static_cast<int>(head->next->id); }, &err, ::_Fork);
    EXPECT_EQ(rc, 71) << err;
    EXPECT_CONTAINS(err, "memory of a store that process " + std::to_string(::getpid()) + " opened");
    err.clear();  // find_root compares the cached pid (a system call per call cost 3x): the root's touch ends it
    rc = in_child([&] { return static_cast<int>((*s.find_root<Part*>("parts"))->id); }, &err, ::_Fork);
    EXPECT_EQ(rc, 71) << err;
    EXPECT_CONTAINS(err, "memory of a store that process " + std::to_string(::getpid()) + " opened");
    add_parts(s, 1);
    EXPECT_EQ(count_parts(s), 4);
    EXPECT_TRUE(s.check().empty());
}

TEST_P(Fork, ChildExitingNormallyLeavesTheParentsStoreAndLockAlone) {
    auto s = steppe::store::open(path, fork_opts());
    add_parts(s, 3);
    *s.find_root<Part*>("parts") = s.make<Part>(Part{42, *s.find_root<Part*>("parts")});  // uncommitted
    auto wal_before = fs::file_size(path + "-wal");
    auto main_before = fs::file_size(path);
    int rc = in_child([&]() -> int { std::exit(0); });  // the child's atexit handlers and static destructors run
    EXPECT_EQ(rc, 0);
    rc = in_child([&] {
        { steppe::store mine = std::move(s); }  // the child's destructor runs here
        return 0;
    });
    EXPECT_EQ(rc, 0);
    EXPECT_EQ(fs::file_size(path + "-wal"), wal_before);
    EXPECT_EQ(fs::file_size(path), main_before);
    std::ifstream lock(path + "-lock");
    std::string pid;
    lock >> pid;
    EXPECT_EQ(pid, std::to_string(::getpid())) << "the lock file is still the parent's";
    // A third process is still locked out: the children released nothing.
    rc = in_child([&] {
        auto e = open_error(path);
        return e.code() == steppe::errc::locked &&
                       std::string(e.what()).find("locked by process " + std::to_string(::getppid())) !=
                           std::string::npos
                   ? 0
                   : 1;
    });
    EXPECT_EQ(rc, 0);
    s.commit();  // the parent goes on: its uncommitted object is still there
    add_parts(s, 1);
    s = steppe::store::open(dir.path("other.db"), fork_opts());
    auto r = steppe::store::open(path, opts(true));
    EXPECT_EQ(count_parts(r), 5);
    EXPECT_TRUE(r.check().empty());
}

TEST_P(Fork, ChildDoesNotKeepTheStoreLockedAfterTheParentClosesIt) {
    auto s = steppe::store::open(path, fork_opts());
    add_parts(s, 2);
    int go[2];
    ASSERT_EQ(::pipe(go), 0);
    std::fflush(nullptr);
    pid_t child = ::fork();
    if (child == 0) {  // lives on, without exec, until the parent is done
        char c;
        (void)!::read(go[0], &c, 1);
        ::_exit(0);
    }
    s = steppe::store::open(dir.path("other.db"), fork_opts());  // closes the store
    {
        auto again = steppe::store::open(path, fork_opts());
        add_parts(again, 1);
        int rc = in_child([&] { return open_error(path).code() == steppe::errc::locked ? 0 : 1; });
        EXPECT_EQ(rc, 0) << "the reopened store is locked again";
    }
    int rc = in_child([&] {
        auto mine = steppe::store::open(path, fork_opts());
        return count_parts(mine) == 3 ? 0 : 1;
    });
    EXPECT_EQ(rc, 0) << "another process opens it once it is closed, though the first child still lives";
    char c = 1;
    (void)!::write(go[1], &c, 1);
    ::waitpid(child, nullptr, 0);
}

INSTANTIATE_TEST_SUITE_P(Backends, Fork, ::testing::Values(steppe::fault_backend::uffd, steppe::fault_backend::mprotect),
                         [](const auto& info) {
                             return info.param == steppe::fault_backend::uffd ? "uffd" : "mprotect";
                         });

// ---- Two threads --------------------------------------------------------------------

TEST_F(OneWriter, SecondThreadCommittingThrowsInsteadOfCorrupting) {
    steppe::open_options o = opts();
    o.durable = false;
    auto s = steppe::store::open(path, o);
    Part** head = s.root<Part*>("parts");
    for (long i = 0; i < 200000; ++i) *head = s.make<Part>(Part{i, *head});  // a commit that takes a while
    std::atomic<bool> started{false}, done{false};
    std::atomic<long> refusals{0}, wrong{0};
    auto attempt = [&] {
        try {
            s.commit();
            return true;
        } catch (const steppe::error& e) {
            if (e.code() == steppe::errc::invalid_argument &&
                std::string(e.what()).find("called while another thread is in commit") != std::string::npos)
                ++refusals;
            else
                ++wrong;
            return false;
        }
    };
    std::thread second([&] {
        while (!started) std::this_thread::yield();
        while (!done) attempt();
    });
    started = true;
    while (!attempt()) {
    }
    done = true;
    second.join();
    EXPECT_EQ(wrong, 0);
    EXPECT_GT(refusals, 0) << "one thread's commit ran while the other's was in progress";
    s = steppe::store::open(dir.path("other.db"), o);
    auto r = steppe::store::open(path, opts(true));
    EXPECT_EQ(count_parts(r), 200000);
    EXPECT_TRUE(r.check().empty());
}

// make and destroy take turns rather than throw: std containers on
// steppe::allocator grow and shrink in several threads at once.
TEST_F(OneWriter, ThreadsGrowingContainersAtOnceTakeTurns) {
    steppe::open_options o = opts();
    o.durable = false;
    {
        auto s = steppe::store::open(path, o);
        using longs = steppe::vector<long>;
        longs* lists[2] = {s.root<longs>("a"), s.root<longs>("b")};
        std::atomic<long> errors{0};
        auto grow = [&](int t) {
            steppe::use_store here(s);
            try {
                for (long i = 0; i < 20000; ++i) {
                    lists[t]->push_back(i);
                    if (i % 1000 == 999) lists[t]->shrink_to_fit();  // destroys the old buffer
                }
            } catch (const steppe::error&) {
                ++errors;
            }
        };
        std::thread a(grow, 0), b(grow, 1);
        a.join();
        b.join();
        EXPECT_EQ(errors, 0);
        s.commit();
    }
    auto r = steppe::store::open(path, opts(true));
    for (const char* name : {"a", "b"}) {
        auto* list = r.find_root<steppe::vector<long>>(name);
        ASSERT_NE(list, nullptr);
        ASSERT_EQ(list->size(), 20000u);
        for (long i = 0; i < 20000; ++i) ASSERT_EQ((*list)[static_cast<std::size_t>(i)], i);
    }
    EXPECT_TRUE(r.check().empty());
}

TEST_F(OneWriter, RootsOfTwoThreadsCommittingAreNeverLost) {
    steppe::open_options o = opts();
    o.durable = false;
    std::set<std::string> committed[2];
    {
        auto s = steppe::store::open(path, o);
        auto work = [&](int t) {
            for (int i = 0; i < 300; ++i) {
                std::string name = "t" + std::to_string(t) + "-" + std::to_string(i);
                try {
                    s.set_root(name, s.make<Part>(Part{i, nullptr}));
                    s.commit();
                    committed[t].insert(name);
                } catch (const steppe::error& e) {
                    if (e.code() != steppe::errc::invalid_argument) throw;  // refused: try the next one
                }
            }
        };
        std::thread other(work, 1);
        work(0);
        other.join();
    }
    auto r = steppe::store::open(path, opts(true));
    std::set<std::string> present;
    for (const auto& info : r.roots()) present.insert(info.name);
    for (const auto& names : committed)
        for (const auto& name : names) EXPECT_TRUE(present.count(name)) << "root " << name << " was committed";
    EXPECT_TRUE(r.check().empty());
}

// ---- Opening: lock_timeout, exclusive_create -------------------------------------------

TEST_F(OneWriter, LockTimeoutWaitsForTheWriterToLetGo) {
    holder h(path, "parts", 3);
    ASSERT_TRUE(h.opened());
    steppe::open_options wait = opts();
    wait.lock_timeout = std::chrono::milliseconds(150);
    auto started = std::chrono::steady_clock::now();
    auto e = open_error(path, wait);
    EXPECT_EQ(e.code(), steppe::errc::locked);
    EXPECT_CONTAINS(e.what(), "after waiting 150 ms");
    EXPECT_GE(std::chrono::steady_clock::now() - started, std::chrono::milliseconds(150));
    std::thread killer([&] {
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
        h.kill();
    });
    wait.lock_timeout = std::chrono::seconds(30);
    auto s = steppe::store::open(path, wait);
    killer.join();
    EXPECT_EQ(count_parts(s), 3) << "the killed writer's commit";
}

// Writers taking turns: each lets go by removing the lock file, so one that
// waits finds the file it waited on gone or replaced, again and again while
// others keep taking it. That is contention, like a held lock, but the wait
// gave up after 100 such turns: of 12 processes opening as writers with a
// 20 s lock_timeout, some got locked ("keeps being removed or replaced")
// within a second. Here one process holds the lock for a second while it
// replaces its file every 3 ms (each new file locked before it takes the
// name, so the lock is never free), then 8 processes that waited all along
// take it 5 times each (env::lock, the lock alone). A counter in a file,
// read and written under the lock, shows that every turn was taken and none
// two at once.
TEST_F(OneWriter, ManyProcessesWaitingWithALockTimeoutAllTakeTheirTurns) {
    constexpr int waiters = 8, turns = 5;
    const std::string counter = dir.path("counter"), lock_file = path + "-lock";
    { std::ofstream f(counter); }
    int ready[2];
    ASSERT_EQ(::pipe(ready), 0);
    std::fflush(nullptr);
    const auto started = std::chrono::steady_clock::now();
    pid_t replacer = ::fork();
    ASSERT_GE(replacer, 0);
    if (replacer == 0) {
        int held = -1;
        for (auto until = std::chrono::steady_clock::now() + std::chrono::seconds(1);
             std::chrono::steady_clock::now() < until;) {
            const std::string next = lock_file + ".next";
            int fd = ::open(next.c_str(), O_RDWR | O_CREAT | O_TRUNC, 0600);
            if (fd < 0 || ::flock(fd, LOCK_EX) != 0 || ::rename(next.c_str(), lock_file.c_str()) != 0) ::_exit(3);
            if (held >= 0) ::close(held);
            else (void)!::write(ready[1], "x", 1);
            held = fd;
            std::this_thread::sleep_for(std::chrono::milliseconds(3));
        }
        ::unlink(lock_file.c_str());  // as a writer lets go: the name first, then the lock
        ::_exit(0);
    }
    char c;
    ASSERT_EQ(::read(ready[0], &c, 1), 1);
    std::vector<pid_t> children{replacer};
    for (int i = 0; i < waiters; ++i) {
        std::fflush(nullptr);
        pid_t pid = ::fork();
        ASSERT_GE(pid, 0);
        if (pid == 0) {
            ::alarm(60);
            int fd = ::open(counter.c_str(), O_RDWR);
            for (int turn = 0; turn < turns; ++turn) {
                try {
                    auto lock = steppe::storage::posix_env().lock(path, steppe::storage::lock_kind::writer, 0600,
                                                                  std::chrono::seconds(20));
                    long n = 0;
                    if (::pread(fd, &n, sizeof n, 0) < 0) ::_exit(3);
                    ++n;
                    if (::pwrite(fd, &n, sizeof n, 0) != sizeof n) ::_exit(3);
                } catch (const steppe::error& e) {
                    std::fprintf(stderr, "turn %d: %s\n", turn, e.what());
                    ::_exit(1);
                }
            }
            ::_exit(0);
        }
        children.push_back(pid);
    }
    for (pid_t pid : children) {
        int status = 0;
        ::waitpid(pid, &status, 0);
        EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "process " << pid << " failed";
    }
    EXPECT_GE(std::chrono::steady_clock::now() - started, std::chrono::seconds(1));
    long n = 0;
    std::ifstream(counter).read(reinterpret_cast<char*>(&n), sizeof n);
    EXPECT_EQ(n, long{waiters} * turns) << "every turn counted once";
    EXPECT_EQ(files_in(dir.dir()), std::set<std::string>{"counter"}) << "the last holder removed the lock file";
}

TEST_F(OneWriter, ExclusiveCreateRefusesAnExistingStoreAndChangesNothing) {
    steppe::open_options fresh = opts();
    fresh.exclusive_create = true;
    {
        auto s = steppe::store::open(path, fresh);
        add_parts(s, 2);
    }
    std::set<std::string> before = files_in(dir.dir());
    auto e = open_error(path, fresh);
    EXPECT_EQ(e.code(), steppe::errc::exists);
    EXPECT_CONTAINS(e.what(), path);
    EXPECT_EQ(files_in(dir.dir()), before);
    fresh.create = false;
    EXPECT_EQ(open_error(path, fresh).code(), steppe::errc::invalid_argument);
    auto s = steppe::store::open(path, opts(true));
    EXPECT_EQ(count_parts(s), 2);
}

TEST_F(OneWriter, OfTwoProcessesCreatingExclusivelyOneGetsExists) {
    std::vector<pid_t> children;
    for (int i = 0; i < 2; ++i) {
        std::fflush(nullptr);
        pid_t pid = ::fork();
        if (pid == 0) {
            int rc = 2;
            try {
                steppe::open_options o = opts();
                o.exclusive_create = true;
                o.lock_timeout = std::chrono::seconds(30);
                auto s = steppe::store::open(path, o);
                add_parts(s, 1);
                rc = 0;
            } catch (const steppe::error& e) {
                rc = e.code() == steppe::errc::exists ? 1 : 3;
            }
            ::_exit(rc);
        }
        children.push_back(pid);
    }
    std::multiset<int> results;
    for (pid_t pid : children) {
        int status = 0;
        ::waitpid(pid, &status, 0);
        results.insert(WIFEXITED(status) ? WEXITSTATUS(status) : 128);
    }
    EXPECT_EQ(results, (std::multiset<int>{0, 1}));
    auto s = steppe::store::open(path, opts(true));
    EXPECT_EQ(count_parts(s), 1) << "one creation, not two";
}

// ---- No files left behind -----------------------------------------------------------

TEST_F(OneWriter, FailedOpensLeaveNoFiles) {
    steppe::open_options no_create = opts();
    no_create.create = false;
    EXPECT_EQ(open_error(path, no_create).code(), steppe::errc::not_found);
    EXPECT_EQ(open_error(path, opts(true)).code(), steppe::errc::not_found);
    EXPECT_TRUE(files_in(dir.dir()).empty());

    { std::ofstream f(path); f << "name,part\nbolt,17\n"; }
    EXPECT_EQ(open_error(path).code(), steppe::errc::version);
    EXPECT_EQ(open_error(path, opts(true)).code(), steppe::errc::version);
    EXPECT_EQ(files_in(dir.dir()), std::set<std::string>{"s.db"});

    fs::remove(path);
    steppe::open_options keep_log = opts();
    keep_log.checkpoint_on_close = false;
    { auto s = steppe::store::open(path, keep_log); add_parts(s, 1); }
    fs::remove(path + "-wal");
    fs::remove(path + "-shm");  // the reader table the writer made: the refused open below makes none
    EXPECT_EQ(open_error(path).code(), steppe::errc::corrupt);  // a missing log that held a commit: refused, nothing made
    EXPECT_EQ(files_in(dir.dir()), std::set<std::string>{"s.db"});
}

// A failure at any step of an open that creates the store leaves nothing:
// before the store is complete (the creation's writes and syncs) and after
// it (the reader table, the checkpoint at open), when the open removes the
// store it made. (That store was left before, complete, and opened.)
TEST_F(OneWriter, CreationFailingAtAnyStepLeavesNoFiles) {
    long failures = 0;
    for (long n = 0;; ++n) {
        steppe::test::fault_env env;
        steppe::storage::options o;
        o.io = &env;
        env.fail_after(n, ENOSPC);
        try {
            steppe::storage::storage::open(path, o);
        } catch (const steppe::error& e) {
            EXPECT_EQ(e.code(), steppe::errc::no_space) << e.what();
            EXPECT_TRUE(files_in(dir.dir()).empty()) << "after failing call " << n << ": " << e.what();
            for (const auto& f : files_in(dir.dir())) fs::remove(dir.path(f));
            ++failures;
            continue;
        }
        break;
    }
    EXPECT_GE(failures, 8) << "creation writes and syncs the new file and the log; the checkpoint at open writes";
}

// The engines' own opens fail after the storage made the store: options
// only checked against the store's contents, or memory the engine cannot
// reserve. Such an open left a new store's files behind.
TEST_F(OneWriter, AnEngineOpenFailingAfterTheStoreWasMadeLeavesNoFiles) {
    steppe::open_options too_small;
    too_small.address_space_limit = 1;
    auto e = open_error(path, too_small);
    EXPECT_EQ(e.code(), steppe::errc::invalid_argument) << e.what();
    EXPECT_TRUE(files_in(dir.dir()).empty()) << "page engine: " << e.what();

    steppe::objects::options cannot_evict;
    cannot_evict.eviction = steppe::objects::options::eviction_policy::total;
    cannot_evict.swizzle = steppe::objects::swizzling::eager;
    try {
        steppe::objects::store::open(path, cannot_evict);
        ADD_FAILURE() << "eviction total with eager swizzling was accepted";
    } catch (const steppe::error& oe) {
        EXPECT_EQ(oe.code(), steppe::errc::invalid_argument) << oe.what();
    }
    EXPECT_TRUE(files_in(dir.dir()).empty()) << "object engine";

    {  // a store that was there is never removed by a failed open
        auto s = steppe::store::open(path, opts());
        add_parts(s, 3);
    }
    EXPECT_EQ(open_error(path, too_small).code(), steppe::errc::invalid_argument);
    auto s = steppe::store::open(path, opts());
    EXPECT_EQ(count_parts(s), 3);
}

// A store opened by a relative name in a program that changes directory
// afterwards: its close removed NAME-lock from the new directory (none
// there) and left the real one behind.
TEST_F(OneWriter, AStoreOpenedByARelativeNameKeepsItsFilesAfterTheProgramChangesDirectory) {
    const fs::path start = fs::current_path();
    fs::current_path(dir.dir());
    {
        auto s = steppe::store::open("s.db", opts());
        fs::current_path(start);
        add_parts(s, 4);
        EXPECT_TRUE(fs::exists(path + "-lock")) << "held while open";
    }
    fs::current_path(start);
    EXPECT_FALSE(fs::exists(path + "-lock")) << "the close removed the store's own lock file";
    auto s = steppe::store::open(path, opts());
    EXPECT_EQ(count_parts(s), 4);
}

// A name with room for NAME-lock and NAME-wal but not for NAME-shm-new (the
// longest name a writable open gives a file) failed there, after the store
// and its log were made, and every writable open after it the same way.
TEST_F(OneWriter, AStoreNameWithNoRoomForItsLongestSuffixIsRefusedAndMakesNothing) {
    const long name_max = ::pathconf(dir.dir().c_str(), _PC_NAME_MAX);
    ASSERT_GT(name_max, 16);
    for (long bytes : {name_max - 7, name_max - 5}) {
        const std::string store = dir.path(std::string(static_cast<std::size_t>(bytes), 'x'));
        auto e = open_error(store);
        EXPECT_EQ(e.code(), steppe::errc::invalid_argument) << e.what();
        EXPECT_CONTAINS(e.what(), "at most " + std::to_string(name_max - 8) + " bytes");
        EXPECT_TRUE(files_in(dir.dir()).empty()) << "a " << bytes << "-byte name";
        EXPECT_EQ(open_error(store, opts(true)).code(), steppe::errc::not_found) << "a reader makes nothing";
    }
    const std::string longest = dir.path(std::string(static_cast<std::size_t>(name_max - 8), 'x'));
    {
        auto s = steppe::store::open(longest, opts());
        add_parts(s, 2);
    }
    auto s = steppe::store::open(longest, opts());
    EXPECT_EQ(count_parts(s), 2);
}

TEST_F(OneWriter, ReadOnlyCommandsCreateNoFiles) {
    { std::ofstream f(path); f << "not a store\n"; }
    for (const char* command : {"info", "check", "roots", "stats"}) {
        auto r = steppe::test::run_cli(std::string(command) + " " + path);
        EXPECT_NE(r.exit_code, 0) << command;
        EXPECT_EQ(files_in(dir.dir()), std::set<std::string>{"s.db"}) << command << ": " << r.out;
        r = steppe::test::run_cli(std::string(command) + " " + dir.path("missing.db"));
        EXPECT_EQ(r.exit_code, 2) << command;
        EXPECT_EQ(files_in(dir.dir()), std::set<std::string>{"s.db"}) << command << ": " << r.out;
    }
}

}  // namespace
