// A libpq connection for pg_store (pg_store.hpp): statements with text
// parameters, results as RAII handles, COPY in, and every failure turned
// into a steppe::error naming the server and what was being done. Not for
// signal context: only pg_store's own threads call it.
#pragma once

#include "storage/libpq.hpp"

#include <atomic>
#include <chrono>
#include <functional>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace steppe::storage {

class pg_result {
public:
    explicit pg_result(PGresult* r) noexcept : r_(r) {}
    int rows() const noexcept { return libpq().PQntuples(r_.get()); }
    bool is_null(int row, int col) const noexcept { return libpq().PQgetisnull(r_.get(), row, col); }
    // A column of a text-format result.
    std::string text(int row, int col) const { return {libpq().PQgetvalue(r_.get(), row, col), size(row, col)}; }
    std::int64_t integer(int row, int col) const;
    // A column of a binary-format result: its raw bytes.
    const char* bytes(int row, int col) const noexcept { return libpq().PQgetvalue(r_.get(), row, col); }
    std::size_t size(int row, int col) const noexcept { return std::size_t(libpq().PQgetlength(r_.get(), row, col)); }
    // A bigint or integer column of a binary-format result.
    std::int64_t binary_integer(int row, int col) const noexcept;

private:
    struct clear {
        void operator()(PGresult* r) const noexcept { libpq().PQclear(r); }
    };
    std::unique_ptr<PGresult, clear> r_;
};

class pg_connection {
public:
    // `conninfo` is what libpq takes; `shown` names the server in messages
    // (the store's URL without a password).
    pg_connection(const std::string& conninfo, std::string shown);
    ~pg_connection();
    pg_connection(const pg_connection&) = delete;
    pg_connection& operator=(const pg_connection&) = delete;

    // Runs one statement with text parameters ("$1"...). `what` says what it
    // was for, in the error. Throws io (server gone, statement failed),
    // no_space (the server's disk is full).
    pg_result exec(const char* what, const char* sql, std::initializer_list<std::string_view> params = {},
                   bool binary_result = false);
    // The same, without throwing: null when it failed (fail() says why).
    PGresult* try_exec(const char* sql, std::initializer_list<std::string_view> params, bool binary_result);
    // Two statements in one round trip (libpq's pipeline mode): `first`
    // without parameters, then `second` with `params`. Whether `first`
    // succeeded (if not, fail_last() says why and `second` did not run), and
    // `second`'s result, null when it failed or did not run.
    std::pair<bool, PGresult*> try_exec_pair(const char* first, const char* second,
                                             std::initializer_list<std::string_view> params, bool binary_result);
    // Several statements without parameters in one round trip (one
    // implicit transaction unless they say otherwise): the last one's
    // text-format result; null when one failed (fail_last() says why, and
    // failed_on_server() whether the server did). `completed`, if given,
    // gets how far it went: the statements that completed, all of them or
    // those before the one that failed.
    PGresult* try_exec_script(const std::string& sql, int* completed = nullptr);
    // A statement made by PREPARE, its binary-format rows handed to `row`
    // one at a time as they arrive (libpq's single-row mode): the caller
    // works on the first while the server still sends the rest. False when
    // it failed (fail_last() says why); the rows before the failure were
    // handed out.
    bool try_stream_prepared(const char* name, std::initializer_list<std::string_view> params,
                             const std::function<void(pg_result)>& row);
    // COPY ... FROM STDIN in text format: begin, any number of puts, end.
    void begin_copy(const char* what, const char* sql);
    void put_copy(const char* what, std::string_view data);
    void end_copy(const char* what);
    // The payload of the first notification on `channel` (LISTEN) whose
    // payload starts with `prefix`, waiting up to `timeout` for one; nullopt
    // when none came. Throws io when the connection is lost.
    std::optional<std::string> wait_for_notification(const char* what, std::string_view channel,
                                                     std::string_view prefix, std::chrono::milliseconds timeout);
    // Sends `sql` (no parameters) and returns at once: the next statement
    // on this connection first waits for it to end, and its outcome is
    // dropped. For work nobody waits on (the VACUUM after a bulk load);
    // false if it could not be sent.
    bool send_detached(const char* sql) noexcept;
    // A best-effort ROLLBACK after a failed statement inside a transaction.
    void rollback() noexcept;
    // Reconnects a connection the server dropped; false if it cannot.
    bool reconnect() noexcept;
    bool ok() const noexcept { return libpq().PQstatus(conn_) == CONNECTION_OK; }
    // Whether the last failure was the session's end (the server gone,
    // restarting or shutting down), not the statement's: reconnect then.
    bool lost() const noexcept;
    int backend_pid() const noexcept { return libpq().PQbackendPID(conn_); }
    std::string error() const { return libpq().PQerrorMessage(conn_); }
    const std::string& shown() const { return shown_; }
    // Statements (and COPY ends) sent since the connection was made: one
    // round trip each (the connection's own set-up is not counted).
    std::uint64_t round_trips() const noexcept { return round_trips_.load(std::memory_order_relaxed); }
    // Whether the last failed statement failed with this SQLSTATE.
    bool last_failed_with(const char* sqlstate) const noexcept;
    // Whether the server said why the last statement failed (an error with
    // a SQLSTATE), rather than the connection ending with nothing said.
    bool failed_on_server() const noexcept { return last_state() != nullptr; }
    // Throws what the last failed try_exec said, as exec would have.
    [[noreturn]] void fail_last(const char* what) const { fail(what, last_failure_.get()); }

private:
    [[noreturn]] void fail(const char* what, const PGresult* r) const;
    void settle() noexcept;  // waits for a detached statement to end, dropping its results
    const char* last_state() const noexcept;  // the last failure's SQLSTATE; null: none, or libpq's own

    struct clear {
        void operator()(PGresult* r) const noexcept { libpq().PQclear(r); }
    };
    PGconn* conn_;
    std::string shown_;
    std::unique_ptr<PGresult, clear> last_failure_;  // what the last failed statement said
    bool in_copy_ = false;
    bool detached_ = false;  // send_detached's statement may still run
    // Written by the thread that owns the connection, read by any (stats).
    std::atomic<std::uint64_t> round_trips_{0};
    void count_trip() noexcept { round_trips_.fetch_add(1, std::memory_order_relaxed); }
};

}  // namespace steppe::storage
