// steppe::migrate on object-engine stores (docs/design.md "Migration",
// docs/guarantees.md "Migration"), once per scheme, as two builds of one
// program meet one store: "program 1" (objects_migrate_v1, the old build of
// objects_migrate_model.hpp) builds a book of contacts and notes; this
// program, the new build, migrates it (fields added, one removed, one
// renamed, one retyped through a conversion function, a reference the
// function takes from the old object), then walks every object and
// reference against the model, here and in a fresh process: from unchanged
// types into converted objects (single ones and arrays), from converted
// objects to others and to each other. Then the dry run, collection, the
// refusals (files left byte for byte), and, in one scheme's build (the pass
// does not depend on the program's scheme), kill -9 at random instants and a
// power loss at each I/O call: the old store or the new one, whole.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/open_internal.hpp"
#include "objects_migrate_model.hpp"
#include "support/cli.hpp"
#include "support/expect_error.hpp"
#include "support/migration.hpp"
#include "support/power_loss.hpp"
#include "support/temp_dir.hpp"

namespace {

namespace fs = std::filesystem;
namespace so = steppe::objects;
using objapp::Book;
using objapp::Contact;
using objapp::Note;

so::options opts() {
    so::options o;
    o.durable = false;
    o.create = false;
    return o;
}

// Program 2's migration: phone -> mobile by name; the function retypes age
// (int -> long), fills visits from the dropped flags and takes `pinned`
// from the old note reference (an old oid, forwarded by the pass).
steppe::migration to_v2() {
    steppe::migration m;
    m.convert<Contact>("objapp::Contact").rename("phone", "mobile").with([](const steppe::old_object& old, Contact& c) {
        c.age = old.get<std::int32_t>("age");
        c.visits = old.get<std::int32_t>("flags") / 7;
        c.pinned = old.get<so::ref<Note>>("note");
    });
    return m;
}

// Every value and reference of the migrated book, as program 2 reads it.
void expect_v2(so::store& s) {
    auto book = s.find_root<Book>("book");
    ASSERT_TRUE(book);
    std::vector<const Contact*> all = objapp::contacts(*book);
    ASSERT_EQ(all.size(), static_cast<std::size_t>(objapp::contact_count));
    EXPECT_TRUE(book->last->friend_ == book->first) << "the ring closes";
    EXPECT_EQ(book->last.get(), all[objapp::ring_count - 1]) << "unchanged -> converted";
    for (int i = 0; i < objapp::contact_count; ++i) {
        const Contact& c = *all[static_cast<std::size_t>(i)];
        SCOPED_TRACE("contact " + std::to_string(i));
        EXPECT_STREQ(c.name, objapp::name_of(i).c_str()) << "carried by name";
        EXPECT_STREQ(c.mobile, objapp::phone_of(i).c_str()) << "renamed phone -> mobile";
        EXPECT_EQ(c.age, objapp::age_of(i)) << "retyped int -> long by the function";
        EXPECT_EQ(c.visits, i) << "from the dropped flags, by the function";
        EXPECT_EQ(c.score, 1.5) << "added: T{} gives the default member initializer";
        EXPECT_EQ(c.stars, 0) << "added: value-initialized";
        so::ref<Note> note = (*book->notes)[static_cast<std::size_t>(objapp::note_of(i))];
        EXPECT_TRUE(c.note == note) << "converted -> unchanged, carried";
        EXPECT_TRUE(c.pinned == note) << "a reference the function took from the old object";
        if (i >= objapp::ring_count) {
            const int k = i < objapp::ring_count + objapp::few_count ? i - objapp::ring_count
                                                                      : i - objapp::ring_count - objapp::few_count;
            EXPECT_EQ(c.friend_.get(), all[static_cast<std::size_t>(objapp::friend_of_element(k))])
                << "array element -> single converted object";
        }
    }
    for (int j = 0; j < objapp::note_count; ++j) {
        so::ref<Note> n = (*book->notes)[static_cast<std::size_t>(j)];
        EXPECT_STREQ(n->text, objapp::note_text(j).c_str());
        EXPECT_EQ(n->about.get(), all[static_cast<std::size_t>(objapp::about_of(j))]) << "unchanged -> converted";
    }
    EXPECT_EQ(s.check(), std::vector<std::string>{});
}

// Opened as objects are copied into memory and as they are used in their
// segments' pages.
void expect_v2_at(const std::string& path) {
    for (so::placement place : {so::placement::copy, so::placement::in_place}) {
        SCOPED_TRACE(so::to_string(place));
        so::options o = opts();
        o.place = place;
        auto s = so::store::open(path, o);
        expect_v2(s);
    }
}

std::uint64_t total(const std::vector<steppe::compact_report::by_type>& types, const std::string& type) {
    std::uint64_t n = 0;
    for (const auto& t : types) n += t.type == type ? t.objects : 0;
    return n;
}

class ObjectsMigrate : public steppe::test::migration_test {
protected:
    ObjectsMigrate() : migration_test(OBJECTS_MIGRATE_V1_PATH, "book.ods") {}
};

TEST_F(ObjectsMigrate, ProgramTwoMigratesProgramOnesStoreAndWalksEveryObjectAndReference) {
    // Before, the new program is refused.
    EXPECT_ERROR(steppe::errc::type_mismatch, "objapp::Contact", so::store::open(path, opts()));
    steppe::migrate_report r = steppe::migrate(path, to_v2());
    ASSERT_EQ(r.converted.size(), 1u);
    EXPECT_EQ(r.converted[0].from, "objapp::Contact");
    EXPECT_EQ(r.converted[0].to, "objapp::Contact");
    EXPECT_EQ(r.converted[0].objects, objapp::ring_count + 3u) << "the ring, two arrays, the garbage's array";
    EXPECT_EQ(r.converted[0].elements, objapp::contact_count + 2u);
    EXPECT_TRUE(r.compaction.freed.empty()) << "without collect every object is kept";
    EXPECT_EQ(r.compaction.bytes_after, fs::file_size(path));
    expect_v2_at(path);

    // A fresh process walks it, changes it and commits.
    ASSERT_TRUE(steppe::test::through_in_child([&] {
        auto s = so::store::open(path, opts());
        expect_v2(s);
        if (::testing::Test::HasFailure()) throw std::runtime_error("the walk failed");  // the child's own
        auto book = s.find_root<Book>("book");
        auto extra = s.make<Contact>();
        extra.mut()->age = 1L << 40;
        extra.mut()->friend_ = book->first;
        book.mut()->first = extra;
        book.mut()->last.mut()->friend_ = extra;
        s.commit();
    }));
    auto s = so::store::open(path, opts());
    auto book = s.find_root<Book>("book");
    EXPECT_EQ(book->first->age, 1L << 40);
    EXPECT_STREQ(book->first->friend_->name, objapp::name_of(0).c_str());
    EXPECT_EQ(s.check(), std::vector<std::string>{});
    s.close();
    EXPECT_NE(run_v1("verify " + path), 0) << "afterwards the old program is refused";
}

TEST_F(ObjectsMigrate, ADryRunReportsAndWritesNothing) {
    const std::size_t before = steppe::test::store_files_hash(path);
    steppe::migrate_report r = steppe::migrate(path, to_v2(), {.dry_run = true});
    ASSERT_EQ(r.converted.size(), 1u);
    EXPECT_EQ(r.converted[0].elements, objapp::contact_count + 2u);
    EXPECT_EQ(steppe::test::store_files_hash(path), before);
    EXPECT_EQ(steppe::test::compaction_leftovers(path), std::vector<std::string>{});
    EXPECT_EQ(run_v1("verify " + path), 0);
}

TEST_F(ObjectsMigrate, CollectFreesWhatNoRootReachesWhileConverting) {
    steppe::migrate_report r = steppe::migrate(path, to_v2(), {.collect = true});
    ASSERT_EQ(r.converted.size(), 1u);
    EXPECT_EQ(r.converted[0].elements, static_cast<std::uint64_t>(objapp::contact_count)) << "the garbage's two not";
    EXPECT_EQ(total(r.compaction.freed, "objapp::Note"), static_cast<std::uint64_t>(objapp::trash_count));
    EXPECT_EQ(total(r.compaction.freed, "objapp::Contact"), 1u) << "the garbage's array of two";
    EXPECT_EQ(total(r.compaction.freed, "objapp::Book"), 1u);
    EXPECT_LT(r.compaction.pages_after, r.compaction.pages_before);
    expect_v2_at(path);
    // The CLI reads the migrated store: sound, the new layout listed.
    steppe::test::cli_result check = steppe::test::run_cli("check " + path);
    EXPECT_EQ(check.exit_code, 0) << check.out;
}

TEST_F(ObjectsMigrate, AChangedFieldWithoutAConversionFunctionIsRefusedNamingTypeAndField) {
    steppe::migration m;
    m.convert<Contact>("objapp::Contact").rename("phone", "mobile");
    expect_refused(m, steppe::errc::type_mismatch,
                   {"type objapp::Contact", "'age' (int, 4 bytes)", "'age' (long", "conversion function"});
}

TEST_F(ObjectsMigrate, AGetterReadingTheWrongTypeIsRefusedNamingTheField) {
    steppe::migration m;
    m.convert<Contact>("objapp::Contact", [](const steppe::old_object& old, Contact& c) {
         c.age = old.get<long>("age");
     }).rename("phone", "mobile");
    expect_refused(m, steppe::errc::type_mismatch, {"field 'age'", "objapp::Contact", "not long"});
}

TEST_F(ObjectsMigrate, UnknownTypesAndFieldsAndRawPointersAreRefused) {
    steppe::migration unknown;
    unknown.convert<Contact>("Contact");
    expect_refused(unknown, steppe::errc::not_found, {"no type named Contact"});
    steppe::migration renamed;
    renamed.convert<Contact>("objapp::Contact", [](const steppe::old_object&, Contact&) {}).rename("fax", "mobile");
    expect_refused(renamed, steppe::errc::invalid_argument, {"no field 'fax'"});
    struct WithPointer {
        int* p;
    };
    steppe::migration pointer;
    pointer.convert<WithPointer>("objapp::Contact");
    expect_refused(pointer, steppe::errc::unsupported, {"raw pointer at offset 0", "steppe::objects::ref<T>"});
}

// In one process: a reference whose target type changed is a retyped field
// (the bytes are the same, what they name is not), and a type that refers to
// a type the migration renames must be converted too.
namespace retarget {
struct A {
    std::int64_t id;
};
struct B {
    std::int64_t id;
};
struct Holder {
    so::ref<A> to;
};
struct HolderOfB {
    so::ref<B> to;
};
struct Renamed {
    std::int64_t id;
};
}  // namespace retarget

TEST(ObjectsMigrateTargets, AReferenceToAnotherTypeIsRetypedAndARenamedTargetNeedsItsReferrersConverted) {
    steppe::test::temp_dir dir;
    const std::string path = dir.path("targets.ods");
    {
        so::options o;
        o.durable = false;
        auto s = so::store::open(path, o);
        auto h = s.root<retarget::Holder>("holder");
        h.mut()->to = s.make<retarget::A>(retarget::A{7});
        s.make<retarget::B>();  // B in the catalog
        s.set_root("b", s.make<retarget::B>(retarget::B{8}));
        s.commit();
    }
    const std::string holder = steppe::types::layout_of<retarget::Holder>().name;
    const std::string a = steppe::types::layout_of<retarget::A>().name;
    steppe::migration m;
    m.convert<retarget::HolderOfB>(holder);
    EXPECT_ERROR(steppe::errc::type_mismatch, "refers to " + a + " in the store", steppe::migrate(path, m));
    steppe::migration rename;
    rename.convert<retarget::Renamed>(a);
    EXPECT_ERROR(steppe::errc::type_mismatch, "type " + holder + " refers to " + a, steppe::migrate(path, rename));
    so::options o;
    o.create = false;
    auto s = so::store::open(path, o);
    EXPECT_EQ(s.find_root<retarget::Holder>("holder")->to->id, 7) << "the store as it was";
}

// Kill -9 and power loss during a migration: afterwards the store is program
// 1's, whole (objects_migrate_v1 verify), or program 2's, whole (expect_v2).
// One scheme's build runs them: the pass opens the store with its own scheme
// whatever the program's, so the others would repeat the same I/O.
class ObjectsMigrateKill : public ObjectsMigrate {
protected:
    void SetUp() override {
        if (so::detail::compiled_scheme != so::scheme{so::detection::fault_block, so::barrier::cards})
            GTEST_SKIP() << "run in the fault_block + cards build";
        ObjectsMigrate::SetUp();
        keep_original();
    }
    // true for the new store.
    bool expect_old_or_new(const std::string& after) {
        return migration_test::expect_old_or_new(after, [&] {
            auto s = so::store::open(path, opts());
            expect_v2(s);
        });
    }
    pid_t start_migration() {
        return steppe::test::fork_running([&] { steppe::migrate(path, to_v2(), {.collect = true}); });
    }
};

TEST_F(ObjectsMigrateKill, AKillAtAnyInstantLeavesTheOldStoreOrTheNewOne) {
    restore();
    auto began = std::chrono::steady_clock::now();
    int status = 0;
    ::waitpid(start_migration(), &status, 0);
    const auto span =
        std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - began).count();
    ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    int olds = 0, news = 0;
    steppe::test::kill_at_random_instants(
        10, span, [&] { restore(); }, [&] { return start_migration(); },
        [&](int i) { (expect_old_or_new("kill " + std::to_string(i)) ? news : olds)++; });
    std::printf("10 kills over %lld us: %d left the old store, %d the new one\n", static_cast<long long>(span), olds,
                news);
}

TEST_F(ObjectsMigrateKill, APowerLossAtEveryIoCallLeavesTheOldStoreOrTheNewOne) {
    long calls = steppe::test::power_loss_at_each_call(
        [&] { restore(); },
        [&](steppe::test::fault_env& io) { steppe::detail::migrate_with_env(path, to_v2(), {.collect = true}, &io); },
        [&](const std::string& what, bool through) {
            const bool now_new = expect_old_or_new(what);
            if (through) {
                EXPECT_TRUE(now_new) << what;
            }
        });
    EXPECT_GE(calls, 0);
    if (calls >= 0) std::printf("a power loss at each of the %ld I/O calls of a migration\n", calls);
}

}  // namespace
