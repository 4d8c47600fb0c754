// The page engine's committed state is one value: rollback() restores all of
// it, the vtable table's chain of system pages included. A commit that
// fails after the vtable blob took new pages (the log write fails: the file
// size limit is hit) and a rollback must leave no trace: the pages the failed
// commit took are free again, and no later commit writes the blob over
// objects the heap put on them, nor objects over the blob.
#include <gtest/gtest.h>
#include <steppe/steppe.hpp>
#include <sys/resource.h>

#include <csignal>
#include <filesystem>
#include <utility>

#include "support/store_fixture.hpp"

namespace engine_rollback_test {

struct Base {
    virtual ~Base() = default;
    virtual long id() const { return -1; }
    Base* next = nullptr;
    long value = 0;
    STEPPE_FIELDS(next, value)
};

// Each class its own vtable symbol (about 30 bytes in the vtable blob), so
// 300 of them need more than one page of it.
template <int N>
struct Poly : Base {
    long id() const override { return own; }
    long own = N;
    STEPPE_BASES(Base)
    STEPPE_FIELDS(own)
};

// About a page each: a few of them take whatever free pages the heap has.
struct Filler {
    long words[500];
    STEPPE_FIELDS(words)
};

struct Holder {
    Base* first = nullptr;
    STEPPE_FIELDS(first)
};

constexpr int kClasses = 300;

template <int... N>
Base* make_all(steppe::store& s, std::integer_sequence<int, N...>) {
    Base* head = nullptr;
    ((head = [&] {
         Base* b = s.make<Poly<N>>();
         b->value = 1000 + N;
         b->next = head;
         return b;
     }()),
     ...);
    return head;
}

Base* make_all(steppe::store& s) { return make_all(s, std::make_integer_sequence<int, kClasses>{}); }

// Walks the list make_all built: every object of the right class and value.
void expect_all(steppe::store& s) {
    Holder* h = s.find_root<Holder>("all");
    ASSERT_NE(h, nullptr);
    int n = kClasses;
    for (Base* b = h->first; b; b = b->next) {
        --n;
        ASSERT_EQ(b->id(), n);
        ASSERT_EQ(b->value, 1000 + n);
    }
    EXPECT_EQ(n, 0);
}

// Lowers the file size limit (writes past it fail with EFBIG instead of
// raising SIGXFSZ) for its lifetime.
class file_size_limit {
public:
    explicit file_size_limit(rlim_t bytes) {
        old_handler_ = std::signal(SIGXFSZ, SIG_IGN);
        ::getrlimit(RLIMIT_FSIZE, &old_);
        rlimit lower = old_;
        lower.rlim_cur = bytes;
        ::setrlimit(RLIMIT_FSIZE, &lower);
    }
    ~file_size_limit() {
        ::setrlimit(RLIMIT_FSIZE, &old_);
        std::signal(SIGXFSZ, old_handler_);
    }
    file_size_limit(const file_size_limit&) = delete;
    file_size_limit& operator=(const file_size_limit&) = delete;

private:
    rlimit old_{};
    void (*old_handler_)(int) = nullptr;
};

}  // namespace engine_rollback_test

using namespace engine_rollback_test;

class EngineRollbackTest : public steppe::test::store_fixture {};

TEST_P(EngineRollbackTest, RollbackAfterACommitThatGrewTheVtableChainFailedRestoresIt) {
    {
        auto s = open();
        s.root<Holder>("all");
        s.commit();
    }  // a clean close checkpoints: the log is empty again
    // Whole pages logged, so the commit's log write (some 300 pages) runs
    // past the largest file.
    auto s = open([](steppe::open_options& o) { o.log_diffs = false; });
    {
        std::uintmax_t largest = 0;
        for (const auto& f : std::filesystem::directory_iterator(dir.path("")))
            largest = std::max(largest, f.file_size());
        file_size_limit limit(largest + 4096);
        s.find_root<Holder>("all")->first = make_all(s);
        EXPECT_THROW(s.commit(), steppe::error);
    }
    s.rollback();
    EXPECT_EQ(s.find_root<Holder>("all")->first, nullptr);
    EXPECT_TRUE(s.check().empty());
    // The same objects again: the heap hands out the pages the failed commit
    // took for the vtable blob, as data pages this time.
    s.find_root<Holder>("all")->first = make_all(s);
    s.commit();
    // Pages of their own, which must not be the vtable blob's.
    for (int i = 0; i < 16; ++i) s.make<Filler>()->words[0] = i;
    s.commit();
    EXPECT_TRUE(s.check().empty());
    expect_all(s);
    s.close();
    in_fresh_process([](steppe::store& again) {
        EXPECT_TRUE(again.check().empty());
        expect_all(again);
    });
}

STEPPE_BOTH_BACKENDS(EngineRollbackTest);
