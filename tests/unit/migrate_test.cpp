// steppe::migrate, as two builds of one program meet one store: "program 1"
// (migrate_v1, the old build of migrate_model.hpp) builds a book of linked
// contacts and notes; this program, the new build, migrates it (a field
// added, one removed, one renamed, one retyped through a conversion
// function), then opens it and checks every object and every pointer: from
// unchanged types into converted objects (at their start and inside a
// renamed field), from converted objects to others and to each other,
// across arrays small and large. Then the refusals (store left as it was),
// and kill -9 / power loss at every I/O call during a migration: old store
// or new, whole.
#include <gtest/gtest.h>
#include <signal.h>
#include <steppe/objects.hpp>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>

#include "engine/open_internal.hpp"
#include "migrate_model.hpp"
#include "support/expect_error.hpp"
#include "support/migration.hpp"
#include "support/pg_server.hpp"
#include "support/power_loss.hpp"
#include "support/temp_dir.hpp"

namespace {

namespace fs = std::filesystem;
using app::Book;
using app::Contact;
using app::Note;

// The migration of program 2: age retyped int -> long by the function.
steppe::migration to_v2() {
    steppe::migration m;
    m.convert<Contact>("app::Contact").rename("phone", "mobile").with([](const steppe::old_object& old, Contact& c) {
        c.age = old.get<int>("age");
    });
    return m;
}

// Every value and pointer of the migrated book, as program 2 reads it.
void expect_v2(steppe::store& s) {
    Book* b = s.find_root<Book>("book");
    ASSERT_NE(b, nullptr);
    std::vector<Contact*> all = app::contacts(*b);
    ASSERT_EQ(all[app::ring_count - 1]->friend_, b->first) << "the ring closes";
    for (int i = 0; i < static_cast<int>(all.size()); ++i) {
        const Contact& c = *all[i];
        SCOPED_TRACE("contact " + std::to_string(i));
        EXPECT_STREQ(c.name, app::name_of(i).c_str()) << "carried by name";
        EXPECT_STREQ(c.mobile, app::phone_of(i).c_str()) << "renamed phone -> mobile";
        EXPECT_EQ(c.age, app::age_of(i)) << "retyped int -> long by the function";
        EXPECT_EQ(c.score, 1.5) << "added: T{} gives the default member initializer";
        EXPECT_EQ(c.visits, 0) << "added: value-initialized";
        EXPECT_EQ(c.note, &b->notes[app::note_of(i)]) << "converted -> unchanged";
    }
    for (int k = 0; k < app::few_count; ++k) EXPECT_EQ(b->few[k].friend_, &b->many[k]) << "array -> array";
    for (int k = 0; k < app::many_count; ++k)
        EXPECT_EQ(b->many[k].friend_, all[k % app::ring_count]) << "array element -> single object";
    for (int j = 0; j < app::note_count; ++j) {
        EXPECT_STREQ(b->notes[j].text, app::note_text(j).c_str());
        EXPECT_EQ(b->notes[j].about, all[app::about_of(j)]) << "unchanged -> converted, note " << j;
    }
    EXPECT_EQ(b->where, b->few[app::where_index].mobile) << "interior pointer mapped into the renamed field";
    EXPECT_EQ(b->last_many, &b->many[app::many_count - 1]) << "pointer to a large array's last element";
    EXPECT_EQ(s.check(), std::vector<std::string>{});
}

class MigrateTest : public steppe::test::migration_test {
protected:
    MigrateTest() : migration_test(MIGRATE_V1_PATH, "book.db") {}
};

TEST_F(MigrateTest, ProgramTwoMigratesProgramOnesStoreAndReadsEveryObjectAndPointer) {
    // Before: the new program is refused.
    EXPECT_ERROR(steppe::errc::type_mismatch, "app::Contact", steppe::store::open(path, {.create = false}));
    const std::uint64_t bytes = fs::file_size(path) + (fs::exists(path + "-wal") ? fs::file_size(path + "-wal") : 0);
    steppe::migrate_report r = steppe::migrate(path, to_v2());
    ASSERT_EQ(r.converted.size(), 1u);
    EXPECT_EQ(r.converted[0].from, "app::Contact");
    EXPECT_EQ(r.converted[0].to, "app::Contact");
    EXPECT_EQ(r.converted[0].objects, app::ring_count + 2u) << "the ring's objects and the two arrays";
    EXPECT_EQ(r.converted[0].elements, app::ring_count + app::few_count + app::many_count + 0u)
        << "3 contacts of 64 bytes fill a 192-byte chunk exactly";
    EXPECT_EQ(r.compaction.bytes_before, bytes);
    EXPECT_EQ(r.compaction.bytes_after, fs::file_size(path));
    {
        auto s = steppe::store::open(path, {.create = false});
        expect_v2(s);
        // The store goes on working with the new type.
        Book* b = s.find_root<Book>("book");
        Contact* extra = s.make<Contact>();
        extra->friend_ = b->first;
        extra->age = 1L << 40;
        b->first = extra;
        s.commit();
    }
    {
        auto s = steppe::store::open(path, {.create = false});
        Book* b = s.find_root<Book>("book");
        EXPECT_EQ(b->first->age, 1L << 40);
        EXPECT_STREQ(b->first->friend_->name, app::name_of(0).c_str());
    }
    EXPECT_NE(run_v1("verify " + path), 0) << "afterwards the old program is refused";
}

TEST_F(MigrateTest, ADryRunReportsAndWritesNothing) {
    const std::size_t before = steppe::test::store_files_hash(path);
    steppe::migrate_report r = steppe::migrate(path, to_v2(), {.dry_run = true});
    ASSERT_EQ(r.converted.size(), 1u);
    EXPECT_EQ(r.converted[0].objects, app::ring_count + 2u);
    expect_untouched(before);
}

TEST_F(MigrateTest, CollectFreesWhatNoRootReachesWhileConverting) {
    steppe::migrate_report r = steppe::migrate(path, to_v2(), {.collect = true});
    std::uint64_t freed = 0;
    for (const auto& t : r.compaction.freed) freed += t.type == "app::Note" ? t.objects : 0;
    EXPECT_EQ(freed, app::ring_count / 4u) << "the garbage notes between the ring's contacts";
    auto s = steppe::store::open(path, {.create = false});
    expect_v2(s);
}

TEST_F(MigrateTest, AChangedFieldWithoutAConversionFunctionIsRefusedNamingTypeAndField) {
    steppe::migration m;
    m.convert<Contact>("app::Contact").rename("phone", "mobile");
    expect_refused(m, steppe::errc::type_mismatch,
                   {"type app::Contact", "'age' (int, 4 bytes)", "'age' (long, 8 bytes)", "conversion function"});
}

TEST_F(MigrateTest, AGetterReadingTheWrongTypeIsRefusedNamingTheField) {
    steppe::migration m;
    m.convert<Contact>("app::Contact", [](const steppe::old_object& old, Contact& c) { c.age = old.get<long>("age"); })
        .rename("phone", "mobile");
    expect_refused(m, steppe::errc::type_mismatch, {"field 'age'", "app::Contact", "not long"});
}

// Without the rename, phone is dropped (mobile is new): Book::where aims into it.
TEST_F(MigrateTest, APointerIntoADroppedFieldIsRefusedNamingTypeAndOffset) {
    steppe::migration m;
    m.convert<Contact>("app::Contact", [](const steppe::old_object& old, Contact& c) {
        c.age = old.get<int>(2);  // by index: name, phone, age
        std::memcpy(c.mobile, old.bytes("phone").data(), sizeof c.mobile);
    });
    expect_refused(m, steppe::errc::unsupported, {"offset 24 of a app::Contact", "'phone'"});
}

TEST_F(MigrateTest, UnknownTypesAndFieldsAreRefused) {
    steppe::migration unknown;
    unknown.convert<Contact>("Contact");
    expect_refused(unknown, steppe::errc::not_found, {"no type named Contact"});
    steppe::migration renamed;
    renamed.convert<Contact>("app::Contact", [](const steppe::old_object&, Contact&) {}).rename("fax", "mobile");
    expect_refused(renamed, steppe::errc::invalid_argument, {"no field 'fax'"});
    steppe::migration twice = to_v2();
    twice.convert<Contact>("app::Contact");
    expect_refused(twice, steppe::errc::invalid_argument, {"converted twice"});
}

// Fields without names (steppe::at<U>(offset)) are matched by position; the
// new type may have another name than the stored one.
namespace pos {
struct Old {
    int a, b;
    Old* next;
};
struct New {
    int a, b;
    New* next;
    long extra;
};
}  // namespace pos
}  // namespace
template<> struct steppe::describe<pos::Old> {
    static constexpr auto fields = steppe::fields(steppe::at<int>(0), steppe::at<int>(4), steppe::at<pos::Old*>(8));
};
template<> struct steppe::describe<pos::New> {
    static constexpr auto fields = steppe::fields(steppe::at<int>(0), steppe::at<int>(4), steppe::at<pos::New*>(8),
                                                  steppe::at<long>(16));
};
namespace {

TEST(MigratePositions, UnnamedFieldsAreCarriedByPositionIntoARenamedType) {
    steppe::test::temp_dir dir;
    const std::string path = dir.path("pos.db");
    {
        auto s = steppe::store::open(path);
        pos::Old* head = nullptr;
        for (int i = 0; i < 5; ++i) head = s.make<pos::Old>(pos::Old{i, i * i, head});
        s.set_root("list", head);
        s.commit();
    }
    steppe::migration m;
    m.convert<pos::New>(steppe::types::layout_of<pos::Old>().name);
    steppe::migrate_report r = steppe::migrate(path, m);
    ASSERT_EQ(r.converted.size(), 1u);
    EXPECT_EQ(r.converted[0].to, steppe::types::layout_of<pos::New>().name);
    auto s = steppe::store::open(path, {.create = false});
    int n = 4;
    for (pos::New* p = s.find_root<pos::New>("list"); p; p = p->next, --n) {
        EXPECT_EQ(p->a, n);
        EXPECT_EQ(p->b, n * n);
        EXPECT_EQ(p->extra, 0);
    }
    EXPECT_EQ(n, -1) << "all five, linked as before";
    EXPECT_EQ(s.check(), std::vector<std::string>{});
}

TEST_F(MigrateTest, AStoreAProgramHoldsIsLocked) {
    const std::string ready = dir.path("ready");
    pid_t holder = ::fork();
    ASSERT_GE(holder, 0);
    if (holder == 0) {
        ::execl(MIGRATE_V1_PATH, MIGRATE_V1_PATH, "hold", path.c_str(), ready.c_str(), static_cast<char*>(nullptr));
        ::_exit(127);
    }
    while (!fs::exists(ready)) ::usleep(1000);
    EXPECT_ERROR(steppe::errc::locked, "", steppe::migrate(path, to_v2()));
    ::kill(holder, SIGKILL);
    ::waitpid(holder, nullptr, 0);
    EXPECT_EQ(run_v1("verify " + path), 0);
}

// An object-engine store is migrated by its own engine (its tests are
// tests/objects/objects_migrate_test.cpp): this one has no app::Contact.
TEST(MigrateEngines, AnObjectEngineStoreIsPlannedByItsEngine) {
    steppe::test::temp_dir dir;
    const std::string path = dir.path("objects.db");
    {
        auto s = steppe::objects::store::open(path);
        s.commit();
    }
    EXPECT_ERROR(steppe::errc::not_found, "migration of " + path + ": the store has no type named app::Contact",
                 steppe::migrate(path, to_v2()));
}

// Kill -9 and power loss during a migration: afterwards the store is program
// 1's, whole (migrate_v1 verify), or program 2's, whole (expect_v2).
class MigrateKill : public MigrateTest {
protected:
    void SetUp() override {
        MigrateTest::SetUp();
        keep_original();
    }
    // true for the new store.
    bool expect_old_or_new(const std::string& after) {
        return migration_test::expect_old_or_new(after, [&] {
            auto s = steppe::store::open(path, {.create = false});
            expect_v2(s);
        });
    }
};

TEST_F(MigrateKill, AKillAtAnyInstantLeavesTheOldStoreOrTheNewOne) {
    auto start = [&] { return steppe::test::fork_running([&] { steppe::migrate(path, to_v2()); }); };
    int status = 0;
    restore();
    auto began = std::chrono::steady_clock::now();
    ::waitpid(start(), &status, 0);
    const auto span =
        std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - began).count();
    ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    int olds = 0, news = 0;
    steppe::test::kill_at_random_instants(20, span, [&] { restore(); }, start,
                                          [&](int i) { (expect_old_or_new("kill " + std::to_string(i)) ? news : olds)++; });
    std::printf("20 kills over %lld us: %d left the old store, %d the new one\n", static_cast<long long>(span), olds,
                news);
}

TEST_F(MigrateKill, APowerLossAtEveryIoCallLeavesTheOldStoreOrTheNewOne) {
    long calls = steppe::test::power_loss_at_each_call(
        [&] { restore(); },
        [&](steppe::test::fault_env& io) { steppe::detail::migrate_with_env(path, to_v2(), {}, &io); },
        [&](const std::string& what, bool through) {
            const bool now_new = expect_old_or_new(what);
            if (through) {
                EXPECT_TRUE(now_new) << what;
            }
        });
    if (calls >= 0) std::printf("a power loss at each of the %ld I/O calls of a migration\n", calls);
}

// A store in PostgreSQL migrates as one commit (storage::commit_rewrite,
// P7): program 1 builds it there, this program migrates it and reads every
// object and pointer; program 1 is then refused by the new types.
TEST(MigratePostgres, AStoreInPostgreSQLMigratesAsOneCommit) {
    std::string why;
    steppe::test::pg_server* server = steppe::test::pg_server::get(why);
    if (!server) GTEST_SKIP() << "no PostgreSQL server here: " << why;
    const std::string url = server->url("migrate_postgres");
    const std::string v1 = MIGRATE_V1_PATH;
    ASSERT_EQ(steppe::test::run_program(v1 + " write '" + url + "'"), 0);
    EXPECT_ERROR(steppe::errc::type_mismatch, "app::Contact", steppe::store::open(url, {.create = false}));
    steppe::migrate_report r = steppe::migrate(url, to_v2());
    EXPECT_GT(r.compaction.pages_after, 0u);
    {
        steppe::store s = steppe::store::open(url, {.create = false});
        expect_v2(s);
    }
    EXPECT_EQ(steppe::test::run_program(v1 + " verify '" + url + "'"), 3) << "program 1 meets the new types";
}

}  // namespace
