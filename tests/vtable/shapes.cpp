#include "shapes.hpp"

namespace geo {
double Circle::area() const { return 3 * r_ * r_; }
double Rect::area() const { return w_ * h_; }
}  // namespace geo
