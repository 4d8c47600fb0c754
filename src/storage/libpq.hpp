// steppe::storage::libpq — the PostgreSQL client library, loaded the first
// time a store in PostgreSQL is opened (dlopen), not linked. A program that
// keeps its stores in files then neither needs libpq installed nor maps it
// and the two dozen libraries it brings (TLS, Kerberos, LDAP): linked, they
// cost every process about 2.8 ms to start with the page cache warm and 25
// ms or more cold, steppe's CLI included (docs/benchmarks.md, "Starting a
// process without libpq").
//
// Calls go through the table: libpq().PQexec(...). The header still comes
// from libpq-fe.h, so each pointer has libpq's own type. STEPPE_LIBPQ names
// another file to load (an install outside the loader's path).
#pragma once

#include <libpq-fe.h>

#define STEPPE_LIBPQ_FUNCTIONS(X)                                                                      \
    X(PQbackendPID) X(PQclear) X(PQconnectdb) X(PQconsumeInput) X(PQenterPipelineMode)               \
    X(PQerrorMessage) X(PQexec) X(PQexecParams) X(PQexitPipelineMode) X(PQfinish) X(PQfreemem)       \
    X(PQgetResult) X(PQgetisnull) X(PQgetlength) X(PQgetvalue) X(PQlibVersion) X(PQnotifies)         \
    X(PQntuples) X(PQpipelineSync) X(PQputCopyData) X(PQputCopyEnd) X(PQreset) X(PQresultErrorField) \
    X(PQresultErrorMessage) X(PQresultStatus) X(PQsendQuery) X(PQsendQueryParams)                    \
    X(PQsendQueryPrepared) X(PQsetNoticeProcessor) X(PQsetSingleRowMode) X(PQsocket) X(PQstatus)

namespace steppe::storage {

struct libpq_functions {
#define STEPPE_LIBPQ_POINTER(name) decltype(&::name) name = nullptr;
    STEPPE_LIBPQ_FUNCTIONS(STEPPE_LIBPQ_POINTER)
#undef STEPPE_LIBPQ_POINTER
};

// The table, libpq loaded on the first call (thread-safe; later calls are
// one load). Throws steppe::error (unsupported) when the library cannot be
// loaded, is not libpq, is older than 14 or lacks a function, naming the
// file and what to install; the next call tries again. As with any lazy
// initialization, a fork while another thread is inside the first call
// leaves the child's first call waiting for ever: open a store in
// PostgreSQL before forking, or fork before any thread opens one.
const libpq_functions& libpq();

// Whether this process has loaded libpq through libpq() (tests).
bool libpq_loaded() noexcept;

}  // namespace steppe::storage
