#include "support/temp_dir.hpp"

#include <stdlib.h>

#include <stdexcept>

namespace steppe::test {

temp_dir::temp_dir() {
    auto base = std::filesystem::temp_directory_path() / "steppe-test-XXXXXX";
    std::string templ = base.string();
    if (!::mkdtemp(templ.data())) throw std::runtime_error("mkdtemp failed for " + templ);
    dir_ = templ;
}

temp_dir::~temp_dir() {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
}

}  // namespace steppe::test
