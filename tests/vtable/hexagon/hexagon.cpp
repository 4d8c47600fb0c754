#include "../gallery.hpp"

namespace geo {
Hexagon::Hexagon(double s) : side(s) { std::strcpy(label, "hexagon"); }
double Hexagon::area() const { return 2.5 * side * side; }
}  // namespace geo
