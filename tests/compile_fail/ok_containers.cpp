// Control: the containers of the aliases have layouts (must compile cleanly).
#include <steppe/containers.hpp>

struct Part { int id; Part* to[3]; };
const auto& l = steppe::types::layout_of<steppe::map<steppe::string, steppe::vector<Part*>>>();
const auto& u = steppe::types::layout_of<steppe::unordered_map<long, steppe::string>>();
