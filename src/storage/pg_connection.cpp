#include "storage/pg_connection.hpp"

#include <steppe/error.hpp>

#include <poll.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <exception>
#include <vector>

namespace steppe::storage {

namespace {
// Parameters as libpq takes them: NUL-terminated copies.
struct text_params {
    explicit text_params(std::initializer_list<std::string_view> params) : owned(params.begin(), params.end()) {
        for (const auto& v : owned) values.push_back(v.c_str());
    }
    int count() const { return int(values.size()); }
    std::vector<std::string> owned;
    std::vector<const char*> values;
};
}  // namespace

std::int64_t pg_result::integer(int row, int col) const { return std::stoll(text(row, col)); }

std::int64_t pg_result::binary_integer(int row, int col) const noexcept {
    const auto* p = reinterpret_cast<const unsigned char*>(bytes(row, col));
    std::uint64_t v = 0;
    for (std::size_t i = 0; i < size(row, col); ++i) v = v << 8 | p[i];  // network order
    if (size(row, col) == 4) return std::int32_t(std::uint32_t(v));
    return std::int64_t(v);
}

pg_connection::pg_connection(const std::string& conninfo, std::string shown)
    : conn_(libpq().PQconnectdb(conninfo.c_str())), shown_(std::move(shown)) {
    if (!conn_) throw steppe::error(errc::io, shown_ + ": no memory for a PostgreSQL connection");
    if (libpq().PQstatus(conn_) != CONNECTION_OK) {
        std::string why = libpq().PQerrorMessage(conn_);
        libpq().PQfinish(conn_);
        while (!why.empty() && why.back() == '\n') why.pop_back();
        throw steppe::error(errc::io, shown_ + ": cannot connect to the PostgreSQL server: " + why +
                                          " (is the server running, and does the URL name it?)");
    }
    // A library prints nothing of its own: the server's notices (a table
    // that exists already) are not the program's business.
    libpq().PQsetNoticeProcessor(conn_, [](void*, const char*) {}, nullptr);
}

pg_connection::~pg_connection() { libpq().PQfinish(conn_); }

void pg_connection::fail(const char* what, const PGresult* r) const {
    std::string why = r ? libpq().PQresultErrorMessage(r) : libpq().PQerrorMessage(conn_);
    while (!why.empty() && why.back() == '\n') why.pop_back();
    const char* state = r ? libpq().PQresultErrorField(r, PG_DIAG_SQLSTATE) : nullptr;
    errc code = errc::io;
    if (state && std::strncmp(state, "53", 2) == 0) code = errc::no_space;  // insufficient resources
    if (state && std::strncmp(state, "42501", 5) == 0) code = errc::permission;
    throw steppe::error(code, shown_ + ": " + what + ": " + why + (ok() ? "" : " (the connection to the server is lost)"));
}

PGresult* pg_connection::try_exec(const char* sql, std::initializer_list<std::string_view> params,
                                  bool binary_result) {
    settle();
    text_params p(params);
    count_trip();
    PGresult* r = libpq().PQexecParams(conn_, sql, p.count(), nullptr, p.values.data(), nullptr, nullptr, binary_result ? 1 : 0);
    ExecStatusType s = r ? libpq().PQresultStatus(r) : PGRES_FATAL_ERROR;
    if (s == PGRES_COMMAND_OK || s == PGRES_TUPLES_OK) return r;
    last_failure_.reset(r);
    return nullptr;
}

std::pair<bool, PGresult*> pg_connection::try_exec_pair(const char* first, const char* second,
                                                        std::initializer_list<std::string_view> params,
                                                        bool binary_result) {
    settle();
    text_params p(params);
    count_trip();
    last_failure_.reset();
    std::unique_ptr<PGresult, clear> results[2];
    bool sent = libpq().PQenterPipelineMode(conn_) == 1;
    if (sent)
        sent = libpq().PQsendQueryParams(conn_, first, 0, nullptr, nullptr, nullptr, nullptr, 0) == 1 &&
               libpq().PQsendQueryParams(conn_, second, p.count(), nullptr, p.values.data(), nullptr, nullptr,
                                 binary_result ? 1 : 0) == 1 &&
               libpq().PQpipelineSync(conn_) == 1;
    if (sent) {
        // Each statement's result, then a null that ends it; then the sync's.
        // A connection lost on the way answers null or a fatal result.
        for (auto& result : results) {
            result.reset(libpq().PQgetResult(conn_));
            if (!result) break;
            while (PGresult* extra = libpq().PQgetResult(conn_)) libpq().PQclear(extra);
        }
        while (PGresult* r = libpq().PQgetResult(conn_)) {
            const bool synced = libpq().PQresultStatus(r) == PGRES_PIPELINE_SYNC;
            libpq().PQclear(r);
            if (synced) break;
        }
    }
    auto ok = [](const PGresult* r) {
        return r && (libpq().PQresultStatus(r) == PGRES_COMMAND_OK || libpq().PQresultStatus(r) == PGRES_TUPLES_OK);
    };
    if (libpq().PQexitPipelineMode(conn_) != 1) {
        // Results still queued (a send that failed half way): no statement
        // could run on this session again, so it starts afresh, and neither
        // statement counts as done (a PREPARE is gone with the session).
        libpq().PQreset(conn_);
        last_failure_.reset();
        return {false, nullptr};
    }
    const bool first_ok = ok(results[0].get());
    if (!first_ok) last_failure_ = std::move(results[0]);
    if (!ok(results[1].get())) {
        if (first_ok) last_failure_ = std::move(results[1]);
        return {first_ok, nullptr};
    }
    return {first_ok, results[1].release()};
}

PGresult* pg_connection::try_exec_script(const std::string& sql, int* completed) {
    settle();
    count_trip();
    last_failure_.reset();
    int done = 0;
    std::unique_ptr<PGresult, clear> last;
    if (libpq().PQsendQuery(conn_, sql.c_str()) == 1) {  // else fail_last says PQerrorMessage
        while (PGresult* r = libpq().PQgetResult(conn_)) {
            const ExecStatusType s = libpq().PQresultStatus(r);
            if (last_failure_) {
                libpq().PQclear(r);  // after the first failure: what libpq adds (the socket closed) says less
            } else if (s == PGRES_COMMAND_OK || s == PGRES_TUPLES_OK) {
                ++done;
                last.reset(r);
            } else {
                last_failure_.reset(r);
            }
        }
    }
    if (completed) *completed = done;
    return last_failure_ || done == 0 ? nullptr : last.release();
}

bool pg_connection::try_stream_prepared(const char* name, std::initializer_list<std::string_view> params,
                                        const std::function<void(pg_result)>& row) {
    settle();
    text_params p(params);
    count_trip();
    last_failure_.reset();
    bool ended = false;
    if (libpq().PQsendQueryPrepared(conn_, name, p.count(), p.values.data(), nullptr, nullptr, 1) == 1) {
        // It fails only once results have come, which they have not; if it
        // did, the rows would come in one result, refused below.
        const bool one_by_one = libpq().PQsetSingleRowMode(conn_) == 1;
        std::exception_ptr thrown;
        while (PGresult* r = libpq().PQgetResult(conn_)) {
            const ExecStatusType s = libpq().PQresultStatus(r);
            if (last_failure_ || thrown) {
                libpq().PQclear(r);  // the rest is read to its end, so the connection can take the next statement
            } else if (s == PGRES_SINGLE_TUPLE) {
                try {
                    row(pg_result(r));
                } catch (...) {
                    thrown = std::current_exception();
                }
            } else if (s == PGRES_TUPLES_OK) {
                ended = one_by_one && libpq().PQntuples(r) == 0;  // the end of the rows, not the rows
                libpq().PQclear(r);
            } else {
                last_failure_.reset(r);
            }
        }
        if (thrown) std::rethrow_exception(thrown);
    }
    return ended && !last_failure_;
}

pg_result pg_connection::exec(const char* what, const char* sql, std::initializer_list<std::string_view> params,
                              bool binary_result) {
    if (PGresult* r = try_exec(sql, params, binary_result)) return pg_result(r);
    fail(what, last_failure_.get());
}

void pg_connection::begin_copy(const char* what, const char* sql) {
    settle();
    count_trip();
    last_failure_.reset(libpq().PQexec(conn_, sql));
    if (!last_failure_ || libpq().PQresultStatus(last_failure_.get()) != PGRES_COPY_IN) fail(what, last_failure_.get());
    in_copy_ = true;
}

void pg_connection::put_copy(const char* what, std::string_view data) {
    if (libpq().PQputCopyData(conn_, data.data(), int(data.size())) != 1) fail(what, nullptr);
}

void pg_connection::end_copy(const char* what) {
    in_copy_ = false;
    count_trip();
    if (libpq().PQputCopyEnd(conn_, nullptr) != 1) fail(what, nullptr);
    last_failure_.reset(libpq().PQgetResult(conn_));
    while (PGresult* extra = libpq().PQgetResult(conn_)) libpq().PQclear(extra);
    if (!last_failure_ || libpq().PQresultStatus(last_failure_.get()) != PGRES_COMMAND_OK) fail(what, last_failure_.get());
}

std::optional<std::string> pg_connection::wait_for_notification(const char* what, std::string_view channel,
                                                                std::string_view prefix,
                                                                std::chrono::milliseconds timeout) {
    settle();
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
        // What earlier statements brought in is queued already; then the socket.
        if (libpq().PQconsumeInput(conn_) != 1) fail(what, nullptr);
        while (PGnotify* n = libpq().PQnotifies(conn_)) {
            std::unique_ptr<PGnotify, decltype(libpq().PQfreemem)> hold(n, libpq().PQfreemem);
            std::string_view payload = n->extra;
            if (channel == n->relname && payload.starts_with(prefix)) return std::string(payload);
        }
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
        if (left.count() <= 0) return std::nullopt;
        pollfd socket{libpq().PQsocket(conn_), POLLIN, 0};
        if (socket.fd < 0) fail(what, nullptr);
        if (::poll(&socket, 1, int(std::min<std::int64_t>(left.count(), 1 << 30))) < 0 && errno != EINTR)
            throw steppe::error(errc::io, shown_ + ": " + what + ": poll on the server connection failed: " +
                                              std::strerror(errno));
    }
}

void pg_connection::rollback() noexcept {
    settle();
    if (in_copy_) {  // a COPY cut short: end it as failed first
        in_copy_ = false;
        if (libpq().PQputCopyEnd(conn_, "abandoned by steppe") == 1)
            while (PGresult* r = libpq().PQgetResult(conn_)) libpq().PQclear(r);
    }
    count_trip();
    if (PGresult* r = libpq().PQexec(conn_, "ROLLBACK")) libpq().PQclear(r);
}

bool pg_connection::lost() const noexcept {
    if (!ok()) return true;
    const char* state = last_state();
    // No SQLSTATE: libpq's own failure (the socket closed); 08: connection
    // exception; 57P0x: the server shutting down or starting.
    return !state || std::strncmp(state, "08", 2) == 0 || std::strncmp(state, "57P0", 4) == 0;
}

const char* pg_connection::last_state() const noexcept {
    return last_failure_ ? libpq().PQresultErrorField(last_failure_.get(), PG_DIAG_SQLSTATE) : nullptr;
}

bool pg_connection::last_failed_with(const char* sqlstate) const noexcept {
    const char* state = last_state();
    return state && std::strcmp(state, sqlstate) == 0;
}

bool pg_connection::reconnect() noexcept {
    detached_ = false;  // the reset drops it
    libpq().PQreset(conn_);
    return ok();
}

bool pg_connection::send_detached(const char* sql) noexcept {
    settle();
    count_trip();
    detached_ = libpq().PQsendQuery(conn_, sql) == 1;
    return detached_;
}

void pg_connection::settle() noexcept {
    if (!detached_) return;
    detached_ = false;
    while (PGresult* r = libpq().PQgetResult(conn_)) libpq().PQclear(r);
}

}  // namespace steppe::storage
