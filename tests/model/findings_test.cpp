// Engine bugs the model test found, each as its shrunk reproducer written
// out against the public API. Findings 1-4 were fixed in f913b2b and are kept
// as regression tests; finding 7 is open (DISABLED_; the model test works
// around it unless STEPPE_EXPOSE_KNOWN_BUGS=1). Run it with
//   model_test --gtest_filter='ModelFindings.*' --gtest_also_run_disabled_tests
#include <gtest/gtest.h>
#include <steppe/steppe.hpp>

#include <cstdlib>

#include "model.hpp"
#include "support/temp_dir.hpp"

using steppe_model::Node;
using steppe_model::Wide;

namespace {

steppe::store open_store(const std::string& path) {
    steppe::open_options o;
    o.durable = false;
    return steppe::store::open(path, o);
}

// Finding 1. A destroyed object's pointer fields were committed unswizzled: commit
// unswizzled only the allocated chunks of a page (pager::unswizzle_into walks
// the chunk bitmap) but copied the whole page, so a freed chunk carried a raw
// virtual address of the old process into the file. When a later session
// reused the chunk, allocation marked it used first and the memset in
// pager::allocate faulted the page in; fill_page swizzled by the new bitmap,
// met the raw address, and ended the process ("cannot swizzle page N ...
// it holds a pointer beyond the end of the store", exit 71), while `steppe
// check` found nothing.
TEST(ModelFindings, ReusingAFreedChunkInALaterSessionWorks) {
    steppe::test::temp_dir dir;
    std::string path = dir.path("s.db");
    EXPECT_EXIT(
        {
            {
                auto s = open_store(path);
                Node* n1 = s.make<Node>(Node{1, 0, {}, 0, 1});
                s.make<Node>(Node{2, 0, {}, 0, 1});  // keeps the page in use
                s.commit();
                n1->link[0] = n1;  // any pointer left in the object
                s.destroy(n1);
                s.commit();
            }
            {
                auto s = open_store(path);
                if (!s.check().empty()) std::exit(3);
                s.make<Node>(Node{3, 0, {}, 0, 1});  // reuses n1's chunk (was fatal)
                s.commit();
            }
            std::exit(0);
        },
        ::testing::ExitedWithCode(0), "");
}

// Finding 2. store::check() says it checks the committed state, but it judged the
// committed roots against the live heap (src/store.cpp, check(): `const heap&
// h = pager_->allocator()`), so an uncommitted destroy of a committed root
// object was reported as "root 'r' points to N, which is not an allocated
// object".
TEST(ModelFindings, CheckWithUncommittedChangesJudgesTheCommittedState) {
    steppe::test::temp_dir dir;
    auto s = open_store(dir.path("s.db"));
    Node* n = s.root<Node>("r");
    s.commit();
    s.remove_root("r");
    s.destroy(n);
    auto findings = s.check();
    EXPECT_TRUE(findings.empty()) << findings[0];
}

// Finding 3. steppe.hpp promises that after rollback "pointers the program holds
// into the store stay valid addresses and show the committed contents". It
// did not for a committed object destroyed in the rolled-back transaction when the
// destroy freed its page: pager::take_new_and_freed_pages retired the page's
// virtual range, and pager::rollback did not bring it back, so the held
// pointer faulted (SIGSEGV with mprotect, SIGBUS with uffd).
TEST(ModelFindings, PointerHeldToAnObjectDestroyedThenRolledBackStaysValid) {
    steppe::test::temp_dir dir;
    std::string path = dir.path("s.db");
    EXPECT_EXIT(
        {
            auto s = open_store(path);
            Node* a = s.make_array<Node>(2);
            a[0].id = 1;
            s.commit();
            s.destroy(a, 2);  // the only chunk on its page: the page is freed
            s.rollback();
            std::exit(a[0].id == 1 ? 0 : 4);
        },
        ::testing::ExitedWithCode(0), "");
}

// Finding 7 (open). The fix of finding 3 keeps a freed page's range until the
// commit, but pager::take_new_and_freed_pages still retires the range of every
// page the heap hands out again, and a freed committed page is the first to be
// handed out: destroy, then any allocation of the same size class (or one that
// takes a whole page), then rollback, and the pointer held to the destroyed
// object is dead (SIGSEGV with mprotect, SIGBUS with uffd) although its object
// is back in the committed state. Shrunk from model seeds 25, 53, 132, 236, 267.
TEST(ModelFindings, PointerHeldToADestroyedObjectSurvivesRollbackEvenIfItsPageWasReused) {
    steppe::test::temp_dir dir;
    std::string path = dir.path("s.db");
    EXPECT_EXIT(
        {
            auto s = open_store(path);
            Node* n1 = s.make<Node>(Node{1, 0, {}, 0, 1});  // alone on its page
            s.commit();
            s.destroy(n1);                                // the page is free
            s.make<Node>(Node{2, 0, {}, 0, 1});           // and handed out again
            s.rollback();
            std::exit(n1->id == 1 ? 0 : 4);
        },
        ::testing::ExitedWithCode(0), "");
}

// Finding 4. A committed large object destroyed in a transaction, a page pointing
// to it first faulted in after the destroy, then rollback: the object could no
// longer be reached at all, even through its root. When the page was faulted
// in, pager::swizzle_word reserved a unit for the (then free) target page with
// unit_of() of the current heap, i.e. one page instead of the object's run.
// pager::rollback restored the heap but not the page map, so the root led to
// a one-page unit whose guard page sat where the object's second page should
// be: touching it was SIGBUS (uffd) / SIGSEGV (mprotect).
TEST(ModelFindings, LargeObjectDestroyedThenRolledBackIsWholeAgain) {
    steppe::test::temp_dir dir;
    std::string path = dir.path("s.db");
    {
        auto s = open_store(path);
        Node* n1 = s.make<Node>(Node{1, 0, {}, 0, 1});
        Wide* w = s.make<Wide>();
        w->fill[999] = 42;
        n1->link[0] = &w->head;
        s.set_root("wide", &w->head);
        s.commit();
    }
    EXPECT_EXIT(
        {
            auto s = open_store(path);
            Wide* w = reinterpret_cast<Wide*>(s.find_root<Node>("wide"));
            s.remove_root("wide");
            s.destroy(w);
            s.make<Node>();  // goes to n1's page: faulting it in swizzles n1->link[0]
            s.rollback();
            Wide* again = reinterpret_cast<Wide*>(s.find_root<Node>("wide"));
            std::exit(again->fill[999] == 42 ? 0 : 4);
        },
        ::testing::ExitedWithCode(0), "");
}

}  // namespace
