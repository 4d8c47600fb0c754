#!/bin/sh
# ThreadSanitizer run of the multi-threaded fault tests: all of
# tests/unit/vm_test (EightThreadsFaultTheSameAndDifferentPages under every
# backend/tracking pair, the cross-backend test, ...), the 8-thread cold
# traversal in store_test (EightThreadsTraverseFromAColdStart, both backends),
# the 4-thread walk under address-space reuse in reuse_test
# (ThreadsWalkingTogetherBetweenRoundsSeeEveryNode, both backends), and the
# eviction thread spilling under two writing threads in budget_test
# (TwoThreadsWritingTenTimesTheBudgetLoseNothing, uffd), the cooling stage
# in cooling_test (the eviction thread and the faulting thread cool and
# rewarm pages in one pool; uffd), and the
# two-thread tests of one_writer_test, the load-ahead thread (load_ahead_test), and the object engine's page_fault
# scheme, whose traps hand faults to a service thread (objects_test for
# page_fault + cards: its trap tests and a reopened graph walked through traps),
# and the heap's descriptors dropped while threads read them (heap_test's
# HeapDescriptors, and descriptor_paging_test: threads fault while the
# eviction thread and an allocating thread trim; uffd), and the PostgreSQL
# page store, whose faults wait on its fetch thread while commits, refreshes
# and the cache file's writes go on (pg_store_test, pg_cache_test,
# pg_attack_test, fetch_worth_test: the tests start their own server).
#
#   tests/tsan/run.sh            configure + build build/tsan, run, exit non-zero on a race
#   JOBS=2 tests/tsan/run.sh     parallel build jobs (default 2)
#
# Equivalent CMake preset (for CMakePresets.json, configurePresets):
#   { "name": "tsan", "inherits": "base",
#     "cacheVariables": { "CMAKE_BUILD_TYPE": "Debug",
#       "CMAKE_CXX_FLAGS": "-fsanitize=thread -fno-omit-frame-pointer",
#       "CMAKE_CXX_FLAGS_DEBUG": "-g1",
#       "CMAKE_EXE_LINKER_FLAGS": "-fsanitize=thread",
#       "CMAKE_SHARED_LINKER_FLAGS": "-fsanitize=thread",
#       "STEPPE_BUILD_BENCH": "OFF" } }
#
# TSan maps its shadow at fixed addresses; kernels with vm.mmap_rnd_bits > 28
# make it abort with "unexpected memory mapping": the script re-runs the
# tests under `setarch -R` (no ASLR) in that case.
set -eu
here=$(cd "$(dirname "$0")/../.." && pwd)
build=${BUILD_DIR:-$here/build/tsan}
jobs=${JOBS:-2}

cmake -S "$here" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Debug \
  -DCMAKE_CXX_FLAGS="-fsanitize=thread -fno-omit-frame-pointer" -DCMAKE_CXX_FLAGS_DEBUG=-g1 \
  -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=thread" -DCMAKE_SHARED_LINKER_FLAGS="-fsanitize=thread" \
  -DSTEPPE_BUILD_BENCH=OFF >/dev/null
cmake --build "$build" -j "$jobs" --target vm_test store_test reuse_test budget_test cooling_test one_writer_test load_ahead_test \
  objects_test_page_fault_cards heap_test descriptor_paging_test \
  pg_store_test pg_cache_test pg_attack_test fetch_worth_test steppe_cli

export TSAN_OPTIONS="${TSAN_OPTIONS:-halt_on_error=0 second_deadlock_stack=1 history_size=4} exitcode=66"
run() {
  echo "== $*"
  rc=0
  "$@" || rc=$?
  [ "$rc" -eq 0 ] && return 0
  if [ "$rc" -ne 66 ] && command -v setarch >/dev/null 2>&1; then
    echo "== retrying without ASLR (setarch -R)"
    rc=0
    setarch "$(uname -m)" -R "$@" || rc=$?
  fi
  return $rc
}
status=0
# MaxMapCountDeathTest exhausts vm.max_map_count on purpose, and TSan's own
# allocator then runs out of mappings ("allocator is out of memory"): skipped.
# A page held read-only (the *_protect variants, and the mprotect ones) is
# read while a writer thread sits in a fault on it: TSan records the store
# before the instruction faults and cannot see that the kernel's protection
# orders the two, so the held-page tests run only where pages are moved.
# EvictingCleanPages... copies pages the writer is writing, as a commit does
# (a copy that races a write is superseded by the next): left out.
run "$build/tests/vm_test" --gtest_filter='-MaxMapCountDeathTest.*:*Held*protect:*Held*mprotect:*Evicting*protect:*Evicting*mprotect:*EvictingClean*' || status=$?
run "$build/tests/store_test" --gtest_filter='*EightThreads*' || status=$?
run "$build/tests/reuse_test" --gtest_filter='*ThreadsWalkingTogether*' || status=$?
# The same holds for the eviction thread spilling a page under mprotect: it
# holds the page read-only and copies it while a writer thread sits in the
# fault its store took (seen in CI as a race in unswizzle_into): uffd only.
run "$build/tests/budget_test" --gtest_filter='*TwoThreadsWriting*/uffd' || status=$?
# (Its test of every tracking variant holds pages read-only too: left out.)
run "$build/tests/cooling_test" --gtest_filter='*/uffd:-*EveryTrackingVariant*' || status=$?
# Two threads racing to commit (one must be refused), and growing containers
# through steppe::allocator at once (make and destroy take turns).
# RootsOfTwoThreadsCommitting... is left out: one thread writes a new object
# while the other commits, which the threads contract does not allow (TSan
# duly sees commit read the page being written); it checks only that no
# root is lost to the refusal.
run "$build/tests/one_writer_test" --gtest_filter='*SecondThreadCommitting*:*ThreadsGrowingContainers*' || status=$?
# The load-ahead thread filling pages while threads touch them, and commits
# and rollbacks pausing it (the fork, death and refresh tests fork from a
# process whose loader runs, which TSan refuses: left out; so is the
# eviction under mprotect, as for budget_test above).
run "$build/tests/load_ahead_test" --gtest_filter='-*Fork*:*Damaged*:*Refreshed*:*LeaveMemory*/mprotect' || status=$?
run "$build/tests/heap_test" --gtest_filter='HeapDescriptors.*:-*EndsTheProcess*' || status=$?
# (The reader test forks its writer before the reader's threads start, so
# TSan follows it; the rollback test is one thread.)
run "$build/tests/descriptor_paging_test" \
  --gtest_filter='*WalkedByThreads/uffd:*AReaderKeeps*/uffd:*WritingInPlace*/uffd:*NewTypes*/uffd:*OpenKeepsOnly*/uffd:*ARefreshReads*/uffd' || status=$?
run "$build/tests/objects/objects_test_page_fault_cards" \
  --gtest_filter='*UnderPageFaultEachStoredReference*:*UnderPageFaultThreads*:*WhatARootReaches*:*RollbackRestores*' || status=$?
# Two tests fork a child that opens a store (and so starts a fetch thread)
# after the parent's fetch thread ran: TSan refuses threads started after a
# multi-threaded fork ("Dying"), not a race: left out.
run "$build/tests/pg_store_test" --gtest_filter='-*CollectionDropsWhatNoLiveReaderNeeds' || status=$?
run "$build/tests/pg_attack_test" --gtest_filter='-*ReadersKilledWhileRegisteredThenCollection' || status=$?
run "$build/tests/pg_cache_test" || status=$?
run "$build/tests/fetch_worth_test" || status=$?
[ $status -eq 0 ] && echo "tsan: no data race reported" || echo "tsan: FAILED (status $status; races are reported above as 'WARNING: ThreadSanitizer')"
exit $status
