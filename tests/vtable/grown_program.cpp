// The build of grown.hpp with the virtual functions added:
// `grown_program write CASE STORE` stores the case's object;
// `grown_program read CASE STORE` prints what its virtual calls return, or
// the error that refused the store (exit 3).
#include <cstdio>
#include <string>

#include "grown.hpp"

int main(int argc, char** argv) {
    if (argc != 4) return 2;
    const std::string how = argv[1];
    try {
        if (how == "write") grown::write(argv[2], argv[3]);
        if (how == "read") std::printf("%s\n", grown::read(argv[2], argv[3]).c_str());
        return 0;
    } catch (const steppe::error& e) {
        std::printf("refused (%d): %s\n", static_cast<int>(e.code()), e.what());
        return 3;
    }
}
