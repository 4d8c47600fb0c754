// store::transaction(), the scope guard (issue 14, item 4): leaving the
// scope without commit rolls back, exception or not; a second live guard on
// a store is refused naming it; guards move, never copy, and die quietly
// with their store. Both fault backends.
#include <gtest/gtest.h>
#include <steppe/containers.hpp>
#include <steppe/steppe.hpp>

#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "support/store_fixture.hpp"

namespace {

static_assert(!std::is_copy_constructible_v<steppe::transaction>);
static_assert(!std::is_copy_assignable_v<steppe::transaction>);
static_assert(std::is_nothrow_move_constructible_v<steppe::transaction>);
static_assert(std::is_nothrow_move_assignable_v<steppe::transaction>);

struct Account {
    long balance;
    Account* partner;
};

class TransactionTest : public steppe::test::store_fixture {
protected:
    // Two accounts of 100 each, committed.
    static std::pair<Account*, Account*> accounts(steppe::store& s) {
        Account* a = s.root<Account>("a");
        Account* b = s.root<Account>("b");
        if (!a->partner) {
            *a = {100, b};
            *b = {100, a};
            s.commit();
        }
        return {a, b};
    }
    // Moves `amount` from a to b; throws halfway when the amount is too big,
    // after a has been debited: the half-done change a guard must undo.
    static void transfer(steppe::store& s, long amount) {
        auto tx = s.transaction();
        auto [a, b] = accounts(s);
        a->balance -= amount;
        s.root<steppe::vector<long>>("log")->push_back(amount);
        if (a->balance < 0) throw std::runtime_error("overdrawn");
        b->balance += amount;
        tx.commit();
    }
    void expect_balances(long a, long b) const {
        in_fresh_process([&](steppe::store& s) {
            auto [in_a, in_b] = accounts(s);
            EXPECT_EQ(in_a->balance, a);
            EXPECT_EQ(in_b->balance, b);
        });
    }
};

TEST_P(TransactionTest, CommittedInsideTheScopeIsDurable) {
    {
        auto s = open();
        transfer(s, 30);
    }
    expect_balances(70, 130);
}

TEST_P(TransactionTest, AnExceptionHalfwayRollsBackAndTheNextCommitStoresNothingOfIt) {
    {
        auto s = open();
        accounts(s);
        EXPECT_THROW(transfer(s, 500), std::runtime_error);
        auto [a, b] = accounts(s);
        EXPECT_EQ(a->balance, 100) << "the debit was rolled back";
        EXPECT_EQ(s.find_root<steppe::vector<long>>("log"), nullptr) << "the new root was rolled back";
        s.commit();  // what the caller might do next: nothing half done is in it
        transfer(s, 10);
    }
    expect_balances(90, 110);
}

TEST_P(TransactionTest, LeavingTheScopeWithoutCommitRollsBack) {
    auto s = open();
    auto [a, b] = accounts(s);
    const auto update = [&](bool give_up) {
        auto tx = s.transaction();
        a->balance = -1;
        b->partner = nullptr;
        if (give_up) return;  // an early way out of the scope
        tx.commit();
    };
    update(true);
    EXPECT_EQ(a->balance, 100);
    EXPECT_EQ(b->partner, a);
    update(false);
    EXPECT_EQ(a->balance, -1);
}

TEST_P(TransactionTest, ASecondGuardWhileOneIsLiveIsRefusedNamingTheStore) {
    auto s = open();
    auto [a, b] = accounts(s);
    auto tx = s.transaction();
    a->balance = 1;
    try {
        auto nested = s.transaction();
        FAIL() << "a second guard was given";
    } catch (const steppe::error& e) {
        EXPECT_EQ(e.code(), steppe::errc::invalid_argument);
        EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
        EXPECT_NE(std::string(e.what()).find("do not nest"), std::string::npos) << e.what();
    }
    EXPECT_TRUE(tx.active()) << "the refusal left the first guard alone";
    EXPECT_EQ(a->balance, 1) << "and its changes";
    tx.commit();
    auto next = s.transaction();  // once it has ended, a new one is fine
    EXPECT_TRUE(next.active());
}

TEST_P(TransactionTest, GuardsOfTwoStoresAreIndependent) {
    auto s = open();
    auto other = steppe::store::open(dir.path("other.db"), options());
    auto [a, b] = accounts(s);
    auto [c, d] = accounts(other);
    {
        auto tx = s.transaction();
        auto tx_other = other.transaction();
        a->balance = 1;
        c->balance = 2;
        tx_other.commit();
    }
    EXPECT_EQ(a->balance, 100);
    EXPECT_EQ(c->balance, 2);
}

steppe::transaction start(steppe::store& s, Account* a) {
    auto tx = s.transaction();
    a->balance = 7;
    return tx;
}

TEST_P(TransactionTest, AMovedGuardRollsBackOnceAndTheMovedFromOneIsInert) {
    auto s = open();
    auto [a, b] = accounts(s);
    {
        steppe::transaction tx = start(s, a);  // moved out of the function
        std::vector<steppe::transaction> held;
        held.push_back(std::move(tx));
        EXPECT_FALSE(tx.active());
        EXPECT_TRUE(held.back().active());
        EXPECT_THROW(tx.commit(), steppe::error);
        EXPECT_THROW(s.transaction(), steppe::error) << "the moved guard is still live";
        EXPECT_EQ(a->balance, 7);
    }
    EXPECT_EQ(a->balance, 100);
    auto tx = start(s, a);
    tx.commit();
    EXPECT_EQ(a->balance, 7);
}

TEST_P(TransactionTest, MoveAssignmentRollsBackTheGuardItReplaces) {
    auto s = open();
    auto other = steppe::store::open(dir.path("other.db"), options());
    auto [a, b] = accounts(s);
    auto [c, d] = accounts(other);
    auto tx = s.transaction();
    a->balance = 1;
    auto tx_other = other.transaction();
    c->balance = 2;
    tx = std::move(tx_other);
    EXPECT_EQ(a->balance, 100) << "s's guard was rolled back when replaced";
    EXPECT_NO_THROW(s.transaction().commit()) << "and s has no live guard";
    tx.commit();
    EXPECT_EQ(c->balance, 2);
    EXPECT_FALSE(tx.active());
    EXPECT_FALSE(tx_other.active());
}

TEST_P(TransactionTest, AFailedCommitLeavesTheGuardLiveAndTheScopeRollsBack) {
    auto s = open();
    auto [a, b] = accounts(s);
    Account on_stack{0, nullptr};
    {
        auto tx = s.transaction();
        a->balance = 5;
        a->partner = &on_stack;
        try {
            tx.commit();
            FAIL() << "a pointer to the stack was committed";
        } catch (const steppe::error& e) {
            EXPECT_EQ(e.code(), steppe::errc::transient_pointer) << e.what();
        }
        EXPECT_TRUE(tx.active());
    }
    EXPECT_EQ(a->balance, 100);
    EXPECT_EQ(a->partner, b);
}

TEST_P(TransactionTest, ExplicitRollbackEndsTheGuard) {
    auto s = open();
    auto [a, b] = accounts(s);
    auto tx = s.transaction();
    a->balance = 3;
    tx.rollback();
    EXPECT_FALSE(tx.active());
    EXPECT_EQ(a->balance, 100);
    a->balance = 4;  // after the guard ended: the store's transaction goes on
    EXPECT_THROW(tx.rollback(), steppe::error);
    EXPECT_THROW(tx.commit(), steppe::error);
    EXPECT_EQ(a->balance, 4);
    s.commit();
}

TEST_P(TransactionTest, ClosingTheStoreEndsTheGuard) {
    auto tx = [&] {
        auto s = open();
        auto [a, b] = accounts(s);
        auto guard = s.transaction();
        a->balance = 9;
        return guard;  // the store closes here, its change discarded
    }();
    EXPECT_FALSE(tx.active());
    EXPECT_THROW(tx.commit(), steppe::error);
    expect_balances(100, 100);
}

TEST_P(TransactionTest, AGuardOnAReadOnlyStoreRollsBackAndCommitIsRefused) {
    {
        auto s = open();
        accounts(s);
    }
    auto s = open([](steppe::open_options& o) { o.read_only = true; });
    auto tx = s.transaction();
    EXPECT_THROW(tx.commit(), steppe::error);
    EXPECT_TRUE(tx.active());
}

STEPPE_BOTH_BACKENDS(TransactionTest);

}  // namespace
